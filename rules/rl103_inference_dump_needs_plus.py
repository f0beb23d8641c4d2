"""RL103: the inference dump key needs `+` or `++`.

## What it does

Reports the inference dump key (`engine_kwargs.vllm.additional_config.dump_config_path`,
`engine_kwargs.sglang.msprobe_dump_config`) written as a plain `key=value` override.

## Why

`actor_rollout_ref.rollout.engine_kwargs.vllm` and `.sglang` default to empty dicts, so a key
below them does not exist in verl's config and a plain `key=value` override fails in Hydra
("Could not override ... To append to your config use +"). Write `+key=value` (or `++`).

## Use instead

Write `+key=value` (add) or `++key=value` (add or override).

## References

[Hydra's override grammar](https://hydra.cc/docs/advanced/override_grammar/basic/).
"""

from __future__ import annotations

from rlpatch.lint.checks import prefix_fix
from rlpatch.lint.rule import Case, LintContext, LintRule

_KEY = "actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path"


class InferenceDumpNeedsPlus(LintRule):
    code = "RL103"
    severity = "error"
    modes = frozenset({"inference", "consistency"})
    summary = "the inference dump key needs + or ++"

    VALID = [
        Case(f"python3 -m verl.trainer.main_ppo +{_KEY}=dump.json\n"),
        Case(f"python3 -m verl.trainer.main_ppo ++{_KEY}=dump.json\n"),
    ]
    INVALID = [
        Case(f"python3 -m verl.trainer.main_ppo \\\n    {_KEY}=dump.json\n", expect=[(2, 5)],
             messages=['actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path is below '
                       'an empty engine_kwargs dict: write '
                       '+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=... (a '
                       'plain override fails in Hydra)'],
             fixed=f"python3 -m verl.trainer.main_ppo \\\n    +{_KEY}=dump.json\n"),
        Case("ARGS=(\n  actor_rollout_ref.rollout.engine_kwargs.sglang.msprobe_dump_config=d.json\n)\n"
             'python3 -m verl.trainer.main_ppo "${ARGS[@]}"\n', expect=[(2, 3)]),
    ]

    def check(self, ctx: LintContext) -> None:
        for override in ctx.run.inference_dump_overrides():
            if override.prefix not in ("+", "++"):
                ctx.report(f"{override.key} is below an empty engine_kwargs dict: write +{override.key}=... "
                           "(a plain override fails in Hydra)", at=override.span, related=override.related(),
                           fix=prefix_fix(override, "+", "add the key below the empty dict"))
