"""RL104: the training-mode msprobe config.json must not set `dump_path`.

## What it does

Reports a `dump_path` in the msprobe config.json of a training-mode run (verl's `precision_debugger`
tool).

## Why

With verl's own `precision_debugger` tool, verl chooses where each dump goes:
`{global_profiler.save_path}/step_N/{stage}`. A `dump_path` in the config.json fights that: all
stages and steps land in one folder and overwrite each other (or verl's path silently wins,
depending on the version). Remove `dump_path` and set `global_profiler.save_path`.

## Use instead

Remove `dump_path` from the config.json and set `global_profiler.save_path`: verl writes each dump
to `{save_path}/step_N/{stage}`.

## References

[mindstudio-probe (msprobe), its home page](https://gitcode.com/Ascend/MindStudio-Probe).
"""

from __future__ import annotations

from rlpatch.lint.checks import msprobe_configs
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN = ("python3 -m verl.trainer.main_ppo \\\n    global_profiler.tool=precision_debugger \\\n"
        "    global_profiler.steps=[1] global_profiler.save_path=/tmp/dump \\\n"
        "    +global_profiler.global_tool_config.precision_debugger.config_path=msprobe.json\n")


class TrainingConfigDumpPath(LintRule):
    code = "RL104"
    severity = "error"
    modes = frozenset({"training"})
    summary = "the training msprobe config.json must not set dump_path"

    VALID = [Case(_RUN, files={"msprobe.json": '{"task": "statistics", "level": "mix"}\n'})]
    INVALID = [Case(_RUN, files={"msprobe.json": '{\n  "task": "statistics",\n  "dump_path": "/x"\n}\n'},
                    expect=[(3, 3)])]

    def check(self, ctx: LintContext) -> None:
        for _role, span, path, data, text in msprobe_configs(ctx, ("training",)):
            if "dump_path" in data:
                ctx.report("msprobe config sets dump_path, but verl's precision_debugger tool sets "
                           "{save_path}/step_N/{stage}: remove it", at=ctx.json_position(path, text, "dump_path"),
                           related=[span])
