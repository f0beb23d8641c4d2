"""RL211: the consistency env protocol: DUMP_ON=1, PROMPTS_ONLY=1, MSPROBE_ACTOR_CONFIG, DUMP_PHASE.

## What it does

Reports a consistency run whose environment lacks the engine patch's switches: `DUMP_ON=1`,
`PROMPTS_ONLY=1`, `MSPROBE_ACTOR_CONFIG`, or has a `DUMP_PHASE` the patch does not know; a missing
`TORCHDYNAMO_DISABLE=1` is a warning.

## Why

The rlpatch engine patch reads these in the training workers: `DUMP_ON=1` turns dumping on,
`PROMPTS_ONLY=1` restricts it to the prompt tokens the inference side also dumps,
`MSPROBE_ACTOR_CONFIG` is the training-side msprobe config.json, and `DUMP_PHASE` chooses
`log_prob`, `update_actor` or `all` (unset or empty means `log_prob`, as in the patch). A missing
switch or a misspelt phase gives an empty or unpairable training dump (the patch raises on a bad
phase). `TORCHDYNAMO_DISABLE=1` is recommended (a compiled forward is not hooked).

## Use instead

Export the switches before the verl command, as `rlpatch gen consistency` writes them.
"""

from __future__ import annotations

import difflib

from rlpatch.lint.rule import Case, Edit, Fix, LintContext, LintRule
from rlpatch.shell.api import Span
from rlpatch.upstream.switches import DUMP_PHASES as PHASES
from rlpatch.upstream.switches import TRUTHY, is_on

_INFER = "+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=d.json"
_GOOD_ENV = ("export DUMP_ON=1\nexport PROMPTS_ONLY=1\nexport MSPROBE_ACTOR_CONFIG=actor.json\n"
             "export DUMP_PHASE=log_prob\nexport TORCHDYNAMO_DISABLE=1\n")


class ConsistencyEnv(LintRule):
    code = "RL211"
    severity = "error"
    modes = frozenset({"consistency"})
    summary = "env: DUMP_ON=1, PROMPTS_ONLY=1, MSPROBE_ACTOR_CONFIG, a valid DUMP_PHASE; TORCHDYNAMO_DISABLE=1 (W)"

    VALID = [
        Case(_GOOD_ENV + f"python3 -m verl.trainer.main_ppo {_INFER}\n"),
        Case(_GOOD_ENV.replace("PROMPTS_ONLY=1", "PROMPTS_ONLY=true").replace("DUMP_ON=1", "DUMP_ON=Yes")
             + f"python3 -m verl.trainer.main_ppo {_INFER}\n", note="the patch reads 1/true/yes/on as on"),
        Case(_GOOD_ENV.replace("export DUMP_PHASE=log_prob\n", "") + f"python3 -m verl.trainer.main_ppo {_INFER}\n",
             note="DUMP_PHASE unset: the patch dumps log_prob"),
    ]
    INVALID = [
        Case(_GOOD_ENV.replace("log_prob", "logprob") + f"python3 -m verl.trainer.main_ppo {_INFER}\n",
             expect=[(4, 19)],
             messages=["DUMP_PHASE='logprob' is not one of log_prob, update_actor, all"],
             fixed=_GOOD_ENV + f"python3 -m verl.trainer.main_ppo {_INFER}\n",
             note="an unsafe fix: the closest phase is a guess"),
        Case(f"export DUMP_ON=1\npython3 -m verl.trainer.main_ppo {_INFER}\n", expect=[(2, 12)] * 3),
        Case(_GOOD_ENV.replace("DUMP_ON=1", "DUMP_ON=0") + f"python3 -m verl.trainer.main_ppo {_INFER}\n",
             expect=[(1, 16)], fixed=_GOOD_ENV + f"python3 -m verl.trainer.main_ppo {_INFER}\n"),
    ]

    def check(self, ctx: LintContext) -> None:
        env = ctx.run.env
        entry = ctx.run.entry_span
        for name in ("DUMP_ON", "PROMPTS_ONLY"):
            var = env.get(name)
            if var is None:
                ctx.report(f"{name}=1 is not exported: the training side dumps nothing", at=entry)
            elif var.text is not None and not is_on(var.text):
                ctx.report(f"{name} must be on (1, or one of {'/'.join(TRUTHY)}), found {var.text!r}: the patched "
                           "code reads it as off", at=var.span, fix=env_fix(name, var.text, "1", var.span))
        if "MSPROBE_ACTOR_CONFIG" not in env:
            ctx.report("MSPROBE_ACTOR_CONFIG is not exported: the training side has no msprobe config", at=entry)
        phase = env.get("DUMP_PHASE")  # unset or empty: the patch dumps log_prob
        if phase is not None and phase.text is not None and phase.text.strip() and phase.text.strip() not in PHASES:
            closest = difflib.get_close_matches(phase.text.strip(), PHASES, n=1)
            ctx.report(f"DUMP_PHASE={phase.text!r} is not one of {', '.join(PHASES)}", at=phase.span,
                       fix=env_fix("DUMP_PHASE", phase.text, closest[0], phase.span, "unsafe") if closest else None)
        dynamo = env.get("TORCHDYNAMO_DISABLE")
        if dynamo is None or (dynamo.text is not None and dynamo.text != "1"):
            fix = env_fix("TORCHDYNAMO_DISABLE", dynamo.text, "1", dynamo.span) if dynamo and dynamo.text else None
            ctx.report("TORCHDYNAMO_DISABLE=1 is recommended: a compiled forward is not hooked by msprobe",
                       at=dynamo.span if dynamo else entry, severity="warning", fix=fix)


def env_fix(name: str, written: str, wanted: str, span: Span, applicability: str = "safe") -> Fix:
    """Write `wanted` where the variable's value is written (a guessed DUMP_PHASE is unsafe: say which)."""
    return Fix(f"set {name}={wanted}", (Edit(span, written, wanted),), "unsafe" if applicability == "unsafe" else "safe")
