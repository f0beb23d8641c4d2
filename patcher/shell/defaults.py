"""verl's default values for the keys the lint rules read (facts about verl's released configs).

When a script does not override a key, the value verl will use is its config default; rules need
it (`enforce_eager` defaults to False, `trainer.balance_batch` to True, ...). These are facts read
from verl's `_generated_ppo_trainer.yaml` / `_generated_ppo_megatron_trainer.yaml` (0.8.0 to 0.9.1);
an entry that is a `Ref` follows another key (verl's `${oc.select:...}` interpolations).
"""

# No `from __future__ import annotations`: typing compiles each string annotation of a NamedTuple's
# fields (a ForwardRef each) at import, on every cold start of `rlpatch lint`; evaluated ones it takes as they are.

from typing import NamedTuple

from rlpatch.upstream.api import Version

AR = "actor_rollout_ref"
ROLLOUT = f"{AR}.rollout"
ACTOR = f"{AR}.actor"
REF = f"{AR}.ref"

NEWEST_VERL = Version.parse("0.9.1")


class Ref(NamedTuple):
    """The default of this key is the value of another key. (The records of this module are
    NamedTuples, not frozen dataclasses: `rlpatch lint` creates them at every cold start.)"""

    key: str


DEFAULTS: dict[str, str | Ref] = {
    "trainer.n_gpus_per_node": "8",
    "trainer.nnodes": "1",
    "trainer.balance_batch": "True",
    "trainer.val_before_train": "True",
    "data.train_batch_size": "1024",
    f"{AR}.model.use_remove_padding": "True",
    f"{ACTOR}.strategy": "fsdp",
    f"{ACTOR}.ppo_mini_batch_size": "256",
    f"{ACTOR}.ppo_micro_batch_size_per_gpu": "null",
    f"{ACTOR}.use_dynamic_bsz": "False",
    f"{ACTOR}.ulysses_sequence_parallel_size": "1",
    f"{ACTOR}.fsdp_config.ulysses_sequence_parallel_size": "1",
    f"{REF}.fsdp_config.ulysses_sequence_parallel_size": "1",
    f"{ACTOR}.megatron.tensor_model_parallel_size": "1",
    f"{ACTOR}.megatron.pipeline_model_parallel_size": "1",
    f"{ACTOR}.megatron.expert_model_parallel_size": "1",
    f"{ACTOR}.megatron.context_parallel_size": "1",
    f"{ACTOR}.profiler.enable": "False",
    f"{REF}.ulysses_sequence_parallel_size": Ref(f"{ACTOR}.ulysses_sequence_parallel_size"),
    f"{REF}.log_prob_micro_batch_size_per_gpu": "null",
    f"{REF}.log_prob_use_dynamic_bsz": Ref(f"{ACTOR}.use_dynamic_bsz"),
    f"{REF}.megatron.tensor_model_parallel_size": Ref(f"{ACTOR}.megatron.tensor_model_parallel_size"),
    f"{REF}.megatron.pipeline_model_parallel_size": Ref(f"{ACTOR}.megatron.pipeline_model_parallel_size"),
    f"{REF}.megatron.expert_model_parallel_size": Ref(f"{ACTOR}.megatron.expert_model_parallel_size"),
    f"{REF}.megatron.context_parallel_size": Ref(f"{ACTOR}.megatron.context_parallel_size"),
    f"{REF}.profiler.enable": "False",
    "critic.profiler.enable": "False",
    f"{ROLLOUT}.name": "???",
    f"{ROLLOUT}.enforce_eager": "False",
    f"{ROLLOUT}.tensor_model_parallel_size": "2",
    f"{ROLLOUT}.data_parallel_size": "1",
    f"{ROLLOUT}.pipeline_model_parallel_size": "1",
    f"{ROLLOUT}.expert_parallel_size": "1",
    f"{ROLLOUT}.n": "1",
    f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu": "null",
    f"{ROLLOUT}.log_prob_use_dynamic_bsz": Ref(f"{ACTOR}.use_dynamic_bsz"),
    f"{ROLLOUT}.agent.num_workers": "8",
    f"{ROLLOUT}.skip.enable": "False",
    "skip.rollout.enable": "False",
    "algorithm.rollout_correction.rollout_is": "null",
    "algorithm.rollout_correction.rollout_rs": "null",
    "algorithm.rollout_correction.rollout_rs_threshold": "null",
    "algorithm.rollout_correction.rollout_is_batch_normalize": "False",
    "algorithm.rollout_correction.bypass_mode": "False",
    "global_profiler.tool": "null",
    "global_profiler.steps": "null",
    "global_profiler.save_path": "null",
    "global_profiler.global_tool_config.precision_debugger.config_path": "null",
    "global_profiler.global_tool_config.precision_debugger.stages": "null",
    "model_engine": "null",
}


def ulysses_keys(role: str) -> tuple[str, str]:
    """A role's two Ulysses SP keys: the old one, and `fsdp_config`'s (the one the engine workers read).
    verl (0.7 to 0.9) copies the old value into `fsdp_config` only when the old one is > 1."""
    return f"{role}.ulysses_sequence_parallel_size", f"{role}.fsdp_config.ulysses_sequence_parallel_size"


class Rename(NamedTuple):
    """A config section verl moved: keys below `old` are below `new` from verl `since` on."""

    old: str
    new: str
    since: str


# Read from verl's generated configs: the rollout skip section left the rollout config in 0.9.0
# (`actor_rollout_ref.rollout.skip.enable` became the top-level `skip.rollout.enable`).
RENAMES: tuple[Rename, ...] = (
    Rename(f"{ROLLOUT}.skip", "skip.rollout", "0.9.0"),
)


def _moved(key: str, old: str, new: str) -> str | None:
    return new + key[len(old):] if key == old or key.startswith(old + ".") else None


def renamed_key(key: str, version: Version | None) -> tuple[str, Rename] | None:
    """The spelling of `key` on `version` when verl moved it (either way: an old key on a newer verl, a
    new key on an older one), with the rename; None when the key was not moved. With an unknown
    version both directions are offered (the caller checks which one exists)."""
    for rename in RENAMES:
        since = Version.parse(rename.since)
        newer = _moved(key, rename.old, rename.new)
        if newer is not None and (version is None or version >= since):
            return newer, rename
        older = _moved(key, rename.new, rename.old)
        if older is not None and (version is None or version < since):
            return older, rename
    return None


def rollout_skip_key(version: Version) -> str:
    """The rollout-skip switch moved in 0.9.0 (see `RENAMES`)."""
    moved = renamed_key(f"{ROLLOUT}.skip.enable", version)
    return moved[0] if moved else f"{ROLLOUT}.skip.enable"
