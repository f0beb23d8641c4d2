"""`rlpatch lint --jobs N` (forked workers) prints exactly what `--jobs 1` (in-process) prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RLPATCH = [sys.executable, "-c", "from rlpatch.cli import main; main()"]
FORMATS = ("concise", "full", "json", "github", "sarif")


def lint(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(RLPATCH + ["lint", *args], cwd=ROOT, input=stdin, capture_output=True, timeout=120)


def fixture_scripts() -> list[str]:
    return [str(p.relative_to(ROOT)) for p in sorted((ROOT / "fixtures" / "lint").rglob("*.sh"))]


@pytest.mark.parametrize("fmt", FORMATS)
def test_parallel_output_is_byte_identical(fmt: str) -> None:
    # A missing file and a directory in the middle: their errors keep their place and the exit code;
    # stdin ("-") is read once by the parent and linted by a worker like any file.
    files = fixture_scripts()
    stdin = (ROOT / files[0]).read_bytes()
    files[3:3] = ["missing.sh", "fixtures/lint", "-"]
    serial = lint("--format", fmt, "--jobs", "1", *files, stdin=stdin)
    assert serial.returncode == 2 and serial.stdout
    for jobs in ("2", "3"):
        parallel = lint("--format", fmt, "--jobs", jobs, *files, stdin=stdin)
        assert (parallel.returncode, parallel.stdout, parallel.stderr) == (serial.returncode, serial.stdout,
                                                                         serial.stderr)


def test_parallel_exit_codes_match_serial() -> None:
    files = [f for f in fixture_scripts() if "consistency" in f]
    for extra in ([], ["--exit-zero"], ["--fail-on", "I"], ["--select", "RL0"]):
        codes = {lint(*extra, "--jobs", jobs, *files).returncode for jobs in ("1", "2")}
        assert len(codes) == 1, (extra, codes)


def test_jobs_must_be_positive() -> None:
    result = lint("--jobs", "0", "fixtures/lint/constructs/arith.sh")
    assert result.returncode == 2


def test_a_dying_worker_is_an_error_not_a_hang(monkeypatch, tmp_path: Path) -> None:
    from rlpatch.errors import InputError
    from rlpatch.lint import engine
    from rlpatch.lint.rule import LintOptions

    paths = []
    for index in range(4):
        path = tmp_path / f"s{index}.sh"
        path.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
        paths.append(str(path))
    real = engine.lint_path

    def crashing(path, *args, **kwargs):  # forked workers inherit the patch
        if path.endswith("s2.sh"):
            os._exit(1)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(engine, "lint_path", crashing)
    rules = engine.select_rules(None, None)
    with pytest.raises(InputError, match="--jobs 1"):
        engine.lint_paths([(p, LintOptions(), rules) for p in paths], jobs=2)


def test_default_jobs_lint_a_few_small_files_in_process(tmp_path: Path) -> None:
    from rlpatch.lint import engine
    from rlpatch.lint.rule import LintOptions

    small = tmp_path / "small.sh"
    small.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
    big = tmp_path / "big.sh"
    big.write_text("# x\n" * (engine.IN_PROCESS_BYTES // 4 + 1))
    rules = engine.select_rules(None, None)
    tasks = [(str(small), LintOptions(), rules)] * 3
    assert engine.default_jobs(tasks) == 1
    assert engine.default_jobs(tasks[:1] + [(str(big), LintOptions(), rules)]) == (os.cpu_count() or 1)
    assert engine.default_jobs([("-", LintOptions(), rules)] * 2, b"x" * engine.IN_PROCESS_BYTES) == (os.cpu_count() or 1)


def test_workers_share_by_size_and_keep_task_order(tmp_path: Path) -> None:
    from rlpatch.lint import engine
    from rlpatch.lint.rule import LintOptions

    paths = []
    for index, lines in enumerate([40, 1, 1, 30, 1, 20, 1]):
        path = tmp_path / f"s{index}.sh"
        path.write_text("python3 -m verl.trainer.main_ppo \\\n" + "  trainer.nnodes=1 \\\n" * lines + "  x=1\n")
        paths.append(str(path))
    rules = engine.select_rules(None, None)
    tasks = [(p, LintOptions(), rules) for p in paths]
    shares = engine._shares(tasks, None, 3)
    assert sorted(i for share in shares for i in share) == list(range(len(paths)))
    assert [share[0] for share in shares] == [0, 3, 5]  # the three biggest start three different shares
    serial = engine.lint_paths(tasks, jobs=1)
    forked = engine.lint_paths(tasks, jobs=3)
    assert [(r.path, r.findings, r.error) for r in forked] == [(r.path, r.findings, r.error) for r in serial]
