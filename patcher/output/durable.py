"""Writes that are all-or-nothing and durable: a file is either wholly old or wholly new.

Every file is written to a temporary `.<name>.XXXX.rlpatch-tmp` in its own folder, fsynced, then
renamed over the file, and the folder is fsynced; a failure (disk full, quota, I/O error) removes
the temporary and raises an OSError naming the file the user knows. Where the file itself is a
symbolic link, the caller chooses: `follow_link` writes the link's target (a patched tree keeps
its links, once `places` has checked the target stays inside the tree), otherwise the link is
replaced by the file (an output file: never a write through a link into its target).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
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
    try:
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        temporary = stage(path, data, mode, owner)
        try:
            os.replace(temporary, path)
        except OSError:
            discard([temporary])
            raise
        fsync_dir(path.parent)
    except OSError as err:
        err.filename = str(path)
        raise


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
