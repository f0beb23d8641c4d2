"""The v1 trainer's TransferQueue rows carry the request id as their own `request_id` field.

## What it patches

In `AgentLoopWorkerTQ._agent_loop_postprocess`, right before each row is appended to the batch put:
`field["request_id"] = str(<extra_fields>.get("request_id", ""))`.

Padding: to make the batch divisible, `upsample_batch_to_divisible_size` (`verl/trainer/ppo/padding_utils.py`)
adds synthetic rows copied from the first real one; the patch blanks their `request_id` right after
the template gets its own `uid`, so no padding row is logged under a real request's id.

## Why

`verl-request-id` stores the id the inference server got in `TokenOutput.extra_fields["request_id"]`,
and the agent loops copy `extra_fields` into their `AgentLoopOutput`. On `RayPPOTrainer`
(`trainer.use_v1=False`) `AgentLoopWorker._postprocess` then spreads every `extra_fields` key into
`DataProto.non_tensor_batch`, so the engine's micro-batches carry `request_id`. The v1 trainer's
agent loop (`AgentLoopWorkerTQ._agent_loop_postprocess` in `verl/trainer/ppo/v1/agent_loop_tq.py`)
does not: it puts each output into TransferQueue with `extra_fields` as one dict-valued field, and
the engine worker, which fetches the rows itself, finds no `request_id` (its
`update_actor_log.jsonl` records would list no request ids, and the dump could not be joined with
the inference side).

## Versions

Anchors (verl 0.9.0, 0.9.1 and main): in `AgentLoopWorkerTQ._agent_loop_postprocess`, the single
`fields.append(<row>)` statement; in `upsample_batch_to_divisible_size`, the single
`template_sample["uid"] = ...` assignment. Not applicable before 0.9.0 (no v1 trainer).

## Trainer

The v1 `PPOTrainer` (`trainer.use_v1=True`, the default from 0.9.0), every
`trainer.v1.trainer_mode`, unless `actor_rollout_ref.rollout.agent.agent_loop_manager_class`
replaces the agent-loop manager.
"""

from __future__ import annotations

import libcst as cst
from libcst import matchers as m

from rlpatch.patch.rule import (
    Insertion,
    PatchCase,
    exactly_one,
    find_class,
    find_function,
    find_method,
    find_statements,
    parse_statements,
)

from ._verl_consistency import VerlV1Rule

AGENT_LOOP_TQ = "verl/trainer/ppo/v1/agent_loop_tq.py"
PADDING = "verl/trainer/ppo/padding_utils.py"
WORKER_CLASS = "AgentLoopWorkerTQ"


def _string(text: str) -> m.SimpleString:
    return m.SimpleString(m.MatchIfTrue(lambda value: value.strip("'\"") == text))


# `fields.append(<name>)`
APPEND_ROW = m.SimpleStatementLine(body=[m.Expr(value=m.Call(
    func=m.Attribute(value=m.Name("fields"), attr=m.Name("append")), args=[m.Arg(value=m.Name())]))])
# `<name>["uid"] = ...`
STORE_PAD_UID = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Subscript(
    value=m.Name(), slice=[m.SubscriptElement(slice=m.Index(value=_string("uid")))]))])])

ROW_ID = 'ROW["request_id"] = str((ROW.get("extra_fields") or {}).get("request_id", ""))'
PAD_ID = """
if "request_id" in ROW:
    ROW["request_id"] = ""  # a synthetic padding row answers no request
"""


class VerlRequestIdV1(VerlV1Rule):
    """The v1 trainer's TransferQueue rows get a request_id field the engine worker logs (AgentLoopWorkerTQ)."""

    id = "verl-request-id-v1"
    files = (AGENT_LOOP_TQ, PADDING)
    versions = "0.9.0+ (v1 trainer; anchors checked 0.9.0, 0.9.1 and main)"
    trainer = "v1 PPOTrainer (trainer.use_v1=True, the default from 0.9.0), in AgentLoopWorkerTQ._agent_loop_postprocess"
    markers = ()

    # The row shape, as agent_loop_tq.py (the rule's first file); the padding shape, as padding_utils.py.
    VALID = [
        PatchCase(
            """
class AgentLoopWorkerTQ(AgentLoopWorker):
    async def _agent_loop_postprocess(self, output, validate, **kwargs):
        keys, fields, tags = [], [], []
        for i, output in enumerate(outputs):
            field = output.as_dict()
            field.update(kwargs)
            fields.append(field)
        await tq.async_kv_batch_put(keys=keys, fields=list_of_dict_to_tensordict(fields), tags=tags)
""",
            expected="""
class AgentLoopWorkerTQ(AgentLoopWorker):
    async def _agent_loop_postprocess(self, output, validate, **kwargs):
        keys, fields, tags = [], [], []
        for i, output in enumerate(outputs):
            field = output.as_dict()
            field.update(kwargs)
            field["request_id"] = str((field.get("extra_fields") or {}).get("request_id", ""))
            fields.append(field)
        await tq.async_kv_batch_put(keys=keys, fields=list_of_dict_to_tensordict(fields), tags=tags)
""",
        ),
        PatchCase(
            """
def upsample_batch_to_divisible_size(batch, batch_multiple, eos_token_id):
    template_sample, template_tag = construct_minimal_padding_template(source_td, tag, eos_token_id)
    pad_uid = f"pad{uuid.uuid4().hex}"
    template_sample["uid"] = pad_uid
    return batch
""",
            expected="""
def upsample_batch_to_divisible_size(batch, batch_multiple, eos_token_id):
    template_sample, template_tag = construct_minimal_padding_template(source_td, tag, eos_token_id)
    pad_uid = f"pad{uuid.uuid4().hex}"
    template_sample["uid"] = pad_uid
    if "request_id" in template_sample:
        template_sample["request_id"] = ""  # a synthetic padding row answers no request
    return batch
""",
            path=PADDING,
        ),
    ]

    INVALID = [
        # no append anchor
        PatchCase(
            VALID[0].source.replace("fields.append(field)", "fields += [field]"),
            refusal="verl/trainer/ppo/v1/agent_loop_tq.py: AgentLoopWorkerTQ._agent_loop_postprocess: expected exactly one `fields.append(field)` statement, found 0",
        ),
        # class renamed
        PatchCase(
            VALID[0].source.replace("class AgentLoopWorkerTQ", "class AgentLoopWorkerV1"),
            refusal="verl/trainer/ppo/v1/agent_loop_tq.py: expected exactly one top-level class AgentLoopWorkerTQ, found 0",
        ),
    ]

    def insertions(self, path: str, module: cst.Module) -> list[Insertion]:
        if path == PADDING:
            function = find_function(module, "upsample_batch_to_divisible_size", path)
            where = f"{path}: upsample_batch_to_divisible_size"
            block, anchor = exactly_one(find_statements(function, STORE_PAD_UID), where,
                                        '`template_sample["uid"] = ...` statement')
            row = _subscripted_name(anchor)
            return [Insertion(block, anchor, "after", parse_statements(PAD_ID.replace("ROW", row)),
                              f'{where}: blank the padding rows\' request_id after `{row}["uid"] = ...`')]
        method = find_method(find_class(module, WORKER_CLASS, path), "_agent_loop_postprocess", path)
        where = f"{path}: {WORKER_CLASS}._agent_loop_postprocess"
        block, anchor = exactly_one(find_statements(method, APPEND_ROW), where, "`fields.append(field)` statement")
        row = _appended_name(anchor)
        return [Insertion(block, anchor, "before", parse_statements(ROW_ID.replace("ROW", row)),
                          f"{where}: the row's request_id before `fields.append({row})`")]


def _appended_name(statement: cst.BaseStatement) -> str:
    found = m.extract(statement, m.SimpleStatementLine(body=[m.Expr(value=m.Call(
        args=[m.Arg(value=m.SaveMatchedNode(m.Name(), "name"))]))]))
    assert found is not None
    name_node = found["name"]
    assert isinstance(name_node, cst.Name)  # extract gives a node or a sequence; a Name was matched
    return name_node.value


def _subscripted_name(statement: cst.BaseStatement) -> str:
    found = m.extract(statement, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(
        target=m.Subscript(value=m.SaveMatchedNode(m.Name(), "name")))])]))
    assert found is not None
    name_node = found["name"]
    assert isinstance(name_node, cst.Name)  # extract gives a node or a sequence; a Name was matched
    return name_node.value
