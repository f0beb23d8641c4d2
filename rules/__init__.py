"""The rule registry: the engines know rules only through these lists.

Patch rules (LibCST transformers) and lint rules (checks over a resolved run) live side by side,
one module per rule. They are listed here by module name so that each engine imports only its
own family: `rlpatch lint` must never import a patch rule (and with it libcst).
A test checks that every module in this folder is listed exactly once.
"""

from __future__ import annotations

import importlib
from types import ModuleType

PATCH_RULE_MODULES: tuple[str, ...] = (
    "verl_engine_fsdp",
    "verl_engine_megatron",
    "verl_prompts_only",
    "verl_prompts_only_async",
    "verl_prompts_only_v1",
    "verl_debug_metrics",
    "verl_rollout_corr",
    "verl_request_id",
    "verl_request_id_async",
    "verl_request_id_v1",
    "sglang_model_runner",
    "vllm_ascend_dispatch_logger",
)

LINT_RULE_MODULES: tuple[str, ...] = (
    "rl001_no_entry_point",
    "rl002_unresolved_values",
    "rl003_broken_continuation",
    "rl101_enforce_eager",
    "rl102_mixed_inference_backends",
    "rl103_inference_dump_needs_plus",
    "rl104_training_config_dump_path",
    "rl105_inference_config_dump_path",
    "rl106_precision_debugger_keys",
    "rl107_precision_debugger_stages",
    "rl108_ignored_stages",
    "rl109_msprobe_level_mix",
    "rl110_precision_debugger_needs_verl_08",
    "rl111_nested_debuggers",
    "rl201_rollout_tp_equals_cards",
    "rl202_megatron_parallel_match",
    "rl203_rollout_pipeline_parallel",
    "rl204_single_mini_batch",
    "rl205_no_gradient_accumulation",
    "rl206_ulysses_sp_off",
    "rl207_dynamic_batch_off",
    "rl208_trainer_batch_flags",
    "rl209_rollout_skip_off",
    "rl210_rollout_correction_off",
    "rl211_consistency_env",
    "rl212_env_reaches_ray_workers",
    "rl213_agent_loop_workers",
    "rl214_rollout_dp_on_npu",
    "rl301_hydra_grammar",
    "rl302_unknown_key",
    "rl303_plus_on_existing_key",
    "rl304_megatron_keys_without_megatron",
    "rl305_rollout_name_missing",
    "rl306_rollout_mode_sync",
    "rl401_rollout_replicas_fit_world",
    "rl402_megatron_world_divisible",
    "rl403_mini_batch_divisible_by_dp",
    "rl404_micro_batch_divides_per_gpu",
    "rl405_rollout_expert_parallel",
    "rl501_msprobe_config_unreadable",
    "rl502_msprobe_config_value",
    "rl503_msprobe_config_cross_field",
    "rl504_msprobe_config_paths",
    "rl505_msprobe_config_ignored_keys",
    "rl506_msprobe_config_rank_outside_run",
    "rl507_consistency_needs_tensor_l0_mix",
    "rl601_sglang_dump_config_too_old",
    "rl602_sglang_needs_msprobe_26",
    "rl603_vllm_ascend_dump_key",
    "rl604_both_vllm_dump_keys",
    "rl605_verl_not_patched",
    "rl606_legacy_worker_on_verl_07",
    "rl607_trainer_not_covered",
)


# The lint rules that check only some dump modes, with those modes (every other lint rule checks all
# four, and only such a rule may check whole files). `rlpatch lint` imports one of these modules only
# when a run of one of its modes is linted: a script without a dump, the common case in a pre-commit
# hook, loads half the rule modules. A test checks this table against each class's `modes`.
LINT_RULE_MODES: dict[str, frozenset[str]] = {
    "rl101_enforce_eager": frozenset({"consistency", "inference"}),
    "rl102_mixed_inference_backends": frozenset({"consistency", "inference"}),
    "rl103_inference_dump_needs_plus": frozenset({"consistency", "inference"}),
    "rl104_training_config_dump_path": frozenset({"training"}),
    "rl105_inference_config_dump_path": frozenset({"consistency", "inference"}),
    "rl106_precision_debugger_keys": frozenset({"training"}),
    "rl107_precision_debugger_stages": frozenset({"training"}),
    "rl108_ignored_stages": frozenset({"training"}),
    "rl110_precision_debugger_needs_verl_08": frozenset({"training"}),
    "rl111_nested_debuggers": frozenset({"consistency", "training"}),
    "rl201_rollout_tp_equals_cards": frozenset({"consistency"}),
    "rl202_megatron_parallel_match": frozenset({"consistency"}),
    "rl204_single_mini_batch": frozenset({"consistency"}),
    "rl205_no_gradient_accumulation": frozenset({"consistency"}),
    "rl206_ulysses_sp_off": frozenset({"consistency"}),
    "rl207_dynamic_batch_off": frozenset({"consistency"}),
    "rl208_trainer_batch_flags": frozenset({"consistency"}),
    "rl209_rollout_skip_off": frozenset({"consistency"}),
    "rl210_rollout_correction_off": frozenset({"consistency"}),
    "rl211_consistency_env": frozenset({"consistency"}),
    "rl212_env_reaches_ray_workers": frozenset({"consistency"}),
    "rl213_agent_loop_workers": frozenset({"consistency"}),
    "rl214_rollout_dp_on_npu": frozenset({"consistency", "inference", "training"}),
    "rl507_consistency_needs_tensor_l0_mix": frozenset({"consistency"}),
    "rl605_verl_not_patched": frozenset({"consistency", "inference"}),
    "rl606_legacy_worker_on_verl_07": frozenset({"consistency"}),
    "rl607_trainer_not_covered": frozenset({"consistency"}),
}


def lint_modules_for(modes: frozenset[str] | None) -> tuple[str, ...]:
    """The lint rule modules a lint of runs in `modes` needs (None: every module), in list order."""
    if modes is None:
        return LINT_RULE_MODULES
    return tuple(name for name in LINT_RULE_MODULES if name not in LINT_RULE_MODES or LINT_RULE_MODES[name] & modes)


def lint_code(module_name: str) -> str:
    """The code of a lint rule module's rule: `rl201_rollout_tp_equals_cards` is RL201 (a test checks
    that each class's `code` agrees), so that `--select` can be checked without importing a rule."""
    return module_name.split("_", 1)[0].upper()


def load(module_names: tuple[str, ...]) -> list[ModuleType]:
    """Import the named rule modules of this package, in order."""
    return [importlib.import_module(f"{__name__}.{name}") for name in module_names]
