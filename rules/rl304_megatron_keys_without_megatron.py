"""RL304: Megatron keys in a run that composes the FSDP config.

## What it does

Reports Megatron keys (`actor_rollout_ref.actor.megatron.*`, the ref's and critic's) in a run that
composes the FSDP config.

## Why

`actor_rollout_ref.actor.megatron.*` (and the ref/critic equivalents) exist only when the
Megatron engine is selected: `model_engine=megatron` from verl 0.8.0 (the `ppo_megatron_trainer`
config name still works but is deprecated), `--config-name ppo_megatron_trainer` before. Without
it Hydra rejects the keys, or worse, the user believes Megatron settings are in effect.

## Use instead

Select the Megatron engine: `model_engine=megatron` from verl 0.8.0 (`--config-name
ppo_megatron_trainer` before), or drop the keys.
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint import hydra_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_OPTIONS = testing.hydra_case_options()


class MegatronKeysWithoutMegatron(LintRule):
    code = "RL304"
    severity = "error"
    summary = "Megatron keys without model_engine=megatron or the megatron config"

    VALID = (
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm model_engine=megatron \\\n"
             "    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2\n", options=_OPTIONS),
    )
    INVALID = (
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2\n", options=_OPTIONS, expect=[(2, 5)]),
    )

    def check(self, ctx: LintContext) -> None:
        verdict = hydra_family.schema_verdict(ctx)
        if verdict is None:  # no verl to check against (the invocation's one note says why)
            return
        hydra_family.note_unchecked(ctx, verdict)
        # A value known only on the cluster does not hide a wrong key: the key alone is judged.
        for problem in hydra_family.problems_in_script(ctx, verdict, self.code, value_needed=False):
            ctx.report(problem.message, at=problem.at, related=problem.related)
