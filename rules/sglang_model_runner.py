"""Dump every SGLang forward pass with msprobe, as SGLang 0.5.11 does natively.

## What it patches

For SGLang 0.4.3.post4 .. 0.5.10.post1 the rule inserts into `ModelRunner` code that mirrors the
native behaviour, configured by the environment instead of a server argument:

- `MSPROBE_SGLANG_CONFIG` names the msprobe config.json; unset means nothing happens (msprobe is
  not even imported). Under PD disaggregation (`server_args.disaggregation_mode` set) prefill and
  decode servers need different `dump_path`s, so they read `MSPROBE_SGLANG_CONFIG_PREFILL` /
  `MSPROBE_SGLANG_CONFIG_DECODE` instead.
- Draft workers (speculative decoding) are not dumped. `seed_all(mode=True)` then
  `PrecisionDebugger(config_path=...)` without `model=` (msprobe 26.x removed it). Like 0.5.11,
  dumping turns CUDA/NPU graphs off (`server_args.disable_cuda_graph`, read later in `__init__`):
  msprobe sees eager execution only. Unlike 0.5.11 it cannot skip the server warm-up, whose
  passes are dumped as the first steps (verl: `enforce_eager=True` and no warm-up are advised).
- `forward`: `start(model=self.model)` right after `self.forward_pass_id += 1`, with
  `rank_id=self.gpu_id` only under data parallelism (msprobe 8.x rejects `rank_id`); `stop()` and
  `step()` right before the single final `return output`. SGLang 0.4.3 dispatches with four
  `return`s and has no `forward_pass_id`: there the body is wrapped in `try/finally`.

## Why

Inference-side precision debugging of a verl rollout needs msprobe around each
`ModelRunner.forward` of the SGLang server, with the same seeds and config handling as training.
SGLang 0.5.11 added this upstream (`ServerArgs.msprobe_dump_config`, `ModelRunner.init_msprobe`);
older servers reject that key (`ServerArgs` is a dataclass: `TypeError` at start-up).

## Versions

From 0.5.11 on the rule is not applicable: pass the native server argument instead.

## Trainer

None; the SGLang inference server (the rollout side) runs this code under every trainer.
"""

from __future__ import annotations

import libcst as cst
from libcst import matchers as m

from rlpatch.patch.edits import Edit, Wrap
from rlpatch.patch.rule import (
    AnchorError,
    Gate,
    Insertion,
    PatchCase,
    PatchRule,
    Target,
    blank_line_before,
    body_of,
    exactly_one,
    find_class,
    find_method,
    find_statements,
    parse_statements,
    read_tree_file,
    self_attribute,
)
from rlpatch.upstream.versions import Version

RULE_ID = "sglang-model-runner"
MODEL_RUNNER = "sglang/srt/model_executor/model_runner.py"
SERVER_ARGS = "sglang/srt/server_args.py"
FIRST_SUPPORTED = Version.parse("0.4.3.post4")
NATIVE_FROM = Version.parse("0.5.11")
NATIVE_OVERRIDE = "++actor_rollout_ref.rollout.engine_kwargs.sglang.msprobe_dump_config=PATH"
NATIVE_MESSAGE = (
    f"SGLang {NATIVE_FROM}+ dumps with msprobe natively: pass {NATIVE_OVERRIDE} "
    "(PATH = your msprobe config.json) instead of patching"
)

# ---------------------------------------------------------------------------------------------
# Cases: the shapes the rule patches (good) and the ones it must refuse (bad), in miniature.
# ---------------------------------------------------------------------------------------------

_INIT = """\
class ModelRunner:
    def __init__(self, server_args, gpu_id, is_draft_worker=False):
        self.gpu_id = gpu_id
        self.server_args = server_args
        self.is_draft_worker = is_draft_worker
"""
# What _INIT becomes in every good case, with the method the patch adds (the head of each `expected`).
_PATCHED_INIT = '''
class ModelRunner:
    def __init__(self, server_args, gpu_id, is_draft_worker=False):
        self.gpu_id = gpu_id
        self.server_args = server_args
        self.is_draft_worker = is_draft_worker
        self.msprobe_debugger = None
        self.init_msprobe()

    def init_msprobe(self):
        """rlpatch: create the msprobe debugger from MSPROBE_SGLANG_CONFIG (native in SGLang 0.5.11+)."""
        import os

        if self.is_draft_worker:
            return
        variable = "MSPROBE_SGLANG_CONFIG"
        mode = str(getattr(self.server_args, "disaggregation_mode", None) or "null")
        if mode != "null":
            # Prefill and decode servers must not share a config: each needs its own dump_path.
            if mode not in ("prefill", "decode"):
                raise ValueError(f"rlpatch msprobe dump: unknown disaggregation_mode {mode!r}")
            variable = "MSPROBE_SGLANG_CONFIG_" + mode.upper()
            if not os.environ.get(variable) and os.environ.get("MSPROBE_SGLANG_CONFIG"):
                raise RuntimeError(
                    f"rlpatch msprobe dump: this is a {mode} server (PD disaggregation): "
                    f"set {variable} instead of MSPROBE_SGLANG_CONFIG"
                )
        config_path = os.environ.get(variable)
        if not config_path:
            return
        if not os.path.isfile(config_path):
            raise FileNotFoundError(f"rlpatch msprobe dump: {variable}={config_path}: no such config file")
        try:
            from msprobe.pytorch import PrecisionDebugger, seed_all
        except ImportError as err:
            raise ImportError(
                f"rlpatch msprobe dump: {variable} is set but msprobe cannot be imported ({err}); "
                "pip install mindstudio-probe"
            ) from err
        if not getattr(self.server_args, "disable_cuda_graph", True):
            # As SGLang 0.5.11 does: msprobe dumps eager mode only, graph replays would dump nothing.
            import logging

            logging.getLogger(__name__).warning("rlpatch msprobe dump: disabling CUDA/NPU graphs (eager mode only)")
            self.server_args.disable_cuda_graph = True
        seed_all(mode=True)
        self.msprobe_debugger = PrecisionDebugger(config_path=config_path)
'''
# ---------------------------------------------------------------------------------------------
# The inserted code.
# ---------------------------------------------------------------------------------------------

_INIT_STATE = """\
self.msprobe_debugger = None
self.init_msprobe()
"""

_INIT_MSPROBE = '''\
def init_msprobe(self):
    """rlpatch: create the msprobe debugger from MSPROBE_SGLANG_CONFIG (native in SGLang 0.5.11+)."""
    import os

    if self.is_draft_worker:
        return
    variable = "MSPROBE_SGLANG_CONFIG"
    mode = str(getattr(self.server_args, "disaggregation_mode", None) or "null")
    if mode != "null":
        # Prefill and decode servers must not share a config: each needs its own dump_path.
        if mode not in ("prefill", "decode"):
            raise ValueError(f"rlpatch msprobe dump: unknown disaggregation_mode {mode!r}")
        variable = "MSPROBE_SGLANG_CONFIG_" + mode.upper()
        if not os.environ.get(variable) and os.environ.get("MSPROBE_SGLANG_CONFIG"):
            raise RuntimeError(
                f"rlpatch msprobe dump: this is a {mode} server (PD disaggregation): "
                f"set {variable} instead of MSPROBE_SGLANG_CONFIG"
            )
    config_path = os.environ.get(variable)
    if not config_path:
        return
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"rlpatch msprobe dump: {variable}={config_path}: no such config file")
    try:
        from msprobe.pytorch import PrecisionDebugger, seed_all
    except ImportError as err:
        raise ImportError(
            f"rlpatch msprobe dump: {variable} is set but msprobe cannot be imported ({err}); "
            "pip install mindstudio-probe"
        ) from err
    if not getattr(self.server_args, "disable_cuda_graph", True):
        # As SGLang 0.5.11 does: msprobe dumps eager mode only, graph replays would dump nothing.
        import logging

        logging.getLogger(__name__).warning("rlpatch msprobe dump: disabling CUDA/NPU graphs (eager mode only)")
        self.server_args.disable_cuda_graph = True
    seed_all(mode=True)
    self.msprobe_debugger = PrecisionDebugger(config_path=config_path)
'''

_START = """\
if self.msprobe_debugger is not None:
    if (getattr(self.server_args, "dp_size", 1) or 1) > 1:
        self.msprobe_debugger.start(model=self.model, rank_id=self.gpu_id)
    else:
        self.msprobe_debugger.start(model=self.model)
"""

_STOP = """\
if self.msprobe_debugger is not None:
    self.msprobe_debugger.stop()
    self.msprobe_debugger.step()
"""

# ---------------------------------------------------------------------------------------------
# Anchors.
# ---------------------------------------------------------------------------------------------


_DRAFT_FLAG = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=self_attribute("is_draft_worker"))])])
_SERVER_ARGS = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=self_attribute("server_args"))])])
_PASS_COUNTER = m.SimpleStatementLine(
    body=[m.AugAssign(target=self_attribute("forward_pass_id"), operator=m.AddAssign())]
)
_ANY_RETURN = m.SimpleStatementLine(body=[m.AtLeastN(m.Return(), n=1)])
_RETURN_OUTPUT = m.SimpleStatementLine(body=[m.Return(value=m.Name("output"))])
_DOCSTRING = m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString() | m.ConcatenatedString())])


def native_support(root: str) -> bool:
    """Whether the tree has SGLang's own msprobe hook (0.5.11+), whatever version it claims.

    0.5.11 declares `msprobe_dump_config` in server_args.py; later releases moved the server
    arguments into groups, but `ModelRunner.init_msprobe` stays. Our own `init_msprobe` is told
    apart by the environment variable it reads.
    """
    if "msprobe_dump_config" in read_tree_file(root, SERVER_ARGS):
        return True
    runner = read_tree_file(root, MODEL_RUNNER)
    return "def init_msprobe(" in runner and "MSPROBE_SGLANG_CONFIG" not in runner


class SglangModelRunner(PatchRule):
    """Dump each SGLang ModelRunner.forward with msprobe (MSPROBE_SGLANG_CONFIG), SGLang < 0.5.11."""

    id = RULE_ID
    package = "sglang"
    files = (MODEL_RUNNER,)
    modes = frozenset({"inference"})
    versions = "0.4.3.post4 .. 0.5.10.post1 (native from 0.5.11)"
    trainer = "SGLang inference server (rollout), not a trainer"
    markers = ("msprobe_debugger", "init_msprobe", "MSPROBE_SGLANG_CONFIG")

    VALID = [
        # one final return (0.4.6 .. 0.5.10)
        PatchCase(
            _INIT
            + """
    def forward(self, forward_batch):
        self.forward_pass_id += 1
        output = self._forward_raw(forward_batch)
        return output
""",
            expected=_PATCHED_INIT + """
    def forward(self, forward_batch):
        self.forward_pass_id += 1
        if self.msprobe_debugger is not None:
            if (getattr(self.server_args, "dp_size", 1) or 1) > 1:
                self.msprobe_debugger.start(model=self.model, rank_id=self.gpu_id)
            else:
                self.msprobe_debugger.start(model=self.model)
        output = self._forward_raw(forward_batch)
        if self.msprobe_debugger is not None:
            self.msprobe_debugger.stop()
            self.msprobe_debugger.step()
        return output
""",
        ),
        # dispatcher with four returns (0.4.3)
        PatchCase(
            _INIT
            + """
    def forward(self, forward_batch):
        if forward_batch.graph:
            return self.graph_runner.replay(forward_batch)
        if forward_batch.forward_mode.is_decode():
            return self.forward_decode(forward_batch)
        elif forward_batch.forward_mode.is_extend():
            return self.forward_extend(forward_batch)
        elif forward_batch.forward_mode.is_idle():
            return self.forward_idle(forward_batch)
        else:
            raise ValueError(forward_batch.forward_mode)
""",
            expected=_PATCHED_INIT + """
    def forward(self, forward_batch):
        if self.msprobe_debugger is not None:
            if (getattr(self.server_args, "dp_size", 1) or 1) > 1:
                self.msprobe_debugger.start(model=self.model, rank_id=self.gpu_id)
            else:
                self.msprobe_debugger.start(model=self.model)
        try:
            if forward_batch.graph:
                return self.graph_runner.replay(forward_batch)
            if forward_batch.forward_mode.is_decode():
                return self.forward_decode(forward_batch)
            elif forward_batch.forward_mode.is_extend():
                return self.forward_extend(forward_batch)
            elif forward_batch.forward_mode.is_idle():
                return self.forward_idle(forward_batch)
            else:
                raise ValueError(forward_batch.forward_mode)
        finally:
            if self.msprobe_debugger is not None:
                self.msprobe_debugger.stop()
                self.msprobe_debugger.step()
""",
        ),
    ]

    INVALID = [
        # early return after forward_pass_id
        PatchCase(
            _INIT
            + """
    def forward(self, forward_batch):
        self.forward_pass_id += 1
        if forward_batch.empty:
            return None
        output = self._forward_raw(forward_batch)
        return output
""",
            refusal="sglang/srt/model_executor/model_runner.py: ModelRunner.forward: expected a single `return output` as the last statement, found 2 return statement(s), the last statement being `return output`",
        ),
        # final statement is not `return output`
        PatchCase(
            _INIT
            + """
    def forward(self, forward_batch):
        self.forward_pass_id += 1
        return self._forward_raw(forward_batch)
""",
            refusal="sglang/srt/model_executor/model_runner.py: ModelRunner.forward: expected a single `return output` as the last statement, found 1 return statement(s), the last statement being `return self._forward_raw(forward_batch)`",
        ),
        # no draft-worker flag in __init__
        PatchCase(
            """\
class ModelRunner:
    def __init__(self, server_args):
        self.server_args = server_args

    def forward(self, forward_batch):
        self.forward_pass_id += 1
        output = self._forward_raw(forward_batch)
        return output
""",
            refusal="sglang/srt/model_executor/model_runner.py: ModelRunner.__init__: expected exactly one `self.is_draft_worker = ...` assignment, found 0",
        ),
    ]

    def gate(self, target: Target) -> Gate:
        if (target.version is not None and target.version >= NATIVE_FROM) or native_support(target.root):
            return Gate("not-applicable", NATIVE_MESSAGE, native=True)
        if target.version is not None and target.version < FIRST_SUPPORTED:
            return Gate("warn", f"SGLang {target.version} is older than {FIRST_SUPPORTED}, the oldest release checked")
        return Gate.ok()

    def insertions(self, path: str, module: cst.Module) -> list[Edit]:
        runner = find_class(module, "ModelRunner", path)
        init = find_method(runner, "__init__", path)
        where_init = f"{path}: ModelRunner.__init__"
        init_block, draft_flag = exactly_one(
            find_statements(init, _DRAFT_FLAG), where_init, "`self.is_draft_worker = ...` assignment"
        )
        _require_server_args_before(init_block, draft_flag, where_init)
        class_body = body_of(runner)
        edits: list[Edit] = [
            Insertion(init_block, draft_flag, "after", parse_statements(_INIT_STATE), f"{where_init}: debugger state"),
            Insertion(
                class_body,
                init,
                "after",
                blank_line_before(parse_statements(_INIT_MSPROBE)),
                f"{path}: ModelRunner: init_msprobe after __init__",
            ),
        ]
        edits.extend(_forward_edits(path, find_method(runner, "forward", path)))
        return edits


def _require_server_args_before(block: cst.BaseSuite | cst.Module, anchor: cst.BaseStatement, where: str) -> None:
    """init_msprobe reads self.server_args: it must be bound before the call inserted at `anchor`."""
    statements = list(block.body)
    earlier = statements[: statements.index(anchor)]
    if not any(m.matches(statement, _SERVER_ARGS) for statement in earlier):
        raise AnchorError(where, "`self.server_args = ...` before `self.is_draft_worker = ...`", "none before it")


def _forward_edits(path: str, forward: cst.FunctionDef) -> list[Edit]:
    """start/stop around the pass: after the pass counter and before the one final return, or a wrap."""
    where = f"{path}: ModelRunner.forward"
    body = body_of(forward)
    counters = find_statements(forward, _PASS_COUNTER)
    returns = find_statements(forward, _ANY_RETURN)
    if not counters and len(returns) > 1:
        # SGLang 0.4.3: a dispatcher that returns from every branch.
        keep = 1 if m.matches(body.body[0], _DOCSTRING) else 0
        return [
            Wrap(body, keep, parse_statements(_START), parse_statements(_STOP), f"{where}: try/finally around the body")
        ]
    counter_block, counter = exactly_one(
        counters, where, "`self.forward_pass_id += 1` (or several returns, as in 0.4.3)"
    )
    final = body.body[-1]
    if len(returns) != 1 or returns[0][1] is not final or not m.matches(final, _RETURN_OUTPUT):
        raise AnchorError(
            where,
            "a single `return output` as the last statement",
            f"{len(returns)} return statement(s), the last statement being "
            f"`{cst.Module([]).code_for_node(final).strip().splitlines()[0]}`",
        )
    return [
        Insertion(counter_block, counter, "after", parse_statements(_START), f"{where}: start after the pass counter"),
        Insertion(body, final, "before", parse_statements(_STOP), f"{where}: stop before the final return"),
    ]
