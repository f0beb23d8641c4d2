"""verl-engine-fsdp: dump every micro-batch of the FSDP engine worker with msprobe.

## What it patches

What it inserts into `verl/workers/engine/fsdp/transformer_impl.py`:
- `FSDPEngine.__init__`: `self._debugger = None` right after `super().__init__()`;
- `FSDPEngine`: the methods `_ensure_debugger`, `_log_update_actor_step` and `_dump_layout`, after `__init__`;
- `FSDPEngine.forward_backward_batch`: before the micro-batch loop, whether this pass is dumped;
  in the loop, `self._debugger.start(model=self.module)` before the `with` that runs
  `self.forward_step(...)`, and after it (forward and backward done) the log record, `stop()` and
  `step()`. The loop's own statements (gradient scaler branch, sync contexts) are untouched;
- `FSDPEngine.disable_adapter` (0.8.0+), before its `return`: `self._dump_reference_pass = True`.
  With LoRA (`ref_in_actor`) verl computes the reference log-probs by running the actor again with
  its adapter off (`no_lora_adapter`: the worker calls `disable_adapter()` right before that pass);
  the mark makes `_ensure_debugger` skip exactly that pass, as it skips a separate reference engine.

Each dumped micro-batch appends to `{dump_path}/{pid}/update_actor_log.jsonl`:
`{"source": "verl_engine", "phase": "log_prob"|"update_actor", "timestamp", "pid", "rank", "step",
"request_ids", "num_requests", "layout", "rows"}`. A step or rank msprobe does not dump (outside its config's
`step` / `rank` lists) is not logged. (Before this shape: `"source": "update_actor"` for every pass, no phase.)
Checked on the real verl 0.9.1 on CPU (tests/test_rehearsal_training.py, tests/test_rehearsal_packing.py).

`layout` and `rows` say where each request's tokens sit in the module activations. verl 0.9's
micro-batch holds nested (jagged) `input_ids`; `prepare_model_inputs` runs them either packed
(`use_remove_padding`, the micro-batch's own switch): `[1, total_tokens, ...]`, the requests back to
back in row order (`"layout": "packed"`, rows `{"request_id", "batch_index": 0, "offset": the
cumulative start, "tokens"}`), or right-padded to `[batch, longest, ...]` with an attention mask
(`"layout": "padded"`, `batch_index` = the row, `offset` 0). With `PROMPTS_ONLY=1` `tokens` is the
prompt length. With Ulysses sequence parallelism each rank holds a slice of the packed tokens: the
record says `"sp_size"` and has no rows. Engines whose micro-batch has no nested `input_ids` (before
verl 0.9) log no layout; a micro-batch whose rows do not match its request ids logs `rows_error`
(logging never stops training).

Switches at run time: `DUMP_ON=1`, `DUMP_PHASE=log_prob|update_actor|all`,
`MSPROBE_ACTOR_CONFIG=/path/config.json`. Nothing changes while `DUMP_ON` is unset, and msprobe
is then never imported. The VeOmni engine overrides this loop and is not covered.

## Why

Training-inference consistency needs the training side's forward (and, for training passes,
backward) dumped micro-batch by micro-batch, each dump tagged with the request ids it carried, so
that it can be paired with the inference dump of the same requests. verl's own precision_debugger
tool wraps whole worker stages instead and never calls `step()`, so it cannot give that pairing.

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

PATH = "verl/workers/engine/fsdp/transformer_impl.py"

# The FSDP engine's `_dump_layout`, as it reads in a patched engine class (pinned, as
# common.PATCHED_DEBUGGER_METHODS is).
PATCHED_DUMP_LAYOUT = r'''
    def _dump_layout(self, micro_batch):
        """rlpatch (msprobe): where each request's tokens sit in this micro-batch's module activations."""
        # prepare_model_inputs runs the nested (jagged) input_ids either packed, [1, total_tokens] with
        # the requests back to back (use_remove_padding), or right-padded to [batch, longest] with an
        # attention mask, each request from position 0 of its own row.
        input_ids = micro_batch.get("input_ids", None) if hasattr(micro_batch, "get") else None
        if not getattr(input_ids, "is_nested", False):
            return {}
        offsets = [int(offset) for offset in input_ids.offsets().tolist()]
        lengths = [end - start for start, end in zip(offsets, offsets[1:])]
        # The micro-batch's own switch, read as prepare_model_inputs reads it (absent: packed).
        packed = micro_batch.get("use_remove_padding", True)
        if not getattr(packed, "data", packed):
            return {"layout": "padded", "rows": [
                {"batch_index": index, "offset": 0, "tokens": length} for index, length in enumerate(lengths)]}
        sp_size = int(getattr(self, "ulysses_sequence_parallel_size", 1) or 1)
        if sp_size > 1:  # Ulysses: each rank holds one slice of the packed tokens, the rows are not its own
            return {"layout": "packed", "sp_size": sp_size}
        return {"layout": "packed", "rows": [
            {"batch_index": 0, "offset": start, "tokens": length} for start, length in zip(offsets, lengths)]}
'''

# What FSDPEngine becomes in every good case up to forward_backward_batch (the head of each `expected`).
_PATCHED_ENGINE = r'''
class FSDPEngine:
    def __init__(self):
        super().__init__()
        self._debugger = None
''' + common.PATCHED_DEBUGGER_METHODS + PATCHED_DUMP_LAYOUT

# What VALID[2]'s `disable_adapter` becomes (pinned by tests/test_verl_engine_records.py).
PATCHED_DISABLE_ADAPTER = """
    def disable_adapter(self) -> ContextManager:
        self._dump_reference_pass = True  # rlpatch: the next pass is LoRA's reference pass
        return self.module.disable_adapter()
"""

_MICRO_BATCH_LOOP = m.For(
    iter=m.Name("micro_batches")
    | m.Call(func=m.Name("enumerate"), args=[m.Arg(value=m.Name("micro_batches")), m.ZeroOrMore()])
)
_CALLS_FORWARD_STEP = m.Call(func=m.Attribute(value=m.Name("self"), attr=m.Name("forward_step")))

_DECIDE = "_dump_this_pass = self._ensure_debugger(forward_only)"
_START = """
if _dump_this_pass:
    self._debugger.start(model=self.module)
"""
_FINISH = """
if _dump_this_pass:
    self._log_update_actor_step(micro_batch)
    self._debugger.stop()
    self._debugger.step()
"""


class VerlEngineFsdp(common.EngineDumpRule):
    """Dump each FSDP engine micro-batch with msprobe and log its request ids (update_actor_log.jsonl)."""

    id: ClassVar[str] = "verl-engine-fsdp"
    files = (PATH,)
    backend = "fsdp"
    markers = common.MARKERS + ("_dump_this_pass",)

    # Good: the two loop shapes verl has shipped (0.6-0.8, and 0.9 with enumerate and sync contexts).
    VALID = [
        PatchCase(
            """
class FSDPEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        for micro_batch in micro_batches:
            with ctx:
                loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)
                if not forward_only:
                    loss.backward()
            output_lst.append(meta_info)
""",
            expected=_PATCHED_ENGINE + """
    def forward_backward_batch(self, data, loss_function, forward_only=False):
        _dump_this_pass = self._ensure_debugger(forward_only)
        for micro_batch in micro_batches:
            if _dump_this_pass:
                self._debugger.start(model=self.module)
            with ctx:
                loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)
                if not forward_only:
                    loss.backward()
            if _dump_this_pass:
                self._log_update_actor_step(micro_batch)
                self._debugger.stop()
                self._debugger.step()
            output_lst.append(meta_info)
""",
        ),
        PatchCase(
            """
class FSDPEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        for micro_batch_idx, micro_batch in enumerate(micro_batches):
            sync_ctx = nullcontext()
            with ctx, sync_ctx:
                loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)
            output_lst.append(meta_info)
""",
            expected=_PATCHED_ENGINE + """
    def forward_backward_batch(self, data, loss_function, forward_only=False):
        _dump_this_pass = self._ensure_debugger(forward_only)
        for micro_batch_idx, micro_batch in enumerate(micro_batches):
            sync_ctx = nullcontext()
            if _dump_this_pass:
                self._debugger.start(model=self.module)
            with ctx, sync_ctx:
                loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)
            if _dump_this_pass:
                self._log_update_actor_step(micro_batch)
                self._debugger.stop()
                self._debugger.step()
            output_lst.append(meta_info)
""",
        ),
        PatchCase(
            """
class FSDPEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        for micro_batch_idx, micro_batch in enumerate(micro_batches):
            with ctx:
                loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)
            output_lst.append(meta_info)

    def disable_adapter(self) -> ContextManager:
        return self.module.disable_adapter()
""",
            expected=_PATCHED_ENGINE + """
    def forward_backward_batch(self, data, loss_function, forward_only=False):
        _dump_this_pass = self._ensure_debugger(forward_only)
        for micro_batch_idx, micro_batch in enumerate(micro_batches):
            if _dump_this_pass:
                self._debugger.start(model=self.module)
            with ctx:
                loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)
            if _dump_this_pass:
                self._log_update_actor_step(micro_batch)
                self._debugger.stop()
                self._debugger.step()
            output_lst.append(meta_info)

    def disable_adapter(self) -> ContextManager:
        self._dump_reference_pass = True  # rlpatch: the next pass is LoRA's reference pass
        return self.module.disable_adapter()
""",
        ),
    ]

    # Bad: drifted shapes the rule must refuse (renamed method, duplicated loop, loop without `with`,
    # a disable_adapter with two returns: which one runs before the reference pass is not known).
    INVALID = [
        PatchCase(
            """
class FSDPEngine:
    def __init__(self):
        super().__init__()

    def forward_backward(self, data, loss_function, forward_only=False):
        for micro_batch in micro_batches:
            with ctx:
                loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)
""",
            refusal="verl/workers/engine/fsdp/transformer_impl.py: class FSDPEngine: expected exactly one method forward_backward_batch, found 0 methods named forward_backward_batch",
        ),
        PatchCase(
            """
class FSDPEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        for micro_batch in micro_batches:
            with ctx:
                loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)
        for micro_batch in micro_batches:
            with ctx:
                loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)
""",
            refusal="verl/workers/engine/fsdp/transformer_impl.py: FSDPEngine.forward_backward_batch: expected exactly one for loop over micro_batches, found 2",
        ),
        PatchCase(
            """
class FSDPEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        for micro_batch in micro_batches:
            loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)
""",
            refusal="verl/workers/engine/fsdp/transformer_impl.py: FSDPEngine.forward_backward_batch: micro-batch loop: expected exactly one `with` statement in the loop body, found 0",
        ),
        PatchCase(
            """
class FSDPEngine:
    def __init__(self):
        super().__init__()

    def forward_backward_batch(self, data, loss_function, forward_only=False):
        for micro_batch in micro_batches:
            with ctx:
                loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)

    def disable_adapter(self):
        if self.peft is None:
            return nullcontext()
        return self.module.disable_adapter()
""",
            refusal="verl/workers/engine/fsdp/transformer_impl.py: FSDPEngine.disable_adapter: expected exactly one `return`, in the method's own body, found 2 return statement(s), 1 at the top",
        ),
    ]

    def insertions(self, path: str, module: cst.Module) -> list[Insertion]:
        engine = find_class(module, "FSDPEngine", path)
        where = f"{path}: FSDPEngine"
        init = find_method(engine, "__init__", path)
        init_block, super_init = exactly_one(find_statements(init, common.SUPER_INIT), f"{where}.__init__", "super().__init__() call")
        method = find_method(engine, "forward_backward_batch", path)
        loop_where = f"{where}.forward_backward_batch"
        loop_block, loop = exactly_one(find_statements(method, _MICRO_BATCH_LOOP), loop_where, "for loop over micro_batches")
        assert isinstance(loop, cst.For)
        with_block, forward_with = exactly_one(
            [(block, stmt) for block, stmt in find_statements(loop, m.With()) if block is body_of(loop)],
            f"{loop_where}: micro-batch loop",
            "`with` statement in the loop body",
        )
        if not m.findall(forward_with, _CALLS_FORWARD_STEP):
            raise AnchorError(f"{loop_where}: micro-batch loop", "a call to self.forward_step(...) inside the `with`", "none")
        return [
            Insertion(init_block, super_init, "after", parse_statements(common.DEBUGGER_STATE), "FSDPEngine.__init__: debugger state"),
            Insertion(
                body_of(engine), init, "after",
                common.methods(common.ENSURE_DEBUGGER, common.LOG_UPDATE_ACTOR_STEP, common.FSDP_DUMP_LAYOUT),
                "FSDPEngine: _ensure_debugger, _log_update_actor_step and _dump_layout methods",
            ),
            Insertion(loop_block, loop, "before", parse_statements(_DECIDE), "forward_backward_batch: before the micro-batch loop"),
            Insertion(with_block, forward_with, "before", parse_statements(_START), "micro-batch loop: start before the forward"),
            Insertion(with_block, forward_with, "after", parse_statements(_FINISH), "micro-batch loop: log, stop, step after the backward"),
            *common.reference_pass_insertions(engine, path, where),
        ]
