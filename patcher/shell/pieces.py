"""What an expanded shell word is made of, and how bash splits it into fields.

A `Word` is a tuple of `Piece`s: runs of characters, each carrying the `Span` it came from (the
literal in the script, or the assignment that supplied a variable's value) and `via`, where the
variable was used; a piece whose text is None is unknown statically and remembers its source
text. `Value` is a variable's value (scalar or array), `Scope` what expansion asks of the
evaluator, `Fields` bash's field splitting of one source word into argv words.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Protocol, Sequence

from rlpatch.shell.source import Span


class Piece(NamedTuple):
    """A run of characters of an expanded word; `text is None` means unknown statically."""

    text: str | None
    span: Span
    exact: bool = False  # text maps character for character onto the source starting at span
    via: Span | None = None  # where the variable that supplied this piece was expanded
    desc: str = ""  # for unknown pieces: the source text that could not be resolved ("$(nproc)")
    chain: tuple[Span, ...] = ()  # earlier use sites: `A=$B` then `key=$A` keeps where $B was used

    @property
    def known(self) -> bool:
        return self.text is not None


Word = tuple[Piece, ...]

def word_text(word: Sequence[Piece]) -> str | None:
    """The word's text, or None when any piece is unknown."""
    if len(word) == 1:  # most words are one piece: its text (or None) is the word's
        return word[0][0]
    try:
        return "".join([piece[0] for piece in word])  # piece[0] is .text (hot path: no attribute lookup)
    except TypeError:  # a None (unknown) piece
        return None


def word_known_prefix_nonempty(word: Sequence[Piece]) -> bool | None:
    """Whether the word is non-empty: True/False when known, None when it cannot be told."""
    if any(piece.text for piece in word):
        return True
    if all(piece.known for piece in word):
        return False
    return None


def unknown_descs(word: Sequence[Piece]) -> list[str]:
    return [piece.desc for piece in word if not piece.known]


class Value:
    """A shell variable's value: a scalar word or an array of words, and where it was assigned.

    `scalar` and `array` are never changed in place once the Value is built (an assignment makes a
    new Value): the expander's memo compares the values it read by identity first. Only
    `exported` changes (`export NAME`), and expansion never looks at it.
    """

    __slots__ = ("scalar", "array", "span", "exported")

    def __init__(self, scalar: Word | None = None, array: list[Word] | None = None,
                 span: Span | None = None, exported: bool = False) -> None:
        self.scalar = scalar
        self.array = array
        self.span = span
        self.exported = exported

    def elements(self) -> list[Word]:
        if self.array is not None:
            return list(self.array)
        return [self.scalar] if self.scalar is not None else []

    def first(self) -> Word:
        # elements()[0] without building the list: hot, once per variable use.
        if self.array is not None:
            return self.array[0] if self.array else ()
        return self.scalar if self.scalar is not None else ()

    def copy(self) -> "Value":
        return Value(self.scalar, None if self.array is None else list(self.array), self.span, self.exported)


class Scope(Protocol):
    """What word expansion needs from the evaluator."""

    def lookup(self, name: str) -> Value | None | str:
        """The variable's value; None when known to be unset; "unknown" when only the environment knows."""

    def assign_default(self, name: str, word: Word, span: Span) -> None:
        """`${X:=word}`: assign when unset."""

    def positional(self) -> list[Word]:
        """$1 ... as words ("$@")."""

    def positional_known(self) -> bool:
        """Whether the argument count is known (`$#`): not for a top-level script linted without `--` args."""

    def command_substitution(self, text: str, span: Span) -> Word | None:
        """A `$(...)` the evaluator can answer without running anything (e.g. dirname "$0"), else None."""


MAX_DEPTH = 40  # nested expansions deeper than this are unknown (a self-referencing default)


class Fields:
    """Builds the fields (argv words) of one source word, with bash's field splitting rules."""

    __slots__ = ("fields", "keep")

    def __init__(self) -> None:
        self.fields: list[list[Piece]] = [[]]
        self.keep: list[bool] = [False]  # a field with quotes is kept even when empty

    def add(self, piece: Piece, quoted: bool) -> None:
        if quoted:
            self.keep[-1] = True
        if piece.text == "" and not piece.desc:
            return
        self.fields[-1].append(piece)

    def add_split(self, word: Word) -> None:
        """An unquoted expansion: its whitespace separates fields (IFS default)."""
        for piece in word:
            text = piece.text
            if text is None or (" " not in text and "\t" not in text and "\n" not in text):
                self.add(piece, quoted=False)
                continue
            parts = re.split(r"[ \t\n]+", piece.text)
            for index, part in enumerate(parts):
                if index:
                    self.new_field()
                if part:
                    self.fields[-1].append(Piece(part, piece.span, False, piece.via, piece.desc, piece.chain))

    def add_multi(self, words: list[Word], quoted: bool) -> None:
        """`"$@"` / `"${A[@]}"`: one field per element (quoted), each element split when unquoted."""
        for index, word in enumerate(words):
            if index:
                self.new_field()
            if quoted:
                self.keep[-1] = True
                self.fields[-1].extend(p for p in word if p.text != "" or p.desc)
            else:
                self.add_split(word)

    def new_field(self) -> None:
        self.fields.append([])
        self.keep.append(False)

    def result(self) -> list[Word]:
        return [tuple(field) for field, keep in zip(self.fields, self.keep, strict=False) if field or keep]

