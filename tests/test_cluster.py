"""`--ray ADDRESS` against a real Ray cluster of three nodes on this machine (`ray.cluster_utils.Cluster`).

Each node's raylet gets its own `PYTHONPATH` (a copy of the verl fixture tree), so each node imports
a different verl, as on a real multi-node cluster (`ray_support.local_cluster`: a private
`RAY_TMPDIR`, and only the processes under it ended, by PID; never `ray stop`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli, snapshot
from ray_support import local_cluster

ray = pytest.importorskip("ray")

NODES = ("head", "second", "third")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three nodes, each importing its own copy of the verl fixture tree: {name: (node, tree)}."""
    base = tmp_path_factory.mktemp("nodes")
    trees = {}
    for name in NODES:
        trees[name] = base / name
        shutil.copytree(FIXTURES / "verl_engine", trees[name])
    with local_cluster({name: {"PYTHONPATH": str(trees[name])} for name in NODES}, "rlr") as (started, nodes):
        yield started, {name: (nodes[name], trees[name]) for name in NODES}


def _json(result) -> dict:
    assert result.stdout.strip(), result.stderr
    return json.loads(result.stdout)


def test_verify_apply_revert_across_the_cluster(cluster):
    started, nodes = cluster
    address = started.address
    pristine = {name: snapshot(tree) for name, (_, tree) in nodes.items()}
    for name in ("head", "second"):  # patched by hand; the third node is left unpatched
        assert run_cli("apply", "--verl-root", str(nodes[name][1])).exit_code == 0
    third_id = nodes["third"][0].node_id

    verify = run_cli("verify", "--ray", address)
    assert verify.exit_code == 1, verify.stdout + verify.stderr
    failed_line = next(line for line in verify.stdout.splitlines() if line.startswith("failed on"))
    assert failed_line.startswith("failed on 1 node(s): " + third_id[:12])
    assert f"verl at {nodes['third'][1]}: absent" in failed_line  # the tree the node itself imports
    for name, (node, tree) in nodes.items():
        assert f"node {node.node_id[:12]}" in verify.stdout and f"verl 0.9.1 at {tree}" in verify.stdout, name

    # One node refusing (a drifted anchor on the third) stops apply before it writes on any node.
    fsdp = nodes["third"][1] / "verl/workers/engine/fsdp/transformer_impl.py"
    original = fsdp.read_text()
    fsdp.write_text(original.replace("def forward_backward_batch", "def forward_backward_batches"))
    before = {name: snapshot(tree, skip_state=True) for name, (_, tree) in nodes.items()}
    refused = run_cli("apply", "--ray", address)
    assert refused.exit_code == 1 and "nothing was written on any node" in refused.stdout, refused.stdout
    assert {name: snapshot(tree, skip_state=True) for name, (_, tree) in nodes.items()} == before
    fsdp.write_text(original)

    applied = run_cli("apply", "--ray", address, "--format", "json")
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    payload = _json(applied)
    assert payload["summary"]["changed"] == [third_id]
    assert len(payload["nodes"]) == 3 and not payload["summary"]["differs"]
    for node in payload["nodes"]:  # every node ran the rlpatch the driver shipped, not its own copy
        assert node["rlpatch_path"] != str(Path(__file__).parent.parent / "patcher")
        assert {"hostname", "ip", "executable", "python", "ray", "rlpatch"} <= set(node)
    assert run_cli("verify", "--ray", address).exit_code == 0

    reverted = run_cli("revert", "--ray", address, "--format", "json")
    assert reverted.exit_code == 0, reverted.stdout + reverted.stderr
    assert sorted(_json(reverted)["summary"]["changed"]) == sorted(node.node_id for node, _ in nodes.values())
    for name, (_, tree) in nodes.items():
        assert snapshot(tree) == pristine[name], name


def test_a_dead_node_fails_doctor_which_runs_on_the_others(cluster, tmp_path):
    """Last: it removes a node from the module's cluster. The target is a bare venv (no torch to import)."""
    started, nodes = cluster
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    dead_node = nodes["third"][0]
    started.remove_node(dead_node)
    result = run_cli("doctor", "--ray", started.address, "--python", str(tmp_path / "bare" / "bin" / "python"),
                     "--format", "json")
    assert result.exit_code == 1, result.stdout + result.stderr
    payload = _json(result)
    assert payload["summary"]["dead"] == [dead_node.node_id]
    assert len(payload["nodes"]) == 2
    for node in payload["nodes"]:  # each node's doctor found the verl tree of its own PYTHONPATH
        verl = node["result"]["packages"]["verl"]
        assert Path(verl["location"]).parent in {nodes["head"][1], nodes["second"][1]}
