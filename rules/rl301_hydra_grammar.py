"""RL301: Hydra cannot parse an override.

## What it does

Reports an override Hydra's own parser rejects (an unexpanded `~/`, a sweep `a,b` without
`--multirun`, a placeholder such as `<path>`, a stray bracket), at the offending character.

## Why

verl hands every `key=value` argument to Hydra's override parser. Things that bash passes through
unchanged are fatal there: `~/` is not expanded after `key=` (bash expands `~` only at the start
of a word or after `:` in assignments), `a,b` is a sweep that needs `--multirun`, a placeholder
like `<path>` or a stray bracket is a syntax error. Hydra reports it seconds after start; on a
cluster that is still a full queue cycle. Findings point at the offending character.

## Use instead

Write the value as Hydra reads it: an absolute path, a quoted string (`key='a,b'`), a real value for
every placeholder.

## References

[Hydra's override grammar](https://hydra.cc/docs/advanced/override_grammar/basic/).
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint import hydra_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_OPTIONS = testing.hydra_case_options()


class HydraGrammar(LintRule):
    code = "RL301"
    severity = "error"
    summary = "override grammar error (Hydra's own override parser)"

    VALID = (
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    data.train_files=$HOME/data/train.parquet trainer.logger=[console,wandb]\n", options=_OPTIONS),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    trainer.logger='[console,wandb]'\n", options=_OPTIONS),
    )
    INVALID = (
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    data.train_files=~/data/train.parquet\n", options=_OPTIONS, expect=[(2, 22)]),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    trainer.logger=console,wandb\n", options=_OPTIONS, expect=[(2, 20)]),
        Case("MODEL=\"<path>\"\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm actor_rollout_ref.model.path=$MODEL\n", options=_OPTIONS, expect=[(1, 8)]),
    )

    def check(self, ctx: LintContext) -> None:
        verdict = hydra_family.schema_verdict(ctx)
        if verdict is None:  # no verl to check against (the invocation's one note says why)
            return
        hydra_family.note_unchecked(ctx, verdict)
        for problem in hydra_family.problems_in_script(ctx, verdict, self.code, value_needed=True):
            ctx.report(problem.message, at=problem.at, related=problem.related)
