"""RL208: consistency runs need `trainer.balance_batch=False`, `trainer.val_before_train=False` and `actor_rollout_ref.model.use_remove_padding=True`.

## What it does

Reports a consistency run without `trainer.balance_batch=False`, `trainer.val_before_train=False` or
`actor_rollout_ref.model.use_remove_padding=True`.

## Why

`balance_batch` reorders samples across DP ranks after rollout, so training rank k no longer
holds inference rank k's samples; `val_before_train` runs a validation rollout first that is
dumped as if it were step 0; without remove-padding the training forward sees padded batches
while the inference side does not. verl's defaults are True, True, True.

## Use instead

Set the three overrides.
"""

from __future__ import annotations

from rlpatch.lint.checks import expect_value
from rlpatch.lint.rule import Case, LintContext, LintRule

_C = {"mode": "consistency"}
_GOOD = ("python3 -m verl.trainer.main_ppo \\\n    trainer.balance_batch=False \\\n    trainer.val_before_train=False \\\n"
         "    actor_rollout_ref.model.use_remove_padding=True\n")


class TrainerBatchFlags(LintRule):
    code = "RL208"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "trainer.balance_batch=False, trainer.val_before_train=False, model.use_remove_padding=True"

    VALID = [Case(_GOOD, options=_C)]
    INVALID = [
        Case(_GOOD.replace("balance_batch=False", "balance_batch=True"), options=_C, expect=[(2, 27)]),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.model.use_remove_padding=False\n", options=_C,
             expect=[(1, 12), (1, 12), (1, 77)]),
    ]

    def check(self, ctx: LintContext) -> None:
        expect_value(ctx, "trainer.balance_batch", "false", "it reorders samples across ranks")
        expect_value(ctx, "trainer.val_before_train", "false", "validation would be dumped as a step")
        expect_value(ctx, "actor_rollout_ref.model.use_remove_padding", "true", "padded and unpadded forwards differ")
