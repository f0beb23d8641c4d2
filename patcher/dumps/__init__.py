"""`rlpatch dumps`: from a finished collection to the comparison (`check`, `pair`, `compare`, `report`).

Owns reading every msprobe output layout without loading tensors (`dump.json` is size-checked and
validated, never kept), the request-id correlation between `update_actor_log.jsonl` and
`dispatch_log.jsonl`, the exact `msprobe compare` argv, running it in the target interpreter, the
parsed CSV summary and the HTML report. msprobe and the plotting library are imported only by
`compare`, inside the target interpreter or the report writer. It reads a launch script (`check
--script`) only through the front end, finds the msprobe configs it names through the msprobe config
wing's api, and may import the upstream facts. `compare --ray ADDRESS`
runs each pair's compare on the node whose disk holds it through the cluster wing's session
(`remote.py` on the driver, `remote_node.py` on the nodes). `compare` keeps each pair's results in
its `-o` (`stored.py`): a pair whose inputs are unchanged is not compared again, and `dumps report OUT`
renders the HTML report from them. Each command's work is in `api` (`check_dumps`, `pair_dumps`,
`compare_dumps`, `report_dumps`); `cli` only builds their options and prints.
"""

MAY_IMPORT: tuple[str, ...] = ("errors", "output", "upstream", "shell", "cluster", "msprobe_config")
