"""RL604: both `dump_config` and `dump_config_path` are set.

## What it does

Reports a run that sets both `additional_config.dump_config` and
`additional_config.dump_config_path`.

## Why

vLLM-Ascend reads one of them depending on its version; setting both hides which config is used
and, when they differ, dumps with the other one than intended. Keep the key of your version
(0.12.x: `dump_config`, later: `dump_config_path`).

## Use instead

Keep only the key of your vLLM-Ascend version.
"""

from __future__ import annotations

from rlpatch.lint import versions_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN0 = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)
_RUN1 = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config=dump.json \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)


class BothVllmDumpKeys(LintRule):
    code = "RL604"
    severity = "error"
    summary = "both dump_config and dump_config_path"

    VALID = (
        Case(_RUN0),
    )
    INVALID = (
        Case(_RUN1, expect=[(2, 5)]),
    )

    def check(self, ctx: LintContext) -> None:
        config = versions_family.dump_setting(ctx.run, versions_family.VLLM_DUMP_CONFIG)
        path = versions_family.dump_setting(ctx.run, versions_family.VLLM_DUMP_CONFIG_PATH)
        if config is not None and path is not None:
            ctx.report("both additional_config.dump_config and dump_config_path are set: keep the one your "
                       "vLLM-Ascend reads (0.12.x: dump_config, later: dump_config_path)", at=config.key_span,
                       related=[path.key_span, *config.related()])
