"""RL206: Ulysses sequence parallelism must be off (1) for actor and ref in consistency runs.

Ulysses SP splits every sequence across ranks inside attention: a training rank then sees a
slice of each sequence while the inference rank sees whole sequences, and the dumps cannot be
aligned.
"""

from __future__ import annotations

from rlpatch.lint.checks import expect_value
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.defaults import ACTOR, REF

_C = {"mode": "consistency"}


class UlyssesSpOff(LintRule):
    code = "RL206"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "Ulysses SP must be 1 for actor and ref"

    VALID = [Case(f"python3 -m verl.trainer.main_ppo {ACTOR}.ulysses_sequence_parallel_size=1\n", options=_C)]
    INVALID = [
        Case(f"python3 -m verl.trainer.main_ppo \\\n    {ACTOR}.ulysses_sequence_parallel_size=2\n", options=_C,
             expect=[(2, 60), (2, 60)], note="ref inherits the actor's value"),
        Case(f"python3 -m verl.trainer.main_ppo \\\n    {REF}.ulysses_sequence_parallel_size=4\n", options=_C,
             expect=[(2, 58)]),
    ]

    def check(self, ctx: LintContext) -> None:
        for role in (ACTOR, REF):
            expect_value(ctx, f"{role}.ulysses_sequence_parallel_size", "1", "sequence slices cannot be aligned")
