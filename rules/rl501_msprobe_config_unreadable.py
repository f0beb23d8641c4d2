"""RL501: the msprobe config.json the script points at is not JSON (or cannot be read).

## What it does

Reports an msprobe config.json the script points at that is not JSON, cannot be read or does not
exist, at the position where the JSON decoder stops.

## Why

msprobe reads the file with `json.load` when `PrecisionDebugger` is built, inside a worker, after
the model has been loaded; a trailing comma, a comment or a UTF-8 BOM ends the job there. The
finding points at the line and column where the JSON decoder stops. A config that does not
exist is reported too (any dump config key or env var): an error when it should be beside the
script (an absolute path inside the script's folder), a warning with the path the linter tried when
it is relative (it resolves against each Ray worker's working directory) or may exist only on
the cluster.

## Use instead

Write strict JSON (no trailing commas, no comments, no BOM) at a path every worker can read.

## References

[mindstudio-probe (msprobe), its home page](https://gitcode.com/Ascend/MindStudio-Probe).
"""

from __future__ import annotations

import os

from rlpatch.lint.rule import Case, LintContext
from rlpatch.msprobe_config.api import Problem, references
from rlpatch.rules._msprobe_config import MsprobeConfigRule

_RUN0 = (
    "python3 -m verl.trainer.main_ppo \\\n"
    "    global_profiler.tool=precision_debugger \\\n"
    "    +global_profiler.global_tool_config.precision_debugger.config_path=msprobe.json\n"
)


class MsprobeConfigUnreadable(MsprobeConfigRule):
    code = "RL501"
    problems = frozenset({Problem.UNREADABLE, Problem.NOT_CHECKED})
    severity = "error"
    summary = "msprobe config.json is missing, not JSON or cannot be read"

    VALID = (
        Case(_RUN0, files={"msprobe.json": '{"task": "statistics", "level": "mix"}\n'}),
    )
    INVALID = (
        Case(_RUN0, files={"msprobe.json": '{\n  "task": "statistics",\n  "level": "mix",\n}\n'}, expect=[(4, 1)]),
        Case(_RUN0, expect=[(3, 72)], note="relative and missing: a warning with the resolved path"),
        Case('D=$(cd "$(dirname "$0")" && pwd)\nexport MSPROBE_SGLANG_CONFIG=$D/sglang.json\n'
             "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang\n", expect=[(2, 30)],
             note="absolute, in the script's own folder, missing: an error"),
        Case("export MSPROBE_ACTOR_CONFIG=/cluster/only/actor.json\npython3 -m verl.trainer.main_ppo\n",
             expect=[(1, 29)], note="may exist only on the cluster: a warning"),
    )

    def check(self, ctx: LintContext) -> None:
        self.check_missing(ctx)
        super().check(ctx)

    def check_missing(self, ctx: LintContext) -> None:
        """A referenced config that is not on this machine. An error when it cannot be anywhere else:
        an absolute path inside the script's own folder (script and configs travel together). A
        warning otherwise, with the path the linter tried: a relative path resolves against each Ray
        worker's working directory at run time, and an absolute one may exist only on the cluster."""
        base = os.path.abspath(ctx.options.config_root or os.path.dirname(ctx.run.file) or ".")
        for reference in references(ctx.run):
            path = ctx.resolve_path(reference.text)
            if os.path.isfile(path):
                continue
            what = f"{reference.what}={reference.text}"
            if os.path.exists(path):
                ctx.report(f"{what}: {path} is not a file", at=reference.span)
            elif not os.path.isabs(reference.text):
                ctx.report(f"{what}: no such file (looked for {path}); a relative path resolves against each Ray "
                           "worker's working directory at run time: prefer an absolute path", at=reference.span,
                           severity="warning")
            elif os.path.commonpath([base, os.path.abspath(path)]) == base:
                ctx.report(f"{what}: no such file ({path}, in the script's own folder)", at=reference.span)
            else:
                ctx.report(f"{what}: not on this machine ({path}); make sure it exists on every node of the cluster",
                           at=reference.span, severity="warning")
