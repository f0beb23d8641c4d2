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
    "verl_debug_metrics",
    "verl_rollout_corr",
    "verl_request_id",
    "verl_request_id_async",
    "sglang_model_runner",
    "vllm_ascend_dispatch_logger",
)

LINT_RULE_MODULES: tuple[str, ...] = ()


def load(module_names: tuple[str, ...]) -> list[ModuleType]:
    """Import the named rule modules of this package, in order."""
    return [importlib.import_module(f"{__name__}.{name}") for name in module_names]
