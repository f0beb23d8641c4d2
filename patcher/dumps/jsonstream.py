"""A JSON object read member by member: memory bounded by the largest member, never by the file.

msprobe's dump.json is one object whose `data` member holds one entry per module call; a training
dump of a real model runs to hundreds of MB. `events(handle, nested)` walks the top-level object
and, inside the member named `nested` (when it is an object), each of its members, parsing one value
at a time with the standard decoder on a window of the file (`json.loads` semantics: NaN, the last
duplicate wins for the caller that keeps a dict). A document that is not one JSON object raises
ValueError, as `json.load` would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TextIO

CHUNK = 1 << 20
_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


class _Window:
    """The unread part of a text file, refilled as values are taken from its front."""

    def __init__(self, handle: TextIO) -> None:
        self.handle, self.text, self.pos, self.eof = handle, "", 0, False

    def _fill(self) -> bool:
        if self.eof:
            return False
        # Grow by at least the window's size: a value longer than the window is re-parsed only
        # O(log n) times, never once per chunk.
        chunk = self.handle.read(max(CHUNK, len(self.text) - self.pos))
        self.text = self.text[self.pos:] + chunk
        self.pos = 0
        self.eof = not chunk
        return bool(chunk)

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end), not consumed."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _SPACE:
                self.pos += 1
            if self.pos < len(self.text) or not self._fill():
                return self.text[self.pos:self.pos + 1]

    def take(self, expected: str) -> None:
        found = self.peek()
        if found != expected:
            raise ValueError(f"expected {expected!r}, found {found or 'the end'!r}")
        self.pos += 1

    def value(self) -> Any:
        """The next JSON value, whole."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError:
                if self._fill():
                    continue
                raise
            # A number that ends the window may go on in the next chunk (`12` of `123`).
            if end == len(self.text) and not self.eof and self._fill():
                continue
            self.pos = end
            return value


def _members(window: _Window) -> Iterator[str]:
    """The keys of the object whose `{` comes next; after each key the caller reads its value."""
    window.take("{")
    if window.peek() == "}":
        window.take("}")
        return
    while True:
        key = window.value()
        if not isinstance(key, str):
            raise ValueError("an object key that is not a string")
        window.take(":")
        yield key
        if window.peek() == ",":
            window.take(",")
            continue
        window.take("}")
        return


def events(handle: TextIO, nested: str) -> Iterator[tuple[str, str, str | None, Any]]:
    """("member", key, None, value) for each top-level member but `nested`; for `nested` when it is
    an object: ("open", nested, None, None), ("member", nested, inner key, value) for each of its
    members, ("close", nested, None, None)."""
    window = _Window(handle)
    for key in _members(window):
        if key == nested and window.peek() == "{":
            yield "open", key, None, None
            for inner in _members(window):
                yield "member", key, inner, window.value()
            yield "close", key, None, None
        else:
            yield "member", key, None, window.value()
    if window.peek():
        raise ValueError("text after the JSON object")
