"""A real local Ray cluster for the `--ray` tests (`ray.cluster_utils.Cluster`), started and ended here.

The cluster lives in a short private `RAY_TMPDIR` (socket paths are limited to 107 bytes); the end
shuts it down and then ends, by PID, only the processes whose files are under that folder. Never
`ray stop`: it kills every Ray on the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _processes_using(folder: str) -> list[int]:
    """PIDs of this user's processes with a file, cwd or argument under `folder`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if folder in cmdline or any(link.startswith(folder) for link in links):
            found.append(int(entry.name))
    return found


def end_leftovers(folder: str) -> None:
    for pid in _processes_using(folder):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@contextmanager
def local_cluster(node_env: Mapping[str, Mapping[str, str]], prefix: str = "rlr") -> Iterator[tuple[Any, dict[str, Any]]]:
    """A cluster with one node per entry of `node_env` (the first is the head), each with 1 CPU and
    those environment variables on its raylet: yields (cluster, {name: node})."""
    import ray
    from ray.cluster_utils import Cluster

    ray_tmp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    saved = {name: os.environ.get(name) for name in ("RAY_TMPDIR", "RAY_USAGE_STATS_ENABLED", "RAY_ADDRESS")}
    os.environ.update(RAY_TMPDIR=ray_tmp, RAY_USAGE_STATS_ENABLED="0")
    os.environ.pop("RAY_ADDRESS", None)
    names = list(node_env)
    started = None
    try:
        # No dashboard: nothing here uses it, and its fixed port (8265, no retries) is one that concurrent
        # test processes (pytest-xdist workers) would contend for.
        started = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                                "env_vars": dict(node_env[names[0]])})
        nodes = {names[0]: started.head_node}
        for name in names[1:]:
            nodes[name] = started.add_node(num_cpus=1, env_vars=dict(node_env[name]))
        started.wait_for_nodes()
        yield started, nodes
    finally:
        ray.shutdown()
        if started is not None:
            started.shutdown()
        end_leftovers(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
