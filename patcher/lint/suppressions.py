"""Suppression comments: `# rlpatch: disable=CODES` and `# rlpatch: disable-file=CODES`.

Three forms, as ShellCheck and ruff users expect them:
- on a line of its own, `# rlpatch: disable=CODES` silences the next command (all its lines);
- after a command on the same line (`python3 -m verl... x=1  # rlpatch: disable=RL101`), it silences
  that command (all its lines);
- `# rlpatch: disable-file=CODES` before the first command silences the whole file.

CODES are rule codes or prefixes (`RL2`), or `ALL`, separated by commas or blanks. Only real comments
count (the parse tree says which `#` starts one: a `#` inside a quoted value is not a directive). The
engine reads them once per file; it records which directive silenced which finding, so that RL005
can report a code that is unknown, or that silenced nothing.
"""

# No `from __future__ import annotations`: typing compiles each string annotation of a NamedTuple's
# fields (a ForwardRef each) at import, on every cold start of `rlpatch lint`; evaluated ones it takes as they are.

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from rlpatch.lint.rule import Finding
from rlpatch.shell.api import SourceFile, Span

# Patterns, compiled (and kept by `re`) only for a script that has a directive: most have none.
_DIRECTIVE = r"#[ \t]*rlpatch:[ \t]*(disable-file|disable)[ \t]*=[ \t]*([A-Za-z0-9_, \t]+)"
_CODE = r"[A-Za-z0-9_]+"
_STATEMENT_TYPES = {
    "command", "variable_assignment", "declaration_command", "list", "pipeline", "redirected_statement",
    "if_statement", "for_statement", "while_statement", "case_statement", "function_definition",
    "compound_statement", "subshell", "unset_command", "test_command", "c_style_for_statement", "negated_command",
}


class DirectiveCode(NamedTuple):
    """One code of one directive, where it is written."""

    code: str  # upper-cased, as matched against finding codes
    span: Span
    known: bool  # ALL, or the code or prefix of at least one lint rule


class Directive(NamedTuple):
    """One suppression comment: what it silences (the whole file, or lines `first`..`last`).
    (NamedTuples, not dataclasses: this module is imported at every cold start of `rlpatch lint`.)"""

    kind: str  # "file" | "command"
    codes: tuple[DirectiveCode, ...]
    span: Span  # the directive, from its `#`
    used: set[str]  # the codes that silenced a finding (filled as findings are matched)
    first: int = 0
    last: int = 0
    effective: bool = True  # False: a disable-file after the first command, or a disable with no command after it

    def covers(self, finding: Finding, path: str) -> bool:
        if self.kind == "file":
            return True
        return any(span.file == path and self.first <= span.line <= self.last for span in (finding.span, *finding.related))


class Suppressions:
    """The directives of one script, and which of them silence a finding."""

    def __init__(self, path: str, directives: list[Directive] | None = None, known_codes: Sequence[str] = ()) -> None:
        self.path = path
        self.directives = directives or []
        self.known_codes = tuple(known_codes)  # every lint rule's code

    @classmethod
    def of(cls, source: SourceFile, parsed: Any, known_codes: Sequence[str] = ()) -> "Suppressions":
        # The substring test first: most scripts have no directive, and the tree is not queried.
        if "rlpatch:" not in source.text:
            return cls(source.path, known_codes=known_codes)
        root = parsed.tree.root_node
        statements = _statement_lines(root)
        first_command = min((start for start, _ in statements), default=1 << 30)
        directives = []
        directive = re.compile(_DIRECTIVE)
        for start_byte, end_byte in _comments(root):
            start = source.char_offset(start_byte)
            match = directive.match(source.text, start, source.char_offset(end_byte))
            if match is not None:
                directives.append(_directive(source, match, statements, first_command, known_codes))
        return cls(source.path, directives, known_codes)

    def silences(self, finding: Finding) -> bool:
        """Whether a directive silences `finding`; every directive code that does is marked used."""
        silenced = False
        for directive in self.directives:
            if not directive.effective or not directive.covers(finding, self.path):
                continue
            for entry in directive.codes:
                if _code_in(finding.code, entry.code):
                    directive.used.add(entry.code)
                    silenced = True
        return silenced


def _directive(source: SourceFile, match: re.Match[str], statements: list[tuple[int, int]], first_command: int,
               known_codes: Sequence[str]) -> Directive:
    line, column = source.line_col(match.start())
    codes = _codes(source, match, line, column, known_codes)
    span = Span(source.path, line, column, line, column + len(match.group().rstrip()))
    if match.group(1) == "disable-file":
        return Directive("file", codes, span, set(), effective=line < first_command)
    alone = not source.line_text(line)[: column - 1].strip()
    if alone:  # the next command after the comment
        following = [(start, end) for start, end in statements if start > line]
    else:  # the innermost command that contains the comment's line: the command this comment ends
        following = [(start, end) for start, end in statements if start <= line <= end]
    if not following:
        return Directive("command", codes, span, set(), effective=False)
    first = min(start for start, _ in following) if alone else max(start for start, _ in following)
    return Directive("command", codes, span, set(), first, max(end for start, end in following if start == first))


def _codes(source: SourceFile, match: re.Match[str], line: int, column: int,
           known_codes: Sequence[str]) -> tuple[DirectiveCode, ...]:
    offset = match.start(2) - match.start()
    found = []
    for code in re.finditer(_CODE, match.group(2)):
        start = column + offset + code.start()
        name = code.group().upper()
        known = name == "ALL" or any(known_code.startswith(name) for known_code in known_codes)
        found.append(DirectiveCode(name, Span(source.path, line, start, line, start + len(name)), known))
    return tuple(found)


def _code_in(code: str, selector: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


def _statement_lines(root: Any) -> list[tuple[int, int]]:
    lines: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in _STATEMENT_TYPES:
            lines.append((node.start_point[0] + 1, node.end_point[0] + 1))
        stack.extend(child for child in node.children if child.is_named)
    return lines


def _comments(root: Any) -> list[tuple[int, int]]:
    """(start byte, end byte) of every comment node (a tree-sitter query: the walk runs in C)."""
    from tree_sitter import QueryCursor

    return [(node.start_byte, node.end_byte) for node in QueryCursor(_comment_query()).captures(root).get("c", [])]


@lru_cache(maxsize=1)
def _comment_query() -> Any:
    from tree_sitter import Query

    from rlpatch.shell.api import language

    return Query(language(), "(comment) @c")


__all__ = ["Directive", "DirectiveCode", "Suppressions"]
