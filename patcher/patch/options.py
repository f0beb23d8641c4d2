"""What the patch commands are asked to do: one frozen options object per command, and `Say`.

The command line builds these from its flags; the other wings build them directly. `Say` is how a
command's engine tells the user what happens while it runs (a recovery, a refusal's note): the
command line prints each line on stderr, a caller that only wants the result passes `silent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rlpatch.upstream.api import Package

Say = Callable[[str], None]


def silent(message: str) -> None:
    """A `Say` for callers that want the result only (the linter, doctor)."""


@dataclass(frozen=True)
class TargetOptions:
    """Which trees and which rules: the options every patch command shares (verify, status, revert, diff)."""

    verl_root: str | None = None
    sglang_root: str | None = None
    vllm_ascend_root: str | None = None
    python: str | None = None  # the interpreter whose imported trees are patched when no root is given
    mode: str | None = None  # "consistency" | "inference"; None: every rule for the given roots
    backend: str = "all"  # "fsdp" | "megatron" | "all"
    rule_ids: str | None = None  # comma-separated; overrides mode
    force: bool = False  # patch versions that need it (verl 0.6.x)
    allow_dirty: bool = False  # patch git-tracked files that have uncommitted changes

    def roots(self) -> dict[Package, str | None]:
        """The root given for each package (None: not given)."""
        return {"verl": self.verl_root, "sglang": self.sglang_root, "vllm_ascend": self.vllm_ascend_root}

    def packages_given(self) -> set[str]:
        return {package for package, root in self.roots().items() if root}


@dataclass(frozen=True)
class ApplyOptions(TargetOptions):
    """`apply`: the target options, and whether to write at all and to commit the patch in git."""

    dry_run: bool = False
    commit: bool = False
