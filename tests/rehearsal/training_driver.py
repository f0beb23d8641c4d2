"""The training side of the rehearsal, run in its own process: `python -m rehearsal.training_driver SPEC.json`.

Runs inside a process whose environment names the patched verl copy (PYTHONPATH), verl's CPU platform
plugin and the dump switches (set by rehearsal.training.run_training_side). It starts a local Ray
cluster, TransferQueue, a real verl worker group of `ActorRolloutRefWorker` (role actor, FSDP engine),
puts the rollout rows with the real `AgentLoopWorkerTQ._agent_loop_postprocess`, and runs the real
v1 `PPOTrainer._compute_old_log_prob` (and `_compute_ref_log_prob` with LoRA). Everything it starts,
it ends. It writes what the trainer stored to SPEC's `result` path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any


def _config(spec: dict[str, Any]) -> Any:
    """verl's own PPO trainer config (its Hydra files in the patched copy) with the rehearsal's overrides."""
    from hydra import compose, initialize_config_dir

    config_dir = Path(spec["verl_root"]) / "verl" / "trainer" / "config"
    world_size = spec["world_size"]
    overrides = [
        f"actor_rollout_ref.model.path={spec['model_dir']}",
        "+actor_rollout_ref.model.override_config.attn_implementation=eager",
        "actor_rollout_ref.model.use_remove_padding=true",
        f"actor_rollout_ref.actor.strategy={spec['strategy']}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={len(spec['request_ids'])}",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.actor.use_dynamic_bsz=false",
        "actor_rollout_ref.actor.fsdp_config.param_offload=false",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false",
        "actor_rollout_ref.actor.use_kl_loss=false",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=false",
        "actor_rollout_ref.rollout.calculate_log_probs=false",
        "actor_rollout_ref.rollout.n=1",
        f"trainer.n_gpus_per_node={world_size}",
        "trainer.nnodes=1",
        "trainer.device=cpu",
        "algorithm.use_kl_in_reward=false",
    ]
    if spec["lora"]:
        overrides += ["actor_rollout_ref.model.lora_rank=4", "actor_rollout_ref.model.lora_alpha=8",
                      "actor_rollout_ref.model.target_modules=all-linear"]
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def _put_rows(spec: dict[str, Any]) -> Any:
    """The rollout rows, put into TransferQueue by the real v1 agent loop's postprocess (patched: request_id)."""
    import transfer_queue as tq
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

    worker_class = getattr(AgentLoopWorkerTQ, "__ray_actor_class__", AgentLoopWorkerTQ)  # a Ray actor class
    worker = worker_class.__new__(worker_class)  # the postprocess needs no server, reward or teacher
    worker.reward_loop_worker_handles = None
    worker.distillation_enabled = False
    worker.processor = None
    keys: list[str] = []
    for index, (request_id, prompt, response) in enumerate(zip(spec["request_ids"], spec["prompts"], spec["responses"], strict=True)):
        output = AgentLoopOutput(
            prompt_ids=prompt, response_ids=response, response_mask=[1] * len(response),
            response_logprobs=[0.0] * len(response), reward_score=0.0, num_turns=2,
            metrics=AgentLoopMetrics(), extra_fields={"request_id": request_id},
        )
        asyncio.run(worker._agent_loop_postprocess(output, False, uid=f"prompt{index}", session_id=0, global_steps=1))
        keys.append(f"prompt{index}_0_0")
    tags = [{"status": "success", "prompt_len": len(p), "response_len": len(r), "seq_len": len(p) + len(r), "global_steps": 1}
            for p, r in zip(spec["prompts"], spec["responses"], strict=True)]
    return tq.KVBatchMeta(partition_id="train", keys=keys, tags=tags)


def _worker_group(config: Any, world_size: int) -> Any:
    import ray
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
    from verl.workers.engine_workers import ActorRolloutRefWorker

    pool = RayResourcePool(process_on_nodes=[world_size], use_gpu=False, max_colocate_count=1)
    worker_class = RayClassWithInitArgs(cls=ray.remote(ActorRolloutRefWorker), config=config.actor_rollout_ref, role="actor")
    group = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=worker_class, device_name="cpu")
    group.init_model()
    return group


def _trainer(config: Any, group: Any, lora: bool) -> Any:
    """verl's v1 sync trainer (the default trainer_mode) with just what its log-prob methods read.

    Its `init()` would start rollout servers and a data loader; the methods run here need neither.
    """
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    trainer = PPOTrainerSync.__new__(PPOTrainerSync)
    trainer.config = config
    trainer.actor_rollout_wg = group
    trainer.ref_in_actor = lora
    trainer.ref_policy_wg = group
    return trainer


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    config = _config(spec)
    ray.init(num_cpus=8, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=spec.get("verbose", False),
             runtime_env={"env_vars": {key: os.environ[key] for key in spec["worker_env"]}})
    try:
        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        try:
            batch = _put_rows(spec)
            group = _worker_group(config, spec["world_size"])
            trainer = _trainer(config, group, spec["lora"])
            metrics: dict[str, Any] = {}
            trainer._compute_old_log_prob(batch, metrics)
            fields = ["old_log_probs"]
            if spec["lora"]:
                trainer._compute_ref_log_prob(batch, metrics)
                fields.append("ref_log_prob")
            stored = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=fields)
            result = {name: [row.tolist() for row in stored[name].unbind()] for name in fields}
            Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")
        finally:
            tq.close()
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
