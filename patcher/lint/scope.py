"""`rlpatch lint --skip-non-verl`: leave alone the files that are not verl launch scripts or msprobe configs.

A pre-commit hook sees every shell file of a repository (`install.sh`, CI helpers), and RL001 (no
verl entry point) fails each of them. With the flag, a file is skipped, with no finding at all, when
the linter found no verl launch in it (RL001) *and* its text never names verl: no `verl` word
(`verl.trainer...`, `VERL_ROOT`, `verl/`), no `actor_rollout_ref` override, no `msprobe`. A script that
looks like a verl script but hides its launch (`bash "$TMP" actor_rollout_ref...`) keeps its RL001.

The hook sees every JSON file too (`package.json`, `tsconfig.json`), and lint reads each `.json` as an
msprobe config. With the flag, a JSON file is skipped unless it is one: a top-level object with one of
the keys that only msprobe's config has (`task`, `level`, `dump_path`, a task section such as
`statistics`), or a name that says msprobe when it does not parse (a broken msprobe config still fails).
"""

from __future__ import annotations

import os
import re

from rlpatch.lint.config_files import is_config_path
from rlpatch.lint.engine import FileResult

# `verl` as a word of its own (not `overlay`); `_`, `.`, `/`, `-` and digits may touch it. Compiled
# (and kept by `re`) on first use: only --skip-non-verl asks, and this module is on every lint's start.
_NAMES_VERL = r"(?<![a-z])verl(?![a-z])|actor_rollout_ref|msprobe"


def names_verl(text: str) -> bool:
    return re.search(_NAMES_VERL, text, re.IGNORECASE) is not None


def _text(path: str, stdin_text: bytes | None) -> str:
    if path == "-":
        return (stdin_text or b"").decode("utf-8", errors="replace")
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return "verl"  # unreadable now: keep what lint said rather than hide it


# Keys of msprobe's config.json that other JSON files do not use at the top level (`name`, `version`,
# `scripts`, `step` or `precision` could be anybody's).
_MSPROBE_MARKS = frozenset({"task", "level", "dump_path", "async_dump", "dump_enable", "statistics", "tensor",
                            "acc_check", "nan_check", "diff_check", "overflow_check", "free_benchmark"})


def is_msprobe_config_text(path: str, text: str) -> bool:
    """Whether a JSON file given to the hook is an msprobe config (see the module docstring)."""
    import json

    try:
        data = json.loads(text)
    except ValueError:  # broken JSON (or an integer past Python's digit limit): msprobe's only by name
        return "msprobe" in os.path.basename(path).lower()
    return isinstance(data, dict) and not _MSPROBE_MARKS.isdisjoint(data)


def skip_non_verl(results: list[FileResult], stdin_text: bytes | None = None) -> list[FileResult]:
    """The results, with the findings of every file that is neither a verl script nor an msprobe
    config dropped."""
    for result in results:
        if result.error:
            continue
        if is_config_path(result.path):
            if not is_msprobe_config_text(result.path, _text(result.path, stdin_text)):
                result.findings = []
        elif any(finding.code == "RL001" for finding in result.findings):
            if not names_verl(_text(result.path, stdin_text)):
                result.findings = []
    return results


# Folders a directory walk never enters, as ruff does: hidden ones (`.git`, `.venv`) and the usual
# vendored or generated ones.
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "__pypackages__", "venv", "site-packages"})


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_DIRS


def expand_paths(paths: list[str] | tuple[str, ...]) -> tuple[list[str], set[str]]:
    """The files to lint, and which of them a directory walk found: an explicit file (or `-`) as
    given, whatever its name; a directory, its `*.sh` files recursively in sorted order, hidden and
    vendored folders skipped. A path that does not exist is kept, so it is reported as an unreadable
    input."""
    files: list[str] = []
    walked: set[str] = set()
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            files.append(path)
            continue
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(name for name in dirs if not _skipped(name))
            found = [os.path.normpath(os.path.join(root, name)) for name in sorted(names) if name.endswith(".sh")]
            files.extend(found)
            walked.update(found)
    unique = list(dict.fromkeys(files))  # `rlpatch lint . run.sh`: run.sh once
    return unique, walked - set(paths)


def check_output_file(output: str, inputs: tuple[str, ...] | list[str]) -> None:
    """`--output-file`: a regular file (new or replaced) that is none of the inputs, in an existing
    folder; else one InputError before anything is linted or written."""
    import stat

    from rlpatch.errors import InputError

    def refuse(why: str) -> InputError:
        return InputError(f"--output-file {output}: {why} (nothing written)")

    try:
        info = os.stat(output)  # follows symlinks: what a write would reach
    except FileNotFoundError:
        parent = os.path.dirname(output) or "."
        if not os.path.isdir(parent):
            raise refuse(f"no folder {parent}") from None
        return
    except OSError as err:
        raise refuse(f"cannot check it ({err.strerror or err})") from None
    if stat.S_ISDIR(info.st_mode):
        raise refuse("is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise refuse("not a regular file (a report is written only to a file)")
    for path in inputs:
        try:
            if path != "-" and os.path.samestat(info, os.stat(path)):
                raise refuse(f"is the input {path}")
        except OSError:
            continue
