"""The tree's lock: `.rlpatch/lock`, held (flock) for the whole of a command that reads or writes the
tree, so that two applies on one tree cannot interleave. Whoever takes it first removes what a
command killed outside a transaction left (`journal.discard_leftovers`); on the way out, a tree where
nothing is applied loses `.rlpatch/` while the lock is still held.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from rlpatch.errors import InputError, RefusedError
from rlpatch.output.api import links_on_the_way
from rlpatch.patch.journal import discard_leftovers
from rlpatch.patch.statefiles import STATE_DIR, state_dir

LOCK_TIMEOUT_S = float(os.environ.get("RLPATCH_LOCK_TIMEOUT", "60"))


def _open_lock(directory: Path, create: bool) -> int | None:
    """The lock file's descriptor; None when the folder is gone (removed by a command that just
    finished: the caller makes it again) or, for a read-only command, cannot be opened at all."""
    try:
        return os.open(directory / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            try:  # flock needs no write access: a read-only tree can still be locked
                return os.open(directory / "lock", os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                pass
        if create:
            raise InputError(f"{directory / 'lock'}: cannot open ({err.strerror})") from None
        raise _Unlockable from None


class _Unlockable(Exception):
    """A read-only command cannot open the lock (a tree this user may not write)."""


@contextmanager
def locked(root: str, *, create: bool = True) -> Iterator[bool]:
    """Hold the tree's lock; yields False (locks nothing) when the state folder does not exist and
    `create` is false, or a read-only command cannot open the lock. Other commands may remove and
    remake the folder meanwhile: the lock is retried until held on the lock file in place. On the
    way out, a tree where nothing is applied loses `.rlpatch/` while the lock is still held."""
    directory = state_dir(root)
    # A planted `.rlpatch` link would move the lock, manifest and originals out of the tree.
    links_on_the_way(root, str(directory), links_allowed=False)
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        if not directory.is_dir():
            if not create:
                yield False
                return
            try:
                directory.mkdir()
            except FileExistsError:
                pass
            except OSError as err:
                raise InputError(f"{root}: cannot create {STATE_DIR}/ ({err.strerror}); is the tree read-only?") from None
        try:
            fd = _open_lock(directory, create)
        except _Unlockable:
            yield False
            return
        if fd is None:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if time.monotonic() > deadline:
                raise RefusedError(f"{root}: another rlpatch process holds {STATE_DIR}/lock; try again later") from None
            time.sleep(0.02)
            continue
        # A command that emptied the state removed the folder; a lock on the removed inode is no lock.
        try:
            same = os.stat(directory / "lock").st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        try:
            discard_leftovers(directory)
            yield True
        finally:
            try:
                remove_state_if_empty(root)
            finally:
                os.close(fd)
        return


@contextmanager
def locked_all(roots: list[str], *, create: bool = True) -> Iterator[dict[str, bool]]:
    """Lock several trees in a fixed order, so that two commands never deadlock. Yields, per
    root, whether its lock is held (see `locked`)."""
    held = {}
    with ExitStack() as stack:
        for root in sorted(set(roots)):
            held[root] = stack.enter_context(locked(root, create=create))
        yield held


def remove_state_if_empty(root: str) -> None:
    """Drop `.rlpatch/` once nothing is applied: the tree is then exactly as it was."""
    directory = state_dir(root)
    if not directory.is_dir() or (directory / "manifest.json").exists() or (directory / "journal.json").exists():
        return
    shutil.rmtree(directory, ignore_errors=True)
