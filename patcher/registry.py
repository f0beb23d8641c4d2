"""Rule discovery: each rule module defines exactly one rule class; the registry finds it.

The one place where the wings meet the rules: the patch engine asks for `patch_rules()`, the linter
for `lint_rule_classes()`. Each loads only its own family, so `rlpatch lint` never imports libcst.
"""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from rlpatch import rules as rule_package

if TYPE_CHECKING:  # imported by the functions that need them: lint must not import libcst
    from rlpatch.lint.rule import LintRule
    from rlpatch.patch.rule import PatchRule

RuleBase = TypeVar("RuleBase")


def _rule_class(module: ModuleType, base: type[RuleBase]) -> type[RuleBase]:
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, base) and value is not base and value.__module__ == module.__name__
    ]
    if len(found) != 1:
        raise RuntimeError(f"{module.__name__} must define exactly one {base.__name__} subclass, found {len(found)}")
    return found[0]


@lru_cache(maxsize=None)
def patch_rules() -> tuple[PatchRule, ...]:
    """Every patch rule, in registry order (imports libcst: not for the lint path)."""
    from rlpatch.patch.rule import PatchRule

    return tuple(_rule_class(module, PatchRule)() for module in rule_package.load(rule_package.PATCH_RULE_MODULES))


@lru_cache(maxsize=None)
def lint_rule_classes(modes: frozenset[str] | None = None) -> tuple[type[LintRule], ...]:
    """The lint rule classes that check runs in one of `modes` (None: every rule), sorted by code;
    imports those rule modules only (and no patch rule, no libcst)."""
    from rlpatch.lint.rule import LintRule

    modules = rule_package.load(rule_package.lint_modules_for(modes))
    return tuple(sorted((_rule_class(module, LintRule) for module in modules), key=lambda cls: cls.code))


def lint_rule_codes() -> tuple[str, ...]:
    """Every lint rule's code, known without importing a rule module (`--select` is checked first)."""
    return tuple(sorted(rule_package.lint_code(name) for name in rule_package.LINT_RULE_MODULES))
