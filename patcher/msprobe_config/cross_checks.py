"""The msprobe config checks beyond one field's value, as `CrossChecks`.

Once the value checks of `checker` have established the effective task, level and task section,
these checks follow what msprobe does later: the cross-field rules of its DebuggerConfig and the
scope range it builds when the dump service starts (REJECTED_COMBINATION), its path rules before it
creates the dump directory (REJECTED_PATH, with NO_DUMP_PATH and RELATIVE_DUMP_PATH), the keys and
sections it silently ignores (IGNORED_KEY), and what the run needs from the file: a `rank` list that
meets the run's world size (RANK_OUTSIDE_RUN) and the task a consistency comparison needs
(TASK_UNFIT_FOR_CONSISTENCY).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from rlpatch.msprobe_config.api import Problem
from rlpatch.msprobe_config.jsonpos import Path
from rlpatch.msprobe_config.schema import (
    API_NAME,
    MODULE_NAME,
    MODULE_PREFIXES,
    NAME_MAX,
    PATH_MAX,
    PATH_PATTERN,
    SECTION_KEYS,
    TASKS_ACCEPTED,
    TOP_LEVEL_KEYS,
    ConfigFinding,
    ConfigWalker,
    Effective,
    step_rank_element_problem,
)


class CrossChecks(ConfigWalker):
    """The checks beyond one value of one document (mixed into the checker of `checker`)."""

    # ---- cross-field rules (msprobe DebuggerConfig)

    def cross_field(self, config: dict[str, Any], effective: Effective) -> Iterator[ConfigFinding]:
        task, level, section = effective.task, effective.level, effective.section
        lists = section.get("list") or []
        scope = section.get("scope")
        base: Path = (task,)
        both = Problem.REJECTED_COMBINATION
        if task == "nan_check":
            yield from self.nan_check(section, level)
        if task == "structure" and level not in ("L0", "mix"):
            yield self.finding(both, f"task structure runs at level mix, not {level} (msprobe warns and switches)",
                               ("level",) if "level" in config else ("task",), severity="warning")
        if config.get("async_dump") is True:
            if task == "tensor" and level != "debug" and not lists:
                yield self.finding(both, "async_dump with task tensor needs a non-empty 'list' of APIs",
                                   ("async_dump",))
            if section.get("summary_mode") == "md5":
                yield self.finding(both, "async_dump cannot be combined with summary_mode md5",
                                   base + ("summary_mode",))
        yield from self.scope_range(config, effective)
        if level == "L2" and task != "structure":
            if scope:
                yield self.finding(both, "level L2 does not take a scope", base + ("scope",))
            elif not isinstance(lists, list) or len(lists) != 1:
                yield self.finding(both, "level L2 needs a 'list' with exactly one API name",
                                   base + ("list",) if "list" in section else ("level",))
            elif task != "tensor":
                yield self.finding(both, "level L2 needs task tensor", ("task",) if "task" in config else ("level",))

    def scope_range(self, config: dict[str, Any], effective: Effective) -> Iterator[ConfigFinding]:
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
                yield self.rejected("list must be a list of strings", base + ("list",))
            scope = [scope] if isinstance(scope, str) else scope
            if not isinstance(scope, list) or not all(isinstance(item, str) for item in scope):
                yield self.rejected("scope must be a list of strings", base + ("scope",))
                return
        if not isinstance(scope, list) or not all(isinstance(item, str) for item in scope) or not scope:
            return
        where = base + ("scope",)
        both = Problem.REJECTED_COMBINATION
        if len(scope) != 2:
            yield self.finding(both, f"scope is a range: exactly two names [first, last], not {len(scope)}", where)
            return
        for index, name in enumerate(scope):
            problem = _scope_name_problem(name, level)
            if problem:
                yield self.finding(both, f"scope[{index}] {problem}", where + (index,))
                return
        kinds = {name.split(".")[0] in MODULE_PREFIXES for name in scope}
        if level != "mix" and len(kinds) == 2:
            yield self.finding(both, f"at level {level} a scope range cannot mix a module name and an API name", where)

    def nan_check(self, section: dict[str, Any], level: str) -> Iterator[ConfigFinding]:
        both = Problem.REJECTED_COMBINATION
        if self.options.npu is False:
            yield self.finding(both, "task nan_check needs an NPU (torch_npu)", ("task",))
        if level != "L1":
            yield self.finding(both, f"task nan_check needs level L1, not {level}", ("level",))
        modes = section.get("data_mode") or ["all"]
        if isinstance(modes, list) and "input" in modes and "output" not in modes and "all" not in modes:
            yield self.finding(both, "task nan_check checks outputs: an input-only data_mode is rejected",
                               ("nan_check", "data_mode"))

    # ---- paths (msprobe's check before it creates the dump directory)

    def paths(self, config: dict[str, Any]) -> Iterator[ConfigFinding]:
        dump_path = config.get("dump_path")
        if not dump_path:
            if self.options.mode is None and not _load_only(config):
                where: Path = ("dump_path",) if "dump_path" in config else ()
                # Alone, the file cannot say who reads it: verl's precision_debugger tool (training
                # mode) passes its own dump_path and overrides the file's (verl 0.8.0 to 0.9.1), so
                # there the file must not set one; every other reader needs it.
                yield self.finding(Problem.NO_DUMP_PATH, "no dump_path: right for verl's precision_debugger tool "
                                   "(training mode: verl passes its own), refused by msprobe anywhere else (\"The "
                                   "dump_path not found\")", where, severity="info")
            return
        if not isinstance(dump_path, str):
            return
        problem = dump_path_problem(dump_path)
        if problem:
            yield self.finding(Problem.REJECTED_PATH, problem, ("dump_path",))
        elif not os.path.isabs(os.path.expanduser(dump_path)):
            yield self.finding(Problem.RELATIVE_DUMP_PATH, f"dump_path {dump_path!r} is relative: it resolves against "
                               "each worker's working directory", ("dump_path",), severity="warning")

    # ---- warnings about keys msprobe ignores

    def unknown_keys(self, config: dict[str, Any], effective: Effective) -> Iterator[ConfigFinding]:
        ignored = Problem.IGNORED_KEY
        for key in config:
            if key not in TOP_LEVEL_KEYS:
                hint = _close(key, TOP_LEVEL_KEYS)
                yield self.finding(ignored, f"msprobe ignores the unknown key {key!r}{hint}", (key,), key=True,
                                   severity="warning")
            elif key in TASKS_ACCEPTED and key != effective.task:
                yield self.finding(ignored, f"the '{key}' section is ignored: the task is '{effective.task}'"
                                            f"{' (the default)' if not config.get('task') else ''}",
                                   (key,), key=True, severity="warning")
        known = SECTION_KEYS.get(effective.task, frozenset())
        section = config.get(effective.task)
        if isinstance(section, dict):
            for key in section:
                if key not in known:
                    yield self.finding(ignored, f"the '{effective.task}' section does not use {key!r}"
                                                f"{_close(key, known)}", (effective.task, key), key=True,
                                       severity="warning")

    # ---- what the run needs from the file

    def run_expectations(self, config: dict[str, Any], effective: Effective) -> Iterator[ConfigFinding]:
        yield from self.rank_coverage(config.get("rank"))
        if self.options.mode == "consistency":
            yield from self.consistency_task(config, effective)

    def consistency_task(self, config: dict[str, Any], effective: Effective) -> Iterator[ConfigFinding]:
        """The task a consistency comparison needs (its level is the linter's to check): measured with
        msprobe 26.2.0 on real dumps of twin models, a statistics dump cannot compare FSDP's training
        q/k/v (or gate/up) with vLLM's fused qkv_proj (gate_up_proj): msprobe joins the training tensors
        only in tensor dumps, and the summaries of the separate tensors are marked "The shape of NPU and
        Bench are inconsistent". Megatron names are fused on both sides, so statistics compares there,
        summaries only."""
        at = ("task",) if "task" in config else ()
        unfit = Problem.TASK_UNFIT_FOR_CONSISTENCY
        summaries = ("task statistics: msprobe compare --consistent_check compares only each tensor's summary (max, "
                     "min, mean, norm), not its elements, so small element-wise differences go unseen")
        if effective.task == "statistics" and self.options.backend == "megatron":
            yield self.finding(unfit, f"{summaries}; task tensor matches best", at, severity="warning")
        elif effective.task == "statistics" and self.options.backend is None:  # the file alone
            yield self.finding(unfit, f"{summaries}, and on an FSDP run the q/k/v and gate/up rows cannot be "
                               "compared at all (msprobe joins them only in tensor dumps); task tensor matches best",
                               at, severity="warning")
        elif effective.task == "statistics":
            yield self.finding(unfit, "task statistics cannot compare an FSDP consistency run: msprobe joins the "
                               "training q/k/v and gate/up outputs into vLLM's fused qkv_proj/gate_up_proj only in "
                               "tensor dumps (statistics rows are shape errors); set \"task\": \"tensor\"", at)
        elif effective.task != "tensor":
            yield self.finding(unfit, "consistency comparison (msprobe compare --consistent_check) needs "
                                      f"task tensor, not {effective.task}", at)

    def rank_coverage(self, ranks: Any) -> Iterator[ConfigFinding]:
        world = self.options.world_size
        if not world or not isinstance(ranks, list) or not ranks:
            return
        listed: set[int] = set()
        for element in ranks:
            if step_rank_element_problem(element):
                return
            listed.update(_expand(element))
        if not any(rank < world for rank in listed):
            yield self.finding(Problem.RANK_OUTSIDE_RUN, f"no rank in 'rank' exists in this run (ranks 0-{world - 1}): "
                               "msprobe dumps nothing at all", ("rank",), severity="warning")


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


def _expand(element: int | str) -> range:
    if isinstance(element, int):
        return range(element, element + 1)
    bounds = [int(part) for part in element.split("-")]
    return range(bounds[0], bounds[-1] + 1)


def _close(word: str, candidates: frozenset[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
