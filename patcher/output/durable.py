"""Writes that are all-or-nothing and durable: a file is either wholly old or wholly new.

Every file is written to a temporary `.<name>.XXXX.rlpatch-tmp` in its own folder, fsynced, then
renamed over the file, and the folder is fsynced; a failure (disk full, quota, I/O error) removes
the temporary and raises an OSError naming the file the user knows. Where the file itself is a
symbolic link, the caller chooses: `follow_link` writes the link's target (a patched tree keeps
its links, once `places` has checked the target stays inside the tree), otherwise the link is
replaced by the file (an output file: never a write through a link into its target). Several
files written together are each staged (`stage`), then published in one pass (`publish`). A file
put back from a copy kept aside (a patch's undo copy) is moved over in one rename (`move_over`),
and the temporaries a killed writer left are found by their name (`remove_temporaries`,
`remove_temporaries_in`): every write of rlpatch that must not be seen half-done goes through here.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

TEMPORARY_SUFFIX = ".rlpatch-tmp"
# Errors of fsync on a folder that only say the file system cannot do it; anything else (EIO,
# ENOSPC, EDQUOT) means the rename may not be durable and fails the write.
_FSYNC_UNSUPPORTED = {errno.EINVAL, errno.EBADF, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTSUP}


def fsync_dir(path: Path | str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in _FSYNC_UNSUPPORTED:
            err.filename = err.filename or str(path)
            raise
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _ordinary_mode() -> int:
    """The mode a new ordinary file gets under this umask (mkstemp makes its file private)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def stage(path: Path | str, data: bytes, mode: int | None = None, owner: tuple[int, int] | None = None) -> str:
    """Write `data` to a new temporary next to `path` (fsynced, with `mode`, else the ordinary mode,
    and `owner` when this process may set it) and return its name; `rename(temporary, path)` then
    publishes it. On failure the temporary is gone and the OSError names `path`."""
    path = Path(path)
    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
        try:
            _write_all(handle, data)
            os.fsync(handle)
        finally:
            os.close(handle)
        os.chmod(temporary, stat.S_IMODE(mode) if mode is not None else _ordinary_mode())
        if owner is not None and owner != (os.getuid(), os.getgid()):
            try:
                os.chown(temporary, *owner)
            except PermissionError:
                pass
        staged, temporary = temporary, None
        return staged
    except OSError as err:
        err.filename = str(path)  # not the temporary's name: the user knows the file, not it
        raise
    finally:
        if temporary is not None:
            discard([temporary])


def discard(temporaries: list[str]) -> None:
    """Remove staged temporaries that will not be published (errors ignored: they may be gone)."""
    for temporary in temporaries:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def atomic_write(path: Path | str, data: bytes, mode: int | None = None, owner: tuple[int, int] | None = None,
                 *, follow_link: bool = True, make_parents: bool = True) -> None:
    """Replace `path` with `data` in one rename; the file is never seen half-written.

    With `follow_link`, a symlinked file is written at its target (the link stays a link); without,
    the link itself is replaced. The mode and owner of a file that existed (or those given) are
    kept when this process may set them; a new file gets the ordinary mode (umask), not mkstemp's.
    An OSError names `path` in its `filename`; the temporary is gone when it is raised.
    """
    path = Path(path)
    if follow_link and path.is_symlink():
        path = Path(os.path.realpath(path))
    try:
        info = path.lstat()
        if not stat.S_ISLNK(info.st_mode):
            owner = owner or (info.st_uid, info.st_gid)
            mode = info.st_mode if mode is None else mode
    except FileNotFoundError:
        pass
    if make_parents:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            err.filename = str(path)
            raise
    publish([(stage(path, data, mode, owner), path)])


def publish(staged: Sequence[tuple[str, Path | str]]) -> None:
    """Rename each staged temporary (`stage`) over its file, in order, then fsync their folders:
    files written together appear together, each whole. A link at a file's path is replaced. On
    failure the temporaries not yet renamed are removed and the OSError names the file."""
    for index, (temporary, path) in enumerate(staged):
        try:
            os.replace(temporary, path)
        except OSError as err:
            discard([later for later, _ in staged[index:]])
            err.filename = str(path)
            raise
    synced: set[str] = set()
    for _, path in staged:
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in synced:
            synced.add(folder)
            try:
                fsync_dir(folder)
            except OSError as err:
                err.filename = str(path)
                raise


def move_over(source: Path | str, target: Path | str, mode: int | None = None) -> None:
    """Move `source` over `target` (whose link, if any, is followed) in one rename, durable once it
    returns: it needs no free space. A target on another file system (a symlinked file) gets an
    atomic copy of `source` (with `mode`), and `source` is then removed."""
    real = Path(os.path.realpath(target))
    try:
        os.replace(source, real)
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
        atomic_write(real, Path(source).read_bytes(), mode)
        os.unlink(source)
    fsync_dir(real.parent)


def remove_temporaries(path: Path | str) -> None:
    """Remove the temporaries a killed writer of `path` (whose link, if any, is followed) left beside it."""
    real = Path(os.path.realpath(path))
    escaped = "".join(f"[{char}]" if char in "*?[" else char for char in real.name)
    for leftover in real.parent.glob(f".{escaped}.*{TEMPORARY_SUFFIX}"):
        leftover.unlink(missing_ok=True)


def remove_temporaries_in(folder: Path | str) -> None:
    """Remove every temporary a killed writer left in `folder` (not in its subfolders)."""
    for leftover in Path(folder).glob(f".*{TEMPORARY_SUFFIX}"):
        leftover.unlink(missing_ok=True)


def write_output(path: Path | str, text: str) -> None:
    """An output file the user named (`lint -o`, gen's script, the HTML report): written whole or
    not at all, replacing a symbolic link at `path` rather than writing into its target."""
    atomic_write(path, text.encode("utf-8"), follow_link=False, make_parents=False)


def open_new_log(path: Path | str) -> int:
    """A descriptor for a log file rlpatch (re)writes, opened without following a link at `path`
    (ELOOP when one is there): a planted link cannot turn the log into a write elsewhere."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)


@contextmanager
def atomic_text(path: Path | str) -> Iterator[TextIO]:
    """A text file written piece by piece (a copy of a huge dump.json) and published in one rename
    when the block ends; on any error the temporary is removed and `path` is untouched. A link at
    `path` is replaced, never written through."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, _ordinary_mode())
        os.replace(temporary, path)
        fsync_dir(path.parent)
    except BaseException as err:
        discard([temporary])
        if isinstance(err, OSError):
            err.filename = str(path)
        raise
