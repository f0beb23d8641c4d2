"""RL213: the agent loop needs `data.train_batch_size` divisible by `rollout.agent.num_workers`.

## What it does

Reports a consistency run whose `data.train_batch_size` is not divisible by
`actor_rollout_ref.rollout.agent.num_workers` (default 8).

## Why

verl's agent loop splits each batch evenly over `actor_rollout_ref.rollout.agent.num_workers`
workers (default 8). An uneven split pads or reorders samples between workers, so inference
dumps no longer line up with the training batch order.

## Use instead

Choose a batch size that is a multiple of the agent-loop worker count, or a worker count that
divides the batch.
"""

from __future__ import annotations

from rlpatch.lint.checks import ints, pick, related_of
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ROLLOUT

_C = {"mode": "consistency"}


class AgentLoopWorkers(LintRule):
    code = "RL213"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "agent loop: data.train_batch_size divisible by rollout.agent.num_workers"

    VALID = [
        Case("python3 -m verl.trainer.main_ppo data.train_batch_size=16\n", options=_C),
        Case(f"python3 -m verl.trainer.main_ppo data.train_batch_size=6 {ROLLOUT}.agent.num_workers=3\n", options=_C),
    ]
    INVALID = [
        Case("python3 -m verl.trainer.main_ppo data.train_batch_size=12\n", options=_C, expect=[(1, 56)]),
    ]

    def check(self, ctx: LintContext) -> None:
        values = ints(ctx, "data.train_batch_size", f"{ROLLOUT}.agent.num_workers")
        if values is None:
            return
        (batch, batch_s), (workers, workers_s) = values
        if workers > 0 and batch % workers:
            ctx.report(f"data.train_batch_size={batch} is not divisible by rollout.agent.num_workers={workers}",
                       at=pick(batch_s, workers_s).span, related=related_of(batch_s, workers_s))
