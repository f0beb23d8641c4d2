"""The patch wing's typed door: what the command line and the other wings call.

The command line (`cli`) turns its flags into one frozen options object, calls these and prints
the result; the linter (RL605/RL607, imported lazily: a plain lint never loads libcst) and doctor ask for a
patch state here instead of running a command.

- `select(TargetOptions)`: the selected rules and the trees they act on (`Selection`).
- `apply(targets, rules, ApplyOptions)` -> `ApplyResult`; `verify(targets, rules)` -> `VerifyResult`
  (`verify` and `status`); `revert(targets, rules)` -> `RevertResult`; `diff(targets, rules)` ->
  `DiffResult`. Each takes the trees' locks and recovers an interrupted command first; what the user
  must hear while it runs goes to `say` (default: nothing). Each rule's report keeps what the rule
  found on the tree (a `Finding`) apart from what the command did with it (an `Outcome`); the state
  and message it shows (text, JSON) derive from the two.
- `verify_payload(...)`: what `rlpatch verify --format json` prints, as a dict, without a lock.
- `payload`, `coverage`, `unchecked_packages`, `not_applicable_targets`: the parts of that report.
"""

from __future__ import annotations

from typing import Any

from rlpatch.patch.commands import (
    ApplyResult,
    Commit,
    DiffResult,
    RevertResult,
    RuleOutcome,
    VerifyResult,
    apply,
    diff,
    revert,
    status_reports,
    verify,
)
from rlpatch.patch.options import ApplyOptions, Say, TargetOptions, silent
from rlpatch.patch.reporting import coverage, not_applicable_targets, payload, unchecked_packages
from rlpatch.patch.selection import Selection, select
from rlpatch.patch.states import Finding, Outcome

__all__ = [
    "ApplyOptions", "ApplyResult", "Commit", "DiffResult", "Finding", "Outcome", "RevertResult", "RuleOutcome", "Say",
    "Selection", "TargetOptions", "VerifyResult", "apply", "coverage", "diff", "not_applicable_targets", "payload",
    "revert", "select", "silent", "unchecked_packages", "verify", "verify_payload",
]


def verify_payload(*, mode: str | None = None, backend: str = "all", rule_ids: str | None = None,
                   verl_root: str | None = None, sglang_root: str | None = None, vllm_ascend_root: str | None = None,
                   python: str | None = None) -> dict[str, Any]:
    """`rlpatch verify --format json` with these options, without a subprocess and without printing:
    `{"targets": [...], "unchecked": [...]}`; InputError for a bad root or no tree at all.

    Unlike `verify`, it takes no lock and recovers nothing: it reads the trees as they are.
    """
    options = TargetOptions(verl_root=verl_root, sglang_root=sglang_root, vllm_ascend_root=vllm_ascend_root,
                            python=python, mode=mode, backend=backend, rule_ids=rule_ids)
    rules, targets = select(options)
    return payload(status_reports(targets, rules), targets, rules)
