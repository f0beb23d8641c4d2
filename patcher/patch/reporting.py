"""What `verify`/`status` report about a selected set: its JSON, trainer coverage, unchecked packages,
trees on which nothing applies. Shared by the command line and the facade (`api`)."""

from __future__ import annotations

from typing import Any, Sequence

from rlpatch.patch.engine import RuleReport, set_state
from rlpatch.patch.rule import PatchRule, Target
from rlpatch.patch.states import Finding
from rlpatch.upstream.api import TrainerCoverage, trainer_coverage


def payload(reports: Sequence[RuleReport], targets: Sequence[Target], rules: Sequence[PatchRule]) -> dict[str, Any]:
    """The JSON of `verify`/`status`: one entry per target; `unchecked` names the selected rules of a
    package no tree was given or found for (the set is incomplete without that tree)."""
    entries = []
    for target in targets:
        own = [report for report in reports if report.target is target]
        state, not_applied = set_state(own)
        entry: dict[str, Any] = {
            "package": target.package,
            "root": target.root,
            "version": str(target.version) if target.version else None,
            "rules": [report.as_json() for report in own],
            "state": state,  # of the selected set on this tree
            "not_applied": not_applied,  # files where the set is not (wholly) in place
        }
        if target.package == "verl" and entry["rules"]:  # for which trainer the selected set is complete
            entry["trainers"] = [c.as_json() for c in coverage(own).values()]
        entries.append(entry)
    return {"targets": entries, "unchecked": unchecked_packages(rules, targets)}


def coverage(own: Sequence[RuleReport]) -> dict[str, TrainerCoverage]:
    """Which verl trainers the rules in place on one tree cover."""
    states = [{"id": r.rule.id, "state": r.state, "trainers": sorted(r.rule.trainers)} for r in own]
    return trainer_coverage(states, own[0].target.version if own else None)


def unchecked_packages(rules: Sequence[PatchRule], targets: Sequence[Target]) -> list[dict[str, Any]]:
    """The packages some selected rule patches but no target stands for: `[{"package", "rules"}]`."""
    checked = {target.package for target in targets}
    missing: dict[str, list[str]] = {}
    for rule in rules:
        if rule.package not in checked:
            missing.setdefault(rule.package, []).append(rule.id)
    return [{"package": package, "rules": ids} for package, ids in missing.items()]


def not_applicable_targets(reports: Sequence[RuleReport], targets: Sequence[Target]) -> list[Target]:
    """Trees on which no selected rule applies to the release (verl 0.5.0 for the consistency set):
    nothing the mode needs can be in place there, so verify calls the set not applied. A release
    that dumps natively (SGLang 0.5.11+, its gate says `native`) needs no patch and is not one."""
    found = []
    for target in targets:
        own = [report for report in reports if report.target is target]
        if own and all(report.finding is Finding.NOT_APPLICABLE for report in own) and \
                not all(report.rule.gate(target).native for report in own):
            found.append(target)
    return found


# What else works when a set has nothing to patch on a tree: the consistency set's verl side has
# a mode that needs no verl patch at all (inference: vLLM-Ascend reads the dump key verl passes it).
_OTHER_MODE = {("consistency", "verl"): "or dump the rollout alone: inference mode needs no verl patch "
                                        "(rlpatch gen inference SCRIPT)"}


def cannot_take_effect(target: Target, reports: Sequence[RuleReport], mode: str | None, by_rule_ids: bool) -> str:
    """One line: why the selected set cannot take effect on `target` (every rule not applicable to
    its release) and what works instead: the releases its rules patch, or another mode."""
    own = [report for report in reports if report.target is target]
    what = f"the {mode} set" if mode and not by_rule_ids else "the selected rules"
    first = own[0]
    line = (f"{what} cannot take effect on {target.package} {target.version_text} at {target.root}: none of them "
            f"applies to this release ({first.rule.id}: {first.message})")
    if first.rule.versions:
        line += f"; {first.rule.id} patches {target.package} {first.rule.versions}"
    other = _OTHER_MODE.get((mode or "", target.package)) if not by_rule_ids else None
    return line + (f"; {other}" if other else "")
