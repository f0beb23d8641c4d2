"""RL607: the trainer a consistency run selects is not covered by the patched set on that verl.

## What it does

Reports a consistency run whose trainer (the v1 `PPOTrainer`, `RayPPOTrainer`, `FullyAsyncTrainer`)
is not covered by the patched set on the target verl.

## Why

A patch only counts if the code it changes runs. From verl 0.9.0
`trainer.use_v1` defaults to true and `verl.trainer.main_ppo` runs the v1 `PPOTrainer`, not
`RayPPOTrainer.fit`; the fully-async entry point (`fully_async_main`) runs `FullyAsyncTrainer`
whatever `trainer.use_v1` says. A tree patched for one trainer and launched with another says
`set: applied` and still dumps log-probs of prompt plus response that cannot be paired with the
inference prefill. The trainer comes from the run (`rlpatch detect` shows it); whether the patched
set covers it comes from `rlpatch verify --format json --mode consistency` on the target tree
(`--verl-root`, or the verl of `--python`), as for RL605. The fix: `rlpatch apply --mode consistency`
(the set covers every trainer on 0.7.0 to 0.9.1), or, where rlpatch cannot patch the selected
trainer (its anchors drifted), select one the set covers (`trainer.use_v1=False` for `RayPPOTrainer`).
On verl 0.7.x the legacy workers (`trainer.use_legacy_worker_impl`) are RL606's.
Which trainer runs is read from the entry module in the target tree (or, with only a version, from
what that release ships): verl 0.8.0's `verl.trainer.main_ppo_sync` defines and starts a
`PPOTrainer` of its own, which no rlpatch rule patches, so no patched set covers it (launch
`verl.trainer.main_ppo` instead). An entry module the target verl does not have is RL004's.

## Use instead

`rlpatch apply --mode consistency` on the tree (the set covers every trainer on verl 0.7.0 to
0.9.1), or select a trainer the set covers (`trainer.use_v1=False` for `RayPPOTrainer`).
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint import versions_family
from rlpatch.lint.rule import Case, LintContext, LintRule
from rlpatch.shell.api import OWN_TRAINER

_ROOT = testing.case_root("verl_trainers")  # 0.9.1: RayPPOTrainer covered, the v1 trainer not
_SYNC_ROOT = testing.case_root("verl_sync_trainer")  # 0.8.0 with main_ppo_sync and its own PPOTrainer
_RUN = (
    "export DUMP_ON=1 PROMPTS_ONLY=1\n"
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json{extra}\n"
)


class TrainerNotCovered(LintRule):
    code = "RL607"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "consistency run on a trainer the patched set does not cover"

    VALID = (
        Case(_RUN.format(extra=" \\\n    trainer.use_v1=False"), options={"verl_root": _ROOT}),
        Case(_RUN.format(extra="").replace("export DUMP_ON=1 PROMPTS_ONLY=1\n", ""), options={"verl_root": _ROOT},
             note="not a consistency run"),
    )
    INVALID = (
        Case(_RUN.format(extra=""), options={"verl_root": _ROOT}, expect=[(2, 12)], note="the 0.9 default: v1"),
        Case(_RUN.format(extra="").replace("main_ppo ", "main_ppo_sync "), options={"verl_root": _SYNC_ROOT},
             expect=[(2, 12)], note="0.8.0's main_ppo_sync starts a PPOTrainer of its own"),
        Case(_RUN.format(extra=" \\\n    trainer.use_v1=True"), options={"verl_root": _ROOT}, expect=[(4, 20)]),
    )

    def check(self, ctx: LintContext) -> None:
        trainer, why, setting = ctx.run.trainer()
        if trainer is None:
            if setting is not None:
                ctx.unresolved(setting)
            return
        if trainer == OWN_TRAINER:  # no rule names it: whatever the tree's state, nothing patches it
            entry = ctx.run.entry_check()
            ctx.report(f"consistency run on {entry.own_trainer} of {entry.file} (read from {entry.against}), a "
                       "trainer no rlpatch rule patches: the training dump will not pair with the inference prefill; "
                       "launch verl.trainer.main_ppo instead (its trainers are the ones rlpatch apply --mode "
                       "consistency covers)", at=ctx.run.entry_span)
            return
        if not versions_family.target_given(ctx.options) and not versions_family.installed(ctx.options, "verl").found:
            return  # no verl tree to verify
        coverage, error = versions_family.verify_trainers(ctx, "megatron" if ctx.run.megatron else "fsdp")
        verdict = {entry["trainer"]: entry for entry in coverage}
        selected = verdict.get(trainer)
        if error or selected is None or selected["state"] != "incomplete":
            return  # RL605 reports a verify that failed; an absent trainer fails at start-up anyway
        at = setting.span if setting is not None and setting.is_set else ctx.run.entry_span
        from rlpatch.upstream.trainers import TRAINERS  # here: most lints never get this far

        ctx.report(f"consistency run on the {TRAINERS[trainer].label} ({why}), but the patched set does not cover "
                   f"it on this tree: {', '.join(selected['missing'])}; the training dump will not pair with the "
                   f"inference prefill: {_fix(trainer, verdict)}", at=at,
                   related=setting.related() if setting is not None else ())


def _fix(trainer: str, verdict: dict[str, dict]) -> str:
    fix = "run rlpatch apply --mode consistency"
    if trainer == "v1" and verdict.get("v0", {}).get("state") == "complete":
        fix += ", or select the covered RayPPOTrainer with trainer.use_v1=False"
    elif trainer == "v0" and verdict.get("v1", {}).get("state") == "complete":
        fix += ", or drop trainer.use_v1=False (the v1 trainer is covered)"
    return fix
