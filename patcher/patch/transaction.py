"""The state rlpatch keeps next to a tree, and writes that are all-or-nothing and crash-safe.

Layout of `<root>/.rlpatch/` (kept out of `git status` through `.git/info/exclude`):
- `lock`: held (flock) for the whole of a command that reads or writes the tree, so two applies
  on one tree cannot interleave;
- `manifest.json`: which rules are applied to which files, each file's original and patched
  SHA-256 and mode, the upstream version and git HEAD at apply time;
- `originals/<path>`: the bytes of each patched file before the first patch (exact revert);
- `journal.json` + `undo/<path>`: present only while a transaction writes. A process killed in
  the middle leaves them behind, and the next rlpatch command on the tree rolls the tree back to
  the state before that transaction, file by file, before doing anything else.

Every file is replaced atomically (temporary file in the same directory, fsync, rename), so at
any instant each file is either wholly old or wholly new.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from rlpatch.errors import InputError, RefusedError

STATE_DIR = ".rlpatch"
MANIFEST_FORMAT = 1
LOCK_TIMEOUT_S = float(os.environ.get("RLPATCH_LOCK_TIMEOUT", "60"))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def state_dir(root: str) -> Path:
    return Path(root) / STATE_DIR


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` in one rename; the file is never seen half-written.

    A symlink is followed (the link stays a link), and the owner of a file that existed is kept
    when this process may set it (root patching another user's tree).
    """
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    owner = None
    try:
        info = path.stat()
        owner = (info.st_uid, info.st_gid)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".rlpatch-tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, stat.S_IMODE(mode))
        if owner is not None and owner != (os.getuid(), os.getgid()):
            try:
                os.chown(temporary, *owner)
            except PermissionError:
                pass
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


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
        if not path.exists():
            return cls(root)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            files = {name: FileRecord(**record) for name, record in raw.get("files", {}).items()}
        except (ValueError, TypeError, OSError) as err:
            raise InputError(f"{path}: unreadable rlpatch manifest ({err}); move it away to start over") from None
        return cls(root, files, dict(raw.get("versions", {})), raw.get("git_head"), raw.get("git_commit"))

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


# ---------------------------------------------------------------------------------------------
# Locking
# ---------------------------------------------------------------------------------------------


@contextmanager
def locked(root: str, *, create: bool = True) -> Iterator[bool]:
    """Hold the tree's lock. Yields False (and locks nothing) when the state dir cannot exist."""
    directory = state_dir(root)
    if not directory.exists():
        if not create:
            yield False
            return
        try:
            directory.mkdir()
        except FileExistsError:
            pass
        except OSError as err:
            raise InputError(f"{root}: cannot create {STATE_DIR}/ ({err.strerror}); is the tree read-only?") from None
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise InputError(f"{root}: cannot open {STATE_DIR}/lock ({err.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if time.monotonic() > deadline:
                raise RefusedError(f"{root}: another rlpatch process holds {STATE_DIR}/lock; try again later") from None
            time.sleep(0.05)
            continue
        # A revert that emptied the state removes the folder; a lock on the removed inode is no lock.
        try:
            same = os.stat(directory / "lock").st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            directory.mkdir(exist_ok=True)
            continue
        try:
            yield True
        finally:
            os.close(fd)
        return


@contextmanager
def locked_all(roots: list[str], *, create: bool = True) -> Iterator[None]:
    """Lock several trees in a fixed order, so that two commands never deadlock.

    On the way out, once the locks are released, a tree where nothing is applied loses its
    `.rlpatch/` folder again: a refusal or a no-op leaves no trace.
    """
    try:
        with ExitStack() as stack:
            for root in sorted(set(roots)):
                stack.enter_context(locked(root, create=create))
            yield
    finally:
        for root in roots:
            remove_state_if_empty(root)


def remove_state_if_empty(root: str) -> None:
    """Drop `.rlpatch/` once nothing is applied: the tree is then exactly as it was."""
    directory = state_dir(root)
    if not directory.exists() or (directory / "manifest.json").exists() or (directory / "journal.json").exists():
        return
    shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Transactions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    """One file operation of a transaction. `data is None` deletes the file."""

    relative: str
    data: bytes | None
    mode: int | None = None


def _pause_for_tests() -> None:
    # Test hook: lets the crash-safety test SIGKILL a transaction between two file writes.
    delay = os.environ.get("RLPATCH_TEST_PAUSE_BETWEEN_WRITES")
    if delay:
        time.sleep(float(delay))


def recover(root: str) -> int:
    """Roll back an interrupted transaction (caller holds the lock). Returns files restored."""
    directory = state_dir(root)
    journal_path = directory / "journal.json"
    if not journal_path.exists():
        return 0
    try:
        journal = json.loads(journal_path.read_text(encoding="utf-8"))
    except ValueError:
        # The journal is written atomically before the first file; unreadable means no file was touched.
        journal_path.unlink()
        return 0
    restored = 0
    for entry in journal["writes"]:
        target = Path(root) / entry["relative"]
        undo = directory / "undo" / entry["relative"]
        if entry["existed"]:
            atomic_write(target, undo.read_bytes(), entry["mode"])
        elif target.exists():
            target.unlink()
        restored += 1
    if journal.get("manifest_existed"):
        atomic_write(directory / "manifest.json", (directory / "undo.manifest.json").read_bytes())
    elif (directory / "manifest.json").exists():
        (directory / "manifest.json").unlink()
    _finish(directory)
    return restored


def _finish(directory: Path) -> None:
    (directory / "journal.json").unlink(missing_ok=True)
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


def commit(root: str, writes: list[Write], manifest: Manifest) -> None:
    """Write every file of the transaction and the new manifest, or (after a crash) none of them.

    The caller holds the lock. Order: undo copies and the journal are made durable first, then
    each file is replaced atomically, then the manifest; the journal is removed last.
    """
    directory = state_dir(root)
    undo_dir = directory / "undo"
    entries = []
    for write in writes:
        target = Path(root) / write.relative
        existed = target.exists()
        mode = target.stat().st_mode if existed else None
        if existed:
            atomic_write(undo_dir / write.relative, target.read_bytes())
        entries.append({"relative": write.relative, "existed": existed, "mode": mode})
    manifest_path = directory / "manifest.json"
    manifest_existed = manifest_path.exists()
    if manifest_existed:
        atomic_write(directory / "undo.manifest.json", manifest_path.read_bytes())
    journal = {"writes": entries, "manifest_existed": manifest_existed}
    atomic_write(directory / "journal.json", json.dumps(journal).encode())
    for write in writes:
        target = Path(root) / write.relative
        if write.data is None:
            target.unlink(missing_ok=True)
        else:
            atomic_write(target, write.data, write.mode)
        _pause_for_tests()
    manifest.save()
    _finish(directory)
