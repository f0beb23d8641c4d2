"""Skip rollout correction when PROMPTS_ONLY=1: there are no response tokens left to correct.

## What it patches

At the start of `compute_rollout_correction_and_add_to_batch`
(`verl/trainer/ppo/rollout_corr_helper.py`): with `PROMPTS_ONLY` on, `return batch, {}`.

## Why

`compute_rollout_correction_and_add_to_batch` computes importance weights and rejection masks over
the response tokens from `rollout_log_probs` and `old_log_probs`. With PROMPTS_ONLY=1 both have zero
tokens, so at the start of the function the batch is returned unchanged with no metrics:
`return batch, {}`.

## Versions

Anchor: the docstring of the top-level function
`compute_rollout_correction_and_add_to_batch` in `verl/trainer/ppo/rollout_corr_helper.py` (verl
0.6.1 to 0.9.1); the code goes right after it. The module has no `import os`: the inserted code
imports it first thing in the function.

## Trainer

Every trainer calls this function (`RayPPOTrainer`, the v1 `PPOTrainer._compute_advantage`,
`FullyAsyncTrainer`), so the one patch serves them all.
"""

from __future__ import annotations

import libcst as cst

from rlpatch.patch.rule import Insertion, PatchCase, at_function_start

from ._verl_consistency import PROMPTS_ONLY_IS_ON, VerlConsistencyRule

SKIP_CORRECTION = """
import os

if {{switch}}:
    # PROMPTS_ONLY: the batch holds prompts only; nothing to weight or reject.
    return {{first_parameter}}, {}
"""


class VerlRolloutCorr(VerlConsistencyRule):
    """compute_rollout_correction_and_add_to_batch returns the batch untouched when PROMPTS_ONLY=1."""

    id = "verl-rollout-corr"
    files = ("verl/trainer/ppo/rollout_corr_helper.py",)
    versions = "0.7.0+ (anchor also in 0.6.1)"
    trainer = "every trainer: RayPPOTrainer.fit, v1 PPOTrainer._compute_advantage, FullyAsyncTrainer"
    trainers = frozenset({"v0", "v1", "fully-async"})
    markers = ("PROMPTS_ONLY",)

    VALID = [
        PatchCase(
            '''
def compute_rollout_correction_and_add_to_batch(batch, rollout_corr_config):
    """Compute rollout correction weights."""
    return batch, {"rollout_corr/x": 1.0}
''',
            expected='''
def compute_rollout_correction_and_add_to_batch(batch, rollout_corr_config):
    """Compute rollout correction weights."""
    import os

    if os.environ.get("PROMPTS_ONLY", "").strip().lower() in ("1", "true", "yes", "on"):
        # PROMPTS_ONLY: the batch holds prompts only; nothing to weight or reject.
        return batch, {}
    return batch, {"rollout_corr/x": 1.0}
''',
        ),
    ]

    INVALID = [
        PatchCase(
            VALID[0].source.replace("compute_rollout_correction_and_add_to_batch", "compute_rollout_correction"),
            refusal="verl/trainer/ppo/rollout_corr_helper.py: expected exactly one top-level function compute_rollout_correction_and_add_to_batch, found 0",
        ),
    ]

    def insertions(self, path: str, module: cst.Module) -> list[Insertion]:
        return at_function_start(
            module, path, "compute_rollout_correction_and_add_to_batch", SKIP_CORRECTION, switch=PROMPTS_ONLY_IS_ON
        )
