"""RL107: precision_debugger stages must exist, and each stage's role must have its profiler on.

## What it does

Reports precision_debugger stages verl does not know, and stages whose role's profiler is off
(`*.profiler.enable` not True).

## Why

verl's precision_debugger wraps whole worker stages: `actor_compute_log_prob`,
`ref_compute_log_prob`, `actor_update`, `compute_values`, `critic_update`, `compute_rm_score`.
Any other name is ignored (an error only with `strict: True`). A stage is only dumped when its
role's profiler is on: actor stages need `actor_rollout_ref.actor.profiler.enable=True`,
`ref_compute_log_prob` needs `actor_rollout_ref.ref.profiler.enable=True`, critic stages need
`critic.profiler.enable=True`. With `stages` unset every stage is collected, so at least the
actor profiler must be on. Otherwise the run finishes with empty dump folders.

## Use instead

List only verl's stage names, and turn on the profiler of each listed stage's role (for the actor
stages `actor_rollout_ref.actor.profiler.enable=True`).
"""

from __future__ import annotations

from rlpatch.lint.rule import Case, LintContext, LintRule

STAGES_KEY = "global_profiler.global_tool_config.precision_debugger.stages"
STAGE_ROLES = {
    "actor_compute_log_prob": "actor_rollout_ref.actor.profiler.enable",
    "actor_update": "actor_rollout_ref.actor.profiler.enable",
    "ref_compute_log_prob": "actor_rollout_ref.ref.profiler.enable",
    "compute_values": "critic.profiler.enable",
    "critic_update": "critic.profiler.enable",
    "compute_rm_score": None,
}
IGNORED_STAGES = {"rollout_generate"}  # RL108 warns about it

_TOOL = "python3 -m verl.trainer.main_ppo \\\n    global_profiler.tool=precision_debugger \\\n"


class PrecisionDebuggerStages(LintRule):
    code = "RL107"
    severity = "error"
    modes = frozenset({"training"})
    summary = "precision_debugger stages must be known and their role's profiler.enable=True"

    VALID = [
        Case(_TOOL + f"    +{STAGES_KEY}=[actor_update,ref_compute_log_prob] \\\n"
             "    actor_rollout_ref.actor.profiler.enable=True \\\n    actor_rollout_ref.ref.profiler.enable=True\n"),
        Case(_TOOL + "    actor_rollout_ref.actor.profiler.enable=True\n"),
    ]
    INVALID = [
        Case(_TOOL + f"    +{STAGES_KEY}=[actor_update,actor_forward] \\\n"
             "    actor_rollout_ref.actor.profiler.enable=True\n", expect=[(3, 81)]),
        Case(_TOOL + f"    +{STAGES_KEY}='[ref_compute_log_prob]'\n", expect=[(1, 12)]),
        Case(_TOOL + "    trainer.nnodes=1\n", expect=[(1, 12)]),
    ]

    def check(self, ctx: LintContext) -> None:
        stages = ctx.run.setting(STAGES_KEY)
        if ctx.unresolved(stages):
            return
        names = stages.as_list() if not stages.is_null() else None
        if names is None:
            self._require(ctx, "actor_rollout_ref.actor.profiler.enable", "stages is not set, so every stage "
                          "is collected")
            return
        for name in names:
            if name in IGNORED_STAGES:
                continue
            if name not in STAGE_ROLES:
                column = (stages.value or "").find(name)
                at = stages.span
                if stages.override is not None and column >= 0:
                    offset = len(stages.override.prefix) + len(stages.override.key) + 1
                    raw = stages.override.arg.text or ""
                    at = stages.override.arg.sub_span(offset + raw[offset:].find(name), offset + raw[offset:].find(name) + len(name))
                ctx.report(f"unknown precision_debugger stage {name!r} (known: {', '.join(STAGE_ROLES)})", at=at,
                           related=stages.related())
                continue
            role_key = STAGE_ROLES[name]
            if role_key is not None:
                self._require(ctx, role_key, f"stage {name} is listed")

    def _require(self, ctx: LintContext, key: str, why: str) -> None:
        setting = ctx.run.setting(key)
        if ctx.unresolved(setting) or setting.as_bool() is True:
            return
        ctx.report(f"{why} but {key} is not True ({setting.describe()}): nothing is dumped for it",
                   at=setting.span, related=setting.related())
