"""Test helper: the verl consistency rules applied to a tree through rlpatch.patch.edits alone.

The engine (apply/verify/revert with manifest and transaction) is tested through the CLI elsewhere;
this helper exercises exactly what each rule hands the engine (its insertions) with the three edit
operations, per file and across every rule touching that file.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Callable

import libcst as cst

from rlpatch.patch import edits
from rlpatch.patch.rule import Insertion, PatchRule, Target
from rlpatch.rules.verl_debug_metrics import VerlDebugMetrics
from rlpatch.rules.verl_prompts_only import VerlPromptsOnly
from rlpatch.rules.verl_prompts_only_async import VerlPromptsOnlyAsync
from rlpatch.rules.verl_prompts_only_v1 import VerlPromptsOnlyV1
from rlpatch.rules.verl_request_id import VerlRequestId
from rlpatch.rules.verl_request_id_async import VerlRequestIdAsync
from rlpatch.rules.verl_request_id_v1 import VerlRequestIdV1
from rlpatch.rules.verl_rollout_corr import VerlRolloutCorr
from rlpatch.upstream.versions import Version

RULES: tuple[type[PatchRule], ...] = (
    VerlPromptsOnly, VerlPromptsOnlyAsync, VerlDebugMetrics, VerlRolloutCorr, VerlRequestId, VerlRequestIdAsync,
    VerlPromptsOnlyV1, VerlRequestIdV1,
)
RULE_IDS = tuple(rule.id for rule in RULES)


@dataclass
class Outcome:
    """What applying the set did: per rule its state, per file the original and patched text."""

    states: dict[str, str] = field(default_factory=dict)  # rule id -> applied / not-applicable: reason
    files: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (original, patched)
    rule_files: dict[str, list[str]] = field(default_factory=dict)  # rule id -> files it edits


def _insertions(rules: list[PatchRule], path: str, module: cst.Module) -> dict[str, list[Insertion]]:
    return {rule.id: rule.insertions(path, module) for rule in rules if path in rule.files}


def applicable(root: Path, version: str | None) -> tuple[list[PatchRule], dict[str, str]]:
    """The rules whose gate and files let them run on the tree, and the reasons for the others."""
    target = Target("verl", str(root), Version.maybe(version))
    chosen: list[PatchRule] = []
    skipped: dict[str, str] = {}
    for rule_class in RULES:
        rule = rule_class()
        gate = rule.gate(target)
        if gate.status == "not-applicable":
            skipped[rule.id] = f"not-applicable: {gate.message}"
        elif not any((root / path).is_file() for path in rule.files):
            skipped[rule.id] = "not-applicable: none of its files exist"
        else:
            chosen.append(rule)
    return chosen, skipped


def apply_set(root: Path, version: str | None, write: bool = True) -> Outcome:
    """Apply every applicable rule to the tree at `root` (in place when `write`)."""
    rules, skipped = applicable(root, version)
    outcome = Outcome(states=dict(skipped))
    paths = sorted({path for rule in rules for path in rule.files if (root / path).is_file()})
    for path in paths:
        original = (root / path).read_text()
        module = cst.parse_module(original)
        per_rule = _insertions(rules, path, module)
        pending = [i for found in per_rule.values() for i in found if edits.locate(module, i).state == "absent"]
        patched = edits.insert(module, pending).code if pending else original
        for rule_id, found in per_rule.items():
            if found:
                outcome.rule_files.setdefault(rule_id, []).append(path)
        if patched != original:
            outcome.files[path] = (original, patched)
            if write:
                (root / path).write_text(patched)
    for rule in rules:
        outcome.states[rule.id] = "applied" if outcome.rule_files.get(rule.id) else "no edits"
    return outcome


def site_states(root: Path, version: str | None) -> dict[str, list[str]]:
    """Rule id -> the located state of each of its insertions in the tree as it is now."""
    rules, _ = applicable(root, version)
    states: dict[str, list[str]] = {}
    for rule in rules:
        for path in rule.files:
            if (root / path).is_file():
                module = cst.parse_module((root / path).read_text())
                states.setdefault(rule.id, []).extend(
                    edits.locate(module, i).state for i in rule.insertions(path, module)
                )
    return states


def strip_set(root: Path, version: str | None) -> None:
    """Remove every applied insertion of the set from the tree (what revert does without a manifest)."""
    rules, _ = applicable(root, version)
    paths = sorted({path for rule in rules for path in rule.files if (root / path).is_file()})
    for path in paths:
        module = cst.parse_module((root / path).read_text())
        sites = [edits.locate(module, i) for found in _insertions(rules, path, module).values() for i in found]
        (root / path).write_text(edits.strip(module, sites).code)


@contextmanager
def patched_fixture(source: Path, root: Path) -> Iterator[Callable[[str], ModuleType]]:
    """Copy the fixture tree `source` to `root`, apply the set, and yield an importer of its modules.

    The copy goes first on sys.path; its `verl.*` modules are unloaded afterwards.
    """
    shutil.copytree(source, root)
    outcome = apply_set(root, None)
    assert outcome.files, "the set patched nothing"
    sys.path.insert(0, str(root))
    try:
        yield import_module
    finally:
        sys.path.remove(str(root))
        for name in [name for name in sys.modules if name == "verl" or name.startswith("verl.")]:
            del sys.modules[name]
