"""`rlpatch lint --fix` and `--diff`: the findings' fixes applied to the scripts' own text.

A fix (`rlpatch.lint.rule.Fix`) is a set of edits at spans of the script as written: the token of an
override, the value of a variable. Each edit says which text it replaces, and is applied only if the
file still reads that text there (a value assembled from pieces, a quoted word the span does not
cover exactly: no edit, never a guess). Of two fixes whose edits overlap, the first (in file order)
is applied and the other waits for the next run, as ruff does. Only `safe` fixes are applied unless
`--unsafe-fixes`. A script is written whole or not at all (temporary, fsync, rename), keeping its
mode; a script that is a symbolic link is never written through (one line, exit 2).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from typing import NamedTuple

from rlpatch.errors import InputError
from rlpatch.lint.rule import Edit, Finding, Fix
from rlpatch.shell.api import SourceFile


class FixedFile(NamedTuple):
    """One script's text before and after the fixes that applied, and how many applied."""

    path: str
    before: str
    after: str
    applied: int


def applicable(fix: Fix | None, unsafe: bool) -> bool:
    return fix is not None and (fix.applicability == "safe" or unsafe)


def fixed_files(findings: Iterable[Finding], unsafe: bool) -> list[FixedFile]:
    """Every file a fix edits, with its new text (files whose fixes all failed to apply: left out)."""
    by_file: dict[str, list[Fix]] = {}
    for finding in sorted(findings, key=Finding.sort_key):
        if applicable(finding.fix, unsafe) and finding.fix is not None:
            files = {edit.span.file for edit in finding.fix.edits}
            if len(files) == 1 and "-" not in files:  # a fix that spans files (or stdin) is not applied
                by_file.setdefault(files.pop(), []).append(finding.fix)
    out = []
    for path, fixes in by_file.items():
        source, bom = _read(path)
        after, applied = apply_fixes(source, fixes)
        if applied:
            out.append(FixedFile(path, bom + source.text, bom + after, applied))
    return out


def apply_fixes(source: SourceFile, fixes: list[Fix]) -> tuple[str, int]:
    """The source's text with the fixes that apply (their edits match the text and overlap no earlier fix)."""
    text = source.text
    taken: list[tuple[int, int]] = []
    chosen: list[tuple[int, int, str]] = []
    applied = 0
    for fix in fixes:
        ranges = [_range(edit, source) for edit in fix.edits]
        if any(r is None for r in ranges):
            continue
        located = [(r[0], r[1], edit.replacement) for r, edit in zip(ranges, fix.edits, strict=True) if r is not None]
        if any(_overlaps(start, end, taken) for start, end, _ in located):
            continue
        taken += [(start, end) for start, end, _ in located]
        chosen += located
        applied += 1
    for start, end, replacement in sorted(chosen, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text, applied


def unified_diff(fixed: FixedFile) -> str:
    return "".join(difflib.unified_diff(fixed.before.splitlines(keepends=True), fixed.after.splitlines(keepends=True),
                                        fixed.path, fixed.path))


def write_fixed(fixed: FixedFile) -> None:
    """Replace the script with its fixed text, whole or not at all, keeping its mode."""
    from rlpatch.output.api import atomic_write

    if os.path.islink(fixed.path):
        raise InputError(f"{fixed.path}: a symbolic link: not fixed (fix the file it points at)")
    try:
        mode = os.stat(fixed.path).st_mode & 0o7777
        atomic_write(fixed.path, fixed.after.encode("utf-8"), mode=mode, follow_link=False, make_parents=False)
    except OSError as err:
        raise InputError(f"{fixed.path}: cannot write the fixes ({err.strerror or err})") from None


def _read(path: str) -> tuple[SourceFile, str]:
    """The script as the linter read it (spans count from after a byte-order mark), and that mark."""
    from rlpatch.shell.api import MAX_SCRIPT_BYTES, read_regular

    data = read_regular(path, MAX_SCRIPT_BYTES, "a launch script")
    return SourceFile.from_bytes(path, data), "\ufeff" if data.startswith(b"\xef\xbb\xbf") else ""


def _range(edit: Edit, source: SourceFile) -> tuple[int, int] | None:
    """The character range of an edit, if the text there is still what the edit replaces."""
    span = edit.span
    start, end = source.offset(span.line, span.column), source.offset(span.end_line, span.end_column)
    if start is None or end is None or end < start or source.text[start:end] != edit.original:
        return None
    return start, end


def _overlaps(start: int, end: int, taken: list[tuple[int, int]]) -> bool:
    return any(start < other_end and other_start < end or start == other_start for other_start, other_end in taken)


__all__ = ["FixedFile", "applicable", "apply_fixes", "fixed_files", "unified_diff", "write_fixed"]
