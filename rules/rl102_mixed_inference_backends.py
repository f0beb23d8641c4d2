"""RL102: vLLM and SGLang dump keys must match the rollout backend, and never both.

## What it does

Reports an inference dump key of the wrong rollout backend (`engine_kwargs.vllm...` with
`rollout.name=sglang`, or the other way round), or dump keys of both backends in one run.

## Why

verl passes `engine_kwargs.vllm` only to vLLM and `engine_kwargs.sglang` only to SGLang: a
`dump_config_path` under `vllm` with `rollout.name=sglang` is silently dropped (no dump), and
configuring both means one of them is dead. `rollout.name=vllm` goes with
`engine_kwargs.vllm.additional_config.dump_config_path`, `sglang` with
`engine_kwargs.sglang.msprobe_dump_config` (or, for SGLang < 0.5.11 with rlpatch's ModelRunner
patch, `MSPROBE_SGLANG_CONFIG*` in the env, which a vLLM rollout never reads either).

## Use instead

Use the dump key of the backend `actor_rollout_ref.rollout.name` selects, and only that one
(`rlpatch gen` writes a null for the other backend's key).
"""

from __future__ import annotations

from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ROLLOUT, SGLANG_DUMP_KEYS

_VLLM_KEY = "+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json"
_SGLANG_KEY = "+actor_rollout_ref.rollout.engine_kwargs.sglang.msprobe_dump_config=dump.json"


class MixedInferenceBackends(LintRule):
    code = "RL102"
    severity = "error"
    modes = frozenset({"inference", "consistency"})
    summary = "do not mix vLLM and SGLang collection"

    VALID = [
        Case(f"python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.rollout.name=vllm \\\n    {_VLLM_KEY}\n"),
        Case(f"python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.rollout.name=sglang \\\n    {_SGLANG_KEY}\n"),
        Case(f"python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm {_VLLM_KEY} {_SGLANG_KEY} \\\n"
             f"    ++{_SGLANG_KEY.lstrip('+').split('=')[0]}=null\n",
             note="a later null switches the other backend's dump off (what rlpatch gen writes)"),
        Case("export MSPROBE_SGLANG_CONFIG=dump.json\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang\n"),
    ]
    INVALID = [
        Case(f"python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.rollout.name=sglang \\\n    {_VLLM_KEY}\n",
             expect=[(3, 6)]),
        Case(f"python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.rollout.name=vllm \\\n    {_VLLM_KEY} \\\n"
             f"    {_SGLANG_KEY}\n", expect=[(4, 6)]),
        Case(f"export MSPROBE_SGLANG_CONFIG=dump.json\npython3 -m verl.trainer.main_ppo \\\n"
             f"    actor_rollout_ref.rollout.name=vllm {_VLLM_KEY}\n", expect=[(1, 30)],
             note="the SGLang patch's env var on a vLLM rollout"),
    ]

    def check(self, ctx: LintContext) -> None:
        name = ctx.run.setting(f"{ROLLOUT}.name")
        dumps = ctx.run.live_inference_dump_overrides()
        backends = {("sglang" if o.key in SGLANG_DUMP_KEYS else "vllm") for o in dumps}
        if ctx.unresolved(name):
            return
        rollout = name.value
        if rollout == "vllm":
            for var in ctx.run.sglang_dump_env():
                ctx.report(f"{var.name} is read only by rlpatch's SGLang ModelRunner patch, but "
                           "actor_rollout_ref.rollout.name=vllm: that dump config is never read", at=var.span,
                           related=[name.span])
        for override in dumps:
            backend = "sglang" if override.key in SGLANG_DUMP_KEYS else "vllm"
            if len(backends) > 1 and (backend != rollout or rollout not in backends):
                ctx.report(f"both vLLM and SGLang dump keys are set: {override.key} does not belong to "
                           f"actor_rollout_ref.rollout.name={rollout}", at=override.key_span, related=[name.span])
            elif rollout in ("vllm", "sglang") and backend != rollout:
                ctx.report(f"{override.key} is a {backend} key but actor_rollout_ref.rollout.name={rollout}: "
                           "the dump config is never read", at=override.key_span, related=[name.span])
