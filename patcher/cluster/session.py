"""A driver session on a Ray cluster that runs one function per node, pinned there, and says who ran it.

For commands whose work is not "the same command on every node" (`dumps compare --ray`: each node
compares the pairs whose files its own disk holds). The function must live in rlpatch (it is
pickled by reference and imported on the node from the rlpatch shipped with `runtime_env`
`py_modules`); each node gets its own arguments. The tasks are pinned, zero-CPU and never retried,
as for the other `--ray` commands; a node that does not answer within the timeout is cancelled and
reported, never waited for.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NodeInfo:
    """One node of `ray.nodes()`."""

    node_id: str
    hostname: str | None
    ip: str | None

    @classmethod
    def from_ray(cls, node: Mapping[str, Any]) -> NodeInfo:
        return cls(str(node["NodeID"]), node.get("NodeManagerHostname"), node.get("NodeManagerAddress"))

    @property
    def label(self) -> str:
        return f"{self.node_id[:12]} ({self.hostname or '?'}, {self.ip or '?'})"

    def as_json(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "hostname": self.hostname, "ip": self.ip}


@dataclass
class NodeAnswer:
    """What one node's task gave back: `ok` with its value, or `error`/`timeout` with why."""

    node: NodeInfo
    status: str  # ok | error | timeout
    value: Any = None
    error: str | None = None
    returned_bytes: int = 0  # the pickled size of what came back: summaries only, never tensors
    identity: dict[str, str] = field(default_factory=dict)  # hostname, ip, node id, interpreter, versions


@dataclass
class Session:
    """A connected driver: the cluster's address and nodes, and a way to run a function on some of them."""

    address: str
    alive: list[NodeInfo]
    dead: list[NodeInfo]
    ray: Any
    label: str = "rlpatch --ray"  # the progress lines' label (a batch log's stderr, not with quiet)
    quiet: bool = False

    def run(self, function: Callable[..., Any], arguments: Mapping[str, Sequence[Any]],
            timeout: float) -> dict[str, NodeAnswer]:
        """`function(*arguments[node_id])` on each named node, pinned there; node id -> its answer."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from rlpatch.cluster.node import call_pinned

        task = self.ray.remote(call_pinned)
        nodes = {node.node_id: node for node in self.alive if node.node_id in arguments}
        refs = {}
        for node_id, node_arguments in arguments.items():
            if node_id not in nodes:
                continue
            strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            refs[node_id] = task.options(scheduling_strategy=strategy, num_cpus=0, max_retries=0).remote(
                function, tuple(node_arguments))
        from rlpatch.cluster.driver import wait_all

        done = wait_all(self.ray, list(refs.values()), timeout, self.label, self.quiet)
        answers = {node_id: self._answer(nodes[node_id], ref, ref in done, timeout) for node_id, ref in refs.items()}
        for node_id in arguments:
            if node_id not in nodes:
                info = next((node for node in self.dead if node.node_id == node_id), NodeInfo(node_id, None, None))
                answers[node_id] = NodeAnswer(info, "error", error="the node is not alive")
        return answers

    def _answer(self, node: NodeInfo, ref: Any, ready: bool, timeout: float) -> NodeAnswer:
        if not ready:
            self.ray.cancel(ref, force=True)
            return NodeAnswer(node, "timeout", error=f"no answer within {timeout:g} s")
        try:
            answer = self.ray.get(ref)
        except Exception as err:  # noqa: BLE001 - a task error (or a node that died) is this node's answer
            from rlpatch.cluster.driver import task_error

            return NodeAnswer(node, "error", error=task_error(err))
        identity = answer["identity"]
        if identity.get("node_id") != node.node_id:  # cannot happen with soft=False; said if it ever does
            return NodeAnswer(node, "error", error=f"ran on node {identity.get('node_id')}, not on the one pinned",
                              identity=identity)
        return NodeAnswer(node, "ok", answer["value"], returned_bytes=len(pickle.dumps(answer["value"])),
                          identity=identity)


@contextmanager
def open_session(address: str, runtime_env_json: str | None = None, label: str = "rlpatch --ray",
                 quiet: bool = False) -> Iterator[Session]:
    """Connect to the cluster at `address` with rlpatch shipped to its nodes; disconnect on the way out.
    While it waits for the nodes, a batch log gets `LABEL: k/n node(s) answered` lines (none with `quiet`)."""
    # The driver (and ray) load only when a session opens: other wings import this module's types.
    from rlpatch.cluster.driver import (
        cluster_nodes,
        connected,
        import_ray,
        merged_runtime_env,
        parse_runtime_env,
        staged_package,
    )

    user_env = parse_runtime_env(runtime_env_json)
    ray = import_ray()
    with staged_package() as package, connected(ray, address, merged_runtime_env(user_env, package)) as gcs:
        alive, dead = cluster_nodes(ray)
        yield Session(gcs, [NodeInfo.from_ray(node) for node in alive], [NodeInfo.from_ray(node) for node in dead],
                      ray, label, quiet)
