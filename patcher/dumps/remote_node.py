"""What runs on each node for `dumps compare --ray`: read this node's disk, then compare its pairs.

Both functions are shipped to the nodes inside rlpatch (`runtime_env` `py_modules`) and run in a
task pinned to the node (rlpatch.cluster). They return records only: the pairs, unpaired requests
and problems of the node's logs, then each pair's summary (the local compare's JSON entry and the
divergence attribution); never a tensor, never a CSV. The paths are read on the node: `~` and
`$VAR` are expanded there, so a node-local scratch (`'$LOCAL_DISK/dumps'`) names each node's own.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from typing import Any

from rlpatch.dumps.command import pair_command
from rlpatch.dumps.compare import PairResult, run_all, written_paths
from rlpatch.dumps.correlate import Correlation, Pair, correlate
from rlpatch.dumps.layout import Tree, scan
from rlpatch.errors import InputError
from rlpatch.output.api import refuse_links

MSPROBE_CHECK = ("import importlib.util as u, importlib.metadata as m; "
                 "assert u.find_spec('msprobe.msprobe'), 'no msprobe.msprobe'; print(m.version('mindstudio-probe'))")


def node_path(path: str) -> str:
    """`path` as this node reads it: `$VAR` and `~` expanded here."""
    return os.path.expanduser(os.path.expandvars(path))


def interpreter(python: str | None) -> list[str]:
    """The `--python` argv on this node (default: the interpreter running the task); InputError when
    it is not found here."""
    from rlpatch.upstream.api import require_interpreter

    return list(require_interpreter(python, where=" on this node")) if python else [sys.executable]


def msprobe_version(python: str | None) -> tuple[str | None, str | None]:
    """(the mindstudio-probe version `--python` imports here, None) or (None, why it cannot compare)."""
    try:
        argv = interpreter(python)
    except InputError as err:
        return None, err.message
    try:
        done = subprocess.run([*argv, "-c", MSPROBE_CHECK], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"{argv[0]}: cannot run ({err})"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"{shlex.join(argv)} cannot import msprobe here ({said}): pip install mindstudio-probe there"
    return done.stdout.strip() or "unknown", None


def scan_node(train: str, infer: str, backend: str, python: str | None) -> dict[str, Any]:
    """Pair what this node's disk holds under the two roots; its records and whether msprobe is here."""
    roots = {"train": node_path(train), "infer": node_path(infer)}
    trees: dict[str, Tree] = {}
    missing: list[str] = []
    for side, root in roots.items():
        if not os.path.isabs(root):
            return {"error": f"--{side} {root}: not an absolute path on this node"}
        try:
            trees[side] = scan(root, validate=False)
        except InputError as err:
            trees[side] = Tree(root)
            missing.append(err.message)
    if len(missing) == len(roots):
        return {"holds": False, "missing": missing}
    found: Correlation = correlate(trees["train"], trees["infer"], backend)
    answer: dict[str, Any] = {"holds": True, "missing": missing, "pairs": found.pairs, "unpaired": found.unpaired,
                              "problems": missing + found.problems, "msprobe": None, "msprobe_error": None}
    if found.pairs:
        answer["msprobe"], answer["msprobe_error"] = msprobe_version(python)
    return answer


def compare_node(planned: list[tuple[Pair, str]], backend: str, out: str, python: str | None, rtol: float | None,
                 jobs: int | None) -> dict[str, Any]:
    """Compare this node's pairs (`jobs` at a time, default its CPU count); each pair's summary."""
    root = node_path(out)
    if os.path.exists(root) and not os.path.isdir(root):
        return {"error": f"{root}: not a directory (-o)"}
    try:
        argv = interpreter(python)
    except InputError as err:
        return {"error": err.message}
    results = []
    for pair, folder in planned:
        here = node_path(folder)
        result = PairResult(pair, pair_command(pair, backend, here, argv), here)
        result.rtol = rtol
        results.append(result)
    try:  # the same rule as on the driver's disk: nothing through a link out of -o
        refuse_links(root, written_paths(results), what="the output folder")
    except InputError as err:
        return {"error": err.message}
    run_all(results, jobs or os.cpu_count() or 1)
    for result in results:
        if result.error is None and result.attribution is None:  # run_one raised (an unwritable -o, say)
            result.error = f"{result.out}: the compare did not finish (is -o writable on this node?)"
    return {"results": [summary(result) for result in results]}


def summary(result: PairResult) -> dict[str, Any]:
    """What travels back for one pair: its JSON entry and the attribution's per-module points."""
    return {"entry": result.as_json(), "attribution": None if result.attribution is None else result.attribution.as_json()}
