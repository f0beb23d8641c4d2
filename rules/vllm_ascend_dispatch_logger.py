"""Log which requests each dumped vLLM-Ascend model step ran, next to msprobe's dump.

## What it patches

The rule adds `vllm_ascend/worker/dispatch_logger.py` (class `DispatchLogger`, writing
`{dump_path}/{pid}/dispatch_log.jsonl`, one record per dumped step) and hooks `NPUModelRunner` in
`vllm_ascend/worker/model_runner_v1.py`:

- `__init__`: `self._dispatch_logger = None` where the runner resets its debugger, and a logger
  right after the runner creates its own `PrecisionDebugger` (not for the ACL graph dumper).
- `_finish_msprobe_step(self, scheduler_output)`: logs the step when a debugger is active and
  msprobe's service has not stopped, passing the runner itself so the logger reads its input batch.
- a call to it right before every place the runner closes a dump step: each
  `self.debugger.stop()` in 0.12 .. 0.19, each `self._finalize_dump_data()` from 0.20.2rc1
  (except `_finalize_dump_data(dump=False)` in `_dummy_run`, which ends a dummy run). One hook per
  stop site: `verify` reports `partial` when a stop site has no hook. `scheduler_output` must be
  a bound local at each site; the rule refuses otherwise.

Each record: `source`, `timestamp`, `pid`, `rank`, `step`, `phase`, `total_num_scheduled_tokens`,
`requests` (new then cached, as the scheduler lists them), `scheduler_order` (the order of
`scheduler_output.num_scheduled_tokens`), and, when the runner has an input batch, `rows`
(`request_id`, `type`, `offset`, `tokens`, `computed`) in the runner's row order with
`rows_source: "input_batch"`; `tp_rank`, `tp_size`, `tp_ranks` when the TP group is known.

A step's activations are `[num_tokens, ...]`, the requests packed along dim 0 in the order of
`self.input_batch.req_ids`: vLLM's `_update_states` (which 0.23.0's runner calls first in
`execute_model`) ends by reordering that batch for the attention backend (Ascend: decodes first, by
swapping rows), so it is not the scheduler's order. Nothing reorders it between the forward and the
stop sites, so the order read there is the one the model ran. `computed` comes from the scheduler
output (`num_computed_tokens` of each new and cached request, what `_update_states` copies into
`input_batch.num_computed_tokens_cpu`, the base of the positions); a prefill chunk covers prompt
positions `[computed, computed + tokens)`. A runner without an input batch gives records without
rows; rows that do not add up to the step's token count give `rows_error` instead: logging never
stops the server.

## Why

A consistency check compares an inference dump with a training dump request by request, but
a vLLM step batches many requests (new prefills and cached decodes) and msprobe's `step{N}` folder
does not say which. vllm-ascend has its own msprobe hooks from 0.12.0rc1 (`additional_config`
`dump_config` / `dump_config_path`) and nothing that records the batch.

## Versions

vllm-ascend 0.11.0 and older have no msprobe hooks: not applicable.

## Trainer

None; the vLLM-Ascend inference server (the rollout side) runs this code under every trainer.
"""

from __future__ import annotations

import libcst as cst
from libcst import matchers as m

from rlpatch.patch.rule import (
    AnchorError,
    Block,
    Gate,
    Insertion,
    NewFile,
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
from rlpatch.rules._dispatch_logger_file import DISPATCH_LOGGER_SOURCE
from rlpatch.upstream.versions import Version

RULE_ID = "vllm-ascend-dispatch-logger"
MODEL_RUNNER = "vllm_ascend/worker/model_runner_v1.py"
LOGGER_FILE = "vllm_ascend/worker/dispatch_logger.py"
NATIVE_DUMP_FROM = Version.parse("0.12.0rc1")
NO_DUMP_MESSAGE = (
    "vllm-ascend {version} has no msprobe dump hooks (additional_config dump_config arrives in "
    "0.12.0rc1): there is no dumped step to log"
)

# ---------------------------------------------------------------------------------------------
# Cases: the runner shapes the rule patches (good) and refuses (bad), in miniature.
# ---------------------------------------------------------------------------------------------

_INIT = """\
class NPUModelRunner:
    def __init__(self, dump_cfg):
        self.debugger = None
        if dump_cfg is not None:
            from msprobe.pytorch import PrecisionDebugger
            self.debugger = PrecisionDebugger(dump_cfg)
"""
# What _INIT becomes in every good case, with the method the patch adds (the head of each `expected`).
_PATCHED_INIT = '''
class NPUModelRunner:
    def __init__(self, dump_cfg):
        self.debugger = None
        self._dispatch_logger = None
        if dump_cfg is not None:
            from msprobe.pytorch import PrecisionDebugger
            self.debugger = PrecisionDebugger(dump_cfg)
            from vllm_ascend.worker.dispatch_logger import DispatchLogger
            self._dispatch_logger = DispatchLogger.for_debugger(self.debugger)

    def _finish_msprobe_step(self, scheduler_output):
        """rlpatch: log the step msprobe is about to close, in the runner's row order (dispatch_log.jsonl)."""
        dispatch_logger = getattr(self, "_dispatch_logger", None)
        if dispatch_logger is None or self.debugger is None:
            return
        if not getattr(self, "_debugger_started", True):
            # 0.20.2rc1+: no dump step is open, _finalize_dump_data will not stop anything.
            return
        dispatch_logger.log_debugger_step(self.debugger, scheduler_output, getattr(self, "attn_state", None), self)
'''
# ---------------------------------------------------------------------------------------------
# The inserted code, and the file the rule creates.
# ---------------------------------------------------------------------------------------------

_NO_LOGGER = "self._dispatch_logger = None\n"

_CREATE_LOGGER = """\
from vllm_ascend.worker.dispatch_logger import DispatchLogger
self._dispatch_logger = DispatchLogger.for_debugger(self.debugger)
"""

_FINISH_STEP = '''\
def _finish_msprobe_step(self, scheduler_output):
    """rlpatch: log the step msprobe is about to close, in the runner's row order (dispatch_log.jsonl)."""
    dispatch_logger = getattr(self, "_dispatch_logger", None)
    if dispatch_logger is None or self.debugger is None:
        return
    if not getattr(self, "_debugger_started", True):
        # 0.20.2rc1+: no dump step is open, _finalize_dump_data will not stop anything.
        return
    dispatch_logger.log_debugger_step(self.debugger, scheduler_output, getattr(self, "attn_state", None), self)
'''

_HOOK = "self._finish_msprobe_step(scheduler_output)\n"


# ---------------------------------------------------------------------------------------------
# Anchors.
# ---------------------------------------------------------------------------------------------


def _assigns_debugger(value: m.BaseExpressionMatchType) -> m.SimpleStatementLine:
    return m.SimpleStatementLine(
        body=[m.Assign(targets=[m.AssignTarget(target=self_attribute("debugger"))], value=value)]
    )


_DEBUGGER_RESET = _assigns_debugger(m.Name("None"))
_DEBUGGER_CREATED = _assigns_debugger(m.Call(func=m.Name("PrecisionDebugger")))
_INLINE_STOP = m.SimpleStatementLine(
    body=[m.Expr(value=m.Call(func=m.Attribute(value=self_attribute("debugger"), attr=m.Name("stop"))))]
)
_FINALIZE = m.SimpleStatementLine(body=[m.Expr(value=m.Call(func=self_attribute("_finalize_dump_data")))])
_DUMMY_FINALIZE = m.SimpleStatementLine(
    body=[
        m.Expr(
            value=m.Call(
                func=self_attribute("_finalize_dump_data"),
                args=[m.ZeroOrMore(), m.Arg(keyword=m.Name("dump"), value=m.Name("False")), m.ZeroOrMore()],
            )
        )
    ]
)


class _BindingOrder(cst.CSTVisitor):
    """Walks a function in source order and records whether `name` is bound before each site."""

    def __init__(self, name: str, sites: list[cst.BaseStatement]) -> None:
        super().__init__()
        self._name = m.Name(name)
        self._sites = {id(site) for site in sites}
        self.bound = False
        self.bound_at: dict[int, bool] = {}

    def _bind_if_named(self, target: cst.CSTNode | None) -> None:
        if target is not None and m.findall(target, self._name):
            self.bound = True

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self._sites:
            self.bound_at[id(node)] = self.bound
        if isinstance(node, cst.Param):
            self._bind_if_named(node.name)
        elif isinstance(node, cst.AssignTarget):
            self._bind_if_named(node.target)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr)):
            self._bind_if_named(node.target)
        elif isinstance(node, cst.AsName):
            self._bind_if_named(node.name)
        return super().on_visit(node)


def _stop_sites(runner: cst.ClassDef) -> list[tuple[cst.FunctionDef, Block, cst.BaseStatement]]:
    """Every place the runner closes a dump step, with its method, in source order."""
    methods = [statement for statement in body_of(runner).body if isinstance(statement, cst.FunctionDef)]
    finalize = [(method, found) for method in methods for found in find_statements(method, _FINALIZE)]
    if finalize:  # 0.20.2rc1+: the stops live in _finalize_dump_data; hook its callers
        return [
            (method, block, statement)
            for method, (block, statement) in finalize
            if not m.matches(statement, _DUMMY_FINALIZE)
        ]
    return [
        (method, block, statement) for method in methods for block, statement in find_statements(method, _INLINE_STOP)
    ]


def _require_bound(path: str, sites: list[tuple[cst.FunctionDef, Block, cst.BaseStatement]]) -> None:
    for method in {id(method): method for method, _, _ in sites}.values():
        statements = [statement for owner, _, statement in sites if owner is method]
        order = _BindingOrder("scheduler_output", statements)
        method.visit(order)
        unbound = [statement for statement in statements if not order.bound_at.get(id(statement), False)]
        if unbound:
            raise AnchorError(
                f"{path}: NPUModelRunner.{method.name.value}",
                "`scheduler_output` bound before every dump stop site",
                f"{len(unbound)} stop site(s) where it is not bound",
            )


def _has_native_dump(root: str) -> bool:
    return "PrecisionDebugger" in read_tree_file(root, MODEL_RUNNER)


class VllmAscendDispatchLogger(PatchRule):
    """Log the requests of each msprobe-dumped vLLM-Ascend step to dispatch_log.jsonl."""

    id = RULE_ID
    package = "vllm_ascend"
    files = (MODEL_RUNNER,)
    modes = frozenset({"consistency"})
    versions = "0.12.0rc1+ (msprobe dump hooks; 0.13.0, 0.18.0, 0.23.0 checked)"
    trainer = "vLLM-Ascend inference server (rollout), not a trainer"
    markers = ("_dispatch_logger", "_finish_msprobe_step", "DispatchLogger")

    VALID = [
        # inline stops (0.12 .. 0.19)
        PatchCase(
            _INIT
            + """
    def execute_model(self, scheduler_output):
        if self.debugger is not None:
            self.debugger.start(model=self.model)
        hidden = self.model(scheduler_output)
        if self.pooling:
            if self.debugger is not None:
                self.debugger.stop()
                self.debugger.step()
            return hidden
        self.state = (scheduler_output, hidden)

    def sample_tokens(self, grammar_output):
        (scheduler_output, hidden) = self.state
        if self.debugger is not None:
            self.debugger.stop()
            self.debugger.step()
        return hidden
""",
            expected=_PATCHED_INIT + """
    def execute_model(self, scheduler_output):
        if self.debugger is not None:
            self.debugger.start(model=self.model)
        hidden = self.model(scheduler_output)
        if self.pooling:
            if self.debugger is not None:
                self._finish_msprobe_step(scheduler_output)
                self.debugger.stop()
                self.debugger.step()
            return hidden
        self.state = (scheduler_output, hidden)

    def sample_tokens(self, grammar_output):
        (scheduler_output, hidden) = self.state
        if self.debugger is not None:
            self._finish_msprobe_step(scheduler_output)
            self.debugger.stop()
            self.debugger.step()
        return hidden
""",
        ),
        # _finalize_dump_data (0.20.2rc1+)
        PatchCase(
            _INIT
            + """
    def execute_model(self, scheduler_output):
        self._start_dump_data()
        if not scheduler_output.total_num_scheduled_tokens:
            self._finalize_dump_data()
            return None
        self.state = scheduler_output

    def sample_tokens(self, grammar_output):
        scheduler_output = self.state
        self._finalize_dump_data()
        return scheduler_output

    def _dummy_run(self, num_tokens):
        self._finalize_dump_data(dump=False)

    def _finalize_dump_data(self, **kwargs):
        if self.debugger is not None:
            self.debugger.stop()
            self.debugger.step(**kwargs)
""",
            expected=_PATCHED_INIT + """
    def execute_model(self, scheduler_output):
        self._start_dump_data()
        if not scheduler_output.total_num_scheduled_tokens:
            self._finish_msprobe_step(scheduler_output)
            self._finalize_dump_data()
            return None
        self.state = scheduler_output

    def sample_tokens(self, grammar_output):
        scheduler_output = self.state
        self._finish_msprobe_step(scheduler_output)
        self._finalize_dump_data()
        return scheduler_output

    def _dummy_run(self, num_tokens):
        self._finalize_dump_data(dump=False)

    def _finalize_dump_data(self, **kwargs):
        if self.debugger is not None:
            self.debugger.stop()
            self.debugger.step(**kwargs)
""",
        ),
    ]

    INVALID = [
        # scheduler_output not bound at a stop site
        PatchCase(
            _INIT
            + """
    def sample_tokens(self, grammar_output):
        if self.debugger is not None:
            self.debugger.stop()
            self.debugger.step()
""",
            refusal="vllm_ascend/worker/model_runner_v1.py: NPUModelRunner.sample_tokens: expected `scheduler_output` bound before every dump stop site, found 1 stop site(s) where it is not bound",
        ),
        # no PrecisionDebugger created in __init__
        PatchCase(
            """\
class NPUModelRunner:
    def __init__(self):
        self.debugger = None

    def execute_model(self, scheduler_output):
        if self.debugger is not None:
            self.debugger.stop()
""",
            refusal="vllm_ascend/worker/model_runner_v1.py: NPUModelRunner.__init__: expected exactly one `self.debugger = PrecisionDebugger(...)`, found 0",
        ),
        # no stop site
        PatchCase(
            _INIT
            + """
    def execute_model(self, scheduler_output):
        return scheduler_output
""",
            refusal="vllm_ascend/worker/model_runner_v1.py: NPUModelRunner: expected at least one dump stop site (`self.debugger.stop()` or `self._finalize_dump_data()`), found none",
        ),
    ]

    def gate(self, target: Target) -> Gate:
        too_old = target.version is not None and target.version < NATIVE_DUMP_FROM
        if too_old or not _has_native_dump(target.root):
            return Gate("not-applicable", NO_DUMP_MESSAGE.format(version=target.version_text))
        return Gate.ok()

    def new_files(self, target: Target) -> list[NewFile]:
        return [NewFile(LOGGER_FILE, DISPATCH_LOGGER_SOURCE)]

    def insertions(self, path: str, module: cst.Module) -> list[Insertion]:
        runner = find_class(module, "NPUModelRunner", path)
        init = find_method(runner, "__init__", path)
        where_init = f"{path}: NPUModelRunner.__init__"
        reset_block, reset = exactly_one(find_statements(init, _DEBUGGER_RESET), where_init, "`self.debugger = None`")
        created_block, created = exactly_one(
            find_statements(init, _DEBUGGER_CREATED), where_init, "`self.debugger = PrecisionDebugger(...)`"
        )
        sites = _stop_sites(runner)
        if not sites:
            raise AnchorError(
                f"{path}: NPUModelRunner",
                "at least one dump stop site (`self.debugger.stop()` or `self._finalize_dump_data()`)",
                "none",
            )
        _require_bound(path, sites)
        edits = [
            Insertion(reset_block, reset, "after", parse_statements(_NO_LOGGER), f"{where_init}: no logger by default"),
            Insertion(created_block, created, "after", parse_statements(_CREATE_LOGGER), f"{where_init}: logger"),
            Insertion(
                body_of(runner),
                init,
                "after",
                blank_line_before(parse_statements(_FINISH_STEP)),
                f"{path}: NPUModelRunner: _finish_msprobe_step after __init__",
            ),
        ]
        edits.extend(
            Insertion(
                block,
                stop,
                "before",
                parse_statements(_HOOK),
                f"{path}: NPUModelRunner.{method.name.value}: stop site {n}",
            )
            for n, (method, block, stop) in enumerate(sites, start=1)
        )
        return edits
