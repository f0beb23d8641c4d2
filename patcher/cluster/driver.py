"""The driver side of `--ray`: connect, list the nodes, run one pinned task per alive node, report.

Each task is pinned with `NodeAffinitySchedulingStrategy(node_id, soft=False)` and asks for no CPU
(`num_cpus=0`), so it runs even on a cluster whose CPUs a training job holds (placement groups
with zero-CPU bundles are rejected by Ray); `max_retries=0`, since a retried `apply` would hide
what happened. rlpatch reaches the nodes through `runtime_env` `py_modules`.
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import click

from rlpatch.cluster import report
from rlpatch.cluster.options import node_argv
from rlpatch.errors import EXIT_REFUSED, InputError

INSTALL_HINT = "pip install 'rlpatch[ray]'"


def run_on_cluster(ctx: click.Context) -> int:
    """Run the command of `ctx` on every alive node of the cluster `--ray` names; the exit code."""
    params = ctx.params
    quiet = bool(params.get("quiet"))
    user_env = parse_runtime_env(params.get("ray_runtime_env"))
    command = ctx.info_name or ""
    ray = import_ray()
    with staged_package() as package, connected(ray, params["ray"], merged_runtime_env(user_env, package)) as address:
        alive, dead = cluster_nodes(ray)
        timeout = float(params.get("ray_timeout") or 300)
        if command == "apply" and not params.get("dry_run"):
            # First a dry run everywhere: a node that would refuse stops the command before any write.
            rehearsal = run_everywhere(ray, alive, node_argv(ctx, ("--dry-run",)), timeout,
                                       f"rlpatch {command} --dry-run --ray", quiet)
            if dead or any(result["status"] != "ok" for result in rehearsal):
                outcome = report.Outcome(command, address, rehearsal, dead, rehearsal=True)
                report.show(outcome, params.get("output_format", "text"))
                return EXIT_REFUSED
        results = run_everywhere(ray, alive, node_argv(ctx), timeout, f"rlpatch {command} --ray", quiet)
    outcome = report.Outcome(command, address, results, dead)
    report.show(outcome, params.get("output_format", "text"))
    return outcome.exit_code


def parse_runtime_env(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as err:
        raise InputError(f"--ray-runtime-env: not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise InputError(f"--ray-runtime-env: expected a JSON object (a Ray runtime env), got {type(value).__name__}")
    return value


def import_ray() -> Any:
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: F401 - needed later
    except ImportError as err:
        raise InputError(f"--ray needs ray, which is not installed here ({err}): {INSTALL_HINT}") from None
    return ray


@contextmanager
def connected(ray: Any, address: str, runtime_env: dict[str, Any]) -> Iterator[str]:
    """A driver connection to the cluster at `address`, whose tasks get `runtime_env`; shut down on the way out.

    Ray uploads local `py_modules` folders only for the job's runtime env (the one `ray.init` gets).
    """
    check_reachable(address)
    try:
        ray.init(address=address, runtime_env=runtime_env, logging_level="ERROR", log_to_driver=False)
    except Exception as err:  # noqa: BLE001 - ray raises ConnectionError, RuntimeError, ValueError...
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        if "version mismatch" in str(err).lower():
            raise InputError(f"--ray {address}: {first} (run rlpatch with the cluster's ray and Python versions)") from None
        raise InputError(f"--ray {address}: cannot connect to the Ray cluster ({first})") from None
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


def check_reachable(address: str) -> None:
    """A `HOST:PORT` where nothing listens: say so at once (ray.init would retry for minutes)."""
    host, _, port = address.rpartition(":")
    if address == "auto" or "://" in address or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as err:
        raise InputError(f"--ray {address}: no Ray cluster answers there ({err.strerror or err})") from None


@contextmanager
def staged_package() -> Iterator[str]:
    """A folder named `rlpatch` holding this rlpatch (with its rules), for `py_modules`.

    The source checkout keeps the package in `patcher/` and the rules in `rules/`; Ray names a
    shipped module after its folder, so both are copied into one `rlpatch/` folder.
    """
    import importlib.util

    import rlpatch

    package_dir = Path(rlpatch.__file__).parent
    # Located, not imported: the rules are shipped with the package, never used by the driver.
    rules_spec = importlib.util.find_spec("rlpatch.rules")
    rules_dir = Path(next(iter(rules_spec.submodule_search_locations or []))) if rules_spec else package_dir / "rules"
    with tempfile.TemporaryDirectory(prefix="rlpatch-ray-") as staging:
        destination = Path(staging) / "rlpatch"
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(package_dir, destination, ignore=ignore)
        if rules_dir.parent != package_dir:
            shutil.copytree(rules_dir, destination / "rules", ignore=ignore, dirs_exist_ok=True)
        yield str(destination)


def merged_runtime_env(user_env: dict[str, Any], package: str) -> dict[str, Any]:
    """The user's runtime env with rlpatch first in `py_modules` (so it wins over any other copy)."""
    merged = dict(user_env)
    merged["py_modules"] = [package, *[module for module in user_env.get("py_modules") or [] if module != package]]
    return merged


def cluster_nodes(ray: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The nodes `ray.nodes()` lists: (alive, dead)."""
    nodes = ray.nodes()
    alive = [node for node in nodes if node.get("Alive")]
    dead = [node for node in nodes if not node.get("Alive")]
    return alive, dead


def wait_all(ray: Any, refs: list[Any], timeout: float, label: str, quiet: bool = False,
             step: float | None = None) -> set[Any]:
    """The refs that are ready within `timeout`. On a stderr that is no terminal (a batch log), unless
    `quiet`, a `LABEL: k/n node(s) answered` line every few seconds: the wait is cut into steps of that
    interval (`step`, for tests), so a long fan-out does not leave the log silent."""
    import time

    from rlpatch.output.api import log_progress

    if not refs:
        return set()
    with log_progress(label, len(refs), "node(s) answered", quiet) as progress:
        if progress is None:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
            return set(ready)
        deadline = time.monotonic() + timeout
        done: set[Any] = set()
        pending = list(refs)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            this = min(left, step if step is not None else max(progress.interval, 0.1))
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=this)
            done.update(ready)
            progress.advance(len(ready))
            if this >= left:  # that was the last round the timeout allows
                break
        return done


def run_everywhere(ray: Any, nodes: list[dict[str, Any]], argv: list[str], timeout: float, label: str = "rlpatch --ray",
                   quiet: bool = False) -> list[dict[str, Any]]:
    """One pinned, zero-CPU, never-retried task per node; each node's answer (or why there is none)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from rlpatch.cluster.node import run_command

    task = ray.remote(run_command)
    refs = {}
    for node in nodes:
        strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
        refs[node["NodeID"]] = task.options(scheduling_strategy=strategy, num_cpus=0, max_retries=0).remote(argv)
    done = wait_all(ray, list(refs.values()), timeout, label, quiet)
    results = []
    for node in nodes:
        ref = refs[node["NodeID"]]
        if ref not in done:
            ray.cancel(ref, force=True)
            results.append(_no_answer(node, "timeout", f"no answer within {timeout:g} s"))
            continue
        try:
            answer = ray.get(ref)
        except Exception as err:  # noqa: BLE001 - a task error is this node's result, not the driver's
            results.append(_no_answer(node, "error", task_error(err)))
            continue
        answer["status"] = "ok" if answer["exit_code"] == 0 else ("error" if answer["exit_code"] == 2 else "failed")
        if answer["status"] == "error":  # the command's own one-line error on that node
            said = (answer.get("stderr") or "").strip().splitlines()
            answer["error"] = said[-1] if said else f"exit {answer['exit_code']}"
        results.append(answer)
    return results


def _no_answer(node: dict[str, Any], status: str, error: str) -> dict[str, Any]:
    return {"node_id": node["NodeID"], "hostname": node.get("NodeManagerHostname"), "ip": node.get("NodeManagerAddress"),
            "status": status, "error": error, "exit_code": None, "result": None}


def task_error(err: Exception) -> str:
    text = str(err)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else type(err).__name__
    if "No module named" in text:
        return (f"{last} (the per-node code needs rlpatch's own requirements installed on the node: "
                "pip install rlpatch there)")
    return last
