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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from rlpatch.patchrule import Block, Insertion, KeywordHoist

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


class _KeywordArguments(cst.CSTVisitor):
    """Collects the keyword arguments named `keyword` of every call in a node."""

    def __init__(self, keyword: str) -> None:
        super().__init__()
        self.keyword = keyword
        self.found: list[cst.Arg] = []

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value == self.keyword:
            self.found.append(node)


def keyword_argument(anchor: cst.BaseStatement, keyword: str) -> cst.Arg:
    """The single one-line keyword argument `keyword` of the simple statement `anchor`.

    Raises ValueError otherwise: rules call this while locating, to refuse with an AnchorError.
    """
    if not isinstance(anchor, cst.SimpleStatementLine):
        raise ValueError(f"the statement holding {keyword}= is not a simple statement")  # noqa: TRY004
    finder = _KeywordArguments(keyword)
    anchor.visit(finder)
    if len(finder.found) != 1:
        raise ValueError(f"{len(finder.found)} keyword arguments {keyword}= in the statement")
    argument = finder.found[0]
    if "\n" in cst.Module(body=[]).code_for_node(argument.value):
        # Moved out of the call's parentheses, a multi-line expression would not parse.
        raise ValueError(f"the value of {keyword}= spans several lines")
    return argument


def _hoisted_value(statement: cst.BaseStatement, name: str) -> cst.BaseExpression | None:
    """The right-hand side when `statement` is exactly `name = <expression>`."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    return assign.value if isinstance(target, cst.Name) and target.value == name else None


def _argument_is_name(anchor: cst.BaseStatement, hoist: KeywordHoist) -> bool:
    finder = _KeywordArguments(hoist.keyword)
    anchor.visit(finder)
    return any(isinstance(arg.value, cst.Name) and arg.value.value == hoist.name for arg in finder.found)


def _with_argument(statement: cst.BaseStatement, keyword: str, value: cst.BaseExpression) -> cst.BaseStatement:
    argument = keyword_argument(statement, keyword)
    return statement.deep_replace(argument, argument.with_changes(value=value))  # type: ignore[return-value]


def _hoisted_assignment(insertion: Insertion) -> tuple[cst.BaseStatement, ...]:
    """`name = <expression>` for a hoisting insertion located on the original module, else ()."""
    if insertion.hoist is None:
        return ()
    value = keyword_argument(insertion.anchor, insertion.hoist.keyword).value
    target = cst.AssignTarget(target=cst.Name(insertion.hoist.name))
    return (cst.SimpleStatementLine(body=[cst.Assign(targets=[target], value=value)]),)


def locate(module: cst.Module, insertion: Insertion) -> Site:
    """Decide whether the insertion's statements stand next to its anchor, intact.

    A hoist counts as one more unit: in place when the statement right before the anchor assigns
    its name and the anchor's argument reads that name.
    """
    body = insertion.block.body
    anchor_at = _anchor_index(insertion.block, insertion.anchor)
    count = len(insertion.statements)
    hoist = insertion.hoist
    hoist_at = anchor_at - 1
    hoisted = hoist is not None and hoist_at >= 0 and _hoisted_value(body[hoist_at], hoist.name) is not None
    swapped = hoist is not None and _argument_is_name(insertion.anchor, hoist)
    if insertion.where == "before":
        first = anchor_at - count - (1 if hoisted else 0)
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
    units = count + (1 if hoist is not None else 0)
    indices = tuple(matched) + ((hoist_at,) if hoisted and swapped else ())
    if len(indices) == units:
        return Site(insertion, "applied", indices)
    if edited:
        line = _line_of(module, body[edited[0]])
        return Site(insertion, "drifted", tuple(matched), f"inserted code edited at line {line}")
    if not matched and not hoisted and not swapped:
        return Site(insertion, "absent", ())
    return Site(
        insertion,
        "drifted",
        indices,
        f"{len(indices)} of {units} inserted statements intact {insertion.where} the anchor",
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
        replace: dict[int, Callable[[cst.BaseStatement], cst.BaseStatement]] | None = None,
    ) -> None:
        super().__init__()
        self._insert = insert or {}
        self._remove = remove or {}
        # id(original anchor) -> how the anchor itself changes (hoisted arguments only)
        self._replace = replace or {}

    def _rebuild(self, original: Block, updated: Block) -> Block:
        key = id(original)
        if key not in self._insert and key not in self._remove:
            return updated
        plans = self._insert.get(key, [])
        dropped = self._remove.get(key, set())
        body: list[cst.BaseStatement] = []
        for index, (before, after) in enumerate(zip(original.body, updated.body)):
            for plan in plans:
                if plan.anchor is before and plan.where == "before":
                    body.extend((*plan.statements, *_hoisted_assignment(plan)))
            if index not in dropped:
                change = self._replace.get(id(before))
                body.append(change(after) if change else after)
            body.extend(s for p in plans if p.anchor is before and p.where == "after" for s in p.statements)
        return updated.with_changes(body=body)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return self._rebuild(original_node, updated_node)  # type: ignore[return-value]

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return self._rebuild(original_node, updated_node)  # type: ignore[return-value]


def insert(module: cst.Module, insertions: Sequence[Insertion]) -> cst.Module:
    """The module with every insertion's statements placed next to its anchor."""
    by_block: dict[int, list[Insertion]] = defaultdict(list)
    replace: dict[int, Callable[[cst.BaseStatement], cst.BaseStatement]] = {}
    seen: set[tuple[int, str]] = set()
    for insertion in insertions:
        slot = (id(insertion.anchor), insertion.where)
        if slot in seen:
            # Two edits at one slot would make verify ambiguous about which statements are whose.
            raise ValueError(f"two insertions {insertion.where} the same anchor: {insertion.label}")
        seen.add(slot)
        by_block[id(insertion.block)].append(insertion)
        if insertion.hoist is not None:
            if insertion.where != "before":
                raise ValueError(f"a hoist must be inserted before its anchor: {insertion.label}")
            replace[id(insertion.anchor)] = _swap_to_name(insertion.hoist)
    return module.visit(_BodyRewriter(insert=by_block, replace=replace))


def _swap_to_name(hoist: KeywordHoist) -> Callable[[cst.BaseStatement], cst.BaseStatement]:
    return lambda statement: _with_argument(statement, hoist.keyword, cst.Name(hoist.name))


def strip(module: cst.Module, sites: Sequence[Site]) -> cst.Module:
    """The module without the statements of the applied sites (hoisted values go back in place)."""
    by_block: dict[int, set[int]] = defaultdict(set)
    replace: dict[int, Callable[[cst.BaseStatement], cst.BaseStatement]] = {}
    for site in sites:
        if site.state != "applied":
            continue
        insertion = site.insertion
        by_block[id(insertion.block)].update(site.indices)
        if insertion.hoist is not None:
            hoist_at = _anchor_index(insertion.block, insertion.anchor) - 1
            value = _hoisted_value(insertion.block.body[hoist_at], insertion.hoist.name)
            assert value is not None  # an applied hoist site has its assignment right before the anchor
            replace[id(insertion.anchor)] = _swap_back(insertion.hoist, value)
    return module.visit(_BodyRewriter(remove=by_block, replace=replace))


def _swap_back(hoist: KeywordHoist, value: cst.BaseExpression) -> Callable[[cst.BaseStatement], cst.BaseStatement]:
    return lambda statement: _with_argument(statement, hoist.keyword, value)
