"""RL101: inference dumps need eager mode (`actor_rollout_ref.rollout.enforce_eager=True`).

## What it does

Reports an inference (or consistency) dump whose rollout does not run in eager mode
(`actor_rollout_ref.rollout.enforce_eager` is not True; verl's default is False).

## Why

msprobe hooks Python forward calls; a captured graph (CUDA graph / ACL graph) replays kernels
without calling them, so a graph-mode rollout dumps nothing. vLLM-Ascend 0.13 to 0.19 refuse to
start a dump in graph mode, 0.20.2+ need a source build of msprobe with aclgraph dump. For SGLang
verl maps `enforce_eager` to `disable_cuda_graph`. verl's default is False.

## Use instead

Set `actor_rollout_ref.rollout.enforce_eager=True` for every run that dumps the inference side.
"""

from __future__ import annotations

from rlpatch.lint.checks import expect_value
from rlpatch.lint.rule import Case, LintContext, LintRule

_VLLM = "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json \\\n"


class EnforceEager(LintRule):
    code = "RL101"
    severity = "error"
    modes = frozenset({"inference", "consistency"})
    summary = "inference dumps need actor_rollout_ref.rollout.enforce_eager=True"

    VALID = [
        Case("python3 -m verl.trainer.main_ppo \\\n" + _VLLM +
             "    actor_rollout_ref.rollout.name=vllm \\\n    actor_rollout_ref.rollout.enforce_eager=True\n"),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.enforce_eager=False\n",
             note="no dump configured (mode none): graph mode is fine"),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.enforce_eager=true\n",
             options={"mode": "consistency"}),
    ]
    INVALID = [
        Case("python3 -m verl.trainer.main_ppo \\\n" + _VLLM +
             "    actor_rollout_ref.rollout.name=vllm \\\n    actor_rollout_ref.rollout.enforce_eager=False\n",
             expect=[(4, 45)],
             messages=['actor_rollout_ref.rollout.enforce_eager must be True (graph mode cannot dump: msprobe '
                       'only sees eager forward calls); found actor_rollout_ref.rollout.enforce_eager=False'],
             fixed="python3 -m verl.trainer.main_ppo \\\n" + _VLLM +
             "    actor_rollout_ref.rollout.name=vllm \\\n    actor_rollout_ref.rollout.enforce_eager=True\n"),
        Case("python3 -m verl.trainer.main_ppo \\\n" + _VLLM + "    actor_rollout_ref.rollout.name=vllm\n",
             expect=[(1, 12)], note="verl's default is False"),
        Case("EAGER=False\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.enforce_eager=$EAGER\n",
             options={"mode": "consistency"}, expect=[(1, 7)],
             fixed="EAGER=True\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.enforce_eager=$EAGER\n",
             note="an unsafe fix: the variable may be used elsewhere too"),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
             "    '+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config={dump_config_path:\"d.json\"}'\n",
             expect=[(1, 12)], note="the dict form of the dump key (msprobe's docs) is the same key"),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang \\\n"
             "    '++actor_rollout_ref.rollout.engine_kwargs={sglang: {msprobe_dump_config: d.json}}'\n",
             expect=[(1, 12)], note="any Hydra dict value is read as its keys"),
        Case("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.enforce_eager=True \\\n" + _VLLM +
             "    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.enforce_eager=False\n",
             expect=[(3, 81)], note="the message names the earlier True that the last value undoes"),
        Case("export MSPROBE_SGLANG_CONFIG_PREFILL=p.json MSPROBE_SGLANG_CONFIG_DECODE=d.json\n"
             "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang\n",
             expect=[(2, 12)], note="rlpatch's SGLang ModelRunner patch (SGLang < 0.5.11) reads its config from the env"),
    ]

    def check(self, ctx: LintContext) -> None:
        expect_value(ctx, "actor_rollout_ref.rollout.enforce_eager", "true",
                     "graph mode cannot dump: msprobe only sees eager forward calls")
