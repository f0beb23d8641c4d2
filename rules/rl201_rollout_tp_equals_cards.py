"""RL201: FSDP consistency runs need rollout TP equal to the GPUs per node (gen_tp >= cards).

To compare a training rank with an inference rank, every inference rank must correspond to one
training rank of the same batch. With FSDP that only holds when one rollout replica spans the
whole node: `actor_rollout_ref.rollout.tensor_model_parallel_size = trainer.n_gpus_per_node` and
`rollout.data_parallel_size=1`. With `gen_tp < cards` several replicas each see a different slice
of the batch and inference ranks cannot be paired with training ranks.
"""

from __future__ import annotations

from rlpatch.lint.checks import ints, pick, related_of
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.defaults import ROLLOUT

_PY = "python3 -m verl.trainer.main_ppo \\\n    trainer.n_gpus_per_node=8 \\\n"
_C = {"mode": "consistency"}


class RolloutTpEqualsCards(LintRule):
    code = "RL201"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "FSDP: rollout tensor_model_parallel_size must equal the GPUs per node"

    VALID = [
        Case(_PY + f"    {ROLLOUT}.tensor_model_parallel_size=8\n", options=_C),
        Case(_PY + f"    model_engine=megatron {ROLLOUT}.tensor_model_parallel_size=2\n", options=_C,
             note="Megatron: RL202 compares the parallel sizes item by item instead"),
        Case(_PY + f"    {ROLLOUT}.tensor_model_parallel_size=4\n", options={"mode": "inference"},
             note="only consistency runs need paired ranks"),
    ]
    INVALID = [
        Case(_PY + f"    {ROLLOUT}.tensor_model_parallel_size=4\n", options=_C, expect=[(3, 58)]),
        Case(_PY + "    trainer.nnodes=1\n", options=_C, expect=[(2, 29)], note="verl's default rollout TP is 2"),
    ]

    def check(self, ctx: LintContext) -> None:
        if ctx.run.megatron:
            return
        values = ints(ctx, f"{ROLLOUT}.tensor_model_parallel_size", "trainer.n_gpus_per_node")
        if values is None:
            return
        (tp, tp_setting), (cards, cards_setting) = values
        if tp < cards:
            at = pick(tp_setting, cards_setting)
            ctx.report(f"rollout tensor_model_parallel_size={tp} < trainer.n_gpus_per_node={cards}: inference ranks "
                       f"cannot be paired with training ranks; set tensor_model_parallel_size={cards} and "
                       "rollout.data_parallel_size=1", at=at.span, related=related_of(tp_setting, cards_setting))
