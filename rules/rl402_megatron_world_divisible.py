"""RL402: Megatron needs the world size divisible by tp * pp * cp.

## What it does

Reports a Megatron run whose world size is not divisible by `tp * pp * cp` of the actor (or of the
ref, when it differs).

## Why

Megatron's data-parallel size is `world / (tp * pp * cp)`; when that is not an integer
initialisation fails, and with `use_dynamic_bsz=True` verl skips its own check and the failure
comes later and less clearly. Checked for the actor and (when it differs) the ref.

## Use instead

Choose TP, PP and CP whose product divides the world size.
"""

from __future__ import annotations

from rlpatch.lint.checks import ints, pick, related_of
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ACTOR, REF

_PY = "python3 -m verl.trainer.main_ppo model_engine=megatron trainer.n_gpus_per_node=8 \\\n"


class MegatronWorldDivisible(LintRule):
    code = "RL402"
    severity = "error"
    summary = "Megatron world % (tp*pp*cp) != 0"

    VALID = [
        Case(_PY + f"    {ACTOR}.megatron.tensor_model_parallel_size=4 {ACTOR}.megatron.pipeline_model_parallel_size=2\n"),
        Case("python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8 "
             f"{ACTOR}.megatron.tensor_model_parallel_size=3\n", note="FSDP: megatron sizes are unused"),
    ]
    INVALID = [
        Case(_PY + f"    {ACTOR}.megatron.tensor_model_parallel_size=3\n", expect=[(2, 65), (2, 65)],
             note="the ref inherits the actor's sizes"),
        Case(_PY + f"    {ACTOR}.use_dynamic_bsz=True {ACTOR}.megatron.context_parallel_size=3\n",
             options={"mode": "training"}, expect=[(2, 105), (2, 105)]),
    ]

    def check(self, ctx: LintContext) -> None:
        if not ctx.run.megatron:
            return
        for role in (ACTOR, REF):
            values = ints(ctx, "trainer.n_gpus_per_node", "trainer.nnodes",
                          *(f"{role}.megatron.{n}_parallel_size" for n in ("tensor_model", "pipeline_model", "context")))
            if values is None:
                continue
            (per_node, _), (nodes, _), (tp, tp_s), (pp, pp_s), (cp, cp_s) = values
            world, product = per_node * nodes, tp * pp * cp
            if product > 0 and world % product:
                name = role.rsplit(".", 1)[-1]
                ctx.report(f"world size {world} is not divisible by {name} megatron tp*pp*cp = {tp}*{pp}*{cp} = {product}",
                           at=pick(tp_s, pp_s, cp_s).span, related=related_of(tp_s, pp_s, cp_s))
