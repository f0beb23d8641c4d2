"""A transaction: every file of one command on one tree written, and the manifest, or none of them.

Before anything is written, every file must stay inside the tree and be writable. Then the journal
(`journal.begin`: undo copies and the list of writes) is made durable, each file is replaced by the
output wing's durable write (temporary `.<name>.XXXX.rlpatch-tmp` in the same folder, fsync,
rename), so at any instant each file is either wholly old or wholly new, then the manifest
(`manifest`) is saved and the journal removed (`journal.finish`). A write that fails rolls back
what was written (`journal.recover`); a process killed in the middle is rolled back by the next
command on the tree. The caller holds the tree's lock (`lock`); the layout of the state folder is
in `statefiles`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rlpatch.errors import InputError
from rlpatch.output.api import LinkInside, atomic_write, links_on_the_way
from rlpatch.patch import journal
from rlpatch.patch.manifest import Manifest
from rlpatch.patch.statefiles import STATE_DIR, state_dir


@dataclass(frozen=True)
class Write:
    """One file operation of a transaction. `data is None` deletes the file."""

    relative: str
    data: bytes | None
    mode: int | None = None


def _nothing() -> None:
    pass


# Called after each file a transaction writes: nothing, unless `rlpatch.testing.pause_between_writes`
# makes it sleep so that a crash-safety test can SIGKILL the process between two writes.
after_each_write: Callable[[], None] = _nothing


def check_links(root: str, writes: list[Write]) -> list[LinkInside]:
    """Before anything is written: every file of the transaction stays inside the tree. A link on
    the way that leaves the tree is refused (InputError, exit 2); rlpatch's own state folder may hold
    no link at all; the links that stay inside the tree are returned for the command to report."""
    inside: list[LinkInside] = []
    state = state_dir(root)
    links_on_the_way(root, str(state), links_allowed=False)
    for write in writes:
        target = os.path.join(root, write.relative)
        if write.relative.split("/")[0] == STATE_DIR:
            links_on_the_way(str(state), target, links_allowed=False)
        else:
            inside += [link for link in links_on_the_way(root, target) if link not in inside]
    return inside


def check_writable(root: str, writes: list[Write]) -> None:
    """Refuse before writing anything if any file or folder of the transaction is not writable."""
    for write in writes:
        target = Path(root) / write.relative
        folder = target.parent
        while not folder.exists():
            folder = folder.parent
        if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
            raise InputError(f"{target}: not writable (read-only tree?); nothing was written")


def commit(root: str, writes: list[Write], manifest: Manifest, command: str = "rlpatch command") -> None:
    """Write every file of the transaction and the new manifest, or (after a crash) none of them.

    The caller holds the lock. Order: undo copies (mode and owner of the file) and the journal
    are made durable first, then each file is replaced atomically, then the manifest; the journal
    is removed last. A write that fails (disk full, quota, I/O error) rolls back what was written
    and raises a one-line InputError naming the file.
    """
    directory = state_dir(root)
    check_links(root, writes)
    try:
        journal.begin(root, [write.relative for write in writes], command)
    except OSError as err:
        journal.finish(directory)
        raise InputError(f"{err.filename}: cannot write ({err.strerror}); nothing was written") from None
    try:
        for write in writes:
            target = Path(root) / write.relative
            if write.data is None:
                target.unlink(missing_ok=True)
            else:
                atomic_write(target, write.data, write.mode)
            after_each_write()
        manifest.save()
        journal.finish(directory)
    except OSError as err:
        try:
            journal.recover(root)
        except OSError as again:
            raise InputError(f"{err.filename}: cannot write ({err.strerror}), and the rollback failed too "
                             f"({again.filename}: {again.strerror}); run any rlpatch command on {root} to finish it") from None
        raise InputError(f"{err.filename}: cannot write ({err.strerror}); the tree was rolled back, nothing was changed") from None
