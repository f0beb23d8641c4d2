"""Which patch rules a command acts on, and on which trees (the given roots, or those an interpreter imports)."""

from __future__ import annotations

import sys
from typing import NamedTuple, Sequence

from rlpatch import registry
from rlpatch.errors import InputError
from rlpatch.output.api import Note
from rlpatch.patch.options import Say, TargetOptions, silent
from rlpatch.patch.rule import PatchRule, Target
from rlpatch.upstream.api import OPTION_OF, Package, imported_target, target_for_root

EVERY_PACKAGE: tuple[Package, ...] = ("verl", "sglang", "vllm_ascend")


class Selection(NamedTuple):
    rules: list[PatchRule]
    targets: list[Target]


def select(options: TargetOptions, say: Say = silent) -> Selection:
    """The selected rules and the trees they are checked on; InputError for an unknown rule, a bad
    root or no tree at all. `say` hears which given root no selected rule patches."""
    rules = select_rules(options.mode, options.backend, options.rule_ids, options.packages_given())
    return Selection(rules, resolve_targets(options, rules, say))


def select_rules(mode: str | None, backend: str, rule_ids: str | None, packages_given: set[str]) -> list[PatchRule]:
    rules = registry.patch_rules()
    if rule_ids:
        wanted = [part.strip() for part in rule_ids.split(",") if part.strip()]
        known = {rule.id: rule for rule in rules}
        unknown = [rule_id for rule_id in wanted if rule_id not in known]
        if unknown:
            raise InputError(f"--rules: unknown rule {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return [known[rule_id] for rule_id in wanted]
    if mode is None and not packages_given:
        mode = "consistency"
    selected = [rule for rule in rules if mode is None or mode in rule.modes]
    if mode is None:  # every rule for the given roots: the other packages' rules are not part of the question
        selected = [rule for rule in selected if rule.package in packages_given]
    if backend != "all":
        selected = [rule for rule in selected if rule.backend in (None, backend)]
    return selected


def resolve_targets(options: TargetOptions, rules: Sequence[PatchRule], say: Say = silent) -> list[Target]:
    given = options.roots()
    packages = [package for package in EVERY_PACKAGE if any(rule.package == package for rule in rules)]
    if any(given.values()):
        targets = [target_for_root(package, path) for package, path in given.items() if path]
        for target in targets:
            if target.package not in packages:
                say(Note(f"note: no selected rule patches {target.package}; {OPTION_OF[target.package]} ignored"))
        return [target for target in targets if target.package in packages]
    targets = []
    for package in packages:
        found = imported_target(package, options.python)
        if found is not None:
            targets.append(found)
    if not targets:
        wanted = ", ".join(packages) or "any package"
        raise InputError(f"no tree of {wanted} found for {options.python or sys.executable}; pass --verl-root (or --sglang-root / --vllm-ascend-root)")
    return targets
