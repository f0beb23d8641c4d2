"""RL004: the entry module the script launches is not in the target verl.

## What it does

Reports a launch whose verl entry module (`python3 -m verl.trainer.main_ppo_sync`, or a script path
such as `verl/trainer/main_ppo_sync.py`) does not exist in the verl the script is checked against:
the tree given with `--verl-root`, else the release given with `--verl-version`.

## Why

verl adds and removes entry modules between releases: `verl.trainer.main_ppo_sync` shipped in 0.8.0
only (0.9.0 folded its trainer into `main_ppo`, which runs the v1 trainer by default), and
`verl.trainer.fsdp_sft_trainer` is gone from 0.7.1. An example script copied from another verl
version then fails at start-up with `No module named ...`, after the cluster was reserved and the
job queued; every other check of the script (the trainer it selects, the keys it sets) is about a
run that never starts. With a tree the module is looked up in it; with only a version, in the list
of entry modules of that release's wheel. Recipes and modules outside `verl.trainer` are looked up
only in a tree. Without a target verl the rule is silent (the assumed newest release says nothing
about the user's).

## Use instead

Launch the entry module this verl has (the message names the closest one, e.g.
`verl.trainer.main_ppo`), or check the script against the verl it was written for
(`--verl-root`, `--verl-version`).
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint.rule import Case, LintContext, LintRule

_ROOT = testing.case_root("verl_sync_trainer")  # a verl 0.8.0 look-alike with main_ppo and main_ppo_sync
_SYNC = "python3 -m verl.trainer.main_ppo_sync trainer.nnodes=1\n"
_RELEASE_091 = {"verl_version": "0.9.1", "verl_version_given": "0.9.1"}


class EntryModuleMissing(LintRule):
    code = "RL004"
    severity = "error"
    summary = "the launched entry module is not in the target verl"

    VALID = [
        Case(_SYNC, options={"verl_root": _ROOT}, note="0.8.0 has main_ppo_sync"),
        Case("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n", options=_RELEASE_091),
        Case(_SYNC, note="no target verl: nothing to check against"),
        Case("python3 -m recipe.dapo.main_dapo trainer.nnodes=1\n", options=_RELEASE_091,
             note="a recipe: not in the wheel, only a tree can say"),
    ]
    INVALID = [
        Case(_SYNC, options=_RELEASE_091, expect=[(1, 12)], note="removed in 0.9.0"),
        Case("python3 verl/trainer/main_ppo_v0.py trainer.nnodes=1\n", options={"verl_root": _ROOT},
             expect=[(1, 9)], note="a script path, looked up in the tree"),
    ]

    def check(self, ctx: LintContext) -> None:
        if not (ctx.options.verl_root or ctx.options.verl_version_given):
            return  # the assumed newest release is not the user's verl
        entry = ctx.run.entry_check()
        if entry.exists is False:
            ctx.report(f"the launched entry module does not exist: {entry.missing_text()}; the job fails at "
                       "start-up with `No module named`", at=ctx.run.entry_span)
