"""Record the request id sent to the inference server in the output's `extra_fields["request_id"]`.

## What it patches

The patch binds the id to a local `vllm_request_id` right before
`server.generate.remote(request_id=..., ...)`, passes that local, and stores it in
`output.extra_fields["request_id"]` right after the call; verl then carries it through the
agent-loop output into `DataProto.non_tensor_batch["request_id"]` and the engine's micro-batches.

Binding the id changes the call's `request_id=` argument: that is a hoist (rlpatch.patch.edits), and
revert puts the original expression back byte for byte.

## Why

Consistency analysis joins the inference dump (vLLM's dispatch log, keyed by the vLLM request id)
with the training dump (`update_actor_log.jsonl`, keyed by the micro-batch's non-tensor
`request_id`). verl generates a fresh id per turn inline in the call to the server, so nothing
downstream knows it.

## Versions

Three anchor generations, located by structure:
- 0.7.x `verl/experimental/agent_loop/agent_loop.py`, `AsyncLLMServerManager.generate`,
  `request_id=uuid4().hex`;
- 0.8.x `verl/workers/rollout/llm_server.py`, `LLMServerClient.generate`, `request_id=uuid4().hex`;
- 0.9.0+ same method, `request_id=self._vllm_request_id(request_id)`.
From 0.8.0 `agent_loop.py` has no `AsyncLLMServerManager` and gets no edit. verl 0.7.0's
`TokenOutput` has no `extra_fields` (and its agent loops do not carry them), so the rule is not
applicable there.

## Trainer

The agent-loop workers of every trainer send their requests through this client (the v1
trainer's `sync` mode directly, the fully-async client through `super().generate`); on the v1
trainer the id then needs `verl-request-id-v1` to reach the engine worker.
"""

from __future__ import annotations

import libcst as cst
from libcst import matchers as m

from rlpatch.patch.edits import keyword_argument
from rlpatch.patch.rule import (
    AnchorError,
    Gate,
    Insertion,
    KeywordHoist,
    PatchCase,
    Target,
    exactly_one,
    find_class,
    find_method,
    find_statements,
    parse_statements,
)

from ._verl_consistency import VerlConsistencyRule

AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"
LLM_SERVER = "verl/workers/rollout/llm_server.py"
# The class that sends generation requests, per file (moved and renamed in 0.8.0).
CLIENT_CLASS = {AGENT_LOOP: "AsyncLLMServerManager", LLM_SERVER: "LLMServerClient"}

SERVER_CALL = m.Call(
    func=m.Attribute(value=m.Attribute(value=m.Name("server"), attr=m.Name("generate")), attr=m.Name("remote"))
)
# `output = await server.generate.remote(...)` or `output: TokenOutput = await server.generate.remote(...)`
SEND_STATEMENT = m.SimpleStatementLine(
    body=[m.OneOf(m.Assign(targets=[m.AssignTarget(target=m.Name())], value=m.Await(expression=SERVER_CALL)),
                  m.AnnAssign(target=m.Name(), value=m.Await(expression=SERVER_CALL)))]
)
RECORD_ID = 'OUTPUT.extra_fields["request_id"] = vllm_request_id'


class VerlRequestId(VerlConsistencyRule):
    """The request id sent to the inference server is kept in the output's extra_fields["request_id"]."""

    id = "verl-request-id"
    files = (AGENT_LOOP, LLM_SERVER)
    versions = "0.7.1+ (0.7.x agent_loop.py; 0.8.0+ llm_server.py; not 0.7.0)"
    trainer = "agent-loop rollout under every trainer (LLMServerClient; 0.7.x AsyncLLMServerManager)"
    trainers = frozenset({"v0", "v1", "fully-async"})
    markers = ()

    # The 0.7.0 and 0.7.1 shapes, as agent_loop.py (the rule's first file); the 0.9.x shape, as llm_server.py.
    VALID = [
        PatchCase(
            """
class AsyncLLMServerManager:
    async def generate(self, request_id, *, prompt_ids):
        server = self._choose_server(request_id)
        output = await server.generate.remote(
            request_id=uuid4().hex,  # use new request_id for each turn
            prompt_ids=prompt_ids,
        )
        return output
""",
            expected="""
class AsyncLLMServerManager:
    async def generate(self, request_id, *, prompt_ids):
        server = self._choose_server(request_id)
        vllm_request_id = uuid4().hex
        output = await server.generate.remote(
            request_id=vllm_request_id,  # use new request_id for each turn
            prompt_ids=prompt_ids,
        )
        output.extra_fields["request_id"] = vllm_request_id
        return output
""",
        ),
        PatchCase(
            """
class AsyncLLMServerManager:
    async def generate(self, request_id, *, prompt_ids):
        server_id, server = await self._acquire_server(request_id)
        try:
            output: TokenOutput = await server.generate.remote(
                request_id=uuid4().hex,  # use new request_id for each turn
                prompt_ids=prompt_ids,
            )
            return output
        finally:
            self._release_server(server_id)
""",
            expected="""
class AsyncLLMServerManager:
    async def generate(self, request_id, *, prompt_ids):
        server_id, server = await self._acquire_server(request_id)
        try:
            vllm_request_id = uuid4().hex
            output: TokenOutput = await server.generate.remote(
                request_id=vllm_request_id,  # use new request_id for each turn
                prompt_ids=prompt_ids,
            )
            output.extra_fields["request_id"] = vllm_request_id
            return output
        finally:
            self._release_server(server_id)
""",
        ),
        PatchCase(
            """
class LLMServerClient:
    async def generate(self, request_id, *, prompt_ids):
        server_id, server = await self._acquire_server(request_id)
        try:
            output: TokenOutput = await server.generate.remote(
                request_id=self._vllm_request_id(request_id),  # use new request_id for each turn
                prompt_ids=prompt_ids,
            )
            return output
        finally:
            self._release_server(server_id)
""",
            expected="""
class LLMServerClient:
    async def generate(self, request_id, *, prompt_ids):
        server_id, server = await self._acquire_server(request_id)
        try:
            vllm_request_id = self._vllm_request_id(request_id)
            output: TokenOutput = await server.generate.remote(
                request_id=vllm_request_id,  # use new request_id for each turn
                prompt_ids=prompt_ids,
            )
            output.extra_fields["request_id"] = vllm_request_id
            return output
        finally:
            self._release_server(server_id)
""",
            path=LLM_SERVER,
        ),
    ]

    INVALID = [
        # no request_id= argument
        PatchCase(
            VALID[1].source.replace("request_id=uuid4().hex,", ""),
            refusal="verl/experimental/agent_loop/agent_loop.py: AsyncLLMServerManager.generate: expected one one-line `request_id=` argument in server.generate.remote(...), found 0 keyword arguments request_id= in the statement",
        ),
        # spans two lines
        PatchCase(
            VALID[1].source.replace("request_id=uuid4().hex,", "request_id=uuid4(\n            ).hex,"),
            refusal="verl/experimental/agent_loop/agent_loop.py: AsyncLLMServerManager.generate: expected one one-line `request_id=` argument in server.generate.remote(...), found the value of request_id= spans several lines",
        ),
        # no generate call
        PatchCase(
            VALID[1].source.replace("await server.generate.remote(", "await server.chat.remote("),
            refusal="verl/experimental/agent_loop/agent_loop.py: AsyncLLMServerManager.generate: expected exactly one `output = await server.generate.remote(...)` statement, found 0",
        ),
    ]

    def gate(self, target: Target) -> Gate:
        if target.version is not None and target.version.minor == (0, 7) and target.version < "0.7.1":
            return Gate("not-applicable", f"verl {target.version_text}: TokenOutput has no extra_fields before 0.7.1, "
                        "so no request id can travel to the trainer")
        return super().gate(target)

    def anchor_text(self, path: str) -> str | None:
        return f"class {CLIENT_CLASS[path]}" if path == AGENT_LOOP else None

    def insertions(self, path: str, module: cst.Module) -> list[Insertion]:
        class_name = CLIENT_CLASS[path]
        classes = [s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == class_name]
        if path == AGENT_LOOP and not classes:
            return []  # 0.8.0+: the client lives in llm_server.py
        method = find_method(find_class(module, class_name, path), "generate", path)
        where = f"{path}: {class_name}.generate"
        block, anchor = exactly_one(
            find_statements(method, SEND_STATEMENT), where, "`output = await server.generate.remote(...)` statement"
        )
        try:
            keyword_argument(anchor, "request_id")
        except ValueError as err:
            raise AnchorError(where, "one one-line `request_id=` argument in server.generate.remote(...)", str(err)) from None
        output = _assigned_name(anchor)
        hoist = KeywordHoist(keyword="request_id", name="vllm_request_id")
        return [
            Insertion(block, anchor, "before", (), f"{where}: bind the request id before the call", hoist),
            Insertion(block, anchor, "after", parse_statements(RECORD_ID.replace("OUTPUT", output)),
                      f"{where}: record the request id after the call"),
        ]


def _assigned_name(statement: cst.BaseStatement) -> str:
    assert isinstance(statement, cst.SimpleStatementLine)
    small = statement.body[0]
    assert isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign))
    target = small.targets[0].target if isinstance(small, cst.Assign) else small.target
    assert isinstance(target, cst.Name)
    return target.value
