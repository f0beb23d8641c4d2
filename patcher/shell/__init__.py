"""The front end: read a launch script without running it, and model the verl run it starts.

`evaluate_source(source)` parses a script with tree-sitter-bash (`parse`, `source`), expands its
words (`words`, built from `pieces`, with `quoting`, `params` and `arith`), walks it statement by
statement (`statements`, `control`) over all its plausible paths (`evaluator`) and returns the
verl launches it makes (`launch`, `results`), with every argument's text and the source positions
it came from. Nothing is ever executed: command
substitutions are unknowns. `model.Run` turns one launch into the run verl will see (Hydra
overrides (`overrides`; a dict value read as its keys by `hydra_dict`), dump mode, backends, sizes, environment)
with verl's defaults (`defaults`). The linter,
`gen` and `dumps check` all read scripts through this one front end. It may import the upstream
facts and `rlpatch.errors`, never a command wing.
"""

from __future__ import annotations

from collections.abc import Iterable

from rlpatch.errors import InputError
from rlpatch.shell.evaluator import Evaluator, Options
from rlpatch.shell.launch import Launch
from rlpatch.shell.parse import ParsedScript, parse_file
from rlpatch.shell.pieces import Piece, Value, Word, word_text
from rlpatch.shell.results import Arg, Evaluation, Unknown
from rlpatch.shell.source import SourceFile, Span, file_kind

MAY_IMPORT: tuple[str, ...] = ("errors", "upstream")

__all__ = [
    "Arg", "Evaluation", "Evaluator", "Launch", "Options", "ParsedScript", "Piece", "SourceFile", "Span",
    "Unknown", "Value", "Word", "env_assignments", "evaluate_source", "file_kind", "parse_file", "word_text",
]


def evaluate_source(source: SourceFile, options: Options | None = None) -> Evaluation:
    """Parse and evaluate one script (raises InputError for unreadable input)."""
    return Evaluator(options).evaluate(source, parse_file(source))


def env_assignments(pairs: Iterable[object], where: str = "--env") -> dict[str, str]:
    """The environment a script starts with, from `KEY=VALUE` words (`--env`, repeatable, as `lint`,
    `gen` and `doctor` take it; later words win, as in `K=1 K=2 bash run.sh`)."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, eq, value = str(pair).partition("=")
        if not eq or not name:
            raise InputError(f"{where}: expected KEY=VALUE, got {pair!r}")
        env[name] = value
    return env
