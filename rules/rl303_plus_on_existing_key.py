"""RL303: `+key=value` on a key that already exists with a non-null value.

## What it does

Reports `+key=value` on a key that already exists with a non-null value.

## Why

`+` means "add": Hydra refuses it when the key already holds a value ("Could not append to
config. An item is already at ..."). It is allowed when the current value is null (a typical
optional path such as `precision_debugger.config_path`) or when the new value is a list or dict.
Drop the `+` to override the value, or use `++` (add or override).

## Use instead

Drop the `+` to override the value, or write `++key=value` (add or override).

## References

[Hydra's override grammar](https://hydra.cc/docs/advanced/override_grammar/basic/).
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint import hydra_family
from rlpatch.lint.checks import prefix_fix
from rlpatch.lint.rule import Case, LintContext, LintRule

_OPTIONS = testing.hydra_case_options()


class PlusOnExistingKey(LintRule):
    code = "RL303"
    severity = "error"
    summary = "+key on a key that already has a non-null value"

    VALID = (
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    +global_profiler.global_tool_config.precision_debugger.config_path=/c.json \\\n"
             "    ++actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16\n", options=_OPTIONS),
    )
    INVALID = (
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    +actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16\n", options=_OPTIONS, expect=[(2, 5)],
             messages=["'+actor_rollout_ref.actor.fsdp_config.model_dtype' adds a key, but it already has the "
                       "value 'fp32': drop the '+' to override it, or write '++' to add or override"],
             fixed="python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    ++actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16\n"),
    )

    def check(self, ctx: LintContext) -> None:
        verdict = hydra_family.schema_verdict(ctx)
        if verdict is None:  # no verl to check against (the invocation's one note says why)
            return
        hydra_family.note_unchecked(ctx, verdict)
        for problem in hydra_family.problems_in_script(ctx, verdict, self.code, value_needed=True):
            fix = prefix_fix(problem.override, "++", "add or override") if problem.override else None
            ctx.report(problem.message, at=problem.at, related=problem.related, fix=fix)
