"""`--ray ADDRESS`: run `doctor`, `verify`, `status`, `apply` or `revert` once on every node of a Ray cluster.

Owns the connection to the cluster, the list of alive and dead nodes (`ray.nodes()`), one pinned
zero-CPU task per node (`NodeAffinitySchedulingStrategy(soft=False)`) that runs the same command the
local one runs, through the CLI, with rlpatch shipped by `runtime_env` `py_modules`, and the
per-node report with its summary of the nodes that differ. ray is an extra (`rlpatch[ray]`) and is
imported only here, only with `--ray`; the lint and patch paths never import it.
"""

MAY_IMPORT: tuple[str, ...] = ("errors", "output", "upstream")
