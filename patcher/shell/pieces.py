"""What an expanded shell word is made of, and how bash splits it into fields.

A `Word` is a tuple of `Piece`s: runs of characters, each carrying the `Span` it came from (the
literal in the script, or the assignment that supplied a variable's value) and `via`, where the
variable was used; a piece whose text is None is unknown statically and remembers its source
text. `Value` is a variable's value (scalar or array), `Lookup` what asking for a variable gives
(a value, None for unset, or `UNKNOWN`), `Scope` what expansion asks of the evaluator, `Fields`
bash's field splitting of one source word into argv words.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Final, Literal, NamedTuple, Protocol, Sequence, TypeAlias

from rlpatch.shell.source import SourceFile, Span


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
        # piece[0] is .text (hot path: no attribute lookup, and no None test: the join's TypeError is it)
        return "".join([piece[0] for piece in word])  # type: ignore[misc]  # str | None items: see above
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


def unknown_value(word: Sequence[Piece]) -> str:
    """An override value with unknown pieces, as RL002 shows it: the unknown source text (`$(nproc)`);
    with several unknown pieces, the value with its known text between them (`['$HOME', '$HOME']`,
    not `$HOME$HOME`)."""
    descs = unknown_descs(word)
    if len(descs) < 2:
        return "".join(descs) or "?"
    shown = "".join(piece.desc if not piece.known else (piece.text or "") for piece in word)
    value = shown.split("=", 1)[1] if "=" in shown else shown
    return value if len(value) <= 200 else value[:197] + "..."


# Bounds on what one expansion produces and what one variable holds. Without them a script that
# doubles a value (`S=$S$S` twenty times, `A=("${A[@]}" "${A[@]}")`, `set -- "$@" "$@"`) takes time
# and memory exponential in its length. Past a bound the value is unknown, reported like `$(nproc)`
# (RL002), never guessed, and so is every expansion that uses it. A value's size counts its characters
# (an unknown piece's source text) plus one per piece (a value made of unknown pieces grows too). Real launch scripts stay far below both.
MAX_VALUE_SIZE = 64 * 1024  # one value: all of an array's elements together, or one expansion
MAX_ELEMENTS = 4096  # elements of an array, positional parameters, fields of a command or an expansion
OVER_LIMIT = "over rlpatch's 64 KiB / 4096-element limit for a value"


def word_size(word: Word) -> int:
    """A word's measure for MAX_VALUE_SIZE: its characters (an unknown piece's source text) plus one per piece."""
    size = len(word)
    for piece in word:
        size += len(piece[0] if piece[0] is not None else piece[4])
    return size


def over_limit(span: Span, what: str) -> Word:
    """The word that stands for a value past the bounds: unknown, saying what and why."""
    shown = what if len(what) <= 60 else what[:57] + "..."
    return (Piece(None, span, desc=f"{shown} ({OVER_LIMIT})"),)


def is_over(word: Word) -> bool:
    """Whether `word` holds an unknown piece that `over_limit` made (a value past the bounds)."""
    return any(piece[0] is None and piece[4].endswith(_OVER_END) for piece in word)


_OVER_END = f"({OVER_LIMIT})"


class Value:
    """A shell variable's value: a scalar word or an array of words, and where it was assigned.

    `scalar` and `array` are never changed in place once the Value is built (an assignment makes a
    new Value): the expander's memo compares the values it read by identity first. Only
    `exported` changes (`export NAME`), and expansion never looks at it. `over` marks a value that
    went past MAX_VALUE_SIZE / MAX_ELEMENTS: it is one unknown word, and its length is unknown too.
    """

    __slots__ = ("scalar", "array", "span", "exported", "over")

    def __init__(self, scalar: Word | None = None, array: list[Word] | None = None,
                 span: Span | None = None, exported: bool = False, over: bool = False) -> None:
        self.scalar = scalar
        self.array = array
        self.span = span
        self.exported = exported
        self.over = over

    def within_limits(self, name: str, span: Span) -> "Value":
        """This value, or an unknown one (`over`) when it is past MAX_ELEMENTS or MAX_VALUE_SIZE."""
        if self.over:
            return self
        words = self.array if self.array is not None else ([self.scalar] if self.scalar is not None else [])
        if len(words) <= MAX_ELEMENTS:
            size = 0
            for word in words:
                size += word_size(word)
                if size > MAX_VALUE_SIZE or is_over(word):
                    break
            else:
                return self
        return Value(scalar=over_limit(span, f"${name}"), span=span, exported=self.exported, over=True)

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
        return Value(self.scalar, None if self.array is None else list(self.array), self.span, self.exported,
                     self.over)


class Unresolved(Enum):
    """What stands for a value that cannot be told: `UNKNOWN`, a variable only the environment could
    set (`$HOME`, `$1` past the known arguments, `$?`); `OVER`, an element of a value past the bounds."""

    UNKNOWN = "unknown"
    OVER = "over"


UNKNOWN: Final = Unresolved.UNKNOWN
OVER: Final = Unresolved.OVER

# A variable as expansion finds it: its value, None when known to be unset, or UNKNOWN.
Lookup: TypeAlias = Value | None | Literal[Unresolved.UNKNOWN]
# A shell's variable table: None marks a variable `unset` (a name absent from it is UNKNOWN).
Variables: TypeAlias = dict[str, Value | None]


class Scope(Protocol):
    """What word expansion needs from the evaluator."""

    def lookup(self, name: str) -> Lookup:
        """The variable's value; None when known to be unset; UNKNOWN when only the environment knows."""

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
    """Builds the fields (argv words) of one source word, with bash's field splitting rules.

    `over` turns True once the expansion passes MAX_VALUE_SIZE or MAX_ELEMENTS; the expander then
    stops expanding that word and makes it unknown."""

    __slots__ = ("fields", "keep", "size", "over")

    def __init__(self) -> None:
        self.fields: list[list[Piece]] = [[]]
        self.keep: list[bool] = [False]  # a field with quotes is kept even when empty
        self.size = 0
        self.over = False

    def add(self, piece: Piece, quoted: bool) -> None:
        if quoted:
            self.keep[-1] = True
        text = piece[0]
        if text == "" and not piece.desc:
            return
        self.size += len(text if text is not None else piece[4]) + 1
        if self.size > MAX_VALUE_SIZE:
            self.over = True
            return
        self.fields[-1].append(piece)

    def add_split(self, word: Word) -> None:
        """An unquoted expansion: its whitespace separates fields (IFS default)."""
        for piece in word:
            text = piece.text
            if text is None or (" " not in text and "\t" not in text and "\n" not in text):
                self.add(piece, quoted=False)
                continue
            parts = re.split(r"[ \t\n]+", text)
            for index, part in enumerate(parts):
                if index:
                    self.new_field()
                if part:
                    self.add(Piece(part, piece.span, False, piece.via, piece.desc, piece.chain), quoted=False)
            if self.over:
                return

    def add_multi(self, words: list[Word], quoted: bool) -> None:
        """`"$@"` / `"${A[@]}"`: one field per element (quoted), each element split when unquoted."""
        for index, word in enumerate(words):
            if index:
                self.new_field()
            if quoted:
                self.keep[-1] = True
                for piece in word:
                    if piece.text != "" or piece.desc:
                        self.add(piece, quoted=True)
            else:
                self.add_split(word)
            if self.over:
                return

    def new_field(self) -> None:
        if len(self.fields) >= MAX_ELEMENTS:
            self.over = True
            return
        self.fields.append([])
        self.keep.append(False)

    def result(self) -> list[Word]:
        return [tuple(field) for field, keep in zip(self.fields, self.keep, strict=False) if field or keep]


class ExpanderHost(Protocol):
    """What the parts of the word expander (`params.ParameterExpansion`, `arith.ArithmeticExpansion`)
    use of the expander they are part of (`words.Expander` implements all of it)."""

    src: SourceFile
    text: str  # the whole file's text (words are ranges of it)
    scope: Scope
    depth: int  # nesting of expansions (operands, defaults): past MAX_DEPTH a value is unknown

    def scalar(self, start: int, end: int, tilde: bool = True) -> Word:
        """text[start:end] expanded without field splitting."""

    def arith_text(self, text: str) -> int | None:
        """The value of an arithmetic expression, None when it cannot be told."""

    def _value(self, name: str) -> Lookup: ...

    def _used(self, word: Word, via: Span) -> Word:
        """The word's pieces marked as used at `via`."""

    def _add_word(self, out: Fields, word: Word, quoted: bool, join: bool) -> None: ...

    def _nested(self) -> ExpanderHost:
        """A fresh expander one level deeper (operands, defaults, arithmetic variables)."""
