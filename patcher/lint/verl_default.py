"""Which verl the RL3xx family checks a run against when the user names none (no --verl-root,
--verl-version or --python).

The verl that will run, as far as it can be known here without importing it:

1. the verl of the script's own interpreter, when the launch names one that is known here: an
   absolute path that exists here (`/opt/venv/bin/python3 -m verl...`), or a bare `python3` that
   this PATH resolves to rlpatch's own environment (an activated venv holding both). A bare name
   found elsewhere on this PATH is not probed: the PATH of the run is not known here, and a probe
   is a subprocess on every lint. A launcher that changes the environment first (`uv run`,
   `ray job submit`, a PYTHONPATH set for the launch) is not used either;
2. else the released verl the rules assume (the newest release, or `[tool.rlpatch] verl-version`):
   its unpacked wheel from rlpatch's cache, downloaded once like the wheels of `--verl-version`,
   the download bounded in time. A failed download is remembered for a while, so an offline
   pre-commit hook does not wait on every commit.

What was used (or why the family did not run) is one note for the whole lint invocation
(`LintOptions.notes`, printed once on stderr), never a finding per script. `RLPATCH_DEFAULT_VERL=none`
turns the default off (RL3xx then runs only against a verl the user names): the test kit sets it so
that tests without the `upstream` marker never download.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, NamedTuple

from rlpatch.lint.rule import Fact, LintOptions

if TYPE_CHECKING:
    from rlpatch.shell.api import Run

SWITCH = "RLPATCH_DEFAULT_VERL"  # "none": no default verl
DOWNLOAD_TIMEOUT_S = 45.0
RETRY_AFTER_S = 600  # after a failed download, the next lint within this many seconds does not try again
FAMILY = "RL301-RL306"
NAME_ONE = "give --verl-root, --verl-version or --python"


class DefaultVerl(NamedTuple):
    """The verl tree to compose against (None: the family does not run) and the note saying so."""

    root: str | None
    note: str


RELEASE: Fact[DefaultVerl] = Fact("default verl: the release")  # the invocation's (target_facts)
OF_INTERPRETER: Fact[DefaultVerl | None] = Fact("default verl: an interpreter's")  # about: its path


def default_verl(options: LintOptions, run: Run) -> DefaultVerl:
    """The verl `run` is checked against when none is named; its note is added to `options.notes`."""
    chosen = _choose(options, run)
    if chosen.note:
        options.notes[chosen.note] = None
    return chosen


def _choose(options: LintOptions, run: Run) -> DefaultVerl:
    policy = policy_of(options)
    if policy == "none":
        return DefaultVerl(None, "")
    if policy == "auto":
        interpreter = script_interpreter(run)
        if interpreter is not None:
            found = options.target_facts.get_or_compute(OF_INTERPRETER, lambda: _of_interpreter(interpreter), interpreter)
            if found is not None:
                return found
    return options.target_facts.get_or_compute(RELEASE, lambda: _release(str(options.verl_version), policy), policy)


def policy_of(options: LintOptions) -> str:
    """"none" (the switch), "release" (a caller that knows the interpreter has no verl: doctor), or "auto"."""
    if os.environ.get(SWITCH, "").strip().lower() in ("none", "off", "0"):
        return "none"
    return str(options.verl_default or "auto")


# ---------------------------------------------------------------------------- the script's interpreter
def script_interpreter(run: Run) -> str | None:
    """The interpreter of `run`'s launch when it is known here (see the module's docstring), else None."""
    launch = run.launch
    words = [arg.text for arg in launch.launcher]
    if len(words) != 1 or words[0] is None or not _is_python(words[0]) or "PYTHONPATH" in launch.env:
        return None
    word = words[0]
    if os.path.isabs(word):
        return word if os.path.isfile(word) and os.access(word, os.X_OK) else None
    import sys

    found = _which(word)
    if found and os.path.dirname(os.path.abspath(found)) == os.path.dirname(os.path.abspath(sys.executable)):
        return found
    return None


def _which(command: str) -> str | None:
    """`shutil.which(command)` on POSIX, without importing shutil (with bz2, lzma and zlib) on the start
    of every lint whose launch is a bare `python3`: a path is checked as is, a name looked up on PATH."""
    def runnable(path: str) -> bool:
        return os.path.exists(path) and os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path)

    if os.path.dirname(command):
        return command if runnable(command) else None
    path = os.environ.get("PATH")
    if path is None:
        try:
            path = os.confstr("CS_PATH")
        except (AttributeError, ValueError):
            path = os.defpath
    if not path:  # PATH='' finds nothing (PATH=':' looks in the working folder)
        return None
    seen: set[str] = set()
    for folder in path.split(os.pathsep):
        if folder in seen:
            continue
        seen.add(folder)
        candidate = os.path.join(folder, command)
        if runnable(candidate):
            return candidate
    return None


def _is_python(word: str) -> bool:
    name = os.path.basename(word)
    return name == "python" or (name.startswith("python") and name[len("python"):].replace(".", "").isdigit())


def _of_interpreter(python: str) -> DefaultVerl | None:
    from rlpatch.errors import InputError
    from rlpatch.upstream.api import probe

    try:
        installed = probe(python, ("verl",))["verl"]
    except InputError:
        return None  # it does not run here: the release stands in, as for an interpreter not known here
    if installed.location is None or not installed.location.is_dir():
        return None
    version = f"verl {installed.version}" if installed.version else "the verl"
    return DefaultVerl(str(installed.location.parent), f"{FAMILY} checked against {version} of {python} (the script's interpreter)")


# ------------------------------------------------------------------------------------- the release
def _release(version: str, policy: str) -> DefaultVerl:
    from rlpatch.upstream.api import cached_tree

    why = "the interpreter that runs verl has none" if policy == "release" else f"no verl was named ({NAME_ONE} to choose)"
    used = f"{FAMILY} checked against verl {version}, {_which_release(version)}, as {why}"
    tree = cached_tree("verl", version)
    if tree is not None:
        return DefaultVerl(str(tree), used)
    with _one_try_at_a_time():
        # Asked again under the lock: forked lint workers (--jobs) that all miss the cache wait for the
        # first one's download, or learn of its failure, instead of each waiting on the network in turn.
        tree = cached_tree("verl", version)
        if tree is not None:
            return DefaultVerl(str(tree), used)
        failed = _recent_failure(version)
        if failed:
            return DefaultVerl(None, _not_run(version, failed))
        from rlpatch.errors import InputError
        from rlpatch.upstream.api import unpacked_tree

        try:
            return DefaultVerl(str(unpacked_tree("verl", version, timeout=DOWNLOAD_TIMEOUT_S)), used)
        except InputError as err:
            _remember_failure(version, err.message)
            return DefaultVerl(None, _not_run(version, err.message))


@contextmanager
def _one_try_at_a_time() -> Iterator[None]:
    """An exclusive lock on the default verl's download (none when the cache cannot hold a lock file)."""
    import fcntl

    from rlpatch.upstream.api import cache_dir

    folder = cache_dir() / "schema"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / ".default-verl.lock", "a+")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _which_release(version: str) -> str:
    from rlpatch.shell.api import NEWEST_VERL

    return "the newest release" if version == str(NEWEST_VERL) else "the release the rules assume"


def _not_run(version: str, why: str) -> str:
    """The same words for the try that failed and the lints that do not try again (one line for all workers)."""
    return (f"{FAMILY} not run: no verl named and verl {version}'s config is not cached ({why}; not tried again "
            f"for {RETRY_AFTER_S // 60} minutes); {NAME_ONE}, or run once online")


def _failure_marker(version: str):
    from rlpatch.upstream.api import cache_dir

    return cache_dir() / "schema" / f"verl-{version}.download-failed"


def _recent_failure(version: str) -> str | None:
    """Why the last download failed, when it failed less than RETRY_AFTER_S ago."""
    marker = _failure_marker(version)
    try:
        if time.time() - marker.stat().st_mtime > RETRY_AFTER_S:
            return None
        said = marker.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return said


def _remember_failure(version: str, why: str) -> None:
    marker = _failure_marker(version)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(why + "\n", encoding="utf-8")
    except OSError:
        pass  # a read-only cache only means the next lint tries again


# ------------------------------------------------------------------------------------ --show-settings
def describe(options: LintOptions) -> str:
    """The `--show-settings` line: which verl RL3xx would check against, and from where (no download)."""
    if options.verl_root:
        return f"--verl-root {options.verl_root}"
    given = options.verl_version_given
    if given:
        return f"verl {given}'s released config{_cached_at(given)}"
    python = options.python
    if python:
        return f"the verl of --python {python}{_installed_at(python)}"
    policy = policy_of(options)
    if policy == "none":
        return f"none named ({SWITCH}=none: {FAMILY} run only against a verl named; {NAME_ONE})"
    version = str(options.verl_version)
    release = f"verl {version}, {_which_release(version)}{_cached_at(version)}"
    if policy == "release":
        return release
    return (f"the verl of a script's interpreter when known here (an absolute path that exists here, or "
            f"rlpatch's own environment), else {release}")


def _installed_at(python: str) -> str:
    from rlpatch.errors import InputError
    from rlpatch.upstream.api import probe

    try:
        found = probe(python, ("verl",))["verl"]
    except InputError as err:
        return f" ({err.message})"
    if found.location is None:
        return " (no verl installed there)"
    return f" (verl {found.version or '?'} at {found.location})"


def _cached_at(version: str) -> str:
    from rlpatch.upstream.api import cached_tree

    tree = cached_tree("verl", version)
    return f" (cached: {tree})" if tree is not None else " (not cached: downloaded on first use)"
