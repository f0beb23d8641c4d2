"""What a patch rule is, as the patch engine sees it.

A patch rule never writes anything. Given one parsed file of one upstream tree it returns *edits*:
statements to insert before or after an anchor statement that it located structurally. The engine
turns edits into new file contents (apply), into a state (verify) or removes them (revert), for
every rule alike, so that all-or-nothing, idempotence, byte-exact revert and drift detection are
written once.

Edits are pure insertions of whole statements. That keeps every byte the patch does not own
untouched (LibCST regenerates unchanged nodes byte for byte) and makes every patch strippable.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal, Sequence, Union

import libcst as cst
from libcst import matchers as m

from rlpatch.upstream.api import Package, Target

if TYPE_CHECKING:  # edits imports this module
    from rlpatch.patch.edits import Edit

Block = Union[cst.Module, cst.IndentedBlock]


@dataclass(frozen=True)
class Gate:
    """Whether a rule may run on a tree of this version, decided before any file is read."""

    status: Literal["ok", "warn", "force", "not-applicable"]
    message: str = ""
    native: bool = False  # not applicable because the release dumps by itself (nothing to patch, nothing missing)

    @classmethod
    def ok(cls) -> "Gate":
        return cls("ok")


class AnchorError(Exception):
    """An anchor matched zero nodes, or more than the rule expects."""

    def __init__(self, where: str, expected: str, found: str) -> None:
        super().__init__(f"{where}: expected {expected}, found {found}")
        self.where = where
        self.expected = expected
        self.found = found


@dataclass(frozen=True)
class KeywordHoist:
    """Bind the value of the anchor's keyword argument `keyword` to a new local `name` first.

    Some patches must know a value that upstream computes inline in a call (the request id that
    `server.generate.remote(request_id=uuid4().hex, ...)` sends). Applied, the anchor's argument
    reads `keyword=name` and `name = <the original expression>` stands right before the anchor;
    stripped, the expression goes back into the argument byte for byte. The anchor must be a simple
    statement holding exactly one such keyword argument, written on one line.
    """

    keyword: str
    name: str


@dataclass(frozen=True)
class Insertion:
    """Insert `statements` into `block` right before or right after its statement `anchor`.

    `block` is the Module or IndentedBlock whose `.body` holds `anchor` (by identity). `label`
    names the site in messages ("FSDPEngine.forward_backward_batch: before the micro-batch loop").
    With `hoist` (only `where="before"`), the hoisted assignment comes after `statements`, right
    before the anchor, and the anchor's argument is replaced by the new name (see KeywordHoist).
    """

    block: Block
    anchor: cst.BaseStatement
    where: Literal["before", "after"]
    statements: tuple[cst.BaseStatement, ...]
    label: str
    hoist: KeywordHoist | None = None


@dataclass(frozen=True)
class NewFile:
    """A file the rule creates (revert deletes it). `text` is written as UTF-8 with LF newlines."""

    path: str
    text: str


@dataclass(frozen=True)
class PatchCase:
    """One case of a patch rule: an upstream-shaped `source` and what the rule must make of it.

    A rule class lists them as its class attributes `VALID` (shapes it patches: `expected` is the
    exact patched text, the diff a reviewer reads) and `INVALID` (drifted shapes: `refusal` is the
    AnchorError message, or a part of it, the rule must raise), as a lint rule lists its `Case`s. tests/test_patch_rule_cases.py runs every case, and
    `rlpatch rule ID` shows the first of each as the rule's good and bad example.

    Case texts are written as triple-quoted strings at the left margin, so `source` and `expected`
    drop their common indentation and leading newlines (`text`, `patched`) before they are compared.
    A case stands for the rule's first file unless `path` names another of its `files`.
    """

    source: str
    expected: str | None = None
    refusal: str | None = None
    path: str | None = None

    def __post_init__(self) -> None:
        if (self.expected is None) == (self.refusal is None):
            raise ValueError("a PatchCase is either patched (expected=...) or refused (refusal=...)")

    @property
    def text(self) -> str:
        """The upstream file the case stands for."""
        return textwrap.dedent(self.source).lstrip("\n")

    @property
    def patched(self) -> str:
        """The file the rule must make of `text` ("" for a refused case)."""
        return textwrap.dedent(self.expected or "").lstrip("\n")


class PatchRule:
    """Base class of every patch rule. Subclasses set the class attributes and `insertions`.

    The docstring of a subclass is its documentation: the first line is the summary shown by
    `rlpatch rules`, the rest says why the patch exists.
    """

    id: ClassVar[str]
    package: ClassVar[Package]
    # Target files relative to the root, in the order they are patched. A rule whose files are all
    # missing from a tree is not applicable to it.
    files: ClassVar[tuple[str, ...]]
    modes: ClassVar[frozenset[str]] = frozenset({"consistency"})
    backend: ClassVar[str | None] = None  # "fsdp" / "megatron" for the engine rules, else None
    versions: ClassVar[str] = ""  # human-readable range shown by `rlpatch rules`
    # Names that only the patch's own code uses: found in a file where no edit is in place, they
    # mean the patch code was moved or edited (drifted), not absent.
    markers: ClassVar[tuple[str, ...]] = ()
    # Which trainer or entry point executes the patched code, for people (`rlpatch rules`, `verify`),
    # and the ids of rlpatch.upstream.trainers.TRAINERS it runs under, for the coverage verdict
    # (empty: not code a verl trainer runs, e.g. an inference server).
    trainer: ClassVar[str] = ""
    trainers: ClassVar[frozenset[str]] = frozenset()
    # The rule's cases (PatchCase), turned into tests by tests/test_patch_rule_cases.py; the first of
    # each is the good and the bad example of its page (`rlpatch rule ID`).
    VALID: ClassVar[Sequence[PatchCase]] = ()
    INVALID: ClassVar[Sequence[PatchCase]] = ()

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""

    def gate(self, target: Target) -> Gate:
        """Version gate, decided from the detected version before any file is parsed."""
        return Gate.ok()

    def insertions(self, path: str, module: cst.Module) -> Sequence[Edit]:
        """The edits for `path` (one of `files`), located in `module`; raise AnchorError on drift."""
        raise NotImplementedError

    def new_files(self, target: Target) -> list[NewFile]:
        """Files this rule creates in the tree."""
        return []

    def anchor_text(self, path: str) -> str | None:
        """Text every version of `path` holding this rule's anchor contains, or None.

        For rules whose anchor moved between files across releases: a file without this text has
        no anchor of the rule, and the engine skips parsing it (verify stays fast).
        """
        return None


# ---------------------------------------------------------------------------------------------
# Helpers for writing rules: locating anchors and building statements from templates.
# ---------------------------------------------------------------------------------------------


def parse_statements(template: str, **substitutions: str) -> tuple[cst.BaseStatement, ...]:
    """Parse a dedented code template into statements (inserted code is written as plain text)."""
    code = textwrap.dedent(template).strip("\n") + "\n"
    for key, value in substitutions.items():
        code = code.replace("{{" + key + "}}", value)
    statements = []
    for statement in cst.parse_module(code).body:
        unindented = statement.visit(_UnindentedBlankLines())
        assert isinstance(unindented, cst.BaseStatement)  # the transformer neither removes nor flattens
        statements.append(unindented)
    return tuple(statements)


class _UnindentedBlankLines(cst.CSTTransformer):
    """Blank lines of a template stay empty wherever the statements land (no trailing indentation)."""

    def leave_EmptyLine(self, original_node: cst.EmptyLine, updated_node: cst.EmptyLine) -> cst.EmptyLine:
        if updated_node.comment is None and not updated_node.whitespace.value:
            return updated_node.with_changes(indent=False)
        return updated_node


def blank_line_before(statements: Sequence[cst.BaseStatement]) -> tuple[cst.BaseStatement, ...]:
    """Give the first statement one empty line before it (used between methods of a class)."""
    if not statements:
        return tuple(statements)
    first = statements[0]
    first = first.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    return (first, *statements[1:])


def find_class(module: cst.Module, name: str, path: str) -> cst.ClassDef:
    """The single top-level class `name` of the module."""
    found = [stmt for stmt in module.body if isinstance(stmt, cst.ClassDef) and stmt.name.value == name]
    if len(found) != 1:
        raise AnchorError(f"{path}", f"exactly one top-level class {name}", f"{len(found)}")
    return found[0]


def find_method(cls: cst.ClassDef, name: str, path: str) -> cst.FunctionDef:
    """The single method `name` defined directly in the class body."""
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    found = [stmt for stmt in body if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name]
    if len(found) != 1:
        raise AnchorError(
            f"{path}: class {cls.name.value}", f"exactly one method {name}", f"{len(found)} methods named {name}"
        )
    return found[0]


def find_function(module: cst.Module, name: str, path: str) -> cst.FunctionDef:
    """The single top-level function `name` of the module."""
    found = [stmt for stmt in module.body if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name]
    if len(found) != 1:
        raise AnchorError(f"{path}", f"exactly one top-level function {name}", f"{len(found)}")
    return found[0]


@dataclass
class _StatementFinder(cst.CSTVisitor):
    """Collects (block, statement) pairs for statements that match a matcher, at any depth."""

    matcher: m.BaseMatcherNode
    descend_into_functions: bool = False
    found: list[tuple[Block, cst.BaseStatement]] = field(default_factory=list)
    _blocks: list[Block] = field(default_factory=list)
    _depth: int = 0

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._blocks.append(node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._blocks.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self._depth += 1
        # The searched function itself is depth 1; nested defs are skipped unless asked for.
        return self._depth == 1 or self.descend_into_functions

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._depth -= 1

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and self._blocks:
            if m.matches(node, self.matcher):
                self.found.append((self._blocks[-1], node))
        # No statement lies inside an expression or a simple statement line: skip those subtrees
        # (most of a large method's nodes; searching a 4000-line runner gets several times faster).
        if isinstance(node, (cst.BaseExpression, cst.SimpleStatementLine)):
            return False
        return super().on_visit(node)


def find_statements(
    scope: cst.CSTNode, matcher: m.BaseMatcherNode, *, descend_into_functions: bool = False
) -> list[tuple[Block, cst.BaseStatement]]:
    """Every statement inside `scope` (a function or class) matching `matcher`, with its block."""
    finder = _StatementFinder(matcher, descend_into_functions)
    scope.visit(finder)
    return finder.found


def exactly_one(
    found: list[tuple[Block, cst.BaseStatement]], where: str, expected: str
) -> tuple[Block, cst.BaseStatement]:
    """The single match, or an AnchorError that says how many there were."""
    if len(found) != 1:
        raise AnchorError(where, f"exactly one {expected}", f"{len(found)}")
    return found[0]


def body_of(node: cst.FunctionDef | cst.ClassDef | cst.BaseCompoundStatement) -> cst.IndentedBlock:
    """The indented body of a def, class or compound statement."""
    body = node.body
    if not isinstance(body, cst.IndentedBlock):
        raise AnchorError(getattr(getattr(node, "name", None), "value", "statement"), "an indented body", "one line")
    return body


def self_attribute(name: str) -> m.Attribute:
    """Matcher for `self.<name>` (the usual anchor inside a method)."""
    return m.Attribute(value=m.Name("self"), attr=m.Name(name))


def read_tree_file(root: str, relative: str) -> str:
    """A file of the tree as text ("" when missing or unreadable), for gates that look before parsing."""
    try:
        with open(os.path.join(root, relative), encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def docstring_statement(function: cst.FunctionDef, where: str) -> tuple[cst.IndentedBlock, cst.BaseStatement]:
    """The docstring statement of a function: the anchor for code inserted at the start of its body.

    Inserting after the docstring keeps the docstring first, and the anchor stays the same on the
    patched file (inserting before the first statement would make the inserted code the anchor).
    """
    body = body_of(function)
    first = body.body[0] if body.body else None
    if not (
        isinstance(first, cst.SimpleStatementLine)
        and len(first.body) == 1
        and isinstance(first.body[0], cst.Expr)
        and isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    ):
        raise AnchorError(where, "a docstring as the first statement of the function", "none")
    return body, first


def first_parameter(function: cst.FunctionDef, where: str) -> str:
    """The name of the function's first positional parameter (the data the inserted code reads)."""
    params = [*function.params.posonly_params, *function.params.params]
    if not params:
        raise AnchorError(where, "a first positional parameter", "no parameters")
    return params[0].name.value


def since_gate(target: Target, first: str, why: str) -> Gate:
    """Not applicable on versions before `first` (with the reason `why`); unknown versions go by structure."""
    if target.version is not None and target.version < first:
        return Gate("not-applicable", f"verl {target.version_text}: {why}")
    return Gate.ok()


def at_function_start(module: cst.Module, path: str, name: str, template: str, **substitutions: str) -> list[Insertion]:
    """Insert `template` at the start of the top-level function `name`, right after its docstring.

    `{{first_parameter}}` in the template becomes the name of the function's first parameter (the
    data the inserted code looks at), whatever upstream calls it.
    """
    function = find_function(module, name, path)
    where = f"{path}: {name}"
    block, anchor = docstring_statement(function, where)
    statements = parse_statements(template, first_parameter=first_parameter(function, where), **substitutions)
    return [Insertion(block, anchor, "after", statements, f"{where}: after the docstring")]
