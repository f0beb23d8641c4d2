"""Fully-async rollouts keep the request id: the resumed output inherits the server output's extra_fields.

## What it patches

`FullyAsyncLLMServerClient.generate`: the resumed output keeps the server output's `extra_fields`, so
the request id `verl-request-id` stores survives partial rollouts.

## Why

`FullyAsyncLLMServerClient.generate` (partial rollout: a generation may be resumed several times)
accumulates the parent client's outputs into a fresh `final_output`, so the
`extra_fields["request_id"]` that `verl-request-id` stores would be lost. Right before the client
stores `global_steps` into `final_output.extra_fields`, the patch copies the last server output's
`extra_fields` into it (the following upstream lines still set the step fields).

## Versions

The class lives in
`verl/experimental/fully_async_policy/fully_async_rollouter.py` in 0.8.x and in
`verl/workers/rollout/llm_server.py` from 0.9.0; the file without the class gets no edit.
Anchor: in `FullyAsyncLLMServerClient.generate`, the single
`final_output.extra_fields["global_steps"] = global_steps`; the code goes right before it.

## Trainer

The fully-async trainer, and from 0.9.0 the v1 trainer's `colocate_async` and `separate_async`
modes (`trainer.v1.trainer_mode`), which also generate through `FullyAsyncLLMServerClient`.
"""

from __future__ import annotations

import libcst as cst
from libcst import matchers as m

from rlpatch.patch.rule import (
    Insertion,
    PatchCase,
    exactly_one,
    find_class,
    find_method,
    find_statements,
    parse_statements,
)

from ._verl_consistency import VerlConsistencyRule

ROLLOUTER = "verl/experimental/fully_async_policy/fully_async_rollouter.py"
LLM_SERVER = "verl/workers/rollout/llm_server.py"
CLIENT_CLASS = "FullyAsyncLLMServerClient"


def _string(text: str) -> m.SimpleString:
    return m.SimpleString(m.MatchIfTrue(lambda value: value.strip("'\"") == text))


# `<final>.extra_fields["global_steps"] = ...`
STORE_GLOBAL_STEPS = m.SimpleStatementLine(
    body=[m.Assign(targets=[m.AssignTarget(target=m.Subscript(
        value=m.Attribute(value=m.Name(), attr=m.Name("extra_fields")),
        slice=[m.SubscriptElement(slice=m.Index(value=_string("global_steps")))],
    ))])]
)
# `<output> = await super().generate(...)`: the server output whose fields are inherited.
PARENT_GENERATE = m.SimpleStatementLine(
    body=[m.Assign(
        targets=[m.AssignTarget(target=m.Name())],
        value=m.Await(expression=m.Call(func=m.Attribute(value=m.Call(func=m.Name("super")), attr=m.Name("generate")))),
    ),
]
)
INHERIT = "FINAL.extra_fields.update(OUTPUT.extra_fields)"


class VerlRequestIdAsync(VerlConsistencyRule):
    """Fully-async resumed outputs keep the server output's extra_fields (and its request id)."""

    id = "verl-request-id-async"
    files = (ROLLOUTER, LLM_SERVER)
    versions = "0.8.0+ (0.8.x fully_async_rollouter.py; 0.9.0+ llm_server.py)"
    trainer = "FullyAsyncTrainer and the v1 PPOTrainer's async modes (FullyAsyncLLMServerClient)"
    trainers = frozenset({"v1", "fully-async"})
    markers = ()
    since = "0.8.0"
    before_since = "no FullyAsyncLLMServerClient in this release (it ships from 0.8.0)"

    VALID = [
        PatchCase(
            """
class FullyAsyncLLMServerClient(LLMServerClient):
    async def generate(self, request_id, *, prompt_ids):
        final_output = TokenOutput(token_ids=[])
        while True:
            output = await super().generate(request_id=request_id, prompt_ids=prompt_ids)
            break
        final_output.extra_fields["global_steps"] = global_steps
        return final_output
""",
            expected="""
class FullyAsyncLLMServerClient(LLMServerClient):
    async def generate(self, request_id, *, prompt_ids):
        final_output = TokenOutput(token_ids=[])
        while True:
            output = await super().generate(request_id=request_id, prompt_ids=prompt_ids)
            break
        final_output.extra_fields.update(output.extra_fields)
        final_output.extra_fields["global_steps"] = global_steps
        return final_output
""",
        ),
    ]

    INVALID = [
        # no parent output
        PatchCase(
            VALID[0].source.replace("await super().generate", "await self.generate"),
            refusal="verl/experimental/fully_async_policy/fully_async_rollouter.py: FullyAsyncLLMServerClient.generate: expected exactly one `output = await super().generate(...)` statement, found 0",
        ),
        # no anchor
        PatchCase(
            VALID[0].source.replace('final_output.extra_fields["global_steps"] = global_steps', "pass"),
            refusal='verl/experimental/fully_async_policy/fully_async_rollouter.py: FullyAsyncLLMServerClient.generate: expected exactly one `final_output.extra_fields["global_steps"] = ...` statement, found 0',
        ),
    ]

    def anchor_text(self, path: str) -> str | None:
        return f"class {CLIENT_CLASS}"

    def insertions(self, path: str, module: cst.Module) -> list[Insertion]:
        if not any(isinstance(s, cst.ClassDef) and s.name.value == CLIENT_CLASS for s in module.body):
            return []  # the class lives in the other file of this release
        method = find_method(find_class(module, CLIENT_CLASS, path), "generate", path)
        where = f"{path}: {CLIENT_CLASS}.generate"
        _, parent_call = exactly_one(
            find_statements(method, PARENT_GENERATE), where, "`output = await super().generate(...)` statement"
        )
        block, anchor = exactly_one(
            find_statements(method, STORE_GLOBAL_STEPS),
            where,
            '`final_output.extra_fields["global_steps"] = ...` statement',
        )
        code = INHERIT.replace("FINAL", _subscripted_name(anchor)).replace("OUTPUT", _assigned_name(parent_call))
        label = f'{where}: before `extra_fields["global_steps"] = ...`'
        return [Insertion(block, anchor, "before", parse_statements(code), label)]


def _assigned_name(statement: cst.BaseStatement) -> str:
    name = m.SaveMatchedNode(m.Name(), "name")
    assign = m.extract(statement, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=name)])]))
    assert assign is not None
    name_node = assign["name"]
    assert isinstance(name_node, cst.Name)  # extract gives a node or a sequence; a Name was matched
    return name_node.value


def _subscripted_name(statement: cst.BaseStatement) -> str:
    found = m.extract(statement, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Subscript(
        value=m.Attribute(value=m.SaveMatchedNode(m.Name(), "name"))))])]))
    assert found is not None
    name_node = found["name"]
    assert isinstance(name_node, cst.Name)  # extract gives a node or a sequence; a Name was matched
    return name_node.value
