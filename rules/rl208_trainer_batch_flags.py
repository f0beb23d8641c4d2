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

## Exceptions

`trainer.balance_batch` on verl >= 0.9.0: the engine patch logs each micro-batch's request ids and
rows, and `rlpatch dumps pair` follows the ids wherever balancing moved the samples.
"""

from __future__ import annotations

from rlpatch.lint.checks import expect_value, pairs_by_rows
from rlpatch.lint.rule import Case, LintContext, LintRule

_C = {"mode": "consistency"}
_V08 = {"mode": "consistency", "verl_version": "0.8.0"}  # balance_batch: see Exceptions
_GOOD = ("python3 -m verl.trainer.main_ppo \\\n    trainer.balance_batch=False \\\n    trainer.val_before_train=False \\\n"
         "    actor_rollout_ref.model.use_remove_padding=True\n")


class TrainerBatchFlags(LintRule):
    code = "RL208"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "trainer.balance_batch=False, trainer.val_before_train=False, model.use_remove_padding=True"

    VALID = [
        Case(_GOOD, options=_C),
        Case(_GOOD.replace("balance_batch=False", "balance_batch=True"), options=_C,
             note="verl 0.9.1 (the default): the pairing follows the request ids"),
    ]
    INVALID = [
        Case(_GOOD.replace("balance_batch=False", "balance_batch=True"), options=_V08, expect=[(2, 27)]),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.model.use_remove_padding=False\n", options=_V08,
             expect=[(1, 12), (1, 12), (1, 77)]),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.model.use_remove_padding=False\n", options=_C,
             expect=[(1, 12), (1, 77)], note="verl 0.9.1: balance_batch (verl's default True) is not reported"),
    ]

    def check(self, ctx: LintContext) -> None:
        if not pairs_by_rows(ctx):
            expect_value(ctx, "trainer.balance_batch", "false", "it reorders samples across ranks")
        expect_value(ctx, "trainer.val_before_train", "false", "validation would be dumped as a step")
        expect_value(ctx, "actor_rollout_ref.model.use_remove_padding", "true", "padded and unpadded forwards differ")
