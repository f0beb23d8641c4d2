"""RL110: `global_profiler.tool=precision_debugger` does not exist before verl 0.8.0.

## What it does

Reports `global_profiler.tool=precision_debugger` on a verl older than 0.8.0 (from `--verl-version`,
`--verl-root` or `[tool.rlpatch]`).

## Why

verl's own msprobe tool arrived in 0.8.0. On older verl the tool name is rejected, or worse
ignored, depending on the version. Upgrade verl or use the rlpatch engine patch instead. The
verl version comes from `--verl-version`, `--verl-root` or `[tool.rlpatch]` (default: newest).

## Use instead

Upgrade verl to 0.8.0 or newer, or dump the training side with rlpatch's engine patch (`rlpatch
apply --mode consistency`) instead.
"""

from __future__ import annotations

from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.upstream.versions import Version

_RUN = "python3 -m verl.trainer.main_ppo \\\n    global_profiler.tool=precision_debugger\n"


class PrecisionDebuggerNeedsVerl08(LintRule):
    code = "RL110"
    severity = "error"
    modes = frozenset({"training"})
    summary = "precision_debugger tool on verl < 0.8.0"

    VALID = [Case(_RUN, options={"verl_version": "0.8.0"}), Case(_RUN)]
    INVALID = [Case(_RUN, options={"verl_version": "0.7.1"}, expect=[(2, 26)])]

    def check(self, ctx: LintContext) -> None:
        version = ctx.options.verl_version
        if version < Version.parse("0.8.0"):
            tool = ctx.run.setting("global_profiler.tool")
            ctx.report(f"global_profiler.tool=precision_debugger needs verl >= 0.8.0 (this is verl {version})",
                       at=tool.span, related=tool.related())
