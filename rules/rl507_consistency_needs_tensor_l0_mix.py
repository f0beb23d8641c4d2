"""RL507: a consistency run whose msprobe config cannot be compared.

`msprobe compare --consistent_check` compares the training and inference sides module by module:
both configs need level `L0` or `mix` (L1 API dumps cannot be aligned) and a task it can compare.
`task: tensor` at `L0` matches best; msprobe 26.2 also accepts `task: statistics`, but then only
each tensor's summary (max, min, mean, norm) is compared, so that is a warning, not an error;
any other task is an error.
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
        Case(_RUN0, files={"dump.json": '{"task": "statistics",\n "dump_path": "/tmp/d", "level": "mix"}\n'}, expect=[(1, 10)],
             note="accepted, with summaries only: a warning"),
        Case(_RUN0, files={"dump.json": '{"task": "tensor", "dump_path": "/tmp/d", "level": "L1"}\n'}, expect=[(1, 52)]),
    )

    def check(self, ctx: LintContext) -> None:
        msprobe_family.report(ctx, self.code)
