"""The exceptions every engine raises, each mapped to an exit code by the CLI, and the one line each
error becomes on stderr (`error_line`: the entry point's, and doctor's for the commands it runs);
`exit_for` is what the entry point does with whatever reaches it: that line and the exit code."""

from __future__ import annotations

import errno
import os
import sys
from typing import NoReturn

EXIT_OK = 0
EXIT_REFUSED = 1  # the command understood the request and refused it (anchor, drift, partial state, findings)
EXIT_USAGE = 2  # usage or input error: bad path, unreadable file, no tree found


class RlpatchError(Exception):
    """An error with a one-line message meant for the user, and the exit code it implies."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self.args[0])


class InputError(RlpatchError):
    """Bad input: a path that does not exist, an unreadable or non-Python file, no tree found."""

    exit_code = EXIT_USAGE


class RefusedError(RlpatchError):
    """The request was understood and refused: nothing was written."""

    exit_code = EXIT_REFUSED


def error_line(err: Exception) -> str:
    """The one line a command ends with on stderr when `err` reaches the entry: rlpatch's own errors,
    what the machine or the input's shape ran out of, and anything else as an internal error
    (`doctor` reports the commands it runs in-process with the same line)."""
    from rlpatch.output.api import shown  # a message may quote a hostile path or name: one line, no escapes

    if isinstance(err, RlpatchError):
        return f"rlpatch: error: {shown(err.message)}"
    if isinstance(err, (RecursionError, MemoryError, OSError)):
        return f"rlpatch: error: {shown(resource_message(err))}"
    return (f"rlpatch: internal error: {type(err).__name__}: {shown(one_line(str(err)))} "
            "(set RLPATCH_DEBUG=1 for a traceback)")


def one_line(text: str, limit: int = 300) -> str:
    """A message on one line, at most `limit` characters (an exception's text may hold a file)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


def resource_message(err: BaseException) -> str:
    """One line for an exhausted resource or a failed system call: what, and on which file."""
    if isinstance(err, RecursionError):
        return "input nested too deeply to read (Python's recursion limit)"
    if isinstance(err, MemoryError):
        return "out of memory (the input is too large for this machine)"
    assert isinstance(err, OSError)
    reason = err.strerror or one_line(str(err)) or type(err).__name__
    if err.errno == errno.ENOSPC:
        reason = "no space left on device"
    names = [name for name in (err.filename, err.filename2) if name is not None]
    where = " -> ".join(os.fsdecode(name) for name in names)
    return one_line(f"{where}: {reason}" if where else reason)


def exit_for(err: BaseException) -> NoReturn:
    """The line and the exit code for what reached the entry point (called while `err` is handled)."""
    click = sys.modules.get("click")  # click's exceptions come from click, which is then imported
    if isinstance(err, RlpatchError):
        _echo(error_line(err))
        sys.exit(err.exit_code)
    if click is not None and isinstance(err, click.exceptions.Exit):
        sys.exit(err.exit_code)
    if click is not None and isinstance(err, click.ClickException):
        err.show()
        sys.exit(EXIT_USAGE if err.exit_code == 2 else err.exit_code)
    if click is not None and isinstance(err, click.exceptions.Abort):
        _echo("rlpatch: aborted")
        sys.exit(130)
    if isinstance(err, KeyboardInterrupt):
        _echo("rlpatch: interrupted")
        sys.exit(130)
    if isinstance(err, BrokenPipeError):
        sys.exit(0)
    if not isinstance(err, Exception) or os.environ.get("RLPATCH_DEBUG"):
        raise  # SystemExit and the like go on; RLPATCH_DEBUG=1 shows the traceback
    # What the machine or the input's shape ran out of (RecursionError, MemoryError, OSError), not a
    # bug in one command, and the last line of defence against a traceback: one line each.
    _echo(error_line(err))
    sys.exit(EXIT_USAGE)


def _echo(line: str) -> None:
    import click

    click.echo(line, err=True)
