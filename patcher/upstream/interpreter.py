"""`--python`: the one meaning every command gives it, and the one way rlpatch asks that interpreter.

The value is what starts the target Python, split as a shell splits it: an interpreter
(`/venv/bin/python3`), a launcher prefix (`uv run --frozen python3`, `/venv/bin/python -I`), or a
venv folder (its `bin/python`). doctor, dumps, apply/verify/revert, lint and gen all read it with
`interpreter_argv`, so one value works in every command, or fails in each with the same message;
and `ask_interpreter` is the one way to run the shared probe (`target_probe`) in it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Callable, NamedTuple, TypeVar

from rlpatch.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])


def interpreter_argv(text: str, option: str = "--python") -> tuple[str, ...]:
    """The argv prefix that starts the interpreter `text` names (checked for shape, not run)."""
    try:
        argv = shlex.split(text)
    except ValueError as err:
        raise InputError(f"{option} {text!r}: {err}") from None
    if not argv:
        raise InputError(f"{option}: empty")
    if len(argv) == 1 and os.path.isdir(argv[0]):
        candidate = os.path.join(argv[0], "bin", "python")
        if not os.path.exists(candidate):
            raise InputError(f"{option} {text}: a folder without bin/python (give the interpreter or a venv)")
        argv = [candidate]
    return tuple(argv)


def absent_program(argv: Sequence[str], path: str | None = None) -> str | None:
    """The first word of `argv` when this machine has no such program (`uv` not installed), else None."""
    import shutil

    program = argv[0]
    if os.sep in program:
        return None if os.path.exists(program) else program
    return None if shutil.which(program, path=path) else program


def require_interpreter(text: str, option: str = "--python", where: str = "") -> tuple[str, ...]:
    """`interpreter_argv`, refusing a program this machine does not have (for commands that run it now);
    `where` names the machine in the message (a Ray node: " on this node")."""
    argv = interpreter_argv(text, option)
    if absent_program(argv) is not None:
        raise InputError(f"{option} {text}: no such interpreter{where}")
    return argv


def single_path(text: str) -> str | None:
    """The interpreter's path when `text` is one (no launcher words), else None."""
    argv = interpreter_argv(text)
    return argv[0] if len(argv) == 1 else None


def ask_interpreter(text: str, distributions: Mapping[str, str], timeout: float, option: str = "--python") -> dict:
    """The shared probe's answer (`target_probe`) about `distributions` ({distribution: top-level
    module}) in the interpreter `text` starts, bounded by `timeout` seconds."""
    import subprocess  # here: the lint path imports this module and rarely runs a probe

    from rlpatch.upstream import target_probe

    argv = interpreter_argv(text, option)
    try:
        result = target_probe.run_bounded(target_probe.probe_command(argv, distributions), timeout,
                                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    except FileNotFoundError:
        raise InputError(f"{option} {text}: no such interpreter") from None
    except (OSError, subprocess.TimeoutExpired) as err:
        raise InputError(f"{option} {text}: cannot run it ({err})") from None
    answer = target_probe.read_answer(result.stdout)
    if answer is None:
        if result.returncode != 0:
            raise InputError(f"{option} {text}: the probe failed ({target_probe.last_words(result)})")
        raise InputError(f"{option} {text}: the probe printed no answer")
    return answer


class TargetOption(NamedTuple):
    """One option that names the environment that will run verl, declared once for every command."""

    flag: str
    dest: str
    metavar: str
    meaning: str

    def help(self, default: str | None = None, use: str | None = None) -> str:
        """The option's help: its meaning, what this command uses it for, and its default here."""
        return self.meaning + (f" ({use})" if use else "") + (f"; default: {default}" if default else "") + "."

    def click_option(self, default: str | None = None, use: str | None = None) -> Callable[[F], F]:
        """The click decorator of this option (click is imported by the command lines only)."""
        import click

        # A tree is a path (the quick lint reader and shell completion take it as one); `--python` is a command prefix.
        kind = click.Path() if self.metavar == "DIR" else None
        return click.option(self.flag, self.dest, type=kind, metavar=self.metavar, help=self.help(default, use))


# The target options, as `apply`, `verify`, `lint`, `gen`, `doctor` and `dumps` declare them.
TARGET_OPTIONS: dict[str, TargetOption] = {
    option.dest: option for option in (
        TargetOption("--python", "python", "PY|PREFIX", "The Python to use: an interpreter, a launcher prefix ('uv run "
                     "--frozen python3', '/venv/bin/python -I') or a venv folder"),
        TargetOption("--verl-root", "verl_root", "DIR", "The verl tree that will run: a git checkout, or the "
                     "site-packages that holds verl/"),
        TargetOption("--sglang-root", "sglang_root", "DIR", "The SGLang tree that will run: the folder holding sglang/"),
        TargetOption("--vllm-ascend-root", "vllm_ascend_root", "DIR", "The vLLM-Ascend tree that will run: the "
                     "folder holding vllm_ascend/"),
    )
}
