"""Leftovers of issue 30 (item 5) and the bounds of item 4: each a one-line error with exit 2 and
nothing written, never an internal error; logs streamed with their bad lines bounded."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from conftest import FIXTURES, run_cli
from test_dumps import log, train_record, train_tree


def _one_line_exit_2(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and "internal error" not in lines[0], result.stderr
    return lines[0]


def test_lint_of_a_config_with_an_integer_past_pythons_limit(tmp_path: Path) -> None:
    config = tmp_path / "cfg.json"
    config.write_text('{"task": "statistics", "rank": [' + "9" * 5000 + "]}")
    line = _one_line_exit_2(run_cli("lint", str(config)))
    assert str(config) in line and "4300 digits" in line


def test_gen_on_a_full_disk_leaves_no_temporary_and_names_the_file(tmp_path: Path, monkeypatch) -> None:
    script = tmp_path / "run.sh"
    script.write_bytes((FIXTURES / "gen" / "megatron_vllm.sh").read_bytes())
    output = tmp_path / "out" / "run.dump.sh"
    real_write = os.write

    def full(fd: int, data) -> int:
        if fd > 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    line = _one_line_exit_2(run_cli("gen", "consistency", str(script), "-o", str(output)))
    assert os.strerror(errno.ENOSPC) in line and "nothing written" in line
    assert "cannot write :" not in line and str(output.parent) in line  # a path, never an empty name
    left = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["run.sh"], left


def test_gen_bounds_its_input_as_lint_does(tmp_path: Path) -> None:
    line_script = tmp_path / "line.sh"
    line_script.write_text("#!/bin/bash\nx=1\npython3 -m verl.trainer.main_ppo data.y=" + "$x" * 40000 + "\n")
    assert "over gen's limit of 64 KiB per line" in _one_line_exit_2(run_cli("gen", "consistency", str(line_script)))
    big = tmp_path / "big.sh"
    big.write_text("#!/bin/bash\n" + ("y=" + "$x" * 16000 + "\n") * 10)
    assert "at most 256 KB" in _one_line_exit_2(run_cli("gen", "consistency", str(big)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.sh", "line.sh"]


def test_check_lists_a_bounded_number_of_bad_log_lines(tmp_path: Path) -> None:
    train = train_tree(tmp_path / "t", [train_record(0, ["a"])])
    path = next(train.glob("*/update_actor_log.jsonl"))
    with open(path, "a") as handle:
        handle.write("not json\n" * 500)
    log(path, [train_record(0, ["b"])])
    result = run_cli("dumps", "check", str(train), "--format", "json")
    import json

    problems = json.loads(result.stdout)["problems"]
    assert sum("not a JSON record" in p for p in problems) == 20
    assert any("480 more bad line(s) not listed" in p for p in problems), problems


def test_a_dump_json_is_streamed_member_by_member_with_json_semantics(tmp_path: Path, monkeypatch) -> None:
    """The streamed reader gives what json.load gives, whatever the chunk boundaries (a number cut
    in two, a value longer than a chunk), and refuses what json.load refuses."""
    import io
    import json

    import pytest

    from rlpatch.dumps import jsonstream

    document = {"task": "tensor", "level": "L0", "data": {f"Module.m.{i}.forward.0": {"v": [i, 12345.5, None, "x" * i]}
                                                           for i in range(50)}, "dump_data_dir": None, "n": 1234567}
    text = json.dumps(document, indent=1)
    for chunk in (1, 7, 64, 1 << 20):
        monkeypatch.setattr(jsonstream, "CHUNK", chunk)
        seen: dict = {"data": {}}
        for kind, key, inner, value in jsonstream.events(io.StringIO(text), "data"):
            if kind == "member":
                if inner is None:
                    seen[key] = value
                else:
                    seen["data"][inner] = value
        assert seen == document
    for bad in ('{"a": 1,}', '{"a" 1}', '{"a": 1} x', '{"data": {"k": }}', '{"a": [1, 2'):
        with pytest.raises(ValueError):
            list(jsonstream.events(io.StringIO(bad), "data"))


def test_check_folds_a_long_run_of_missing_ranks(tmp_path: Path) -> None:
    from test_dumps import dump

    for rank in (0, 1000, 1002):
        dump(tmp_path / "d" / "step0" / f"rank{rank}")
    import json

    data = json.loads(run_cli("dumps", "check", str(tmp_path / "d"), "--format", "json").stdout)
    assert data["steps"][0]["problems"] == ["missing rank folders: rank1-rank999, rank1001"]
