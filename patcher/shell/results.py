"""What evaluating a script yields: argv fields (`Arg`), what could not be resolved (`Unknown`), and
the `Evaluation` of a whole script (its launches over every path).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlpatch.shell.launch import Launch
from rlpatch.shell.parse import ParsedScript
from rlpatch.shell.pieces import Piece, Word, word_text
from rlpatch.shell.source import SourceFile, Span


@dataclass(init=False)
class Arg:
    """One argv field of a command: its expanded pieces and the source token it came from."""

    word: Word
    span: Span
    # The word's text (None when unknown), computed once: the launch model and the rules ask for
    # it over and over (tens of thousands of times on a few hundred scripts).
    text: str | None = field(repr=False, compare=False)

    def __init__(self, word: Word, span: Span) -> None:  # by hand: one call per Arg, not two
        self.word = word
        self.span = span
        self.text = word_text(word)

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


@dataclass
class Unknown:
    """Something the evaluator could not resolve, with where it is."""

    what: str
    span: Span
    args: tuple[str, ...] = ()  # for a file that cannot be told (`bash "$TMP" a=1`): the arguments it gets


@dataclass
class Evaluation:
    """Everything learnt from one script (all paths)."""

    source: SourceFile
    parsed: ParsedScript
    launches: list[Launch] = field(default_factory=list)
    unknowns: list[Unknown] = field(default_factory=list)
    paths: int = 0
