"""RL505: keys that msprobe ignores without a word.

## What it does

Reports keys and sections of the msprobe config.json that msprobe ignores without a word (a typo, an
option of another task, a section for another task).

## Why

An unknown top-level key (a typo such as `dump_pth`), an option the task's section does not use,
or a whole section for another task (`"task": "tensor"` with only a `"statistics": {...}` section,
a common mistake) change nothing: the dump silently runs with defaults.

## Use instead

Fix the key's spelling, or put the options in the section of the config's `task`.

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


class MsprobeConfigIgnoredKeys(MsprobeConfigRule):
    code = "RL505"
    problems = frozenset({Problem.IGNORED_KEY})
    severity = "warning"
    summary = "msprobe config.json keys or sections msprobe ignores silently"

    VALID = (
        Case(_RUN0, files={"dump.json": '{"task": "tensor", "dump_path": "/tmp/d", "level": "mix", "tensor": {"scope": []}}\n'}),
    )
    INVALID = (
        Case(_RUN0, files={"dump.json": '{"task": "tensor", "dump_path": "/tmp/d", "level": "mix",\n "statistics": {"scope": []}}\n'}, expect=[(2, 2)]),
    )
