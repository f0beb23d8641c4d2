"""Skip verl's rollout-vs-actor debug metrics when there is nothing to compare (PROMPTS_ONLY=1).

## What it patches

At the start of `calculate_debug_metrics` (`verl/utils/debug/metrics.py`): with `PROMPTS_ONLY` on, or
without response tokens to compare, log `skipping debug metrics` and return zero metrics.

## Why

`calculate_debug_metrics` compares `rollout_log_probs` with `old_log_probs` over the response
tokens. With PROMPTS_ONLY=1 the batch keeps zero response tokens, and the comparison would fail on
empty tensors (or on missing keys) and stop the run. At the start of the function: when PROMPTS_ONLY
is on, or `responses` / `old_log_probs` / `rollout_log_probs` is missing or has zero tokens, log a
warning containing `skipping debug metrics` and return the metrics with zero values.

## Versions

Anchor: the docstring of the top-level function
`calculate_debug_metrics` in `verl/utils/debug/metrics.py` (verl 0.6.0 to 0.9.1); the code goes right
after it. The module has no `import os`: the inserted code imports it first thing in the function
(bound before any use, so it cannot shadow a later use) and uses the module's `logger`.

## Trainer

Every trainer calls this function after recomputing log-probs (`RayPPOTrainer`, the v1
`PPOTrainer._compute_old_log_prob`, `FullyAsyncTrainer`), so the one patch serves them all.
"""

from __future__ import annotations

import libcst as cst
from libcst import matchers as m

from rlpatch.patch.rule import AnchorError, Insertion, PatchCase, at_function_start

from ._verl_consistency import PROMPTS_ONLY_IS_ON, VerlConsistencyRule

SKIP_METRICS = """
import os

if {{switch}} or not all(
    key in {{first_parameter}}.batch.keys() and {{first_parameter}}.batch[key].size(-1) > 0
    for key in ("responses", "old_log_probs", "rollout_log_probs")
):
    logger.warning("PROMPTS_ONLY is on or the batch has no response log-probs: skipping debug metrics")
    return {
        "training/rollout_probs_diff_valid": 0,
        "training/rollout_probs_diff_max": 0.0,
        "training/rollout_probs_diff_mean": 0.0,
        "training/rollout_probs_diff_std": 0.0,
        "training/rollout_actor_probs_pearson_corr": 0.0,
    }
"""

MODULE_LOGGER = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name("logger"))])])


class VerlDebugMetrics(VerlConsistencyRule):
    """calculate_debug_metrics returns zero metrics instead of failing when PROMPTS_ONLY=1."""

    id = "verl-debug-metrics"
    files = ("verl/utils/debug/metrics.py",)
    versions = "0.7.0+ (anchor also in 0.6.x)"
    trainer = "every trainer: RayPPOTrainer.fit, v1 PPOTrainer._compute_old_log_prob, FullyAsyncTrainer"
    trainers = frozenset({"v0", "v1", "fully-async"})
    markers = ("PROMPTS_ONLY",)

    VALID = [
        PatchCase(
            '''
import logging
logger = logging.getLogger(__file__)

def calculate_debug_metrics(data):
    """Rollout vs actor log-prob diff."""
    return {}
''',
            expected='''
import logging
logger = logging.getLogger(__file__)

def calculate_debug_metrics(data):
    """Rollout vs actor log-prob diff."""
    import os

    if os.environ.get("PROMPTS_ONLY", "").strip().lower() in ("1", "true", "yes", "on") or not all(
        key in data.batch.keys() and data.batch[key].size(-1) > 0
        for key in ("responses", "old_log_probs", "rollout_log_probs")
    ):
        logger.warning("PROMPTS_ONLY is on or the batch has no response log-probs: skipping debug metrics")
        return {
            "training/rollout_probs_diff_valid": 0,
            "training/rollout_probs_diff_max": 0.0,
            "training/rollout_probs_diff_mean": 0.0,
            "training/rollout_probs_diff_std": 0.0,
            "training/rollout_actor_probs_pearson_corr": 0.0,
        }
    return {}
''',
        ),
    ]

    INVALID = [
        # no docstring
        PatchCase(
            VALID[0].source.replace('"""Rollout vs actor log-prob diff."""', "pass"),
            refusal="verl/utils/debug/metrics.py: calculate_debug_metrics: expected a docstring as the first statement of the function, found none",
        ),
        # no module logger for the warning
        PatchCase(
            VALID[0].source.replace("logger = logging.getLogger(__file__)", ""),
            refusal="verl/utils/debug/metrics.py: expected a module-level `logger = ...` for the warning, found none",
        ),
    ]

    def insertions(self, path: str, module: cst.Module) -> list[Insertion]:
        if not any(m.matches(statement, MODULE_LOGGER) for statement in module.body):
            raise AnchorError(path, "a module-level `logger = ...` for the warning", "none")
        return at_function_start(module, path, "calculate_debug_metrics", SKIP_METRICS, switch=PROMPTS_ONLY_IS_ON)
