"""The probe that runs *inside* the target interpreter, in two stages, and reads its answer.

Stage 1 uses the standard library only (`importlib.metadata`, `importlib.util.find_spec`: no
package is executed) and is fast; stage 2 really imports `from msprobe.pytorch import
PrecisionDebugger` in a second subprocess with its own timeout, because that import pulls in torch
(and on NPU hosts torch_npu and CANN), which can take long, print, or crash. Each stage prints one
marker line, found even when site hooks print other text. Never `-I`/`-E`: they drop PYTHONPATH.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass

from rlpatch.errors import InputError

MARKER = "RLPATCH-PROBE "
STAGE1_TIMEOUT_S = 60.0

# distribution name -> top-level module, in the order doctor reports them.
PACKAGES: dict[str, str] = {
    "mindstudio-probe": "msprobe",
    "torch": "torch",
    "torch_npu": "torch_npu",
    "verl": "verl",
    "sglang": "sglang",
    "vllm": "vllm",
    "vllm-ascend": "vllm_ascend",
    "ray": "ray",
}

STAGE1 = r"""
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
    try:
        spec = iu.find_spec(module)
        if spec is not None:
            paths = list(spec.submodule_search_locations or [])
            location = paths[0] if paths else spec.origin
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
    out["packages"][dist] = {"module": module, "location": location, "version": version, "version_from": source if version else None,
                             "installed_version": installed, "error": error}
sys.stdout.write("\n" + MARKER + json.dumps(out) + "\n")
"""

STAGE2 = r"""
import json, os, sys, traceback
try:
    from msprobe.pytorch import PrecisionDebugger
    out = {"ok": True, "torch_npu_loaded": "torch_npu" in sys.modules}
except BaseException as err:
    frames = ["%s:%s" % (f.filename, f.lineno) for f in traceback.extract_tb(err.__traceback__)]
    message = (str(err).strip().splitlines() or [""])[0]
    out = {"ok": False, "type": type(err).__name__, "error": message,
           "missing": getattr(err, "name", None) if isinstance(err, ImportError) else None,
           "frames": frames[-8:], "torch_npu_loaded": "torch_npu" in sys.modules,
           "torch_npu_involved": "torch_npu" in message or any("torch_npu" in f for f in frames)}
sys.stdout.write("\n" + MARKER + json.dumps(out) + "\n")
sys.stdout.flush()
os._exit(0)  # no atexit hooks of half-imported frameworks
"""


@dataclass(frozen=True)
class Interpreter:
    """How to start the target Python: an argv prefix, the folder and the environment to start it in."""

    argv: tuple[str, ...]
    chosen_by: str  # "--python", "the launcher of the verl command at run.sh:12", ...
    cwd: str | None = None
    env: tuple[tuple[str, str], ...] = ()  # the full environment (empty: this process's)

    @property
    def display(self) -> str:
        return shlex.join(self.argv)


def run_stage(interpreter: Interpreter, source: str, args: list[str], timeout: float, stage: str) -> dict:
    """Run one stage in the target and return its marker's JSON (InputError when there is none)."""
    command = [*interpreter.argv, "-c", source, *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout,
                              cwd=interpreter.cwd, env=dict(interpreter.env) or None, check=False)
    except FileNotFoundError:
        raise InputError(f"{interpreter.chosen_by}: {interpreter.argv[0]}: no such interpreter") from None
    except PermissionError:
        raise InputError(f"{interpreter.chosen_by}: {interpreter.argv[0]}: not executable") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"{interpreter.chosen_by}: {interpreter.display}: the {stage} probe timed out after "
                         f"{timeout:g} s") from None
    except OSError as err:
        raise InputError(f"{interpreter.chosen_by}: {interpreter.display}: cannot run it ({err.strerror})") from None
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER):])
            except ValueError:
                break
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    detail = said[-1] if said else f"exit {done.returncode}, no output"
    raise InputError(f"{interpreter.chosen_by}: {interpreter.display} is not a working Python interpreter ({detail})")


def environment(interpreter: Interpreter) -> dict:
    """Stage 1: where and which version each package is, for this interpreter, without importing any."""
    return run_stage(interpreter, STAGE1.replace("MARKER", repr(MARKER)), [json.dumps(PACKAGES)], STAGE1_TIMEOUT_S,
                     "metadata")


def msprobe_import(interpreter: Interpreter, timeout: float) -> dict:
    """Stage 2: the real `from msprobe.pytorch import PrecisionDebugger`, and why it failed."""
    answer = run_stage(interpreter, STAGE2.replace("MARKER", repr(MARKER)), [], timeout, "msprobe import")
    answer["cause"] = import_failure_cause(answer)
    return answer


def import_failure_cause(answer: dict) -> str | None:
    """`None` (it imported), `msprobe` (missing), `torch`, `cann` (torch_npu / CANN), `module` or `error`."""
    if answer.get("ok"):
        return None
    missing = (answer.get("missing") or "").split(".")[0]
    error = answer.get("error") or ""
    if missing == "msprobe":
        return "msprobe"
    if answer.get("torch_npu_involved") or any(word in error.lower() for word in ("libascend", "libhccl", "cann", "ascend")):
        return "cann"
    if missing == "torch":
        return "torch"
    return "module" if missing else "error"
