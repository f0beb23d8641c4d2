"""The probe that runs *inside* the target interpreter, in two stages, and reads its answer.

Stage 1 is the probe every target-interpreter question uses (`rlpatch.upstream.target_probe`: the
standard library only, `importlib.metadata` and `importlib.util.find_spec`, no package is executed)
and is fast; stage 2 really imports `from msprobe.pytorch import
PrecisionDebugger` in a second subprocess with its own timeout, because that import pulls in torch
(and on NPU hosts torch_npu and CANN), which can take long, print, or crash. Each stage prints one
marker line, found even when site hooks print other text. Never `-I`/`-E`: they drop PYTHONPATH.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from dataclasses import dataclass

from rlpatch.errors import InputError
from rlpatch.upstream.api import PROBE_SOURCE, last_words, read_probe_answer, run_bounded, with_probe_marker

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

STAGE2 = with_probe_marker(r"""
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
""")


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


class Deadline:
    """The time the whole probe may take (`--timeout`): every stage gets what is left of it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends = time.monotonic() + seconds

    def left(self, cap: float | None = None) -> float:
        left = max(0.0, self.ends - time.monotonic())
        return left if cap is None else min(cap, left)


def run_stage(interpreter: Interpreter, source: str, args: list[str], timeout: float, stage: str) -> dict:
    """Run one stage in the target and return its marker's JSON (InputError when there is none)."""
    command = [*interpreter.argv, "-c", source, *args]
    if timeout <= 0:
        raise InputError(f"{interpreter.chosen_by}: {interpreter.display}: no time left for the {stage} probe "
                         "(--timeout)")
    try:
        done = run_bounded(command, timeout, interpreter.cwd, dict(interpreter.env))
    except FileNotFoundError:
        # `--python X` says it as every command does; a launcher read from the script names the word.
        missing = "" if interpreter.chosen_by.startswith("--python") else f" {interpreter.argv[0]}:"
        raise InputError(f"{interpreter.chosen_by}:{missing} no such interpreter") from None
    except PermissionError:
        raise InputError(f"{interpreter.chosen_by}: {interpreter.argv[0]}: not executable") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"{interpreter.chosen_by}: {interpreter.display}: the {stage} probe timed out after "
                         f"{timeout:.3g} s") from None
    except OSError as err:
        raise InputError(f"{interpreter.chosen_by}: {interpreter.display}: cannot run it ({err.strerror})") from None
    answer = read_probe_answer(done.stdout)
    if answer is not None:
        return answer
    raise InputError(f"{interpreter.chosen_by}: {interpreter.display} is not a working Python interpreter "
                     f"({last_words(done)})")


def environment(interpreter: Interpreter, deadline: Deadline) -> dict:
    """Stage 1: where and which version each package is, for this interpreter, without importing any
    (the probe `upstream.target_probe` runs for every command that asks a target interpreter)."""
    answer = run_stage(interpreter, PROBE_SOURCE, [json.dumps(PACKAGES)],
                       deadline.left(STAGE1_TIMEOUT_S), "metadata")
    packages = answer.get("packages")
    if not isinstance(packages, dict) or not all(isinstance(v, dict) for v in packages.values()):
        raise InputError(f"{interpreter.chosen_by}: {interpreter.display}: the metadata probe's answer is malformed "
                         "(no package table): something in the target rewrites its output")
    return answer


def msprobe_import(interpreter: Interpreter, deadline: Deadline) -> dict:
    """Stage 2: the real `from msprobe.pytorch import PrecisionDebugger`, and why it failed."""
    answer = run_stage(interpreter, STAGE2, [], deadline.left(), "msprobe import")
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
