"""RL305: `actor_rollout_ref.rollout.name` is not set.

## What it does

Reports a verl run without `actor_rollout_ref.rollout.name`.

## Why

Since verl 0.6.0 the rollout backend has no default (`???`): Hydra composes without it and the
job fails only after Ray has started and the workers are being built. Set it to `vllm`,
`sglang`, `hf` or `trtllm`.

## Use instead

Set `actor_rollout_ref.rollout.name` to `vllm`, `sglang`, `hf` or `trtllm`.
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint import hydra_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_OPTIONS = testing.hydra_case_options()


class RolloutNameMissing(LintRule):
    code = "RL305"
    severity = "error"
    summary = "actor_rollout_ref.rollout.name missing"

    VALID = (
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm\n", options=_OPTIONS),
    )
    INVALID = (
        Case("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n", options=_OPTIONS, expect=[(1, 12)]),
    )

    def check(self, ctx: LintContext) -> None:
        verdict = hydra_family.schema_verdict(ctx)
        if verdict is None:  # no verl to check against (the invocation's one note says why)
            return
        hydra_family.note_unchecked(ctx, verdict)
        for problem in hydra_family.problems_in_script(ctx, verdict, self.code, value_needed=True):
            ctx.report(problem.message, at=problem.at, related=problem.related)
