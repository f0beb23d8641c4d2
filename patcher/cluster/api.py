"""What other wings use of the cluster wing: the `--ray` options, the per-node command runner, and
a session that runs an rlpatch function pinned on chosen nodes (`dumps compare --ray`).

`run_on_cluster(ctx)` runs the command on each node through the command line the entry point left
in `ctx.meta[COMMAND_LINE]` (its in-process runner), so that the cluster never imports the entry.

Importing this module does not import ray: `run_on_cluster` and `open_session` import it when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlpatch.cluster.options import COMMAND_LINE, DEFAULT_TIMEOUT_S, ray_options
from rlpatch.cluster.session import NodeAnswer, NodeInfo, Session, open_session

if TYPE_CHECKING:
    import click

__all__ = ["COMMAND_LINE", "DEFAULT_TIMEOUT_S", "NodeAnswer", "NodeInfo", "Session", "open_session", "ray_options",
           "run_on_cluster"]


def run_on_cluster(ctx: click.Context) -> int:
    """Run the command of `ctx` on every alive node (the driver loads only with --ray: the patch and
    doctor paths import this module for the options alone)."""
    from rlpatch.cluster.driver import run_on_cluster as run

    return run(ctx)
