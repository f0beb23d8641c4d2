"""RL601: the SGLang dump route does not fit the SGLang version.

## What it does

Reports an SGLang dump route that does not fit the SGLang version: `msprobe_dump_config` on SGLang
older than 0.5.11, or `MSPROBE_SGLANG_CONFIG` on 0.5.11 or newer.

## Why

SGLang reads `msprobe_dump_config` natively only from 0.5.11; older servers reject the unknown
argument with a TypeError when the engine starts (after Ray and model loading). On older SGLang
apply rlpatch's ModelRunner patch (`rlpatch apply --mode inference --sglang-root ...`) and name the
config with `export MSPROBE_SGLANG_CONFIG=...` (`_PREFILL`/`_DECODE` under PD disaggregation)
instead. The other way round, from 0.5.11 the patch does not apply and nothing reads
`MSPROBE_SGLANG_CONFIG`: the rollout dumps nothing; use the native key.

## Use instead

On SGLang older than 0.5.11, apply rlpatch's ModelRunner patch and name the config with `export
MSPROBE_SGLANG_CONFIG=...`; from 0.5.11, the native
`++actor_rollout_ref.rollout.engine_kwargs.sglang.msprobe_dump_config=...`.
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint import versions_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN0 = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.sglang.msprobe_dump_config=dump.json\n"
)
_ENV_RUN = "export MSPROBE_SGLANG_CONFIG=dump.json\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang\n"
_SGLANG_0_5_10 = testing.case_root("targets/sglang-0.5.10")
_SGLANG_0_5_11_MSPROBE_26_2 = testing.case_root("targets/sglang-0.5.11-msprobe-26.2")


class SglangTooOldForDumpConfig(LintRule):
    code = "RL601"
    severity = "error"
    summary = "SGLang < 0.5.11 with msprobe_dump_config (or >= 0.5.11 with MSPROBE_SGLANG_CONFIG)"

    VALID = (
        Case(_RUN0, options={"sglang_root": _SGLANG_0_5_11_MSPROBE_26_2}),
        Case(_ENV_RUN, options={"sglang_root": _SGLANG_0_5_10}, note="the patch route, on an old SGLang"),
    )
    INVALID = (
        Case(_RUN0, options={"sglang_root": _SGLANG_0_5_10}, expect=[(2, 5)]),
        Case(_ENV_RUN, options={"sglang_root": _SGLANG_0_5_11_MSPROBE_26_2}, expect=[(1, 30)]),
    )

    def check(self, ctx: LintContext) -> None:
        self.check_native_key(ctx)
        env = ctx.run.sglang_dump_env()
        if env and not ctx.run.setting(versions_family.SGLANG_DUMP_KEY).is_set:
            found = versions_family.known_version(ctx.options, "sglang")
            if found is not None and found >= "0.5.11":
                ctx.report(f"SGLang {found} dumps natively: {env[0].name} is read only by rlpatch's ModelRunner patch "
                           "for SGLang < 0.5.11, so nothing is dumped; pass "
                           f"++{versions_family.SGLANG_DUMP_KEY}=<config> instead", at=env[0].span)

    def check_native_key(self, ctx: LintContext) -> None:
        setting = versions_family.dump_setting(ctx.run, versions_family.SGLANG_DUMP_KEY)
        if setting is None:
            return
        sglang = versions_family.version(ctx, "sglang", setting)
        if sglang is not None and sglang < "0.5.11":
            ctx.report(f"SGLang {sglang} has no msprobe_dump_config (native from 0.5.11): the server fails with a "
                       "TypeError at start; apply rlpatch's ModelRunner patch (rlpatch apply --mode inference --sglang-root ...) "
                       "and export MSPROBE_SGLANG_CONFIG=<config> instead", at=setting.key_span,
                       related=setting.related())
