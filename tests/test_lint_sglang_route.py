"""The SGLang < 0.5.11 dump route (`MSPROBE_SGLANG_CONFIG*` + rlpatch's ModelRunner patch) is an
inference dump for the linter, and RL605 knows it needs the patch (issue 10.2)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from rlpatch.lint.engine import lint_path, select_rules
from rlpatch.lint.rule import LintOptions
from rlpatch.testing import case_root

SCRIPT = ("export MSPROBE_SGLANG_CONFIG=sg.json\n"
          "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang \\\n"
          "    actor_rollout_ref.rollout.enforce_eager=True\n")


def _codes(tmp_path: Path, sglang_root: Path) -> list[str]:
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT, encoding="utf-8")
    (tmp_path / "sg.json").write_text('{"task": "statistics", "dump_path": "/d/i", "level": "mix"}', encoding="utf-8")
    options = LintOptions(sglang_root=str(sglang_root))
    result = lint_path(str(script), options, select_rules(["RL1", "RL5", "RL6"], None))
    assert result.error is None
    return [f.code for f in result.findings]


def test_unpatched_sglang_is_reported_and_patched_one_passes(tmp_path: Path) -> None:
    root = tmp_path / "sglang-tree"
    shutil.copytree(case_root("sglang_runner"), root)
    assert _codes(tmp_path, root) == ["RL605"]
    applied = subprocess.run([sys.executable, "-m", "rlpatch.cli", "apply", "--mode", "inference", "--sglang-root",
                              str(root)], capture_output=True, text=True, timeout=120, check=False)
    assert applied.returncode == 0, applied.stderr
    assert _codes(tmp_path, root) == []
