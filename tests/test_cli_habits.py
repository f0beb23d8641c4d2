"""Issue 22, items 8, 9 and 12: command-line habits of ruff, ShellCheck and pre-commit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RLPATCH = [sys.executable, "-c", "from rlpatch.cli import main; main()"]
UNKNOWN = "python3 -m verl.trainer.main_ppo trainer.nnodes=1 x=$UNSET\n"


def rlpatch(*args: str, cwd: Path | None = None, env: dict | None = None):
    proc = subprocess.run(RLPATCH + list(args), cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **(env or {})))
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for folder in ("sub", ".git", ".venv", "node_modules", "__pycache__", ".hidden"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.sh").write_text(UNKNOWN)
    (tmp_path / "a.sh").write_text(UNKNOWN)
    (tmp_path / "sub" / "notes.txt").write_text("echo hi\n")
    return tmp_path


# ---- item 8: directories, and `.` by default ----------------------------------------------------------
def test_a_directory_is_linted_recursively_skipping_hidden_and_vendored_folders(tree: Path) -> None:
    code, out, err = rlpatch("lint", str(tree))
    files = [line.split(":")[0] for line in out.splitlines()[:-1]]
    assert (code, err) == (0, "")
    assert files == [str(tree / "a.sh"), str(tree / "sub" / "x.sh")]


def test_no_argument_lints_the_current_directory(tree: Path) -> None:
    code, out, _ = rlpatch("lint", cwd=tree)
    assert code == 0 and [line.split(":")[0] for line in out.splitlines()[:-1]] == ["a.sh", "sub/x.sh"]


def test_an_explicit_file_is_linted_whatever_its_name_and_once(tree: Path) -> None:
    code, out, _ = rlpatch("lint", "sub/notes.txt", ".", "a.sh", cwd=tree)
    assert code == 1
    assert [line.split(":")[0] for line in out.splitlines()[:-1]] == ["sub/notes.txt", "a.sh", "sub/x.sh"]


def test_a_directory_without_scripts_warns_and_passes(tmp_path: Path) -> None:
    assert rlpatch("lint", str(tmp_path)) == (0, "All checks passed.\n", "rlpatch lint: warning: no *.sh files found\n")
