"""RL108: critic stages and `rollout_generate` are never collected by precision_debugger.

## What it does

Reports critic stages (`compute_values`, `critic_update`) and `rollout_generate` in the
precision_debugger's stages: the engine path never collects them.

## Why

On the engine path (the default worker implementation from verl 0.8.0) the critic's stages
(`compute_values`, `critic_update`) are not wrapped by the precision_debugger, and
`rollout_generate` is skipped on purpose (rollout is dumped on the inference side). Listing them
looks like coverage that the run will not produce.

## Use instead

Leave them out of `stages`; dump the rollout on the inference side (`rlpatch gen inference`).
"""

from __future__ import annotations

from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.rules.rl107_precision_debugger_stages import STAGES_KEY

NEVER_COLLECTED = {"compute_values": "critic stages are not collected on the engine path",
                   "critic_update": "critic stages are not collected on the engine path",
                   "rollout_generate": "rollout_generate is ignored (dump rollout on the inference side)"}
_TOOL = "python3 -m verl.trainer.main_ppo \\\n    global_profiler.tool=precision_debugger \\\n"


class IgnoredStages(LintRule):
    code = "RL108"
    severity = "warning"
    modes = frozenset({"training"})
    summary = "critic stages are never collected on the engine path; rollout_generate is ignored"

    VALID = [Case(_TOOL + f"    +{STAGES_KEY}=[actor_update]\n")]
    INVALID = [
        Case(_TOOL + f"    +{STAGES_KEY}=[actor_update,critic_update]\n", expect=[(3, 5)]),
        Case(_TOOL + f"    +{STAGES_KEY}=[rollout_generate]\n", expect=[(3, 5)]),
    ]

    def check(self, ctx: LintContext) -> None:
        stages = ctx.run.setting(STAGES_KEY)
        if ctx.unresolved(stages) or stages.is_null():
            return
        for name in stages.as_list() or []:
            if name in NEVER_COLLECTED:
                at = stages.override.span if stages.override is not None else stages.span
                ctx.report(f"stage {name}: {NEVER_COLLECTED[name]}", at=at, related=stages.related())
