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
from dataclasses import dataclass, replace

from rlpatch.dumps.correlate import Pair

BACKENDS = ("fsdp", "megatron")
DEFAULT_PYTHON = ("python",)
DEFAULT_OUT = "rlpatch_compare"


@dataclass(frozen=True)
class CompareCommand:
    """One `msprobe compare` run: the interpreter's argv, the two dump.json files, the backend, the output folder."""

    python: tuple[str, ...]
    train_json: str  # -tp
    infer_json: str  # -gp
    backend: str
    out: str  # -o

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend {self.backend!r} is not one of {', '.join(BACKENDS)}")

    @property
    def argv(self) -> list[str]:
        return [*self.python, "-m", "msprobe.msprobe", "compare", "-tp", self.train_json, "-gp", self.infer_json,
                "--consistent_check", "--backend", self.backend, "-o", self.out]

    def on(self, train_json: str, infer_json: str) -> CompareCommand:
        """The same compare of other files (the cut pair, the FSDP-named copy of the training dump)."""
        return replace(self, train_json=train_json, infer_json=infer_json)

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> CompareCommand | None:
        """The command of an argv this module built (a stored run's); None when it is not one."""
        words = list(argv)
        try:
            head = words.index("-m")
            built = cls(tuple(words[:head]), words[words.index("-tp") + 1], words[words.index("-gp") + 1],
                        words[words.index("--backend") + 1], words[words.index("-o") + 1])
        except (ValueError, IndexError):
            return None
        return built if built.argv == words else None


def compare_argv(train_json: str, infer_json: str, backend: str, out: str,
                 python: Sequence[str] = DEFAULT_PYTHON) -> list[str]:
    return CompareCommand(tuple(python), train_json, infer_json, backend, out).argv


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
                     python: Sequence[str] = DEFAULT_PYTHON) -> list[tuple[Pair, str, CompareCommand]]:
    """Each pair with its output folder under `out` and its compare command."""
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
        planned.append((pair, folder, pair_command(pair, backend, folder, python)))
    return planned


def pair_command(pair: Pair, backend: str, out: str, python: Sequence[str] = DEFAULT_PYTHON) -> CompareCommand:
    """The compare of one pair's two dump.json files as they are on disk, into `out`."""
    return CompareCommand(tuple(python), pair.train.path, pair.infer.path, backend, out)
