"""Control flow for the evaluator: `&&`/`||` lists, `if`, `case`, `for` and tests, never executing.

A condition whose value is unknown is a real alternative: the path's `Chooser` decides, and the
evaluator re-runs the script once per plausible choice. `ControlFlow` is a base of
`rlpatch.shell.statements.Shell`; what it uses of the shell is declared by `ShellHost`, which
mypy then holds `Shell` to.
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING, Any, Protocol

from rlpatch.shell.pieces import Value, Variables, Word, word_text
from rlpatch.shell.results import Arg

if TYPE_CHECKING:
    from rlpatch.shell.evaluator import PathRun
    from rlpatch.shell.source import Span
    from rlpatch.shell.words import Expander

MAX_LOOP_ITEMS = 16


class PathExit(Exception):
    """`exit` ends this path of the script."""


class ScopeReturn(Exception):
    """`return` ends a function or a sourced file."""


class ShellHost(Protocol):
    """What control flow uses of the shell that runs it (`Shell` implements all of it)."""

    run: PathRun  # the path: its chooser decides unknown conditions
    expander: Expander
    variables: Variables
    positional_words: list[Word]

    def run_node(self, node: Any) -> bool | None: ...
    def run_block(self, nodes: Any) -> bool | None: ...
    def text(self, node: Any) -> str: ...
    def start(self, node: Any) -> int: ...
    def end(self, node: Any) -> int: ...
    def node_span(self, node: Any) -> Span: ...
    def args_of(self, nodes: Any) -> list[Arg]: ...


class ControlFlow(ShellHost):
    """`&&`/`||`, `if`, `case`, `for`, `[ ]`/`[[ ]]`/`test` for the shell evaluator. (Subclassing
    the host protocol makes its members abstract here: mypy refuses a `Shell` that lacks one.)"""

    def decide(self, status: bool | None) -> bool:
        if status is None:
            return self.run.chooser.choose(2) == 0
        return status

    def run_list(self, node) -> bool | None:
        children = node.children
        left = self.run_node(children[0])
        operator = self.text(children[1]) if len(children) > 2 else ";"
        right = children[-1]
        if left is None and not _is_test(children[0]):
            # `cd dir && python3 ...`, `mkdir -p x || true`: an ordinary command is assumed to
            # succeed; only tests (`[ -z "$X" ] && X=1`) are real alternatives worth a second path.
            left = True
        if operator == "&&":
            return self.run_node(right) if self.decide(left) else False
        if operator == "||":
            return True if self.decide(left) else self.run_node(right)
        return self.run_node(right)

    def run_if(self, node) -> bool | None:
        branches: list[tuple[list, list]] = []  # (condition nodes, body nodes)
        condition: list = []
        body: list = []
        state = "cond"
        otherwise: list | None = None
        for child in node.children:
            if child.type in ("if", "fi"):
                continue
            if child.type == "then":
                state = "body"
                continue
            if child.type == "elif_clause":
                branches.append((condition, body))
                condition, body = self._clause(child)
                continue
            if child.type == "else_clause":
                otherwise = [c for c in child.named_children]
                continue
            if child.is_named:
                (condition if state == "cond" else body).append(child)
        branches.append((condition, body))
        for cond, block in branches:
            if self.decide(self.run_block(cond)):
                return self.run_block(block)
        return self.run_block(otherwise) if otherwise is not None else True

    def _clause(self, clause) -> tuple[list, list]:
        condition: list = []
        body: list = []
        state = "cond"
        for child in clause.children:
            if child.type == "then":
                state = "body"
            elif child.is_named:
                (condition if state == "cond" else body).append(child)
        return condition, body

    def run_case(self, node) -> bool | None:
        value_node = node.child_by_field_name("value")
        subject = word_text(self.expander.scalar(self.start(value_node), self.end(value_node))) if value_node else None
        items = [c for c in node.named_children if c.type == "case_item"]
        plausible = []
        catch_all = False
        for item in items:
            patterns, body = self._case_item(item)
            catch_all = catch_all or "*" in patterns
            if subject is None:
                plausible.append(body)
                continue
            if any(p is None for p in patterns):
                plausible.append(body)
                continue
            if any(fnmatch.fnmatchcase(subject, p) for p in patterns if p is not None):  # none is None here
                plausible.append(body)
                break
        if subject is None and not catch_all:
            plausible.append([])  # no pattern matched (impossible with a `*)` item)
        if not plausible:
            return True
        choice = self.run.chooser.choose(len(plausible)) if len(plausible) > 1 else 0
        return self.run_block(plausible[choice])

    def _case_item(self, item) -> tuple[list[str | None], list]:
        patterns: list[str | None] = []
        body = []
        seen_paren = False
        for child in item.children:
            if not seen_paren:
                if child.type == ")":
                    seen_paren = True
                elif child.is_named:
                    patterns.append(word_text(self.expander.scalar(self.start(child), self.end(child), tilde=False)))
                continue
            if child.is_named and child.type != "comment":
                body.append(child)
        return patterns, body

    def run_for(self, node) -> bool | None:
        variable = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        value_nodes = [c for c in node.children_by_field_name("value")]
        if variable is None or body is None:
            return None
        items = self.args_of(value_nodes) if value_nodes else [Arg(w, self.node_span(node)) for w in self.positional_words]
        name = self.text(variable)
        if any(arg.text is None for arg in items) or not items:
            items = items[:1] if items else []
        for arg in items[:MAX_LOOP_ITEMS]:
            self.variables[name] = Value(scalar=arg.word, span=arg.span)
            self.run_node(body)
        return None

    def test(self, node) -> bool | None:
        expressions = [c for c in node.named_children]
        if len(expressions) != 1:
            return None
        return self.test_expr(expressions[0], double="[[" in self.text(node)[:2])

    def test_expr(self, node, double: bool) -> bool | None:
        kind = node.type
        if kind == "parenthesized_expression" and node.named_children:
            return self.test_expr(node.named_children[0], double)
        if kind == "unary_expression" and node.child_count == 2:
            op = self.text(node.children[0])
            if op == "!":
                inner = self.test_expr(node.children[1], double)
                return None if inner is None else not inner
            operand = self.scalar(node.children[1])
            if operand is None:
                return None
            if op == "-z":
                return operand == ""
            if op == "-n":
                return operand != ""
            return None
        if kind == "binary_expression" and node.child_count == 3:
            left, op_node, right = node.children
            op = self.text(op_node)
            if op in ("&&", "-a", "||", "-o"):
                a, b = self.test_expr(left, double), self.test_expr(right, double)
                if op in ("&&", "-a"):
                    return False if a is False or b is False else (None if a is None or b is None else True)
                return True if a or b else (None if a is None or b is None else False)
            left_text, right_text = self.scalar(left), self.scalar(right)
            if left_text is None or right_text is None:
                return None
            return _compare(op, left_text, right_text, double)
        if kind in ("word", "string", "raw_string", "simple_expansion", "expansion", "concatenation"):
            value = self.scalar(node)
            return None if value is None else value != ""
        return None

    def scalar(self, node) -> str | None:
        return word_text(self.expander.scalar(self.start(node), self.end(node), tilde=False))


def _is_test(node) -> bool:
    """A condition whose outcome decides the branch: `[ ]`, `[[ ]]`, `(( ))`, `test`, `! ...`, or a list of them."""
    kind = node.type
    if kind in ("test_command", "negated_command"):
        return True
    if kind == "compound_statement":
        return bool(node.child_count) and node.children[0].type == "(("
    if kind == "list":
        return any(_is_test(child) for child in node.named_children)
    if kind == "command":
        name = node.child_by_field_name("name")
        return name is not None and name.text in (b"test", b"[", b"[[")
    return False


def _compare(op: str, a: str, b: str, double: bool) -> bool | None:
    if op in ("=", "=="):
        return fnmatch.fnmatchcase(a, b) if double else a == b
    if op == "!=":
        return not fnmatch.fnmatchcase(a, b) if double else a != b
    if op in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
        try:
            x, y = int(a), int(b)
        except ValueError:
            return None
        return {"-eq": x == y, "-ne": x != y, "-lt": x < y, "-le": x <= y, "-gt": x > y, "-ge": x >= y}[op]
    if op == "=~":
        try:
            return re.search(b, a) is not None
        except re.error:
            return None
    return None
