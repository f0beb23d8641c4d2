"""RL204: consistency runs need exactly one mini-batch per step.

## What it does

Reports a consistency run with more than one mini-batch per step (`data.train_batch_size /
actor.ppo_mini_batch_size > 1`).

## Why

With `data.train_batch_size / actor.ppo_mini_batch_size > 1` the actor updates several times per
step, so from the second mini-batch on the weights the training side dumps are no longer the
weights the rollout generated with: training and inference dumps cannot agree. Set
`actor_rollout_ref.actor.ppo_mini_batch_size` equal to `data.train_batch_size`. A mini-batch larger
than the batch is refused by verl itself at start-up (the message says so).

## Use instead

Set `actor_rollout_ref.actor.ppo_mini_batch_size` equal to `data.train_batch_size`.
"""

from __future__ import annotations

from rlpatch.lint.checks import ints, pick, related_of
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ACTOR

_C = {"mode": "consistency"}


class SingleMiniBatch(LintRule):
    code = "RL204"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "one mini-batch: data.train_batch_size / actor.ppo_mini_batch_size == 1"

    VALID = [
        Case(f"python3 -m verl.trainer.main_ppo data.train_batch_size=16 {ACTOR}.ppo_mini_batch_size=16\n", options=_C),
        Case("python3 -m verl.trainer.main_ppo data.train_batch_size=16\n", options={"mode": "training"}),
    ]
    INVALID = [
        Case(f"BS=64\npython3 -m verl.trainer.main_ppo \\\n    data.train_batch_size=$BS \\\n"
             f"    {ACTOR}.ppo_mini_batch_size=16\n", options=_C, expect=[(1, 4)]),
        Case("python3 -m verl.trainer.main_ppo data.train_batch_size=16\n", options=_C, expect=[(1, 56)]),
        Case(f"python3 -m verl.trainer.main_ppo data.train_batch_size=1 {ACTOR}.ppo_mini_batch_size=4\n", options=_C,
             expect=[(1, 102)], note="smaller than one mini-batch: verl refuses to start"),
    ]

    def check(self, ctx: LintContext) -> None:
        values = ints(ctx, "data.train_batch_size", f"{ACTOR}.ppo_mini_batch_size")
        if values is None:
            return
        (batch, batch_setting), (mini, mini_setting) = values
        if batch < mini:
            ctx.report(f"data.train_batch_size={batch} < ppo_mini_batch_size={mini}: verl refuses to start "
                       "(\"train_batch_size must be >= actor.ppo_mini_batch_size\", unless use_dynamic_bsz); set "
                       f"ppo_mini_batch_size={batch}", at=pick(mini_setting, batch_setting).span,
                       related=related_of(batch_setting, mini_setting))
        elif batch != mini:
            ctx.report(f"data.train_batch_size={batch} / ppo_mini_batch_size={mini} is not 1: several actor updates "
                       "per step, the dumped weights drift from the rollout's", at=pick(batch_setting, mini_setting).span,
                       related=related_of(batch_setting, mini_setting))
