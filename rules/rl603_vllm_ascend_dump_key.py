"""RL603: the vLLM dump key does not match the vLLM-Ascend version.

## What it does

Reports `dump_config_path` on vLLM-Ascend 0.12.x, which reads `dump_config`, and either key before
0.12, which has no msprobe dump at all.

## Why

vLLM-Ascend 0.12.x reads `additional_config.dump_config` (the path key `dump_config_path` came
later); versions before 0.12 have no msprobe dump at all. A key the installed version does not know
is ignored silently: the run produces no dump.

## Use instead

`additional_config.dump_config` on vLLM-Ascend 0.12.x, `dump_config_path` from 0.13; upgrade
vLLM-Ascend to 0.12 or newer to dump.
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint import versions_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN0 = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)
_RUN1 = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config=dump.json\n"
)
_VLLM_ASCEND_0_11_0 = testing.case_root("targets/vllm-ascend-0.11.0")
_VLLM_ASCEND_0_12_0 = testing.case_root("targets/vllm-ascend-0.12.0")
_VLLM_ASCEND_0_13_0 = testing.case_root("targets/vllm-ascend-0.13.0")


class VllmAscendDumpKey(LintRule):
    code = "RL603"
    severity = "error"
    summary = "vLLM-Ascend version and dump key do not match"

    VALID = (
        Case(_RUN0, options={"vllm_ascend_root": _VLLM_ASCEND_0_13_0}),
        Case(_RUN1, options={"vllm_ascend_root": _VLLM_ASCEND_0_12_0}),
    )
    INVALID = (
        Case(_RUN0, options={"vllm_ascend_root": _VLLM_ASCEND_0_12_0}, expect=[(2, 5)]),
        Case(_RUN0, options={"vllm_ascend_root": _VLLM_ASCEND_0_11_0}, expect=[(2, 5)]),
    )

    def check(self, ctx: LintContext) -> None:
        for key in (versions_family.VLLM_DUMP_CONFIG_PATH, versions_family.VLLM_DUMP_CONFIG):
            setting = versions_family.dump_setting(ctx.run, key)
            if setting is None:
                continue
            found = versions_family.version(ctx, "vllm-ascend", setting)
            if found is None:
                return
            if found.minor < (0, 12):
                ctx.report(f"vLLM-Ascend {found} has no msprobe dump at all (from 0.12): {key.rsplit('.', 1)[-1]} is "
                           "ignored", at=setting.key_span, related=setting.related())
            elif found.minor == (0, 12) and key == versions_family.VLLM_DUMP_CONFIG_PATH:
                ctx.report(f"vLLM-Ascend {found} reads additional_config.dump_config, not dump_config_path: the "
                           "dump config is ignored", at=setting.key_span, related=setting.related())
