"""Every JSON document rlpatch prints or writes, from the real commands on the project's fixtures, is
valid against the JSON Schema the package ships for it (`rlpatch/schemas/`), and carries `version`
(issue 32.5). Also `-q` and the progress lines a batch log gets."""

from __future__ import annotations

import io
import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import run_cli
from test_dumps import A, B, _fake_msprobe, infer_record, infer_tree, train_record, train_tree

from rlpatch.output.progress import Progress

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SCRIPT = FIXTURES / "lint" / "consistency" / "fsdp_vllm.sh"
SAMPLES = sorted((FIXTURES / "lint" / "samples").glob("*.sh"))


def schema(name: str) -> dict[str, Any]:
    """The schema as an installed rlpatch has it (package data, not the source tree's path)."""
    text = resources.files("rlpatch").joinpath("schemas", f"{name}.schema.json").read_text(encoding="utf-8")
    document = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(document)
    return document


def valid(name: str, text: str) -> dict[str, Any]:
    document = json.loads(text)
    jsonschema.validate(document, schema(name), cls=jsonschema.Draft202012Validator)
    assert document["version"] == 1
    return document


def test_every_shipped_schema_is_a_valid_schema_and_documented() -> None:
    names = sorted(p.name for p in resources.files("rlpatch").joinpath("schemas").iterdir() if p.name.endswith(".json"))
    assert len(names) == 13, names
    page = (Path(__file__).resolve().parent.parent / "docs" / "json.md").read_text(encoding="utf-8")
    for name in names:
        schema(name.removesuffix(".schema.json"))
        assert f"`{name}`" in page, name


def test_lint_json_and_statistics() -> None:
    result = run_cli("lint", "--no-config", "--format", "json", *map(str, SAMPLES))
    findings = valid("lint", result.stdout)["findings"]
    assert findings and result.exit_code == 1
    statistics = run_cli("lint", "--no-config", "--statistics", "--format", "json", *map(str, SAMPLES))
    assert valid("lint-statistics", statistics.stdout)["statistics"]


def test_lint_json_with_fixes(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.read_text(encoding="utf-8").replace("enforce_eager=True", "enforce_eager=False"))
    findings = valid("lint", run_cli("lint", "--no-config", "--format", "json", str(script)).stdout)["findings"]
    assert any(f["fix"] for f in findings)


def test_detect_one_script_and_several() -> None:
    one = valid("detect", run_cli("detect", "--format", "json", str(SCRIPT)).stdout)
    assert one["mode"] == "consistency"
    several = valid("detect", run_cli("detect", "--format", "json", str(SCRIPT), str(SAMPLES[0])).stdout)
    assert len(several["scripts"]) == 2


def test_rules_and_the_patch_commands(tmp_path: Path) -> None:
    assert valid("rules", run_cli("rules", "--format", "json").stdout)["rules"]
    tree = Path(shutil.copytree(FIXTURES / "verl_mini", tmp_path / "verl"))
    for argv in (("status",), ("verify",), ("apply", "--dry-run"), ("apply",), ("verify",), ("revert",)):
        result = run_cli(*argv, "--verl-root", str(tree), "--format", "json")
        assert result.exit_code in (0, 1), result.stderr
        assert valid("patch", result.stdout)["targets"][0]["package"] == "verl"


def test_doctor() -> None:
    result = run_cli("doctor", "--isolated", "--format", "json")
    assert valid("doctor", result.stdout)["verdicts"]


def test_gen(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    shutil.copy(SCRIPT, script)
    result = run_cli("gen", "consistency", str(script), "--verl-root", str(FIXTURES / "verl_mini"), "--format", "json")
    assert valid("gen", result.stdout)["configs"], result.stderr


def test_cluster_answer() -> None:
    """The `--ray` document as the driver prints it (a real cluster runs in tests/test_cluster.py)."""
    from rlpatch.cluster.report import Outcome, show

    answer = json.loads(run_cli("status", "--verl-root", str(FIXTURES / "verl_mini"), "--format", "json").stdout)
    nodes = [{"node_id": "a" * 56, "hostname": "h1", "ip": "10.0.0.1", "status": "ok", "exit_code": 0, "result": answer,
              "executable": "python", "python": "3.11", "ray": "2.9", "rlpatch": "0"},
             {"node_id": "b" * 56, "hostname": "h2", "ip": "10.0.0.2", "status": "timeout", "exit_code": None,
              "result": None, "error": "no answer within 5 s"}]
    out = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(out):
        show(Outcome("status", "10.0.0.1:6379", nodes, [{"NodeID": "c" * 56}]), "json")
    assert valid("cluster", out.getvalue())["summary"]["timed_out"] == ["b" * 56]


@pytest.fixture
def dumps(tmp_path: Path) -> tuple[Path, Path, Path]:
    train = train_tree(tmp_path / "t", [train_record(0, [A]), train_record(1, [B])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")]), infer_record(1, [(B, "new")])])
    return train, infer, _fake_msprobe(tmp_path)


def test_dumps_check_pair_compare_and_the_files_compare_keeps(tmp_path: Path, dumps: tuple[Path, Path, Path]) -> None:
    train, infer, msprobe = dumps
    valid("dumps-check", run_cli("dumps", "check", str(infer), "--format", "json").stdout)
    valid("dumps-check", run_cli("dumps", "check", str(train), "--format", "json").stdout)
    assert len(valid("dumps-pair", run_cli("dumps", "pair", "--train", str(train), "--infer", str(infer), "--format",
                                           "json").stdout)["pairs"]) == 2
    out = tmp_path / "out"
    argv = ("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(out), "--python", str(msprobe),
            "--format", "json")
    data = valid("dumps-compare", run_cli(*argv).stdout)
    entry = data["results"][0]
    assert "unmatched" not in entry and entry["rows"]["unmatched"] == 1  # one key, one meaning
    valid("compare-summary", (out / "rlpatch_compare.json").read_text(encoding="utf-8"))
    for stored in out.glob("*/rlpatch_result.json"):
        valid("compare-result", stored.read_text(encoding="utf-8"))
    assert valid("dumps-compare", run_cli(*argv).stdout)["reused"] == 2


# ---- -q ------------------------------------------------------------------------------------------------
def test_quiet_lint_keeps_the_report_and_drops_the_notes(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.read_text(encoding="utf-8").replace("enforce_eager=True", "enforce_eager=False"))
    loud = run_cli("lint", "--no-config", "--fix", str(script))
    script.write_text(SCRIPT.read_text(encoding="utf-8").replace("enforce_eager=True", "enforce_eager=False"))
    quiet = run_cli("lint", "--no-config", "--fix", "-q", str(script))
    assert "Fixed " in loud.stderr and quiet.stderr == ""
    assert (quiet.exit_code, quiet.stdout) == (loud.exit_code, loud.stdout)
    missing = run_cli("lint", "-q", str(tmp_path / "absent.sh"))
    assert missing.exit_code == 2 and "absent.sh" in missing.stderr  # errors stay


def test_quiet_rule_patch_and_dumps(tmp_path: Path, dumps: tuple[Path, Path, Path]) -> None:
    assert run_cli("rule").stderr and not run_cli("rule", "-q").stderr
    train, infer, msprobe = dumps
    loud = run_cli("dumps", "pair", "--train", str(train), "--infer", str(infer))
    quiet = run_cli("dumps", "pair", "--train", str(train), "--infer", str(infer), "-q")
    assert "note: " in loud.stdout and "note: " not in quiet.stdout and quiet.exit_code == loud.exit_code
    assert [line for line in loud.stdout.splitlines() if not line.startswith("note: ")] == quiet.stdout.splitlines()
    tree = Path(shutil.copytree(FIXTURES / "verl_mini", tmp_path / "verl"))
    loud_verify, quiet_verify = run_cli("verify", "--verl-root", str(tree)), run_cli("verify", "--verl-root", str(tree), "-q")
    assert (quiet_verify.exit_code, quiet_verify.stdout) == (loud_verify.exit_code, loud_verify.stdout)


def test_quiet_gen_leaves_out_the_notes(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    shutil.copy(SCRIPT, script)
    argv = ("gen", "consistency", str(script), "--verl-root", str(FIXTURES / "verl_mini"), "--dry-run")
    loud, quiet = run_cli(*argv), run_cli(*argv, "-q")
    notes = [line for line in loud.stdout.splitlines() if line.startswith("note: ") and "warning:" not in line]
    assert notes and not [line for line in quiet.stdout.splitlines() if line in notes]
    assert quiet.exit_code == loud.exit_code


# ---- progress lines in a batch log ---------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_says_done_of_total_once_per_interval_and_at_the_end() -> None:
    clock, out = Clock(), io.StringIO()
    progress = Progress("rlpatch lint", 5, "files linted", stream=out, interval=10, clock=clock)
    progress.advance()
    clock.now = 9.9
    progress.advance()
    assert out.getvalue() == ""
    clock.now = 10.0
    progress.advance()
    clock.now = 15
    progress.advance(0)
    clock.now = 25
    progress.advance(2)
    progress.finish()
    assert out.getvalue() == "rlpatch lint: 3/5 files linted (10 s)\nrlpatch lint: 5/5 files linted (25 s)\n"


def test_a_quick_run_stays_silent() -> None:
    clock, out = Clock(), io.StringIO()
    progress = Progress("x", 2, "done", stream=out, interval=10, clock=clock)
    progress.advance(2)
    progress.finish()
    assert out.getvalue() == ""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_lint_of_a_folder_in_a_batch_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: str) -> None:
    for index in range(4):
        shutil.copy(SAMPLES[0], tmp_path / f"s{index}.sh")
    monkeypatch.setenv("RLPATCH_PROGRESS_INTERVAL", "0")  # a line at every file: no clock in the test
    result = run_cli("lint", "--no-config", "-j", jobs, str(tmp_path))
    lines = [line for line in result.stderr.splitlines() if "files linted" in line]
    assert lines and lines[-1].startswith("rlpatch lint: 4/4 files linted (")
    assert not [line for line in run_cli("lint", "--no-config", "-q", "-j", jobs, str(tmp_path)).stderr.splitlines()
                if "files linted" in line]


def test_compare_in_a_batch_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dumps: tuple[Path, Path, Path]) -> None:
    train, infer, msprobe = dumps
    monkeypatch.setenv("RLPATCH_PROGRESS_INTERVAL", "0")
    argv = ("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(tmp_path / "o"), "--python",
            str(msprobe), "--force")
    lines = run_cli(*argv).stderr.splitlines()
    assert lines[-1] == "rlpatch dumps compare: 2/2 pair(s) compared (0 s)", lines
    assert "pair(s) compared" not in run_cli(*argv, "-q").stderr


def test_a_ray_fan_out_in_a_batch_log(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The driver's wait, cut into steps, says how many nodes answered (a stand-in for ray.wait)."""
    from rlpatch.cluster.driver import wait_all

    class Ray:
        def __init__(self) -> None:
            self.rounds = [["n1"], [], ["n2", "n3"]]

        def wait(self, refs: list[str], num_returns: int, timeout: float) -> tuple[list[str], list[str]]:
            ready = self.rounds.pop(0) if self.rounds else []
            return ready, [ref for ref in refs if ref not in ready]

    monkeypatch.setenv("RLPATCH_PROGRESS_INTERVAL", "0")
    assert wait_all(Ray(), ["n1", "n2", "n3"], 60, "rlpatch verify --ray", step=0) == {"n1", "n2", "n3"}
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("rlpatch verify --ray: 1/3 node(s) answered") and lines[-1].startswith(
        "rlpatch verify --ray: 3/3 node(s) answered")
    assert wait_all(Ray(), ["n1", "n2", "n3"], 60, "x", quiet=True) == {"n1"}  # one wait: all it gives
    assert capsys.readouterr().err == ""


def test_quiet_leaves_out_notes_by_kind_never_by_text(capsys: pytest.CaptureFixture[str]) -> None:
    """A line that reads like a note (a request id from the dumps can say anything) stays under -q; only
    the lines made as notes go."""
    from rlpatch.dumps.api import Summary
    from rlpatch.dumps.cli import _emit
    from rlpatch.output.api import Note

    lines = ["note: r1: train step1 rank0 <-> infer pid 7 step1 rank0", Note("note: a real note"),
             "reused 3: a request id", Note("reused 2 of 4 pair(s): ...")]
    assert _emit(Summary({}, lines, 0), "text", quiet=True) == 0
    assert capsys.readouterr().out.splitlines() == [lines[0], lines[2]]
