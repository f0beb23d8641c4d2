"""RL403: `ppo_mini_batch_size * rollout.n` must be divisible by the training DP size.

## What it does

Reports `ppo_mini_batch_size * rollout.n` not divisible by the training data-parallel size.

## Why

verl asserts this only at the first actor update, after a full rollout. DP is
world / (tp * pp * cp) with Megatron, world / Ulysses SP with FSDP.

## Use instead

Choose a mini-batch size (or `rollout.n`) whose product is a multiple of the DP size.
"""

from __future__ import annotations

from rlpatch.lint.checks import ints, pick, related_of
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ACTOR, ROLLOUT

_PY = "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8 \\\n"


class MiniBatchDivisibleByDp(LintRule):
    code = "RL403"
    severity = "error"
    summary = "ppo_mini_batch_size * rollout.n % DP != 0"

    VALID = [Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=4 {ROLLOUT}.n=2\n")]
    INVALID = [
        Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=6\n", expect=[(2, 49)]),
        Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=3 {ROLLOUT}.n=2\n", options={"mode": "consistency"},
             expect=[(2, 49)]),
    ]

    def check(self, ctx: LintContext) -> None:
        values = ints(ctx, f"{ACTOR}.ppo_mini_batch_size", f"{ROLLOUT}.n")
        dp, dp_settings = ctx.run.train_dp()
        if values is None or dp is None or ctx.unresolved(*dp_settings) or dp <= 0:
            return
        (mini, mini_s), (n, n_s) = values
        if (mini * n) % dp:
            ctx.report(f"ppo_mini_batch_size {mini} * rollout.n {n} = {mini * n} is not divisible by the training DP "
                       f"size {dp}: verl fails at the first actor update", at=pick(mini_s, n_s).span,
                       related=related_of(mini_s, n_s, *dp_settings))
