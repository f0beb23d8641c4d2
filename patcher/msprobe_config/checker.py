"""Check an msprobe `config.json` the way mindstudio-probe 26.2 reads it, without importing msprobe.

A bad config.json is found by msprobe only on the cluster, when `PrecisionDebugger(config_path=...)`
runs inside a worker (or, for path rules, at the first dumped step). The checks here mirror what
mindstudio-probe 26.2.0 itself accepts (a differential test asks msprobe for hundreds of generated
configs), and each finding says its kind (`Problem`):

- UNREADABLE: not JSON / unreadable (NOT_CHECKED: too large or too deep to check here);
- REJECTED_VALUE: a field has a value msprobe rejects;
- REJECTED_COMBINATION: a cross-field rule is broken;
- REJECTED_PATH: a path rule is broken (NO_DUMP_PATH, RELATIVE_DUMP_PATH: the path rules' notes);
- IGNORED_KEY (a warning): unknown keys, or a section for another task (msprobe ignores them silently);
- RANK_OUTSIDE_RUN (a warning): a `rank` list that no rank of the run is in (no output at all);
- TASK_UNFIT_FOR_CONSISTENCY: consistency mode needs `task: tensor` (statistics: a warning).

msprobe's quirks are followed on purpose: a falsy `task`/`level` means the default
(`statistics`/`L1`), `data_mode: []` means `["all"]`, booleans count as integers in `slice` but not in
`rank`/`step`, and sections of the tasks `structure` and `diff_check` are barely validated.

This module is the entry (`check_file`, `check_bytes`, `check_text`, `is_valid`), reads the file
(UNREADABLE, and REJECTED_PATH on the config's own path) and checks each value of the top level and
of the task section (REJECTED_VALUE), which settles the effective task and level; `cross_checks`
holds the checks beyond one value and `schema` the vocabulary msprobe accepts and the records.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

from rlpatch.errors import InputError
from rlpatch.msprobe_config.api import Problem
from rlpatch.msprobe_config.cross_checks import CrossChecks
from rlpatch.msprobe_config.jsonpos import JsonError, Path, parse
from rlpatch.msprobe_config.schema import (
    DATA_MODES,
    LEVELS,
    PATH_PATTERN,
    PRECISIONS,
    RETIRED_TASKS,
    RISK_LEVELS,
    STEP_RANK_MAX,
    SUMMARY_MODES,
    TASKS_ACCEPTED,
    TORCH_TASKS,
    CheckOptions,
    ConfigFinding,
    Effective,
    is_int,
    kind,
    step_rank_element_problem,
)
from rlpatch.shell.api import InputTooLarge, read_regular

# msprobe configs are a few KB (a long `list` of API names: tens of KB). Reading, parsing and
# walking 1 MB takes a fifth of a second; a 100 MB "config" would take minutes, so it is refused
# before it is parsed (msprobe itself would read it: a warning, not an error).
MAX_CONFIG_BYTES = 1024 * 1024


def read_config(path: str) -> bytes:
    """The bytes of a config file: a regular file of at most MAX_CONFIG_BYTES, else InputError."""
    return read_regular(path, MAX_CONFIG_BYTES, "an msprobe config")


def check_file(path: str | os.PathLike[str], options: CheckOptions | None = None) -> list[ConfigFinding]:
    """All findings for the config file at `path` (UNREADABLE when it cannot be read or parsed;
    NOT_CHECKED, a warning, when it is over MAX_CONFIG_BYTES: not read, so not checked)."""
    shown = os.fspath(path)
    try:
        raw = read_config(shown)
    except InputError as err:
        message = err.message.removeprefix(f"{shown}: ")
        if isinstance(err, InputTooLarge):
            return [ConfigFinding(Problem.NOT_CHECKED, "warning", f"not checked: {message}", shown, 1, 1, 1, 1)]
        return [_file_finding(Problem.UNREADABLE, f"cannot read the msprobe config: {message}", shown)]
    return check_bytes(raw, shown, options)


def check_bytes(raw: bytes, path: str, options: CheckOptions | None = None) -> list[ConfigFinding]:
    """All findings for a config file's bytes (`path` names it, and msprobe checks that path too)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return [_file_finding(Problem.UNREADABLE, f"the msprobe config is not UTF-8 (byte {err.start})", path)]
    findings = list(_config_path_findings(path))
    return findings + check_text(text, path, options)


def check_text(text: str, file: str = "config.json", options: CheckOptions | None = None) -> list[ConfigFinding]:
    """All findings for the config given as text."""
    try:
        document = parse(text)
    except JsonError as err:
        return [ConfigFinding(Problem.UNREADABLE, "error", f"not JSON: {err.message}", file, err.line, err.column,
                              err.line, err.column + 1)]
    try:
        return list(_Checker(document, file, options or CheckOptions()).run())
    except RecursionError:  # a value nested near Python's limit, shown in a message (repr)
        return [ConfigFinding(Problem.NOT_CHECKED, "warning", "not checked: values nested too deeply to check", file,
                              1, 1, 1, 1)]


def is_valid(findings: list[ConfigFinding]) -> bool:
    """msprobe's verdict as rlpatch predicts it: no error of a kind that stops msprobe."""
    return not any(f.severity == "error" and f.problem.refused_by_msprobe for f in findings)


def _file_finding(problem: Problem, message: str, file: str) -> ConfigFinding:
    return ConfigFinding(problem, "error", message, file, 1, 1, 1, 1)


def _config_path_findings(file: str) -> Iterator[ConfigFinding]:
    """msprobe's FileChecker on the config path itself: a `.json` name matching its path pattern."""
    resolved = os.path.realpath(os.path.expanduser(file))
    if not resolved.endswith(".json"):
        yield _file_finding(Problem.REJECTED_PATH, "msprobe only reads a config file whose name ends in .json", file)
    if not PATH_PATTERN.match(resolved):
        yield _file_finding(Problem.REJECTED_PATH, f"msprobe rejects the config path {resolved!r}: only letters, "
                            "digits and _ . : / - are allowed", file)


class _Checker(CrossChecks):
    """Walks one document: the value checks of the top level and of the task section (REJECTED_VALUE)
    here, the checks beyond one value in `CrossChecks`."""

    def run(self) -> Iterator[ConfigFinding]:
        config = self.doc.value
        if not isinstance(config, dict):
            yield self.rejected(f"the msprobe config must be a JSON object, not {kind(config)}")
            return
        effective = Effective()
        yield from self.top_level(config, effective)
        yield from self.section(config, effective)
        yield from self.cross_field(config, effective)
        yield from self.paths(config)
        yield from self.unknown_keys(config, effective)
        yield from self.run_expectations(config, effective)

    # ---- top level (msprobe CommonConfig)

    def top_level(self, config: dict[str, Any], effective: Effective) -> Iterator[ConfigFinding]:
        task = config.get("task")
        if task:
            if isinstance(task, str) and task in RETIRED_TASKS:
                yield self.rejected(f"task '{task}' was valid in msprobe {RETIRED_TASKS[task]} and is "
                                    f"rejected by 26.x; use one of {', '.join(TORCH_TASKS[:2])}, ...", ("task",))
            elif task not in TASKS_ACCEPTED or task not in TORCH_TASKS:
                yield self.rejected(f"task must be one of {', '.join(t for t in TORCH_TASKS if t != 'acc_check')}"
                                    f" for PyTorch, not {task!r}", ("task",))
            elif task == "acc_check":
                yield self.rejected("task 'acc_check' has no PyTorch processor in msprobe 26.2: "
                                    "PrecisionDebugger fails at construction", ("task",))
            effective.task = task if isinstance(task, str) else "statistics"
        level = config.get("level")
        if level:
            if level not in LEVELS:
                yield self.rejected(f"level must be one of {', '.join(LEVELS)}, not {level!r}", ("level",))
            else:
                effective.level = level
        for name in ("rank", "step"):
            yield from self.step_or_rank(config.get(name), (name,))
        dump_path = config.get("dump_path")
        if dump_path is not None and not isinstance(dump_path, str):
            yield self.rejected(f"dump_path must be a string, not {kind(dump_path)}", ("dump_path",))
        yield from self.booleans(config)
        if "precision" in config and config["precision"] not in PRECISIONS:
            yield self.rejected(f"precision must be 'low' or 'high', not {config['precision']!r}", ("precision",))
        risk = config.get("risk_level")
        if risk and risk not in RISK_LEVELS:
            yield self.rejected(f"risk_level must be one of {', '.join(RISK_LEVELS)}, not {risk!r}",
                                ("risk_level",))
        yield from self.string_list(config, "custom_op_namespaces", ())
        if "load" in config:
            yield from self.load(config.get("load"))

    def booleans(self, config: dict[str, Any]) -> Iterator[ConfigFinding]:
        for name in ("async_dump", "extra_info"):
            if name in config and not isinstance(config[name], bool):
                yield self.rejected(f"{name} must be true or false (JSON booleans), not {config[name]!r}",
                                    (name,))
        enable = config.get("dump_enable")
        if enable is not None and not isinstance(enable, bool):
            yield self.rejected(f"dump_enable must be true, false or absent, not {enable!r}", ("dump_enable",))

    def step_or_rank(self, value: Any, path: Path) -> Iterator[ConfigFinding]:
        name = str(path[-1])
        if value is None:
            return
        if not isinstance(value, list):
            yield self.rejected(f"{name} must be a list (e.g. [0, \"2-3\"]; [] means all), not {kind(value)}",
                                path)
            return
        if len(value) > STEP_RANK_MAX:
            yield self.rejected(f"{name} has more than {STEP_RANK_MAX} elements", path)
        for index, element in enumerate(value):
            problem = step_rank_element_problem(element)
            if problem:
                yield self.rejected(f"{name}[{index}] {problem}", path + (index,))

    def string_list(self, container: dict[str, Any], name: str, base: Path) -> Iterator[ConfigFinding]:
        value = container.get(name)
        if value is None:
            return
        if not isinstance(value, list):
            yield self.rejected(f"{name} must be a list of strings, not {kind(value)}", base + (name,))
            return
        for index, item in enumerate(value):
            if not isinstance(item, str):
                yield self.rejected(f"{name}[{index}] must be a string, not {kind(item)}", base + (name, index))

    def load(self, load: Any) -> Iterator[ConfigFinding]:
        base: Path = ("load",)
        section = load or {}
        if not isinstance(section, dict):
            yield self.rejected(f"load must be an object, not {kind(load)}", base)
            return
        modules = section.get("modules")
        if not isinstance(modules, list) or not modules:
            yield self.rejected("load.modules is required: a non-empty list of 'Module.<name>.forward.<N>'",
                                base + ("modules",) if "modules" in section else base)
        else:
            yield from self.load_modules(modules, base + ("modules",))
        path = section.get("path")
        if not path or not isinstance(path, str) or not os.path.isdir(path):
            yield self.finding(Problem.REJECTED_PATH, f"load.path must be an existing directory, not {path!r}",
                               base + ("path",) if "path" in section else base)
        if "dump_after_load" in section and not isinstance(section["dump_after_load"], bool):
            yield self.rejected("load.dump_after_load must be true or false", base + ("dump_after_load",))
        for name in ("step", "rank"):
            if name in section:
                yield from self.step_or_rank(section[name], base + (name,))

    def load_modules(self, modules: list[Any], path: Path) -> Iterator[ConfigFinding]:
        seen: set[str] = set()
        for index, module in enumerate(modules):
            where = path + (index,)
            if not isinstance(module, str):
                yield self.rejected("load.modules must hold strings", where)
                continue
            if module in seen:
                yield self.rejected(f"load.modules lists {module!r} twice", where)
            seen.add(module)
            if not module.startswith("Module.") or ".backward." in module or not re.search(r"\.forward\.\d+$", module):
                yield self.rejected(f"load.modules entry {module!r} must look like 'Module.<name>.forward.<N>'",
                                    where)

    # ---- the task section (msprobe BaseConfig and the per-task configs)

    def section(self, config: dict[str, Any], effective: Effective) -> Iterator[ConfigFinding]:
        task = effective.task
        if task not in TORCH_TASKS or task == "acc_check":
            return
        if task not in config:
            return
        section = config[task]
        base: Path = (task,)
        if not isinstance(section, dict):
            yield self.rejected(f"the '{task}' section must be an object, not {kind(section)}", base)
            return
        effective.section = section
        if task in ("tensor", "statistics", "nan_check"):
            yield from self.common_section(section, base)
        if task in ("tensor", "statistics"):
            mode = section.get("summary_mode")
            if mode and mode not in SUMMARY_MODES:
                yield self.rejected(f"summary_mode must be one of {', '.join(SUMMARY_MODES)}, not {mode!r}",
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
            yield self.rejected(f"request_id must be a string, not {kind(request_id)}", base + ("request_id",))

    def slice(self, value: Any, path: Path) -> Iterator[ConfigFinding]:
        if not value:
            return
        if not isinstance(value, list):
            yield self.rejected(f"slice must be a list of {{dim, size, begin, end}} objects, not {kind(value)}",
                                path)
            return
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                yield self.rejected(f"slice[{index}] must be an object", path + (index,))
                continue
            for key, number in item.items():
                where = path + (index, key)
                if not isinstance(number, int):
                    yield self.rejected(f"slice[{index}].{key} must be an integer, not {kind(number)}", where)
                elif key in ("dim", "size") and number < 0:
                    yield self.rejected(f"slice[{index}].{key} cannot be negative", where)

    def data_mode(self, value: Any, path: Path) -> Iterator[ConfigFinding]:
        if value is None:
            return
        if not isinstance(value, list):
            yield self.rejected(f"data_mode must be a list such as [\"all\"], not {kind(value)}", path)
            return
        if "all" in value and len(value) != 1:
            yield self.rejected("data_mode 'all' must stand alone", path)
        if len(value) >= len(DATA_MODES):
            yield self.rejected(f"data_mode has at most {len(DATA_MODES) - 1} elements", path)
        for index, mode in enumerate(value):
            if not isinstance(mode, str) or mode not in DATA_MODES:
                yield self.rejected(f"data_mode[{index}] must be one of {', '.join(DATA_MODES)}, not {mode!r}",
                                    path + (index,))

    def diff_nums(self, section: dict[str, Any], base: Path) -> Iterator[ConfigFinding]:
        value = section.get("diff_nums")
        if value is None:
            return
        if not is_int(value) or (value != -1 and value <= 0):
            yield self.rejected(f"diff_nums must be -1 or a positive integer, not {value!r}", base + ("diff_nums",))
