"""`dumps compare --ray ADDRESS`: each pair compared on the node whose disk holds both its files.

Round 1, on every alive node (`remote_node.scan_node`, a pinned task): the node scans both roots on
its own disk and pairs what it holds, as the local compare does; only records come back. The
driver merges them: a pair several nodes find (the roots on a shared filesystem) is compared once,
on the holder with the fewest pairs so far; a request whose training record one node holds and
whose inference record another holds is a problem, never compared (verl colocates training rank r
and rollout rank r, so their dumps share a disk); a dead node, or one that errs or times out, is a
problem naming it. Round 2, one pinned task per node holding pairs (`remote_node.compare_node`):
its compares, `--jobs` at a time there, each returning the local compare's JSON entry and its
divergence attribution. The report is the local one, each result naming the node it ran on, plus
a `cluster` block (each node's status, pairs and bytes returned).
"""

from __future__ import annotations

import datetime
import os
import shlex
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rlpatch.cluster.api import NodeAnswer, Session, open_session
from rlpatch.dumps.command import CompareCommand, planned_commands
from rlpatch.dumps.compare import PairResult
from rlpatch.dumps.correlate import Pair
from rlpatch.dumps.divergence import Attribution
from rlpatch.dumps.options import CompareOptions
from rlpatch.dumps.remote_node import compare_node, scan_node
from rlpatch.errors import InputError

# correlate's reasons for a request found on one side only: on two different nodes, a split pair.
TRAIN_ONLY = "not in any single-request prefill"
INFER_ONLY = "not in any single-request update_actor_log"


@dataclass
class Merged:
    """Every node's records, merged: the pairs (each with the nodes that hold it), unpaired, problems."""

    pairs: list[Pair] = field(default_factory=list)
    holders: list[list[str]] = field(default_factory=list)
    unpaired: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # node id -> its status in the report


def driver_path(path: str) -> str:
    """A path the nodes read: relative ones against this directory; `$VAR` and `~` left for each node."""
    return path if path.startswith(("$", "~")) else os.path.abspath(path)


def compare_on_cluster(options: CompareOptions, address: str, runtime_env: str | None,
                       timeout: float) -> tuple[dict[str, Any], list[Attribution | None]]:
    """The compare report (the local one's shape plus `cluster`) and each entry's attribution for `--report`."""
    train, infer, out = driver_path(options.train), driver_path(options.infer), driver_path(options.out)
    with open_session(address, runtime_env, "rlpatch dumps compare --ray", options.quiet) as session:
        scans = session.run(scan_node, {n.node_id: (train, infer, options.backend, options.python)
                                        for n in session.alive}, timeout)
        merged = merge(session, scans)
        if not merged.pairs and not any(n["holds"] for n in merged.nodes.values()) and all(
                answer.status == "ok" for answer in scans.values()):
            said = next((scan.value["missing"][0] for scan in scans.values() if scan.value.get("missing")), "")
            raise InputError(f"no node of the cluster at {session.address} holds msprobe output under {train} or "
                             f"{infer} ({said})")
        selected = [i for i, pair in enumerate(merged.pairs) if (options.only is None or pair.request_id == options.only)
                    and (options.rank is None or pair.train.rank == options.rank)]
        if (options.only is not None or options.rank is not None) and not selected:
            raise InputError(f"no pair matches{f' --only {options.only}' if options.only else ''}"
                             f"{f' --rank {options.rank}' if options.rank is not None else ''}")
        entries, attributions = compare_pairs(session, merged, selected, options, out, timeout)
        cluster = {"address": session.address, "nodes": list(merged.nodes.values()),
                   "dead": [node.as_json() for node in session.dead]}
    from rlpatch.dumps.divergence import Outcome, culprits

    found = culprits(Outcome(entry["request_id"], entry["train"]["rank"], entry["verdict"],
                             None if attribution is None else attribution.divergence)
                     for entry, attribution in zip(entries, attributions, strict=True))
    data = {"results": entries, "culprits": found, "unpaired": merged.unpaired, "problems": merged.problems,
            "cluster": cluster}
    return data, attributions


def merge(session: Session, scans: dict[str, NodeAnswer]) -> Merged:
    merged = Merged()
    by_key: dict[tuple, int] = {}
    unpaired: dict[tuple[str, str, str], list[str]] = {}
    problems: dict[str, list[str]] = {}
    for node in session.alive:
        answer = scans[node.node_id]
        value = answer.value if answer.status == "ok" else None
        error = answer.error if value is None else value.get("error")
        status = {**node.as_json(), "status": "ok" if error is None else answer.status if value is None else "error",
                  "holds": bool(value and value.get("holds")), "pairs": 0, "compared": 0, "error": error,
                  "msprobe": (value or {}).get("msprobe"), "returned_bytes": answer.returned_bytes}
        merged.nodes[node.node_id] = status
        if error is not None or value is None:
            merged.problems.append(f"node {node.label}: not read ({error}): the dumps on its disk are not compared")
            continue
        if not status["holds"]:
            continue
        for pair in value["pairs"]:
            key = (pair.request_id, pair.train.path, pair.infer.path, pair.infer.pid, pair.infer.rank)
            if key not in by_key:
                by_key[key] = len(merged.pairs)
                merged.pairs.append(pair)
                merged.holders.append([])
            merged.holders[by_key[key]].append(node.node_id)
        if value.get("msprobe_error"):  # read, but its pairs cannot be compared there
            status["status"], status["error"] = "error", value["msprobe_error"]
        for item in value["unpaired"]:
            unpaired.setdefault((item["request_id"], item["side"], item["why"]), []).append(node.node_id)
        for problem in value["problems"]:
            problems.setdefault(problem, []).append(node.node_id)
    holding = [n for n, status in merged.nodes.items() if status["holds"]]
    labels = {node.node_id: node.label for node in session.alive}
    for problem, nodes in problems.items():
        merged.problems.append(problem if len(nodes) == len(holding) else f"on node {_names(nodes, labels)}: {problem}")
    merged.problems.extend(f"node {node.label} is dead (listed by the cluster, not alive): the dumps on its disk, if "
                           "any, are not compared" for node in session.dead)
    split = split_requests(unpaired, {pair.request_id for pair in merged.pairs})
    for request_id, (train_nodes, infer_nodes) in split.items():
        merged.problems.append(
            f"request {request_id}: its training record is on node {_names(train_nodes, labels)} and its inference "
            f"record on node {_names(infer_nodes, labels)}: not compared (a pair is compared on the node whose disk "
            "holds both dump files; verl colocates training rank r and rollout rank r)")
    for (request_id, side, why), nodes in unpaired.items():
        if request_id not in split:
            merged.unpaired.append({"request_id": request_id, "side": side, "why": why, "nodes": nodes})
    return merged


def split_requests(unpaired: dict[tuple[str, str, str], list[str]],
                   paired: set[str]) -> dict[str, tuple[list[str], list[str]]]:
    """Requests whose training side one node logged and inference side another: id -> (train nodes, infer nodes)."""
    train: dict[str, list[str]] = {}
    infer: dict[str, list[str]] = {}
    for (request_id, side, why), nodes in unpaired.items():
        if side == "train" and why.startswith(TRAIN_ONLY):
            train.setdefault(request_id, []).extend(nodes)
        elif side == "infer" and why.startswith(INFER_ONLY):
            infer.setdefault(request_id, []).extend(nodes)
    return {request_id: (train[request_id], infer[request_id]) for request_id in train
            if request_id in infer and request_id not in paired and set(train[request_id]) != set(infer[request_id])}


def _names(nodes: Iterable[str], labels: dict[str, str]) -> str:
    return ", ".join(labels.get(node, node[:12]) for node in nodes)


def assign(holders: list[list[str]], able: set[str]) -> list[str | None]:
    """Each pair's node: among its holders that can compare, the one with the fewest pairs so far."""
    load: dict[str, int] = {}
    chosen: list[str | None] = []
    for nodes in holders:
        candidates = [node for node in nodes if node in able]
        if not candidates:
            chosen.append(None)
            continue
        best = min(candidates, key=lambda node: (load.get(node, 0), candidates.index(node)))
        load[best] = load.get(best, 0) + 1
        chosen.append(best)
    return chosen


def compare_pairs(session: Session, merged: Merged, selected: list[int], options: CompareOptions, out: str,
                  timeout: float) -> tuple[list[dict[str, Any]], list[Attribution | None]]:
    """Round 2: each selected pair on its node; the entries in pair order, and their attributions."""
    pairs = [merged.pairs[i] for i in selected]
    python_words = shlex.split(options.python) if options.python else ["python"]
    planned = planned_commands(pairs, options.backend, out, python_words)
    able = {node for node, status in merged.nodes.items() if status["msprobe"] and status["error"] is None}
    nodes = assign([merged.holders[i] for i in selected], able)
    work: dict[str, list[int]] = {}
    for index, node in enumerate(nodes):
        if node is not None:
            work.setdefault(node, []).append(index)
    answers = session.run(compare_node, {node: ([(planned[i][0], planned[i][1]) for i in indices], options.backend,
                                                out, options.python, options.rtol, options.jobs)
                                         for node, indices in work.items()}, timeout)
    labels = {node.node_id: node for node in session.alive}
    entries: list[dict[str, Any] | None] = [None] * len(pairs)
    attributions: list[Attribution | None] = [None] * len(pairs)
    for node_id, indices in work.items():
        answer = answers[node_id]
        status = merged.nodes[node_id]
        status["pairs"] = len(indices)
        status["returned_bytes"] += answer.returned_bytes
        error = answer.error if answer.status != "ok" else answer.value.get("error")
        if error is not None:
            status["status"], status["error"] = (answer.status if answer.status != "ok" else "error"), error
        for position, index in enumerate(indices):
            if error is None:
                found = answer.value["results"][position]
                entry, attribution = found["entry"], found["attribution"]
                status["compared"] += 1
            else:
                entry, attribution = _failed(planned[index], options, f"node {labels[node_id].label}: {error}"), None
            entries[index] = {**entry, "node": labels[node_id].as_json()}
            attributions[index] = None if attribution is None else Attribution.from_json(attribution)
    for index, node in enumerate(nodes):
        if node is None:
            holders = merged.holders[selected[index]]
            why = "; ".join(f"node {labels[h].label}: {merged.nodes[h]['error']}" for h in holders)
            entries[index] = {**_failed(planned[index], options, f"no holder can compare it ({why})"), "node": None}
    return [e for e in entries if e is not None], attributions


def _failed(planned: tuple[Pair, str, CompareCommand], options: CompareOptions, error: str) -> dict[str, Any]:
    pair, folder, command = planned
    result = PairResult(pair, command, folder, error=error)
    result.rtol = options.rtol
    return result.as_json()


def cluster_lines(data: dict[str, Any]) -> list[str]:
    """The text report's nodes: where each pair ran, what came back, who could not answer."""
    cluster = data["cluster"]
    lines = [f"Ray cluster at {cluster['address']}: {len(cluster['nodes'])} alive node(s), {len(cluster['dead'])} dead"]
    for node in cluster["nodes"]:
        head = f"  node {node['node_id'][:12]} ({node['hostname'] or '?'}, {node['ip'] or '?'}): {node['status'].upper()}"
        if node["error"]:
            lines.append(f"{head}: {node['error']}")
        elif not node["holds"]:
            lines.append(f"{head}: holds no dumps under these roots")
        else:
            lines.append(f"{head}: {node['compared']} pair(s) compared there, msprobe {node['msprobe'] or '?'}, "
                         f"{node['returned_bytes']} bytes returned")
    lines.extend(f"  node {n['node_id'][:12]} ({n['hostname'] or '?'}, {n['ip'] or '?'}): DEAD" for n in cluster["dead"])
    return lines


def report_facts(options: CompareOptions, data: dict[str, Any]) -> Any:
    """The report's facts: the msprobe versions are the nodes' own."""
    import rlpatch
    from rlpatch.dumps.report import Facts

    versions = sorted({node["msprobe"] for node in data["cluster"]["nodes"] if node["msprobe"]})
    floor = f"--rtol {options.rtol:g}" if options.rtol is not None else "the compared dtype's unit roundoff x 8"
    return Facts(datetime.datetime.now().astimezone().isoformat(timespec="seconds"), rlpatch.__version__,
                 ", ".join(versions) or "unknown", shlex.join(["rlpatch", *sys.argv[1:]]),
                 driver_path(options.train), driver_path(options.infer), options.backend, floor)
