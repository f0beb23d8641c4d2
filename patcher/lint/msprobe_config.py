"""Check an msprobe `config.json` the way mindstudio-probe 26.2 reads it, without importing msprobe.

A bad config.json is found by msprobe only on the cluster, when `PrecisionDebugger(config_path=...)`
runs inside a worker (or, for path rules, at the first dumped step). The rules here mirror what
mindstudio-probe 26.2.0 itself accepts (shared/spec/msprobe-config.md, corrected where msprobe
disagrees; a differential test asks msprobe for hundreds of generated configs):

- RL501 not JSON / unreadable;            - RL502 a field has a value msprobe rejects;
- RL503 a cross-field rule is broken;      - RL504 a path rule is broken;
- RL505 W unknown keys, or a section for another task (msprobe ignores them silently);
- RL506 W a `rank` list that no rank of the run is in (no output at all);
- RL507 consistency mode needs `task: tensor` (statistics: a warning) at level `L0` or `mix`.

msprobe's quirks are followed on purpose: a falsy `task`/`level` means the default
(`statistics`/`L1`), `data_mode: []` means `["all"]`, booleans count as integers in `slice` but not in
`rank`/`step`, and sections of the tasks `structure` and `diff_check` are barely validated.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any

from rlpatch.lint.jsonpos import Document, JsonError, Path, Span, parse

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
MODES = ("training", "inference", "consistency")


@dataclass(frozen=True)
class ConfigFinding:
    """One finding inside a config.json: 1-based positions, `pointer` like `statistics.data_mode[1]`."""

    code: str
    severity: str  # error | warning | info
    message: str
    file: str
    line: int
    column: int
    end_line: int
    end_column: int
    pointer: str = ""


@dataclass
class Options:
    """What the run adds to the file: the dump mode, the world size, whether the target has an NPU."""

    mode: str | None = None  # training | inference | consistency | None (the file alone)
    world_size: int | None = None
    npu: bool | None = None  # None: unknown (the nan_check NPU rule is not checked)


def check_file(path: str | os.PathLike[str], options: Options | None = None) -> list[ConfigFinding]:
    """All findings for the config file at `path` (RL501 when it cannot be read or parsed)."""
    shown = os.fspath(path)
    try:
        raw = FsPath(path).read_bytes()
    except OSError as err:
        return [_file_finding("RL501", f"cannot read the msprobe config: {err.strerror or err}", shown)]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return [_file_finding("RL501", f"the msprobe config is not UTF-8 (byte {err.start})", shown)]
    findings = list(_config_path_findings(shown))
    return findings + check_text(text, shown, options)


def check_text(text: str, file: str = "config.json", options: Options | None = None) -> list[ConfigFinding]:
    """All findings for the config given as text."""
    try:
        document = parse(text)
    except JsonError as err:
        return [ConfigFinding("RL501", "error", f"not JSON: {err.message}", file, err.line, err.column,
                              err.line, err.column + 1)]
    return list(_Checker(document, file, options or Options()).run())


def is_valid(findings: list[ConfigFinding]) -> bool:
    """msprobe's verdict as rlpatch predicts it: no error from RL501-RL504."""
    return not any(f.severity == "error" and f.code in ("RL501", "RL502", "RL503", "RL504") for f in findings)


def _file_finding(code: str, message: str, file: str) -> ConfigFinding:
    return ConfigFinding(code, "error", message, file, 1, 1, 1, 1)


def _config_path_findings(file: str) -> Iterator[ConfigFinding]:
    """msprobe's FileChecker on the config path itself: a `.json` name matching its path pattern."""
    resolved = os.path.realpath(os.path.expanduser(file))
    if not resolved.endswith(".json"):
        yield _file_finding("RL504", "msprobe only reads a config file whose name ends in .json", file)
    if not PATH_PATTERN.match(resolved):
        yield _file_finding("RL504", f"msprobe rejects the config path {resolved!r}: only letters, digits and "
                                     "_ . : / - are allowed", file)


@dataclass
class _Effective:
    """The values msprobe ends up using after its defaults (DebuggerConfig)."""

    task: str = "statistics"
    level: str = "L1"
    section: dict[str, Any] = field(default_factory=dict)


class _Checker:
    """Walks one document; every check yields findings and never stops the others."""

    def __init__(self, document: Document, file: str, options: Options) -> None:
        self.doc = document
        self.file = file
        self.options = options

    def finding(self, code: str, message: str, path: Path = (), key: bool = False, severity: str = "error") -> ConfigFinding:
        span: Span = self.doc.span(path, key)
        return ConfigFinding(code, severity, message, self.file, span.line, span.column, span.end_line,
                             span.end_column, _pointer(path))

    def run(self) -> Iterator[ConfigFinding]:
        config = self.doc.value
        if not isinstance(config, dict):
            yield self.finding("RL502", f"the msprobe config must be a JSON object, not {_kind(config)}")
            return
        effective = _Effective()
        yield from self.top_level(config, effective)
        yield from self.section(config, effective)
        yield from self.cross_field(config, effective)
        yield from self.paths(config)
        yield from self.unknown_keys(config, effective)
        yield from self.run_expectations(config, effective)

    # ---- top level (msprobe CommonConfig)

    def top_level(self, config: dict[str, Any], effective: _Effective) -> Iterator[ConfigFinding]:
        task = config.get("task")
        if task:
            if isinstance(task, str) and task in RETIRED_TASKS:
                yield self.finding("RL502", f"task '{task}' was valid in msprobe {RETIRED_TASKS[task]} and is "
                                            f"rejected by 26.x; use one of {', '.join(TORCH_TASKS[:2])}, ...", ("task",))
            elif task not in TASKS_ACCEPTED or task not in TORCH_TASKS:
                yield self.finding("RL502", f"task must be one of {', '.join(t for t in TORCH_TASKS if t != 'acc_check')}"
                                            f" for PyTorch, not {task!r}", ("task",))
            elif task == "acc_check":
                yield self.finding("RL502", "task 'acc_check' has no PyTorch processor in msprobe 26.2: "
                                            "PrecisionDebugger fails at construction", ("task",))
            effective.task = task if isinstance(task, str) else "statistics"
        level = config.get("level")
        if level:
            if level not in LEVELS:
                yield self.finding("RL502", f"level must be one of {', '.join(LEVELS)}, not {level!r}", ("level",))
            else:
                effective.level = level
        for name in ("rank", "step"):
            yield from self.step_or_rank(config.get(name), (name,))
        dump_path = config.get("dump_path")
        if dump_path is not None and not isinstance(dump_path, str):
            yield self.finding("RL502", f"dump_path must be a string, not {_kind(dump_path)}", ("dump_path",))
        yield from self.booleans(config)
        if "precision" in config and config["precision"] not in PRECISIONS:
            yield self.finding("RL502", f"precision must be 'low' or 'high', not {config['precision']!r}", ("precision",))
        risk = config.get("risk_level")
        if risk and risk not in RISK_LEVELS:
            yield self.finding("RL502", f"risk_level must be one of {', '.join(RISK_LEVELS)}, not {risk!r}",
                               ("risk_level",))
        yield from self.string_list(config, "custom_op_namespaces", ())
        if "load" in config:
            yield from self.load(config.get("load"))

    def booleans(self, config: dict[str, Any]) -> Iterator[ConfigFinding]:
        for name in ("async_dump", "extra_info"):
            if name in config and not isinstance(config[name], bool):
                yield self.finding("RL502", f"{name} must be true or false (JSON booleans), not {config[name]!r}",
                                   (name,))
        enable = config.get("dump_enable")
        if enable is not None and not isinstance(enable, bool):
            yield self.finding("RL502", f"dump_enable must be true, false or absent, not {enable!r}", ("dump_enable",))

    def step_or_rank(self, value: Any, path: Path) -> Iterator[ConfigFinding]:
        name = str(path[-1])
        if value is None:
            return
        if not isinstance(value, list):
            yield self.finding("RL502", f"{name} must be a list (e.g. [0, \"2-3\"]; [] means all), not {_kind(value)}",
                               path)
            return
        if len(value) > STEP_RANK_MAX:
            yield self.finding("RL502", f"{name} has more than {STEP_RANK_MAX} elements", path)
        for index, element in enumerate(value):
            problem = _step_rank_element_problem(element)
            if problem:
                yield self.finding("RL502", f"{name}[{index}] {problem}", path + (index,))

    def string_list(self, container: dict[str, Any], name: str, base: Path) -> Iterator[ConfigFinding]:
        value = container.get(name)
        if value is None:
            return
        if not isinstance(value, list):
            yield self.finding("RL502", f"{name} must be a list of strings, not {_kind(value)}", base + (name,))
            return
        for index, item in enumerate(value):
            if not isinstance(item, str):
                yield self.finding("RL502", f"{name}[{index}] must be a string, not {_kind(item)}", base + (name, index))

    def load(self, load: Any) -> Iterator[ConfigFinding]:
        base: Path = ("load",)
        section = load or {}
        if not isinstance(section, dict):
            yield self.finding("RL502", f"load must be an object, not {_kind(load)}", base)
            return
        modules = section.get("modules")
        if not isinstance(modules, list) or not modules:
            yield self.finding("RL502", "load.modules is required: a non-empty list of 'Module.<name>.forward.<N>'",
                               base + ("modules",) if "modules" in section else base)
        else:
            yield from self.load_modules(modules, base + ("modules",))
        path = section.get("path")
        if not path or not isinstance(path, str) or not os.path.isdir(path):
            yield self.finding("RL504", f"load.path must be an existing directory, not {path!r}",
                               base + ("path",) if "path" in section else base)
        if "dump_after_load" in section and not isinstance(section["dump_after_load"], bool):
            yield self.finding("RL502", "load.dump_after_load must be true or false", base + ("dump_after_load",))
        for name in ("step", "rank"):
            if name in section:
                yield from self.step_or_rank(section[name], base + (name,))

    def load_modules(self, modules: list[Any], path: Path) -> Iterator[ConfigFinding]:
        seen: set[str] = set()
        for index, module in enumerate(modules):
            where = path + (index,)
            if not isinstance(module, str):
                yield self.finding("RL502", "load.modules must hold strings", where)
                continue
            if module in seen:
                yield self.finding("RL502", f"load.modules lists {module!r} twice", where)
            seen.add(module)
            if not module.startswith("Module.") or ".backward." in module or not re.search(r"\.forward\.\d+$", module):
                yield self.finding("RL502", f"load.modules entry {module!r} must look like 'Module.<name>.forward.<N>'",
                                   where)

    # ---- the task section (msprobe BaseConfig and the per-task configs)

    def section(self, config: dict[str, Any], effective: _Effective) -> Iterator[ConfigFinding]:
        task = effective.task
        if task not in TORCH_TASKS or task == "acc_check":
            return
        if task not in config:
            return
        section = config[task]
        base: Path = (task,)
        if not isinstance(section, dict):
            yield self.finding("RL502", f"the '{task}' section must be an object, not {_kind(section)}", base)
            return
        effective.section = section
        if task in ("tensor", "statistics", "nan_check"):
            yield from self.common_section(section, base)
        if task in ("tensor", "statistics"):
            mode = section.get("summary_mode")
            if mode and mode not in SUMMARY_MODES:
                yield self.finding("RL502", f"summary_mode must be one of {', '.join(SUMMARY_MODES)}, not {mode!r}",
                                   base + ("summary_mode",))
        if task in ("statistics", "nan_check"):
            yield from self.string_list(section, "tensor_list", base)
        if task == "diff_check":
            yield from self.diff_nums(section, base)

    def common_section(self, section: dict[str, Any], base: Path) -> Iterator[ConfigFinding]:
        yield from self.string_list(section, "scope", base)
        yield from self.string_list(section, "list", base)
        yield from self.slice(section.get("slice"), base + ("slice",))
        yield from self.data_mode(section.get("data_mode"), base + ("data_mode",))
        request_id = section.get("request_id")
        if request_id is not None and not isinstance(request_id, str):
            yield self.finding("RL502", f"request_id must be a string, not {_kind(request_id)}", base + ("request_id",))

    def slice(self, value: Any, path: Path) -> Iterator[ConfigFinding]:
        if not value:
            return
        if not isinstance(value, list):
            yield self.finding("RL502", f"slice must be a list of {{dim, size, begin, end}} objects, not {_kind(value)}",
                               path)
            return
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                yield self.finding("RL502", f"slice[{index}] must be an object", path + (index,))
                continue
            for key, number in item.items():
                where = path + (index, key)
                if not isinstance(number, int):
                    yield self.finding("RL502", f"slice[{index}].{key} must be an integer, not {_kind(number)}", where)
                elif key in ("dim", "size") and number < 0:
                    yield self.finding("RL502", f"slice[{index}].{key} cannot be negative", where)

    def data_mode(self, value: Any, path: Path) -> Iterator[ConfigFinding]:
        if value is None:
            return
        if not isinstance(value, list):
            yield self.finding("RL502", f"data_mode must be a list such as [\"all\"], not {_kind(value)}", path)
            return
        if "all" in value and len(value) != 1:
            yield self.finding("RL502", "data_mode 'all' must stand alone", path)
        if len(value) >= len(DATA_MODES):
            yield self.finding("RL502", f"data_mode has at most {len(DATA_MODES) - 1} elements", path)
        for index, mode in enumerate(value):
            if not isinstance(mode, str) or mode not in DATA_MODES:
                yield self.finding("RL502", f"data_mode[{index}] must be one of {', '.join(DATA_MODES)}, not {mode!r}",
                                   path + (index,))

    def diff_nums(self, section: dict[str, Any], base: Path) -> Iterator[ConfigFinding]:
        value = section.get("diff_nums")
        if value is None:
            return
        if not _is_int(value) or (value != -1 and value <= 0):
            yield self.finding("RL502", f"diff_nums must be -1 or a positive integer, not {value!r}", base + ("diff_nums",))

    # ---- cross-field rules (msprobe DebuggerConfig)

    def cross_field(self, config: dict[str, Any], effective: _Effective) -> Iterator[ConfigFinding]:
        task, level, section = effective.task, effective.level, effective.section
        lists = section.get("list") or []
        scope = section.get("scope")
        base: Path = (task,)
        if task == "nan_check":
            yield from self.nan_check(section, level)
        if task == "structure" and level not in ("L0", "mix"):
            yield self.finding("RL503", f"task structure runs at level mix, not {level} (msprobe warns and switches)",
                               ("level",) if "level" in config else ("task",), severity="warning")
        if config.get("async_dump") is True:
            if task == "tensor" and level != "debug" and not lists:
                yield self.finding("RL503", "async_dump with task tensor needs a non-empty 'list' of APIs",
                                   ("async_dump",))
            if section.get("summary_mode") == "md5":
                yield self.finding("RL503", "async_dump cannot be combined with summary_mode md5",
                                   base + ("summary_mode",))
        yield from self.scope_range(config, effective)
        if level == "L2" and task != "structure":
            if scope:
                yield self.finding("RL503", "level L2 does not take a scope", base + ("scope",))
            elif not isinstance(lists, list) or len(lists) != 1:
                yield self.finding("RL503", "level L2 needs a 'list' with exactly one API name",
                                   base + ("list",) if "list" in section else ("level",))
            elif task != "tensor":
                yield self.finding("RL503", "level L2 needs task tensor", ("task",) if "task" in config else ("level",))

    def scope_range(self, config: dict[str, Any], effective: _Effective) -> Iterator[ConfigFinding]:
        """msprobe builds its scope filter from `scope` and `list` when the dump service starts."""
        task, section = effective.task, effective.section
        level = "mix" if task == "structure" and effective.level not in ("L0", "mix") else effective.level
        scope, lists = section.get("scope") or [], section.get("list") or []
        if config.get("async_dump") is True and task == "tensor" and level == "debug":
            lists = []  # msprobe drops the list in this combination
        if not scope and not lists:
            return
        base: Path = (task,)
        if task in ("structure", "diff_check"):  # the other tasks' sections were type-checked already
            if not isinstance(lists, list) or not all(isinstance(item, str) for item in lists):
                yield self.finding("RL502", "list must be a list of strings", base + ("list",))
            scope = [scope] if isinstance(scope, str) else scope
            if not isinstance(scope, list) or not all(isinstance(item, str) for item in scope):
                yield self.finding("RL502", "scope must be a list of strings", base + ("scope",))
                return
        if not isinstance(scope, list) or not all(isinstance(item, str) for item in scope) or not scope:
            return
        where = base + ("scope",)
        if len(scope) != 2:
            yield self.finding("RL503", f"scope is a range: exactly two names [first, last], not {len(scope)}", where)
            return
        for index, name in enumerate(scope):
            problem = _scope_name_problem(name, level)
            if problem:
                yield self.finding("RL503", f"scope[{index}] {problem}", where + (index,))
                return
        kinds = {name.split(".")[0] in MODULE_PREFIXES for name in scope}
        if level != "mix" and len(kinds) == 2:
            yield self.finding("RL503", f"at level {level} a scope range cannot mix a module name and an API name",
                               where)

    def nan_check(self, section: dict[str, Any], level: str) -> Iterator[ConfigFinding]:
        if self.options.npu is False:
            yield self.finding("RL503", "task nan_check needs an NPU (torch_npu)", ("task",))
        if level != "L1":
            yield self.finding("RL503", f"task nan_check needs level L1, not {level}", ("level",))
        modes = section.get("data_mode") or ["all"]
        if isinstance(modes, list) and "input" in modes and "output" not in modes and "all" not in modes:
            yield self.finding("RL503", "task nan_check checks outputs: an input-only data_mode is rejected",
                               ("nan_check", "data_mode"))

    # ---- paths (msprobe's check before it creates the dump directory)

    def paths(self, config: dict[str, Any]) -> Iterator[ConfigFinding]:
        dump_path = config.get("dump_path")
        if not dump_path:
            if self.options.mode is None and not _load_only(config):
                where: Path = ("dump_path",) if "dump_path" in config else ()
                yield self.finding("RL504", "dump_path is required (msprobe: \"The dump_path not found\")", where)
            return
        if not isinstance(dump_path, str):
            return
        problem = dump_path_problem(dump_path)
        if problem:
            yield self.finding("RL504", problem, ("dump_path",))
        elif not os.path.isabs(os.path.expanduser(dump_path)):
            yield self.finding("RL504", f"dump_path {dump_path!r} is relative: it resolves against each worker's "
                                        "working directory", ("dump_path",), severity="warning")

    # ---- warnings about keys msprobe ignores

    def unknown_keys(self, config: dict[str, Any], effective: _Effective) -> Iterator[ConfigFinding]:
        for key in config:
            if key not in TOP_LEVEL_KEYS:
                hint = _close(key, TOP_LEVEL_KEYS)
                yield self.finding("RL505", f"msprobe ignores the unknown key {key!r}{hint}", (key,), key=True,
                                   severity="warning")
            elif key in TASKS_ACCEPTED and key != effective.task:
                yield self.finding("RL505", f"the '{key}' section is ignored: the task is '{effective.task}'"
                                            f"{' (the default)' if not config.get('task') else ''}",
                                   (key,), key=True, severity="warning")
        known = SECTION_KEYS.get(effective.task, frozenset())
        section = config.get(effective.task)
        if isinstance(section, dict):
            for key in section:
                if key not in known:
                    yield self.finding("RL505", f"the '{effective.task}' section does not use {key!r}"
                                                f"{_close(key, known)}", (effective.task, key), key=True,
                                       severity="warning")

    # ---- what the run needs from the file

    def run_expectations(self, config: dict[str, Any], effective: _Effective) -> Iterator[ConfigFinding]:
        yield from self.rank_coverage(config.get("rank"))
        if self.options.mode == "consistency":
            if effective.task == "statistics":  # accepted by compare --consistent_check, at a cost
                yield self.finding("RL507", "task statistics: msprobe compare --consistent_check compares only each "
                                   "tensor's summary (max, min, mean, norm), not its elements, so small element-wise "
                                   "differences go unseen; task tensor at level L0 matches best",
                                   ("task",) if "task" in config else (), severity="warning")
            elif effective.task != "tensor":
                yield self.finding("RL507", "consistency comparison (msprobe compare --consistent_check) needs "
                                            f"task tensor, not {effective.task}", ("task",) if "task" in config else ())
            if effective.level not in ("L0", "mix"):
                yield self.finding("RL507", f"consistency comparison needs level L0 or mix, not {effective.level}",
                                   ("level",) if "level" in config else ())

    def rank_coverage(self, ranks: Any) -> Iterator[ConfigFinding]:
        world = self.options.world_size
        if not world or not isinstance(ranks, list) or not ranks:
            return
        listed = set()
        for element in ranks:
            if _step_rank_element_problem(element):
                return
            listed.update(_expand(element))
        if not any(rank < world for rank in listed):
            yield self.finding("RL506", f"no rank in 'rank' exists in this run (ranks 0-{world - 1}): msprobe dumps "
                                        "nothing at all", ("rank",), severity="warning")


def dump_path_problem(dump_path: str) -> str | None:
    """msprobe's check before it creates the dump directory: length and allowed characters."""
    expanded = os.path.normpath(os.path.expanduser(dump_path))
    if len(os.path.abspath(expanded)) > PATH_MAX:
        return f"dump_path is longer than {PATH_MAX} characters"
    if any(len(name) > NAME_MAX for name in expanded.split(os.sep)):
        return f"a name in dump_path is longer than {NAME_MAX} characters"
    if not PATH_PATTERN.match(expanded):
        bad = sorted({char for char in expanded if not PATH_PATTERN.match(char)})
        return (f"dump_path may hold only letters, digits and _ . : / - (msprobe refuses to create it); "
                f"found {' '.join(repr(char) for char in bad)}")
    return None


def _scope_name_problem(name: str, level: str) -> str | None:
    if level == "L1" and not API_NAME.match(name):
        return f"must be a full API name such as 'Functional.relu.0.forward' at level L1, not {name!r}"
    if level == "L0" and not MODULE_NAME.match(name):
        return f"must be a full module name such as 'Module.layer.Linear.forward.0' at level L0, not {name!r}"
    if level == "mix" and not API_NAME.match(name) and not MODULE_NAME.match(name):
        return f"must be a full API or module name at level mix, not {name!r}"
    return None


def _load_only(config: dict[str, Any]) -> bool:
    load = config.get("load")
    return "load" in config and isinstance(load, dict) and not load.get("dump_after_load", False)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _step_rank_element_problem(element: Any) -> str | None:
    """None when msprobe accepts the element: an int in range, or a string "N" / "A-B" with A <= B."""
    if _is_int(element):
        return None if 0 <= element <= STEP_RANK_MAX else f"must be between 0 and {STEP_RANK_MAX}, not {element}"
    if not isinstance(element, str):
        return f"must be an integer or a string like \"3\" or \"3-5\", not {_kind(element)}"
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


def _expand(element: int | str) -> range:
    if isinstance(element, int):
        return range(element, element + 1)
    bounds = [int(part) for part in element.split("-")]
    return range(bounds[0], bounds[-1] + 1)


def _kind(value: Any) -> str:
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


def _pointer(path: Path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _close(word: str, candidates: frozenset[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
