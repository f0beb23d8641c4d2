"""RL405: rollout `expert_parallel_size > 1` must equal `tp * dp` (except TensorRT-LLM).

## What it does

Reports a rollout `expert_parallel_size > 1` that differs from `tensor_model_parallel_size *
data_parallel_size` (vLLM and SGLang).

## Why

vLLM and SGLang place experts over the replica's tensor- and data-parallel ranks, so verl
requires `expert_parallel_size == tensor_model_parallel_size * data_parallel_size` and raises
only after Ray has started.

## Use instead

Set `expert_parallel_size` to `tensor_model_parallel_size * data_parallel_size`, or to 1.
"""

from __future__ import annotations

from rlpatch.lint.checks import ints, related_of
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ROLLOUT

EP = f"{ROLLOUT}.expert_parallel_size"
_PY = f"python3 -m verl.trainer.main_ppo {ROLLOUT}.tensor_model_parallel_size=4 \\\n"


class RolloutExpertParallel(LintRule):
    code = "RL405"
    severity = "error"
    summary = "rollout expert_parallel_size > 1 and != tp*dp (non-trtllm)"

    VALID = [
        Case(_PY + f"    {EP}=4 {ROLLOUT}.name=vllm\n"),
        Case(_PY + f"    {EP}=2 {ROLLOUT}.name=trtllm\n"),
    ]
    INVALID = [
        Case(_PY + f"    {EP}=2 {ROLLOUT}.name=vllm\n", expect=[(2, 52)]),
        Case(_PY + f"    {EP}=8 {ROLLOUT}.name=sglang\n", options={"mode": "consistency"}, expect=[(2, 52)]),
    ]

    def check(self, ctx: LintContext) -> None:
        name = ctx.run.setting(f"{ROLLOUT}.name")
        if name.value == "trtllm":
            return
        values = ints(ctx, EP, f"{ROLLOUT}.tensor_model_parallel_size", f"{ROLLOUT}.data_parallel_size")
        if values is None:
            return
        (ep, ep_s), (tp, tp_s), (dp, dp_s) = values
        if ep > 1 and ep != tp * dp:
            ctx.report(f"rollout expert_parallel_size={ep} must equal tp*dp = {tp}*{dp} = {tp * dp}", at=ep_s.span,
                       related=related_of(tp_s, dp_s))
