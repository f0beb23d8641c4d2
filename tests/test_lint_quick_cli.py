"""`rlpatch lint` read without click (`rlpatch.lint.quick_cli`) means what click reads.

The reader must know every option of `lint_cmd` as click declares it, build the very `LintCommand`
click builds for each command line it accepts, and leave to click every command line it is not
sure of (help, unknown options, values click refuses or might)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from rlpatch.lint import cli as lint_cli
from rlpatch.lint.commands import LintCommand
from rlpatch.lint.quick_cli import CHOICE, COUNT, FLAG, MANY, OFF, OPTIONS, PATH, SHORT, VALUE, read_lint_args


def _kind(param: click.Option) -> str:
    if param.is_flag:
        return FLAG
    if param.multiple:
        return MANY
    if isinstance(param.type, click.Choice):
        return CHOICE
    if isinstance(param.type, click.IntRange):
        assert (param.type.min, param.type.max, param.type.min_open) == (1, None, False)
        return COUNT
    if isinstance(param.type, click.Path):
        return PATH
    assert param.type is click.STRING, param
    return VALUE


def test_the_table_is_lint_cmds_options() -> None:
    declared = {}
    for param in lint_cli.lint_cmd.params:
        if not isinstance(param, click.Option) or param.name == "help":
            continue
        (long,) = [opt for opt in param.opts if opt.startswith("--")]
        shorts = [opt for opt in param.opts + param.secondary_opts if not opt.startswith("--")]
        assert all(SHORT.get(short) == long for short in shorts), (long, shorts)
        choices = tuple(param.type.choices) if isinstance(param.type, click.Choice) else ()
        sensitive = param.type.case_sensitive if isinstance(param.type, click.Choice) else True
        declared[long] = (param.name, _kind(param), choices, sensitive)
        for off in param.secondary_opts:  # a --x/--no-x pair: the second sets the field off
            declared[off] = (param.name, OFF, (), True)
    assert declared == OPTIONS
    assert set(SHORT.values()) <= set(OPTIONS)


def _click_command(args: list[str], monkeypatch: pytest.MonkeyPatch) -> LintCommand | None:
    """The LintCommand click builds for `rlpatch lint ARGS`, or None when click refuses them."""
    seen: list[LintCommand] = []

    def record(command: LintCommand) -> int:
        seen.append(command)
        return 0

    monkeypatch.setattr(lint_cli, "lint_and_print", record)
    result = CliRunner().invoke(lint_cli.lint_cmd, args, prog_name="rlpatch lint")
    return seen[0] if seen and result.exit_code == 0 else None


ACCEPTED = [
    [],
    ["--fix", "a.sh"], ["--diff", "--unsafe-fixes", "a.sh"], ["--extend-select", "RL5", "--extend-select=RL6", "a.sh"],
    ["--config", "x.toml", "--force-exclude", "a.sh"], ["--no-respect-gitignore", "."],
    ["--no-respect-gitignore", "--respect-gitignore", "."],
    ["run.sh"],
    ["-", "a.sh", "dir"],
    ["--format", "json", "a.sh"],
    ["--format=sarif", "a.sh", "--exit-zero"],
    ["--select", "RL1,RL2", "--select=RL3", "--ignore", "RL101", "a.sh"],
    ["--fail-on", "w", "--severity", "WARNING", "a.sh"],
    ["--fail-on=Error", "-S", "info", "a.sh"],
    ["--statistics", "--format", "full", "a.sh"],
    ["-o", "out.txt", "a.sh"],
    ["--output-file=out.txt", "a.sh"],
    ["--show-settings"],
    ["--color", "never", "--exit-zero", "--exit-zero", "a.sh"],
    ["--allow-level", "L0", "--allow-level=L1", "a.sh"],
    ["--skip-non-verl", "a.sh", "b.sh"],
    ["-j", "4", "a.sh"],
    ["--jobs=12", "a.sh"],
    ["--mode", "consistency", "a.sh"],
    ["--env", "A=1", "--env=B=2", "--use-env", "a.sh"],
    ["--verl-root", "/nonexistent/verl", "--verl-version", "0.9.1", "a.sh"],
    ["--config-root", ".", "--python", "/usr/bin/python3", "a.sh"],
    ["--sglang-root", "/nonexistent/s", "--vllm-ascend-root=/nonexistent/v", "a.sh"],
    ["--no-config", "a.sh", "--", "trainer.nnodes=2", "--help", "-x"],
    ["a.sh", "--"],
    ["--select", "", "a.sh"],
    ["a=b.sh", "--verl-version=0.9.1"],
]


@pytest.mark.parametrize("args", ACCEPTED)
def test_same_command_as_click(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    quick = read_lint_args(["lint", *args])
    assert quick is not None, args
    assert quick == _click_command(args, monkeypatch)


LEFT_TO_CLICK = [
    ["--help"], ["-h"], ["a.sh", "--bogus"], ["--form", "json"], ["-x"], ["-format", "json"],
    ["--format", "xml"], ["--format"], ["--select"], ["--exit-zero=1"], ["--exit-zero="],
    ["-j", "0"], ["-j0"], ["--jobs", "01"], ["--jobs", "x"], ["-o=out.txt"], ["-oout.txt"],
    ["--format", "json", "--format", "full"], ["--select", "-x"], ["--mode", "TRAINING"],
    ["--verl-root", "a\0b"], ["--select", "--", "a.sh"],
    ["--fix", "--diff", "a.sh"], ["--config", "x.toml", "--no-config", "a.sh"],  # the callback's usage errors
]


@pytest.mark.parametrize("args", LEFT_TO_CLICK)
def test_what_it_is_not_sure_of_goes_to_click(args: list[str]) -> None:
    assert read_lint_args(["lint", *args]) is None


def test_only_lint_is_read_without_click() -> None:
    assert read_lint_args(["detect", "a.sh"]) is None
    assert read_lint_args([]) is None
    assert read_lint_args(["--version"]) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every directory")
def test_an_unreadable_root_goes_to_click(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0)
    try:
        assert read_lint_args(["lint", "--verl-root", str(closed), "a.sh"]) is None
    finally:
        closed.chmod(0o755)


def _run(argv: list[str], cwd: Path, **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlpatch.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=120, **kwargs)


def test_both_readers_print_the_same(tmp_path: Path) -> None:
    """The same lint through both readers (`--jobs 1` against `--jobs=1`... both quick; `-j1` goes
    to click): the same stdout, stderr and exit code, findings, warnings and errors included."""
    (tmp_path / "run.sh").write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=$N\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    for argv in (["run.sh", "missing.sh"], ["empty"], ["--format", "json", "run.sh"]):
        quick = _run(["lint", "--no-config", "-j", "1", *argv], tmp_path)
        slow = _run(["lint", "--no-config", "-j1", *argv], tmp_path)
        assert (quick.returncode, quick.stdout, quick.stderr) == (slow.returncode, slow.stdout, slow.stderr), argv
