"""Findings say what the user needs to act on (issue 10.10, 10.11): what verl itself will do, and
which earlier value a later one undoes."""

from __future__ import annotations

from pathlib import Path

from rlpatch.lint.engine import lint_path, select_rules
from rlpatch.lint.rule import LintOptions

ACTOR = "actor_rollout_ref.actor"
DUMP = "++actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=/d/infer.json"


def messages(tmp_path: Path, script: str, select: str, **options: object) -> list[str]:
    path = tmp_path / "run.sh"
    path.write_text(script, encoding="utf-8")
    result = lint_path(str(path), LintOptions(**options), select_rules([select], None))  # type: ignore[arg-type]
    assert result.error is None
    return [f.message for f in result.findings if f.code == select]


def test_rl204_says_verl_refuses_a_batch_smaller_than_a_mini_batch(tmp_path: Path) -> None:
    (message,) = messages(tmp_path, f"python3 -m verl.trainer.main_ppo data.train_batch_size=2 {ACTOR}.ppo_mini_batch_size=8\n",
                          "RL204", mode="consistency")
    assert "verl refuses to start" in message and "ppo_mini_batch_size=2" in message


def test_rl101_names_the_earlier_true_it_overrides(tmp_path: Path) -> None:
    script = ("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.enforce_eager=True \\\n"
              f"    actor_rollout_ref.rollout.name=vllm {DUMP} \\\n"
              "    actor_rollout_ref.rollout.enforce_eager=False\n")
    (message,) = messages(tmp_path, script, "RL101")
    assert "overrides the earlier actor_rollout_ref.rollout.enforce_eager=True at line 1" in message


def test_one_finding_for_several_paths_reaching_the_launch_with_the_same_value(tmp_path: Path) -> None:
    """Issue 10.9: `case` branches that set the same bad value give one finding, the paths noted."""
    script = ('case "$BACKEND" in\n  a) EAGER=False; N=2 ;;\n  b) EAGER=False; N=4 ;;\n  *) exit 1 ;;\nesac\n'
              "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
              f"    actor_rollout_ref.rollout.enforce_eager=$EAGER actor_rollout_ref.rollout.n=$N {DUMP}\n")
    path = tmp_path / "run.sh"
    path.write_text(script, encoding="utf-8")
    result = lint_path(str(path), LintOptions(), select_rules(["RL101", "RL002"], None))
    assert [(f.code, f.span.line) for f in result.findings] == [("RL101", 2)]  # the `*) exit` path is no launch
    (finding,) = result.findings
    assert "2 paths reach this launch with this value; also set at line 3" in finding.message
    assert {(s.line, s.column) for s in finding.related} == {(3, 12), (7, 45)}


def test_the_wrapper_template_says_to_lint_the_original_with_its_overrides(tmp_path: Path) -> None:
    """Issue 10.11: `sed ... "$ORIG" > "$TMP"; bash "$TMP" overrides` gives a whole, actionable RL001."""
    script = ('ORIG=run_grpo.sh\nTMP=$(mktemp)\nsed "s/a/b/" "$ORIG" > "$TMP"\n'
              'bash "$TMP" actor_rollout_ref.rollout.enforce_eager=True \\\n'
              "    '+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=/d/x y.json'\n")
    (message,) = messages(tmp_path, script, "RL001")
    assert "\n" not in message and "line 4 runs `bash $(mktemp)`" in message
    assert ("`rlpatch lint ORIGINAL.sh -- actor_rollout_ref.rollout.enforce_eager=True "
                            "'+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=/d/x y.json'`") in message
