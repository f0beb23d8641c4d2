"""What mindstudio-probe 26.2 accepts in a `config.json`, and the walker every check uses.

The vocabulary msprobe validates against (tasks, levels, precisions, summary and data modes, the
keys of the top level and of each task section, the full API/module name patterns of a scope, the
path pattern and limits), the records of a check (`ConfigFinding`, what the run adds in
`CheckOptions`, the `Effective` task/level/section after msprobe's defaults), `ConfigWalker` (one
document, one file: turns a JSON path into a positioned finding of one `Problem` kind), and the
element checks both the value checks (`checker`) and the checks beyond one value (`cross_checks`)
share. Nothing here imports msprobe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from rlpatch.msprobe_config.api import Problem
from rlpatch.msprobe_config.jsonpos import Document, Path, Span

Severity = Literal["error", "warning", "info"]

TASKS_ACCEPTED = ("tensor", "statistics", "acc_check", "structure", "diff_check", "exception_dump", "nan_check")
TORCH_TASKS = ("tensor", "statistics", "acc_check", "structure", "diff_check", "nan_check")
LEVELS = ("L0", "L1", "L2", "mix", "debug")
PRECISIONS = ("low", "high")
RISK_LEVELS = ("CORE", "FOCUS", "ALL")
SUMMARY_MODES = ("statistics", "md5", "xor")
DATA_MODES = ("all", "input", "output", "forward", "backward")
STEP_RANK_MAX = 1_000_000
PATH_PATTERN = re.compile(r"^[a-zA-Z0-9_.:/-]+$")
PATH_MAX = 4096
NAME_MAX = 255
RETIRED_TASKS = {"overflow_check": "8.x", "free_benchmark": "8.x"}
# scope is a range [first, last] of full names: API names at L1, module names at L0, either at mix.
API_PREFIXES = ("Distributed", "Functional", "Torch", "Tensor", "Mint", "MintFunctional", "Primitive", "Aten", "VF",
                "NPU", "Jit")
MODULE_PREFIXES = ("Module", "Cell")
API_NAME = re.compile(rf"^({'|'.join(API_PREFIXES)})\..*\.\d+\.(forward|backward)$")
MODULE_NAME = re.compile(r"^(Cell|Module)\..*\.(forward|backward)\.\d+$")

TOP_LEVEL_KEYS = frozenset(
    {"task", "dump_path", "rank", "step", "level", "async_dump", "extra_info", "dump_enable", "precision",
     "risk_level", "custom_op_namespaces", "load", "is_deterministic", "enable_dataloader", "acl_config"}
    | set(TASKS_ACCEPTED) | set(RETIRED_TASKS)
)
SECTION_KEYS: dict[str, frozenset[str]] = {
    "tensor": frozenset({"scope", "list", "data_mode", "summary_mode", "slice", "request_id", "bench_path",
                         "file_format", "online_run_ut", "nfs_path", "host", "port"}),
    "statistics": frozenset({"scope", "list", "data_mode", "summary_mode", "tensor_list", "slice", "request_id"}),
    "nan_check": frozenset({"scope", "list", "data_mode", "tensor_list"}),
    "diff_check": frozenset({"scope", "list", "data_mode", "diff_nums"}),
    "structure": frozenset({"scope", "list", "data_mode"}),
    "acc_check": frozenset({"white_list", "black_list", "error_data_path", "scope", "list", "data_mode"}),
}


@dataclass(frozen=True)
class ConfigFinding:
    """One finding inside a config.json: its kind, 1-based positions, `pointer` like `statistics.data_mode[1]`."""

    problem: Problem
    severity: Severity
    message: str
    file: str
    line: int
    column: int
    end_line: int
    end_column: int
    pointer: str = ""


@dataclass(frozen=True)
class CheckOptions:
    """What the run adds to the file: the dump mode, the world size, the training backend, whether the
    target has an NPU (all None: the file alone)."""

    mode: str | None = None  # training | inference | consistency | None (the file alone)
    world_size: int | None = None
    backend: str | None = None  # fsdp | megatron | None (unknown)
    npu: bool | None = None  # None: unknown (the nan_check NPU rule is not checked)


@dataclass
class Effective:
    """The values msprobe ends up using after its defaults (DebuggerConfig)."""

    task: str = "statistics"
    level: str = "L1"
    section: dict[str, Any] = field(default_factory=dict)


class ConfigWalker:
    """One document of one file: every check yields findings positioned in it and never stops the others."""

    def __init__(self, document: Document, file: str, options: CheckOptions) -> None:
        self.doc = document
        self.file = file
        self.options = options

    def finding(self, problem: Problem, message: str, path: Path = (), key: bool = False,
                severity: Severity = "error") -> ConfigFinding:
        span: Span = self.doc.span(path, key)
        return ConfigFinding(problem, severity, message, self.file, span.line, span.column, span.end_line,
                             span.end_column, pointer(path))

    def rejected(self, message: str, path: Path = ()) -> ConfigFinding:
        """A value msprobe rejects: the commonest finding, an error."""
        return self.finding(Problem.REJECTED_VALUE, message, path)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def step_rank_element_problem(element: Any) -> str | None:
    """None when msprobe accepts the element: an int in range, or a string "N" / "A-B" with A <= B."""
    if is_int(element):
        return None if 0 <= element <= STEP_RANK_MAX else f"must be between 0 and {STEP_RANK_MAX}, not {element}"
    if not isinstance(element, str):
        return f"must be an integer or a string like \"3\" or \"3-5\", not {kind(element)}"
    parts = element.split("-")
    try:
        bounds = [int(part) for part in parts]
    except ValueError:
        bounds = []
    if len(parts) > 2 or len(bounds) != len(parts):
        return f"must look like \"3\" or \"3-5\", not {element!r}"
    if not all(0 <= bound <= STEP_RANK_MAX for bound in bounds):
        return f"must be between 0 and {STEP_RANK_MAX}: {element!r}"
    if bounds[0] > bounds[-1]:
        return f"range {element!r} runs backwards"
    return None


def kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    return "an object"


def pointer(path: Path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
