"""One fixture script per construct of spec section 1: the resolved overrides, token by token, with positions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlpatch.lint.engine import lint_path
from rlpatch.lint.rule import LintOptions

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lint" / "constructs"


def runs_of(name: str, **options):
    result = lint_path(str(FIXTURES / name), LintOptions(**options), [])
    assert result.error is None, result.error
    return result.runs


def overrides(name: str, **options) -> list[tuple[str, str, int, int]]:
    """(text, file basename, line, column) of every override of the first launch."""
    run = runs_of(name, **options)[0]
    return [(o.text, os.path.basename(o.span.file), o.span.line, o.span.column) for o in run.overrides]


EXPECTED = {
    "continuation.sh": [
        ("data.train_batch_size=16", "continuation.sh", 2, 5),
        ("trainer.nnodes=1", "continuation.sh", 3, 9),
        ("trainer.n_gpus_per_node=8", "continuation.sh", 4, 3),
    ],
    "variables.sh": [
        ("trainer.n_gpus_per_node=8", "variables.sh", 4, 5),
        ("actor_rollout_ref.model.path=Qwen/Qwen2.5-7B", "variables.sh", 5, 5),
        ("trainer.experiment_name=exp_8gpu", "variables.sh", 6, 5),
    ],
    "defaults.sh": [
        ("a=4", "defaults.sh", 7, 34), ("c=7", "defaults.sh", 7, 39), ("d=set", "defaults.sh", 7, 44),
        ("e=8", "defaults.sh", 7, 49), ("lower=qwen", "defaults.sh", 7, 54), ("upper=QWEN", "defaults.sh", 7, 70),
        ("unset_plus=", "defaults.sh", 7, 86),
    ],
    "arith.sh": [
        ("data.train_batch_size=64", "arith.sh", 4, 5),
        ("actor_rollout_ref.actor.ppo_mini_batch_size=4", "arith.sh", 5, 5),
        ("x=1", "arith.sh", 6, 5),
    ],
    "substitution.sh": [
        ("trainer.n_gpus_per_node=$(nproc)", "substitution.sh", 4, 5),
        ("trainer.experiment_name=run_`hostname`", "substitution.sh", 5, 5),
        ("trainer.nnodes=$SLURM_NNODES", "substitution.sh", 6, 5),
    ],
    "arrays.sh": [
        # array elements point at where they are written inside ARGS=( ... ), not at "${ARGS[@]}"
        ("data.train_batch_size=16", "arrays.sh", 3, 5),
        ("data.max_prompt_length=512", "arrays.sh", 4, 6),
        ("trainer.nnodes=1", "arrays.sh", 6, 9),
        ("count=3", "arrays.sh", 8, 47),
    ],
    "branches.sh": [
        ("model_engine=megatron", "branches.sh", 3, 12),
        ("actor_rollout_ref.rollout.tensor_model_parallel_size=4", "branches.sh", 12, 42),
    ],
    "loops_functions.sh": [
        ("trainer.experiment_name=exp1", "loops_functions.sh", 4, 38),
        ("data.seed=2", "loops_functions.sh", 9, 10),
    ],
    "heredoc.sh": [("trainer.nnodes=1", "heredoc.sh", 4, 34)],
    "hydra_syntax.sh": [
        ("+actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16", "hydra_syntax.sh", 3, 5),
        ("++trainer.val_before_train=False", "hydra_syntax.sh", 4, 5),
        ("~trainer.logger", "hydra_syntax.sh", 5, 5),
        ("data.train_files=[a.parquet,b.parquet]", "hydra_syntax.sh", 6, 5),
        ("trainer.logger=[console,wandb]", "hydra_syntax.sh", 7, 5),
        ("actor@actor_rollout_ref.actor=dp_actor", "hydra_syntax.sh", 8, 5),
    ],
    "hydra_short.sh": [("trainer.nnodes=1", "hydra_short.sh", 1, 61)],
    "error_node.sh": [
        ("trainer.device=[npu,cpu]", "error_node.sh", 2, 34),
        ("x=5", "error_node.sh", 2, 58),
        ("trainer.nnodes=1", "error_node.sh", 2, 79),
    ],
    "outer.sh": [
        ("trainer.nnodes=1", "inner.sh", 2, 5),
        ("data.train_batch_size=16", "outer.sh", 1, 17),
        ("trainer.experiment_name=outer run", "outer.sh", 1, 43),
    ],
    "sourcing.sh": [("trainer.n_gpus_per_node=4", "sourcing.sh", 2, 34)],
    "exports.sh": [("trainer.nnodes=1", "exports.sh", 6, 56)],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_resolved_overrides(name: str) -> None:
    assert overrides(name) == EXPECTED[name]


def test_passthrough_appends_extra_overrides_at_dollar_at() -> None:
    assert overrides("passthrough.sh", args=["extra=1", "+new.key=2"]) == [
        ("trainer.nnodes=1", "passthrough.sh", 2, 5),
        ("extra=1", "passthrough.sh", 3, 6),
        ("+new.key=2", "passthrough.sh", 3, 6),
    ]
    assert overrides("passthrough.sh") == [("trainer.nnodes=1", "passthrough.sh", 2, 5)]


def test_values_and_keys() -> None:
    run = runs_of("hydra_syntax.sh")[0]
    deleted = run.last_override("trainer.logger")
    assert deleted is not None and deleted.prefix == "" and deleted.value == "[console,wandb]"
    plus = run.overrides[0]
    assert (plus.prefix, plus.key, plus.value) == ("+", "actor_rollout_ref.actor.fsdp_config.model_dtype", "bfloat16")
    assert run.overrides[2].prefix == "~" and run.overrides[2].value is None
    assert run.setting("data.train_files").as_list() == ["a.parquet", "b.parquet"]
    assert (run.config_dir, run.config_name) == ("config", "ppo_megatron_trainer")
    assert run.train_backend_why() == ("megatron", "--config-name ppo_megatron_trainer")
    short = runs_of("hydra_short.sh")[0]
    assert (short.config_dir, short.config_name) == ("config", "ppo_trainer")


def test_unknown_values_stay_unknown_and_point_at_their_assignment() -> None:
    run = runs_of("substitution.sh")[0]
    setting = run.setting("trainer.n_gpus_per_node")
    assert not setting.known and setting.desc == "$(nproc)"
    assert (setting.span.line, setting.span.column) == (1, 7)  # NGPUS=$(nproc): the assignment that supplied it
    assert [(u.what, u.span.line, u.span.column) for u in run.unknown] == [
        ("trainer.n_gpus_per_node=$(nproc)", 1, 7),
        ("trainer.experiment_name=`hostname`", 2, 6),
        ("trainer.nnodes=$SLURM_NNODES", 6, 20),
    ]
    assert run.world_size() is None
    given = runs_of("substitution.sh", env={"SLURM_NNODES": "2"})[0]
    assert given.setting("trainer.nnodes").as_int() == 2


def test_exports_and_prefix_assignments_reach_the_launch_env() -> None:
    run = runs_of("exports.sh")[0]
    assert {name: var.text for name, var in run.env.items()} == {
        "DUMP_ON": "1", "PROMPTS_ONLY": "1", "DUMP_PHASE": "all", "MSPROBE_ACTOR_CONFIG": "actor.json",
        "TORCHDYNAMO_DISABLE": "1"}
    assert "LOCAL_ONLY" not in run.env
    assert (run.env["DUMP_ON"].span.line, run.env["DUMP_ON"].span.column) == (1, 16)


def test_unknown_condition_lints_both_paths() -> None:
    names = sorted(run.setting("actor_rollout_ref.rollout.name").value for run in runs_of("unknown_branch.sh"))
    assert names == ["sglang", "vllm"]
    assert [r.setting("actor_rollout_ref.rollout.name").value for r in runs_of("unknown_branch.sh", env={"USE_SGLANG": "1"})] == ["sglang"]


def test_launchers() -> None:
    runs = runs_of("launchers.sh")
    assert [(r.launch.entry, r.overrides[0].text, r.launch.ray_submit) for r in runs] == [
        ("verl.trainer.main_ppo", "a=1", False),
        ("recipe.dapo.main_dapo", "b=2", False),
        ("verl.trainer.main_ppo", "c=3", True),
        ("verl.trainer.main_ppo", "d=4", False),
        ("verl.trainer.main_ppo", "e=5", False),
        ("verl.trainer.main_ppo", "f=6", False),
        ("verl/trainer/main_ppo.py", "g=7", False),
    ]


def test_heredoc_body_is_not_a_command() -> None:
    run = runs_of("heredoc.sh")[0]
    assert [o.text for o in run.overrides] == ["trainer.nnodes=1"]


def test_config_file_values_under_overrides() -> None:
    run = runs_of("config_file.sh")[0]
    assert (run.config_dir, run.config_name) == ("config", "my_trainer")
    per_node = run.setting("trainer.n_gpus_per_node")
    assert (per_node.value, per_node.source, os.path.basename(per_node.span.file), per_node.span.line) == (
        "4", "config", "my_trainer.yaml", 5)
    assert run.setting("trainer.nnodes").value == "1"  # the command line wins over the file
    assert run.rollout_backend == "sglang"
    assert run.world_size() == 4
    assert run.env_reaches_workers() is True


def test_argument_count_is_unknown_without_args() -> None:
    """`if [ "$#" -lt 2 ]; then exit 1; fi` (verl's SFT scripts): without `-- args` both paths are plausible."""
    run = runs_of("usage_check.sh")[0]
    assert run.launch.entry == "verl.trainer.fsdp_sft_trainer"
    assert [o.text for o in run.overrides] == ["trainer.default_local_dir=$2"]
    with_args = runs_of("usage_check.sh", args=["8", "/ckpt", "trainer.nnodes=1"])[0]
    assert [o.text for o in with_args.overrides] == ["trainer.default_local_dir=/ckpt", "trainer.nnodes=1"]
    assert runs_of("usage_check.sh", args=["8"]) == []


def test_followed_file_relative_to_an_upper_folder(tmp_path: Path) -> None:
    """verl's scripts run `bash tests/special_e2e/x.sh` from the repository top, not from their own folder."""
    (tmp_path / "tests" / "e2e").mkdir(parents=True)
    (tmp_path / "tests" / "e2e" / "inner.sh").write_text('python3 -m verl.trainer.main_ppo "$@"\n')
    (tmp_path / "tests" / "e2e" / "all.sh").write_text("NUM_GPUS=8 bash tests/e2e/inner.sh trainer.nnodes=1\n")
    (tmp_path / "recipe").mkdir()
    (tmp_path / "recipe" / "run.sh").write_text("cd recipe/gkd\npython3 -m main_gkd trainer.nnodes=2\n")
    result = lint_path(str(tmp_path / "tests" / "e2e" / "all.sh"), LintOptions(), [])
    assert [(o.text, o.span.line) for o in result.runs[0].overrides] == [("trainer.nnodes=1", 1)]
    assert result.runs[0].env["NUM_GPUS"].text == "8"
    recipe = lint_path(str(tmp_path / "recipe" / "run.sh"), LintOptions(), [])
    assert recipe.runs[0].launch.entry == "main_gkd"


def test_finding_points_at_the_assignment_and_every_use(tmp_path: Path) -> None:
    from rlpatch.lint.engine import select_rules

    script = tmp_path / "v.sh"
    script.write_text("EAGER=False\nARGS=(\n  actor_rollout_ref.rollout.enforce_eager=$EAGER\n)\n"
                      "export DUMP_ON=1 PROMPTS_ONLY=1\npython3 -m verl.trainer.main_ppo "
                      "+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=d.json "
                      '"${ARGS[@]}"\n')
    (finding,) = lint_path(str(script), LintOptions(), select_rules(["RL101"], None)).findings
    assert (finding.span.line, finding.span.column, finding.span.end_column) == (1, 7, 12)  # EAGER=False
    assert [(s.line, s.column) for s in finding.related] == [(3, 43), (6, 123)]  # $EAGER, then "${ARGS[@]}"
