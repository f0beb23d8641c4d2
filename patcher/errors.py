"""The exceptions every engine raises, each mapped to an exit code by the CLI."""

from __future__ import annotations

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
