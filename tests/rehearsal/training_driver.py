"""The training side of the rehearsal, run in its own process: `python -m rehearsal.training_driver SPEC.json`.

Runs inside a process whose environment names the patched verl copy (PYTHONPATH), verl's CPU platform
plugin and the dump switches (set by rehearsal.training.run_training_side). It starts a local Ray
cluster, TransferQueue, a real verl worker group of `ActorRolloutRefWorker` (role actor, FSDP engine),
puts the rollout rows with the real `AgentLoopWorkerTQ._agent_loop_postprocess`, and runs the real
v1 `PPOTrainer._compute_old_log_prob` (and `_compute_ref_log_prob` with LoRA). Everything it starts,
it ends. SPEC lists scenarios (world size, strategy, LoRA), run one after
the other on the same cluster, each with its own worker group and msprobe config; each writes what the
trainer stored to its `result` path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any


def _config(common: dict[str, Any], scenario: dict[str, Any]) -> Any:
    """verl's own PPO trainer config (its Hydra files in the patched copy) with the rehearsal's overrides."""
    from hydra import compose, initialize_config_dir

    config_dir = Path(common["verl_root"]) / "verl" / "trainer" / "config"
    overrides = [
        f"actor_rollout_ref.model.path={common['model_dir']}",
        "+actor_rollout_ref.model.override_config.attn_implementation=eager",
        f"actor_rollout_ref.model.use_remove_padding={str(scenario.get('remove_padding', True)).lower()}",
        f"actor_rollout_ref.actor.strategy={scenario['strategy']}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={len(scenario['request_ids'])}",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.actor.use_dynamic_bsz=false",
        "actor_rollout_ref.actor.use_kl_loss=false",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={scenario.get('micro_batch', 1)}",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=false",
        "actor_rollout_ref.rollout.calculate_log_probs=false",
        "actor_rollout_ref.rollout.n=1",
        f"trainer.n_gpus_per_node={scenario['world_size']}",
        "trainer.nnodes=1",
        "trainer.device=cpu",
        "algorithm.use_kl_in_reward=false",
    ]
    if scenario["lora"]:
        overrides += ["actor_rollout_ref.model.lora_rank=4", "actor_rollout_ref.model.lora_alpha=8",
                      "actor_rollout_ref.model.target_modules=all-linear"]
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def _put_rows(scenario: dict[str, Any]) -> Any:
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
    rows = zip(scenario["request_ids"], scenario["prompts"], scenario["responses"], strict=True)
    for index, (request_id, prompt, response) in enumerate(rows):
        output = AgentLoopOutput(
            prompt_ids=prompt, response_ids=response, response_mask=[1] * len(response),
            response_logprobs=[0.0] * len(response), reward_score=0.0, num_turns=2,
            metrics=AgentLoopMetrics(), extra_fields={"request_id": request_id},  # as the patched LLMServerClient sets it
        )
        uid = f"{scenario['name']}-{index}"
        asyncio.run(worker._agent_loop_postprocess(output, False, uid=uid, session_id=0, global_steps=1))
        keys.append(f"{uid}_0_0")  # the postprocess's key: {uid}_{session_id}_{index}
    tags = [{"status": "success", "prompt_len": len(p), "response_len": len(r), "seq_len": len(p) + len(r), "global_steps": 1}
            for p, r in zip(scenario["prompts"], scenario["responses"], strict=True)]
    return tq.KVBatchMeta(partition_id="train", keys=keys, tags=tags)


def _worker_group(config: Any, scenario: dict[str, Any]) -> tuple[Any, Any]:
    """verl's worker group of ActorRolloutRefWorker (role actor) on CPU bundles, its own msprobe config."""
    import ray
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
    from verl.workers.engine_workers import ActorRolloutRefWorker

    pool = RayResourcePool(process_on_nodes=[scenario["world_size"]], use_gpu=False, max_colocate_count=1,
                           name_prefix=scenario["name"])
    worker_class = RayClassWithInitArgs(cls=ray.remote(ActorRolloutRefWorker), config=config.actor_rollout_ref, role="actor")
    group = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=worker_class, device_name="cpu",
                           worker_env={"MSPROBE_ACTOR_CONFIG": scenario["msprobe_config"]})
    group.init_model()
    return group, pool


def _end_group(group: Any, pool: Any) -> None:
    """Ends the scenario's workers and frees their CPU bundles for the next scenario."""
    import ray
    from ray.util.placement_group import remove_placement_group

    for worker in group.workers:
        ray.kill(worker)
    for placement_group in pool.pgs or []:
        remove_placement_group(placement_group)


def _trainer(config: Any, group: Any, lora: bool) -> Any:
    """verl's v1 sync trainer (the default trainer_mode) with just what its log-prob methods read.

    Its `init()` would start rollout servers and a data loader; the methods run here need neither.
    """
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    trainer = PPOTrainerSync.__new__(PPOTrainerSync)
    trainer.config = config
    trainer.actor_rollout_wg = group
    trainer.ref_in_actor = lora  # LoRA: the reference log-probs come from the actor with its adapter off
    trainer.ref_policy_wg = group
    return trainer


def _run(common: dict[str, Any], scenario: dict[str, Any]) -> dict[str, Any]:
    """One scenario: rows into TransferQueue, a worker group, the trainer's log-prob (and reference) pass."""
    import transfer_queue as tq

    config = _config(common, scenario)
    batch = _put_rows(scenario)
    group, pool = _worker_group(config, scenario)
    try:
        trainer = _trainer(config, group, scenario["lora"])
        metrics: dict[str, Any] = {}
        trainer._compute_old_log_prob(batch, metrics)
        fields = ["old_log_probs"]
        if scenario["lora"]:
            trainer._compute_ref_log_prob(batch, metrics)
            fields.append("ref_log_prob")
        stored = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=fields)
        return {name: [row.tolist() for row in stored[name].unbind()] for name in fields}
    finally:
        _end_group(group, pool)


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    # More logical CPUs than the machine's cores: TransferQueue's controller and storage actors take one each.
    ray.init(num_cpus=8, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False,
             runtime_env={"env_vars": {key: os.environ[key] for key in spec["worker_env"]}})
    try:
        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        try:
            for scenario in spec["scenarios"]:
                started = time.monotonic()
                result = _run(spec, scenario)
                result["seconds"] = time.monotonic() - started
                Path(scenario["result"]).write_text(json.dumps(result), encoding="utf-8")
        finally:
            tq.close()
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
