"""RL501: the msprobe config.json the script points at is not JSON (or cannot be read).

msprobe reads the file with `json.load` when `PrecisionDebugger` is built, inside a worker, after
the model has been loaded; a trailing comma, a comment or a UTF-8 BOM ends the job there. The
finding points at the line and column where the JSON decoder stops.
"""

from __future__ import annotations

from rlpatch.lint import msprobe_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN0 = (
    "python3 -m verl.trainer.main_ppo \\\n"
    "    global_profiler.tool=precision_debugger \\\n"
    "    +global_profiler.global_tool_config.precision_debugger.config_path=msprobe.json\n"
)


class MsprobeConfigUnreadable(LintRule):
    code = "RL501"
    severity = "error"
    summary = "msprobe config.json is not JSON or cannot be read"

    VALID = (
        Case(_RUN0, files={"msprobe.json": '{"task": "statistics", "level": "mix"}\n'}),
    )
    INVALID = (
        Case(_RUN0, files={"msprobe.json": '{\n  "task": "statistics",\n  "level": "mix",\n}\n'}, expect=[(4, 1)]),
    )

    def check(self, ctx: LintContext) -> None:
        msprobe_family.report(ctx, self.code)
