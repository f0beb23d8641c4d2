"""Which files `rlpatch lint` reads, and which rules each file keeps, as ruff users expect.

- `exclude` (`[tool.rlpatch]`): glob patterns of files and folders a directory walk leaves out. A
  pattern without `/` matches any part of the path (`build`, `*_old.sh`); one with `/` matches the path
  relative to the folder of the config file that sets it (`scripts/legacy/*`, `**/tmp/*.sh`). A file
  named on the command line is linted anyway, unless `--force-exclude` (what a pre-commit hook wants:
  it names every staged file).
- `.gitignore`: a directory walk inside a git work tree leaves out what git ignores (`git check-ignore`,
  so every ignore file git reads counts, and a tracked file is never ignored); `respect-gitignore =
  false` or `--no-respect-gitignore` turns it off. Outside a work tree, or without git, nothing is left out.
- `per-file-ignores`: a table of glob pattern -> codes (or prefixes) dropped for the files it matches
  (the same pattern rules as `exclude`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase

# `git check-ignore` on a big tree takes well under a second; a hung git is not waited for.
GIT_TIMEOUT_SECONDS = 30


def matches(path: str, pattern: str, base: str) -> bool:
    """Whether `path` (a file) matches one exclude/per-file-ignores pattern of a config in `base`."""
    pattern = pattern.strip()
    if not pattern:
        return False
    relative = os.path.relpath(os.path.abspath(path), base).replace(os.sep, "/")
    bare = pattern.strip("/")
    if "/" not in bare:  # a name: any part of the path
        return any(fnmatchcase(part, bare) for part in relative.split("/"))
    candidates = [bare, bare.removeprefix("**/")] if bare.startswith("**/") else [bare]
    # A folder pattern covers everything under it; `**` is `*` for fnmatch (it crosses `/`).
    return any(fnmatchcase(relative, c) or fnmatchcase(relative, c.rstrip("*").rstrip("/") + "/*") for c in candidates)


def excluded(path: str, patterns: Sequence[str], base: str) -> bool:
    return path != "-" and any(matches(path, pattern, base) for pattern in patterns)


def ignored_codes(path: str, per_file_ignores: Mapping[str, Sequence[str]], base: str) -> list[str]:
    """The codes (or prefixes) `per-file-ignores` drops for `path`."""
    if path == "-":
        return []
    return [code.upper() for pattern, codes in per_file_ignores.items() if matches(path, pattern, base) for code in codes]


def git_ignored(paths: Iterable[str]) -> set[str]:
    """The paths git ignores (each asked in its own work tree); nothing outside a work tree or without git."""
    by_folder: dict[str, list[str]] = {}
    for path in paths:
        by_folder.setdefault(os.path.dirname(os.path.abspath(path)), []).append(path)
    ignored: set[str] = set()
    asked: dict[str, list[str]] = {}
    for folder, names in by_folder.items():
        top = _work_tree(folder)
        if top is not None:
            asked.setdefault(top, []).extend(names)
    for top, names in asked.items():
        ignored |= _check_ignore(top, names)
    return ignored


def _work_tree(folder: str) -> str | None:
    """The top of the git work tree holding `folder`, found by its `.git` (no process per folder)."""
    current = folder
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _check_ignore(top: str, paths: list[str]) -> set[str]:
    import subprocess  # a directory walk in a work tree only: a one-script lint (a pre-commit hook) never runs git

    payload = "\0".join(os.path.abspath(path) for path in paths) + "\0"
    try:
        proc = subprocess.run(["git", "-C", top, "check-ignore", "--stdin", "-z"], input=payload.encode(),
                              capture_output=True, timeout=GIT_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    if proc.returncode not in (0, 1):  # 128: not a work tree after all, a broken repository
        return set()
    answered = {name for name in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if name}
    return {path for path in paths if os.path.abspath(path) in answered}


__all__ = ["excluded", "git_ignored", "ignored_codes", "matches"]
