"""RL202: Megatron consistency runs need identical actor, ref and rollout parallel layouts.

## What it does

Reports a Megatron consistency run whose actor, ref and rollout tensor, pipeline and expert parallel
sizes differ.

## Why

A training rank and an inference rank hold the same shard of the model only when the layouts
match item by item: actor and ref `megatron.tensor_model_parallel_size`,
`pipeline_model_parallel_size`, `expert_model_parallel_size` equal rollout
`tensor_model_parallel_size`, `pipeline_model_parallel_size`, `expert_parallel_size`, and actor
and ref are identical. Any difference makes the dumps unalignable.

## Use instead

Give actor, ref and rollout the same TP, PP and EP sizes.
"""

from __future__ import annotations

from rlpatch.lint.checks import pick, related_of
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ACTOR, REF, ROLLOUT

PAIRS = (("tensor_model_parallel_size", "tensor_model_parallel_size"),
         ("pipeline_model_parallel_size", "pipeline_model_parallel_size"),
         ("expert_model_parallel_size", "expert_parallel_size"))
_PY = "python3 -m verl.trainer.main_ppo model_engine=megatron \\\n"
_C = {"mode": "consistency"}


class MegatronParallelMatch(LintRule):
    code = "RL202"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "Megatron: actor/ref megatron TP/PP/EP must equal rollout TP/PP/EP"

    VALID = [
        Case(_PY + f"    {ACTOR}.megatron.tensor_model_parallel_size=4 \\\n    {ROLLOUT}.tensor_model_parallel_size=4\n",
             options=_C),
        Case("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4\n",
             options=_C, note="FSDP: the megatron keys are not used"),
    ]
    INVALID = [
        Case(_PY + f"    {ACTOR}.megatron.tensor_model_parallel_size=4 \\\n    {ROLLOUT}.tensor_model_parallel_size=2\n",
             options=_C, expect=[(2, 65)]),
        Case(_PY + f"    {ACTOR}.megatron.tensor_model_parallel_size=2 \\\n    {ROLLOUT}.tensor_model_parallel_size=2 \\\n"
             f"    {REF}.megatron.tensor_model_parallel_size=1\n", options=_C, expect=[(4, 63)]),
    ]

    def check(self, ctx: LintContext) -> None:
        if not ctx.run.megatron:
            return
        for train_name, rollout_name in PAIRS:
            actor = ctx.run.setting(f"{ACTOR}.megatron.{train_name}")
            ref = ctx.run.setting(f"{REF}.megatron.{train_name}")
            rollout = ctx.run.setting(f"{ROLLOUT}.{rollout_name}")
            if ctx.unresolved(actor, ref, rollout):
                continue
            a, r, g = actor.as_int(), ref.as_int(), rollout.as_int()
            if a != g:
                at = pick(actor, rollout)
                ctx.report(f"actor megatron.{train_name}={a} but rollout {rollout_name}={g}: training and inference "
                           "shards differ", at=at.span, related=related_of(actor, rollout))
            if r != a:
                ctx.report(f"ref megatron.{train_name}={r} but actor megatron.{train_name}={a}: actor and ref must "
                           "be identical", at=pick(ref, actor).span, related=related_of(ref, actor))
