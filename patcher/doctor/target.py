"""Which Python really runs verl: `--python`, else the launcher of the verl command in `--script`.

The script is read through the front end (`rlpatch.shell.api`), never run: its verl launch gives the
launcher words (`python3`, `"${LAUNCH[@]}"`, `uv run --frozen python3`, ...), the environment the
launch exports, and the run model gives verl >= 0.9.1's `ray_kwargs.ray_init.runtime_env.py_executable`,
the interpreter of the Ray *workers*, which is the one that imports msprobe for the dumps.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from rlpatch.doctor.probe import Interpreter
from rlpatch.errors import InputError
from rlpatch.shell.api import NEWEST_VERL, Launch, Run, env_assignments, script_runs, word_text
from rlpatch.upstream.api import absent_program, interpreter_argv

PY_EXECUTABLE_KEY = "ray_kwargs.ray_init.runtime_env.py_executable"
# Launchers that run the rest of their command line in a project's environment.
ENV_RUNNERS = {"uv": "run", "conda": "run", "pixi": "run", "poetry": "run", "pdm": "run", "hatch": "run", "mamba": "run"}
# The variables of the script's launch that decide what the interpreter imports.
PASSED_ENV_PREFIXES = ("ASCEND_",)
PASSED_ENV = ("PYTHONPATH", "LD_LIBRARY_PATH")


@dataclass
class ScriptFacts:
    """What doctor needs from the launch script."""

    path: str
    run: Run
    launch_at: str  # file:line of the verl command
    driver: Interpreter  # the launcher of the verl command
    workers: Interpreter | None  # `py_executable`, when the script sets it to an interpreter
    workers_null_at: str | None = None  # `py_executable=null` (Ray's default: the driver's Python), where


def python_option(text: str, cwd: str | None, env: dict[str, str]) -> Interpreter:
    """`--python`: an interpreter, a launcher prefix (`uv run --frozen python3`), or a venv folder."""
    return Interpreter(interpreter_argv(text), f"--python {text}", cwd, tuple(sorted(env.items())))


def current_interpreter() -> Interpreter:
    return Interpreter((sys.executable,), "this rlpatch's Python (no --python, no --script)")


def env_option(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`--env K=V` (repeatable), spelled as `rlpatch lint` and `rlpatch gen` take it."""
    return env_assignments(pairs)


def read_script(path: str, given_env: dict[str, str] | None = None) -> ScriptFacts:
    """The verl launch of `path` and the interpreters it starts, the script started from this shell's
    environment plus `given_env` (`--env`: it picks the path of an `if` as `K=V bash run.sh` would)."""
    folder = str(Path(path).resolve().parent)
    given_env = given_env or {}
    # The script starts from this shell's environment, where an unset PYTHONPATH is empty, not unknown.
    start_env = {**{name: "" for name in PASSED_ENV}, **os.environ, "PWD": folder, **given_env}
    evaluation, runs = script_runs(path, NEWEST_VERL, env=start_env)
    if not runs:
        raise InputError(f"{path}: no verl launch found (pass --python to say which interpreter runs verl)")
    launch, run = evaluation.launches[0], runs[0]
    where = f"{path}:{launch.command_span.line}"
    env = {**os.environ, **given_env, **exported_env(launch)}
    driver = Interpreter(tuple(launcher_python(launch, where)), f"the launcher of the verl command at {where}", folder,
                         tuple(sorted(env.items())))
    workers, null_at = None, None
    setting = run.setting(PY_EXECUTABLE_KEY)
    if setting.is_set and setting.known and setting.is_null():
        # verl hands `null` to ray.init, and Ray drops a None key: the workers run Ray's default, the driver's Python.
        null_at = f"{path}:{setting.span.line}"
    elif setting.is_set:
        if not setting.known or not setting.value:
            raise InputError(f"{path}:{setting.span.line}: {PY_EXECUTABLE_KEY} is not known statically; pass --python "
                             "or --env for the variables it comes from")
        workers = Interpreter(tuple(shlex.split(setting.value)), f"{PY_EXECUTABLE_KEY} at {path}:{setting.span.line}",
                              folder, driver.env)
    return ScriptFacts(path, run, where, driver, workers, null_at)


def absent_launcher(interpreter: Interpreter) -> str | None:
    """The first word of `interpreter` when this machine has no such program (`uv` not installed)."""
    path = dict(interpreter.env).get("PATH") if interpreter.env else None
    return absent_program(interpreter.argv, path)


def exported_env(launch: Launch) -> dict[str, str]:
    """The launch's PYTHONPATH, LD_LIBRARY_PATH and ASCEND_* values the script sets (known ones only)."""
    found = {}
    for name, value in launch.env.items():
        if name in PASSED_ENV or name.startswith(PASSED_ENV_PREFIXES):
            text = word_text(value.first())
            if text is not None:
                found[name] = text
    return found


def launcher_python(launch: Launch, where: str) -> list[str]:
    """The argv prefix that starts the Python of this launch (`-c SRC` is appended to it)."""
    words = [arg.text for arg in launch.launcher]
    if any(word is None for word in words):
        unknown = next(arg.display for arg in launch.launcher if arg.text is None)
        raise InputError(f"{where}: the launcher of the verl command is not known statically ({unknown}); pass --python")
    texts = [word for word in words if word is not None]
    python_at = max((i for i, word in enumerate(texts) if _is_python(word)), default=None)
    if python_at is None:
        return _shebang_python(texts, where)
    start = python_at
    for index in range(python_at):  # `uv run ... python3`: the runner sets up the environment
        if ENV_RUNNERS.get(Path(texts[index]).name) == (texts[index + 1] if index + 1 < len(texts) else None):
            start = index
            break
    return texts[start:python_at + 1]


def _is_python(word: str) -> bool:
    name = Path(word).name
    return name.startswith("python") and name[len("python"):].replace(".", "").isdigit() or name == "python"


def _shebang_python(texts: list[str], where: str) -> list[str]:
    """`torchrun ... -m verl...`: the interpreter in the launcher's `#!` line."""
    import shutil

    if not texts:
        raise InputError(f"{where}: the verl command has no launcher; pass --python")
    found = shutil.which(texts[0])
    line = ""
    if found:
        try:
            with open(found, "rb") as handle:
                line = handle.readline().decode(errors="replace")
        except OSError:
            line = ""
    if not line.startswith("#!"):
        raise InputError(f"{where}: cannot tell which Python {texts[0]} runs; pass --python")
    words = line[2:].split()
    return words[1:2] if words and Path(words[0]).name == "env" else words[:1]
