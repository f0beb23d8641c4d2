"""The inference-side rules through the engine on fixture trees: the try/finally wrap under revert
after user edits and under drift, and verify's count of hooked stop sites."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import FIXTURES, run_cli, snapshot

SGLANG_RUNNER = "sglang/srt/model_executor/model_runner.py"
VLLM_RUNNER = "vllm_ascend/worker/model_runner_v1.py"


def _sglang_043(tmp_path: Path) -> Path:
    tree = tmp_path / "sglang"
    shutil.copytree(FIXTURES / "sglang_runner", tree)
    shutil.copyfile(FIXTURES / "sglang_model_runner_043.py", tree / SGLANG_RUNNER)
    (tree / "sglang/version.py").write_text('__version__ = "0.4.3.post4"\n')
    return tree


def _state(result) -> str:
    (target,) = json.loads(result.stdout)["targets"]
    (rule,) = target["rules"]
    return rule["state"]


def test_revert_of_the_wrap_keeps_user_edits(tmp_path: Path) -> None:
    tree = _sglang_043(tmp_path)
    path = tree / SGLANG_RUNNER
    original = path.read_text()
    assert run_cli("apply", "--sglang-root", str(tree)).exit_code == 0
    patched = path.read_text()
    assert "        try:\n" in patched and "        finally:\n" in patched
    # The user edits a line inside the wrapped body and adds a function at the end.
    edited = (
        patched.replace('f"Invalid forward mode: ', 'f"Unknown forward mode: ') + "\n\ndef helper():\n    return 1\n"
    )
    path.write_text(edited)
    assert _state(run_cli("verify", "--sglang-root", str(tree), "--format", "json")) == "applied"
    result = run_cli("revert", "--sglang-root", str(tree))
    assert result.exit_code == 0, result.stderr
    expected = (
        original.replace('f"Invalid forward mode: ', 'f"Unknown forward mode: ') + "\n\ndef helper():\n    return 1\n"
    )
    assert path.read_text() == expected


def test_edited_finally_is_drift_and_revert_refuses(tmp_path: Path) -> None:
    tree = _sglang_043(tmp_path)
    path = tree / SGLANG_RUNNER
    assert run_cli("apply", "--sglang-root", str(tree)).exit_code == 0
    path.write_text(path.read_text().replace("self.msprobe_debugger.step()", "pass  # step disabled"))
    verify = run_cli("verify", "--sglang-root", str(tree), "--format", "json")
    assert verify.exit_code == 1 and _state(verify) == "drifted"
    before = snapshot(tree)
    assert run_cli("revert", "--sglang-root", str(tree)).exit_code == 1
    assert snapshot(tree) == before


def test_a_stop_site_without_a_hook_makes_verify_partial(tmp_path: Path) -> None:
    tree = tmp_path / "vllm_ascend"
    shutil.copytree(FIXTURES / "vllm_ascend_runner", tree)
    assert run_cli("apply", "--vllm-ascend-root", str(tree)).exit_code == 0
    path = tree / VLLM_RUNNER
    path.write_text(
        path.read_text() + "\n    def execute_dummy(self, scheduler_output):\n"
        "        if self.debugger is not None:\n"
        "            self.debugger.stop()\n"
    )
    verify = run_cli("verify", "--vllm-ascend-root", str(tree), "--format", "json")
    assert verify.exit_code == 1 and _state(verify) == "partial"
    (target,) = json.loads(verify.stdout)["targets"]
    assert "execute_dummy" in target["rules"][0]["message"]
    # apply completes the patch: every stop site hooked again.
    assert run_cli("apply", "--vllm-ascend-root", str(tree)).exit_code == 0
    assert path.read_text().count("self._finish_msprobe_step(scheduler_output)") == 3


def test_revert_without_state_folder_undoes_wrap_and_created_file(tmp_path: Path) -> None:
    sglang = _sglang_043(tmp_path)
    vllm_ascend = tmp_path / "vllm_ascend"
    shutil.copytree(FIXTURES / "vllm_ascend_runner", vllm_ascend)
    roots = ["--sglang-root", str(sglang), "--vllm-ascend-root", str(vllm_ascend)]
    pristine = (snapshot(sglang), snapshot(vllm_ascend))
    assert run_cli("apply", *roots).exit_code == 0
    for tree in (sglang, vllm_ascend):
        shutil.rmtree(tree / ".rlpatch")  # manifest and originals lost: revert works from structure
    result = run_cli("revert", *roots)
    assert result.exit_code == 0, result.stderr
    assert (snapshot(sglang), snapshot(vllm_ascend)) == pristine
