"""RL606: verl 0.7.x runs the engine worker (where rlpatch's patch dumps) only on request.

## What it does

Reports a consistency run on verl 0.7.x without `trainer.use_legacy_worker_impl=disable`.

## Why

On verl 0.7.x the PPO actor and ref run on the legacy workers unless
`trainer.use_legacy_worker_impl=disable`; the engine patch is then never executed and the
training side dumps nothing. Add the override (it was removed in 0.8.0, where the engine path is
the only one).

## Use instead

Add `trainer.use_legacy_worker_impl=disable` (verl 0.7.x only: the override was removed in 0.8.0).
"""

from __future__ import annotations

from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN0 = (
    "export DUMP_ON=1 PROMPTS_ONLY=1\n"
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json \\\n"
    "    trainer.use_legacy_worker_impl=disable\n"
)
_RUN1 = (
    "export DUMP_ON=1 PROMPTS_ONLY=1\n"
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)


class LegacyWorkerOnVerl07(LintRule):
    code = "RL606"
    severity = "warning"
    modes = frozenset({"consistency"})
    summary = "verl 0.7.x engine patch without use_legacy_worker_impl=disable"

    VALID = (
        Case(_RUN0, options={"verl_version": "0.7.1"}),
    )
    INVALID = (
        Case(_RUN1, options={"verl_version": "0.7.1"}, expect=[(2, 12)]),
    )

    def check(self, ctx: LintContext) -> None:
        if ctx.run.version.minor != (0, 7):
            return
        setting = ctx.run.setting("trainer.use_legacy_worker_impl")
        if ctx.unresolved(setting) or (setting.value or "").strip() == "disable":
            return
        ctx.report(f"verl {ctx.run.version} runs the PPO actor on the legacy worker unless "
                   "trainer.use_legacy_worker_impl=disable: the engine patch never runs and the training side dumps "
                   f"nothing; found {setting.describe()}", at=setting.span, related=setting.related())
