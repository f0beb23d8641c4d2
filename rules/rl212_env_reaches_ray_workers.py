"""RL212: env vars exported in the launching shell do not reach Ray workers on other nodes.

## What it does

Reports dump switches exported in the launching shell of a multi-node run (`trainer.nnodes > 1`) or
of a `ray job submit`, where they never reach the Ray workers.

## Why

`export DUMP_ON=1` affects the driver process and the Ray workers started on the *same* node
from that shell. With `trainer.nnodes > 1` (workers on other nodes joined a Ray cluster started
elsewhere) or `ray job submit` (the job runs in the cluster, not in this shell) the dump switches
never arrive and the training side dumps nothing. Put them in the Ray runtime env:
`ray job submit --runtime-env-json='{"env_vars": {"DUMP_ON": "1"}}'`, or
`+ray_kwargs.ray_init.runtime_env.env_vars.DUMP_ON='"1"'`.

## Use instead

Pass them in the Ray runtime env (`ray job submit --runtime-env-json=...` or
`+ray_kwargs.ray_init.runtime_env.env_vars.NAME=...`).
"""

from __future__ import annotations

import re

from rlpatch.lint.rule import Case, LintContext, LintRule

RUNTIME_ENV_PREFIX = "ray_kwargs.ray_init.runtime_env.env_vars."
WATCHED = ("DUMP_ON", "PROMPTS_ONLY", "MSPROBE_ACTOR_CONFIG", "DUMP_PHASE", "TORCHDYNAMO_DISABLE")
_C = {"mode": "consistency"}


class EnvReachesRayWorkers(LintRule):
    code = "RL212"
    severity = "warning"
    modes = frozenset({"consistency"})
    summary = "env exported only in the launching shell does not reach Ray workers (multi-node, ray job submit)"

    VALID = [
        Case("export DUMP_ON=1\npython3 -m verl.trainer.main_ppo trainer.nnodes=1\n", options=_C),
        Case("export DUMP_ON=1\npython3 -m verl.trainer.main_ppo trainer.nnodes=2 \\\n"
             f"    +{RUNTIME_ENV_PREFIX}DUMP_ON='\"1\"'\n", options=_C),
        Case("export DUMP_ON=1\nray job submit --runtime-env-json='{\"env_vars\": {\"DUMP_ON\": \"1\"}}' -- \\\n"
             "    python3 -m verl.trainer.main_ppo\n", options=_C),
    ]
    INVALID = [
        Case("export DUMP_ON=1\npython3 -m verl.trainer.main_ppo trainer.nnodes=2\n", options=_C, expect=[(1, 8)]),
        Case("export PROMPTS_ONLY=1\nray job submit --address=http://head:8265 -- \\\n"
             "    python3 -m verl.trainer.main_ppo\n", options=_C, expect=[(1, 8)]),
    ]

    def check(self, ctx: LintContext) -> None:
        run = ctx.run
        nodes = run.setting("trainer.nnodes")
        remote = run.launch.ray_submit or (nodes.known and (nodes.as_int() or 1) > 1)
        if not remote:
            ctx.unresolved(nodes)
            return
        runtime_env = {o.key[len(RUNTIME_ENV_PREFIX):] for o in run.overrides if o.key.startswith(RUNTIME_ENV_PREFIX)}
        launcher_text = " ".join(arg.text or "" for arg in run.launch.launcher)
        runtime_env |= set(re.findall(r'"(\w+)"\s*:', launcher_text))
        where = "`ray job submit`" if run.launch.ray_submit else f"trainer.nnodes={nodes.value}"
        for name in WATCHED:
            var = run.env.get(name)
            if var is None or var.how != "export" or name in runtime_env:
                continue
            ctx.report(f"{name} is exported only in the launching shell; with {where} Ray workers do not see it: "
                       f"add it to the Ray runtime env ({RUNTIME_ENV_PREFIX}{name})", at=_name_span(var))


def _name_span(var):
    """The NAME of `export NAME=value` (the assignment's value span starts after `=`)."""
    from rlpatch.shell.api import Span

    span = var.span
    column = max(1, span.column - len(var.name) - 1)
    return Span(span.file, span.line, column, span.line, column + len(var.name))
