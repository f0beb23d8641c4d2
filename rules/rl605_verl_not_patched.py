"""RL605: a consistency run whose verl tree does not have rlpatch's engine patch.

The training side of a consistency dump comes from rlpatch's patch of verl's engine worker
(`verl-engine-fsdp` / `verl-engine-megatron`). Without it the run trains normally and dumps
nothing on the training side. The state comes from `rlpatch verify --format json --mode
consistency` on the target tree (`--verl-root`, or the verl of `--python`); apply the patch with
`rlpatch apply`. Only rules that run under the trainer the launch selects count (a v0-only tree is
not "unpatched" for a `trainer.use_v1=False` run); whether that trainer is covered is RL607's.
"""

from __future__ import annotations

from rlpatch.lint import versions_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN0 = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)
_RUN1 = (
    "export DUMP_ON=1 PROMPTS_ONLY=1\n"
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)


class VerlNotPatched(LintRule):
    code = "RL605"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "consistency mode but the verl tree is not patched"

    VALID = (
        Case(_RUN0, options={"verl_root": versions_family.case_root("verl_engine")}),
    )
    INVALID = (
        Case(_RUN1, options={"verl_root": versions_family.case_root("verl_engine")}, expect=[(2, 12)]),
    )

    def check(self, ctx: LintContext) -> None:
        if not versions_family.target_given(ctx.options) and not versions_family.installed(ctx.options, "verl").found:
            return  # no verl to verify (and no subprocess spent on finding that out)
        backend = "megatron" if ctx.run.megatron else "fsdp"
        reports, error = versions_family.verify_states(ctx, backend)
        if error and versions_family.target_given(ctx.options):
            ctx.report(f"cannot tell whether verl is patched (RL605 not checked): {error}", at=ctx.run.entry_span,
                       severity="info", code="RL002")
        if error:
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
