"""Progress for a log: one plain `done/total` line on stderr every few seconds, when stderr is no terminal.

A SLURM or CI log has no terminal: a progress bar is not drawn there, and a long command (a folder
linted, hundreds of pairs compared, a cluster's nodes waited for) would leave the log silent for a
minute. `log_progress` gives such a command a `Progress` that writes, at most once per interval
(`RLPATCH_PROGRESS_INTERVAL` seconds, default 10), `LABEL: DONE/TOTAL UNIT (N s)`, and one last line
when the work ends if it wrote any: a command that ends within the first interval writes nothing, so
short runs keep their stderr as it was. On a terminal, or with `-q`, there is none (None).

The clock and the interval are parameters, so that tests drive a `Progress` without waiting.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

INTERVAL_S = 10.0
INTERVAL_VARIABLE = "RLPATCH_PROGRESS_INTERVAL"


def interval_s() -> float:
    """Seconds between two lines: `RLPATCH_PROGRESS_INTERVAL` when it is a number >= 0, else 10."""
    try:
        value = float(os.environ.get(INTERVAL_VARIABLE, ""))
    except ValueError:
        return INTERVAL_S
    return value if value >= 0 else INTERVAL_S


class Progress:
    """Counts what is done of `total`; says it on `stream` when `interval` seconds have passed since the
    start or the last line. `advance(0)` only looks at the clock (for a caller that waits in steps)."""

    def __init__(self, label: str, total: int, unit: str, *, stream: TextIO | None = None,
                 interval: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.interval, self.clock = interval, clock
        self.done = 0
        self.started = self.last = clock()
        self.lines = 0
        self.said = -1  # the count the last line gave
        self._lock = threading.Lock()  # compares finish in a thread pool's threads

    def advance(self, count: int = 1) -> None:
        with self._lock:
            self.done += count
            if self.clock() - self.last >= self.interval:
                self._say()

    def finish(self) -> None:
        """The last line, when any was written and the count moved since (a run quicker than one interval
        stays silent)."""
        with self._lock:
            if self.lines and self.said != self.done:
                self._say()

    def _say(self) -> None:
        now = self.last = self.clock()
        self.lines += 1
        self.said = self.done
        self.stream.write(f"{self.label}: {self.done}/{self.total} {self.unit} ({now - self.started:.0f} s)\n")
        self.stream.flush()


def progress_wanted(quiet: bool, stream: TextIO | None = None) -> bool:
    """Whether log lines are wanted: not with -q, and not on a terminal (which keeps its own display)."""
    stream = stream if stream is not None else sys.stderr
    if quiet or stream is None:
        return False
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream: no lines
        return False


@contextmanager
def log_progress(label: str, total: int, unit: str, quiet: bool = False) -> Iterator[Progress | None]:
    """A `Progress` for a non-terminal stderr, finished on the way out; None on a terminal, with `quiet`,
    or when there is nothing to count."""
    if total <= 0 or not progress_wanted(quiet):
        yield None
        return
    progress = Progress(label, total, unit, interval=interval_s())
    try:
        yield progress
    finally:
        progress.finish()
