"""RL507: a consistency run whose msprobe config cannot be compared.

`msprobe compare --consistent_check` compares tensors of the training and inference sides module
by module: both configs need `task: tensor` and level `L0` or `mix`. Statistics (or L1 API dumps)
collected for hours cannot be aligned afterwards.
"""

from __future__ import annotations

from rlpatch.lint import msprobe_family
from rlpatch.lint.rule import Case, LintContext, LintRule

_RUN0 = (
    "export DUMP_ON=1 PROMPTS_ONLY=1\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)


class ConsistencyNeedsTensorDumps(LintRule):
    code = "RL507"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "consistency mode needs task tensor at level L0 or mix"

    VALID = (
        Case(_RUN0, files={"dump.json": '{"task": "tensor", "dump_path": "/tmp/d", "level": "mix"}\n'}),
    )
    INVALID = (
        Case(_RUN0, files={"dump.json": '{"task": "statistics",\n "dump_path": "/tmp/d", "level": "mix"}\n'}, expect=[(1, 10)]),
    )

    def check(self, ctx: LintContext) -> None:
        msprobe_family.report(ctx, self.code)
