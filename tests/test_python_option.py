"""`--python` means one thing in every command (issue 31.1): an interpreter, a launcher prefix or a
venv folder, read by `rlpatch.upstream.api.interpreter_argv`; a missing one fails the same way."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from rlpatch.errors import InputError
from rlpatch.upstream.api import interpreter_argv, require_interpreter

SCRIPT = "python3 -m verl.trainer.main_ppo trainer.nnodes=1\n"


@pytest.fixture
def prefixed(tmp_path: Path) -> tuple[str, Path]:
    """A launcher prefix that puts a verl 0.9.1 tree on the path of this interpreter (`-s`: one flag more)."""
    tree = tmp_path / "site"
    (tree / "verl" / "version").mkdir(parents=True)
    (tree / "verl" / "__init__.py").write_text("")
    (tree / "verl" / "version" / "version").write_text("0.9.1\n")
    return shlex.join(["env", f"PYTHONPATH={tree}", sys.executable, "-s"]), tree


def test_the_one_reading_of_python(tmp_path: Path) -> None:
    assert interpreter_argv("uv run --frozen python3") == ("uv", "run", "--frozen", "python3")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    assert interpreter_argv(str(venv)) == (str(venv / "bin" / "python"),)
    for bad, said in (("", "--python: empty"), ("'unclosed", "No closing quotation"),
                      (str(tmp_path), "a folder without bin/python"),
                      ("/nonexistent/python3 -I", "--python /nonexistent/python3 -I: no such interpreter")):
        with pytest.raises(InputError, match=said):
            require_interpreter(bad)


def test_a_launcher_prefix_works_in_every_command(prefixed: tuple[str, Path], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    python, tree = prefixed
    monkeypatch.setenv("RLPATCH_DEFAULT_VERL", "none")
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT)
    verify = run_cli("verify", "--python", python)
    assert f"verl 0.9.1 at {tree} (imported by {python})" in verify.stdout, verify.stderr
    settings = run_cli("lint", "--show-settings", "--python", python, str(script))
    assert f"hydra config (RL3xx): the verl of --python {python} (verl 0.9.1 at {tree / 'verl'})" in settings.stdout
    doctor = run_cli("doctor", "--python", python, "--format", "json")
    assert "no such interpreter" not in doctor.stderr


@pytest.mark.parametrize("command", [["verify"], ["lint", "RUN"], ["doctor"], ["gen", "training", "RUN"],
                                     ["dumps", "compare", "--train", "T", "--infer", "I"]])
def test_a_missing_interpreter_is_one_line_everywhere(command: list[str], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLPATCH_DEFAULT_VERL", "none")
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT)
    for folder in ("T", "I"):
        (tmp_path / folder).mkdir()
    args = [str(script) if a == "RUN" else str(tmp_path / a) if a in ("T", "I") else a for a in command]
    result = run_cli(*args, "--python", "/nonexistent/python3 -I")
    assert result.exit_code != 0
    assert "rlpatch: error: --python /nonexistent/python3 -I: no such interpreter" in result.stderr.splitlines()
