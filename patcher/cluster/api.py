"""What other wings use of the cluster wing: the `--ray` options, the per-node command runner, and
a session that runs an rlpatch function pinned on chosen nodes (`dumps compare --ray`).

Importing this module does not import ray: `run_on_cluster` and `open_session` import it when called.
"""

from __future__ import annotations

from rlpatch.cluster.driver import run_on_cluster
from rlpatch.cluster.options import DEFAULT_TIMEOUT_S, ray_options
from rlpatch.cluster.session import NodeAnswer, NodeInfo, Session, open_session

__all__ = ["DEFAULT_TIMEOUT_S", "NodeAnswer", "NodeInfo", "Session", "open_session", "ray_options",
           "run_on_cluster"]
