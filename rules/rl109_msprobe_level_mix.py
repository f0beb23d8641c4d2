"""RL109: the msprobe config `level` must be one the run can use: L0 for consistency, else mix.

## What it does

Reports an msprobe config `level` the run cannot use: anything but `L0` in a consistency run (an
error), anything but `mix` elsewhere (a warning), unless allowed with `--allow-level`.

## Why

Consistency runs are compared with `msprobe compare --consistent_check`, which matches L0 module
rows only. msprobe 26.2.0 fails on every `mix` pair of the two engines with "Conflicting
comparison data: the two columns cannot be monotonically increasing at the same time." (the API
rows of the two sides cannot be ordered together), and L1/L2/debug dumps have no module rows to
match: a consistency config needs `"level": "L0"` (measured on real dumps of twin models named as
FSDP1, FSDP2, Megatron and vLLM name them). Training and inference dumps are read by hand, where
`mix` gives both module (L0) and API (L1) rows; msprobe's default is `L1`, so a config without
`level` silently drops module boundaries. If another level is intended, say so with
`--allow-level LEVEL` (or `allow-level` in `[tool.rlpatch]`). In a consistency run a level other than
L0 is an error (the comparison cannot run); elsewhere a warning.

## Use instead

`"level": "L0"` for consistency runs, `"level": "mix"` for training and inference dumps read by
hand.

## References

[mindstudio-probe (msprobe), its home page](https://gitcode.com/Ascend/MindStudio-Probe).
"""

from __future__ import annotations

from rlpatch.lint.checks import msprobe_configs
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN = ("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.rollout.name=vllm \\\n"
        "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n")
_C = {"mode": "consistency"}
_WHY_NOT = {
    "mix": "msprobe compare --consistent_check fails on mix dumps of two engines (\"Conflicting comparison data\")",
    None: "msprobe's default level L1 has no module rows to compare",
}


class MsprobeLevelMix(LintRule):
    code = "RL109"
    severity = "warning"
    summary = "msprobe config level: L0 for consistency, mix otherwise, unless chosen (--allow-level)"

    VALID = [
        Case(_RUN, files={"dump.json": '{"dump_path": "/tmp/d", "level": "mix"}\n'}),
        Case(_RUN, files={"dump.json": '{"dump_path": "/tmp/d", "level": "L1"}\n'}, options={"allow_level": ["L1"]}),
        Case(_RUN, files={"dump.json": '{"dump_path": "/tmp/d", "level": ["L1"]}\n'},
             note="a level that is no string at all is RL502's (a wrong value), not a level to choose"),
        Case(_RUN, files={"dump.json": '{"dump_path": "/tmp/d", "level": "L0"}\n'}, options=_C,
             note="consistency: the level msprobe compare --consistent_check can compare"),
    ]
    INVALID = [
        Case(_RUN, files={"dump.json": '{\n  "dump_path": "/tmp/d",\n  "level": "L1"\n}\n'}, expect=[(3, 3)]),
        Case(_RUN, files={"dump.json": '{"dump_path": "/tmp/d"}\n'}, expect=[(1, 1)]),
        Case("export MSPROBE_SGLANG_CONFIG=dump.json\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang\n",
             files={"dump.json": '{"dump_path": "/tmp/d", "level": "L1"}\n'}, expect=[(1, 25)],
             note="the SGLang patch's config, named in the env"),
        Case(_RUN, files={"dump.json": '{"dump_path": "/tmp/d",\n "level": "mix"}\n'}, options=_C, expect=[(2, 2)],
             note="consistency: msprobe 26.2.0 cannot compare mix dumps of two engines"),
        Case(_RUN, files={"dump.json": '{"dump_path": "/tmp/d"}\n'}, options=_C, expect=[(1, 1)],
             note="consistency: no level is msprobe's L1, no module rows"),
    ]

    def check(self, ctx: LintContext) -> None:
        consistency = ctx.run.mode == "consistency"
        wanted = "L0" if consistency else "mix"
        for _role, span, path, data, text in msprobe_configs(ctx):
            level = data.get("level")
            if level is not None and not isinstance(level, str):
                continue  # not a level at all (a list, a number): RL502 reports the value
            if level == wanted or (level is not None and str(level) in ctx.options.allow_level):
                continue
            at = ctx.json_position(path, text, "level")
            if consistency:
                why = _WHY_NOT.get(level, f"level {level!r} has no module rows to compare")
                ctx.report(f"msprobe config level is {level or 'not set'}: a consistency run is compared module by "
                           f"module and {why}; set \"level\": \"L0\"", at=at, related=[span], severity="error")
            elif level is None:
                ctx.report("msprobe config has no level (msprobe's default is L1); set \"level\": \"mix\"",
                           at=at, related=[span])
            else:
                ctx.report(f"msprobe config level is {level!r}, not mix (use --allow-level {level} if intended)",
                           at=at, related=[span])
