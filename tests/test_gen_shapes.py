"""gen consistency on the shapes of verl's own examples (fixtures/gen_shapes, issue 28.1): the script it
writes sets every Megatron parallel dimension the alignment touches, composes under the released verl
0.9.1's real Hydra config, and lints clean with plain `rlpatch lint` (no --env)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli
from gen_harness import compose_real as _compose
from gen_harness import run_with_stand_ins

pytestmark = pytest.mark.upstream
AR = "actor_rollout_ref"


def test_megatron_lora_cp2_is_written_with_every_dimension_aligned(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    script = tmp_path / "lora.sh"
    shutil.copy(FIXTURES / "gen_shapes" / "megatron_lora_cp.sh", script)
    result = run_cli("gen", "consistency", str(script), "--verl-version", "0.9.1")
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    new = tmp_path / "lora.consistency-dump.sh"
    [call] = run_with_stand_ins(new, tmp_path)
    config = _compose("0.9.1", call.hydra_args)
    for role in ("actor", "ref"):
        megatron = OmegaConf.select(config, f"{AR}.{role}.megatron")
        assert (megatron.tensor_model_parallel_size, megatron.pipeline_model_parallel_size,
                megatron.context_parallel_size, megatron.expert_tensor_parallel_size) == (8, 1, 1, 8), role
    assert OmegaConf.select(config, f"{AR}.rollout.tensor_model_parallel_size") == 8
    lint = run_cli("lint", "--format", "json", "--verl-version", "0.9.1", str(new))
    errors = [f for f in json.loads(lint.stdout)["findings"] if f["severity"] == "error" and f["code"] not in ("RL605", "RL607")]
    assert errors == [], errors


def test_an_override_after_dashes_that_undoes_the_layout_is_refused_naming_the_fix(tmp_path: Path) -> None:
    script = tmp_path / "lora.sh"
    shutil.copy(FIXTURES / "gen_shapes" / "megatron_lora_cp.sh", script)
    key = f"{AR}.actor.megatron.context_parallel_size"
    result = run_cli("gen", "consistency", str(script), "--verl-version", "0.9.1", "--", f"{key}=2")
    assert result.exit_code == 2 and f"give {key}=1" in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lora.sh"]


def test_an_env_value_gen_relied_on_is_exported_by_the_new_script(tmp_path: Path) -> None:
    script = tmp_path / "lora.sh"
    shutil.copy(FIXTURES / "gen_shapes" / "megatron_lora_cp.sh", script)
    result = run_cli("gen", "consistency", str(script), "--verl-version", "0.9.1", "--env", "ROLLOUT_TP=4")
    assert result.exit_code in (0, 1), result.stderr
    new = tmp_path / "lora.consistency-dump.sh"
    assert "export ROLLOUT_TP=4" in new.read_text()
    [call] = run_with_stand_ins(new, tmp_path)
    assert call.final()[f"{AR}.rollout.tensor_model_parallel_size"] == "4"
    assert call.final()[f"{AR}.actor.megatron.tensor_model_parallel_size"] == "4"


def test_fsdp_tp8_big_batch_keeps_the_users_tp_and_batch(tmp_path: Path) -> None:
    """Issue 27.4 on the shape of verl's Ascend FSDP 80B example: rollout TP 8, batch 16 x n 16, mini 8,
    dynamic batch size stay as the script has them; SP 8 goes to 1 (no rows under Ulysses SP), the
    response to one token; the result composes under verl 0.9.1's real Hydra config and lints clean."""
    from omegaconf import OmegaConf

    script = tmp_path / "big.sh"
    shutil.copy(FIXTURES / "gen_shapes" / "fsdp_tp8_big_batch.sh", script)
    result = run_cli("gen", "consistency", str(script), "--verl-version", "0.9.1")
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    assert "256 requests" in result.stdout  # 16 prompts x n 16, every one dumped on each side
    new = tmp_path / "big.consistency-dump.sh"
    [call] = run_with_stand_ins(new, tmp_path)
    config = _compose("0.9.1", call.hydra_args)
    kept = {f"{AR}.rollout.tensor_model_parallel_size": 8, "data.train_batch_size": 16, f"{AR}.rollout.n": 16,
            f"{AR}.actor.ppo_mini_batch_size": 8, f"{AR}.actor.use_dynamic_bsz": True,
            f"{AR}.rollout.log_prob_use_dynamic_bsz": True, "trainer.n_gpus_per_node": 16, "trainer.nnodes": 4}
    assert {key: OmegaConf.select(config, key) for key in kept} == kept
    changed = {f"{AR}.actor.ulysses_sequence_parallel_size": 1, f"{AR}.ref.ulysses_sequence_parallel_size": 1,
               "data.max_response_length": 1, f"{AR}.rollout.enforce_eager": True, "trainer.total_training_steps": 1}
    assert {key: OmegaConf.select(config, key) for key in changed} == changed
    lint = run_cli("lint", "--format", "json", "--verl-version", "0.9.1", str(new))
    errors = [f for f in json.loads(lint.stdout)["findings"] if f["severity"] == "error" and f["code"] not in ("RL605", "RL607")]
    assert errors == [], errors


def test_minimal_writes_the_smoke_configuration(tmp_path: Path) -> None:
    """`gen --minimal`: rollout TP 1, one prompt, n = DP (64 here), one request per prefill."""
    from omegaconf import OmegaConf

    script = tmp_path / "big.sh"
    shutil.copy(FIXTURES / "gen_shapes" / "fsdp_tp8_big_batch.sh", script)
    result = run_cli("gen", "consistency", str(script), "--verl-version", "0.9.1", "--minimal")
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    [call] = run_with_stand_ins(tmp_path / "big.consistency-dump.sh", tmp_path)
    config = _compose("0.9.1", call.hydra_args)
    smoke = {f"{AR}.rollout.tensor_model_parallel_size": 1, "data.train_batch_size": 1, f"{AR}.rollout.n": 64,
             f"{AR}.rollout.max_num_seqs": 1, f"{AR}.actor.use_dynamic_bsz": False}
    assert {key: OmegaConf.select(config, key) for key in smoke} == smoke
