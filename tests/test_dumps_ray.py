"""`dumps compare --ray` against a real two-node Ray cluster on this machine, with real msprobe compares.

Local disks are simulated: each node's raylet gets `RLPATCH_TEST_DISK` (its own folder), and the
roots are given as `'$RLPATCH_TEST_DISK/train'`, which each node expands on its own side (as a
node-local scratch variable would be on a real cluster). So a pair compared on the wrong node would
find no files; the test also checks that each result names the node whose disk holds it. The dumps
are real msprobe 26.2.0 dumps of tests/divergence_twins.py's twin models (FSDP1 names against vLLM
names, a bfloat16 down_proj as the fault), laid out as the engine patch and the dispatch logger
write them, with the same pid folder on both nodes (pids repeat across machines). The cluster is
torn down as in tests/test_cluster.py: never `ray stop`, only the processes under its own folder. The
last tests check the driver's merge of the nodes' records (shared disk, split pair, failing nodes) alone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from ray_support import local_cluster

from rlpatch.cluster.api import NodeAnswer, NodeInfo, Session
from rlpatch.dumps.correlate import Pair, Side
from rlpatch.dumps.remote import assign, merge

TWINS = Path(__file__).with_name("divergence_twins.py")
DISK = "RLPATCH_TEST_DISK"
TRAIN, INFER = f"${DISK}/train", f"${DISK}/infer"
PID = 4242  # the same pid folder on both nodes
A, B, C, X = "a" * 32, "b" * 32, "c" * 32, "x" * 32
CULPRIT = "model.layers.1.mlp.down_proj"


def _twin(root: Path, naming: str, fault: str | None) -> Path:
    argv = [sys.executable, str(TWINS), str(root), naming, "tensor"] + ([fault] if fault else [])
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "step0" / "rank0"


def _lay_out(disk: Path, twins: dict[str, Path], train: list[tuple], infer: list[tuple]) -> None:
    """Training records and dumps ((request, step, rank)), inference ones ((request, step, rank, twin))."""
    (disk / "train" / str(PID)).mkdir(parents=True)
    (disk / "infer" / str(PID)).mkdir(parents=True)
    with open(disk / "train" / str(PID) / "update_actor_log.jsonl", "w", encoding="utf-8") as log:
        for n, (request, step, rank) in enumerate(train):
            log.write(json.dumps({"request_ids": [request], "num_requests": 1, "step": step, "rank": rank,
                                  "phase": "log_prob", "timestamp": 1000 + n}) + "\n")
            shutil.copytree(twins["train"], disk / "train" / f"step{step}" / f"rank{rank}")
    with open(disk / "infer" / str(PID) / "dispatch_log.jsonl", "w", encoding="utf-8") as log:
        for n, (request, step, rank, twin) in enumerate(infer):
            log.write(json.dumps({"phase": "prefill", "step": step, "rank": rank, "timestamp": 2000 + n,
                                  "requests": [{"request_id": request, "type": "new", "tokens": 6}]}) + "\n")
            shutil.copytree(twins[twin], disk / "infer" / str(PID) / f"step{step}" / f"rank{rank}")


@pytest.fixture(scope="module")
def disks(tmp_path_factory):
    """Two node disks: head holds A (diverges) and B (agrees) at rank 0, and X's inference side;
    second holds C (diverges) at rank 1 and X's training side (a pair split over two nodes)."""
    pytest.importorskip("torch")
    pytest.importorskip("msprobe.pytorch")
    root = tmp_path_factory.mktemp("twins")
    twins = {"train": _twin(root / "train", "fsdp", None), "dtype": _twin(root / "dtype", "vllm", "dtype"),
             "clean": _twin(root / "clean", "vllm", None)}
    head, second = root / "head", root / "second"
    _lay_out(head, twins, [(A, 0, 0), (B, 1, 0)], [(A, 0, 0, "dtype"), (B, 1, 0, "clean"), (X, 2, 0, "clean")])
    _lay_out(second, twins, [(C, 0, 1), (X, 1, 1)], [(C, 0, 1, "dtype")])
    size = sum(f.stat().st_size for f in twins["train"].rglob("*") if f.is_file())
    return {"head": head, "second": second, "dump_bytes": size}


@pytest.fixture(scope="module")
def cluster(disks):
    pytest.importorskip("ray")
    with local_cluster({"head": {DISK: str(disks["head"])}, "second": {DISK: str(disks["second"])}}, "rld") as (
            started, nodes):
        yield started, {name: node.node_id for name, node in nodes.items()}


def _compare(*args: str) -> tuple[int, dict]:
    result = run_cli("dumps", "compare", "--python", sys.executable, "--format", "json", *args)
    assert result.stdout.strip(), result.stderr
    return result.exit_code, json.loads(result.stdout)


def _verdicts(data: dict) -> dict[str, tuple]:
    return {e["request_id"]: (e["verdict"], (e["divergence"] or {}).get("module"), e["rows"]["pass"])
            for e in data["results"]}


@pytest.mark.runtime
def test_each_pair_is_compared_once_on_the_node_that_holds_it(cluster, disks, tmp_path):
    started, node_ids = cluster
    local = {}
    for name in ("head", "second"):
        code, data = _compare("--train", str(disks[name] / "train"), "--infer", str(disks[name] / "infer"),
                              "-o", str(tmp_path / f"local_{name}"))
        local.update(_verdicts(data))
    assert local == {A: ("diverges", CULPRIT, local[A][2]), B: ("agrees", None, local[B][2]),
                     C: ("diverges", CULPRIT, local[C][2])}

    report = tmp_path / "report.html"
    code, data = _compare("--train", TRAIN, "--infer", INFER, "-o", f"${DISK}/out", "--ray", started.address,
                          "--report", str(report))
    assert code == 1  # A and C diverge, and X is split over two nodes
    assert sorted(e["request_id"] for e in data["results"]) == [A, B, C]  # each pair once
    assert _verdicts(data) == local
    assert [(c["module"], sorted(c["pairs"]), sorted(c["ranks"])) for c in data["culprits"]] == [
        (CULPRIT, [A, C], [0, 1])]
    holder = {A: "head", B: "head", C: "second"}
    for entry in data["results"]:  # compared on the node whose disk holds it, in that node's -o
        assert entry["node"]["node_id"] == node_ids[holder[entry["request_id"]]], entry["request_id"]
        assert entry["csv"].startswith(str(disks[holder[entry["request_id"]]] / "out")), entry["csv"]
    split = [p for p in data["problems"] if X in p]
    assert len(split) == 1 and node_ids["second"][:12] in split[0] and "not compared" in split[0], data["problems"]
    assert X not in {u["request_id"] for u in data["unpaired"]}
    nodes = {n["node_id"]: n for n in data["cluster"]["nodes"]}
    assert {nodes[node_ids["head"]]["compared"], nodes[node_ids["second"]]["compared"]} == {2, 1}
    for node in nodes.values():  # only summaries came back: far less than one rank's dump
        assert node["status"] == "ok" and node["msprobe"] == "26.2.0", node
        assert 0 < node["returned_bytes"] < disks["dump_bytes"] / 4, (node["returned_bytes"], disks["dump_bytes"])
    page = report.read_text()
    assert page.count('<details class="request"') == 3 and CULPRIT in page and "msprobe</th><td><code>26.2.0" in page


@pytest.mark.runtime
def test_a_shared_disk_spreads_the_pairs_over_the_nodes(cluster, disks, tmp_path):
    """The same absolute roots on both nodes (a shared filesystem): each pair once, one per node."""
    started, node_ids = cluster
    code, data = _compare("--train", str(disks["head"] / "train"), "--infer", str(disks["head"] / "infer"),
                          "-o", str(tmp_path / "out"), "--ray", started.address, "--rank", "0", "--jobs", "1")
    assert code == 1 and sorted(e["request_id"] for e in data["results"]) == [A, B]
    assert {e["node"]["node_id"] for e in data["results"]} == set(node_ids.values())
    assert _verdicts(data)[A][:2] == ("diverges", CULPRIT) and _verdicts(data)[B][:2] == ("agrees", None)


@pytest.mark.runtime
def test_bad_input_is_one_line(cluster, tmp_path):
    started, _ = cluster
    result = run_cli("dumps", "compare", "--train", str(tmp_path / "none"), "--infer", str(tmp_path / "none"),
                     "--ray", started.address)
    assert result.exit_code == 2 and result.stderr.startswith("rlpatch: error: no node of the cluster")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    result = run_cli("dumps", "compare", "--train", TRAIN, "--infer", INFER, "--ray", started.address, "--only", "zz")
    assert result.exit_code == 2 and "no pair matches --only zz" in result.stderr


@pytest.mark.runtime
def test_a_dead_node_is_reported_and_the_others_compare(cluster, tmp_path):
    """Last: it adds a node and removes it (the cluster then lists it dead)."""
    started, node_ids = cluster
    third = started.add_node(num_cpus=1, env_vars={DISK: str(tmp_path)})
    started.wait_for_nodes()
    started.remove_node(third)
    code, data = _compare("--train", TRAIN, "--infer", INFER, "-o", f"${DISK}/out_dead", "--ray", started.address,
                          "--only", B, "--ray-timeout", "120")
    assert code == 1
    assert [d["node_id"] for d in data["cluster"]["dead"]] == [third.node_id]
    assert any(third.node_id[:12] in p and "dead" in p for p in data["problems"]), data["problems"]
    assert [(e["request_id"], e["verdict"], e["node"]["node_id"]) for e in data["results"]] == [
        (B, "agrees", node_ids["head"])]


# ---- the driver's merge of the nodes' records (no cluster needed) ---------------------------------------

N1, N2, N3 = NodeInfo("1" * 56, "h1", "10.0.0.1"), NodeInfo("2" * 56, "h2", "10.0.0.2"), NodeInfo("3" * 56, "h3", None)


def _pair(request: str, rank: int, root: str = "/data") -> Pair:
    return Pair(request, Side(0, rank, f"{root}/train/step0/rank{rank}/dump.json"),
                Side(0, rank, f"{root}/infer/{PID}/step0/rank{rank}/dump.json", PID))


def _scan(node: NodeInfo, pairs: list[Pair], unpaired=(), problems=(), msprobe="26.2.0") -> NodeAnswer:
    value = {"holds": True, "missing": [], "pairs": pairs, "unpaired": list(unpaired), "problems": list(problems),
             "msprobe": msprobe, "msprobe_error": None if msprobe else "python cannot import msprobe here"}
    return NodeAnswer(node, "ok", value, returned_bytes=100)


def test_pairs_on_a_shared_disk_are_compared_once_and_spread():
    session = Session("addr", [N1, N2], [], None)
    shared = [_pair(A, 0), _pair(B, 0), _pair(C, 1)]
    merged = merge(session, {N1.node_id: _scan(N1, shared, problems=["same"]),
                             N2.node_id: _scan(N2, shared, problems=["same", "only here"])})
    assert [p.request_id for p in merged.pairs] == [A, B, C]
    assert merged.holders == [[N1.node_id, N2.node_id]] * 3
    assert assign(merged.holders, {N1.node_id, N2.node_id}) == [N1.node_id, N2.node_id, N1.node_id]
    assert merged.problems == ["same", f"on node {N2.label}: only here"]


def test_split_pairs_dead_and_failing_nodes_are_problems():
    session = Session("addr", [N1, N2, N3], [NodeInfo("4" * 56, "h4", None)], None)
    train_only = {"request_id": X, "side": "train", "why": "not in any single-request prefill of a dispatch_log.jsonl"}
    infer_only = {"request_id": X, "side": "infer", "why": "not in any single-request update_actor_log.jsonl record"}
    decode = {"request_id": B, "side": "infer", "why": "inference step 3 (pid 1, rank 0) is a decode step"}
    merged = merge(session, {N1.node_id: _scan(N1, [_pair(A, 0)], [train_only, decode]),
                             N2.node_id: _scan(N2, [_pair(C, 1)], [infer_only], msprobe=None),
                             N3.node_id: NodeAnswer(N3, "timeout", error="no answer within 5 s")})
    assert merged.unpaired == [{**decode, "nodes": [N1.node_id]}]
    assert any(X in p and N1.label in p and N2.label in p and "not compared" in p for p in merged.problems)
    assert any(N3.label in p and "no answer within 5 s" in p for p in merged.problems)
    assert any("4" * 12 in p and "dead" in p for p in merged.problems)
    assert merged.nodes[N2.node_id]["status"] == "error" and "msprobe" in merged.nodes[N2.node_id]["error"]
    assert assign(merged.holders, {N1.node_id}) == [N1.node_id, None]  # C's only holder cannot compare
