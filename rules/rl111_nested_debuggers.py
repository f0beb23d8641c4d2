"""RL111: verl's precision_debugger tool and the rlpatch engine patch in one run nest two debuggers.

## What it does

Reports a run that uses both verl's `precision_debugger` tool and rlpatch's engine patch switches
(`DUMP_ON`, `MSPROBE_ACTOR_CONFIG`).

## Why

msprobe's PrecisionDebugger is a per-process singleton. The rlpatch engine patch (driven by
`DUMP_ON` / `MSPROBE_ACTOR_CONFIG`, the consistency procedure) starts and stops it around the
actor's forward; verl's own tool starts and stops it around whole stages. Both in one run fight
over the same debugger: dumps are cut short or land in the wrong folder. Use one of them.

## Use instead

Use one of them: the engine patch for consistency runs, verl's tool for training dumps.
"""

from __future__ import annotations

from rlpatch.lint.rule import Case, LintContext, LintRule

ENGINE_PATCH_ENV = ("DUMP_ON", "MSPROBE_ACTOR_CONFIG")
_TOOL = "python3 -m verl.trainer.main_ppo global_profiler.tool=precision_debugger"
_INFER = " +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=d.json"


class NestedDebuggers(LintRule):
    code = "RL111"
    severity = "warning"
    modes = frozenset({"training", "consistency"})
    summary = "precision_debugger tool and the rlpatch engine patch in one run"

    VALID = [
        Case(_TOOL + "\n"),
        Case("export DUMP_ON=1 PROMPTS_ONLY=1\npython3 -m verl.trainer.main_ppo" + _INFER + "\n"),
    ]
    INVALID = [
        Case("export MSPROBE_ACTOR_CONFIG=actor.json\n" + _TOOL + "\n", expect=[(2, 34)]),
        Case("export DUMP_ON=1 PROMPTS_ONLY=1\n" + _TOOL + _INFER + "\n", expect=[(2, 34)]),
    ]

    def check(self, ctx: LintContext) -> None:
        if not ctx.run.training_tool:
            return
        patch_env = [ctx.run.env[name] for name in ENGINE_PATCH_ENV if name in ctx.run.env]
        if ctx.run.mode != "consistency" and not patch_env:
            return
        tool = ctx.run.setting("global_profiler.tool")
        names = ", ".join(var.name for var in patch_env) or "consistency mode"
        ctx.report(f"verl's precision_debugger tool and the rlpatch engine patch ({names}) both drive msprobe's "
                   "single PrecisionDebugger: use one of them", at=tool.key_span, related=[v.span for v in patch_env])
