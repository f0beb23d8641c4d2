"""RL210: rollout correction off for consistency runs.

## What it does

Reports rollout correction (importance or rejection sampling, batch normalisation, fully-async
`bypass_mode`) turned on in a consistency run.

## Why

Rollout importance sampling / rejection sampling (`algorithm.rollout_correction.rollout_is`,
`rollout_rs`, `rollout_rs_threshold`, `rollout_is_batch_normalize`) reweights or drops samples
between rollout and update, and fully-async `bypass_mode` reuses rollout log-probs instead of
recomputing them: either way the training forward no longer matches the inference forward.

## Use instead

Leave `algorithm.rollout_correction.rollout_is`, `rollout_rs` and `rollout_rs_threshold` null and
`rollout_is_batch_normalize` False.
"""

from __future__ import annotations

from rlpatch.lint.checks import expect_value
from rlpatch.lint.rule import Case, LintContext, LintRule

RC = "algorithm.rollout_correction"
_C = {"mode": "consistency"}


class RolloutCorrectionOff(LintRule):
    code = "RL210"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "rollout correction off (rollout_is/rollout_rs/rollout_rs_threshold null, batch_normalize False)"

    VALID = [
        Case(f"python3 -m verl.trainer.main_ppo {RC}.rollout_is=null\n", options=_C),
        Case(f"python3 -m verl.trainer.main_ppo {RC}.bypass_mode=True\n", options=_C,
             note="bypass_mode only matters for the fully async trainer"),
    ]
    INVALID = [
        Case(f"python3 -m verl.trainer.main_ppo \\\n    {RC}.rollout_is=token\n", options=_C, expect=[(2, 45)]),
        Case(f"python3 -m verl.experimental.fully_async_policy.fully_async_main \\\n    {RC}.bypass_mode=True\n",
             options=_C, expect=[(2, 46)]),
    ]

    def check(self, ctx: LintContext) -> None:
        why = "samples are reweighted or dropped between rollout and update"
        for name in ("rollout_is", "rollout_rs", "rollout_rs_threshold"):
            expect_value(ctx, f"{RC}.{name}", "null", why)
        expect_value(ctx, f"{RC}.rollout_is_batch_normalize", "false", why)
        if "fully_async" in ctx.run.launch.entry:
            expect_value(ctx, f"{RC}.bypass_mode", "false", "bypass mode reuses rollout log-probs")
