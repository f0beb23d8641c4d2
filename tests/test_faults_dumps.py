"""`rlpatch dumps` on hostile inputs: every pair in a folder of its own inside `-o`, a pair that did not
run is a failure, damaged logs and dumps are problems (never an internal error), memory stays bounded.

msprobe is replaced by a stand-in interpreter (`--python`) that writes what msprobe writes into its
`-o` folder, so these tests need neither torch nor msprobe: they check rlpatch's side of the contract.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dumps import dump, infer_record, infer_tree, log, train_record, train_tree

from rlpatch.dumps import layout
from rlpatch.dumps.command import pair_out_dir, safe_name

HOSTILE_IDS = ["..", ".", "a/b", "a:b", "a_b", "x" * 300, ".hidden", "é", "a b", "../../etc", "-o", "", "a\\b"]

FAKE_MSPROBE = """#!{python}
import os, sys
out = sys.argv[sys.argv.index("-o") + 1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "compare_result_1.csv"), "w") as handle:
    handle.write("NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,Cosine,EucDist,"
                 "MaxAbsErr,MaxRelativeErr,NPU l2norm,Bench l2norm,Result,Err_message\\n")
    handle.write("Module.model.layers.0.mlp.down_proj.Linear.forward.0.output.0,"
                 "Module.model.layers.0.mlp.down_proj.RowParallelLinear.forward.0.output.0,torch.float32,"
                 "torch.float32,[4],[4],1.0,0.0,0.0,0.0,1.0,1.0,pass,\\n")
"""


def _fake_msprobe(folder: Path) -> str:
    path = folder / "fake-python"
    path.write_text(FAKE_MSPROBE.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _trees(root: Path, ids: list[str]) -> tuple[Path, Path]:
    train = train_tree(root / "t", [train_record(n, [i]) for n, i in enumerate(ids)])
    infer = infer_tree(root / "i", [infer_record(n, [(i, "new")]) for n, i in enumerate(ids)])
    return train, infer


def test_every_hostile_request_id_gets_its_own_folder_inside_out() -> None:
    """Promise: whatever the ids, no two pairs share a folder and no folder is outside `-o`."""
    folders = [pair_out_dir("/o", request_id, 0, False) for request_id in HOSTILE_IDS]
    assert len(set(folders)) == len(folders)
    for folder in folders:
        assert os.path.dirname(folder) == "/o" and os.path.basename(folder) not in ("", ".", "..")
        assert not os.path.basename(folder).startswith(".") and len(os.path.basename(folder)) < 128


@given(st.lists(st.text(min_size=0, max_size=400), min_size=1, max_size=20, unique=True))
@settings(max_examples=200, deadline=None)
def test_safe_names_are_distinct_and_inside(ids: list[str]) -> None:
    """Promise (generated ids): distinct ids give distinct, safe, bounded folder names."""
    names = [safe_name(i) for i in ids]
    assert len(set(names)) == len(names)
    assert all(n and "/" not in n and n not in (".", "..") and not n.startswith(".") and len(n) < 128
               for n in names)


def test_compare_writes_only_inside_out_whatever_the_ids(tmp_path: Path) -> None:
    """Promise: a request id of `..` does not write into the parent of `-o`; 13 ids, 13 folders, 13 CSVs."""
    ids = [i for i in HOSTILE_IDS if i]  # an empty id is not a request
    train, infer = _trees(tmp_path, ids)
    sentinel = tmp_path / "keep.txt"
    sentinel.write_text("the user's file")
    out = tmp_path / "out"
    result = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(out),
                     "--python", _fake_msprobe(tmp_path), "--format", "json")
    data = json.loads(result.stdout)
    csvs = [entry["csv"] for entry in data["results"]]
    assert len(data["results"]) == len(ids) and len(set(csvs)) == len(ids), data
    assert all(Path(csv).resolve().is_relative_to(out.resolve()) for csv in csvs)
    assert sentinel.read_text() == "the user's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake-python", "i", "keep.txt", "out", "t"]


def test_a_pair_that_did_not_run_is_a_failure(tmp_path: Path) -> None:
    """Promise: a pair whose output folder cannot be made fails the command; it is never '0 pass, 0 error'."""
    train, infer = _trees(tmp_path, ["a" * 32])
    out = tmp_path / "out"
    out.mkdir()
    (out / ("a" * 32)).write_text("a file where the pair's folder would go")
    result = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(out),
                     "--python", _fake_msprobe(tmp_path), "--format", "json")
    data = json.loads(result.stdout)
    assert result.exit_code == 1
    assert "cannot create the pair's output folder" in data["results"][0]["error"]


DAMAGED_LINES = [
    "[" * 100000 + "]" * 100000,  # nesting past Python's recursion limit
    json.dumps(train_record(0, ["x"]) | {"rank": 10**40}),
    json.dumps(train_record(0, ["x"]) | {"step": "zero"}),
    json.dumps(train_record(0, ["x"]) | {"request_ids": "abc"}),
    json.dumps(train_record(0, ["x"]) | {"rank": True}),
    json.dumps([1, 2, 3]),
    "x" * (2 * 1024 * 1024),  # a line longer than any record
    "\udcff not utf-8",
]


@pytest.mark.parametrize("line", DAMAGED_LINES, ids=range(len(DAMAGED_LINES)))
def test_a_damaged_log_line_is_a_problem_not_an_error(tmp_path: Path, line: str) -> None:
    """Promise: check and pair report a damaged record with its file and line, exit 1, never crash."""
    train = train_tree(tmp_path / "t", [train_record(0, ["a" * 32])])
    with (train / "100" / "update_actor_log.jsonl").open("a", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(line + "\n")
    infer = infer_tree(tmp_path / "i", [infer_record(0, [("a" * 32, "new")])])
    for args in (["dumps", "check", str(train)], ["dumps", "pair", "--train", str(train), "--infer", str(infer)]):
        result = run_cli(*args, "--format", "json")
        assert result.stderr == "", result.stderr
        data = json.loads(result.stdout)
        assert result.exit_code == 1 and any("update_actor_log.jsonl:2:" in p for p in data["problems"]), data


def test_damaged_dump_json_and_huge_folder_numbers(tmp_path: Path) -> None:
    """Promise: a deeply nested dump.json and a 200-digit rank folder are problems or ignored, not crashes."""
    dump(tmp_path / "step0" / "rank0", "[" * 100000 + "]" * 100000)
    (tmp_path / "step0" / ("rank" + "9" * 200)).mkdir()
    dump(tmp_path / ("step" + "9" * 200) / "rank0")
    result = run_cli("dumps", "check", str(tmp_path), "--format", "json")
    assert result.stderr == "" and result.exit_code == 1
    data = json.loads(result.stdout)
    assert [s["step"] for s in data["steps"]] == [0]
    assert "dump.json is unreadable (RecursionError)" in data["steps"][0]["problems"][0]


def test_a_large_dump_json_is_checked_without_parsing_it(tmp_path: Path, monkeypatch) -> None:
    """Promise: memory stays proportionate: a dump.json over the parse limit is checked at its head and tail."""
    big = {"task": "tensor", "level": "L0", "framework": "pytorch", "dump_data_dir": None,
           "data": {f"Module.layer{n}.forward.0": {"x": "y" * 100} for n in range(layout.PARSE_LIMIT // 100)}}
    path = dump(tmp_path / "step0" / "rank0", big)
    assert path.stat().st_size > layout.PARSE_LIMIT

    def no_parse(*_args, **_kwargs):
        raise AssertionError("a dump.json over the limit was parsed")

    monkeypatch.setattr(layout.json, "load", no_parse)
    assert layout.dump_json_problem(str(path)) is None
    path.write_bytes(path.read_bytes()[:-10])  # truncated
    assert layout.dump_json_problem(str(path)) == "dump.json is truncated or not JSON"


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children,
                                                                                       max_size=3), max_leaves=20))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_records_never_crash_pairing(tmp_path_factory, value) -> None:
    """Promise (generated JSON values as records and as their fields): pair answers, exit 0 or 1."""
    root = tmp_path_factory.mktemp("gen")
    train = train_tree(root / "t", [train_record(0, ["a" * 32])])
    log(train / "100" / "update_actor_log.jsonl", [train_record(1, ["b" * 32]) | {"request_ids": value}])
    infer = infer_tree(root / "i", [infer_record(0, [("a" * 32, "new")])])
    log(infer / "200" / "dispatch_log.jsonl", [infer_record(1, [("b" * 32, "new")]) | {"requests": value}])
    with (infer / "200" / "dispatch_log.jsonl").open("a") as handle:
        handle.write(json.dumps(value) + "\n")
    result = run_cli("dumps", "pair", "--train", str(train), "--infer", str(infer), "--format", "json")
    assert result.stderr == "" and result.exit_code in (0, 1), result.stderr


def test_report_naming_a_directory_or_device_is_refused_before_any_compare(tmp_path: Path) -> None:
    """Promise: `--report DIR` (or a device) is a one-line error, exit 2, before any compare runs, and no
    temporary file is made beside it (the report's folder would be DIR's parent)."""
    train, infer = _trees(tmp_path, ["a" * 32])
    for report in (tmp_path, Path("/dev/null")):
        before = sorted(p.name for p in tmp_path.parent.iterdir())
        result = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(tmp_path / "out"),
                         "--python", _fake_msprobe(tmp_path), "--report", str(report))
        assert result.exit_code == 2 and "not a regular file" in result.stderr and result.stdout == ""
        assert not (tmp_path / "out").exists() and sorted(p.name for p in tmp_path.parent.iterdir()) == before
