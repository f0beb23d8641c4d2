"""RL503: fields of the msprobe config.json that msprobe rejects in combination.

## What it does

Reports fields of the msprobe config.json that msprobe rejects in combination (level `L2` with a
scope, `async_dump` with an empty tensor list, `nan_check` outside `L1`, a `scope` that is not a
range of two names).

## Why

Level `L2` needs task `tensor`, exactly one API in `list` and no `scope`; `async_dump: true` with
task `tensor` needs a non-empty `list` (unless level `debug`) and never goes with
`summary_mode: md5`; `nan_check` needs level `L1`, outputs in `data_mode`, and an NPU; `scope` is a
range of exactly two full names (API names at L1, module names at L0, either at mix). A `structure`
task at a level other than L0/mix is run as mix (a warning).

## Use instead

Change one of the two fields as the message says.

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


class MsprobeConfigCrossField(MsprobeConfigRule):
    code = "RL503"
    problems = frozenset({Problem.REJECTED_COMBINATION})
    severity = "error"
    summary = "msprobe config.json cross-field rule broken"

    VALID = (
        Case(_RUN0, files={"dump.json": '{"task": "tensor", "dump_path": "/tmp/d", "level": "L2",\n "tensor": {"list": ["Functional.relu.0.forward"]}}\n'}),
    )
    INVALID = (
        Case(_RUN0, files={"dump.json": '{"task": "statistics", "dump_path": "/tmp/d",\n "level": "L2"}\n'}, expect=[(2, 11)]),
    )
