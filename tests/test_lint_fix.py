"""`rlpatch lint --fix` / `--diff` / `--unsafe-fixes` (issue 32, item 1): fixes edit the script's own
text, keep the author's layout, are written whole and never through a link, and a fixed script lints
clean for the rule and still composes under verl's real Hydra config."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_cli
from gen_harness import compose_real, run_with_stand_ins

DUMP_KEY = "actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path"
SCRIPT = f"""\
#!/bin/bash
# collect an inference dump
python3 -m verl.trainer.main_ppo \\
    actor_rollout_ref.rollout.name=vllm \\
    {DUMP_KEY}=/tmp/d.json \\
    actor_rollout_ref.rollout.enforce_eager=False \\
    trainer.n_gpus_per_node=8
"""
FIXED = SCRIPT.replace(f"    {DUMP_KEY}", f"    +{DUMP_KEY}").replace("enforce_eager=False", "enforce_eager=True")
IN_A_VARIABLE = "EAGER=False\n" + SCRIPT.replace("enforce_eager=False", "enforce_eager=$EAGER")


def _lint(tmp_path: Path, *args: str):
    return run_cli("lint", "--no-config", "--select", "RL101,RL103,RL303", *args, str(tmp_path / "run.sh"))


def test_diff_shows_and_fix_writes_the_same_edits(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT)
    script.chmod(0o750)
    diff = _lint(tmp_path, "--diff")
    assert diff.exit_code == 1 and script.read_text() == SCRIPT  # --diff writes nothing
    assert diff.stdout.startswith(f"--- {script}\n+++ {script}\n")
    assert f"\n-    {DUMP_KEY}=/tmp/d.json \\\n" in diff.stdout and f"\n+    +{DUMP_KEY}=/tmp/d.json \\\n" in diff.stdout
    assert "+    actor_rollout_ref.rollout.enforce_eager=True \\\n" in diff.stdout
    fixed = _lint(tmp_path, "--fix")
    assert fixed.exit_code == 0 and script.read_text() == FIXED
    assert os.stat(script).st_mode & 0o777 == 0o750
    assert "Fixed 2 findings in 1 file." in fixed.stderr
    again = _lint(tmp_path, "--fix")  # idempotent: nothing left to fix
    assert again.exit_code == 0 and script.read_text() == FIXED and "No fixes applied." in again.stderr
    assert _lint(tmp_path, "--diff").exit_code == 0


def test_a_variable_is_an_unsafe_fix(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(IN_A_VARIABLE)
    findings = json.loads(_lint(tmp_path, "--format", "json").stdout)["findings"]
    eager = next(f for f in findings if f["code"] == "RL101")
    assert eager["fix"] == {"applicability": "unsafe", "message": "set actor_rollout_ref.rollout.enforce_eager=True",
                            "edits": [{"content": "True", "line": 1, "column": 7, "end_line": 1, "end_column": 12}]}
    safe_only = _lint(tmp_path, "--fix")
    assert "EAGER=False\n" in script.read_text() and "(1 more with --unsafe-fixes)" in safe_only.stderr
    assert safe_only.exit_code == 1  # RL101 remains
    assert _lint(tmp_path, "--fix", "--unsafe-fixes").exit_code == 0
    assert script.read_text().startswith("EAGER=True\n")


def test_fix_never_writes_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real.sh"
    target.write_text(SCRIPT)
    (tmp_path / "run.sh").symlink_to(target)
    result = _lint(tmp_path, "--fix")
    assert result.exit_code == 2 and target.read_text() == SCRIPT and (tmp_path / "run.sh").is_symlink()
    assert "a symbolic link: not fixed" in result.stderr


def test_sarif_carries_the_fixes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "run.sh").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    log = json.loads(run_cli("lint", "--no-config", "--format", "sarif", "run.sh").stdout)
    fixes = {r["ruleId"]: r.get("fixes") for r in log["runs"][0]["results"]}
    (change,) = fixes["RL101"][0]["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "run.sh"
    assert change["replacements"] == [{"deletedRegion": {"startLine": 6, "startColumn": 45, "endLine": 6, "endColumn": 50},
                                       "insertedContent": {"text": "True"}}]


@pytest.mark.upstream
def test_a_fixed_script_composes_under_verls_hydra(tmp_path: Path) -> None:
    """The oracle: Hydra's own compose on the released verl 0.9.1 config refuses the script before the
    fix (a plain key below the empty engine_kwargs dict; `+` on a key that exists) and accepts it after."""
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.replace("trainer.n_gpus_per_node=8", "+actor_rollout_ref.actor.fsdp_config.model_dtype=fp32"))

    def composes() -> bool:
        (received,) = run_with_stand_ins(script, tmp_path / "stand-ins")
        try:
            compose_real("0.9.1", received.hydra_args, received.entry)
        except Exception:  # noqa: BLE001 - any Hydra/OmegaConf error: verl would not start
            return False
        return True

    assert not composes()
    fixed = _lint(tmp_path, "--fix", "--verl-version", "0.9.1")
    assert fixed.exit_code == 0, fixed.stdout + fixed.stderr
    assert "++actor_rollout_ref.actor.fsdp_config.model_dtype=fp32" in script.read_text()
    assert composes()
