"""RL109: the msprobe config `level` should be `mix` unless chosen on purpose.

`mix` dumps both module-level (L0) and API-level (L1) data, which is what training-inference
comparison needs. msprobe's default is `L1`, so a config without `level` silently drops module
boundaries. If another level is intended, say so with `--allow-level L1` (or `allow-level` in
`[tool.rlpatch]`).
"""

from __future__ import annotations

from rlpatch.lint.checks import msprobe_configs
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN = ("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.rollout.name=vllm \\\n"
        "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n")


class MsprobeLevelMix(LintRule):
    code = "RL109"
    severity = "warning"
    summary = "msprobe config level should be mix unless explicitly chosen (--allow-level)"

    VALID = [
        Case(_RUN, files={"dump.json": '{"dump_path": "/tmp/d", "level": "mix"}\n'}),
        Case(_RUN, files={"dump.json": '{"dump_path": "/tmp/d", "level": "L1"}\n'}, options={"allow_level": ["L1"]}),
    ]
    INVALID = [
        Case(_RUN, files={"dump.json": '{\n  "dump_path": "/tmp/d",\n  "level": "L1"\n}\n'}, expect=[(3, 3)]),
        Case(_RUN, files={"dump.json": '{"dump_path": "/tmp/d"}\n'}, expect=[(1, 1)]),
        Case("export MSPROBE_SGLANG_CONFIG=dump.json\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang\n",
             files={"dump.json": '{"dump_path": "/tmp/d", "level": "L1"}\n'}, expect=[(1, 25)],
             note="the SGLang patch's config, named in the env"),
    ]

    def check(self, ctx: LintContext) -> None:
        for _role, span, path, data, text in msprobe_configs(ctx):
            level = data.get("level")
            if level == "mix" or (level is not None and str(level) in ctx.options.allow_level):
                continue
            if level is None:
                ctx.report("msprobe config has no level (msprobe's default is L1); set \"level\": \"mix\"",
                           at=ctx.json_position(path, text, "level"), related=[span])
            else:
                ctx.report(f"msprobe config level is {level!r}, not mix (use --allow-level {level} if intended)",
                           at=ctx.json_position(path, text, "level"), related=[span])
