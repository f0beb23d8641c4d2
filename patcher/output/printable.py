"""Untrusted text on a terminal: shown escaped, so that it can neither forge lines nor drive the terminal.

Request ids, module names, paths, lint findings on hostile scripts and the errors of a target
interpreter come from outside. In the text formats a newline in one of them would print a line
rlpatch never wrote (a forged `verdict:`), and an ESC or OSC sequence would be obeyed by the
terminal. `shown` escapes every control character (C0, DEL, C1), the Unicode line and paragraph
separators and the bidirectional overrides as `\\xNN` / `\\uNNNN`; everything else, backslashes
included, is shown as it is. JSON and SARIF keep the exact strings (their encoders escape them).
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, the Unicode line/paragraph separators and the bidi embeddings/overrides/isolates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class Note(str):
    """A message that only informs (which tree is used, a link followed inside a tree, a `note:`):
    `-q` leaves it out. Marked where it is made, so that quiet never judges a line by its text (a
    request id or a path can read like anything)."""


def shown(text: str) -> str:
    """`text` with every character that could break a line or reach the terminal escaped."""
    return _UNSAFE.sub(_escape, text)


def shown_lines(lines: list[str]) -> list[str]:
    """Each line of a text answer escaped: one record per line, whatever its strings hold."""
    return [shown(line) for line in lines]
