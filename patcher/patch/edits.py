"""Insertions applied to, found in, and stripped from a LibCST module.

These three operations are the whole of what the engine does to Python source. They only add or
remove whole statements in a block's body; every other node is carried over as it was, so LibCST
writes its bytes back unchanged (never reformat). Stripping the statements an apply inserted gives
back the original module byte for byte, which is what makes revert exact even after the user
edited other parts of a patched file.

One shape cannot be patched by insertion alone: code that must run on every exit of a function
with several `return`s (SGLang 0.4.3's `ModelRunner.forward`). A `Wrap` moves the tail of a block
into `try:` and adds a `finally:`; stripping it moves the statements back out. The wrapped
statements are whole nodes carried over unchanged, and LibCST indents nested blocks relative to
their parent, so unwrapping gives back the original bytes as well.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Union

import libcst as cst

from rlpatch.patch.rule import Block, Insertion, KeywordHoist

SiteState = Literal["applied", "absent", "drifted"]


@dataclass(frozen=True)
class Wrap:
    """Wrap `block.body[keep:]` in `try: ... finally: <final>`, with `head` placed before the `try`.

    `keep` counts the leading statements left outside (a docstring). The whole tail is wrapped, so
    the rule locates the block itself (a function body), which resolves the same way on the
    original and on the patched file. Blank lines and comments that led the first wrapped statement
    move to the first new statement and come back on strip.
    """

    block: Block
    keep: int
    head: tuple[cst.BaseStatement, ...]
    final: tuple[cst.BaseStatement, ...]
    label: str
    where: Literal["around"] = "around"

    @property
    def statements(self) -> tuple[cst.BaseStatement, ...]:
        """Every statement the wrap adds (the `try` line itself aside)."""
        return self.head + self.final


Edit = Union[Insertion, Wrap]


@dataclass(frozen=True)
class Site:
    """Where an insertion stands in a module now, and in what state."""

    insertion: Edit
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


def _codes(module: cst.Module, statements: Sequence[cst.BaseStatement]) -> list[str]:
    return [statement_code(module, statement) for statement in statements]


def _is_our_try(module: cst.Module, statement: cst.BaseStatement, final: list[str]) -> bool:
    """A bare `try:`/`finally:` (no `except`, no `else`) whose finally block is exactly `final`."""
    return (
        isinstance(statement, cst.Try)
        and not statement.handlers
        and statement.orelse is None
        and statement.finalbody is not None
        and isinstance(statement.finalbody.body, cst.IndentedBlock)
        and _codes(module, statement.finalbody.body.body) == final
    )


def _locate_wrap(module: cst.Module, wrap: Wrap) -> Site:
    tail = list(wrap.block.body[wrap.keep :])
    head = _codes(module, wrap.head)
    final = _codes(module, wrap.final)
    count = len(head)
    first = wrap.keep
    if len(tail) == count + 1 and _codes(module, tail[:count]) == head and _is_our_try(module, tail[count], final):
        return Site(wrap, "applied", tuple(range(first, first + count + 1)))
    ours = [
        first + offset
        for offset, statement in enumerate(tail)
        if _is_our_try(module, statement, final) or statement_code(module, statement) in head
    ]
    if not ours:
        return Site(wrap, "absent", ())
    return Site(wrap, "drifted", tuple(ours), f"the try/finally {wrap.label} is not intact or not the whole block")


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
        raise ValueError(f"the statement holding {keyword}= is not a simple statement")
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
    replaced = statement.deep_replace(argument, argument.with_changes(value=value))
    assert isinstance(replaced, cst.BaseStatement)  # an Arg only if `argument` were the statement itself
    return replaced


def _hoisted_assignment(insertion: Insertion) -> tuple[cst.BaseStatement, ...]:
    """`name = <expression>` for a hoisting insertion located on the original module, else ()."""
    if insertion.hoist is None:
        return ()
    value = keyword_argument(insertion.anchor, insertion.hoist.keyword).value
    target = cst.AssignTarget(target=cst.Name(insertion.hoist.name))
    return (cst.SimpleStatementLine(body=[cst.Assign(targets=[target], value=value)]),)


def locate(module: cst.Module, insertion: Edit) -> Site:
    """Decide whether the edit's statements stand next to its anchor (or around its block), intact.

    A hoist counts as one more unit: in place when the statement right before the anchor assigns
    its name and the anchor's argument reads that name.
    """
    if isinstance(insertion, Wrap):
        return _locate_wrap(module, insertion)
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
        wrap: dict[int, Wrap] | None = None,
        unwrap: dict[int, Site] | None = None,
        replace: dict[int, Callable[[cst.BaseStatement], cst.BaseStatement]] | None = None,
    ) -> None:
        super().__init__()
        self._insert = insert or {}
        self._remove = remove or {}
        self._wrap = wrap or {}
        self._unwrap = unwrap or {}
        # id(original anchor) -> how the anchor itself changes (hoisted arguments only)
        self._replace = replace or {}

    def _rebuild(self, original: Block, updated: Block) -> Block:
        key = id(original)
        if key in self._wrap:
            return updated.with_changes(body=_wrapped(updated.body, self._wrap[key]))
        if key in self._unwrap:
            return updated.with_changes(body=_unwrapped(updated.body, self._unwrap[key]))
        if key not in self._insert and key not in self._remove:
            return updated
        plans = self._insert.get(key, [])
        dropped = self._remove.get(key, set())
        body: list[cst.BaseStatement] = []
        for index, (before, after) in enumerate(zip(original.body, updated.body, strict=False)):
            for plan in plans:
                if plan.anchor is before and plan.where == "before":
                    body.extend((*plan.statements, *_hoisted_assignment(plan)))
            if index not in dropped:
                change = self._replace.get(id(before))
                body.append(change(after) if change else after)
            body.extend(s for p in plans if p.anchor is before and p.where == "after" for s in p.statements)
        return updated.with_changes(body=body)

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Blocks never lie inside an expression or a simple statement line: leave those subtrees as
        # they are (most of a module's nodes), which makes rewriting a large file several times faster.
        if isinstance(node, (cst.BaseExpression, cst.SimpleStatementLine)):
            return False
        return super().on_visit(node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return self._rebuild(original_node, updated_node)  # type: ignore[return-value]  # same kind of block as given

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return self._rebuild(original_node, updated_node)  # type: ignore[return-value]  # same kind of block as given


def _moved_leading_lines(
    source: cst.BaseStatement, target: cst.BaseStatement
) -> tuple[cst.BaseStatement, cst.BaseStatement]:
    """`target` with the leading lines of `source`, and `source` without them."""
    lines = getattr(source, "leading_lines", ())
    return source.with_changes(leading_lines=()), target.with_changes(leading_lines=lines)


def _wrapped(body: Sequence[cst.BaseStatement], wrap: Wrap) -> list[cst.BaseStatement]:
    kept, tail = list(body[: wrap.keep]), list(body[wrap.keep :])
    if not tail:
        raise ValueError(f"nothing to wrap {wrap.label}")
    handle = cst.Try(body=cst.IndentedBlock(body=()), finalbody=cst.Finally(body=cst.IndentedBlock(body=wrap.final)))
    new: list[cst.BaseStatement] = [*wrap.head, handle]
    tail[0], new[0] = _moved_leading_lines(tail[0], new[0])
    new[-1] = new[-1].with_changes(body=cst.IndentedBlock(body=tail))
    return kept + new


def _unwrapped(body: Sequence[cst.BaseStatement], site: Site) -> list[cst.BaseStatement]:
    first, last = site.indices[0], site.indices[-1]
    handle = body[last]
    assert isinstance(handle, cst.Try) and isinstance(handle.body, cst.IndentedBlock)
    inner = list(handle.body.body)
    _, inner[0] = _moved_leading_lines(body[first], inner[0])
    return [*body[:first], *inner, *body[last + 1 :]]


def _slot(edit: Edit) -> tuple[int, str]:
    # A wrap owns its whole block; an insertion owns one side of its anchor.
    if isinstance(edit, Wrap):
        return (id(edit.block), "around")
    return (id(edit.anchor), edit.where)


def insert(module: cst.Module, insertions: Sequence[Edit]) -> cst.Module:
    """The module with every insertion's statements placed next to its anchor (and every wrap done)."""
    by_block: dict[int, list[Insertion]] = defaultdict(list)
    wraps: dict[int, Wrap] = {}
    replace: dict[int, Callable[[cst.BaseStatement], cst.BaseStatement]] = {}
    seen: set[tuple[int, str]] = set()
    for insertion in insertions:
        slot = _slot(insertion)
        if slot in seen:
            # Two edits at one slot would make verify ambiguous about which statements are whose.
            raise ValueError(f"two insertions {insertion.where} the same anchor: {insertion.label}")
        seen.add(slot)
        if isinstance(insertion, Wrap):
            wraps[id(insertion.block)] = insertion
            continue
        by_block[id(insertion.block)].append(insertion)
        if insertion.hoist is not None:
            if insertion.where != "before":
                raise ValueError(f"a hoist must be inserted before its anchor: {insertion.label}")
            replace[id(insertion.anchor)] = _swap_to_name(insertion.hoist)
    if wraps.keys() & by_block.keys():
        # Inserted statements would be wrapped too, and the wrap's indices would no longer hold.
        raise ValueError("an insertion and a wrap in the same block")
    return module.visit(_BodyRewriter(insert=by_block, wrap=wraps, replace=replace))


def _swap_to_name(hoist: KeywordHoist) -> Callable[[cst.BaseStatement], cst.BaseStatement]:
    return lambda statement: _with_argument(statement, hoist.keyword, cst.Name(hoist.name))


def strip(module: cst.Module, sites: Sequence[Site]) -> cst.Module:
    """The module without the statements of the applied sites (wraps undone, hoisted values back in place)."""
    by_block: dict[int, set[int]] = defaultdict(set)
    unwraps: dict[int, Site] = {}
    replace: dict[int, Callable[[cst.BaseStatement], cst.BaseStatement]] = {}
    for site in sites:
        if site.state != "applied":
            continue
        insertion = site.insertion
        if isinstance(insertion, Wrap):
            unwraps[id(insertion.block)] = site
            continue
        by_block[id(insertion.block)].update(site.indices)
        if insertion.hoist is not None:
            hoist_at = _anchor_index(insertion.block, insertion.anchor) - 1
            value = _hoisted_value(insertion.block.body[hoist_at], insertion.hoist.name)
            assert value is not None  # an applied hoist site has its assignment right before the anchor
            replace[id(insertion.anchor)] = _swap_back(insertion.hoist, value)
    if unwraps.keys() & by_block.keys():
        raise ValueError("an insertion and a wrap in the same block")
    return module.visit(_BodyRewriter(remove=by_block, unwrap=unwraps, replace=replace))


def _swap_back(hoist: KeywordHoist, value: cst.BaseExpression) -> Callable[[cst.BaseStatement], cst.BaseStatement]:
    return lambda statement: _with_argument(statement, hoist.keyword, value)
