"""RL602: SGLang's native msprobe dump with mindstudio-probe older than 26.0.

## What it does

Reports SGLang's native msprobe dump (SGLang 0.5.11 or newer) with mindstudio-probe older than 26.0
in the inference environment.

## Why

SGLang 0.5.11+ calls msprobe's 26.x API (`start(rank_id=...)`, no `model` argument in the
constructor); mindstudio-probe 8.x fails there at engine start. Install mindstudio-probe 26.0 or
newer in the inference environment.

## Use instead

Install mindstudio-probe 26.0 or newer where SGLang runs.
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint import versions_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN0 = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.sglang.msprobe_dump_config=dump.json\n"
)
_SGLANG_0_5_11_MSPROBE_26_2 = testing.case_root("targets/sglang-0.5.11-msprobe-26.2")
_SGLANG_0_5_11_MSPROBE_8_3 = testing.case_root("targets/sglang-0.5.11-msprobe-8.3")


class SglangNeedsMsprobe26(LintRule):
    code = "RL602"
    severity = "error"
    summary = "SGLang >= 0.5.11 with mindstudio-probe < 26.0"

    VALID = (
        Case(_RUN0, options={"sglang_root": _SGLANG_0_5_11_MSPROBE_26_2}),
    )
    INVALID = (
        Case(_RUN0, options={"sglang_root": _SGLANG_0_5_11_MSPROBE_8_3}, expect=[(2, 5)]),
    )

    def check(self, ctx: LintContext) -> None:
        setting = versions_family.dump_setting(ctx.run, versions_family.SGLANG_DUMP_KEY)
        if setting is None:
            return
        sglang = versions_family.version(ctx, "sglang", setting)
        if sglang is None or sglang < "0.5.11":
            return
        msprobe = versions_family.version(ctx, "mindstudio-probe", setting)
        if msprobe is not None and msprobe < "26.0":
            ctx.report(f"SGLang {sglang} calls the msprobe 26.x API but mindstudio-probe is {msprobe}: install "
                       "mindstudio-probe>=26.0 in the inference environment", at=setting.key_span,
                       related=setting.related())
