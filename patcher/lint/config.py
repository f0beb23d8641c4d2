"""`[tool.rlpatch]` in pyproject.toml, found by walking up from each linted file (like Ruff).

The nearest pyproject.toml that has a `[tool.rlpatch]` table wins (or the file given with `--config
FILE`: its `[tool.rlpatch]`, else its top level, as a `ruff.toml` is read); keys may be spelled with `-`
or `_`: select, extend-select, ignore, per-file-ignores, exclude, respect-gitignore, fail-on,
sarif-severity (the lowest severity `--format sarif` writes, when -S is not given), mode,
verl-version, verl-root, allow-level, env (a table or a list of KEY=VAL), config-root, docs-url (where
the rule pages are published: the `url` of each finding, `rlpatch.lint.docs.docs_url`). Command-line
options override it. The table keeps the path of its file as `__path__`: exclude and
per-file-ignores patterns are relative to that file's folder.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from typing import Any

from rlpatch.errors import InputError

KNOWN_KEYS = {"select", "ignore", "fail_on", "mode", "verl_version", "verl_root", "allow_level", "env", "config_root",
              "exit_zero", "docs_url", "extend_select", "exclude", "per_file_ignores", "respect_gitignore",
              "sarif_severity"}
PATH_KEY = "__path__"  # the file the table was read from (not a user key)


def table_base(table: dict[str, Any]) -> str:
    """The folder exclude and per-file-ignores patterns are relative to (the current one without a file)."""
    path = table.get(PATH_KEY)
    return os.path.dirname(os.path.abspath(path)) if path else os.getcwd()


def table_name(table: dict[str, Any]) -> str:
    """How messages name a table: `FILE: [tool.rlpatch]`, or FILE for a dedicated config file."""
    path = str(table.get(PATH_KEY, "pyproject.toml"))
    return path if table.get("__top_level__") else f"{path}: [tool.rlpatch]"


def _toml_loads(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:  # never silently {}: the table would be ignored
            raise ValueError("reading TOML on Python < 3.11 needs the tomli package: pip install tomli") from None
    return tomllib.loads(text)


@lru_cache(maxsize=256)
def find_config(directory: str) -> tuple[str | None, dict[str, Any]]:
    """(pyproject path, normalised [tool.rlpatch] table) for files in `directory`."""
    current = os.path.abspath(directory)
    while True:
        candidate = os.path.join(current, "pyproject.toml")
        if os.path.isfile(candidate):
            table = _read_table(candidate)
            if table is not None:
                return candidate, table
        parent = os.path.dirname(current)
        if parent == current:
            return None, {}
        current = parent


# pyproject.toml files are a few KB; one over this is not read (and a FIFO or device never is).
MAX_PYPROJECT_BYTES = 1024 * 1024
_FAIL_ON = ("E", "W", "I", "ERROR", "WARNING", "INFO")


@lru_cache(maxsize=16)
def read_config_file(path: str) -> dict[str, Any]:
    """`--config FILE`: its `[tool.rlpatch]` table, else its top level (a dedicated TOML file)."""
    if not os.path.isfile(path):
        raise InputError(f"--config {path}: no such file")
    table = _read_table(path, top_level=True)
    return table if table is not None else {PATH_KEY: path, "__top_level__": True}


def _read_table(path: str, top_level: bool = False) -> dict[str, Any] | None:
    from rlpatch.shell.api import read_regular

    try:
        data = _toml_loads(read_regular(path, MAX_PYPROJECT_BYTES, "a pyproject.toml").decode("utf-8"))
    except InputError as err:
        raise InputError(f"{path}: cannot read [tool.rlpatch] ({err.message.removeprefix(path + ': ')})") from None
    except (ValueError, RecursionError) as err:  # TOML errors, not UTF-8, nested too deeply
        reason = "nested too deeply" if isinstance(err, RecursionError) else str(err).splitlines()[0]
        raise InputError(f"{path}: cannot read [tool.rlpatch] ({reason})") from None
    tool = data.get("tool", {})
    table = tool.get("rlpatch") if isinstance(tool, dict) else None
    if table is None and top_level and os.path.basename(path) != "pyproject.toml":
        table = {key: value for key, value in data.items() if key != "tool"}
        top = True
    else:
        top = False
    if table is None:
        return None
    if not isinstance(table, dict):
        raise InputError(f"{path}: [tool.rlpatch] must be a table")
    normalised = {key.replace("-", "_"): value for key, value in table.items()}
    unknown = sorted(set(normalised) - KNOWN_KEYS)
    if unknown:
        raise InputError(f"{path}: unknown [tool.rlpatch] key(s): {', '.join(unknown)}")
    for key, value in normalised.items():
        problem = _type_problem(key, value)
        if problem:
            raise InputError(f"{path}: [tool.rlpatch] {key.replace('_', '-')} {problem}")
    normalised[PATH_KEY] = path
    if top:
        normalised["__top_level__"] = True
    return normalised


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "a table"}.get(type(value), type(value).__name__)


def _strings(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(item, str) for item in value))


def _type_problem(key: str, value: Any) -> str | None:
    """What is wrong with the type (or value) of one key, or None. The values themselves (rule codes,
    modes, versions, paths) are checked where they are used, with the same messages as the options."""
    if key in ("select", "ignore", "allow_level", "extend_select", "exclude"):
        return None if _strings(value) else f"must be a string or an array of strings, not {_kind(value)}"
    if key in ("mode", "verl_version", "verl_root", "config_root"):
        return None if isinstance(value, str) else f"must be a string, not {_kind(value)}"
    if key == "sarif_severity":
        if not isinstance(value, str) or value.lower() not in ("error", "warning", "info"):
            return f"must be one of \"error\", \"warning\", \"info\", not {value!r}"
        return None
    if key == "fail_on":
        if not isinstance(value, str) or value.upper() not in _FAIL_ON:
            return f"must be one of \"E\", \"W\", \"I\" (or error, warning, info), not {value!r}"
        return None
    if key == "per_file_ignores":
        if not isinstance(value, dict):
            return f"must be a table (\"PATTERN\" = [\"CODE\", ...]), not {_kind(value)}"
        wrong = [pattern for pattern, codes in value.items() if not _strings(codes)]
        return f"{wrong[0]!r} must be a string or an array of strings" if wrong else None
    if key in ("exit_zero", "respect_gitignore"):
        return None if isinstance(value, bool) else f"must be true or false, not {_kind(value)}"
    if key == "env":
        scalar = (str, int)
        if isinstance(value, dict):
            wrong = [name for name, item in value.items() if isinstance(item, bool) or not isinstance(item, scalar)]
            return f"{wrong[0]} must be a string or an integer, not {_kind(value[wrong[0]])}" if wrong else None
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return None
        return f"must be a table (NAME = \"value\") or an array of \"NAME=value\" strings, not {_kind(value)}"
    return None
