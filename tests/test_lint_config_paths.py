"""A dump config the script names but that does not exist is reported (issue 10.5)."""

from __future__ import annotations

from pathlib import Path

from rlpatch.lint.engine import lint_path, select_rules
from rlpatch.lint.rule import LintOptions

KEY = "+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path"


def _findings(tmp_path: Path, script: str) -> list[tuple[str, str, str]]:
    path = tmp_path / "run.sh"
    path.write_text(script, encoding="utf-8")
    result = lint_path(str(path), LintOptions(), select_rules(["RL501"], None))
    assert result.error is None
    return [(f.code, f.severity, f.message) for f in result.findings]


def test_relative_missing_config_is_a_warning_with_the_resolved_path(tmp_path: Path) -> None:
    ((code, severity, message),) = _findings(tmp_path, f"python3 -m verl.trainer.main_ppo {KEY}=cfg/infer.json\n")
    assert (code, severity) == ("RL501", "warning")
    assert str(tmp_path / "cfg" / "infer.json") in message and "working directory" in message


def test_missing_config_beside_the_script_is_an_error(tmp_path: Path) -> None:
    script = f'D=$(cd "$(dirname "$0")" && pwd)\npython3 -m verl.trainer.main_ppo {KEY}=$D/infer.json\n'
    assert [(c, s) for c, s, _ in _findings(tmp_path, script)] == [("RL501", "error")]


def test_every_config_reference_is_checked(tmp_path: Path) -> None:
    script = ("export MSPROBE_ACTOR_CONFIG=/nowhere/actor.json MSPROBE_SGLANG_CONFIG_DECODE=/nowhere/decode.json\n"
              "python3 -m verl.trainer.main_ppo global_profiler.tool=precision_debugger \\\n"
              "    global_profiler.global_tool_config.precision_debugger.config_path=/nowhere/train.json\n")
    found = _findings(tmp_path, script)
    assert [(c, s) for c, s, _ in found] == [("RL501", "warning")] * 3
    assert all("/nowhere/" in m and "every node" in m for _, _, m in found)


def test_an_existing_config_is_not_reported(tmp_path: Path) -> None:
    (tmp_path / "infer.json").write_text('{"task": "statistics", "dump_path": "/d", "level": "mix"}', encoding="utf-8")
    assert _findings(tmp_path, f"python3 -m verl.trainer.main_ppo {KEY}=infer.json\n") == []
