"""RL207: dynamic batch sizes off, and explicit log-prob micro batches, for consistency runs on verl < 0.9.0.

## What it does

Reports dynamic batch sizes (`use_dynamic_bsz`) in a consistency run on verl 0.7.x or 0.8.x, and ref/rollout
`log_prob_micro_batch_size_per_gpu` left to be derived.

## Why

Dynamic batch sizing (`use_dynamic_bsz`) regroups samples by token count, so the samples in a
training rank's forward differ from any inference rank's. Turn it off for the actor, the ref
log-prob and the rollout log-prob, and give `ref.log_prob_micro_batch_size_per_gpu` and
`rollout.log_prob_micro_batch_size_per_gpu` explicitly (null derives them).

## Use instead

Set `use_dynamic_bsz=False` for actor, ref and rollout, and give both
`log_prob_micro_batch_size_per_gpu` values.

## Exceptions

verl 0.7.x and 0.8.x only. From verl 0.9.0 the engine patch logs the rows of every micro-batch as
it runs (after dynamic batching regrouped the samples: verl 0.9.1's `index_select_tensor_dict`
moves each sample's request id with it), and `rlpatch dumps pair` pairs request by request.
"""

from __future__ import annotations

from rlpatch.lint.checks import expect_value, pairs_by_rows
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ACTOR, REF, ROLLOUT

_C = {"mode": "consistency", "verl_version": "0.8.0"}  # verl 0.9.0+ pairs by rows: see Exceptions
_GOOD = (f"python3 -m verl.trainer.main_ppo \\\n    {ACTOR}.use_dynamic_bsz=False \\\n"
         f"    {REF}.log_prob_micro_batch_size_per_gpu=4 \\\n    {ROLLOUT}.log_prob_micro_batch_size_per_gpu=4")


class DynamicBatchOff(LintRule):
    code = "RL207"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "verl < 0.9.0: dynamic batch size off and explicit ref/rollout log_prob_micro_batch_size_per_gpu"

    VALID = [
        Case(_GOOD + "\n", options=_C),
        Case(f"python3 -m verl.trainer.main_ppo {ACTOR}.use_dynamic_bsz=True\n", options={"mode": "consistency"},
             note="verl 0.9.1 (the default): the rows of each regrouped micro-batch are logged"),
    ]
    INVALID = [
        Case(_GOOD + f" \\\n    {ROLLOUT}.log_prob_use_dynamic_bsz=True\n", options=_C, expect=[(5, 56)]),
        Case(f"python3 -m verl.trainer.main_ppo {ACTOR}.use_dynamic_bsz=False\n", options=_C,
             expect=[(1, 12), (1, 12)]),
    ]

    def check(self, ctx: LintContext) -> None:
        if pairs_by_rows(ctx):
            return
        why = "dynamic batch sizing regroups samples across ranks"
        for key in (f"{ACTOR}.use_dynamic_bsz", f"{REF}.log_prob_use_dynamic_bsz", f"{ROLLOUT}.log_prob_use_dynamic_bsz"):
            expect_value(ctx, key, "false", why)
        for key in (f"{REF}.log_prob_micro_batch_size_per_gpu", f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu"):
            setting = ctx.run.setting(key)
            if not ctx.unresolved(setting) and setting.is_null():
                ctx.report(f"{key} must be set explicitly (null derives it)", at=setting.span)
