"""RL504: a path msprobe will refuse.

## What it does

Reports a `dump_path` or config file name msprobe refuses (characters outside letters, digits and `_
. : / -`, too long, a config file not ending in `.json`), and a relative `dump_path`.

## Why

Before it creates the dump directory msprobe resolves `dump_path` and accepts only letters, digits
and `_ . : / -` (no spaces, no non-ASCII), at most 4096 characters and 255 per name; the config
file itself must end in `.json` and match the same pattern. A relative `dump_path` resolves against
each worker's working directory (a warning). Standalone (`rlpatch lint config.json`), a config
without `dump_path` is an info, not an error: msprobe refuses it ("The dump_path not found") unless
its caller passes a dump_path, and verl's `precision_debugger` tool does (0.8.0 to 0.9.1 call
`PrecisionDebugger(config_path=..., dump_path=...)` and overwrite `service.config.dump_path`), so a
training-mode config must not set one (RL104). The file alone cannot say which reader it is for.

## Use instead

An absolute `dump_path` of plain ASCII letters, digits and `_ . : / -`, and a config file named
`*.json`.

## References

[mindstudio-probe (msprobe), its home page](https://gitcode.com/Ascend/MindStudio-Probe).
"""

from __future__ import annotations

from rlpatch.lint.rule import Case
from rlpatch.msprobe_config.api import Problem
from rlpatch.rules._msprobe_config import MsprobeConfigRule

_RUN0 = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)


class MsprobeConfigPaths(MsprobeConfigRule):
    code = "RL504"
    problems = frozenset({Problem.REJECTED_PATH, Problem.NO_DUMP_PATH, Problem.RELATIVE_DUMP_PATH})
    severity = "error"
    summary = "msprobe config.json path rules (dump_path characters and length, config file name)"

    VALID = (
        Case(_RUN0, files={"dump.json": '{"task": "statistics", "dump_path": "/data/msprobe_dump", "level": "mix"}\n'}),
    )
    INVALID = (
        Case(_RUN0, files={"dump.json": '{"task": "statistics",\n "dump_path": "/data/my dump", "level": "mix"}\n'}, expect=[(2, 15)]),
    )
