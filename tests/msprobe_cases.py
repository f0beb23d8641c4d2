"""Generated msprobe config.json files: every field and cross-field rule of msprobe-config.md.

Each case is (name, document) where document is a dict (written as JSON) or a str (written as
is, for the not-JSON cases). `DUMP` in a value is replaced by a dump directory under the test's
temporary directory; `LOADDIR` by an existing directory.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DUMP = "@DUMP@"
LOADDIR = "@LOADDIR@"
ABSENT = object()

TASKS = ["tensor", "statistics", "acc_check", "structure", "diff_check", "nan_check"]
TOP_LEVEL_VALUES: dict[str, list[Any]] = {
    "task": TASKS + ["exception_dump", "overflow_check", "free_benchmark", "", None, 5, "Tensor", ["tensor"], False],
    "level": ["L0", "L1", "L2", "mix", "debug", "l1", "", None, 3, "MIX", ["L1"]],
    "dump_path": [ABSENT, None, "", 5, ["x"], DUMP + "/sub", DUMP + "/with space", DUMP + "/\u00fc", "rel_out",
                  DUMP + "/a:b-c_d.e", DUMP + "/" + "n" * 300, DUMP + ("/" + "d" * 200) * 22, "~/rlpatch-never-made"],
    "rank": [[], None, [0], [0, 1, "2-3"], "0", 0, [True], [1.0], [-1], [1000001], ["3-1"], ["a"], ["1-2-3"],
             ["-1"], [" 3"], ["+3"], ["1_0"], ["1000000"], ["0-1000001"], {}, ["4-4"], [""]],
    "step": [[], None, [0], ["0-3", 5], "1", [False], [2.5], [1000000], ["2-1"], ["x-1"]],
    "async_dump": [True, False, "false", 0, 1, None],
    "extra_info": [True, False, "true", 0, None],
    "dump_enable": [True, False, None, "true", 1],
    "precision": ["low", "high", "LOW", None, "", 1],
    "risk_level": ["CORE", "FOCUS", "ALL", "", None, "core", 1],
    "custom_op_namespaces": [[], ["_C_ascend"], "a", [1], None],
    "unknown_key": [1, "x"],
    "dump_pat": [1],  # a near-miss of dump_path
}
SECTION_VALUES: dict[str, list[Any]] = {
    "scope": [[], ["Module.layer.0"], "a", [1], None, ["Module.a.Linear.forward.0", "Module.b.Linear.forward.0"],
              ["Functional.relu.0.forward", "Torch.add.1.forward"], ["Module.a.Linear.forward.0", "Torch.add.1.forward"],
              ["Functional.relu.0.forward"], ["A", "B", "C"], ["Module.a.Linear.forward.0", "bad"], ""],
    "list": [[], ["torch.add"], "a", [1], ["name-regex((]"], ["torch.add", "torch.mul"]],
    "data_mode": [["all"], ["input"], ["output", "backward"], [], ["all", "input"],
                  ["input", "output", "forward", "backward"], ["input", "output", "forward", "backward", "all"],
                  ["bogus"], "all", [1], None],
    "summary_mode": ["statistics", "md5", "xor", "bogus", "", None, 1],
    "tensor_list": [[], ["relu"], "a", [1], None],
    "slice": [[], [{"dim": 0, "size": 4, "begin": 0, "end": 2}], [{"dim": -1}], [{"size": -1}], [{"begin": -1}],
              [{"dim": True}], [{"dim": 1.5}], {"dim": 0}, "x", [1], {}],
    "request_id": ["req-1", 1, None, ""],
    "diff_nums": [-1, 1, 0, -2, "1", True, 1.5, None],
    "unknown_option": [1],
}
SECTION_FORMS = [{}, None, [], "x"]
RAW_TEXTS = {
    "not_json": "task: tensor\n",
    "trailing_comma": '{"task": "tensor", "dump_path": "@DUMP@",}',
    "bom": '\ufeff{"task": "statistics", "dump_path": "@DUMP@"}',
    "nan_step": '{"task": "statistics", "dump_path": "@DUMP@", "step": [NaN]}',
    "infinity_rank": '{"dump_path": "@DUMP@", "rank": [Infinity]}',
    "duplicate_task": '{"task": "bogus", "task": "tensor", "dump_path": "@DUMP@", "tensor": {"list": ["a"]}}',
    "empty": "",
    "top_list": '[{"task": "tensor"}]',
    "top_string": '"statistics"',
    "comment": '{"task": "tensor", // tensors\n "dump_path": "@DUMP@"}',
}


def base(task: str = "statistics", level: str = "L1") -> dict[str, Any]:
    return {"task": task, "dump_path": DUMP, "rank": [], "step": [], "level": level}


def with_field(document: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    result = dict(document)
    if value is ABSENT:
        result.pop(key, None)
    else:
        result[key] = value
    return result


def cases(seed: int = 20261130) -> Iterator[tuple[str, dict[str, Any] | str]]:
    yield from _top_level_cases()
    yield from _section_cases()
    yield from _cross_field_cases()
    yield from _load_cases()
    yield from RAW_TEXTS.items()
    yield from _random_cases(random.Random(seed), 100)


def _top_level_cases() -> Iterator[tuple[str, dict[str, Any]]]:
    for key, values in TOP_LEVEL_VALUES.items():
        for index, value in enumerate(values):
            yield f"top-{key}-{index}", with_field(base(), key, value)
            if key in ("level", "async_dump", "dump_path"):
                yield f"top-{key}-{index}-tensor-mix", with_field(base("tensor", "mix"), key, value)


def _section_cases() -> Iterator[tuple[str, dict[str, Any]]]:
    for task in ("tensor", "statistics", "nan_check", "diff_check", "structure"):
        level = "L1"
        for index, form in enumerate(SECTION_FORMS):
            yield f"section-{task}-form{index}", {**base(task, level), task: form}
        for key, values in SECTION_VALUES.items():
            for index, value in enumerate(values):
                yield f"section-{task}-{key}-{index}", {**base(task, level), task: {key: value}}


def _cross_field_cases() -> Iterator[tuple[str, dict[str, Any]]]:
    l2 = base("tensor", "L2")
    yield "l2-tensor-one", {**l2, "tensor": {"list": ["Functional.relu.0.forward"]}}
    yield "l2-tensor-backward", {**l2, "tensor": {"list": ["Functional.relu.0.backward"]}}
    yield "l2-tensor-two", {**l2, "tensor": {"list": ["a", "b"]}}
    yield "l2-tensor-scope", {**l2, "tensor": {"list": ["a"], "scope": ["Module.x"]}}
    yield "l2-tensor-nolist", l2
    yield "l2-statistics-one", {**base("statistics", "L2"), "statistics": {"list": ["a"]}}
    yield "l2-structure", base("structure", "L2")
    yield "l2-diff-one", {**base("diff_check", "L2"), "diff_check": {"list": ["a"]}}
    for task in ("tensor", "statistics", "structure", "diff_check"):
        for level in ("L0", "L1", "mix", "debug"):
            for summary in (None, "md5", "xor"):
                for lists in ([], ["torch.add"]):
                    section: dict[str, Any] = {"list": lists}
                    if summary:
                        section["summary_mode"] = summary
                    name = f"async-{task}-{level}-{summary}-{len(lists)}"
                    yield name, {**base(task, level), "async_dump": True, task: section}
    for level in ("L0", "L1", "mix", "debug", "L2"):
        yield f"structure-{level}", base("structure", level)
        yield f"nan-{level}", base("nan_check", level)
    for modes in (["input"], ["input", "output"], ["output"], ["all"], ["input", "forward"]):
        yield f"nan-data-{'-'.join(modes)}", {**base("nan_check"), "nan_check": {"data_mode": modes}}
    yield "wrong-section", {**base("tensor", "mix"), "statistics": {"scope": "not checked"}}
    yield "default-task-section", {"dump_path": DUMP, "statistics": {"data_mode": "bad"}}
    yield "default-task-tensor-section", {"dump_path": DUMP, "tensor": {"data_mode": "ignored"}}
    yield "minimal", {"dump_path": DUMP}
    yield "consistency-good", {**base("tensor", "mix"), "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}


def _load_cases() -> Iterator[tuple[str, dict[str, Any]]]:
    good = {"modules": ["Module.layer.forward.0"], "path": LOADDIR}
    plain = {"task": "statistics", "level": "mix"}
    yield "load-only", {**plain, "load": good}
    yield "load-dump-after", {**plain, "load": {**good, "dump_after_load": True}}
    yield "load-dump-after-path", {**plain, "dump_path": DUMP, "load": {**good, "dump_after_load": True}}
    yield "load-null", {**plain, "dump_path": DUMP, "load": None}
    yield "load-list", {**plain, "dump_path": DUMP, "load": [1]}
    yield "load-missing-dir", {**plain, "load": {**good, "path": LOADDIR + "/nope"}}
    yield "load-backward", {**plain, "load": {**good, "modules": ["Module.layer.backward.0"]}}
    yield "load-dup", {**plain, "load": {**good, "modules": ["Module.a.forward.0", "Module.a.forward.0"]}}
    yield "load-noprefix", {**plain, "load": {**good, "modules": ["layer.forward.0"]}}
    yield "load-empty", {**plain, "load": {**good, "modules": []}}
    yield "load-flag", {**plain, "load": {**good, "dump_after_load": "yes"}}
    yield "load-step", {**plain, "load": {**good, "step": ["2-1"]}}
    yield "load-rank", {**plain, "load": {**good, "rank": [0, "1-3"]}}


def _random_cases(rng: random.Random, count: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """Random combinations: interactions between fields that the one-at-a-time cases miss."""
    top_keys = sorted(TOP_LEVEL_VALUES)
    section_keys = sorted(SECTION_VALUES)
    for index in range(count):
        task = rng.choice(TASKS[:2] + TASKS[3:] + ["", "tensor", "statistics"])
        document = base(task or "statistics", rng.choice(["L0", "L1", "L2", "mix", "debug"]))
        if not task:
            document.pop("task")
        for key in rng.sample(top_keys, rng.randint(0, 3)):
            if key not in ("task", "dump_path"):
                document = with_field(document, key, rng.choice(TOP_LEVEL_VALUES[key]))
        section = {key: rng.choice(SECTION_VALUES[key]) for key in rng.sample(section_keys, rng.randint(0, 4))}
        if section:
            document[task or "statistics"] = section
        yield f"random-{index}", document


def write_cases(folder: Path, dump_root: Path, load_dir: Path) -> list[tuple[str, Path]]:
    """Write every case as `folder/<name>.json`; returns (name, path) in generation order."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in cases():
        text = document if isinstance(document, str) else json.dumps(document)
        text = text.replace(DUMP, str(dump_root)).replace(LOADDIR, str(load_dir))
        path = folder / f"{name}.json"
        path.write_text(text, encoding="utf-8")
        written.append((name, path))
    return written
