"""RL608: vLLM-Ascend hands `scheduled_tokens` to msprobe's `start()`: mindstudio-probe must be 26.2.0 or newer.

## What it does

Reports a run with the vLLM-Ascend msprobe dump whose vLLM-Ascend runner passes `scheduled_tokens` to
the debugger's `start()` (vLLM-Ascend main after its request-scoped dump change, vllm-ascend PR 13377;
in no release up to v0.25.1rc1) while the inference environment has mindstudio-probe older than 26.2.0.

## Why

msprobe 26.2.0 is the first whose `PrecisionDebugger.start(model, token_range, rank_id,
scheduled_tokens)` takes the argument (26.1.0's is `start(model, token_range, rank_id)`: checked on
both released wheels). With an older msprobe the runner's first dumped step raises `TypeError:
start() got an unexpected keyword argument 'scheduled_tokens'`, and the rollout dies after the job
has already waited for its cards.

## Use instead

Install mindstudio-probe 26.2.0 or newer where vLLM-Ascend runs, or use a vLLM-Ascend release (up to
0.25.x) whose runner does not pass the argument.

## Exceptions

Nothing is reported when the vLLM-Ascend tree or the mindstudio-probe version is unknown (give
`--vllm-ascend-root` or `--python`): the runner file is read from the tree, never guessed from a version.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rlpatch import testing
from rlpatch.lint import versions_family
from rlpatch.lint.rule import Case, LintContext, LintRule

if TYPE_CHECKING:  # a plain lint loads this rule: pathlib is a few milliseconds of its start
    from pathlib import Path

_RUN = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    ++actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)
_MAIN_26_1 = testing.case_root("targets/vllm-ascend-main-msprobe-26.1")
_MAIN_26_2 = testing.case_root("targets/vllm-ascend-main-msprobe-26.2")
_RELEASE = testing.case_root("targets/vllm-ascend-0.13.0")

# The runner file and the call that hands the scheduler's counts to msprobe: either directly
# (`debugger.start(..., scheduled_tokens=...)`) or through vLLM-Ascend's `_start_dump_data(**kwargs)`.
RUNNER = "worker/model_runner_v1.py"  # inside the vllm_ascend package (a Path)
PASSES_SCHEDULED_TOKENS = re.compile(r"(?:_start_dump_data|\.start)\([^)]*\bscheduled_tokens\s*=")
MAX_RUNNER_BYTES = 8 * 1024 * 1024  # the real file is about 200 KB


class ScheduledTokensNeedsMsprobe262(LintRule):
    code = "RL608"
    severity = "error"
    summary = "vLLM-Ascend passes scheduled_tokens to msprobe's start(): mindstudio-probe >= 26.2.0"

    VALID = (
        Case(_RUN, options={"vllm_ascend_root": _MAIN_26_2}),
        Case(_RUN, options={"vllm_ascend_root": _RELEASE}, note="a release runner passes no such argument"),
    )
    INVALID = (
        Case(_RUN, options={"vllm_ascend_root": _MAIN_26_1}, expect=[(2, 5)]),
    )

    def check(self, ctx: LintContext) -> None:
        for key in (versions_family.VLLM_DUMP_CONFIG_PATH, versions_family.VLLM_DUMP_CONFIG):
            setting = versions_family.dump_setting(ctx.run, key)
            if setting is None:
                continue
            package = versions_family.installed(ctx.options, "vllm-ascend").location
            if package is None or not passes_scheduled_tokens(package / RUNNER):
                return
            msprobe = versions_family.version(ctx, "mindstudio-probe", setting)
            if msprobe is not None and msprobe < "26.2.0":
                ctx.report(f"this vLLM-Ascend's runner ({package / RUNNER}) passes scheduled_tokens to msprobe's "
                           f"start(), which mindstudio-probe {msprobe} does not take: the first dumped step fails "
                           "(TypeError); install mindstudio-probe>=26.2.0 where vLLM-Ascend runs",
                           at=setting.key_span, related=setting.related())
            return


def passes_scheduled_tokens(runner: Path) -> bool:
    """Does the runner hand `scheduled_tokens` to msprobe's start()? (False when it cannot be read.)"""
    try:
        with open(runner, "rb") as handle:
            text = handle.read(MAX_RUNNER_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    return PASSES_SCHEDULED_TOKENS.search(text) is not None
