"""`rlpatch lint config.json`: an msprobe config given on its own, checked as msprobe reads it.

A `.json` path given to lint is an msprobe config, not a script (`is_config_path`). The msprobe config
wing checks it alone (no run adds anything: msprobe needs its dump_path), once; each selected rule
that judges such files (the msprobe-config family's `config_file_findings`) keeps the findings of the
kinds it owns under its own code, so no code is stated here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

from rlpatch.errors import InputError

if TYPE_CHECKING:
    from rlpatch.lint.rule import Finding, LintRule
    from rlpatch.msprobe_config.api import ConfigFinding


def lint_config_file(path: str, rules: Iterable[LintRule]) -> list[Finding]:
    """The selected rules' findings in the config file alone. A file that is not a regular file or is
    over the config size limit is an InputError."""
    from rlpatch.lint.rule import Finding
    from rlpatch.msprobe_config import api as msprobe_config

    try:
        found = msprobe_config.check_bytes(msprobe_config.read_config(path), path, msprobe_config.CheckOptions())
    except InputError as err:  # the parser's own errors do not know the file
        raise InputError(err.message if err.message.startswith(f"{path}:") else f"{path}: {err.message}") from None
    findings: list[Finding] = []
    for rule in rules:
        # A hook of the msprobe-config family's rules (rules/_msprobe_config.py), not of every rule.
        judge: Callable[[list[ConfigFinding]], list[Finding]] | None = getattr(rule, "config_file_findings", None)
        if judge is not None:
            findings.extend(judge(found))
    return sorted(findings, key=Finding.sort_key)


def is_config_path(path: str) -> bool:
    """Files `rlpatch lint` reads as msprobe configs instead of scripts."""
    return path != "-" and path.endswith(".json")
