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
)


def load(module_names: tuple[str, ...]) -> list[ModuleType]:
    """Import the named rule modules of this package, in order."""
    return [importlib.import_module(f"{__name__}.{name}") for name in module_names]
