"""The exact `msprobe compare` argv for one pair.

msprobe checks every argument that starts with `-` against an allow-list: `--backend=fsdp` fails
(exit 1) and `--target-path`/`--golden-path` fail (exit 2), so the flags are separate tokens, the
short `-tp`/`-gp`/`-o` forms, `-tp` the training side and `-gp` the inference side. It runs as
`<python> -m msprobe.msprobe` in the target interpreter, never a `msprobe` found on PATH. With
`--backend fsdp`, `dumps compare` points `-tp` at rlpatch's FSDP-named copy of the training dump when
it needs one (`rlpatch.dumps.mapping`), so the command it runs can differ from the planned one.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Sequence

from rlpatch.dumps.correlate import Pair

BACKENDS = ("fsdp", "megatron")
DEFAULT_PYTHON = ("python",)
DEFAULT_OUT = "rlpatch_compare"


def compare_argv(train_json: str, infer_json: str, backend: str, out: str,
                 python: Sequence[str] = DEFAULT_PYTHON) -> list[str]:
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
    return [*python, "-m", "msprobe.msprobe", "compare", "-tp", train_json, "-gp", infer_json,
            "--consistent_check", "--backend", backend, "-o", out]


# A folder name stays well under the 255 bytes a file system allows, with room for `.rank{R}`.
MAX_NAME = 96


def safe_name(request_id: str) -> str:
    """A folder name of its own for every request id, always inside `-o`: characters outside
    [A-Za-z0-9_.-] become `_`, a leading dot too (no `.`, `..` or hidden folder), long ids are cut, and
    an id the rules changed gets a hash of the original, so ids that read alike (`a/b`, `a:b`) differ."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request_id)
    name = re.sub(r"^\.", "_", name)[:MAX_NAME]
    if name == request_id and name:
        return name
    return f"{name or 'request'}-{hashlib.sha1(request_id.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def pair_out_dir(out: str, request_id: str, infer_rank: int, several_ranks: bool) -> str:
    """One output folder per pair inside `out`: the request id (made safe), and the rank when TP > 1."""
    name = safe_name(request_id)
    return os.path.join(out, f"{name}.rank{infer_rank}" if several_ranks else name)


def planned_commands(pairs: Sequence[Pair], backend: str, out: str,
                     python: Sequence[str] = DEFAULT_PYTHON) -> list[tuple[Pair, str, list[str]]]:
    """Each pair with its output folder under `out` and its compare argv."""
    ids = Counter(pair.label for pair in pairs)
    planned = []
    used: set[str] = set()
    for pair in pairs:
        folder = base = pair_out_dir(out, pair.label, pair.infer.rank, ids[pair.label] > 1)
        extra = 1
        while folder in used:  # never two pairs in one folder, whatever their ids
            extra += 1
            folder = f"{base}-{extra}"
        used.add(folder)
        planned.append((pair, folder, compare_argv(pair.train.path, pair.infer.path, backend, folder, python)))
    return planned
