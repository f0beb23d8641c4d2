r"""RL003: a line continuation that silently ends the command.

## What it does

Reports a backslash continuation that ends the command early: a comment line inside a continued
command, a comment ending in `\`, a space after the `\`, or a `\` on the last line of the file.

## Why

A backslash continues a command only when it is the very last character of the line. A comment
line in the middle of a continued command, a comment ending in `\`, a space after the `\`, or a
`\` on the last line of the file all end the command early: the remaining `key=value` lines run
as separate (failing or no-op) commands and the overrides never reach verl. bash gives no error
for the dropped overrides.

## Use instead

Keep every continued line a part of the command and end it with a bare `\`; move comments above the
command.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rlpatch.lint.rule import Case, FileContext, LintRule
from rlpatch.shell.api import Span

# `\` + blanks at the end of a line, followed by an indented line (meant as a continuation).
_SPACE_AFTER_BACKSLASH = re.compile(r"(?<!\\)\\[ \t]+(?=\n[ \t])")
# Text without either shape cannot hold a comment finding: a `#` on a line ending in `\`, or a `#`
# first on the line after a `\`. Most scripts have neither, and then no comment is looked for.
_COMMENT_SUSPECT = re.compile(r"#[^\n]*\\\r?$|\\\r?\n[^\S\n]*#", re.M)


class BrokenContinuation(LintRule):
    code = "RL003"
    severity = "warning"
    summary = "trailing `\\` at end of file, or a comment that silently ends a continuation"

    VALID = [
        Case("python3 -m verl.trainer.main_ppo \\\n    trainer.nnodes=1 \\\n    trainer.n_gpus_per_node=8\n"),
        Case("# a comment \\\npython3 -m verl.trainer.main_ppo trainer.nnodes=1\n"),
    ]
    INVALID = [
        Case("python3 -m verl.trainer.main_ppo \\\n    # the batch size\n    data.train_batch_size=8\n",
             expect=[(2, 5)]),
        Case("python3 -m verl.trainer.main_ppo \\\n    trainer.nnodes=1 # one node \\\n    data.train_batch_size=8\n",
             expect=[(2, 22)]),
        Case("python3 -m verl.trainer.main_ppo \\ \n    data.train_batch_size=8\n", expect=[(1, 34)]),
        Case("python3 -m verl.trainer.main_ppo \\\n    data.train_batch_size=8 \\\n", expect=[(2, 29)]),
    ]

    def check_file(self, ctx: FileContext) -> None:
        source = ctx.source
        path = source.path
        suspects = _COMMENT_SUSPECT.search(source.text) is not None
        for start_byte, end_byte in _comments(ctx.evaluation.parsed.tree.root_node) if suspects else ():
            start = source.char_offset(start_byte)
            text = source.text[start:source.char_offset(end_byte)]
            line, col = source.line_col(start)
            column = col - 1
            before = source.line_text(line)[:column]
            if before.strip() and text.endswith("\\"):
                ctx.report("comment ends in `\\`: the continuation is part of the comment and the command ends here",
                           at=Span(path, line, col, line, col + len(text)))
            elif not before.strip() and line > 1 and _continues(source.line_text(line - 1)):
                ctx.report("comment line inside a continued command: the command ends here and the next lines "
                           "run as separate commands", at=Span(path, line, column + 1, line, column + 1 + len(text)))
        for match in _SPACE_AFTER_BACKSLASH.finditer(source.text):
            line, col = source.line_col(match.start())
            ctx.report("space after `\\`: this is not a line continuation, the command ends here",
                       at=Span(path, line, col, line, col + 1))
        last = _last_code_line(source)
        if last and _continues(source.line_text(last)):
            col = len(source.line_text(last))
            ctx.report("`\\` at the end of the file continues into nothing", at=Span(path, last, col, last, col + 1))


def _continues(line: str) -> bool:
    return line.endswith("\\") and not line.endswith("\\\\") and not line.lstrip().startswith("#")


def _last_code_line(source) -> int:
    for line in range(source.line_count, 0, -1):
        if source.line_text(line).strip():
            return line
    return 0


def _comments(root) -> list[tuple[int, int]]:
    """(start byte, end byte) of every comment node (a tree-sitter query: the walk runs in C)."""
    from tree_sitter import QueryCursor

    return [(node.start_byte, node.end_byte) for node in QueryCursor(_comment_query()).captures(root).get("c", [])]


@lru_cache(maxsize=1)
def _comment_query():
    from tree_sitter import Query

    from rlpatch.shell.api import language

    return Query(language(), "(comment) @c")
