"""The one probe rlpatch runs *inside* a target interpreter to learn what it has installed.

`envprobe` (versions for the linter), `targets` (the tree a patch command acts on) and `doctor`
(stage 1) all ask the interpreter that will run verl the same question, with the same script:
for each distribution, where its top-level package is (`importlib.util.find_spec`: the finders
only, the package is not executed) and which version it is (the dist-info beside the package,
else the project's version file, else `importlib.metadata`), plus the interpreter's own facts.
The script uses the standard library only, so it runs in any Python 3 the user points at. Its
answer is one marker line of JSON, found even when site hooks print other text.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import IO, Mapping, Sequence

MARKER = "RLPATCH-PROBE "


def with_marker(source: str) -> str:
    """A script run in the target, its `MARKER` placeholder replaced by the marker's literal."""
    return source.replace("MARKER", repr(MARKER))


# Run in the target: argv[1] is the JSON {distribution: top-level module} to look up.
PROBE_SOURCE = with_marker(r"""
import importlib.metadata as md, importlib.util as iu, json, os, platform, re, sys
PACKAGES = json.loads(sys.argv[1])
VERSION_FILES = {"verl": ("version/version", None), "sglang": ("version.py", r"__version__\s*=\s*['\"]([^'\"]+)"),
                 "vllm_ascend": ("_version.py", r"(?:__version__|version)\s*(?::\s*str)?\s*=\s*['\"]([^'\"]+)")}
def norm(name):
    return re.sub(r"[-_.]+", "_", name).lower()
def beside(dist, folder):
    parent = os.path.dirname(folder)
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return None
    for name in names:
        if name.endswith(".dist-info") and norm(name[:-10].rsplit("-", 1)[0]) == norm(dist):
            try:
                for line in open(os.path.join(parent, name, "METADATA"), encoding="utf-8", errors="replace"):
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
            except OSError:
                return None
    return None
def from_file(module, folder):
    relative, pattern = VERSION_FILES.get(module, (None, None))
    if relative is None:
        return None
    try:
        text = open(os.path.join(folder, relative), encoding="utf-8", errors="replace").read()
    except OSError:
        return None
    if pattern is None:
        return text.strip() or None
    found = re.search(pattern, text)
    return found.group(1) if found else None
out = {"executable": sys.executable, "python": platform.python_version(), "prefix": sys.prefix, "cwd": os.getcwd(),
       "sys_path": sys.path[:8], "env": {k: v for k, v in os.environ.items() if k.startswith("ASCEND_") or k in ("PYTHONPATH", "LD_LIBRARY_PATH")},
       "packages": {}}
for dist, module in PACKAGES.items():
    location = error = None
    locations = []
    try:
        spec = iu.find_spec(module)
        if spec is not None:
            locations = list(spec.submodule_search_locations or [])
            location = locations[0] if locations else spec.origin
    except Exception as err:
        error = "%s: %s" % (type(err).__name__, err)
    try:
        installed = md.version(dist)
    except Exception:
        installed = None
    version, source = None, None
    if location and os.path.isdir(location):
        version, source = beside(dist, location), "dist-info"
        if version is None:
            version, source = from_file(module, location), "version file"
    if version is None and location:
        version, source = installed, "metadata"
    out["packages"][dist] = {"module": module, "location": location, "locations": locations, "version": version,
                             "version_from": source if version else None, "installed_version": installed, "error": error}
sys.stdout.write("\n" + MARKER + json.dumps(out) + "\n")
""")


def probe_command(argv: Sequence[str], packages: Mapping[str, str]) -> list[str]:
    """The command that runs the probe in the interpreter `argv` starts (a path, or a launcher prefix)."""
    return [*argv, "-c", PROBE_SOURCE, json.dumps(dict(packages))]


def read_answer(stdout: str) -> dict | None:
    """The probe's JSON answer in a process's output (the last marker line), or None."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                answer = json.loads(line[len(MARKER):])
            except (ValueError, RecursionError):
                return None
            return answer if isinstance(answer, dict) else None
    return None


# What is kept of a probe's output: its tail (the marker line is the last thing a probe prints). The
# rest goes to a temporary file, so a target that prints hundreds of megabytes costs no memory.
OUTPUT_TAIL = 1024 * 1024


def run_bounded(command: Sequence[str], timeout: float, cwd: str | None = None,
                env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run a probe in a target with its output in temporary files (only their tails are read) and its
    whole process group ended at the timeout (a launcher such as `uv run` starts the interpreter as
    a child). Raises what `subprocess` raises (OSError, TimeoutExpired)."""
    import tempfile  # here: the lint path imports this module and rarely runs a probe

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd,
                                   env=dict(env) if env else None, start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end_group(process)
            raise
        return subprocess.CompletedProcess(list(command), code, _tail(out), _tail(err))


def _tail(handle: IO[bytes]) -> str:
    handle.seek(0, os.SEEK_END)
    handle.seek(max(0, handle.tell() - OUTPUT_TAIL))
    return handle.read().decode("utf-8", errors="replace")


def _end_group(process: subprocess.Popen) -> None:
    """SIGKILL the probe's own process group (the one it was started in, by PID), then reap it."""
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    process.wait()


def last_words(done: subprocess.CompletedProcess) -> str:
    """What a probe that gave no answer said last (for the one-line error)."""
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    return said[-1] if said else f"exit {done.returncode}, no output"
