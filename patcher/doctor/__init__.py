"""`rlpatch doctor`: check the Python that really runs verl, before a collection run.

Owns the target-interpreter resolution (`--python`, a launcher prefix, the launcher of the verl
command in `--script`, verl's `runtime_env.py_executable`), the two-stage probe that runs inside
that interpreter (stdlib metadata first, then the real `from msprobe.pytorch import
PrecisionDebugger` in its own subprocess with a timeout), the verdicts and `--install`. The patch
state and the script's lint verdicts come from the `rlpatch verify` and `rlpatch lint` commands
(through the CLI), never from importing those wings; it reads scripts through the front end.
`--ray ADDRESS` hands over to the cluster wing (its options, and its driver imported only with
`--ray`), which runs `rlpatch doctor` on every node through the CLI and never imports this wing.
"""

MAY_IMPORT: tuple[str, ...] = ("errors", "cli", "registry", "upstream", "shell", "cluster")
