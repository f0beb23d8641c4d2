"""The msprobe config wing on hand-written configs: the kinds of problem, and positions inside the JSON file;
and the RL5xx rules that report them: each kind has exactly one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlpatch.msprobe_config import jsonpos
from rlpatch.msprobe_config.api import CheckOptions, Problem, check_file, check_text, is_valid

VALUE, COMBINATION, PATH = Problem.REJECTED_VALUE, Problem.REJECTED_COMBINATION, Problem.REJECTED_PATH

CONFIG = """{
  "task": "tensor",
  "dump_path": "/data/dump",
  "rank": [0, "2-1"],
  "level": "mix",
  "tensor": {
    "data_mode": ["all", "input"],
    "summary_mode": "sha",
    "scope": ["Module.a.Linear.forward.0"]
  },
  "statistics": {},
  "dump_pth": 1
}
"""


def found(text: str, **options: object) -> list[tuple[Problem, int, int]]:
    return [(f.problem, f.line, f.column) for f in check_text(text, "c.json", CheckOptions(**options))]  # type: ignore[arg-type]


def test_findings_point_inside_the_file() -> None:
    assert found(CONFIG) == [
        (VALUE, 4, 15),  # "2-1" runs backwards
        (VALUE, 7, 18),  # data_mode: 'all' with others
        (VALUE, 8, 21),  # summary_mode
        (COMBINATION, 9, 14),  # scope must be a range of two names
        (Problem.IGNORED_KEY, 11, 3),  # the statistics section is ignored (key position)
        (Problem.IGNORED_KEY, 12, 3),  # unknown key, did you mean dump_path
    ]


def test_not_json_reports_the_decoder_position() -> None:
    findings = check_text('{"task": "tensor",\n "level": }', "c.json")
    assert [(f.problem, f.line, f.column) for f in findings] == [(Problem.UNREADABLE, 2, 11)]
    assert not is_valid(findings)


def test_mode_expectations() -> None:
    training = '{"task": "statistics", "level": "mix"}'
    assert found(training, mode="training") == []  # verl passes dump_path itself
    assert [c for c, *_ in found(training)] == [Problem.NO_DUMP_PATH]  # alone, msprobe needs a dump_path
    consistency = '{"task": "statistics", "dump_path": "/d", "level": "L1"}'
    assert [c for c, *_ in found(consistency, mode="consistency")] == [Problem.TASK_UNFIT_FOR_CONSISTENCY]  # level: RL109's
    assert found('{"task": "tensor", "dump_path": "/d", "level": "L0"}', mode="consistency") == []


def test_statistics_in_consistency_is_a_warning_that_says_what_is_lost() -> None:
    findings = check_text('{"task": "statistics", "dump_path": "/d", "level": "mix"}', "c.json",
                          CheckOptions(mode="consistency"))
    assert [(f.problem, f.severity) for f in findings] == [(Problem.TASK_UNFIT_FOR_CONSISTENCY, "warning")]
    assert "summary" in findings[0].message and "task tensor matches best" in findings[0].message
    fsdp = check_text('{"task": "statistics", "dump_path": "/d", "level": "L0"}', "c.json",
                      CheckOptions(mode="consistency", backend="fsdp"))
    assert [(f.problem, f.severity) for f in fsdp] == [(Problem.TASK_UNFIT_FOR_CONSISTENCY, "error")]
    assert "qkv_proj" in fsdp[0].message
    other = check_text('{"task": "acc_check", "dump_path": "/d", "level": "mix"}', "c.json",
                       CheckOptions(mode="consistency"))
    assert [(f.problem, f.severity) for f in other if f.problem is Problem.TASK_UNFIT_FOR_CONSISTENCY] == [
        (Problem.TASK_UNFIT_FOR_CONSISTENCY, "error")]


def test_rank_list_outside_the_run() -> None:
    text = '{"dump_path": "/d", "rank": [8, "9-10"]}'
    assert [c for c, *_ in found(text, world_size=8)] == [Problem.RANK_OUTSIDE_RUN]
    assert found(text, world_size=16) == []
    assert found(text) == []


def test_dump_path_rules() -> None:
    assert [c for c, *_ in found('{"dump_path": "/d/with space"}')] == [PATH]
    relative = check_text('{"dump_path": "out"}', "c.json")
    assert [(f.problem, f.severity) for f in relative] == [(Problem.RELATIVE_DUMP_PATH, "warning")]
    assert is_valid(relative)


def test_nan_check_needs_an_npu_only_when_known() -> None:
    text = '{"task": "nan_check", "dump_path": "/d", "level": "L1"}'
    assert found(text) == []
    assert [c for c, *_ in found(text, npu=False)] == [COMBINATION]


def test_config_file_path_rules(tmp_path: Path) -> None:
    named = tmp_path / "config.txt"
    named.write_text('{"dump_path": "/d"}')
    assert [f.problem for f in check_file(named)] == [PATH]
    assert [f.problem for f in check_file(tmp_path / "missing.json")] == [Problem.UNREADABLE]
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe{}")
    assert [f.problem for f in check_file(binary)] == [Problem.UNREADABLE]


def test_positions_of_every_value() -> None:
    document = jsonpos.parse('{"a": [1, {"b": "x\\"y"}],\n "c": NaN}')
    assert document.values[("a", 1, "b")] == jsonpos.Span(1, 17, 1, 23)
    assert document.keys[("c",)] == jsonpos.Span(2, 2, 2, 5)
    assert document.values[("c",)] == jsonpos.Span(2, 7, 2, 10)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_values, st.sampled_from([None, 2]))
def test_spans_cover_exactly_each_value(value: object, indent: int | None) -> None:
    text = json.dumps(value, indent=indent)
    document = jsonpos.parse(text)
    offsets = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
    for path, span in document.values.items():
        start = offsets[span.line - 1] + span.column - 1
        end = offsets[span.end_line - 1] + span.end_column - 1
        node = value
        for part in path:
            node = node[part]  # type: ignore[index]
        assert json.loads(text[start:end]) == node


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_checker_never_raises(value: object) -> None:
    check_text(json.dumps({"task": "tensor", "tensor": value, "rank": value, "level": value}), "c.json")
    check_text(json.dumps(value), "c.json")


@pytest.mark.parametrize("text", ["", "{", "[1,]", "\ufeff{}", "{'a': 1}"])
def test_not_json(text: str) -> None:
    assert [f.problem for f in check_text(text, "c.json")] == [Problem.UNREADABLE]


def test_every_kind_of_problem_is_reported_by_exactly_one_rule() -> None:
    """Each RL5xx rule maps the kinds it owns to its code: no kind is dropped, none is reported twice."""
    from rlpatch.registry import lint_rule_classes

    owners: dict[Problem, list[str]] = {problem: [] for problem in Problem}
    for cls in lint_rule_classes():
        for problem in getattr(cls, "problems", ()):
            owners[problem].append(cls.code)
    assert {problem: codes for problem, codes in owners.items() if len(codes) != 1} == {}
