"""RL401: the world size must be a multiple of the rollout replica size (tp * dp * pp).

## What it does

Reports a world size (`trainer.n_gpus_per_node * trainer.nnodes`) that is smaller than, or not a
multiple of, the rollout replica size `tp * dp * pp`.

## Why

verl builds `world / (tp*dp*pp)` rollout replicas. If the world is not a multiple, the leftover
GPUs sit idle silently; if it is smaller, there are zero replicas and the run fails only after
the actor model is built (minutes in). World = `trainer.n_gpus_per_node * trainer.nnodes`.

## Use instead

Choose rollout sizes whose product divides the world size.
"""

from __future__ import annotations

from rlpatch.lint.checks import ints, pick, related_of
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ROLLOUT

_PY = "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8 \\\n"


class RolloutReplicasFitWorld(LintRule):
    code = "RL401"
    severity = "error"
    summary = "world size not divisible by rollout tp*dp*pp, or smaller"

    VALID = [
        Case(_PY + f"    {ROLLOUT}.tensor_model_parallel_size=4 {ROLLOUT}.data_parallel_size=2\n"),
        Case(_PY + f"    {ROLLOUT}.tensor_model_parallel_size=2\n", options={"mode": "consistency"}),
    ]
    INVALID = [
        Case(_PY + f"    {ROLLOUT}.tensor_model_parallel_size=3\n", expect=[(2, 58)]),
        Case(_PY + f"    {ROLLOUT}.tensor_model_parallel_size=16\n", options={"mode": "inference"}, expect=[(2, 58)]),
    ]

    def check(self, ctx: LintContext) -> None:
        values = ints(ctx, "trainer.n_gpus_per_node", "trainer.nnodes", f"{ROLLOUT}.tensor_model_parallel_size",
                      f"{ROLLOUT}.data_parallel_size", f"{ROLLOUT}.pipeline_model_parallel_size")
        if values is None:
            return
        (per_node, gpus), (nodes, nodes_s), (tp, tp_s), (dp, dp_s), (pp, pp_s) = values
        world, replica = per_node * nodes, tp * dp * pp
        if replica <= 0:
            return
        if world < replica:
            problem = f"is smaller than one rollout replica (tp*dp*pp={replica}): zero replicas"
        elif world % replica:
            problem = f"is not a multiple of the rollout replica size tp*dp*pp={replica}: {world % replica} GPUs sit idle"
        else:
            return
        ctx.report(f"world size {world} (n_gpus_per_node {per_node} x nnodes {nodes}) {problem}",
                   at=pick(tp_s, dp_s, pp_s, gpus).span, related=related_of(tp_s, dp_s, pp_s, gpus, nodes_s))
