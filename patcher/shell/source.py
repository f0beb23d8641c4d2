"""Script text and source positions.

Every position rlpatch reports is a `Span`: a file plus 1-based line and 1-based *character*
column (not byte: tree-sitter counts bytes, editors and SARIF count characters), with an
exclusive end. `SourceFile` loads a script once, refuses inputs a shell script cannot be
(binary, not UTF-8, too large, a directory) with a one-line reason, and converts offsets.
"""

# No `from __future__ import annotations`: typing compiles each string annotation of a NamedTuple's
# fields (a ForwardRef each) at import, on every cold start of `rlpatch lint`; evaluated ones it takes as they are.

import bisect
import os
import re
import stat
from functools import cached_property
from itertools import accumulate
from typing import NamedTuple

from rlpatch.errors import InputError

# Real launch scripts are a few KB; a 2 MB "script" is generated data or a mistake.
MAX_SCRIPT_BYTES = 2 * 1024 * 1024

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str | None:
    """None for a regular file, else what it is ("a directory", "a FIFO", ...), for messages."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _not_regular(path: str, mode: int) -> InputError:
    if stat.S_ISDIR(mode):
        return InputError(f"{path}: is a directory")
    return InputError(f"{path}: {file_kind(mode)}, not a regular file (rlpatch reads only regular files)")


def _limit_text(limit: int) -> str:
    """A limit in binary units as the messages say them: 2 MB for 2 MiB, 64 KB for 64 KiB."""
    if limit % (1024 * 1024) == 0:
        return f"{limit // (1024 * 1024)} MB"
    return f"{limit // 1024} KB" if limit % 1024 == 0 else f"{limit} bytes"


class InputTooLarge(InputError):
    """An input over its size limit (callers may report it differently from an unreadable one)."""


def too_large(path: str, size: int | None, limit: int, what: str, noun: str = "file") -> InputTooLarge:
    shown = f"{size / 1e6:.1f} MB" if size is not None else f"over {_limit_text(limit)}"
    return InputTooLarge(f"{path}: {noun} too large ({shown}; {what} is at most {_limit_text(limit)})")


def read_regular(path: str, limit: int, what: str = "a launch script") -> bytes:
    """The bytes of the regular file `path` (at most `limit`), or InputError with a one-line reason.

    Only a regular file is read: a FIFO would block the reader forever and a device (/dev/zero)
    never ends. The kind is checked before opening (opening some devices acts on them), the file
    is opened without blocking and checked again on the descriptor (it may have been swapped
    meanwhile), and at most `limit + 1` bytes are read (a file that grows is still bounded).
    """
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(descriptor, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise _not_regular(path, info.st_mode)
            if info.st_size > limit:
                raise too_large(path, info.st_size, limit, what)
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror or err})") from None
    if len(data) > limit:
        raise too_large(path, None, limit, what)
    return data


def read_stream(stream, name: str, limit: int, what: str = "a launch script") -> bytes:
    """At most `limit` bytes of an open binary stream (stdin), or InputError: `limit + 1` bytes are
    read at most, so `yes |` or `< /dev/zero` is refused after that much, not read until memory ends."""
    if stream is None:
        raise InputError(f"{name}: closed, nothing to read")
    try:
        data = stream.read(limit + 1)
    except ValueError:  # the file object is closed
        raise InputError(f"{name}: closed, nothing to read") from None
    except OSError as err:
        raise InputError(f"{name}: cannot read ({err.strerror or err})") from None
    if len(data) > limit:
        raise too_large(name, None, limit, what, "input")
    return data


class Span(NamedTuple):
    """A range in one file: 1-based line and character column, end exclusive.

    A NamedTuple (not a dataclass): spans are created by the hundred thousand on big scripts.
    """

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"

    def contains_line(self, line: int) -> bool:
        return self.line <= line <= self.end_line


_CONTINUATION_BYTE = re.compile(rb"[\x80-\xbf]")

# `_new(Span, (...))` skips the Python-level NamedTuple __new__ (all five fields given, in order).
_new = tuple.__new__


class SourceFile:
    """The decoded text of one script with fast offset -> (line, column) conversion."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self._spans: dict[int, Span] = {}  # (start << 32 | end) -> Span
        self.cache: dict = {}  # per-file memo for the evaluator (scope-independent word expansions)
        # 0, then one past each "\n": the running sum of the line lengths (+1 each), counted in C.
        lines = text.split("\n")
        lines.pop()
        self._line_starts = list(accumulate(map((1).__add__, map(len, lines)), initial=0))

    @classmethod
    def from_bytes(cls, path: str, data: bytes) -> "SourceFile":
        if len(data) > MAX_SCRIPT_BYTES:
            raise too_large(path, len(data), MAX_SCRIPT_BYTES, "a launch script")
        if b"\0" in data:
            raise InputError(f"{path}: binary file (contains NUL bytes), not a shell script")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            line = data.count(b"\n", 0, err.start) + 1
            raise InputError(f"{path}: not UTF-8 (invalid byte 0x{data[err.start]:02x} on line {line})") from None
        if text.startswith("\ufeff"):
            text = text[1:]
        return cls(path, text)

    @classmethod
    def read(cls, path: str) -> "SourceFile":
        """Read `path`, raising InputError with a one-line reason for anything that is not a script
        (not a regular file, over 2 MB, binary, not UTF-8)."""
        return cls.from_bytes(path, read_regular(path, MAX_SCRIPT_BYTES))

    @cached_property
    def encoded(self) -> bytes:
        return self.text.encode("utf-8")

    @cached_property
    def _continuations(self) -> list[int] | None:
        """Byte offsets of the UTF-8 continuation bytes (0b10xxxxxx); None when the text is ASCII.

        The character at byte offset b is b minus the continuation bytes up to b: a bisection in
        a list as long as the script's non-ASCII bytes, not a table as long as the script."""
        data = self.encoded
        if len(data) == len(self.text):
            return None
        return [match.start() for match in _CONTINUATION_BYTE.finditer(data)]

    def char_offset(self, byte_offset: int) -> int:
        continuations = self._continuations
        if continuations is None:
            return byte_offset
        byte_offset = min(byte_offset, len(self.encoded))
        return byte_offset - bisect.bisect_right(continuations, byte_offset)

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and character column of a character offset."""
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line + 1, offset - self._line_starts[line] + 1

    def offset(self, line: int, column: int) -> int | None:
        """The character offset of a 1-based line and character column (`line_col`'s inverse); None
        outside the text."""
        if not 1 <= line <= len(self._line_starts) or column < 1:
            return None
        offset = self._line_starts[line - 1] + column - 1
        return offset if offset <= len(self.text) else None

    def span(self, start: int, end: int) -> Span:
        # Hot (one call per word piece): an int key hashes faster than a tuple, and an end on the
        # start's line (almost always) needs no second search.
        key = (start << 32) | end
        span = self._spans.get(key)
        if span is None:
            starts = self._line_starts
            index = bisect.bisect_right(starts, start) - 1
            if end < start:
                end = start
            if index + 1 < len(starts) and end >= starts[index + 1]:
                end_index = bisect.bisect_right(starts, end) - 1
            else:
                end_index = index
            span = self._spans[key] = _new(Span, (self.path, index + 1, start - starts[index] + 1, end_index + 1,
                                                  end - starts[end_index] + 1))
        return span

    def line_text(self, line: int) -> str:
        start = self._line_starts[line - 1]
        end = self._line_starts[line] - 1 if line < len(self._line_starts) else len(self.text)
        return self.text[start:end]

    @property
    def line_count(self) -> int:
        return len(self._line_starts)
