"""RL205: consistency runs on verl < 0.9.0 need no gradient accumulation.

## What it does

Reports a consistency run on verl 0.7.x or 0.8.x whose training ranks accumulate gradients over more than one micro-batch
(`ppo_mini_batch_size * rollout.n / ppo_micro_batch_size_per_gpu / DP > 1`), or whose micro batch is
not set.

## Why

`ppo_mini_batch_size * rollout.n / ppo_micro_batch_size_per_gpu / DP` is the number of
micro-batches each training rank accumulates. With more than one, a training rank's forward
covers a different slice of samples than any inference rank, so the dumps cannot be paired.
DP is world / (TP * PP * CP) with Megatron and world / Ulysses SP with FSDP (SP as the engine
workers read it: `fsdp_config.ulysses_sequence_parallel_size`, or the old key when it is > 1). The micro batch must
be set explicitly (null means dynamic or derived sizes).

## Use instead

Set `ppo_micro_batch_size_per_gpu` explicitly so that each rank runs exactly one micro-batch per
mini-batch.

## Exceptions

verl 0.7.x and 0.8.x only: their engine micro-batch has no nested `input_ids`, so the engine patch
logs no rows and only a single-request micro-batch pairs. From verl 0.9.0 each micro-batch's rows
are logged and `rlpatch dumps pair` pairs every request in it, at the script's own micro-batch size.
"""

from __future__ import annotations

from rlpatch.lint.checks import ints, pairs_by_rows, pick, related_of, value_fix
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ACTOR, ROLLOUT

MICRO = f"{ACTOR}.ppo_micro_batch_size_per_gpu"
_PY = "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8 \\\n"
_C = {"mode": "consistency", "verl_version": "0.8.0"}  # verl 0.9.0+ pairs by rows: see Exceptions


class NoGradientAccumulation(LintRule):
    code = "RL205"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "verl < 0.9.0: no gradient accumulation, mini * rollout.n / micro / DP == 1"

    VALID = [
        Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=16 {ROLLOUT}.n=2 {MICRO}=4\n", options=_C),
        Case(_PY + f"    model_engine=megatron {ACTOR}.megatron.tensor_model_parallel_size=4 \\\n"
             f"    {ACTOR}.ppo_mini_batch_size=8 {MICRO}=4\n", options=_C),
        Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=16 {ROLLOUT}.n=2 {MICRO}=2\n", options={"mode": "consistency"},
             note="verl 0.9.1 (the default): each micro-batch's rows are logged, every request pairs"),
    ]
    INVALID = [
        Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=16 {ROLLOUT}.n=2 {MICRO}=2\n", options=_C, expect=[(2, 135)],
             fixed=_PY + f"    {ACTOR}.ppo_mini_batch_size=16 {ROLLOUT}.n=2 {MICRO}=4\n"),
        Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=16\n", options=_C, expect=[(1, 12)]),
        Case(_PY + f"    {ACTOR}.ppo_mini_batch_size=16 {ROLLOUT}.n=2 {MICRO}=4 \\\n"
             f"    {ACTOR}.fsdp_config.ulysses_sequence_parallel_size=2\n", options=_C, expect=[(2, 135)],
             note="FSDP DP = world / SP, with SP from fsdp_config (0.9): 8 / 2 = 4, so 16 * 2 / 4 / 4 = 2"),
    ]

    def check(self, ctx: LintContext) -> None:
        if pairs_by_rows(ctx):
            return
        run = ctx.run
        micro = run.setting(MICRO)
        if ctx.unresolved(micro):
            return
        if micro.is_null():
            ctx.report(f"{MICRO} is not set: set it so that mini * n / micro / DP == 1", at=micro.span)
            return
        values = ints(ctx, f"{ACTOR}.ppo_mini_batch_size", f"{ROLLOUT}.n", MICRO)
        dp, dp_settings = run.train_dp()
        if values is None or dp is None or ctx.unresolved(*dp_settings):
            return
        (mini, mini_s), (n, n_s), (micro_value, _) = values
        if micro_value <= 0 or mini * n != micro_value * dp:
            steps = mini * n / (micro_value * dp) if micro_value > 0 else float("inf")
            whole = mini * n % dp == 0 and mini * n // dp > 0
            ctx.report(f"mini {mini} * rollout.n {n} / micro {micro_value} / DP {dp} = {steps:g} micro-batches per "
                       "rank (gradient accumulation); it must be 1", at=pick(micro, mini_s, n_s).span,
                       related=related_of(mini_s, n_s, micro, *dp_settings),
                       fix=value_fix(micro, str(mini * n // dp)) if whole else None)
