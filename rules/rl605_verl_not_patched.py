"""RL605: a run whose dump needs one of rlpatch's patches that the target tree does not have.

## What it does

Reports a run whose dump needs one of rlpatch's patches that the target tree does not have: the verl
engine patch (consistency), the vLLM-Ascend dispatch logger (consistency with vLLM), the SGLang
ModelRunner patch (`MSPROBE_SGLANG_CONFIG`).

## Why

The training side of a consistency dump comes from rlpatch's patch of verl's engine worker
(`verl-engine-fsdp` / `verl-engine-megatron`). Without it the run trains normally and dumps
nothing on the training side. The state comes from `rlpatch verify --format json --mode
consistency` on the target tree (`--verl-root`, or the verl of `--python`; asked in-process); apply
the patch with `rlpatch apply`. A consistency run whose rollout is vLLM(-Ascend) is paired by the
request ids rlpatch's `vllm-ascend-dispatch-logger` writes in the vLLM-Ascend tree
(`--vllm-ascend-root`, else the vLLM-Ascend of `--python` or of this interpreter): without it
the two sides can never be paired (an error); when no vLLM-Ascend tree is known while a verl tree
is, RL605 says so as a warning that names `--vllm-ascend-root` (it does not pass silently). With no
target at all (no root, no --python, nothing installed here) RL605 stays quiet, like every RL6xx. Likewise `MSPROBE_SGLANG_CONFIG` (and `_PREFILL`/`_DECODE`) is read only by
rlpatch's SGLang ModelRunner patch (SGLang < 0.5.11): without it the rollout dumps nothing
(`rlpatch verify --rules sglang-model-runner --sglang-root ...`, or the SGLang of `--python`).
Only rules that run under the trainer the launch selects count (a v0-only tree is
not "unpatched" for a `trainer.use_v1=False` run); whether that trainer is covered is RL607's.

## Use instead

Apply the patches to the tree that will run: `rlpatch apply --mode consistency --verl-root ...
--vllm-ascend-root ...` (or `--mode inference --sglang-root ...`).
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint import versions_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN0 = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)
_SGLANG_RUN = "export MSPROBE_SGLANG_CONFIG=dump.json\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang\n"
_UNPATCHED_SGLANG = testing.case_root("sglang_runner")
_RUN1 = (
    "export DUMP_ON=1 PROMPTS_ONLY=1\n"
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)
_UNPATCHED_VERL = testing.case_root("verl_engine")
_UNPATCHED_VLLM_ASCEND = testing.case_root("vllm_ascend_runner")


class VerlNotPatched(LintRule):
    code = "RL605"
    severity = "error"
    modes = frozenset({"consistency", "inference"})
    summary = "the run needs an rlpatch patch (verl engine, SGLang ModelRunner) the target tree lacks"

    VALID = (
        Case(_RUN0, options={"verl_root": testing.case_root("verl_engine")}),
        Case(_RUN0.replace("vllm", "sglang").replace("sglang.additional_config.dump_config_path", "sglang.msprobe_dump_config"),
             options={"sglang_root": _UNPATCHED_SGLANG}, note="the native key needs no patch (RL601 checks the version)"),
    )
    INVALID = (
        Case(_SGLANG_RUN, options={"sglang_root": _UNPATCHED_SGLANG}, expect=[(1, 30)]),
        Case(_RUN1, options={"verl_root": _UNPATCHED_VERL, "vllm_ascend_root": _UNPATCHED_VLLM_ASCEND},
             expect=[(2, 12), (3, 86)], note="neither the verl engine patch nor the vLLM-Ascend dispatch logger"),
        Case(_RUN1, options={"verl_root": _UNPATCHED_VERL, "python": "/nonexistent/python3"},
             expect=[(2, 12), (3, 86)], note="no vLLM-Ascend tree known: a warning that names --vllm-ascend-root"),
    )

    def check(self, ctx: LintContext) -> None:
        if ctx.run.sglang_dump_env():
            self.check_sglang(ctx)
        if ctx.run.mode == "consistency":
            self.check_verl(ctx)
            if ctx.run.rollout_backend == "vllm":
                self.check_vllm_ascend(ctx)

    def check_sglang(self, ctx: LintContext) -> None:
        if not versions_family.target_given(ctx.options) and not versions_family.installed(ctx.options, "sglang").found:
            return
        reports, error = versions_family.verify_sglang_states(ctx)
        var = ctx.run.sglang_dump_env()[0]
        if error:
            if versions_family.target_given(ctx.options):
                ctx.report(f"cannot tell whether SGLang has rlpatch's ModelRunner patch (RL605 not checked): {error}",
                           at=var.span, severity="info", code="RL002")
            return
        missing = [r for r in reports if r["id"] == versions_family.SGLANG_PATCH_RULE and r["state"] != "applied"]
        if missing:
            root = ctx.options.sglang_root or "ROOT"
            ctx.report(f"{var.name} is read only by rlpatch's SGLang ModelRunner patch (SGLang < 0.5.11), which is "
                       f"{missing[0]['state']} in the target SGLang ({missing[0]['message']}): the rollout dumps "
                       f"nothing; run rlpatch apply --mode inference --sglang-root {root}", at=var.span)

    def check_verl(self, ctx: LintContext) -> None:
        if not versions_family.target_given(ctx.options) and not versions_family.installed(ctx.options, "verl").found:
            return  # no verl to verify (and no subprocess spent on finding that out)
        backend = "megatron" if ctx.run.megatron else "fsdp"
        reports, error = versions_family.verify_states(ctx, backend)
        if error:  # a named target or the verl of this interpreter: either way the check did not happen
            ctx.report(f"cannot tell whether verl is patched (RL605 not checked): {error}", at=ctx.run.entry_span,
                       severity="info", code="RL002")
            return
        missing = [f"{r['id']} ({r['state']})" for r in reports if r["state"] not in ("applied", "not-applicable")]
        # Rules only another trainer runs are not this run's concern (whether its own is covered is RL607's).
        trainer = ctx.run.trainer()[0]
        verdict = {entry["trainer"]: entry for entry in versions_family.verify_trainers(ctx, backend)[0]}
        if trainer in verdict and verdict[trainer]["state"] != "absent":
            missing = [rule for rule in missing if rule in verdict[trainer]["missing"]]
        if missing:
            ctx.report(f"consistency run, but rlpatch verify finds {len(missing)} consistency patch rule(s) not in "
                       f"place in the target verl: {', '.join(missing)}; the dumps will not line up: run "
                       "rlpatch apply --mode consistency", at=ctx.run.entry_span)

    def check_vllm_ascend(self, ctx: LintContext) -> None:
        """The rollout side of the pair: rlpatch's dispatch logger in the vLLM-Ascend tree."""
        options = ctx.options
        if not versions_family.target_given(options) and not any(
                versions_family.installed(options, project).found for project in ("verl", "vllm-ascend")):
            return  # nothing named, nothing installed here: RL6xx stays quiet
        setting = versions_family.dump_setting(ctx.run, versions_family.VLLM_DUMP_CONFIG_PATH) or \
            versions_family.dump_setting(ctx.run, versions_family.VLLM_DUMP_CONFIG)
        at = setting.span if setting else ctx.run.entry_span
        reports, error = versions_family.verify_vllm_ascend_states(ctx)
        root = options.vllm_ascend_root
        if error and not root:
            python = options.python or "this interpreter"
            ctx.report("consistency run with a vLLM rollout, but no vLLM-Ascend tree to check for rlpatch's "
                       f"{versions_family.VLLM_ASCEND_PATCH_RULE}, which logs the request ids that pair the two sides "
                       f"(none given, none found for {python}): give --vllm-ascend-root ROOT", at=at, severity="warning")
            return
        if error:
            ctx.report(f"cannot tell whether vLLM-Ascend has rlpatch's dispatch logger (RL605 not checked): {error}",
                       at=at, severity="info", code="RL002")
            return
        missing = [r for r in reports if r["state"] not in ("applied", "not-applicable")]  # too old: RL603's
        if missing:
            where = root or "ROOT"
            ctx.report(f"consistency run with a vLLM rollout, but {missing[0]['id']} is {missing[0]['state']} in the "
                       "target vLLM-Ascend: it writes no dispatch_log.jsonl, so the inference dumps can never be paired "
                       f"with the training ones; run rlpatch apply --mode consistency --vllm-ascend-root {where}", at=at)
