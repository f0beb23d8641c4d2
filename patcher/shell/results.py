"""What evaluating a script yields: argv fields (`Arg`), what could not be resolved (`Unknown`), and
the `Evaluation` of a whole script (its launches over every path).

These records are plain classes, not dataclasses: every `rlpatch lint` start-up would pay about a
millisecond per dataclass to have its methods generated (the pre-commit hook runs cold).
"""

from __future__ import annotations

from rlpatch.shell.launch import Launch
from rlpatch.shell.parse import ParsedScript
from rlpatch.shell.pieces import Piece, Word, word_text
from rlpatch.shell.source import SourceFile, Span


class Arg:
    """One argv field of a command: its expanded pieces and the source token it came from."""

    __slots__ = ("word", "span", "text")
    word: Word
    span: Span
    # The word's text (None when unknown), computed once: the launch model and the rules ask for
    # it over and over (tens of thousands of times on a few hundred scripts).
    text: str | None

    def __init__(self, word: Word, span: Span) -> None:
        self.word = word
        self.span = span
        self.text = word_text(word)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Arg):
            return NotImplemented
        return self.word == other.word and self.span == other.span

    def __repr__(self) -> str:
        return f"Arg({self.display!r} at {self.span.line}:{self.span.column})"

    @property
    def display(self) -> str:
        """The text with unknown parts shown as their source (`trainer.nnodes=$SLURM_NNODES`)."""
        return "".join(piece.text if piece.text is not None else piece.desc for piece in self.word)

    def sub_span(self, start: int, end: int) -> Span:
        """Span of characters [start, end) of the expanded text (falls back to the whole token)."""
        offset = 0
        for piece in self.word:
            size = len(piece.text or "")
            if piece.text is not None and offset <= start and end <= offset + size:
                if piece.span.file.startswith("<"):  # `-- extra` / --env values: point at their use
                    return piece.via or self.span
                if piece.exact and piece.span.line == piece.span.end_line:
                    base = piece.span.column + (start - offset)
                    return Span(piece.span.file, piece.span.line, base, piece.span.line, base + (end - start))
                return piece.span
            offset += size
        return self.span

    def origins(self, start: int = 0, end: int | None = None) -> list[Piece]:
        """The pieces covering [start, end) of the text (unknown pieces have zero length)."""
        end = 1 << 30 if end is None else end
        chosen, offset = [], 0
        for piece in self.word:
            size = len(piece.text or "")
            if offset < end and offset + size > start or (size == 0 and start <= offset <= end):
                chosen.append(piece)
            offset += size
        return chosen


class Unknown:
    """Something the evaluator could not resolve, with where it is."""

    __slots__ = ("what", "span", "args")

    def __init__(self, what: str, span: Span, args: tuple[str, ...] = ()) -> None:
        self.what = what
        self.span = span
        self.args = args  # for a file that cannot be told (`bash "$TMP" a=1`): the arguments it gets

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Unknown):
            return NotImplemented
        return (self.what, self.span, self.args) == (other.what, other.span, other.args)

    def __repr__(self) -> str:
        return f"Unknown({self.what!r}, {self.span!r}, {self.args!r})"


class Evaluation:
    """Everything learnt from one script (all paths)."""

    def __init__(self, source: SourceFile, parsed: ParsedScript, launches: list[Launch] | None = None,
                 unknowns: list[Unknown] | None = None, paths: int = 0) -> None:
        self.source = source
        self.parsed = parsed
        self.launches: list[Launch] = [] if launches is None else launches
        self.unknowns: list[Unknown] = [] if unknowns is None else unknowns
        self.paths = paths
