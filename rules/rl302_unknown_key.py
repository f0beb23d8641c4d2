"""RL302: a plain override names a key that the verl config does not have.

## What it does

Reports a plain `key=value` override of a key that the composed config of the verl that will run
does not have.

## Why

Hydra composes verl's config in struct mode: `key=value` may only change an existing key ("Could
not override ... To append to your config use +"). The schema is the real config of the verl that
will run (`--verl-root`, `--verl-version`, or the verl installed for `--python`; with none named,
that of the script's own interpreter when known here, else the newest release): the config the
launched entry module composes (its own `@hydra.main(config_path, config_name)`, so
`verl.trainer.sft_trainer` is checked against `sft_trainer_engine` and a recipe or an experimental
trainer against its own config), with `--config-path`/`--config-name` applied as Hydra applies them
(a relative path is the entry module's folder's), the search path of `hydra.searchpath` (the
script's, else the config's own) and the script's group overrides. So keys removed in a release
are caught too (`megatron.grad_offload` from 0.9.1, `trainer.use_legacy_worker_impl` from 0.8.0).
Keys below the empty `engine_kwargs.vllm` / `.sglang` / `.trtllm` dicts need `+` (the inference
dump key itself is RL103). The message suggests the nearest existing key, or, for a key verl moved
(`actor_rollout_ref.rollout.skip.enable` is `skip.rollout.enable` from 0.9.0), its spelling on
this version (`rlpatch.shell.defaults.RENAMES`). A config the tree does not hold (a `pkg://`
search path to a package installed elsewhere, a recipe not checked out) is one RL002 note, never an
error; an entry module that does not exist is RL004 alone.

## Use instead

Fix the key's spelling (the message names the nearest key, or its spelling on this verl), or add a
new key with `+key=value`.

## References

[Hydra's override grammar](https://hydra.cc/docs/advanced/override_grammar/basic/).
"""

from __future__ import annotations

from rlpatch import testing
from rlpatch.lint import hydra_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_OPTIONS = testing.hydra_case_options()


class UnknownConfigKey(LintRule):
    code = "RL302"
    severity = "error"
    summary = "plain override of a key the verl config does not have"

    VALID = (
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm trainer.nnodes=$SLURM_NNODES\n",
             options=_OPTIONS),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm trainer.nnodes=2 \\\n"
             "    +actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=triton\n", options=_OPTIONS),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm skip.rollout.enable=False\n",
             options=_OPTIONS),
    )
    INVALID = (
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    trainer.nnode=2\n", options=_OPTIONS, expect=[(2, 5)]),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang \\\n"
             "    actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=triton\n", options=_OPTIONS, expect=[(2, 5)]),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm model_engine=megatrom\n", options=_OPTIONS, expect=[(1, 83)]),
        # the value is only known on the cluster, the misspelt key is wrong everywhere
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    trainer.n_gpu_per_node=$(nproc)\n", options=_OPTIONS, expect=[(2, 5)]),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    actor_rollout_ref.rollout.skip.enable=False\n", options=_OPTIONS, expect=[(2, 5)],
             note="moved in 0.9.0: the message names skip.rollout.enable"),
    )

    def check(self, ctx: LintContext) -> None:
        verdict = hydra_family.schema_verdict(ctx)
        if verdict is None:  # no verl to check against (the invocation's one note says why)
            return
        hydra_family.note_unchecked(ctx, verdict)
        # A value known only on the cluster does not hide a wrong key: the key alone is judged.
        for problem in hydra_family.problems_in_script(ctx, verdict, self.code, value_needed=False):
            ctx.report(problem.message, at=problem.at, related=problem.related)
