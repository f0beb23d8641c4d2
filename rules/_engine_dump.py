"""Code shared by the two verl engine-worker rules: their base class, the methods they add, their anchors.

The methods are inserted as text into the upstream class, so they are self-contained: every
module they need is imported inside the method (nothing depends on the imports of the upstream
file, and msprobe is imported only once dumping is switched on).
"""

from __future__ import annotations

from typing import ClassVar

import libcst as cst
from libcst import matchers as m

from rlpatch.patch.rule import (
    AnchorError,
    Gate,
    Insertion,
    PatchRule,
    Target,
    blank_line_before,
    body_of,
    parse_statements,
)
from rlpatch.upstream.switches import DUMP_PHASES, TRUTHY, py_tuple
from rlpatch.upstream.versions import Version

# Switches read at run time. What counts as on (and the phases) is shared with the
# linter's RL211 (rlpatch.upstream.switches).
ENSURE_DEBUGGER = '''
def _ensure_debugger(self, forward_only):
    """rlpatch (msprobe): whether this pass is dumped; creates the PrecisionDebugger on first use."""
    # DUMP_ON=1 switches dumping on; DUMP_PHASE picks the passes: log_prob (forward-only, the
    # default), update_actor (training) or all; MSPROBE_ACTOR_CONFIG names the msprobe config.json.
    import json
    import os

    # disable_adapter() announced this pass as LoRA's reference pass (ref_in_actor: the actor's
    # forward with its adapter off): the reference log-probs are never dumped. Read once per pass.
    reference_pass = getattr(self, "_dump_reference_pass", False)
    self._dump_reference_pass = False
    if os.environ.get("DUMP_ON", "").strip().lower() not in {{truthy}}:
        return False
    phase = os.environ.get("DUMP_PHASE", "").strip() or "log_prob"
    if phase not in {{phases}}:
        raise ValueError(f"rlpatch: DUMP_PHASE={phase!r} is not one of log_prob, update_actor, all")
    if getattr(getattr(self, "engine_config", None), "forward_only", False) or reference_pass:
        return False  # the reference engine (forward-only by config) or pass: never dumped
    if phase != "all" and (phase == "log_prob") != bool(forward_only):
        return False
    self._dump_phase = "log_prob" if forward_only else "update_actor"
    if getattr(self, "_debugger", None) is None:
        config_path = os.environ.get("MSPROBE_ACTOR_CONFIG", "").strip()
        if not config_path:
            raise RuntimeError("rlpatch: DUMP_ON=1 needs MSPROBE_ACTOR_CONFIG=/path/to/msprobe/config.json")
        if not os.path.isfile(config_path):
            raise FileNotFoundError(f"rlpatch: MSPROBE_ACTOR_CONFIG={config_path!r} is not a file")
        with open(config_path, encoding="utf-8") as config_file:
            dump_path = json.load(config_file).get("dump_path")
        if not dump_path:
            raise ValueError(f"rlpatch: {config_path} sets no dump_path; update_actor_log.jsonl needs one")
        from msprobe.pytorch import PrecisionDebugger, seed_all

        seed_all(mode=True)
        # Never pass model= here: msprobe 26.x removed it from the constructor.
        self._debugger = PrecisionDebugger(config_path=config_path)
        log_dir = os.path.join(dump_path, str(os.getpid()))
        os.makedirs(log_dir, exist_ok=True)
        self._update_actor_log = open(os.path.join(log_dir, "update_actor_log.jsonl"), "a", encoding="utf-8")
    return True
'''.replace("{{truthy}}", py_tuple(TRUTHY)).replace("{{phases}}", py_tuple(DUMP_PHASES))

LOG_UPDATE_ACTOR_STEP = '''
def _log_update_actor_step(self, micro_batch):
    """rlpatch (msprobe): append this micro-batch's record to update_actor_log.jsonl."""
    import json
    import os
    import time

    import torch

    service = getattr(self._debugger, "service", None)
    if getattr(service, "should_stop_service", False):
        return
    # msprobe dumps only the steps (and ranks) its config lists: a record without a dump is not written.
    config = getattr(service, "config", None)
    step = getattr(service, "current_iter", None)
    if getattr(config, "step", None) and step not in config.step:
        return
    if getattr(config, "rank", None) and getattr(service, "current_rank", None) not in config.rank:
        return
    request_ids = micro_batch.get("request_id", None) if hasattr(micro_batch, "get") else None
    if request_ids is None:
        request_ids = []
    elif hasattr(request_ids, "tolist"):
        request_ids = request_ids.tolist()
    elif isinstance(request_ids, str):
        request_ids = [request_ids]
    request_ids = [str(request_id) for request_id in request_ids]
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    record = {
        "source": "verl_engine",
        "phase": getattr(self, "_dump_phase", None),
        "timestamp": time.time(),
        "pid": os.getpid(),
        "rank": torch.distributed.get_rank() if distributed else 0,
        "step": step,
        "request_ids": request_ids,
        "num_requests": len(request_ids),
    }
    # Where each request's tokens sit in the module activations ("layout", "rows" in row order);
    # a surprise becomes "rows_error" in the record: a log line never stops training.
    try:
        layout = self._dump_layout(micro_batch)
        rows = layout.get("rows")
        if rows is not None and len(rows) != len(request_ids):
            raise ValueError(f"{len(rows)} rows for {len(request_ids)} request ids")
        for row, request_id in zip(rows or [], request_ids):
            row["request_id"] = request_id
    except Exception as error:
        layout = {"rows_error": f"{type(error).__name__}: {error}"}
    record.update(layout)
    self._update_actor_log.write(json.dumps(record) + "\\n")
    self._update_actor_log.flush()
'''

# The backends' `_dump_layout(self, micro_batch)`: {"layout", "rows": [{"batch_index", "offset",
# "tokens"}, ...]} in the micro-batch's row order (request ids are added by _log_update_actor_step),
# {} when the micro-batch has no nested input_ids (engines before the nested layout).
FSDP_DUMP_LAYOUT = '''
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

MEGATRON_DUMP_LAYOUT = '''
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

FINISH_DUMP_STEP = '''
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

DEBUGGER_STATE = "self._debugger = None"

# In `disable_adapter()`, before its return: the LoRA reference pass (verl 0.8.0+: the worker's
# `infer_batch` calls it with `no_lora_adapter`, right before the pass) is announced to `_ensure_debugger`.
MARK_REFERENCE_PASS = "self._dump_reference_pass = True  # rlpatch: the next pass is LoRA's reference pass"

# A `return` statement (disable_adapter's only one).
RETURN = m.SimpleStatementLine(body=[m.Return()])

# `super().__init__()` as a statement: the anchor for the debugger state in `__init__`.
SUPER_INIT = m.SimpleStatementLine(
    body=[m.Expr(m.Call(func=m.Attribute(value=m.Call(func=m.Name("super")), attr=m.Name("__init__"))))]
)

MARKERS = ("_ensure_debugger", "_log_update_actor_step", "update_actor_log.jsonl")


def reference_pass_insertions(engine: cst.ClassDef, path: str, where: str) -> list[Insertion]:
    """`disable_adapter()` marks the next pass as LoRA's reference pass (nothing on releases without it)."""
    method = next((stmt for stmt in body_of(engine).body
                   if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "disable_adapter"), None)
    if method is None:  # before 0.8.0: the LoRA reference pass does not run through the engine
        return []
    # One way out only: with an early return the mark could miss the pass that follows.
    returns = [stmt for stmt in body_of(method).body if m.matches(stmt, RETURN)]
    found = len(m.findall(method, m.Return()))
    if len(returns) != 1 or found != 1:
        raise AnchorError(f"{where}.disable_adapter", "exactly one `return`, in the method's own body",
                          f"{found} return statement(s), {len(returns)} at the top")
    return [Insertion(body_of(method), returns[0], "before", parse_statements(MARK_REFERENCE_PASS),
                      f"{where}.disable_adapter: mark the LoRA reference pass before the return")]


def methods(*templates: str) -> tuple[cst.BaseStatement, ...]:
    """Method definitions from templates, each preceded by one blank line."""
    statements: list[cst.BaseStatement] = []
    for template in templates:
        statements.extend(blank_line_before(parse_statements(template)))
    return tuple(statements)


def engine_gate(target: Target) -> Gate:
    """verl runs the engine workers for the PPO actor from 0.8.0, on 0.7.x only on request."""
    version = target.version
    if version is None:
        return Gate("warn", "verl version unknown: cannot tell whether the PPO actor runs the engine workers")
    if version < Version.parse("0.6.0"):
        return Gate("not-applicable", f"verl {version} has no engine workers (transformer_impl.py appeared in 0.6.0)")
    if version < Version.parse("0.7.0"):
        return Gate(
            "force",
            f"verl {version}: the PPO actor/ref never run the engine workers on 0.6.x (legacy workers), so the dump would stay empty",
        )
    if version < Version.parse("0.8.0"):
        return Gate("warn", f"verl {version}: the engine path runs only with trainer.use_legacy_worker_impl=disable")
    return Gate.ok()


class EngineDumpRule(PatchRule):
    """Base of the engine-worker rules (one per backend): what they share but the file and the anchors.

    Defined here, it is no rule of its own: the registry takes from each rule module the one
    PatchRule subclass that module defines.
    """

    package = "verl"
    modes = frozenset({"consistency"})
    versions = "0.7.0+ (0.7.x needs trainer.use_legacy_worker_impl=disable; 0.6.x with --force)"
    trainer = "engine workers (every trainer; on 0.7.x only with trainer.use_legacy_worker_impl=disable)"
    trainers = frozenset({"v0", "v1", "fully-async"})
    markers: ClassVar[tuple[str, ...]] = MARKERS

    def gate(self, target: Target) -> Gate:
        return engine_gate(target)


# Good cases' expected output: the two methods both engine rules add, as they read in a patched engine
# class. A literal on purpose (as LibCST's assertCodemod pins its `after`): a change to the inserted code
# must show up as a change here, in the text users review.
PATCHED_DEBUGGER_METHODS = r'''
    def _ensure_debugger(self, forward_only):
        """rlpatch (msprobe): whether this pass is dumped; creates the PrecisionDebugger on first use."""
        # DUMP_ON=1 switches dumping on; DUMP_PHASE picks the passes: log_prob (forward-only, the
        # default), update_actor (training) or all; MSPROBE_ACTOR_CONFIG names the msprobe config.json.
        import json
        import os

        # disable_adapter() announced this pass as LoRA's reference pass (ref_in_actor: the actor's
        # forward with its adapter off): the reference log-probs are never dumped. Read once per pass.
        reference_pass = getattr(self, "_dump_reference_pass", False)
        self._dump_reference_pass = False
        if os.environ.get("DUMP_ON", "").strip().lower() not in ("1", "true", "yes", "on"):
            return False
        phase = os.environ.get("DUMP_PHASE", "").strip() or "log_prob"
        if phase not in ("log_prob", "update_actor", "all"):
            raise ValueError(f"rlpatch: DUMP_PHASE={phase!r} is not one of log_prob, update_actor, all")
        if getattr(getattr(self, "engine_config", None), "forward_only", False) or reference_pass:
            return False  # the reference engine (forward-only by config) or pass: never dumped
        if phase != "all" and (phase == "log_prob") != bool(forward_only):
            return False
        self._dump_phase = "log_prob" if forward_only else "update_actor"
        if getattr(self, "_debugger", None) is None:
            config_path = os.environ.get("MSPROBE_ACTOR_CONFIG", "").strip()
            if not config_path:
                raise RuntimeError("rlpatch: DUMP_ON=1 needs MSPROBE_ACTOR_CONFIG=/path/to/msprobe/config.json")
            if not os.path.isfile(config_path):
                raise FileNotFoundError(f"rlpatch: MSPROBE_ACTOR_CONFIG={config_path!r} is not a file")
            with open(config_path, encoding="utf-8") as config_file:
                dump_path = json.load(config_file).get("dump_path")
            if not dump_path:
                raise ValueError(f"rlpatch: {config_path} sets no dump_path; update_actor_log.jsonl needs one")
            from msprobe.pytorch import PrecisionDebugger, seed_all

            seed_all(mode=True)
            # Never pass model= here: msprobe 26.x removed it from the constructor.
            self._debugger = PrecisionDebugger(config_path=config_path)
            log_dir = os.path.join(dump_path, str(os.getpid()))
            os.makedirs(log_dir, exist_ok=True)
            self._update_actor_log = open(os.path.join(log_dir, "update_actor_log.jsonl"), "a", encoding="utf-8")
        return True

    def _log_update_actor_step(self, micro_batch):
        """rlpatch (msprobe): append this micro-batch's record to update_actor_log.jsonl."""
        import json
        import os
        import time

        import torch

        service = getattr(self._debugger, "service", None)
        if getattr(service, "should_stop_service", False):
            return
        # msprobe dumps only the steps (and ranks) its config lists: a record without a dump is not written.
        config = getattr(service, "config", None)
        step = getattr(service, "current_iter", None)
        if getattr(config, "step", None) and step not in config.step:
            return
        if getattr(config, "rank", None) and getattr(service, "current_rank", None) not in config.rank:
            return
        request_ids = micro_batch.get("request_id", None) if hasattr(micro_batch, "get") else None
        if request_ids is None:
            request_ids = []
        elif hasattr(request_ids, "tolist"):
            request_ids = request_ids.tolist()
        elif isinstance(request_ids, str):
            request_ids = [request_ids]
        request_ids = [str(request_id) for request_id in request_ids]
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        record = {
            "source": "verl_engine",
            "phase": getattr(self, "_dump_phase", None),
            "timestamp": time.time(),
            "pid": os.getpid(),
            "rank": torch.distributed.get_rank() if distributed else 0,
            "step": step,
            "request_ids": request_ids,
            "num_requests": len(request_ids),
        }
        # Where each request's tokens sit in the module activations ("layout", "rows" in row order);
        # a surprise becomes "rows_error" in the record: a log line never stops training.
        try:
            layout = self._dump_layout(micro_batch)
            rows = layout.get("rows")
            if rows is not None and len(rows) != len(request_ids):
                raise ValueError(f"{len(rows)} rows for {len(request_ids)} request ids")
            for row, request_id in zip(rows or [], request_ids):
                row["request_id"] = request_id
        except Exception as error:
            layout = {"rows_error": f"{type(error).__name__}: {error}"}
        record.update(layout)
        self._update_actor_log.write(json.dumps(record) + "\n")
        self._update_actor_log.flush()
'''
