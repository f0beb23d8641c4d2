"""The rule registry: the engines know rules only through these names.

Patch rules (LibCST transformers) and lint rules (checks over a resolved run) live side by side,
one module per rule, and are told apart by name so that each engine imports only its own family:
`rlpatch lint` must never import a patch rule (and with it libcst). Every `rlNNN_*.py` module is
a lint rule, found in this folder; every other module whose name does not start with `_` is a
patch rule, listed once below because their order (the output order of `rules`, `verify`, ...)
cannot be derived from their names (a test checks the list against the folder). Which dump modes
each lint rule checks is in the generated `_lint_modes` (`python -m rlpatch.rules` rewrites it
from the rule classes; a test fails while it is stale), so a lint imports only the rules its
runs' modes need without importing every rule to ask.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from rlpatch.rules._lint_modes import LINT_RULE_MODES

# The lint rule families, by the hundreds digit of their codes (SARIF tags them; the docs group them).
LINT_FAMILIES: dict[str, str] = {
    "RL0": "script", "RL1": "msprobe-collection", "RL2": "training-inference-consistency",
    "RL3": "hydra-config", "RL4": "parallel-sizes", "RL5": "msprobe-config", "RL6": "upstream-versions",
}

# The patch rules, in registry order.
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


def _lint_modules_here() -> tuple[str, ...]:
    """The lint rule modules of this folder (`rl` and a three-digit code), sorted by name (= by code)."""
    return tuple(sorted(name[:-3] for name in os.listdir(os.path.dirname(__file__))
                        if name[:2] == "rl" and name[2:5].isdigit() and name.endswith(".py")))


# Every `rlNNN_*.py` module of this folder: a new lint rule is a new file, nothing to list.
LINT_RULE_MODULES: tuple[str, ...] = _lint_modules_here()


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
