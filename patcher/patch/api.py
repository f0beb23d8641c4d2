"""The patch wing's small facade for the wings that ask for a patch state (the linter's RL605/RL607).

Other wings reach this module only through `rlpatch.registry.patcher()`, imported on first use (it
pulls in libcst, which the plain lint path never needs). It answers exactly what `rlpatch verify
--format json` prints, in-process:

- `verify_payload(...)`: `{"targets": [...], "unchecked": [...]}` for the selected rules on the given
  roots (or the trees `python` imports); InputError for a bad root or no tree at all.
"""

from __future__ import annotations

from typing import Any, Sequence

from rlpatch.patch.engine import RuleReport, Session, set_state
from rlpatch.patch.rule import PatchRule, Target
from rlpatch.upstream import trainers as verl_trainers

__all__ = ["not_applicable_targets", "payload", "unchecked_packages", "verify_payload"]


def verify_payload(*, mode: str | None = None, backend: str = "all", rule_ids: str | None = None,
                   verl_root: str | None = None, sglang_root: str | None = None, vllm_ascend_root: str | None = None,
                   python: str | None = None) -> dict[str, Any]:
    """`rlpatch verify --format json` with these options, without a subprocess and without printing."""
    from rlpatch.patch.cli import resolve_targets, select_rules

    options = {"verl_root": verl_root, "sglang_root": sglang_root, "vllm_ascend_root": vllm_ascend_root, "python": python}
    given = {package for package, key in (("verl", "verl_root"), ("sglang", "sglang_root"),
                                          ("vllm_ascend", "vllm_ascend_root")) if options.get(key)}
    rules = select_rules(mode, backend, rule_ids, given)
    targets = resolve_targets(options, rules, quiet=True)
    session = Session(targets)
    reports = [session.report(rule, target, structural=False) for target in targets for rule in rules
               if rule.package == target.package]
    return payload(reports, targets, rules)


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


def coverage(own: Sequence[RuleReport]) -> dict[str, verl_trainers.Coverage]:
    """Which verl trainers the rules in place on one tree cover."""
    states = [{"id": r.rule.id, "state": r.state, "trainers": sorted(r.rule.trainers)} for r in own]
    return verl_trainers.coverage(states, own[0].target.version if own else None)


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
        if own and all(report.state == "not-applicable" for report in own) and \
                not all(report.rule.gate(target).native for report in own):
            found.append(target)
    return found
