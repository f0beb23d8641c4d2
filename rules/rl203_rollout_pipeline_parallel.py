"""RL203: no pipeline parallelism in the rollout (and none at all for consistency runs).

## What it does

Reports rollout `pipeline_model_parallel_size > 1` with vLLM or SGLang, and, in consistency runs,
any pipeline parallelism of actor, ref or rollout.

## Why

verl raises NotImplementedError for rollout `pipeline_model_parallel_size > 1` with vLLM or
SGLang, but only after Ray has started and the models are loading. For consistency runs, force
PP=1 on actor, ref and rollout as well: pipeline stages split a forward across ranks and the
per-rank dumps can no longer be paired.

## Use instead

Keep `pipeline_model_parallel_size=1` for the rollout, and for actor and ref in consistency runs.
"""

from __future__ import annotations

from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ACTOR, REF, ROLLOUT

_PP = f"{ROLLOUT}.pipeline_model_parallel_size"


class RolloutPipelineParallel(LintRule):
    code = "RL203"
    severity = "error"
    summary = "rollout pipeline_model_parallel_size > 1 with vllm/sglang; PP=1 everywhere for consistency"

    VALID = [
        Case(f"python3 -m verl.trainer.main_ppo {ROLLOUT}.name=vllm {_PP}=1\n"),
        Case(f"python3 -m verl.trainer.main_ppo {ROLLOUT}.name=trtllm {_PP}=2\n"),
        Case(f"python3 -m verl.trainer.main_ppo model_engine=megatron {ACTOR}.megatron.pipeline_model_parallel_size=2\n",
             options={"mode": "training"}),
    ]
    INVALID = [
        Case(f"python3 -m verl.trainer.main_ppo \\\n    {ROLLOUT}.name=sglang \\\n    {_PP}=2\n", expect=[(3, 60)]),
        Case(f"python3 -m verl.trainer.main_ppo model_engine=megatron \\\n"
             f"    {ACTOR}.megatron.pipeline_model_parallel_size=2\n", options={"mode": "consistency"},
             expect=[(2, 67), (2, 67)]),
    ]

    def check(self, ctx: LintContext) -> None:
        run = ctx.run
        pp = run.setting(_PP)
        name = run.setting(f"{ROLLOUT}.name")
        if not ctx.unresolved(pp, name) and (pp.as_int() or 1) > 1 and name.value in ("vllm", "sglang"):
            ctx.report(f"rollout pipeline_model_parallel_size={pp.value} with {name.value}: verl raises "
                       "NotImplementedError after Ray starts", at=pp.span, related=pp.related())
        if run.mode != "consistency" or not run.megatron:
            return
        for role in (ACTOR, REF):
            setting = run.setting(f"{role}.megatron.pipeline_model_parallel_size")
            if not ctx.unresolved(setting) and (setting.as_int() or 1) > 1:
                ctx.report(f"{role.rsplit('.', 1)[-1]} megatron.pipeline_model_parallel_size={setting.value}: "
                           "consistency runs need PP=1 on actor, ref and rollout", at=setting.span,
                           related=setting.related())
