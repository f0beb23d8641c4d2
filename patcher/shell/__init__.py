"""The bash front end: read a launch script without running it.

`evaluate_script(path)` parses a script with tree-sitter-bash, evaluates it statically over all
its plausible paths and returns the verl launches it makes, with every argument's text and the
source positions it came from. Nothing is ever executed: command substitutions are unknowns.
"""

from __future__ import annotations

from rlpatch.shell.evaluator import Arg, Evaluation, Evaluator, Options, Unknown
from rlpatch.shell.launch import Launch
from rlpatch.shell.parse import ParsedScript, parse_file
from rlpatch.shell.source import SourceFile, Span
from rlpatch.shell.words import Piece, Value, Word, word_text

__all__ = [
    "Arg", "Evaluation", "Evaluator", "Launch", "Options", "ParsedScript", "Piece", "SourceFile", "Span",
    "Unknown", "Value", "Word", "evaluate_source", "parse_file", "word_text",
]


def evaluate_source(source: SourceFile, options: Options | None = None) -> Evaluation:
    """Parse and evaluate one script (raises InputError for unreadable input)."""
    return Evaluator(options).evaluate(source, parse_file(source))
