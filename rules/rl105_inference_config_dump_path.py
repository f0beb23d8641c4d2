"""RL105: the inference msprobe config.json must set `dump_path`.

On the inference side nobody chooses a folder for msprobe: without `dump_path` in the
config.json that `dump_config_path` / `msprobe_dump_config` points at, msprobe refuses the config
at engine start (after model loading).
"""

from __future__ import annotations

from rlpatch.lint.checks import msprobe_configs
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN = ("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.rollout.name=vllm \\\n"
        "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n")


class InferenceConfigDumpPath(LintRule):
    code = "RL105"
    severity = "error"
    modes = frozenset({"inference", "consistency"})
    summary = "the inference msprobe config.json must set dump_path"

    VALID = [Case(_RUN, files={"dump.json": '{"task": "statistics", "dump_path": "/tmp/d", "level": "mix"}\n'})]
    INVALID = [
        Case(_RUN, files={"dump.json": '{"task": "statistics", "level": "mix"}\n'}, expect=[(3, 86)]),
        Case(_RUN.replace("+actor_rollout_ref", "'+actor_rollout_ref").replace(
                 ".dump_config_path=dump.json", '={dump_config_path: "dump.json"}\''),
             files={"dump.json": '{"task": "statistics", "level": "mix"}\n'}, expect=[(3, 89)],
             note="a dict value is read as its keys: the finding points at the leaf's value"),
    ]

    def check(self, ctx: LintContext) -> None:
        for _role, span, path, data, _text in msprobe_configs(ctx, ("inference",)):
            if not data.get("dump_path"):
                ctx.report(f"{path}: the inference msprobe config must set dump_path", at=span)
