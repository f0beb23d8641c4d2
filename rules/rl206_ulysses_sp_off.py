"""RL206: Ulysses sequence parallelism must be off (1) for actor and ref in consistency runs.

## What it does

Reports Ulysses sequence parallelism above 1 for the actor or the ref in a consistency run, in
either spelling of the key.

## Why

Ulysses SP splits every sequence across ranks inside attention: a training rank then sees a
slice of each sequence while the inference rank sees whole sequences, and the dumps cannot be
aligned. Both spellings count: the old `{actor,ref}.ulysses_sequence_parallel_size` and the
`{actor,ref}.fsdp_config.ulysses_sequence_parallel_size` the engine workers read (verl copies the
old value into it only when the old one is > 1, so `fsdp_config...=4` stays 4 next to an old 1).

## Use instead

Set `ulysses_sequence_parallel_size=1` (and `fsdp_config.ulysses_sequence_parallel_size=1`) for
actor and ref.
"""

from __future__ import annotations

from rlpatch.lint.checks import expect_value
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ACTOR, REF, ulysses_keys

_C = {"mode": "consistency"}


class UlyssesSpOff(LintRule):
    code = "RL206"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "Ulysses SP must be 1 for actor and ref"

    VALID = [
        Case(f"python3 -m verl.trainer.main_ppo {ACTOR}.ulysses_sequence_parallel_size=1\n", options=_C),
        Case(f"python3 -m verl.trainer.main_ppo {ACTOR}.fsdp_config.ulysses_sequence_parallel_size=1 \\\n"
             f"    {REF}.fsdp_config.ulysses_sequence_parallel_size=1\n", options=_C),
    ]
    INVALID = [
        Case(f"python3 -m verl.trainer.main_ppo \\\n    {ACTOR}.ulysses_sequence_parallel_size=2\n", options=_C,
             expect=[(2, 60), (2, 60)], note="ref inherits the actor's value"),
        Case(f"python3 -m verl.trainer.main_ppo \\\n    {REF}.ulysses_sequence_parallel_size=4\n", options=_C,
             expect=[(2, 58)]),
        Case(f"python3 -m verl.trainer.main_ppo {ACTOR}.ulysses_sequence_parallel_size=1 \\\n"
             f"    {ACTOR}.fsdp_config.ulysses_sequence_parallel_size=4\n", options=_C, expect=[(2, 72)],
             note="the 0.9 key: an old key of 1 is not copied over it"),
        Case(f"python3 -m verl.trainer.main_ppo {REF}.fsdp_config.ulysses_sequence_parallel_size=2\n", options=_C,
             expect=[(1, 99)]),
    ]

    def check(self, ctx: LintContext) -> None:
        for role in (ACTOR, REF):
            old, new = ulysses_keys(role)
            expect_value(ctx, old, "1", "sequence slices cannot be aligned")
            expect_value(ctx, new, "1", "sequence slices cannot be aligned; verl copies the old key into it only "
                         "when the old one is > 1")
