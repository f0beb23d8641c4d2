"""The engine-worker rules on every real verl release that has the files (wheels fetched at test time).

Per release: apply -> every touched file compiles -> verify says applied -> a second apply changes
no byte -> the `diff` output re-applies to a pristine copy (patch -p1 and git apply) giving exactly
the bytes apply wrote -> revert -> the tree is byte-identical to the pristine one. Then the anchors
are mutated and apply must refuse without writing a byte.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import ENGINE_RULES, VERL_ENGINE_VERSIONS, run_cli, snapshot

from rlpatch.upstream.wheelcache import fresh_copy

pytestmark = pytest.mark.upstream

FSDP = "verl/workers/engine/fsdp/transformer_impl.py"
MEGATRON = "verl/workers/engine/megatron/transformer_impl.py"


def _force(version: str) -> list[str]:
    return ["--force"] if version.startswith("0.6.") else []


@pytest.mark.parametrize("version", VERL_ENGINE_VERSIONS)
def test_release_round_trip(verl_tree, tmp_path, version):
    tree = verl_tree(version)
    pristine = snapshot(tree)
    root = ["--verl-root", str(tree)]

    diff = run_cli("diff", *root)
    assert diff.exit_code == 0 and snapshot(tree) == pristine

    result = run_cli("apply", *root, *_force(version), "--format", "json")
    assert result.exit_code == 0, result.stderr
    states = {r["id"]: r["state"] for r in json.loads(result.stdout)["targets"][0]["rules"] if r["id"] in ENGINE_RULES}
    assert states == {"verl-engine-fsdp": "applied", "verl-engine-megatron": "applied"}
    for relative in (FSDP, MEGATRON):
        compile((tree / relative).read_text(encoding="utf-8"), relative, "exec")
    assert run_cli("verify", *root).exit_code == 0

    patched = snapshot(tree)
    assert run_cli("apply", *root, *_force(version)).exit_code == 0
    assert snapshot(tree) == patched

    for tool in (["patch", "-p1", "-s", "-i"], ["git", "apply"]):
        copy = fresh_copy("verl", version, tmp_path / f"copy-{tool[0]}")
        diff_file = tmp_path / "rlpatch.diff"
        diff_file.write_text(diff.stdout, encoding="utf-8")
        subprocess.run([*tool, str(diff_file)], cwd=copy, check=True, capture_output=True)
        for relative in (FSDP, MEGATRON):
            assert (copy / relative).read_bytes() == (tree / relative).read_bytes(), (tool[0], relative)

    assert run_cli("revert", *root).exit_code == 0
    assert snapshot(tree) == pristine


@pytest.mark.parametrize(
    "name, mutate, expected",
    [
        ("renamed-method", lambda s: s.replace("def forward_backward_batch(", "def forward_backward_batch_v2("), "forward_backward_batch"),
        ("duplicated-loop", lambda s: s.replace("        # postprocess and return\n", "        for micro_batch in micro_batches:\n            with ctx:\n                self.forward_step(micro_batch, loss_function=loss_function, forward_only=True)\n\n        # postprocess and return\n", 1), "for loop over micro_batches"),
        ("removed-with", None, "`with` statement"),
    ],
)
@pytest.mark.parametrize("version", ["0.6.0", "0.8.0", "0.9.1"])
def test_release_drift_is_refused(verl_tree, version, name, mutate, expected):
    tree = verl_tree(version)
    path = tree / FSDP
    source = path.read_text(encoding="utf-8")
    if mutate is None:
        # Turn the `with` that runs forward_step into an `if`, keeping the body.
        start = source.index("with ctx", source.index("def forward_backward_batch("))
        end = source.index(":\n", start)
        source = source[:start] + "if True" + source[end:]
    else:
        source = mutate(source)
    path.write_text(source, encoding="utf-8")
    before = snapshot(tree)
    result = run_cli("apply", "--verl-root", str(tree), "--force")
    assert result.exit_code == 1, result.stdout + result.stderr
    assert expected in result.stderr and version in result.stderr and FSDP in result.stderr
    assert snapshot(tree) == before


@pytest.mark.parametrize("version", ["0.5.0"])
def test_release_without_engine_files_is_not_applicable(verl_tree, version):
    """Every rule not applicable: apply refuses (issue 28: exit 0 there let the run go on with nothing
    in place), says why and what works in one line, and writes nothing."""
    tree = verl_tree(version)
    pristine = snapshot(tree)
    result = run_cli("apply", "--verl-root", str(tree), "--format", "json")
    assert result.exit_code == 1
    rules = json.loads(result.stdout)["targets"][0]["rules"]
    assert {r["state"] for r in rules} == {"not-applicable"}
    assert all(r["message"] for r in rules)
    assert not (tree / ".rlpatch").exists() and snapshot(tree) == pristine
    (why,) = [line for line in result.stderr.splitlines() if line.startswith("rlpatch: refused:")]
    assert f"cannot take effect on verl {version}" in why and "verl 0.7.0+" in why


@pytest.mark.parametrize("mode_args", [("--mode", "consistency"), ("--mode", "consistency", "--dry-run")])
def test_consistency_on_0_5_0_is_refused_with_what_works(verl_tree, mode_args):
    tree = verl_tree("0.5.0")
    pristine = snapshot(tree)
    result = run_cli("apply", "--verl-root", str(tree), *mode_args)
    assert result.exit_code == 1 and snapshot(tree) == pristine
    (why,) = [line for line in result.stderr.splitlines() if line.startswith("rlpatch: refused:")]
    assert "the consistency set cannot take effect on verl 0.5.0" in why
    assert "verl 0.7.0+" in why and "inference mode needs no verl patch" in why
    assert "nothing was written" in result.stderr
