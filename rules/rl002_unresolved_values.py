"""RL002: values that cannot be known statically, and the rules they disabled.

## What it does

Reports, once per value, the settings whose value only the cluster knows (`$(nproc)`,
`$SLURM_NNODES`) and the rules that were skipped because of them.

## Why

`trainer.n_gpus_per_node=$(nproc)` or `trainer.nnodes=$SLURM_NNODES` only get a value on the
cluster. rlpatch never guesses: rules that need such a value are skipped instead of firing
falsely, and this info finding says which value and which rules. Give the value with
`--env NAME=VALUE` (or `--use-env`) to have them checked.

## Use instead

Give the value the cluster will have: `rlpatch lint --env NAME=VALUE run.sh` (or `--use-env` for
this shell's environment), or write it into the script.
"""

from __future__ import annotations

from collections import defaultdict

from rlpatch.lint.rule import Case, FileContext, LintRule
from rlpatch.shell.api import Span


class UnresolvedValues(LintRule):
    code = "RL002"
    severity = "info"
    summary = "unresolved values (which, and which rules they disabled)"
    after_others = True

    VALID = [Case("NGPUS=8\npython3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$NGPUS\n")]
    INVALID = [
        Case("python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$(nproc)\n", expect=[(1, 58)]),
        Case("python3 -m verl.trainer.main_ppo \\\n    trainer.nnodes=$SLURM_NNODES\n", expect=[(2, 20)]),
        Case("CKPT=/data/${USER}/ckpt\npython3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=$CKPT/model\n",
             expect=[(1, 12)], note="points at the unknown piece, where it was written, not after it"),
        Case("STAMP=run-$(date +%s)\npython3 -m verl.trainer.main_ppo trainer.experiment_name=$STAMP\n",
             expect=[(1, 11)]),
    ]

    def check_file(self, ctx: FileContext) -> None:
        disabled: dict[Span, set[str]] = defaultdict(set)
        what: dict[Span, str] = {}
        for skipped in ctx.skipped:
            disabled[skipped.span].add(skipped.code)
            what.setdefault(skipped.span, skipped.what)
        for run in ctx.runs:
            for unknown in run.unknown:
                what.setdefault(unknown.span, unknown.what)
        for unknown in ctx.evaluation.unknowns:
            what.setdefault(unknown.span, unknown.what)
        for span, text in sorted(what.items()):
            codes = sorted(disabled.get(span, ()))
            rules = f"; not checked: {', '.join(codes)}" if codes else ""
            ctx.report(f"cannot be known statically: {text}{rules}", at=span)
