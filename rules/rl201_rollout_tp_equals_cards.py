"""RL201: FSDP consistency runs on verl < 0.9.0 need rollout tensor_model_parallel_size=1.

## What it does

Reports an FSDP consistency run on verl 0.7.x or 0.8.x whose rollout `tensor_model_parallel_size`
is not 1 (verl's default is 2).

## Why

`msprobe compare --consistent_check --backend fsdp` (26.2.0) joins the training side's q/k/v
(and gate/up) outputs to compare them with vLLM's fused qkv_proj (gate_up_proj); it never joins
inference tensor-parallel shards. An FSDP training rank holds every module's full activations, so
each inference dump must hold full activations too: one rollout rank per replica,
`actor_rollout_ref.rollout.tensor_model_parallel_size=1`. With TP > 1 every inference rank holds a
slice of qkv_proj, o_proj, gate_up_proj ... and the compare sets a shard against the full tensor.
Megatron runs are compared shard against shard: there the rollout TP must equal the training TP
(actor `megatron.tensor_model_parallel_size`), which RL202 checks with PP and EP.

## Use instead

Set `actor_rollout_ref.rollout.tensor_model_parallel_size=1`; more rollout replicas take the
remaining cards.

## Exceptions

verl 0.7.x and 0.8.x only. From verl 0.9.0 the engine patch logs each request's rows and the
vLLM-Ascend dispatch logger each step's rows and TP group: `rlpatch dumps pair` rebuilds the
sharded outputs from every TP rank of a replica (qkv as `[q|k|v]` per rank) before msprobe compares
them, so the script keeps its own rollout TP (issue 27).
"""

from __future__ import annotations

from rlpatch.lint.checks import ints, pairs_by_rows, related_of, value_fix
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ROLLOUT

_PY = "python3 -m verl.trainer.main_ppo \\\n    trainer.n_gpus_per_node=8 \\\n"
_C = {"mode": "consistency", "verl_version": "0.8.0"}  # verl 0.9.0+ pairs TP shards: see Exceptions


class RolloutTpEqualsCards(LintRule):
    code = "RL201"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "FSDP, verl < 0.9.0: rollout tensor_model_parallel_size must be 1 (no rows to rebuild TP shards from)"

    VALID = [
        Case(_PY + f"    {ROLLOUT}.tensor_model_parallel_size=1\n", options=_C),
        Case(_PY + f"    model_engine=megatron {ROLLOUT}.tensor_model_parallel_size=2\n", options=_C,
             note="Megatron: RL202 compares the parallel sizes item by item instead"),
        Case(_PY + f"    {ROLLOUT}.tensor_model_parallel_size=4\n", options={"mode": "inference"},
             note="only consistency runs are compared"),
        Case(_PY + f"    {ROLLOUT}.tensor_model_parallel_size=8\n", options={"mode": "consistency"},
             note="verl 0.9.1 (the default): dumps pair rebuilds the TP shards"),
    ]
    INVALID = [
        Case(_PY + f"    {ROLLOUT}.tensor_model_parallel_size=8\n", options=_C, expect=[(3, 58)],
             messages=["rollout tensor_model_parallel_size=8: msprobe's FSDP consistency compare joins the "
                       'training q/k/v and gate/up outputs, never inference TP shards, so each inference rank '
                       'must hold the whole model on verl 0.8.0; set '
                       'actor_rollout_ref.rollout.tensor_model_parallel_size=1, or run verl >= 0.9.0 (dumps pair '
                       'rebuilds the shards)'],
             fixed=_PY + f"    {ROLLOUT}.tensor_model_parallel_size=1\n"),
        Case(_PY + "    trainer.nnodes=1\n", options=_C, expect=[(1, 12)], note="verl's default rollout TP is 2"),
    ]

    def check(self, ctx: LintContext) -> None:
        if ctx.run.megatron or pairs_by_rows(ctx):
            return
        values = ints(ctx, f"{ROLLOUT}.tensor_model_parallel_size")
        if values is None:
            return
        [(tp, setting)] = values
        if tp != 1:
            ctx.report(f"rollout tensor_model_parallel_size={tp}: msprobe's FSDP consistency compare joins the "
                       "training q/k/v and gate/up outputs, never inference TP shards, so each inference rank must "
                       f"hold the whole model on verl {ctx.run.version}; set {ROLLOUT}.tensor_model_parallel_size=1, or "
                       "run verl >= 0.9.0 (dumps pair rebuilds the shards)",
                       at=setting.span, related=related_of(setting), fix=value_fix(setting, "1"))
