"""RL214: keep rollout `data_parallel_size` at 1 while collecting on NPU.

## What it does

Reports rollout `data_parallel_size > 1` in a run that collects dumps.

## Why

With `actor_rollout_ref.rollout.data_parallel_size > 1` each vLLM-Ascend replica runs its own
data-parallel group; collection on NPU then produces per-DP-rank dumps whose request order is
not the training order, and the DP coordination paths are not hooked by the dump.

## Use instead

Keep `actor_rollout_ref.rollout.data_parallel_size=1` while collecting dumps on NPU.
"""

from __future__ import annotations

from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import ROLLOUT

DP = f"{ROLLOUT}.data_parallel_size"


class RolloutDpOnNpu(LintRule):
    code = "RL214"
    severity = "warning"
    modes = frozenset({"training", "inference", "consistency"})
    summary = "do not raise rollout data_parallel_size above 1 during collection on NPU"

    VALID = [
        Case(f"python3 -m verl.trainer.main_ppo {DP}=1\n", options={"mode": "consistency"}),
        Case(f"python3 -m verl.trainer.main_ppo {DP}=2\n", note="no collection: mode none"),
    ]
    INVALID = [
        Case(f"python3 -m verl.trainer.main_ppo \\\n    {DP}=2\n", options={"mode": "inference"}, expect=[(2, 50)]),
        Case(f"python3 -m verl.trainer.main_ppo \\\n    {DP}=4\n", options={"mode": "consistency"}, expect=[(2, 50)]),
    ]

    def check(self, ctx: LintContext) -> None:
        setting = ctx.run.setting(DP)
        if ctx.unresolved(setting):
            return
        if (setting.as_int() or 1) > 1:
            ctx.report(f"rollout data_parallel_size={setting.value} during collection: keep it at 1 on NPU",
                       at=setting.span, related=setting.related())
