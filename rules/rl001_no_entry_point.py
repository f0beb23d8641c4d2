"""RL001: no verl entry point found.

The linter only knows what a script does through the command that starts verl
(`python3 -m verl.trainer.main_ppo ...`, a recipe's `main_*` module, or `verl/trainer/main_*.py`,
behind any launcher: `torchrun`, `ray job submit -- python3`, `srun`, `uv run`, `"${LAUNCH[@]}"`).
When none is found, every other rule is silent, which looks like a clean bill of health. Usually
the launch is hidden in a file that could not be followed (`bash $OTHER`), in a command built at
run time, or the script is not a verl launch script at all.
"""

from __future__ import annotations

from rlpatch.lint.rule import Case, FileContext, LintRule
from rlpatch.shell.source import Span


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
    ]

    def check_file(self, ctx: FileContext) -> None:
        if ctx.runs:
            return
        hints = [u.what for u in ctx.evaluation.unknowns if "not found" in u.what or "which file" in u.what]
        hint = f" ({'; '.join(hints[:2])})" if hints else ""
        ctx.report(f"no verl entry point found (python3 -m verl.trainer.main_ppo ... or a recipe main){hint}",
                   at=Span(ctx.source.path, 1, 1, 1, 1 + len(ctx.source.line_text(1))))
