"""Cut a rows pair (`rlpatch.dumps.rows`) into its own msprobe-format pair before msprobe compares it.

The cutting needs torch: when msprobe runs in rlpatch's own interpreter, `slicing.cut` runs here
(torch is then imported once for all pairs); with `--python`, `slicing.py` runs as a script in that
interpreter (the one that has msprobe, hence torch), reading a spec this module writes into the
pair's output folder. A statistics dump holds no tensors to cut: the pair is not compared, with one line that
says what works instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlpatch.dumps.correlate import Pair

SLICER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slicing.py")
CUT_FOLDER = "cut"
SPEC_NAME = "cut_spec.json"
LOG_NAME = "cut.log"
_TASK = re.compile(rb'"task"\s*:\s*"([A-Za-z_]+)"')
STATISTICS_LINE = ("task statistics: a statistics dump holds one summary per whole step, its rows cannot be cut per "
                   "request; collect with \"task\": \"tensor\" for the dumped scope (list/level/rank to bound it), or "
                   "use msprobe 26.2's request-scoped dumping (\"request_id\" in the msprobe config)")


@dataclass(frozen=True)
class Cut:
    train: str
    infer: str
    unsliced: list[str]
    not_compared: list[str]


def dump_task(path: str) -> str | None:
    """The `task` msprobe wrote near the top of a dump.json (read from its head: the file can be huge)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64 * 1024)
    except OSError:
        return None
    found = _TASK.search(head)
    return found.group(1).decode("ascii") if found else None


def _cut_here(spec: dict[str, Any], out: str) -> Cut | str:
    """In this interpreter: the compare runs here too, so torch is here (imported once, not per pair)."""
    from rlpatch.dumps.slicing import cut

    try:
        answer = cut(spec)
    except (OSError, ValueError, RuntimeError, KeyError, IndexError, ImportError) as err:
        return f"cutting the request's rows failed ({type(err).__name__}: {err}): not compared"
    return Cut(answer["train"], answer["infer"], answer["unsliced"], answer["not_compared"])


def cut_pair(pair: Pair, out: str, python: Sequence[str]) -> Cut | str:
    """The cut pair's dump.json paths, or why the pair is not compared (one line)."""
    assert pair.rows is not None
    if "statistics" in (dump_task(pair.train.path), dump_task(pair.infer.path)):
        return STATISTICS_LINE
    folder = os.path.join(out, CUT_FOLDER)
    spec = pair.rows.spec(pair.train.path, pair.infer.path, folder)
    if list(python) == [sys.executable]:
        return _cut_here(spec, out)
    spec_path = os.path.join(out, SPEC_NAME)
    try:
        os.makedirs(folder, exist_ok=True)
        with open(spec_path, "w", encoding="utf-8") as handle:
            json.dump(spec, handle)
        with open(os.path.join(out, LOG_NAME), "w", encoding="utf-8") as log:
            completed = subprocess.run([*python, SLICER, spec_path], stdout=subprocess.PIPE, stderr=log,
                                       stdin=subprocess.DEVNULL, check=False, text=True)
    except OSError as err:
        return f"cannot cut the request's rows ({err.strerror}): not compared"
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        return (f"cutting the request's rows failed (exit {completed.returncode}, see "
                f"{os.path.join(out, LOG_NAME)}): not compared")
    try:
        answer = json.loads(lines[-1])
        return Cut(str(answer["train"]), str(answer["infer"]), list(answer["unsliced"]), list(answer["not_compared"]))
    except (ValueError, KeyError, TypeError):
        return f"cutting the request's rows gave no answer (see {os.path.join(out, LOG_NAME)}): not compared"
