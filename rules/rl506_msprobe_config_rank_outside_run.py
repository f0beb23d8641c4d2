"""RL506: the `rank` list names no rank this run has.

## What it does

Reports an msprobe `rank` list that names no rank of this run (ranks are 0 to world-1).

## Why

msprobe dumps only on the listed ranks. With `trainer.n_gpus_per_node * trainer.nnodes` GPUs the
ranks are 0 to world-1; a list such as `[8]` on an 8-GPU run produces no output at all, and
nothing says so. Use `[]` (all ranks) or ranks that exist.

## Use instead

`"rank": []` (every rank) or ranks that exist.

## References

[mindstudio-probe (msprobe), its home page](https://gitcode.com/Ascend/MindStudio-Probe).
"""

from __future__ import annotations

from rlpatch.lint.rule import Case
from rlpatch.msprobe_config.api import Problem
from rlpatch.rules._msprobe_config import MsprobeConfigRule

_RUN0 = (
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm trainer.n_gpus_per_node=8 trainer.nnodes=1 \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)


class MsprobeConfigRankOutsideRun(MsprobeConfigRule):
    code = "RL506"
    problems = frozenset({Problem.RANK_OUTSIDE_RUN})
    severity = "warning"
    summary = "msprobe config.json rank list that no rank of this run is in"

    VALID = (
        Case(_RUN0, files={"dump.json": '{"task": "statistics", "dump_path": "/tmp/d", "level": "mix", "rank": [0, 7]}\n'}),
    )
    INVALID = (
        Case(_RUN0, files={"dump.json": '{"task": "statistics", "dump_path": "/tmp/d", "level": "mix",\n "rank": [8]}\n'}, expect=[(2, 10)]),
    )
