"""Released upstream wheels, downloaded once into a cache outside any repository and unpacked.

`make demo`, the upstream tests and `rlpatch lint --verl-version X` use real released trees without
committing a line of upstream code. The cache lives in `$RLPATCH_CACHE`, else
`$XDG_CACHE_HOME/rlpatch`, else `~/.cache/rlpatch`. Downloads go through `pip download --no-deps`,
so they use whatever package index pip is configured for: the running interpreter's pip, else a
`pip3`/`pip` on PATH, else a pip run by uv (`uv tool run --from pip pip`: uv itself has no
`pip download`), for environments made by `uv tool install` or `python -m venv --without-pip`.
"""

from __future__ import annotations

import fcntl
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence, Union

from rlpatch.errors import InputError


def cache_dir() -> Path:
    """The root of rlpatch's download cache (created on first use)."""
    explicit = os.environ.get("RLPATCH_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rlpatch"


@contextmanager
def _cache_lock() -> Iterator[None]:
    # Parallel test workers and concurrent demos must not unpack the same wheel twice at once.
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# Platform-specific projects tag their wheels with different glibc baselines from one release to
# the next (vllm-ascend: manylinux_2_24 up to 0.18.0, manylinux_2_34 from 0.23.0) and pip does not
# widen a given `--platform` to older baselines, so callers may pass every tag they accept.
Platform = Union[str, Sequence[str], None]
LINUX_X86_64: tuple[str, ...] = (
    "manylinux_2_34_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux2014_x86_64",
)


def _platform_tags(platform: Platform) -> tuple[str, ...]:
    if not platform:
        return ()
    return (platform,) if isinstance(platform, str) else tuple(platform)


def pip_command(project: str, version: str) -> list[str]:
    """The command that runs a pip able to download `project==version`, or a one-line InputError
    naming what is missing and the two ways out."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        found = shutil.which(name)
        if found:
            return [found]
    uv = shutil.which("uv")
    if uv:
        return [uv, "tool", "run", "--from", "pip", "pip"]
    raise InputError(f"cannot download {project}=={version}: no pip to download it with ({sys.executable} has no "
                     f"pip module; no pip3, pip or uv on PATH): install pip ({sys.executable} -m ensurepip) or uv, "
                     f"or give the unpacked tree instead (--verl-root for verl)")


def _folder(project: str, version: str, tags: tuple[str, ...]) -> Path:
    return cache_dir() / "wheels" / project / version / ("+".join(tags) or "any")


def cached_tree(project: str, version: str, platform: Platform = None) -> Path | None:
    """The unpacked tree of `project==version` when the cache already holds it, else None: no
    download, no lock (the tree appears whole, by a rename), for callers that must not wait."""
    tree = _folder(project, version, _platform_tags(platform)) / "tree"
    return tree if (tree / ".complete").exists() else None


def wheel_path(project: str, version: str, platform: Platform = None, python_version: str | None = None,
               timeout: float | None = None) -> Path:
    """The downloaded wheel file of `project==version`, downloading it on first use.

    `project` is the name as given (the cache is keyed by it): always spell one project the same way.
    `timeout` bounds the download (seconds; pip's own connection timeout is a third of it, one retry):
    for a caller that has a fallback, such as lint's default verl, a missing network is not a hang.
    """
    import subprocess

    tags = _platform_tags(platform)
    folder = _folder(project, version, tags)
    with _cache_lock():
        found = sorted(folder.glob("*.whl"))
        if found:
            return found[0]
        folder.mkdir(parents=True, exist_ok=True)
        command = [*pip_command(project, version), "download", "--no-deps", "--no-build-isolation", "-q", "-d",
                   str(folder)]
        if tags:
            for tag in tags:
                command += ["--platform", tag]
            command.append("--only-binary=:all:")
            if python_version:
                command += ["--python-version", python_version]
        if timeout is not None:
            command += ["--timeout", str(max(1, int(timeout / 3))), "--retries", "1"]
        command.append(f"{project}=={version}")
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise InputError(f"cannot download {project}=={version}: no answer within {timeout:g} s") from None
        found = sorted(folder.glob("*.whl"))
        if result.returncode != 0 or not found:
            detail = (result.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise InputError(f"cannot download {project}=={version}: {detail}")
        return found[0]


def unpacked_tree(project: str, version: str, platform: Platform = None, python_version: str | None = None,
                  timeout: float | None = None) -> Path:
    """A pristine, read-only-by-convention unpacked copy of the wheel: the root that holds the package."""
    # The warm path (each `lint --verl-version` run): a tree is renamed into place with its
    # `.complete` inside, so its presence is enough, without the lock or the unpacking modules.
    warm = cached_tree(project, version, platform)
    if warm is not None:
        return warm
    import shutil
    import tempfile
    import zipfile

    wheel = wheel_path(project, version, platform, python_version, timeout)
    target = wheel.parent / "tree"
    with _cache_lock():
        if (target / ".complete").exists():
            return target
        if target.exists():
            shutil.rmtree(target)
        staging = Path(tempfile.mkdtemp(dir=wheel.parent, prefix=".unpack-"))
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(staging)
        (staging / ".complete").write_text(wheel.name + "\n")
        os.replace(staging, target)
        return target


def fresh_copy(project: str, version: str, destination: str | os.PathLike[str], *, platform: Platform = None,
               python_version: str | None = None) -> Path:
    """A writable copy of the unpacked wheel at `destination` (the pristine cache stays untouched)."""
    import shutil

    source = unpacked_tree(project, version, platform=platform, python_version=python_version)
    destination = Path(destination)
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns(".complete"), symlinks=True)
    return destination
