"""RL502: a field of the msprobe config.json has a value mindstudio-probe rejects.

## What it does

Reports a field of the msprobe config.json whose value mindstudio-probe 26.2 rejects (`task`,
`level`, `rank`, `step`, the booleans, the task section's options).

## Why

Checked exactly as mindstudio-probe 26.2 checks it (a differential test asks msprobe itself on
hundreds of generated configs): `task` (26.x rejects 8.x's `overflow_check`/`free_benchmark`, and
`acc_check` has no PyTorch processor), `level`, `rank`/`step` (lists of ints in [0, 1000000] or
"N"/"A-B" strings; booleans and floats are rejected), the booleans `async_dump`/`extra_info`/
`dump_enable` (the string "false" is not a boolean), `precision`, `risk_level`, and the task
section's `scope`, `list`, `data_mode`, `summary_mode`, `tensor_list`, `slice`, `request_id`,
`diff_nums`.

## Use instead

Use a value msprobe accepts; the message says which.

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


class MsprobeConfigValue(MsprobeConfigRule):
    code = "RL502"
    problems = frozenset({Problem.REJECTED_VALUE})
    severity = "error"
    summary = "msprobe config.json field with a value msprobe rejects"

    VALID = (
        Case(_RUN0, files={"dump.json": '{"task": "tensor", "dump_path": "/tmp/d", "level": "mix", "rank": [0, "2-3"]}\n'}),
    )
    INVALID = (
        Case(_RUN0, files={"dump.json": '{\n  "task": "tensor",\n  "dump_path": "/tmp/d",\n  "async_dump": "false"\n}\n'}, expect=[(4, 17)]),
    )
