"""RL306: `actor_rollout_ref.rollout.mode=sync` on verl 0.7 or newer.

## What it does

Reports `actor_rollout_ref.rollout.mode=sync` on verl 0.7 or newer.

## Why

verl 0.7 removed the synchronous rollout; the value passes Hydra and is rejected only after Ray
starts. Remove the override (async is the only mode).

## Use instead

Remove the override: async is the only rollout mode from verl 0.7.
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint import hydra_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_OPTIONS = testing.hydra_case_options()


class RolloutModeSync(LintRule):
    code = "RL306"
    severity = "error"
    summary = "rollout.mode=sync on verl >= 0.7"

    VALID = (
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.mode=async\n", options=_OPTIONS),
    )
    INVALID = (
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    actor_rollout_ref.rollout.mode=sync\n", options=_OPTIONS, expect=[(2, 36)]),
    )

    def check(self, ctx: LintContext) -> None:
        verdict = hydra_family.schema_verdict(ctx)
        if verdict is None:  # no verl to check against (the invocation's one note says why)
            return
        hydra_family.note_unchecked(ctx, verdict)
        for problem in hydra_family.problems_in_script(ctx, verdict, self.code, value_needed=True):
            ctx.report(problem.message, at=problem.at, related=problem.related)
