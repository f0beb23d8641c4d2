"""verl-engine-megatron: dump every micro-batch of the Megatron engine worker with msprobe.

## What it patches

What it inserts into `verl/workers/engine/megatron/transformer_impl.py`:
- `MegatronEngine.__init__`: debugger state after `super().__init__()`;
- `MegatronEngine`: `_ensure_debugger`, `_log_update_actor_step`, `_dump_layout`, `_finish_dump_step`
  after `__init__`;
- `MegatronEngine.forward_backward_batch`: `self._dump_should_record` set right before
  `losses_reduced = forward_backward_func(...)` and cleared right after it;
- `MegatronEngineWithLMHead.forward_step`: `start(model=model)` (the chunk being run) before each
  `output = forward_fn(...)` / `output = fused_forward_fn(...)`, and `_finish_dump_step(batch)` after;
- `MegatronEngine.disable_adapter` (0.8.0+), before its `return`: `self._dump_reference_pass = True`,
  so LoRA's reference pass (the actor with its adapter off, `ref_in_actor`) is not dumped (see
  verl-engine-fsdp). Log records: `{"source": "verl_engine", "phase", ...}` as for FSDP; a step or rank
  outside msprobe's `step` / `rank` lists is not logged.
Records also carry `layout` and `rows` (see verl-engine-fsdp), read from the micro-batch's nested
  `input_ids` as verl 0.9.1's engine lays them out (read from its code, not run): Megatron's modules
  run `[sequence, batch, ...]` activations, so records say `"token_dim": 0` and a request's tokens are
  `t[offset : offset + tokens, batch_index]`; packed (thd, `engine_config.use_remove_padding`), each
  request is padded to a multiple of the TP size (`preprocess_thd_engine`) and `offset` is the padded
  cumulative start; padded (bshd), `batch_index` is its column and `offset` 0. Also `tp_size` and
  `sequence_parallel` (then norms and the residual stream hold 1/TP of the tokens per rank). With
  context parallelism (zigzag chunks per rank) the record has `cp_size` and no rows; FP8 padding's
  wider alignment is not modelled.
Only the last pipeline stage writes log records. `MegatronEngineWithValueHead` (critic) is not
patched. The Ascend MindSpeed engine inherits these methods, so the patch reaches it.

## Why

As for FSDP, consistency needs per-micro-batch training dumps tagged with request ids. There
is no Python micro-batch loop here: Megatron-core runs the micro-batches inside
`losses_reduced = forward_backward_func(...)`, calling the engine's `forward_step` once per
micro-batch. So the pass-level decision is taken around that call, and the dump of one micro-batch
opens right before the model runs in `MegatronEngineWithLMHead.forward_step` and closes right after.

## Versions

Not run here: verl 0.9.1's Megatron engine needs megatron-core and CUDA to be built (the rehearsal
runs the FSDP engine only); this patch is proved structurally on every release
(tests/test_upstream_verl_engine.py) and by its cases below.

## Trainer

The engine workers run under every trainer (RayPPOTrainer, the v1 PPOTrainer, FullyAsyncTrainer);
on 0.7.x only with `trainer.use_legacy_worker_impl=disable`.
"""

from __future__ import annotations

from typing import ClassVar

import libcst as cst
from libcst import matchers as m

from rlpatch.patch.rule import (
    AnchorError,
    Insertion,
    PatchCase,
    body_of,
    exactly_one,
    find_class,
    find_method,
    find_statements,
    parse_statements,
)

from . import _engine_dump as common

PATH = "verl/workers/engine/megatron/transformer_impl.py"

# The Megatron engine's `_dump_layout`, as it reads in a patched engine class (pinned, as
# common.PATCHED_DEBUGGER_METHODS is).
PATCHED_DUMP_LAYOUT = r'''
    def _dump_layout(self, micro_batch):
        """rlpatch (msprobe): where each request's tokens sit in this micro-batch's module activations."""
        # Megatron's modules run [sequence, batch, ...] activations: "token_dim": 0, a request's tokens
        # are t[offset : offset + tokens, batch_index]. Packed (thd, use_remove_padding): the engine's
        # preprocess pads each request to a multiple of the TP size and puts them back to back, so each
        # starts at the padded cumulative offset; padded (bshd): one batch column per request. With
        # context parallelism each rank holds zigzag chunks of every request: no rows. With sequence
        # parallelism the norms and the residual stream hold 1/TP of the tokens on each rank.
        input_ids = micro_batch.get("input_ids", None) if hasattr(micro_batch, "get") else None
        if not getattr(input_ids, "is_nested", False):
            return {}
        from megatron.core import parallel_state

        offsets = [int(offset) for offset in input_ids.offsets().tolist()]
        lengths = [end - start for start, end in zip(offsets, offsets[1:])]
        tp_size = parallel_state.get_tensor_model_parallel_world_size()
        cp_size = parallel_state.get_context_parallel_world_size()
        packed = bool(getattr(getattr(self, "engine_config", None), "use_remove_padding", True))
        fields = {"layout": "packed" if packed else "padded", "token_dim": 0, "tp_size": tp_size,
                  "sequence_parallel": bool(getattr(getattr(self, "tf_config", None), "sequence_parallel", False))}
        if cp_size > 1:
            return {**fields, "cp_size": cp_size}
        if not packed:
            return {**fields, "rows": [
                {"batch_index": index, "offset": 0, "tokens": length} for index, length in enumerate(lengths)]}
        rows = []
        start = 0
        for length in lengths:
            rows.append({"batch_index": 0, "offset": start, "tokens": length})
            start += length + (-length) % tp_size
        return {**fields, "rows": rows}
'''

# What MegatronEngine becomes in every good case up to forward_backward_batch (the head of each `expected`).
_PATCHED_ENGINE = r'''
class MegatronEngine:
    def __init__(self):
        super().__init__()
        self._debugger = None
        self._dump_should_record = False
''' + common.PATCHED_DEBUGGER_METHODS + PATCHED_DUMP_LAYOUT + r'''
    def _finish_dump_step(self, batch):
        """rlpatch (msprobe): close one micro-batch's dump: log it (last pipeline stage only), stop, step."""
        try:
            from megatron.core import parallel_state

            last_stage = parallel_state.is_pipeline_last_stage(ignore_virtual=True)
        except Exception:  # no Megatron or no pipeline groups (tests, single stage): log it
            last_stage = True
        if last_stage:
            self._log_update_actor_step(batch)
        self._debugger.stop()
        self._debugger.step()
'''

_FORWARD_BACKWARD = m.SimpleStatementLine(
    body=[m.Assign(targets=[m.AssignTarget(m.Name("losses_reduced"))], value=m.Call(func=m.Name("forward_backward_func")))]
)


def _model_call(function: str) -> m.SimpleStatementLine:
    return m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name("output"))], value=m.Call(func=m.Name(function)))])


_BINDS_BATCH = m.SimpleStatementLine(
    body=[m.Assign(targets=[m.AssignTarget(m.Name("batch"))]) | m.AnnAssign(target=m.Name("batch"), value=m.DoesNotMatch(None))]
)

_DECIDE = "self._dump_should_record = self._ensure_debugger(forward_only)"
_CLEAR = "self._dump_should_record = False"
_STATE = """
self._debugger = None
self._dump_should_record = False
"""
_START = """
if getattr(self, "_dump_should_record", False):
    self._debugger.start(model=model)
"""
_FINISH = """
if getattr(self, "_dump_should_record", False):
    self._finish_dump_step(batch)
"""


class VerlEngineMegatron(common.EngineDumpRule):
    """Dump each Megatron engine micro-batch with msprobe and log its request ids (update_actor_log.jsonl)."""

    id: ClassVar[str] = "verl-engine-megatron"
    files = (PATH,)
    backend = "megatron"
    markers = common.MARKERS + ("_finish_dump_step", "_dump_should_record")

    # Good: the forward_fn-only layout (0.6) and the fused + plain layout (later releases).
    VALID = [
        PatchCase(
            """
class MegatronEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        losses_reduced = forward_backward_func(forward_step_func=forward_step, forward_only=forward_only)
        return losses_reduced


class MegatronEngineWithLMHead(MegatronEngine):
    def forward_step(self, batch_iter, model, postprocess_micro_batch_func):
        batch = next(batch_iter)
        output = forward_fn(model, batch)
        return output
""",
            expected=_PATCHED_ENGINE + """
    def forward_backward_batch(self, data, loss_function, forward_only=False):
        self._dump_should_record = self._ensure_debugger(forward_only)
        losses_reduced = forward_backward_func(forward_step_func=forward_step, forward_only=forward_only)
        self._dump_should_record = False
        return losses_reduced


class MegatronEngineWithLMHead(MegatronEngine):
    def forward_step(self, batch_iter, model, postprocess_micro_batch_func):
        batch = next(batch_iter)
        if getattr(self, "_dump_should_record", False):
            self._debugger.start(model=model)
        output = forward_fn(model, batch)
        if getattr(self, "_dump_should_record", False):
            self._finish_dump_step(batch)
        return output
""",
        ),
        PatchCase(
            """
class MegatronEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        with ctx:
            losses_reduced = forward_backward_func(forward_step_func=forward_step, forward_only=forward_only)
        return losses_reduced


class MegatronEngineWithLMHead(MegatronEngine):
    def forward_step(self, batch_iter, model, logits_processor_func, postprocess_micro_batch_func):
        batch: TensorDict = next(batch_iter)
        if use_fused_kernels:
            output = fused_forward_fn(model=model, input_ids=input_ids)
        else:
            output = forward_fn(model, input_ids)
        return output
""",
            expected=_PATCHED_ENGINE + """
    def forward_backward_batch(self, data, loss_function, forward_only=False):
        with ctx:
            self._dump_should_record = self._ensure_debugger(forward_only)
            losses_reduced = forward_backward_func(forward_step_func=forward_step, forward_only=forward_only)
            self._dump_should_record = False
        return losses_reduced


class MegatronEngineWithLMHead(MegatronEngine):
    def forward_step(self, batch_iter, model, logits_processor_func, postprocess_micro_batch_func):
        batch: TensorDict = next(batch_iter)
        if use_fused_kernels:
            if getattr(self, "_dump_should_record", False):
                self._debugger.start(model=model)
            output = fused_forward_fn(model=model, input_ids=input_ids)
            if getattr(self, "_dump_should_record", False):
                self._finish_dump_step(batch)
        else:
            if getattr(self, "_dump_should_record", False):
                self._debugger.start(model=model)
            output = forward_fn(model, input_ids)
            if getattr(self, "_dump_should_record", False):
                self._finish_dump_step(batch)
        return output
""",
        ),
        PatchCase(
            """
class MegatronEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        losses_reduced = forward_backward_func(forward_step_func=forward_step, forward_only=forward_only)
        return losses_reduced

    def disable_adapter(self) -> ContextManager:
        return self.peft_cls.disable_adapter(self.module)


class MegatronEngineWithLMHead(MegatronEngine):
    def forward_step(self, batch_iter, model, postprocess_micro_batch_func):
        batch = next(batch_iter)
        output = forward_fn(model, batch)
        return output
""",
            expected=_PATCHED_ENGINE + """
    def forward_backward_batch(self, data, loss_function, forward_only=False):
        self._dump_should_record = self._ensure_debugger(forward_only)
        losses_reduced = forward_backward_func(forward_step_func=forward_step, forward_only=forward_only)
        self._dump_should_record = False
        return losses_reduced

    def disable_adapter(self) -> ContextManager:
        self._dump_reference_pass = True  # rlpatch: the next pass is LoRA's reference pass
        return self.peft_cls.disable_adapter(self.module)


class MegatronEngineWithLMHead(MegatronEngine):
    def forward_step(self, batch_iter, model, postprocess_micro_batch_func):
        batch = next(batch_iter)
        if getattr(self, "_dump_should_record", False):
            self._debugger.start(model=model)
        output = forward_fn(model, batch)
        if getattr(self, "_dump_should_record", False):
            self._finish_dump_step(batch)
        return output
""",
        ),
    ]

    # Bad: no forward_backward_func call, or two of them; forward_step without a model call.
    INVALID = [
        PatchCase(
            """
class MegatronEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        return run_all(data)


class MegatronEngineWithLMHead(MegatronEngine):
    def forward_step(self, batch_iter, model, postprocess_micro_batch_func):
        batch = next(batch_iter)
        output = forward_fn(model, batch)
""",
            refusal="verl/workers/engine/megatron/transformer_impl.py: MegatronEngine.forward_backward_batch: expected exactly one `losses_reduced = forward_backward_func(...)`, found 0",
        ),
        PatchCase(
            """
class MegatronEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        losses_reduced = forward_backward_func(forward_step_func=forward_step)
        losses_reduced = forward_backward_func(forward_step_func=forward_step)


class MegatronEngineWithLMHead(MegatronEngine):
    def forward_step(self, batch_iter, model, postprocess_micro_batch_func):
        batch = next(batch_iter)
        output = forward_fn(model, batch)
""",
            refusal="verl/workers/engine/megatron/transformer_impl.py: MegatronEngine.forward_backward_batch: expected exactly one `losses_reduced = forward_backward_func(...)`, found 2",
        ),
        PatchCase(
            """
class MegatronEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        losses_reduced = forward_backward_func(forward_step_func=forward_step)


class MegatronEngineWithLMHead(MegatronEngine):
    def forward_step(self, batch_iter, model, postprocess_micro_batch_func):
        batch = next(batch_iter)
        return self.run(model, batch)
""",
            refusal="verl/workers/engine/megatron/transformer_impl.py: MegatronEngineWithLMHead.forward_step: expected exactly one `output = forward_fn(...)` and at most one `output = fused_forward_fn(...)`, found 0 and 0",
        ),
    ]

    def insertions(self, path: str, module: cst.Module) -> list[Insertion]:
        engine = find_class(module, "MegatronEngine", path)
        where = f"{path}: MegatronEngine"
        init = find_method(engine, "__init__", path)
        init_block, super_init = exactly_one(find_statements(init, common.SUPER_INIT), f"{where}.__init__", "super().__init__() call")
        batch_method = find_method(engine, "forward_backward_batch", path)
        call_block, call = exactly_one(
            find_statements(batch_method, _FORWARD_BACKWARD),
            f"{where}.forward_backward_batch",
            "`losses_reduced = forward_backward_func(...)`",
        )
        insertions = [
            Insertion(init_block, super_init, "after", parse_statements(_STATE), "MegatronEngine.__init__: debugger state"),
            Insertion(
                body_of(engine), init, "after",
                common.methods(common.ENSURE_DEBUGGER, common.LOG_UPDATE_ACTOR_STEP, common.MEGATRON_DUMP_LAYOUT,
                               common.FINISH_DUMP_STEP),
                "MegatronEngine: _ensure_debugger, _log_update_actor_step, _finish_dump_step methods",
            ),
            Insertion(call_block, call, "before", parse_statements(_DECIDE), "forward_backward_batch: decide before forward_backward_func"),
            Insertion(call_block, call, "after", parse_statements(_CLEAR), "forward_backward_batch: clear after forward_backward_func"),
        ]
        insertions += common.reference_pass_insertions(engine, path, where)
        return insertions + self._model_call_insertions(module, path)

    def _model_call_insertions(self, module: cst.Module, path: str) -> list[Insertion]:
        head = find_class(module, "MegatronEngineWithLMHead", path)
        step = find_method(head, "forward_step", path)
        where = f"{path}: MegatronEngineWithLMHead.forward_step"
        if not find_statements(step, _BINDS_BATCH):
            raise AnchorError(where, "a local `batch` bound from the batch iterator", "none")
        plain = find_statements(step, _model_call("forward_fn"))
        fused = find_statements(step, _model_call("fused_forward_fn"))
        if len(plain) != 1 or len(fused) > 1:
            raise AnchorError(
                where,
                "exactly one `output = forward_fn(...)` and at most one `output = fused_forward_fn(...)`",
                f"{len(plain)} and {len(fused)}",
            )
        insertions = []
        for name, (block, call) in [("fused_forward_fn", site) for site in fused] + [("forward_fn", site) for site in plain]:
            insertions.append(Insertion(block, call, "before", parse_statements(_START), f"forward_step: start before {name}"))
            insertions.append(Insertion(block, call, "after", parse_statements(_FINISH), f"forward_step: finish after {name}"))
        return insertions
