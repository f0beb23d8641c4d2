"""`rlpatch lint ARGS` read without click, for the cold start of a pre-commit hook.

click, with what it imports (inspect, uuid, datetime, gettext's catalogue search), is about a
fifth of a one-script lint's CPU time. `read_lint_args` reads the command lines that a hook and a
user type: the long options (`--opt VALUE`, `--opt=VALUE`), `-o`/`-S`/`-j` each followed by its
value, files, and `--` before extra overrides. Anything else (`--help`, an unknown or misspelt
option, a value click would refuse, an option given twice that takes one value, short options glued
together, a value that starts with `-`) gives None, and click reads the command line as always,
with its own messages. So this reader accepts a subset of what click accepts, and builds the same
`LintCommand` for it: tests/test_lint_quick_cli.py holds the table below to `lint_cmd`'s click
parameters and compares both readers on every option.

`lint_and_print` is what `rlpatch lint` does with its command, whichever reader built it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence

from rlpatch.lint.commands import LintCommand, run_lint, write_report
from rlpatch.lint.options import ScriptOptions
from rlpatch.output.api import shown
from rlpatch.shell.api import MODES

FLAG, OFF, VALUE, MANY, CHOICE, PATH, COUNT = "flag", "off", "value", "many", "choice", "path", "count"

# option -> (LintCommand or ScriptOptions field, kind, choices, case-sensitive choices)
OPTIONS: dict[str, tuple[str, str, tuple[str, ...], bool]] = {
    "--format": ("output_format", CHOICE, ("concise", "full", "json", "github", "sarif"), True),
    "--select": ("select", MANY, (), True),
    "--extend-select": ("extend_select", MANY, (), True),
    "--ignore": ("ignore", MANY, (), True),
    "--config": ("config_file", VALUE, (), True),
    "--force-exclude": ("force_exclude", FLAG, (), True),
    "--respect-gitignore": ("respect_gitignore", FLAG, (), True),
    "--no-respect-gitignore": ("respect_gitignore", OFF, (), True),
    "--fix": ("fix", FLAG, (), True),
    "--diff": ("diff", FLAG, (), True),
    "--unsafe-fixes": ("unsafe_fixes", FLAG, (), True),
    "--quiet": ("quiet", FLAG, (), True),
    "--fail-on": ("fail_on", CHOICE, ("E", "W", "I", "error", "warning", "info"), False),
    "--severity": ("severity", CHOICE, ("error", "warning", "info"), False),
    "--statistics": ("statistics", FLAG, (), True),
    "--output-file": ("output_file", VALUE, (), True),
    "--show-settings": ("show_settings", FLAG, (), True),
    "--color": ("color", CHOICE, ("auto", "always", "never"), True),
    "--exit-zero": ("exit_zero", FLAG, (), True),
    "--allow-level": ("allow_level", MANY, (), True),
    "--skip-non-verl": ("skip_non_verl", FLAG, (), True),
    "--jobs": ("jobs", COUNT, (), True),
    "--mode": ("mode", CHOICE, tuple(MODES), True),
    "--env": ("env", MANY, (), True),
    "--use-env": ("use_env", FLAG, (), True),
    "--verl-root": ("verl_root", PATH, (), True),
    "--verl-version": ("verl_version", VALUE, (), True),
    "--config-root": ("config_root", PATH, (), True),
    "--python": ("python", VALUE, (), True),
    "--sglang-root": ("sglang_root", PATH, (), True),
    "--vllm-ascend-root": ("vllm_ascend_root", PATH, (), True),
    "--no-config": ("no_config", FLAG, (), True),
}
SHORT = {"-o": "--output-file", "-S": "--severity", "-j": "--jobs", "-q": "--quiet"}
_POSITIVE = re.compile(r"[1-9][0-9]*")  # click's IntRange(min=1) accepts more spellings: those go to click


def read_lint_args(args: Sequence[str]) -> LintCommand | None:
    """The command of `rlpatch ARGS` when ARGS is a `lint` command line this reader knows exactly
    as click reads it; None for everything else (click reads it)."""
    if not args or args[0] != "lint":
        return None
    words = list(args[1:])
    extra: tuple[str, ...] = ()
    if "--" in words:  # as ExtraArgsCommand: what follows the first `--` goes to the script's "$@"
        index = words.index("--")
        words, extra = words[:index], tuple(words[index + 1:])
    values: dict[str, object] = {}
    files: list[str] = []
    while words:
        word = words.pop(0)
        if word[:1] != "-" or word == "-":
            files.append(word)
            continue
        name, equals, attached = word.partition("=")
        name = SHORT.get(name, name) if not equals else name
        if name not in OPTIONS:
            return None
        field, kind, choices, case_sensitive = OPTIONS[name]
        if kind in (FLAG, OFF):
            if equals:
                return None  # click: "Option '--exit-zero' does not take a value."
            values[field] = kind == FLAG  # the last of --respect-gitignore / --no-respect-gitignore wins, as in click
            continue
        if equals:
            value = attached
        elif words and words[0][:1] != "-":
            value = words.pop(0)
        else:
            return None
        converted = _converted(value, kind, choices, case_sensitive)
        if converted is None:
            return None
        if kind == MANY:
            values[field] = (*values.get(field, ()), converted)  # type: ignore[misc]
        elif field in values:
            return None
        else:
            values[field] = converted
    if (values.get("fix") and values.get("diff")) or ("config_file" in values and values.get("no_config")):
        return None  # click's callback refuses the pair with its usage message
    script = {field: values.pop(field) for field in ScriptOptions._fields if field in values}
    return LintCommand(files=tuple(files), script=ScriptOptions(**script, extra=extra), **values)  # type: ignore[arg-type]


def _converted(value: str, kind: str, choices: tuple[str, ...], case_sensitive: bool) -> object:
    """The value as click's parameter type gives it, or None where click would refuse it (or might)."""
    if kind == CHOICE:
        wanted = value if case_sensitive else value.casefold()
        return next((choice for choice in choices if (choice if case_sensitive else choice.casefold()) == wanted), None)
    if kind == COUNT:
        return int(value) if _POSITIVE.fullmatch(value) else None
    if kind == PATH:
        return value if _click_path_accepts(value) else None
    return value


def _click_path_accepts(path: str) -> bool:
    """click.Path() with its defaults: absent is fine, present must be readable."""
    try:
        os.stat(path)
    except OSError:
        return True
    except ValueError:
        return False  # an embedded NUL: click's own error
    return os.access(path, os.R_OK)


def _say(line: str) -> None:
    """One line on stderr, as click.echo(err=True) writes it (importing click for it would cost a fifth of
    a one-script lint; the lines are plain text, shown escaped)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def lint_and_print(command: LintCommand) -> int:
    """Lint, print the warnings and per-file errors on stderr and the report on stdout (or in
    `--output-file`), and return the exit code."""
    outcome = run_lint(command)
    for warning in outcome.warnings:
        _say(f"rlpatch lint: warning: {shown(warning)}")
    for error in outcome.errors:
        _say(f"rlpatch: error: {shown(error)}")
    if not command.quiet:  # -q: the notes go (as ruff's -q), the warnings and errors above stay
        for note in outcome.notes:  # which verl RL3xx checked against: on most runs with no verl named
            _say(f"rlpatch lint: {shown(note)}")
    write_report(outcome.report, command.output_file)
    for note in () if command.quiet else outcome.fix_notes:
        _say(note)
    return outcome.exit_code
