"""RL404: the per-GPU mini-batch must be a multiple of the micro batch size.

## What it does

Reports a per-GPU mini-batch (`ppo_mini_batch_size * rollout.n / DP`) that is not a multiple of
`ppo_micro_batch_size_per_gpu`.

## Why

Each training rank gets `ppo_mini_batch_size * rollout.n / DP` samples per update and splits them
into micro-batches of `ppo_micro_batch_size_per_gpu`; a remainder fails the update (or silently
drops samples, depending on the version). Not checked with dynamic batch sizes.

## Use instead

Choose a micro batch size that divides the per-GPU mini-batch.
"""

from __future__ import annotations

from rlpatch.lint.checks import ints, pick, related_of
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ACTOR, ROLLOUT

MICRO = f"{ACTOR}.ppo_micro_batch_size_per_gpu"
_PY = "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8 \\\n"


class MicroBatchDividesPerGpu(LintRule):
    code = "RL404"
    severity = "error"
    summary = "per-GPU batch not divisible by the micro batch size"

    VALID = [
        Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=32 {MICRO}=2\n"),
        Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=24 {MICRO}=2 {ACTOR}.use_dynamic_bsz=True\n"),
    ]
    INVALID = [
        Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=24 {MICRO}=2\n", expect=[(2, 105)]),
        Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=8 {ROLLOUT}.n=3 {MICRO}=2\n", options={"mode": "training"},
             expect=[(2, 134)]),
    ]

    def check(self, ctx: LintContext) -> None:
        micro = ctx.run.setting(MICRO)
        dynamic = ctx.run.setting(f"{ACTOR}.use_dynamic_bsz")
        if ctx.unresolved(micro, dynamic) or micro.is_null() or dynamic.as_bool():
            return
        values = ints(ctx, f"{ACTOR}.ppo_mini_batch_size", f"{ROLLOUT}.n", MICRO)
        dp, dp_settings = ctx.run.train_dp()
        if values is None or dp is None or ctx.unresolved(*dp_settings) or dp <= 0:
            return
        (mini, mini_s), (n, n_s), (micro_value, _) = values
        if (mini * n) % dp or micro_value <= 0:
            return  # RL403's finding
        per_gpu = mini * n // dp
        if per_gpu % micro_value:
            ctx.report(f"per-GPU batch {per_gpu} (= {mini} * {n} / DP {dp}) is not divisible by "
                       f"ppo_micro_batch_size_per_gpu={micro_value}", at=pick(micro, mini_s).span,
                       related=related_of(mini_s, n_s, micro))
