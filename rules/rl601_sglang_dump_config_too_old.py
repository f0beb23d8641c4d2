"""RL601: `engine_kwargs.sglang.msprobe_dump_config` on SGLang older than 0.5.11.

SGLang reads `msprobe_dump_config` natively only from 0.5.11; older servers reject the unknown
argument with a TypeError when the engine starts (after Ray and model loading). On older SGLang
apply rlpatch's ModelRunner patch (`rlpatch apply --sglang-root ...`) and pass the config path the
way the patch expects instead.
"""

from __future__ import annotations

from rlpatch.lint import versions_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN0 = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.sglang.msprobe_dump_config=dump.json\n"
)
_SGLANG_0_5_10 = versions_family.case_root("targets/sglang-0.5.10")
_SGLANG_0_5_11_MSPROBE_26_2 = versions_family.case_root("targets/sglang-0.5.11-msprobe-26.2")


class SglangTooOldForDumpConfig(LintRule):
    code = "RL601"
    severity = "error"
    summary = "SGLang < 0.5.11 with msprobe_dump_config"

    VALID = (
        Case(_RUN0, options={"extra": {"sglang_root": _SGLANG_0_5_11_MSPROBE_26_2}}),
    )
    INVALID = (
        Case(_RUN0, options={"extra": {"sglang_root": _SGLANG_0_5_10}}, expect=[(2, 5)]),
    )

    def check(self, ctx: LintContext) -> None:
        setting = versions_family.dump_setting(ctx.run, versions_family.SGLANG_DUMP_KEY)
        if setting is None:
            return
        sglang = versions_family.version(ctx, "sglang", setting)
        if sglang is not None and sglang < "0.5.11":
            ctx.report(f"SGLang {sglang} has no msprobe_dump_config (native from 0.5.11): the server fails with a "
                       "TypeError at start; apply rlpatch's ModelRunner patch instead", at=setting.key_span,
                       related=setting.related())
