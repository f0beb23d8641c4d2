"""Checks every patch rule's output must pass, at the level of edits (apply, verify, idempotence,
strip) and of names (spec 0.8: every name the inserted code uses is bound)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import ClassScope, FunctionScope, MetadataWrapper, Scope, ScopeProvider

from rlpatch.patch import edits
from rlpatch.patch.rule import PatchRule


@dataclass
class Patched:
    original: str
    patched: str
    states: list[str]
    stripped: str
    reapplied: str


def patch_source(rule: PatchRule, path: str, source: str) -> Patched:
    """Apply the rule's edits to `source`, re-locate them in the result, re-apply and strip."""
    module = cst.parse_module(source)
    patched_code = edits.insert(module, rule.insertions(path, module)).code
    patched = cst.parse_module(patched_code)
    located = rule.insertions(path, patched)
    sites = [edits.locate(patched, edit) for edit in located]
    missing = [edit for edit, site in zip(located, sites, strict=True) if site.state == "absent"]
    return Patched(
        original=source,
        patched=patched_code,
        states=[site.state for site in sites],
        stripped=edits.strip(patched, sites).code,
        reapplied=edits.insert(patched, missing).code,
    )


def assert_patch_cycle(rule: PatchRule, path: str, source: str, label: str) -> Patched:
    """apply -> compiles -> every edit located as applied -> idempotent -> strip gives the original bytes."""
    result = patch_source(rule, path, source)
    assert result.patched != source, f"{label}: nothing inserted"
    compile(result.patched, f"{label}:{path}", "exec")
    assert result.states and set(result.states) == {"applied"}, f"{label}: {result.states}"
    assert result.reapplied == result.patched, f"{label}: second apply changed bytes"
    assert result.stripped == source, f"{label}: strip is not byte-exact"
    assert_names_resolve(source, result.patched, label)
    return result


def _scope_key(scope: Scope) -> str:
    parts = []
    current: Scope | None = scope
    while current is not None and isinstance(current, (FunctionScope, ClassScope)):
        parts.append(current.name or "?")
        current = current.parent
    return ".".join(reversed(parts))


def _scopes(source: str) -> tuple[Counter[str], dict[str, tuple[set[str], set[str]]]]:
    """Unresolved names (count), and per function: (names read, names bound locally)."""
    wrapper = MetadataWrapper(cst.parse_module(source))
    unresolved: Counter[str] = Counter()
    functions: dict[str, tuple[set[str], set[str]]] = {}
    for scope in {scope for scope in wrapper.resolve(ScopeProvider).values() if scope is not None}:
        for access in scope.accesses:
            name = access.node.value if isinstance(access.node, cst.Name) else None
            if name and not access.referents:
                unresolved[name] += 1
        if isinstance(scope, FunctionScope):
            reads = {access.node.value for access in scope.accesses if isinstance(access.node, cst.Name)}
            functions[_scope_key(scope)] = (reads, {assignment.name for assignment in scope.assignments})
    return unresolved, functions


def assert_names_resolve(original: str, patched: str, label: str) -> None:
    """No new unbound name, and no name turned local in an existing function that read it before."""
    before_unresolved, before = _scopes(original)
    after_unresolved, after = _scopes(patched)
    new_unbound = after_unresolved - before_unresolved
    assert not new_unbound, f"{label}: inserted code uses unbound names {sorted(new_unbound)}"
    for key, (reads, bound) in before.items():
        if key not in after:
            continue
        newly_local = after[key][1] - bound
        shadowed = newly_local & reads
        # `import os` in the middle of a function that already read the global `os` -> UnboundLocalError.
        assert not shadowed, f"{label}: inserted code makes {sorted(shadowed)} local to {key}"
