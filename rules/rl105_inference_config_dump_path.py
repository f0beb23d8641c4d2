"""RL105: the inference msprobe config.json, and the engine patch's, must set `dump_path`.

## What it does

Reports an inference-side msprobe config.json (and the `MSPROBE_ACTOR_CONFIG` of a consistency run)
without `dump_path`.

## Why

On the inference side nobody chooses a folder for msprobe: without `dump_path` in the
config.json that `dump_config_path` / `msprobe_dump_config` (or, with rlpatch's SGLang ModelRunner
patch, `MSPROBE_SGLANG_CONFIG*`) points at, msprobe refuses the config at engine start (after
model loading). The same holds for the training side of a consistency run: rlpatch's engine
patch reads `MSPROBE_ACTOR_CONFIG` and raises at the first dumped pass when it has no
`dump_path` (it writes `update_actor_log.jsonl` there), which is after a whole rollout.

## Use instead

Set `dump_path` in the config.json, an absolute path every worker can write to.

## References

[mindstudio-probe (msprobe), its home page](https://gitcode.com/Ascend/MindStudio-Probe).
"""

from __future__ import annotations

from rlpatch.lint.checks import msprobe_configs
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN = ("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.rollout.name=vllm \\\n"
        "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n")
_GOOD = '{"task": "statistics", "dump_path": "/tmp/d", "level": "mix"}\n'
_NO_DUMP_PATH = '{"task": "statistics", "level": "mix"}\n'
_ACTOR = "export DUMP_ON=1 PROMPTS_ONLY=1\nexport MSPROBE_ACTOR_CONFIG=actor.json\n"
_SGLANG = "export MSPROBE_SGLANG_CONFIG=dump.json\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang\n"
_WHAT = {"inference": "the inference msprobe config", "actor": "the engine patch's msprobe config (MSPROBE_ACTOR_CONFIG)"}
_WHY = {"inference": "msprobe refuses it when the engine starts",
        "actor": "the patched engine raises at the first dumped pass"}


class InferenceConfigDumpPath(LintRule):
    code = "RL105"
    severity = "error"
    modes = frozenset({"inference", "consistency"})
    summary = "the inference (and MSPROBE_ACTOR_CONFIG) msprobe config.json must set dump_path"

    VALID = [
        Case(_RUN, files={"dump.json": _GOOD}),
        Case(_ACTOR + _RUN, files={"dump.json": _GOOD, "actor.json": '{"task": "statistics", "dump_path": "/d/t"}\n'}),
    ]
    INVALID = [
        Case(_RUN, files={"dump.json": _NO_DUMP_PATH}, expect=[(3, 86)]),
        Case(_RUN.replace("+actor_rollout_ref", "'+actor_rollout_ref").replace(
                 ".dump_config_path=dump.json", '={dump_config_path: "dump.json"}\''),
             files={"dump.json": _NO_DUMP_PATH}, expect=[(3, 89)],
             note="a dict value is read as its keys: the finding points at the leaf's value"),
        Case(_SGLANG, files={"dump.json": _NO_DUMP_PATH}, expect=[(1, 30)],
             note="the SGLang < 0.5.11 route (rlpatch's ModelRunner patch) is an inference dump"),
        Case(_ACTOR + _RUN, files={"dump.json": _GOOD, "actor.json": _NO_DUMP_PATH}, expect=[(2, 29)],
             note="the engine patch raises without a dump_path"),
    ]

    def check(self, ctx: LintContext) -> None:
        for role, span, path, data, _text in msprobe_configs(ctx, ("inference", "actor")):
            if not data.get("dump_path"):
                ctx.report(f"{path}: {_WHAT[role]} must set dump_path ({_WHY[role]})", at=span)
