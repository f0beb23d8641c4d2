"""Full consistency launch scripts lint clean; flipping any one setting gives exactly the expected codes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rlpatch.lint.engine import lint_path, select_rules
from rlpatch.lint.rule import LintOptions
from rlpatch.upstream.versions import Version

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lint" / "consistency"
A = "actor_rollout_ref.actor."
RO = "actor_rollout_ref.rollout."


def lint_codes(directory: Path, script: str, **options) -> list[str]:
    result = lint_path(str(directory / script), LintOptions(**options), select_rules(None, None))
    assert result.error is None, result.error
    return sorted({f.code for f in result.findings})


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    for item in FIXTURES.iterdir():
        shutil.copy(item, tmp_path / item.name)
    return tmp_path


@pytest.mark.parametrize("script", ["fsdp_vllm.sh", "megatron_vllm.sh"])
def test_consistency_script_is_clean(workdir: Path, script: str) -> None:
    result = lint_path(str(workdir / script), LintOptions(), select_rules(None, None))
    assert result.findings == [], [(f.code, f.message) for f in result.findings]
    assert [run.mode for run in result.runs] == ["consistency"]


COMMON_FLIPS = [
    # (file, old, new, expected codes)
    ("{s}", f"{RO}enforce_eager=True", f"{RO}enforce_eager=False", ["RL101"]),
    ("{s}", f"{RO}name=vllm", f"{RO}name=sglang", ["RL102"]),
    ("{s}", "trainer.balance_batch=False", "trainer.balance_batch=True", ["RL208"]),
    ("{s}", "trainer.val_before_train=False", "trainer.val_before_train=True", ["RL208"]),
    ("{s}", "model.use_remove_padding=True", "model.use_remove_padding=False", ["RL208"]),
    ("{s}", "skip.rollout.enable=False", "skip.rollout.enable=True", ["RL209"]),
    ("{s}", "trainer.nnodes=1", "trainer.nnodes=1 algorithm.rollout_correction.rollout_is=token", ["RL210"]),
    ("{s}", "export PROMPTS_ONLY=1", "export PROMPTS_ONLY=0", ["RL211"]),
    ("{s}", "export TORCHDYNAMO_DISABLE=1", "export TORCHDYNAMO_DISABLE=0", ["RL211"]),
    ("{s}", "export MSPROBE_ACTOR_CONFIG=./msprobe_actor.json", ":", ["RL211"]),
    ("{s}", "trainer.nnodes=1", f"trainer.nnodes=1 {RO}agent.num_workers=3", ["RL213"]),
    ("{s}", f"{A}use_dynamic_bsz=False", f"{A}use_dynamic_bsz=True", ["RL207"]),
    ("{s}", "trainer.nnodes=1", "trainer.nnodes=1 global_profiler.tool=precision_debugger", ["RL111"]),
    # L1 is not L0 (RL109) and cannot be compared module by module in a consistency run (RL507).
    ("msprobe_infer.json", '"level": "L0"', '"level": "L1"', ["RL109"]),
    # msprobe compare --consistent_check fails on mix dumps of two engines ("Conflicting comparison data").
    ("msprobe_actor.json", '"level": "L0"', '"level": "mix"', ["RL109"]),
    ("msprobe_infer.json", '"dump_path": "/tmp/msprobe_dump/infer",', "", ["RL105"]),
]
FSDP_FLIPS = [
    ("{s}", f"{RO}tensor_model_parallel_size=1", f"{RO}tensor_model_parallel_size=4", ["RL201"]),
    ("{s}", f"+{RO}engine_kwargs", f"{RO}engine_kwargs", ["RL103"]),
    ("{s}", "data.train_batch_size=$BATCH", "data.train_batch_size=32", ["RL204"]),
    ("{s}", f"{A}ppo_micro_batch_size_per_gpu=2", f"{A}ppo_micro_batch_size_per_gpu=1", ["RL205"]),
    # Ulysses SP 2 also halves the FSDP DP size (8 -> 4), so the micro-batch count is 2: RL205 too.
    ("{s}", f"{A}ulysses_sequence_parallel_size=1", f"{A}ulysses_sequence_parallel_size=2", ["RL205", "RL206"]),
    ("{s}", f"{A}ppo_mini_batch_size=$BATCH", f"{A}ppo_mini_batch_size=12", ["RL204", "RL205", "RL403"]),
    ("{s}", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=null", ["RL207"]),
    # rollout TP is 1 (RL201): dp=2 makes a 2-GPU replica, which fits; only the collection warning.
    ("{s}", f"{RO}data_parallel_size=1", f"{RO}data_parallel_size=2", ["RL214"]),
    ("{s}", "trainer.nnodes=1", f"trainer.nnodes=1 {RO}expert_parallel_size=2", ["RL405"]),
    ("{s}", "DUMP_PHASE=log_prob", "DUMP_PHASE=forward", ["RL211"]),
    # Two nodes: env must go to the Ray runtime env; DP doubles to 16, so 16/2/16 is not 1 and 1 % 2 != 0.
    ("{s}", "trainer.nnodes=1", "trainer.nnodes=2", ["RL205", "RL212", "RL404"]),
    ("{s}", f"{RO}n=1", f"{RO}n=1 {RO}pipeline_model_parallel_size=2", ["RL203"]),
]
MEGATRON_FLIPS = [
    ("{s}", f"{RO}tensor_model_parallel_size=$TP", f"{RO}tensor_model_parallel_size=2", ["RL202"]),
    ("{s}", "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=$TP",
     "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=2", ["RL202"]),
    ("{s}", f"{A}megatron.expert_model_parallel_size=1", f"{A}megatron.expert_model_parallel_size=2", ["RL202"]),
    ("{s}", "++actor_rollout_ref", "actor_rollout_ref", ["RL103"]),
    ("{s}", f"{A}ppo_micro_batch_size_per_gpu=8", f"{A}ppo_micro_batch_size_per_gpu=4", ["RL205"]),
    # PP 2 on the actor (ref inherits): consistency needs PP 1, actor/ref != rollout PP, and DP 8/(4*2)=1.
    ("{s}", f"{A}megatron.pipeline_model_parallel_size=1", f"{A}megatron.pipeline_model_parallel_size=2",
     ["RL202", "RL203", "RL205"]),
    ("{s}", f"{RO}pipeline_model_parallel_size=1", f"{RO}pipeline_model_parallel_size=2",
     ["RL202", "RL203"]),
    # rollout EP 2 differs from the actor's EP 1 (RL202) and from tp*dp = 4 (RL405).
    ("{s}", "trainer.nnodes=1", f"trainer.nnodes=1 {RO}expert_parallel_size=2", ["RL202", "RL405"]),
    # Without model_engine the run is FSDP: TP 4 < 8 cards, DP 8 so 16/8/8 != 1 and per-GPU 2 % micro 8 != 0.
    ("{s}", "model_engine=megatron", "trainer.project_name=x", ["RL201", "RL205", "RL404"]),
    ("{s}", f"{A}megatron.tensor_model_parallel_size=$TP", f"{A}megatron.tensor_model_parallel_size=3",
     ["RL202", "RL402"]),
    ("{s}", "trainer.nnodes=1", "trainer.nnodes=2", ["RL205", "RL212", "RL404"]),
]


def _flip(workdir: Path, script: str, target: str, old: str, new: str) -> None:
    path = workdir / target.format(s=script)
    text = path.read_text()
    assert text.count(old) == 1, (target, old)
    path.write_text(text.replace(old, new))


def _flip_version(old: str) -> Version:
    """The flips above are what verl 0.8.0 reports: there the pairing needs single-request micro-batches
    and a full-model rollout replica (RL201/204/205/207). The skip switch is 0.9's key."""
    return Version.parse("0.9.1" if "skip.rollout" in old else "0.8.0")


@pytest.mark.parametrize("target,old,new,codes", COMMON_FLIPS + FSDP_FLIPS)
def test_fsdp_flip(workdir: Path, target: str, old: str, new: str, codes: list[str]) -> None:
    _flip(workdir, "fsdp_vllm.sh", target, old, new)
    assert lint_codes(workdir, "fsdp_vllm.sh", verl_version=_flip_version(old)) == codes


@pytest.mark.parametrize("target,old,new,codes", COMMON_FLIPS + MEGATRON_FLIPS)
def test_megatron_flip(workdir: Path, target: str, old: str, new: str, codes: list[str]) -> None:
    _flip(workdir, "megatron_vllm.sh", target, old, new)
    assert lint_codes(workdir, "megatron_vllm.sh", verl_version=_flip_version(old)) == codes


# verl 0.9.1 (the default): the engine patch logs each micro-batch's rows, so the script's own rollout
# TP, batch, micro-batches and dynamic batching pair request by request (issue 27); what still holds
# is Ulysses SP off (no rows under SP), verl's own arithmetic and the Ray env.
ROWS_FLIPS = [
    ("fsdp_vllm.sh", f"{RO}tensor_model_parallel_size=1", f"{RO}tensor_model_parallel_size=4", []),
    ("fsdp_vllm.sh", "data.train_batch_size=$BATCH", "data.train_batch_size=32", []),
    ("fsdp_vllm.sh", f"{A}ppo_micro_batch_size_per_gpu=2", f"{A}ppo_micro_batch_size_per_gpu=1", []),
    ("fsdp_vllm.sh", f"{A}ulysses_sequence_parallel_size=1", f"{A}ulysses_sequence_parallel_size=2", ["RL206"]),
    ("fsdp_vllm.sh", f"{A}ppo_mini_batch_size=$BATCH", f"{A}ppo_mini_batch_size=12", ["RL403"]),
    ("fsdp_vllm.sh", f"{A}use_dynamic_bsz=False", f"{A}use_dynamic_bsz=True", []),
    ("fsdp_vllm.sh", "trainer.balance_batch=False", "trainer.balance_batch=True", []),
    ("fsdp_vllm.sh", "trainer.nnodes=1", "trainer.nnodes=2", ["RL212", "RL404"]),
    ("megatron_vllm.sh", f"{A}ppo_micro_batch_size_per_gpu=8", f"{A}ppo_micro_batch_size_per_gpu=4", []),
    ("megatron_vllm.sh", "model_engine=megatron", "trainer.project_name=x", ["RL404"]),
]


@pytest.mark.parametrize("script,old,new,codes", ROWS_FLIPS)
def test_rows_flip_on_verl_09(workdir: Path, script: str, old: str, new: str, codes: list[str]) -> None:
    _flip(workdir, script, "{s}", old, new)
    assert lint_codes(workdir, script) == codes


def test_two_mini_batches_with_the_update_dumped_on_verl_09(workdir: Path) -> None:
    """The second mini-batch's update runs on weights the rollout never had: RL204 holds on 0.9.1 too."""
    _flip(workdir, "fsdp_vllm.sh", "{s}", "data.train_batch_size=$BATCH", "data.train_batch_size=32")
    _flip(workdir, "fsdp_vllm.sh", "{s}", "DUMP_PHASE=log_prob", "DUMP_PHASE=update_actor")
    assert lint_codes(workdir, "fsdp_vllm.sh") == ["RL204"]


def test_version_dependent_skip_key(workdir: Path) -> None:
    """On 0.8.x the skip switch is actor_rollout_ref.rollout.skip.enable (the 0.9 key is not read)."""
    _flip(workdir, "fsdp_vllm.sh", "{s}", "skip.rollout.enable=False", "actor_rollout_ref.rollout.skip.enable=True")
    assert lint_codes(workdir, "fsdp_vllm.sh", verl_version=Version.parse("0.8.0")) == ["RL209"]
    assert lint_codes(workdir, "fsdp_vllm.sh") == []
