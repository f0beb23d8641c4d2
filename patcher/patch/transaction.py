"""The state rlpatch keeps next to a tree, and writes that are all-or-nothing and crash-safe.

Layout of `<root>/.rlpatch/` (kept out of `git status` through `.git/info/exclude`):
- `lock`: held (flock) for the whole of a command that reads or writes the tree, so two applies
  on one tree cannot interleave;
- `manifest.json`: which rules are applied to which files, each file's original and patched
  SHA-256 and mode, the upstream version and git HEAD at apply time;
- `originals/<path>`: the bytes of each patched file before the first patch (exact revert);
- `journal.json` + `undo/<path>`: present only while a transaction writes. A process killed in
  the middle leaves them behind, and the next rlpatch command on the tree (any command, read-only
  ones included, as `git status` refreshes the index when it can take its lock) rolls the tree
  back to the state before that transaction, file by file, before doing anything else, and says so.

Every file is replaced atomically (temporary file `.<name>.XXXX.rlpatch-tmp` in the same
directory, fsync, rename), so at any instant each file is either wholly old or wholly new; a
temporary left by a kill is removed by the recovery. Undo copies carry the file's mode and owner,
so a rollback is a rename: it needs no free space, and a disk that fills up in the middle of a
transaction is rolled back on the spot.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import time
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from rlpatch.errors import InputError, RefusedError
from rlpatch.output.api import TEMPORARY_SUFFIX, LinkInside, atomic_write, fsync_dir, links_on_the_way
from rlpatch.patch import statefiles
from rlpatch.patch.statefiles import STATE_DIR, Damaged, expect

MANIFEST_FORMAT = 1
LOCK_TIMEOUT_S = float(os.environ.get("RLPATCH_LOCK_TIMEOUT", "60"))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def state_dir(root: str) -> Path:
    return Path(root) / STATE_DIR


_fsync_dir = fsync_dir


def check_links(root: str, writes: list["Write"]) -> list[LinkInside]:
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


@dataclass
class FileRecord:
    original_sha256: str | None  # None: the patch created the file
    patched_sha256: str
    mode: int
    rules: list[str]

    @property
    def created(self) -> bool:
        return self.original_sha256 is None


@dataclass
class Manifest:
    """What is applied to one root. Paths are relative to the root, with `/` separators."""

    root: str
    files: dict[str, FileRecord] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)  # package -> version at apply time
    git_head: str | None = None
    git_commit: str | None = None  # the commit `apply --commit` made (revert says how to undo it)

    @classmethod
    def load(cls, root: str) -> "Manifest":
        path = state_dir(root) / "manifest.json"
        if not path.exists() and not path.is_symlink():
            return cls(root)
        try:
            raw = statefiles.read_json(path)
            if not isinstance(raw, dict):
                raise Damaged("not a JSON object")
            expect(raw.get("format", MANIFEST_FORMAT) == MANIFEST_FORMAT and type(raw.get("format", 1)) is int,
                    f"format {raw.get('format')!r}, this rlpatch reads format {MANIFEST_FORMAT}")
            files = {name: _file_record(name, record) for name, record in statefiles.json_object(raw, "files").items()}
            versions = statefiles.json_object(raw, "versions")
            expect(all(isinstance(v, str) for v in versions.values()), "versions: a version that is not a string")
            heads = [raw.get(key) for key in ("git_head", "git_commit")]
            expect(all(head is None or isinstance(head, str) for head in heads), "git_head/git_commit: not a string")
        except Damaged as err:
            raise InputError(f"{path}: damaged rlpatch manifest ({err}); nothing was written; "
                             f"move {STATE_DIR}/ away to start over (its originals/ holds the unpatched files)") from None
        return cls(root, files, dict(versions), heads[0], heads[1])

    def save(self) -> None:
        path = state_dir(self.root) / "manifest.json"
        if not self.files:
            if path.exists():
                path.unlink()
            return
        payload = {
            "format": MANIFEST_FORMAT,
            "tool": "rlpatch",
            "versions": self.versions,
            "git_head": self.git_head,
            "git_commit": self.git_commit,
            "files": {name: record.__dict__ for name, record in sorted(self.files.items())},
        }
        atomic_write(path, (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode())

    def original_path(self, relative: str) -> Path:
        return state_dir(self.root) / "originals" / relative

    def forget(self, rule_ids: set[str]) -> list[str]:
        """Drop rules that are no longer in their files (undone by `git revert`, a checkout...):
        the files left with no rule, whose stored originals are then stale too."""
        gone = []
        for relative, record in list(self.files.items()):
            if not set(record.rules) & rule_ids:
                continue
            record.rules = sorted(set(record.rules) - rule_ids)
            if not record.rules:
                del self.files[relative]
                gone.append(relative)
        return gone

    def rules_of(self, relative: str) -> list[str]:
        record = self.files.get(relative)
        return list(record.rules) if record else []


def _file_record(name: str, record: object) -> FileRecord:
    statefiles.check_file_record(name, record)
    assert isinstance(record, dict)
    return FileRecord(record["original_sha256"], record["patched_sha256"], record["mode"], list(record["rules"]))


# ---------------------------------------------------------------------------------------------
# Locking
# ---------------------------------------------------------------------------------------------


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


def discard_leftovers(directory: Path) -> None:
    """Remove what a command killed outside a transaction leaves in the state folder (caller
    holds the lock): temporaries of the manifest or journal, undo copies never journaled."""
    if not directory.is_dir():
        return
    for leftover in directory.glob(f".*{TEMPORARY_SUFFIX}"):
        leftover.unlink(missing_ok=True)
    if not (directory / "journal.json").exists():
        _discard_undo(directory)


# ---------------------------------------------------------------------------------------------
# Transactions
# ---------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Recovery:
    """What `recover` did: the command that was interrupted and how many files it restored."""

    command: str
    restored: int

    def notice(self, root: str) -> str:
        return f"rlpatch: an interrupted {self.command} was rolled back in {root} ({self.restored} files restored)"


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


def _put_back(undo: Path, target: Path, mode: int | None) -> None:
    """Move an undo copy over its file: a rename, so it needs no free space and is atomic."""
    real = Path(os.path.realpath(target))
    if not undo.exists():
        return  # moved back by a recovery that was itself interrupted
    try:
        os.replace(undo, real)
    except OSError as err:
        if err.errno != errno.EXDEV:  # a symlinked file on another file system: copy instead
            raise
        atomic_write(real, undo.read_bytes(), mode)
        undo.unlink()
    _fsync_dir(real.parent)


def _remove_temporaries(target: Path) -> None:
    real = Path(os.path.realpath(target))
    escaped = "".join(f"[{char}]" if char in "*?[" else char for char in real.name)
    for leftover in real.parent.glob(f".{escaped}.*{TEMPORARY_SUFFIX}"):
        leftover.unlink(missing_ok=True)


def recover(root: str) -> Recovery | None:
    """Roll back an interrupted transaction (caller holds the lock): every file of the journal
    gets its bytes before the transaction back, its temporaries are removed, then the manifest."""
    directory = state_dir(root)
    if not (directory / "journal.json").exists():
        return None
    journal = _load_journal(directory)
    for entry in journal["writes"]:
        target = Path(root) / entry["relative"]
        _remove_temporaries(target)
        if entry["existed"]:
            _put_back(directory / "undo" / entry["relative"], target, entry["mode"])
        elif target.exists() or target.is_symlink():
            target.unlink()
    manifest = directory / "manifest.json"
    for leftover in directory.glob(f".*{TEMPORARY_SUFFIX}"):
        leftover.unlink(missing_ok=True)
    if journal.get("manifest_existed"):
        _put_back(directory / "undo.manifest.json", manifest, None)
    else:
        manifest.unlink(missing_ok=True)
    _finish(directory)
    return Recovery(str(journal.get("command") or "rlpatch command"), len(journal["writes"]))


def _finish(directory: Path) -> None:
    # The journal goes first: once it is gone the transaction is over, whatever is left is litter.
    (directory / "journal.json").unlink(missing_ok=True)
    with suppress(OSError):  # the transaction is over either way; a journal that comes back only replays it
        _fsync_dir(directory)
    _discard_undo(directory)


def _discard_undo(directory: Path) -> None:
    shutil.rmtree(directory / "undo", ignore_errors=True)
    (directory / "undo.manifest.json").unlink(missing_ok=True)


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
        _prepare(root, directory, writes, command)
    except OSError as err:
        _finish(directory)
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
        _finish(directory)
    except OSError as err:
        try:
            recover(root)
        except OSError as again:
            raise InputError(f"{err.filename}: cannot write ({err.strerror}), and the rollback failed too "
                             f"({again.filename}: {again.strerror}); run any rlpatch command on {root} to finish it") from None
        raise InputError(f"{err.filename}: cannot write ({err.strerror}); the tree was rolled back, nothing was changed") from None


def _prepare(root: str, directory: Path, writes: list[Write], command: str) -> None:
    """Undo copies of every file the transaction replaces or deletes, then the journal."""
    entries = []
    for write in writes:
        target = Path(root) / write.relative
        existed = target.exists()
        mode = None
        if existed:
            info = target.stat()
            mode = info.st_mode
            atomic_write(directory / "undo" / write.relative, target.read_bytes(), mode, (info.st_uid, info.st_gid))
        entries.append({"relative": write.relative, "existed": existed, "mode": mode})
    manifest_path = directory / "manifest.json"
    manifest_existed = manifest_path.exists()
    if manifest_existed:
        atomic_write(directory / "undo.manifest.json", manifest_path.read_bytes())
    journal = {"command": command, "writes": entries, "manifest_existed": manifest_existed}
    atomic_write(directory / "journal.json", json.dumps(journal).encode())
