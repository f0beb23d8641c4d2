"""RL001: no verl entry point found.

## What it does

Reports a script in which no command starts verl (`python3 -m verl.trainer.main_ppo`, a recipe's
`main_*` module, `verl/trainer/main_*.py`, behind any launcher).

## Why

The linter only knows what a script does through the command that starts verl
(`python3 -m verl.trainer.main_ppo ...`, a recipe's `main_*` module, or `verl/trainer/main_*.py`,
behind any launcher: `torchrun`, `ray job submit -- python3`, `srun`, `uv run`, `"${LAUNCH[@]}"`).
When none is found, every other rule is silent, which looks like a clean bill of health. Usually
the launch is hidden in a file that could not be followed (`bash $OTHER`), in a command built at
run time, or the script is not a verl launch script at all. A common case is the field's wrapper
template (`sed ... "$ORIG" > "$TMP"; bash "$TMP" overrides`): the file it runs exists only at run
time, so the message says to lint the original with the same overrides after `--` (and, where
`rlpatch gen` exists, to let it write a collection script that needs no run-time copy).

## Use instead

Lint the script that really holds the verl command, or give the linter the overrides a wrapper adds:
`rlpatch lint original.sh -- key=value ...`. A file that is not a launch script can be skipped with
`--skip-non-verl`.
"""

from __future__ import annotations

import importlib.util

from rlpatch.lint.rule import Case, FileContext, LintRule
from rlpatch.shell.api import Span, Unknown

_WRAPPER = ('ORIG=run_grpo.sh\nTMP=$(mktemp)\nsed "s/enforce_eager=False/enforce_eager=True/" "$ORIG" > "$TMP"\n'
            'bash "$TMP" actor_rollout_ref.rollout.enforce_eager=True \\\n'
            "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=/data/infer.json\n")


class NoEntryPoint(LintRule):
    code = "RL001"
    severity = "error"
    summary = "no verl entry point found"

    VALID = [
        Case("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n"),
        Case('LAUNCH=(ray job submit --address=auto --)\n"${LAUNCH[@]}" python3 -m verl.trainer.main_ppo\n'),
        Case("bash inner.sh data.train_batch_size=8\n", files={"inner.sh": 'python3 -m verl.trainer.main_ppo "$@"\n'}),
    ]
    INVALID = [
        Case("python3 train.py --lr 1e-5\n", expect=[(1, 1)]),
        Case("bash missing.sh data.train_batch_size=8\n", expect=[(1, 1)]),
        Case(_WRAPPER, expect=[(1, 1)], note="the field's wrapper: lint the original with -- overrides"),
    ]

    def check_file(self, ctx: FileContext) -> None:
        if ctx.runs:
            return
        at = Span(ctx.source.path, 1, 1, 1, 1 + len(ctx.source.line_text(1)))
        generated = [u for u in ctx.evaluation.unknowns if "which file" in u.what]
        if generated:
            ctx.report(_generated_file_message(generated[0]), at=at, related=[generated[0].span])
            return
        hints = [u.what for u in ctx.evaluation.unknowns if "not found" in u.what]
        hint = f" ({'; '.join(hints[:2])})" if hints else ""
        ctx.report(f"no verl entry point found (python3 -m verl.trainer.main_ppo ... or a recipe main){hint}", at=at)


def _generated_file_message(unknown: Unknown) -> str:
    """For `bash "$TMP" overrides`: the file exists only at run time (a copy the script writes)."""
    import shlex  # here: only this rare message quotes arguments

    forwarded = " ".join(shlex.quote(arg) for arg in unknown.args)
    lint = f"rlpatch lint ORIGINAL.sh -- {forwarded}" if forwarded else "rlpatch lint ORIGINAL.sh"
    command = unknown.what.removeprefix("cannot tell which file ").removesuffix(" runs")
    message = (f"no verl entry point found: line {unknown.span.line} runs {command}, a file known only at run time "
               "(a copy the script writes, e.g. with sed), which the linter cannot read; lint the original launch "
               f"script with the same overrides instead: `{lint}`")
    if importlib.util.find_spec("rlpatch.gen") is not None and importlib.util.find_spec("rlpatch.gen.cli") is not None:
        message += ", or let `rlpatch gen` write the collection script from it"
    return message
