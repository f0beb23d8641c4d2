"""The inference-side rules through the CLI on real SGLang and vLLM-Ascend releases, and one
transaction across a verl tree and a vLLM-Ascend tree.

Per release: apply -> every touched file compiles -> verify says applied -> a second apply changes
no byte -> the `diff` output re-applies to a pristine copy (patch -p1 and git apply) giving exactly
the bytes apply wrote -> revert -> the tree is byte-identical to the pristine one (the created
dispatch_logger.py deleted). Releases with native support, or without dump hooks, are reported
not-applicable and nothing is written (apply refuses the release without hooks: nothing can take effect).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import (
    FIXTURES,
    SGLANG_NATIVE_VERSIONS,
    SGLANG_PATCHED_VERSIONS,
    VLLM_ASCEND_STOP_SITES,
    run_cli,
    snapshot,
)

from rlpatch.upstream.wheelcache import LINUX_X86_64, fresh_copy

SGLANG_RUNNER = "sglang/srt/model_executor/model_runner.py"
VLLM_RUNNER = "vllm_ascend/worker/model_runner_v1.py"
VLLM_LOGGER = "vllm_ascend/worker/dispatch_logger.py"

SGLANG_PATCHED = SGLANG_PATCHED_VERSIONS
SGLANG_NATIVE = SGLANG_NATIVE_VERSIONS
VLLM_ASCEND_PATCHED = sorted(VLLM_ASCEND_STOP_SITES)


def _tree(project: str, version: str, destination: Path) -> Path:
    if project == "sglang":
        return fresh_copy("sglang", version, destination)
    return fresh_copy("vllm-ascend", version, destination, platform=LINUX_X86_64, python_version="3.11")


def _states(stdout: str) -> dict[str, str]:
    return {rule["id"]: rule["state"] for target in json.loads(stdout)["targets"] for rule in target["rules"]}


def _round_trip(tree: Path, option: str, rule_id: str, edited: list[str], created: list[str], tmp_path: Path) -> None:
    pristine = snapshot(tree)
    root = [option, str(tree)]
    diff = run_cli("diff", *root)
    assert diff.exit_code == 0 and snapshot(tree) == pristine

    result = run_cli("apply", *root, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert _states(result.stdout) == {rule_id: "applied"}
    for relative in edited + created:
        compile((tree / relative).read_text(encoding="utf-8"), relative, "exec")
    verify = run_cli("verify", *root, "--format", "json")
    assert verify.exit_code == 0 and _states(verify.stdout) == {rule_id: "applied"}

    patched = snapshot(tree)
    again = run_cli("apply", *root)
    assert again.exit_code == 0 and snapshot(tree) == patched

    for tool in (["patch", "-p1", "-s", "-i"], ["git", "apply"]):
        copy = tmp_path / f"copy-{tool[0]}"
        for relative in edited:  # the files the diff touches, as released
            (copy / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(_pristine_file(tree, relative, pristine), copy / relative)
        diff_file = tmp_path / "rlpatch.diff"
        diff_file.write_text(diff.stdout, encoding="utf-8")
        subprocess.run([*tool, str(diff_file)], cwd=copy, check=True, capture_output=True)
        for relative in edited + created:
            assert (copy / relative).read_bytes() == (tree / relative).read_bytes(), (tool[0], relative)

    assert run_cli("revert", *root).exit_code == 0
    assert snapshot(tree) == pristine
    for relative in created:
        assert not (tree / relative).exists()


def _pristine_file(tree: Path, relative: str, pristine: dict) -> Path:
    # The apply stored the original bytes next to the tree; check it is the pristine one.
    import hashlib

    stored = next(tree.glob(f".rlpatch/originals/{relative}*"))
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == pristine[relative][0]
    return stored


@pytest.mark.upstream
@pytest.mark.parametrize("version", SGLANG_PATCHED)
def test_sglang_release_round_trip(tmp_path: Path, version: str) -> None:
    tree = _tree("sglang", version, tmp_path / "tree")
    _round_trip(tree, "--sglang-root", "sglang-model-runner", [SGLANG_RUNNER], [], tmp_path)


@pytest.mark.upstream
@pytest.mark.parametrize("version", VLLM_ASCEND_PATCHED)
def test_vllm_ascend_release_round_trip(tmp_path: Path, version: str) -> None:
    tree = _tree("vllm-ascend", version, tmp_path / "tree")
    _round_trip(tree, "--vllm-ascend-root", "vllm-ascend-dispatch-logger", [VLLM_RUNNER], [VLLM_LOGGER], tmp_path)


@pytest.mark.upstream
@pytest.mark.parametrize(
    "project, version, option, expected",
    [("sglang", v, "--sglang-root", "msprobe_dump_config=PATH") for v in SGLANG_NATIVE]
    + [("vllm-ascend", "0.11.0", "--vllm-ascend-root", "no msprobe dump hooks")],
)
def test_release_is_not_applicable(tmp_path: Path, project: str, version: str, option: str, expected: str) -> None:
    tree = _tree(project, version, tmp_path / "tree")
    before = snapshot(tree)
    result = run_cli("apply", option, str(tree), "--format", "json")
    # A native release needs no patch (exit 0); one without dump hooks cannot be made to dump: refused.
    native = project == "sglang"
    assert result.exit_code == (0 if native else 1), result.stderr
    assert native or f"cannot take effect on vllm_ascend {version}" in result.stderr
    (target,) = json.loads(result.stdout)["targets"]
    assert target["version"] == version
    (rule,) = target["rules"]
    assert rule["state"] == "not-applicable" and expected in rule["message"]
    assert snapshot(tree) == before


# ---------------------------------------------------------------------------------------------
# One transaction across two trees
# ---------------------------------------------------------------------------------------------


def _refuse_in_vllm_ascend(tree: Path) -> None:
    """Break an anchor the rule checks: a stop site where `scheduler_output` is not bound."""
    path = tree / VLLM_RUNNER
    source = path.read_text(encoding="utf-8")
    source = source.replace(
        "(scheduler_output, hidden_states) = self.execute_model_state\n",
        "(batch, hidden_states) = self.execute_model_state\n",
    )
    assert "(batch, hidden_states)" in source
    path.write_text(source, encoding="utf-8")


def _fixture_trees(tmp_path: Path) -> tuple[Path, Path]:
    verl = tmp_path / "verl_engine"
    vllm_ascend = tmp_path / "vllm_ascend_runner"
    shutil.copytree(FIXTURES / "verl_engine", verl)
    shutil.copytree(FIXTURES / "vllm_ascend_runner", vllm_ascend)
    return verl, vllm_ascend


def test_consistency_apply_spans_both_trees(tmp_path: Path) -> None:
    verl, vllm_ascend = _fixture_trees(tmp_path)
    pristine = (snapshot(verl), snapshot(vllm_ascend))
    roots = ["--mode", "consistency", "--verl-root", str(verl), "--vllm-ascend-root", str(vllm_ascend)]
    result = run_cli("apply", *roots, "--format", "json")
    assert result.exit_code == 0, result.stderr
    packages = [target["package"] for target in json.loads(result.stdout)["targets"]]
    assert sorted(packages) == ["verl", "vllm_ascend"]
    states = _states(result.stdout)
    patched = ("verl-engine-fsdp", "verl-engine-megatron", "vllm-ascend-dispatch-logger")
    assert {rule: states[rule] for rule in patched} == dict.fromkeys(patched, "applied")
    # The other consistency rules patch verl files the fixture tree does not have.
    assert set(states.values()) <= {"applied", "not-applicable"}
    assert (vllm_ascend / VLLM_LOGGER).exists()
    assert run_cli("verify", *roots).exit_code == 0
    assert run_cli("revert", *roots).exit_code == 0
    assert (snapshot(verl), snapshot(vllm_ascend)) == pristine


def test_refusal_in_the_vllm_ascend_tree_leaves_the_verl_tree_untouched(tmp_path: Path) -> None:
    verl, vllm_ascend = _fixture_trees(tmp_path)
    _refuse_in_vllm_ascend(vllm_ascend)
    before = (snapshot(verl), snapshot(vllm_ascend))
    result = run_cli("apply", "--mode", "consistency", "--verl-root", str(verl), "--vllm-ascend-root", str(vllm_ascend))
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "scheduler_output" in result.stderr and VLLM_RUNNER in result.stderr and "0.13.0" in result.stderr
    assert (snapshot(verl), snapshot(vllm_ascend)) == before
    assert not (verl / ".rlpatch").exists() and not (vllm_ascend / ".rlpatch").exists()


@pytest.mark.upstream
def test_refusal_in_a_real_vllm_ascend_tree_leaves_a_real_verl_tree_untouched(tmp_path: Path) -> None:
    verl = fresh_copy("verl", "0.9.1", tmp_path / "verl")
    vllm_ascend = _tree("vllm-ascend", "0.23.0", tmp_path / "vllm_ascend")
    path = vllm_ascend / VLLM_RUNNER
    # Two `self.debugger = None` in NPUModelRunner.__init__: an ambiguous anchor.
    path.write_text(
        path.read_text(encoding="utf-8").replace(
            "self.debugger = None\n", "self.debugger = None\n        self.debugger = None\n", 1
        )
    )
    before = (snapshot(verl), snapshot(vllm_ascend))
    roots = ["--mode", "consistency", "--verl-root", str(verl), "--vllm-ascend-root", str(vllm_ascend)]
    result = run_cli("apply", *roots)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "self.debugger = None" in result.stderr and "found 2" in result.stderr
    assert (snapshot(verl), snapshot(vllm_ascend)) == before
    # Without the refusing tree the same verl tree patches fine: the refusal alone blocked it.
    assert run_cli("apply", "--mode", "consistency", "--verl-root", str(verl)).exit_code == 0


@pytest.mark.parametrize("version", VLLM_ASCEND_PATCHED)
def test_rl608_is_silent_on_released_runners(tmp_path: Path, version: str) -> None:
    """No released vLLM-Ascend runner hands scheduled_tokens to msprobe's start() (main does, after
    vllm-ascend PR 13377): RL608 reads the runner, so a release with msprobe 26.1 is not reported."""
    from rlpatch.rules.rl608_scheduled_tokens_needs_msprobe_26_2 import passes_scheduled_tokens

    tree = _tree("vllm-ascend", version, tmp_path / "va")
    runner = tree / VLLM_RUNNER
    assert runner.is_file() and "debugger" in runner.read_text()  # the runner of a dumping release
    assert not passes_scheduled_tokens(runner)
