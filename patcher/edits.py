"""Insertions applied to, found in, and stripped from a LibCST module.

These three operations are the whole of what the engine does to Python source. They only add or
remove whole statements in a block's body; every other node is carried over as it was, so LibCST
writes its bytes back unchanged (never reformat). Stripping the statements an apply inserted gives
back the original module byte for byte, which is what makes revert exact even after the user
edited other parts of a patched file.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass
from typing import Literal, Sequence

import libcst as cst

from rlpatch.patchrule import Block, Insertion

SiteState = Literal["applied", "absent", "drifted"]


@dataclass(frozen=True)
class Site:
    """Where an insertion stands in a module now, and in what state."""

    insertion: Insertion
    state: SiteState
    # Indices in the block's body that hold the insertion's statements (when applied).
    indices: tuple[int, ...]
    detail: str = ""


def statement_code(module: cst.Module, statement: cst.BaseStatement) -> str:
    """A statement's code without the blank lines and comments that lead it."""
    if hasattr(statement, "leading_lines"):
        statement = statement.with_changes(leading_lines=())
    return module.code_for_node(statement)


def _anchor_index(block: Block, anchor: cst.BaseStatement) -> int:
    for index, statement in enumerate(block.body):
        if statement is anchor:
            return index
    raise ValueError("anchor is not a statement of its block")


def locate(module: cst.Module, insertion: Insertion) -> Site:
    """Decide whether the insertion's statements stand next to its anchor, intact."""
    body = insertion.block.body
    anchor_at = _anchor_index(insertion.block, insertion.anchor)
    count = len(insertion.statements)
    if insertion.where == "before":
        first = anchor_at - count
    else:
        first = anchor_at + 1
    window = [index for index in range(first, first + count) if 0 <= index < len(body)]
    expected = [statement_code(module, statement) for statement in insertion.statements]
    matched, edited = [], []
    for offset, index in enumerate(range(first, first + count)):
        if index not in window:
            continue
        found = statement_code(module, body[index])
        if found == expected[offset]:
            matched.append(index)
        elif _resembles(found, expected[offset]):
            edited.append(index)
    if len(matched) == count:
        return Site(insertion, "applied", tuple(matched))
    if edited:
        return Site(insertion, "drifted", tuple(matched), f"inserted code edited at line {_line_of(module, body[edited[0]])}")
    if not matched:
        return Site(insertion, "absent", ())
    return Site(
        insertion,
        "drifted",
        tuple(matched),
        f"{len(matched)} of {count} inserted statements intact {insertion.where} the anchor",
    )


def _resembles(found: str, expected: str) -> bool:
    """Whether a statement looks like an edited copy of an inserted one.

    A compound statement keeps its first line (`if _dump_this_pass:`) when its body is edited; a
    simple statement must be nearly the same text, so that an upstream neighbour such as
    `self.module = module` is never mistaken for an edited `self._debugger = None`.
    """
    found_lines, expected_lines = found.splitlines(), expected.splitlines()
    if len(expected_lines) > 1 and found_lines[:1] == expected_lines[:1]:
        return True
    matcher = difflib.SequenceMatcher(None, found, expected, autojunk=False)
    # The cheap upper bounds first: the neighbour of an anchor is often a whole loop or method.
    return matcher.real_quick_ratio() >= 0.85 and matcher.quick_ratio() >= 0.85 and matcher.ratio() >= 0.85


def _line_of(module: cst.Module, statement: cst.BaseStatement) -> str:
    # Positions need a metadata pass; the statement's first code line is as telling and free.
    return repr(statement_code(module, statement).splitlines()[0].strip())


class _BodyRewriter(cst.CSTTransformer):
    """Rebuilds the bodies of chosen blocks; every other node passes through untouched."""

    def __init__(
        self,
        insert: dict[int, list[Insertion]] | None = None,
        remove: dict[int, set[int]] | None = None,
    ) -> None:
        super().__init__()
        self._insert = insert or {}
        self._remove = remove or {}

    def _rebuild(self, original: Block, updated: Block) -> Block:
        key = id(original)
        if key not in self._insert and key not in self._remove:
            return updated
        plans = self._insert.get(key, [])
        dropped = self._remove.get(key, set())
        body: list[cst.BaseStatement] = []
        for index, (before, after) in enumerate(zip(original.body, updated.body)):
            body.extend(s for p in plans if p.anchor is before and p.where == "before" for s in p.statements)
            if index not in dropped:
                body.append(after)
            body.extend(s for p in plans if p.anchor is before and p.where == "after" for s in p.statements)
        return updated.with_changes(body=body)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return self._rebuild(original_node, updated_node)  # type: ignore[return-value]

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return self._rebuild(original_node, updated_node)  # type: ignore[return-value]


def insert(module: cst.Module, insertions: Sequence[Insertion]) -> cst.Module:
    """The module with every insertion's statements placed next to its anchor."""
    by_block: dict[int, list[Insertion]] = defaultdict(list)
    seen: set[tuple[int, str]] = set()
    for insertion in insertions:
        slot = (id(insertion.anchor), insertion.where)
        if slot in seen:
            # Two edits at one slot would make verify ambiguous about which statements are whose.
            raise ValueError(f"two insertions {insertion.where} the same anchor: {insertion.label}")
        seen.add(slot)
        by_block[id(insertion.block)].append(insertion)
    return module.visit(_BodyRewriter(insert=by_block))


def strip(module: cst.Module, sites: Sequence[Site]) -> cst.Module:
    """The module without the statements of the applied sites."""
    by_block: dict[int, set[int]] = defaultdict(set)
    for site in sites:
        if site.state == "applied":
            by_block[id(site.insertion.block)].update(site.indices)
    return module.visit(_BodyRewriter(remove=by_block))
