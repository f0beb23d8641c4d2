"""JSON with source positions: where each key and value of a document starts and ends.

The stdlib `json` module decides *whether* a text is JSON (so rlpatch accepts exactly what msprobe,
which uses `json.load`, accepts: NaN, Infinity, duplicate keys with the last one winning) but keeps
no positions. This module walks an already-accepted text once more and records, for every path
(`("statistics", "data_mode", 1)`), the span of the value and of its key, as 1-based line and
character columns, so that findings can point inside the config file.
"""

from __future__ import annotations

import bisect
import json
import re
import sys
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # CPython defines it there; typeshed omits it
from typing import Any

from rlpatch.errors import InputError

Path = tuple[str | int, ...]

_WHITESPACE = " \t\n\r"
# Positions are recorded this deep; a value below is skipped by the stdlib decoder (in C, no
# Python recursion): rules read the top levels of a config only, and a config nested deeper than
# Python's recursion limit allows must not crash the walker.
MAX_POSITION_DEPTH = 32
_DECODER = json.JSONDecoder()
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")


@dataclass(frozen=True)
class Span:
    """1-based line and character column of the first character, and of one past the last."""

    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class Document:
    """A parsed JSON document with the span of every value and every object key."""

    value: Any
    values: dict[Path, Span]
    keys: dict[Path, Span]

    def span(self, path: Path, key: bool = False) -> Span:
        """The key's span when asked and known, else the value's, else the nearest ancestor's."""
        if key and path in self.keys:
            return self.keys[path]
        while path not in self.values and path:
            path = path[:-1]
        return self.values.get(path, Span(1, 1, 1, 1))


class JsonError(ValueError):
    """The text is not JSON: message, 1-based line and column from the stdlib decoder."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


def parse(text: str) -> Document:
    """Parse `text` exactly as `json.loads` does, plus positions; raise JsonError when it is not JSON."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise JsonError(err.msg, err.lineno, err.colno) from None
    except RecursionError:  # msprobe's json.load fails the same way
        raise JsonError("nested too deeply for Python's json module (it raises RecursionError)", 1, 1) from None
    except ValueError as err:  # an integer past Python's int_max_str_digits: msprobe's json.load fails too
        raise InputError(f"a number longer than Python's limit of {sys.get_int_max_str_digits()} digits: "
                         f"Python's json module (msprobe's too) cannot read it ({str(err)[:60]}...)") from None
    walker = _Walker(text)
    try:
        walker.value(walker.skip(0), ())
    except RecursionError:  # the decoder's skip of a deep value, on top of the walker's frames
        pass  # the values walked so far keep their positions; the others point at an ancestor
    return Document(value, walker.values, walker.keys)


class _Walker:
    """Recursive descent over text that json.loads accepted: no error handling is needed."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.line_starts = [0] + [match.end() for match in re.finditer(r"\n", text)]
        self.values: dict[Path, Span] = {}
        self.keys: dict[Path, Span] = {}

    def skip(self, index: int) -> int:
        while index < len(self.text) and self.text[index] in _WHITESPACE:
            index += 1
        return index

    def span(self, start: int, end: int) -> Span:
        line, column = self.position(start)
        end_line, end_column = self.position(end)
        return Span(line, column, end_line, end_column)

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def value(self, index: int, path: Path) -> int:
        char = self.text[index]
        if len(path) >= MAX_POSITION_DEPTH and char in "{[":
            end = _DECODER.raw_decode(self.text, index)[1]
        elif char == "{":
            end = self.object(index, path)
        elif char == "[":
            end = self.array(index, path)
        elif char == '"':
            end = scanstring(self.text, index + 1)[1]
        else:
            end = self.scalar(index)
        self.values[path] = self.span(index, end)
        return end

    def scalar(self, index: int) -> int:
        for literal in _LITERALS:
            if self.text.startswith(literal, index):
                return index + len(literal)
        match = _NUMBER.match(self.text, index)
        assert match is not None, "json.loads accepted a token this walker does not know"
        return match.end()

    def object(self, index: int, path: Path) -> int:
        index = self.skip(index + 1)
        if self.text[index] == "}":
            return index + 1
        while True:
            key, key_end = scanstring(self.text, index + 1)
            self.keys[path + (key,)] = self.span(index, key_end)
            index = self.skip(self.skip(key_end) + 1)  # past the ':'
            index = self.skip(self.value(index, path + (key,)))
            if self.text[index] == "}":
                return index + 1
            index = self.skip(index + 1)  # past the ','

    def array(self, index: int, path: Path) -> int:
        index = self.skip(index + 1)
        if self.text[index] == "]":
            return index + 1
        position = 0
        while True:
            index = self.skip(self.value(index, path + (position,)))
            position += 1
            if self.text[index] == "]":
                return index + 1
            index = self.skip(index + 1)
