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

## Exceptions

Every verl when the engine patch dumps the actor update (`DUMP_PHASE=update_actor` or `all`). When
it dumps only the log-prob pass (`DUMP_PHASE` unset or `log_prob`, gen's default) on verl >= 0.9.0,
the script keeps its mini-batches: the log-prob pass runs on the rollout's weights before any update,
and its rows are logged request by request. On verl 0.7.x and 0.8.x the pairing needs single-request
micro-batches, which one mini-batch is part of.
"""

from __future__ import annotations

from rlpatch.lint.checks import dumps_log_prob_only, ints, pairs_by_rows, pick, related_of, value_fix
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ACTOR

_C = {"mode": "consistency", "verl_version": "0.8.0"}  # see Exceptions


class SingleMiniBatch(LintRule):
    code = "RL204"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "one mini-batch (verl < 0.9.0, or the update dumped): train_batch_size / ppo_mini_batch_size == 1"

    VALID = [
        Case(f"python3 -m verl.trainer.main_ppo data.train_batch_size=16 {ACTOR}.ppo_mini_batch_size=16\n", options=_C),
        Case("python3 -m verl.trainer.main_ppo data.train_batch_size=16\n", options={"mode": "training"}),
        Case(f"python3 -m verl.trainer.main_ppo data.train_batch_size=16 {ACTOR}.ppo_mini_batch_size=8\n",
             options={"mode": "consistency"}, note="verl 0.9.1, the log-prob pass only: before any update"),
    ]
    INVALID = [
        Case(f"BS=64\npython3 -m verl.trainer.main_ppo \\\n    data.train_batch_size=$BS \\\n"
             f"    {ACTOR}.ppo_mini_batch_size=16\n", options=_C, expect=[(1, 4)]),
        Case("python3 -m verl.trainer.main_ppo data.train_batch_size=16\n", options=_C, expect=[(1, 56)]),
        Case(f"python3 -m verl.trainer.main_ppo data.train_batch_size=1 {ACTOR}.ppo_mini_batch_size=4\n", options=_C,
             expect=[(1, 102)], note="smaller than one mini-batch: verl refuses to start",
             fixed=f"python3 -m verl.trainer.main_ppo data.train_batch_size=1 {ACTOR}.ppo_mini_batch_size=1\n"),
        Case(f"export DUMP_PHASE=update_actor\npython3 -m verl.trainer.main_ppo data.train_batch_size=16 "
             f"{ACTOR}.ppo_mini_batch_size=8\n", options={"mode": "consistency"}, expect=[(2, 56)],
             note="verl 0.9.1, the update dumped: the second mini-batch runs on updated weights"),
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
                       related=related_of(batch_setting, mini_setting), fix=value_fix(mini_setting, str(batch)))
        elif batch != mini and not (pairs_by_rows(ctx) and dumps_log_prob_only(ctx)):
            ctx.report(f"data.train_batch_size={batch} / ppo_mini_batch_size={mini} is not 1: several actor updates "
                       "per step, the dumped weights drift from the rollout's", at=pick(batch_setting, mini_setting).span,
                       related=related_of(batch_setting, mini_setting), fix=value_fix(mini_setting, str(batch)))
