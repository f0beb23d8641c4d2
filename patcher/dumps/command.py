"""The exact `msprobe compare` argv for one pair (spec `dumps.md` section 4).

msprobe checks every argument that starts with `-` against an allow-list: `--backend=fsdp` fails
(exit 1) and `--target-path`/`--golden-path` fail (exit 2), so the flags are separate tokens, the
short `-tp`/`-gp`/`-o` forms, `-tp` the training side and `-gp` the inference side. It runs as
`<python> -m msprobe.msprobe` in the target interpreter, never a `msprobe` found on PATH. With
`--backend fsdp`, `dumps compare` points `-tp` at rlpatch's FSDP-named copy of the training dump when
it needs one (`rlpatch.dumps.mapping`), so the command it runs can differ from the planned one.
"""

from __future__ import annotations

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


def pair_out_dir(out: str, request_id: str, infer_rank: int, several_ranks: bool) -> str:
    """One output folder per pair: the request id (made path-safe), and the rank when TP > 1."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request_id) or "request"
    return os.path.join(out, f"{name}.rank{infer_rank}" if several_ranks else name)


def planned_commands(pairs: Sequence[Pair], backend: str, out: str,
                     python: Sequence[str] = DEFAULT_PYTHON) -> list[tuple[Pair, str, list[str]]]:
    """Each pair with its output folder under `out` and its compare argv."""
    ids = Counter(pair.request_id for pair in pairs)
    planned = []
    for pair in pairs:
        folder = pair_out_dir(out, pair.request_id, pair.infer.rank, ids[pair.request_id] > 1)
        planned.append((pair, folder, compare_argv(pair.train.path, pair.infer.path, backend, folder, python)))
    return planned
