"""`[tool.rlpatch]` in pyproject.toml, found by walking up from each linted file (like Ruff).

The nearest pyproject.toml that has a `[tool.rlpatch]` table wins; keys may be spelled with `-`
or `_`: select, ignore, fail-on, mode, verl-version, verl-root, allow-level, env (a table or a
list of KEY=VAL), config-root, docs-url (where the rule pages are published: the `url` of each
finding, `rlpatch.lint.docs.docs_url`). Command-line options override it.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from rlpatch.errors import InputError

KNOWN_KEYS = {"select", "ignore", "fail_on", "mode", "verl_version", "verl_root", "allow_level", "env", "config_root",
              "exit_zero", "docs_url"}


def _toml_loads(text: str) -> dict[str, Any]:
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
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


def _read_table(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = _toml_loads(handle.read())
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: cannot read [tool.rlpatch] ({err})") from None
    table = data.get("tool", {}).get("rlpatch")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise InputError(f"{path}: [tool.rlpatch] must be a table")
    normalised = {key.replace("-", "_"): value for key, value in table.items()}
    unknown = sorted(set(normalised) - KNOWN_KEYS)
    if unknown:
        raise InputError(f"{path}: unknown [tool.rlpatch] key(s): {', '.join(unknown)}")
    return normalised
