"""RL209: consistency runs need a real rollout (rollout skip off).

## What it does

Reports a consistency run that replays cached rollouts instead of generating (`skip.rollout.enable`
from verl 0.9.0, `actor_rollout_ref.rollout.skip.enable` on 0.8.x).

## Why

verl can replay cached rollouts instead of generating (`actor_rollout_ref.rollout.skip.enable`
on 0.8.x, `skip.rollout.enable` from 0.9.0). A replayed rollout has no inference forward to
dump, so there is nothing to compare the training side with. The key is chosen by the verl
version (`--verl-version`, `--verl-root`, default newest).

## Use instead

Leave the rollout skip off (its default) for the consistency run.
"""

from __future__ import annotations

from rlpatch.lint.checks import expect_value
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import rollout_skip_key

_C = {"mode": "consistency"}


class RolloutSkipOff(LintRule):
    code = "RL209"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "real rollout: rollout skip off (skip.rollout.enable from 0.9.0, rollout.skip.enable on 0.8.x)"

    VALID = [
        Case("python3 -m verl.trainer.main_ppo skip.rollout.enable=False\n", options=_C),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.skip.enable=False\n",
             options={"mode": "consistency", "verl_version": "0.8.0"}),
    ]
    INVALID = [
        Case("python3 -m verl.trainer.main_ppo skip.rollout.enable=True\n", options=_C, expect=[(1, 54)]),
        Case("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.rollout.skip.enable=True\n",
             options={"mode": "consistency", "verl_version": "0.8.0"}, expect=[(2, 43)]),
    ]

    def check(self, ctx: LintContext) -> None:
        expect_value(ctx, rollout_skip_key(ctx.options.verl_version), "false",
                     "a replayed rollout has no inference forward to dump")
