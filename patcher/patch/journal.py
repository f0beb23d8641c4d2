"""The journal of a transaction and the recovery of one that was interrupted.

While a transaction writes, `.rlpatch/journal.json` lists every file it replaces or deletes, and
`undo/<path>` (with `undo.manifest.json`) holds each one's bytes before it, with its mode and owner.
A process killed in the middle leaves them behind; the next rlpatch command on the tree (any
command, read-only ones included, as `git status` refreshes the index when it can take its lock)
rolls the tree back to the state before that transaction, file by file, before doing anything
else, and says so. A rollback is a rename (`move_over`): it needs no free space, so a disk that
fills up in the middle of a transaction is rolled back on the spot.
"""

from __future__ import annotations

import json
import shutil
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from rlpatch.errors import InputError
from rlpatch.output.api import atomic_write, fsync_dir, move_over, remove_temporaries, remove_temporaries_in
from rlpatch.patch import statefiles
from rlpatch.patch.statefiles import STATE_DIR, Damaged, state_dir


@dataclass(frozen=True)
class Recovery:
    """What `recover` did: the command that was interrupted and how many files it restored."""

    command: str
    restored: int

    def notice(self, root: str) -> str:
        return f"rlpatch: an interrupted {self.command} was rolled back in {root} ({self.restored} files restored)"


def begin(root: str, relatives: list[str], command: str) -> None:
    """Undo copies of every file the transaction replaces or deletes (paths relative to `root`),
    of the manifest, then the journal: all durable before the first file is written."""
    directory = state_dir(root)
    entries = []
    for relative in relatives:
        target = Path(root) / relative
        existed = target.exists()
        mode = None
        if existed:
            info = target.stat()
            mode = info.st_mode
            atomic_write(directory / "undo" / relative, target.read_bytes(), mode, (info.st_uid, info.st_gid))
        entries.append({"relative": relative, "existed": existed, "mode": mode})
    manifest_path = directory / "manifest.json"
    manifest_existed = manifest_path.exists()
    if manifest_existed:
        atomic_write(directory / "undo.manifest.json", manifest_path.read_bytes())
    journal = {"command": command, "writes": entries, "manifest_existed": manifest_existed}
    atomic_write(directory / "journal.json", json.dumps(journal).encode())


def finish(directory: Path) -> None:
    """End a transaction, written or rolled back: the journal goes first (once it is gone the
    transaction is over, whatever is left is litter), then the undo copies."""
    (directory / "journal.json").unlink(missing_ok=True)
    with suppress(OSError):  # the transaction is over either way; a journal that comes back only replays it
        fsync_dir(directory)
    _discard_undo(directory)


def interrupted(root: str) -> str | None:
    """The command whose transaction was interrupted in `root` (read without the lock), or None."""
    path = state_dir(root) / "journal.json"
    if not path.exists():
        return None
    try:
        command = json.loads(path.read_bytes()).get("command")
    except (ValueError, AttributeError, RecursionError, OSError):
        command = None
    return command if isinstance(command, str) and command.isidentifier() else "rlpatch command"


def recover(root: str) -> Recovery | None:
    """Roll back an interrupted transaction (caller holds the lock): every file of the journal
    gets its bytes before the transaction back, its temporaries are removed, then the manifest."""
    directory = state_dir(root)
    if not (directory / "journal.json").exists():
        return None
    journal = _load_journal(directory)
    for entry in journal["writes"]:
        target = Path(root) / entry["relative"]
        remove_temporaries(target)
        if entry["existed"]:
            _put_back(directory / "undo" / entry["relative"], target, entry["mode"])
        elif target.exists() or target.is_symlink():
            target.unlink()
    manifest = directory / "manifest.json"
    remove_temporaries_in(directory)
    if journal.get("manifest_existed"):
        _put_back(directory / "undo.manifest.json", manifest, None)
    else:
        manifest.unlink(missing_ok=True)
    finish(directory)
    return Recovery(str(journal.get("command") or "rlpatch command"), len(journal["writes"]))


def discard_leftovers(directory: Path) -> None:
    """Remove what a command killed outside a transaction leaves in the state folder (caller
    holds the lock): temporaries of the manifest or journal, undo copies never journaled."""
    if not directory.is_dir():
        return
    remove_temporaries_in(directory)
    if not (directory / "journal.json").exists():
        _discard_undo(directory)


def _load_journal(directory: Path) -> dict:
    path = directory / "journal.json"
    try:
        journal = statefiles.read_json(path)
        statefiles.check_journal(journal)
    except Damaged as err:
        raise InputError(f"{path}: damaged journal of an interrupted rlpatch command ({err}); nothing was restored; "
                         f"the files before that command are in {STATE_DIR}/undo/") from None
    assert isinstance(journal, dict)
    return journal


def _put_back(undo: Path, target: Path, mode: int | None) -> None:
    """Move an undo copy over its file (a rename: no free space needed, atomic)."""
    if undo.exists():  # else moved back by a recovery that was itself interrupted
        move_over(undo, target, mode)


def _discard_undo(directory: Path) -> None:
    shutil.rmtree(directory / "undo", ignore_errors=True)
    (directory / "undo.manifest.json").unlink(missing_ok=True)
