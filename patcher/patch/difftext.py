"""Unified diffs that `git apply` and `patch -p1` turn into exactly the bytes apply writes.

difflib's `unified_diff` cannot say "no newline at end of file" and drops the `\\r` of CRLF files
in its header logic, so hunks are formatted here from difflib's grouped opcodes.
"""

from __future__ import annotations

import difflib

NO_NEWLINE = "\\ No newline at end of file\n"


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8").splitlines(keepends=True)


def _range(start: int, length: int) -> str:
    # Unified diff convention: an empty range names the line before it.
    if length == 0:
        return f"{start},0"
    return f"{start + 1}" if length == 1 else f"{start + 1},{length}"


def _emit(prefix: str, line: str, out: list[str]) -> None:
    if line.endswith("\n"):
        out.append(prefix + line)
    else:
        out.append(prefix + line + "\n")
        out.append(NO_NEWLINE)


def unified_diff(relative: str, before: bytes | None, after: bytes | None, context: int = 3) -> str:
    """The diff of one file, with git headers; `None` on either side means the file is absent."""
    old, new = _lines(before or b""), _lines(after or b"")
    if old == new and (before is None) == (after is None):
        return ""
    out = [f"diff --git a/{relative} b/{relative}\n"]
    if before is None:
        out.append("new file mode 100644\n")
    elif after is None:
        out.append("deleted file mode 100644\n")
    out.append(f"--- {'/dev/null' if before is None else 'a/' + relative}\n")
    out.append(f"+++ {'/dev/null' if after is None else 'b/' + relative}\n")
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2] - first[1])} +{_range(first[3], last[4] - first[3])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in old[i1:i2]:
                    _emit(" ", line, out)
                continue
            for line in old[i1:i2]:
                _emit("-", line, out)
            for line in new[j1:j2]:
                _emit("+", line, out)
    return "".join(out)
