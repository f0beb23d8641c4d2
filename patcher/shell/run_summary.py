"""A run as `rlpatch detect` shows it: the stable JSON object of `detect --format json`.

The run model answers questions (`Run.setting`, `Run.detected_mode`, ...); this module only lays
its answers out: the mode and backends with their reasons, the sizes that decide the parallel
layout (each with its value, where it came from and its line), the overrides, the environment
the launch exports and what could not be resolved. `rlpatch detect`'s text is rendered from this
object by the command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlpatch.shell.defaults import ACTOR, REF, ROLLOUT

RUNTIME_ENV_PREFIX = "ray_kwargs.ray_init.runtime_env.env_vars."

if TYPE_CHECKING:
    from rlpatch.shell.model import Run

# The sizes `detect` shows, in this order (the Megatron ones only for a Megatron run).
SIZE_KEYS = (
    "trainer.n_gpus_per_node", "trainer.nnodes",
    f"{ROLLOUT}.tensor_model_parallel_size", f"{ROLLOUT}.data_parallel_size",
    f"{ROLLOUT}.pipeline_model_parallel_size", f"{ROLLOUT}.expert_parallel_size",
    f"{ACTOR}.ulysses_sequence_parallel_size", f"{REF}.ulysses_sequence_parallel_size",
    f"{ACTOR}.fsdp_config.ulysses_sequence_parallel_size", f"{REF}.fsdp_config.ulysses_sequence_parallel_size",
    f"{ACTOR}.megatron.tensor_model_parallel_size", f"{ACTOR}.megatron.pipeline_model_parallel_size",
    f"{ACTOR}.megatron.expert_model_parallel_size", f"{ACTOR}.megatron.context_parallel_size",
    f"{REF}.megatron.tensor_model_parallel_size", f"{REF}.megatron.pipeline_model_parallel_size",
    f"{REF}.megatron.expert_model_parallel_size", f"{REF}.megatron.context_parallel_size",
    "data.train_batch_size", f"{ACTOR}.ppo_mini_batch_size", f"{ACTOR}.ppo_micro_batch_size_per_gpu",
    f"{REF}.log_prob_micro_batch_size_per_gpu", f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu",
    f"{ROLLOUT}.n", f"{ROLLOUT}.agent.num_workers",
)


def run_summary(run: Run) -> dict:
    """The `rlpatch detect` object for `run` (its keys and their order are a contract)."""
    mode, why = run.detected_mode()
    backend, backend_why = run.train_backend_why()
    trainer, trainer_why, _ = run.trainer()
    return {
        "file": run.file,
        "entry": run.launch.entry,
        "mode": mode,
        "mode_reason": why,
        "rollout_backend": run.rollout_backend,
        "train_backend": backend,
        "train_backend_reason": backend_why,
        "trainer": trainer,
        "trainer_reason": trainer_why,
        # whether the entry module exists in the target verl (the tree, else the release; null: cannot tell)
        "entry_exists": run.entry_check().exists,
        "world_size": run.world_size(),
        "verl_version": str(run.version),
        "sizes": _sizes(run),
        "overrides": [
            {"text": o.text, "key": o.key, "value": o.value, "line": o.span.line, "column": o.span.column,
             "file": o.span.file}
            for o in run.overrides
        ],
        "env": {name: var.text for name, var in sorted(run.env.items())},
        "env_sources": {name: {"how": var.how, "file": var.span.file, "line": var.span.line}
                        for name, var in sorted(run.env.items())},
        "ray_submit": run.launch.ray_submit,
        "env_reaches_ray_workers": run.env_reaches_workers(),
        # the variables the Ray runtime env gives every worker (as `rlpatch gen` writes for multi-node runs)
        "runtime_env_vars": sorted({o.key[len(RUNTIME_ENV_PREFIX):] for o in run.effective_overrides()
                                    if o.key.startswith(RUNTIME_ENV_PREFIX) and o.prefix != "~"}),
        "unknown": [{"what": u.what, "file": u.span.file, "line": u.span.line, "column": u.span.column}
                    for u in run.unknown],
    }


def _sizes(run: Run) -> dict[str, dict]:
    """Each size's value, where it came from, and its line when the script or the config file sets it."""
    sizes = {}
    for key in SIZE_KEYS:
        if run.megatron is False and ".megatron." in key:
            continue
        setting = run.setting(key)
        sizes[key] = {"value": setting.value, "source": setting.source,
                      "line": setting.span.line if setting.is_set else None}
    return sizes
