"""Rule discovery: each rule module defines exactly one rule class; the registry instantiates it."""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType

from rlpatch import rules as rule_package


def _rule_class(module: ModuleType, base: type) -> type:
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, base) and value is not base and value.__module__ == module.__name__
    ]
    if len(found) != 1:
        raise RuntimeError(f"{module.__name__} must define exactly one {base.__name__} subclass, found {len(found)}")
    return found[0]


@lru_cache(maxsize=None)
def patch_rules() -> tuple:
    """Every patch rule, in registry order (imports libcst: not for the lint path)."""
    from rlpatch.patchrule import PatchRule

    return tuple(_rule_class(module, PatchRule)() for module in rule_package.load(rule_package.PATCH_RULE_MODULES))
