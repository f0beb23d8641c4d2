"""`rlpatch verify` says when a set cannot be in place (issue 18.6) or was only partly checked (18.2),
and RL605 checks the vLLM-Ascend tree a consistency run with a vLLM rollout needs (18.2).

The small cases use trees written here and the repository's fixtures; the `upstream` cases use the
real released wheels (verl 0.5.0 and 0.9.1, vLLM-Ascend 0.23.0), patched and unpatched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

from rlpatch.lint.engine import lint_path, select_rules
from rlpatch.lint.rule import LintOptions

CONSISTENCY_FIXTURES = FIXTURES / "lint" / "consistency"


def old_verl(root: Path, version: str = "0.5.0") -> Path:
    """A verl tree of a release older than every consistency rule (only its version file matters)."""
    (root / "verl" / "version").mkdir(parents=True)
    (root / "verl" / "__init__.py").write_text("")
    (root / "verl" / "version" / "version").write_text(version + "\n")
    return root


def test_a_set_with_nothing_applicable_is_not_applied(tmp_path):
    tree = old_verl(tmp_path / "verl050")
    result = run_cli("verify", "--mode", "consistency", "--verl-root", str(tree))
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "set: not-applicable" in result.stdout
    assert f"not applied: no selected rule applies to verl 0.5.0 at {tree}" in result.stderr
    assert run_cli("status", "--mode", "consistency", "--verl-root", str(tree)).exit_code == 0  # status: always 0


def test_sglang_that_dumps_natively_needs_no_patch(tmp_path):
    root = tmp_path / "sglang0511"
    (root / "sglang").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    (root / "sglang" / "version.py").write_text('__version__ = "0.5.11"\n')
    result = run_cli("verify", "--mode", "inference", "--sglang-root", str(root))
    assert "not-applicable" in result.stdout and result.exit_code == 0, result.stdout + result.stderr


def test_consistency_with_only_the_verl_tree_says_the_set_is_incomplete(fixture_tree):
    tree = fixture_tree("verl_engine")
    assert run_cli("apply", "--mode", "consistency", "--verl-root", str(tree)).exit_code == 0
    result = run_cli("verify", "--mode", "consistency", "--verl-root", str(tree))
    assert result.exit_code == 0, result.stdout + result.stderr  # what was checked is in place
    assert ("note: the selected set also has vllm-ascend-dispatch-logger for vllm_ascend, and no vllm_ascend tree "
            "was checked: give --vllm-ascend-root to check it (incomplete set)") in result.stderr
    payload = json.loads(run_cli("verify", "--mode", "consistency", "--verl-root", str(tree), "--format", "json").stdout)
    assert payload["unchecked"] == [{"package": "vllm_ascend", "rules": ["vllm-ascend-dispatch-logger"]}]
    # without --mode the rules are those of the given roots: nothing is missing from the question
    payload = json.loads(run_cli("verify", "--verl-root", str(tree), "--format", "json").stdout)
    assert payload["unchecked"] == []


def rl605(script: Path, **options) -> list[tuple[str, str, str]]:
    result = lint_path(str(script), LintOptions(**options), select_rules(["RL605"], None))
    assert result.error is None, result.error
    return [(f.code, f.severity, f.message) for f in result.findings]


@pytest.fixture
def consistency_script(tmp_path) -> Path:
    for item in CONSISTENCY_FIXTURES.iterdir():
        shutil.copy(item, tmp_path / item.name)
    return tmp_path / "fsdp_vllm.sh"


def test_rl605_checks_the_vllm_ascend_tree(consistency_script, fixture_tree):
    verl, vllm_ascend = fixture_tree("verl_engine"), fixture_tree("vllm_ascend_runner")
    assert run_cli("apply", "--mode", "consistency", "--verl-root", str(verl)).exit_code == 0
    found = rl605(consistency_script, verl_root=str(verl), vllm_ascend_root=str(vllm_ascend))
    assert [(code, severity) for code, severity, _ in found] == [("RL605", "error")], found
    assert "vllm-ascend-dispatch-logger is absent" in found[0][2] and str(vllm_ascend) in found[0][2]
    assert run_cli("apply", "--mode", "consistency", "--vllm-ascend-root", str(vllm_ascend)).exit_code == 0
    assert rl605(consistency_script, verl_root=str(verl), vllm_ascend_root=str(vllm_ascend)) == []


def test_rl605_says_when_no_vllm_ascend_tree_is_known(consistency_script, fixture_tree):
    verl = fixture_tree("verl_engine")
    assert run_cli("apply", "--mode", "consistency", "--verl-root", str(verl)).exit_code == 0
    found = rl605(consistency_script, verl_root=str(verl), python="/nonexistent/python3")
    assert [(code, severity) for code, severity, _ in found] == [("RL605", "warning")], found
    assert "--vllm-ascend-root" in found[0][2]


def test_rl605_does_not_load_the_patch_wing_without_a_target(consistency_script):
    import subprocess
    import sys

    code = ("import sys\nfrom rlpatch.cli import main\n"
            f"try:\n    main(['lint', '--select', 'RL6', {str(consistency_script)!r}])\nexcept SystemExit:\n    pass\n"
            "print('PATCH', sorted(m for m in sys.modules if m.startswith(('rlpatch.patch', 'libcst'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert "PATCH []" in out, out


# --- the real released trees ----------------------------------------------------------------------


@pytest.mark.upstream
def test_real_verl_050_consistency_set_is_not_applied(tmp_path):
    from rlpatch.upstream.wheelcache import fresh_copy

    tree = fresh_copy("verl", "0.5.0", tmp_path / "verl050")
    result = run_cli("verify", "--mode", "consistency", "--verl-root", str(tree))
    assert result.exit_code == 1 and "set: not-applicable" in result.stdout, result.stdout + result.stderr


@pytest.mark.upstream
def test_real_vllm_ascend_0230_unpatched_then_patched(tmp_path, consistency_script):
    from rlpatch.upstream.wheelcache import LINUX_X86_64, fresh_copy

    verl = fresh_copy("verl", "0.9.1", tmp_path / "verl091")
    vllm_ascend = fresh_copy("vllm-ascend", "0.23.0", tmp_path / "va023", platform=LINUX_X86_64, python_version="3.11")
    assert run_cli("apply", "--mode", "consistency", "--verl-root", str(verl)).exit_code == 0
    options = {"verl_root": str(verl), "vllm_ascend_root": str(vllm_ascend)}
    found = rl605(consistency_script, **options)
    assert [(code, severity) for code, severity, _ in found] == [("RL605", "error")], found
    assert run_cli("verify", "--mode", "consistency", "--verl-root", str(verl), "--vllm-ascend-root",
                   str(vllm_ascend)).exit_code == 1
    assert run_cli("apply", "--mode", "consistency", "--vllm-ascend-root", str(vllm_ascend)).exit_code == 0
    assert rl605(consistency_script, **options) == []
    result = run_cli("verify", "--mode", "consistency", "--verl-root", str(verl), "--vllm-ascend-root", str(vllm_ascend))
    assert result.exit_code == 0 and "incomplete set" not in result.stderr, result.stdout + result.stderr
