"""RL507: a consistency run whose msprobe config has a task the comparison cannot use.

## What it does

Reports the msprobe config of a consistency run whose `task` the comparison cannot use: `statistics`
on an FSDP run or any task but `tensor` (errors), `statistics` on a Megatron run (a warning).

## Why

`msprobe compare --consistent_check` compares the training and inference sides module by module
(the level that allows it, L0, is RL109's). The task decides what is compared. Measured with msprobe
26.2.0 on real dumps of twin models (FSDP1, FSDP2 and Megatron names against vLLM's):

- `task: tensor` compares every matched module, element by element: what a consistency run needs.
- `task: statistics` on an FSDP run cannot compare the attention and MLP projections: the training side
  dumps q/k/v and gate/up separately, vLLM dumps the fused qkv_proj and gate_up_proj, and msprobe joins
  the training tensors only in tensor dumps; the statistics rows are "The shape of NPU and Bench are
  inconsistent" errors. An error.
- `task: statistics` on a Megatron run (fused on both sides) compares, but only each tensor's summary
  (max, min, mean, norm), so small element-wise differences go unseen: a warning.
- any other task has nothing to compare: an error.

The config is read by rlpatch's engine patch and by vLLM-Ascend, under every trainer.

## Use instead

`"task": "tensor"` (what `rlpatch gen consistency` writes).

## References

[mindstudio-probe (msprobe), its home page](https://gitcode.com/Ascend/MindStudio-Probe).
"""

from __future__ import annotations

from rlpatch.lint.rule import Case
from rlpatch.msprobe_config.api import Problem
from rlpatch.rules._msprobe_config import MsprobeConfigRule

_RUN0 = (
    "export DUMP_ON=1 PROMPTS_ONLY=1\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)


class ConsistencyNeedsTensorDumps(MsprobeConfigRule):
    code = "RL507"
    problems = frozenset({Problem.TASK_UNFIT_FOR_CONSISTENCY})
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "consistency mode needs task tensor (statistics: Megatron only, summaries only)"

    VALID = (
        Case(_RUN0, files={"dump.json": '{"task": "tensor", "dump_path": "/tmp/d", "level": "L0"}\n'}),
    )
    INVALID = (
        Case(_RUN0, files={"dump.json": '{"task": "statistics",\n "dump_path": "/tmp/d", "level": "L0"}\n'},
             expect=[(1, 10)], note="FSDP: the separate q/k/v rows cannot meet vLLM's fused qkv_proj"),
        Case(_RUN0.replace("main_ppo ", "main_ppo model_engine=megatron "),
             files={"dump.json": '{"task": "statistics",\n "dump_path": "/tmp/d", "level": "L0"}\n'},
             expect=[(1, 10)], note="Megatron: accepted, with summaries only: a warning"),
        Case(_RUN0, files={"dump.json": '{"task": "acc_check", "dump_path": "/tmp/d", "level": "L0"}\n'},
             expect=[(1, 10)]),
    )
