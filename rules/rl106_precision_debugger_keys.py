"""RL106: verl's precision_debugger tool needs steps, save_path and config_path.

## What it does

Reports `global_profiler.tool=precision_debugger` without `global_profiler.steps`,
`global_profiler.save_path` or `global_profiler.global_tool_config.precision_debugger.config_path`.

## Why

`global_profiler.tool=precision_debugger` alone does nothing useful: `global_profiler.steps`
defaults to null, which dumps *nothing* (no error); without `global_profiler.save_path` there is
no place for `{save_path}/step_N/{stage}`; without
`global_profiler.global_tool_config.precision_debugger.config_path` msprobe has no config. All
three are needed before the job is worth its queue time.

## Use instead

Set all three: the steps to dump, where to write, and the msprobe config.json.
"""

from __future__ import annotations

from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.msprobe_config.api import TRAINING_CONFIG_KEY

_TOOL = "python3 -m verl.trainer.main_ppo \\\n    global_profiler.tool=precision_debugger \\\n"
_CONFIG = f"    +{TRAINING_CONFIG_KEY}=msprobe.json"


class PrecisionDebuggerKeys(LintRule):
    code = "RL106"
    severity = "error"
    modes = frozenset({"training"})
    summary = "precision_debugger needs global_profiler.steps, save_path and config_path"

    VALID = [Case(_TOOL + "    global_profiler.steps=[1,2] \\\n    global_profiler.save_path=/tmp/dump \\\n" + _CONFIG + "\n")]
    INVALID = [
        Case(_TOOL + "    global_profiler.save_path=/tmp/dump \\\n" + _CONFIG + "\n", expect=[(2, 5)]),
        Case(_TOOL + "    global_profiler.steps=null \\\n    global_profiler.save_path=/tmp/dump\n",
             expect=[(2, 5), (3, 27)]),
    ]

    def check(self, ctx: LintContext) -> None:
        tool = ctx.run.setting("global_profiler.tool")
        needed = {
            "global_profiler.steps": "null steps dump nothing",
            "global_profiler.save_path": "dumps go to {save_path}/step_N/{stage}",
            TRAINING_CONFIG_KEY: "msprobe needs its config.json",
        }
        for key, why in needed.items():
            setting = ctx.run.setting(key)
            if ctx.unresolved(setting) or not setting.is_null():
                continue
            at = setting.span if setting.is_set else tool.key_span
            # Name the tool the line really sets (a --mode training lint of `tool=npu` reaches here too).
            other = "" if tool.value == "precision_debugger" else f" (this run has {tool.describe()})"
            ctx.report(f"global_profiler.tool=precision_debugger needs {key} ({why}); found {setting.describe()}"
                       f"{other}", at=at, related=[tool.key_span] if at != tool.key_span else ())
