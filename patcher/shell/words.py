"""Expanding one shell word statically, keeping where every character came from.

tree-sitter tells us where a word starts and ends; this module expands its text the way bash
would (quotes, `$VAR`, `${VAR:-default}` and friends, `$((arith))`, arrays, `"$@"`), but never
runs anything: a command substitution, backticks or a variable that only the environment could
supply becomes an *unknown* piece that remembers its source text. Working from the word's text
(not from tree-sitter's sub-nodes) is what lets us recover locally from tree-sitter error nodes
(`X=${X:-['npu','cpu']}`): the word's boundaries are right even when its inside is not.

Each resulting character run is a `Piece` carrying the `Span` it came from (the literal in the
script, or the assignment that supplied a variable's value) and `via`, where the variable was used.
"""

from __future__ import annotations

import re
from typing import Callable, NamedTuple, Protocol, Sequence

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

# `_new(Piece, (...))` builds a Piece without the Python-level NamedTuple __new__ (all six fields
# given, in order): the expander creates one per literal run and per variable use.
_new = tuple.__new__


def word_text(word: Sequence[Piece]) -> str | None:
    """The word's text, or None when any piece is unknown."""
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
    """A shell variable's value: a scalar word or an array of words, and where it was assigned."""

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


_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LENGTH_RE = re.compile(r"#([A-Za-z_][A-Za-z0-9_]*|[@*#0-9])(\[[@*]\])?")  # ${#A}, ${#A[@]}
_SPECIAL_PARAM_RE = re.compile(r"[0-9]+|[@*#?$!-]")
_SPECIAL = "@*#?$!-0123456789"
_PARAM_OPS = (":-", ":=", ":+", ":?", "-", "=", "+", "?", ",,", ",", "^^", "^", "##", "#", "%%", "%", "//", "/#",
              "/%", "/", ":", "@")
MAX_DEPTH = 40
_UNQUOTED_SPECIAL = re.compile(r"[\\'\"$`]")  # where a literal run ends outside quotes
_QUOTED_SPECIAL = re.compile(r'[\\"$`]')  # ... and inside double quotes
_DYNAMIC = re.compile(r"[$`~]")  # what makes a word's expansion depend on variables
_NEEDS_EXPANSION = re.compile(r"[\\'\"$`~]")  # a word without these is its own single field


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


class Expander:
    """Expands the text of words of one source file against a Scope."""

    def __init__(self, source: SourceFile, scope: Scope, depth: int = 0) -> None:
        self.src = source
        self.text = source.text
        self.scope = scope
        self.depth = depth

    # ---- public entry points -------------------------------------------------------------
    def fields(self, start: int, end: int) -> list[Word]:
        """A command argument: expansion plus field splitting (may give 0, 1 or many fields)."""
        if start < end and _NEEDS_EXPANSION.search(self.text, start, end) is None:
            # A plain word (no quote, escape, `$`, backtick or `~`): itself, one field, one piece.
            # The general path gives exactly this; most launch arguments take this short cut.
            return [(_new(Piece, (self.text[start:end], self.src.span(start, end), True, None, "", ())),)]
        static = self._static(start, end)
        if static:
            key = ("fields", start, end)
            cached = self.src.cache.get(key)
            if cached is None:
                out = Fields()
                self._expand(start, end, out, quoted=False, tilde=True)
                cached = self.src.cache[key] = out.result()
            return cached
        out = Fields()
        self._expand(start, end, out, quoted=False, tilde=True)
        return out.result()

    def _static(self, start: int, end: int) -> bool:
        """A word whose expansion does not depend on any variable (no `$`, backtick or `~`)."""
        return _DYNAMIC.search(self.text, start, end) is None

    def scalar(self, start: int, end: int, tilde: bool = True) -> Word:
        """An assignment value or an operand: expansion without field splitting."""
        key = ("scalar", start, end, tilde)
        cached = self.src.cache.get(key)
        if cached is not None:
            return cached
        out = Fields()
        self._expand(start, end, out, quoted=False, tilde=tilde, join=True)
        word = tuple([piece for field in out.fields for piece in field])
        if self._static(start, end):
            self.src.cache[key] = word
        return word

    # ---- helpers -----------------------------------------------------------------------------
    def _lit(self, start: int, end: int) -> Piece:
        return _new(Piece, (self.text[start:end], self.src.span(start, end), True, None, "", ()))

    def _unknown(self, start: int, end: int) -> Piece:
        return Piece(None, self.src.span(start, end), desc=self.text[start:end])

    def _expand(self, pos: int, end: int, out: Fields, quoted: bool, tilde: bool, join: bool = False) -> None:
        """Expand text[pos:end] (unquoted context) into `out`."""
        text = self.text
        if tilde and pos < end and text[pos] == "~":
            stop = pos + 1
            while stop < end and (text[stop].isalnum() or text[stop] in "_-.") :
                stop += 1
            # Only `~` and `~/...` expand (to $HOME); `~name` would be a user's home, which on a
            # launch line is Hydra's `~key` deletion: bash leaves it alone when no such user exists.
            if stop == pos + 1 and (stop == end or text[stop] == "/"):
                self._expand_var("HOME", pos, stop, out, quoted=True, join=join)
                pos = stop
        while pos < end:
            char = text[pos]
            if char == "\\":
                if pos + 1 < end and text[pos + 1] == "\n":
                    pos += 2
                    continue
                if pos + 1 < end:
                    out.add(self._lit(pos + 1, pos + 2), quoted=True)
                pos += 2
            elif char == "'":
                close = text.find("'", pos + 1, end)
                close = end if close == -1 else close
                out.add(self._lit(pos + 1, close), quoted=True)
                pos = close + 1
            elif char == '"':
                pos = self._double_quoted(pos + 1, end, out, join)
            elif char == "$" and pos + 1 < end and text[pos + 1] == "'":
                pos = self._ansi_c(pos, end, out)
            elif char == "$" or char == "`":
                pos = self._dollar(pos, end, out, quoted=False, join=join)
            else:
                match = _UNQUOTED_SPECIAL.search(text, pos + 1, end)
                stop = match.start() if match else end
                out.add(self._lit(pos, stop), quoted=False)
                pos = stop

    def _double_quoted(self, pos: int, end: int, out: Fields, join: bool) -> int:
        text = self.text
        out.keep[-1] = True
        while pos < end:
            char = text[pos]
            if char == '"':
                return pos + 1
            if char == "\\" and pos + 1 < end and text[pos + 1] in '$`"\\\n':
                if text[pos + 1] != "\n":
                    out.add(self._lit(pos + 1, pos + 2), quoted=True)
                pos += 2
            elif char == "$" or char == "`":
                pos = self._dollar(pos, end, out, quoted=True, join=join)
            else:
                match = _QUOTED_SPECIAL.search(text, pos + 1, end)
                stop = match.start() if match else end
                out.add(self._lit(pos, stop), quoted=True)
                pos = stop
        return end

    def _ansi_c(self, pos: int, end: int, out: Fields) -> int:
        text = self.text
        index = pos + 2
        chars: list[str] = []
        escapes = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"', "a": "\a", "e": "\x1b", "r": "\r"}
        while index < end and text[index] != "'":
            if text[index] == "\\" and index + 1 < end:
                chars.append(escapes.get(text[index + 1], "\\" + text[index + 1]))
                index += 2
            else:
                chars.append(text[index])
                index += 1
        out.add(Piece("".join(chars), self.src.span(pos, min(index + 1, end))), quoted=True)
        return min(index + 1, end)

    # ---- $ constructs ----------------------------------------------------------------------
    def _dollar(self, pos: int, end: int, out: Fields, quoted: bool, join: bool) -> int:
        text = self.text
        if text[pos] == "`":
            close = find_backtick_end(text, pos + 1, end)
            out.add(self._unknown(pos, close), quoted=True)
            return close
        nxt = text[pos + 1] if pos + 1 < end else ""
        if text.startswith("$((", pos) and pos + 3 <= end:
            close = find_arith_end(text, pos + 3, end)
            if close is not None:
                value = self.arith(pos + 3, close - 2)
                piece = Piece(None if value is None else str(value), self.src.span(pos, close),
                              desc="" if value is not None else text[pos:close])
                self._add_word(out, (piece,), quoted, join)
                return close
        if nxt == "(":
            close = find_paren_end(text, pos + 2, end)
            substituted = self.scope.command_substitution(text[pos:close], self.src.span(pos, close))
            if substituted is not None:
                self._add_word(out, substituted, quoted, join)
            else:
                out.add(self._unknown(pos, close), quoted=True)
            return close
        if nxt == "{":
            close = find_brace_end(text, pos + 2, end)
            self._param(pos, pos + 2, close - 1 if text[close - 1] == "}" else close, close, out, quoted, join)
            return close
        match = _NAME_RE.match(text, pos + 1, end)
        if match:
            self._expand_var(match.group(), pos, match.end(), out, quoted, join)
            return match.end()
        if nxt and nxt in _SPECIAL:
            self._expand_var(nxt, pos, pos + 2, out, quoted, join)
            return pos + 2
        out.add(self._lit(pos, pos + 1), quoted)
        return pos + 1

    def _add_word(self, out: Fields, word: Word, quoted: bool, join: bool) -> None:
        if quoted or join:
            for piece in word:
                out.add(piece, quoted=True)
            if quoted:
                out.keep[-1] = True
        else:
            out.add_split(word)

    def _used(self, word: Word, via: Span) -> Word:
        return tuple([_new(Piece, (p[0], p[1], p[2], via, p[4], p[5] + (p[3],) if p[3] is not None else p[5]))
                      for p in word])  # not _replace: 5x faster; _new: no Python-level __new__

    def _expand_var(self, name: str, start: int, stop: int, out: Fields, quoted: bool, join: bool) -> None:
        via = self.src.span(start, stop)
        if name in ("@", "*"):
            words = [self._used(w, via) for w in self.scope.positional()]
            if join or (name == "*" and quoted):
                joined: list[Piece] = []
                for index, word in enumerate(words):
                    if index:
                        joined.append(Piece(" ", via))
                    joined.extend(word)
                self._add_word(out, tuple(joined), quoted, join)
            else:
                out.add_multi(words, quoted)
            return
        if name == "#":
            count = str(len(self.scope.positional())) if self.scope.positional_known() else None
            self._add_word(out, (Piece(count, via, desc="" if count else "$#"),), quoted, join)
            return
        value = self._value(name)
        if isinstance(value, str) or value is None:
            out.add(Piece(None, via, desc=self.text[start:stop]), quoted=True)
            return
        self._add_word(out, self._used(value.first(), via), quoted, join)

    def _value(self, name: str) -> Value | None | str:
        if name.isdigit():
            args = self.scope.positional()
            if name == "0":
                return Value(scalar=(Piece(self.src.path, self.src.span(0, 0)),))
            index = int(name) - 1
            return Value(scalar=args[index]) if index < len(args) else "unknown"
        if name in "?$!-":
            return "unknown"
        return self.scope.lookup(name)

    def _param(self, start: int, body: int, body_end: int, stop: int, out: Fields, quoted: bool,
               join: bool) -> None:
        """`${...}`: text[body:body_end] is the inside of the braces."""
        text = self.text
        via = self.src.span(start, stop)
        whole = text[start:stop]
        if self.depth > MAX_DEPTH:
            out.add(Piece(None, via, desc=whole), quoted=True)
            return
        inner = text[body:body_end]
        # ${#A[@]}, ${#A}
        length = _LENGTH_RE.fullmatch(inner)
        if length:
            self._add_word(out, (self._length(length.group(1), bool(length.group(2)), via, whole),), quoted, join)
            return
        if inner.startswith("!"):
            out.add(Piece(None, via, desc=whole), quoted=True)
            return
        match = _NAME_RE.match(inner) or _SPECIAL_PARAM_RE.match(inner)
        if not match:
            out.add(Piece(None, via, desc=whole), quoted=True)
            return
        name = match.group()
        rest = match.end()
        subscript = None
        if rest < len(inner) and inner[rest] == "[":
            close = inner.find("]", rest)
            if close == -1:
                out.add(Piece(None, via, desc=whole), quoted=True)
                return
            subscript = inner[rest + 1:close]
            rest = close + 1
        op = next((candidate for candidate in _PARAM_OPS if inner.startswith(candidate, rest)), "") if rest < len(inner) else ""
        operand_start = body + rest + len(op)
        value = self._subscripted(name, subscript, via, whole)
        if isinstance(value, list):  # ${A[@]} (possibly with an operator we do not model)
            if op:
                out.add(Piece(None, via, desc=whole), quoted=True)
            elif join:
                self._add_word(out, _join_words(value, via), quoted, join)
            else:
                out.add_multi(value, quoted)
            return
        result = self._apply_op(name, value, op, operand_start, body_end, via, whole)
        self._add_word(out, result, quoted, join)

    def _length(self, name: str, of_array: bool, via: Span, whole: str) -> Piece:
        if name in "@*#":
            if not self.scope.positional_known():
                return Piece(None, via, desc=whole)
            return Piece(str(len(self.scope.positional())), via)
        value = self._value(name)
        if isinstance(value, str):
            return Piece(None, via, desc=whole)
        if value is None:
            return Piece("0", via)
        if of_array:
            return Piece(str(len(value.elements())), via)
        text = word_text(value.first())
        return Piece(None if text is None else str(len(text)), via, desc="" if text is not None else whole)

    def _subscripted(self, name: str, subscript: str | None, via: Span, whole: str) -> Word | list[Word] | str | None:
        """A scalar word, a list of words (`[@]`), None (unset) or "unknown"."""
        if name in ("@", "*") and subscript is None:
            return [self._used(w, via) for w in self.scope.positional()]
        value = self._value(name)
        if isinstance(value, str) or value is None:
            return value
        if subscript in ("@", "*"):
            return [self._used(w, via) for w in value.elements()]
        if subscript is None:
            return self._used(value.first(), via)
        index = self.arith_text(subscript)
        elements = value.elements()
        if index is None:
            return "unknown"
        if 0 <= index < len(elements):
            return self._used(elements[index], via)
        return None

    def _apply_op(self, name: str, value: Word | str | None, op: str, operand_start: int, operand_end: int,
                  via: Span, whole: str) -> Word:
        unknown = (Piece(None, via, desc=whole),)
        if not op:
            if value == "unknown":
                return unknown
            return value if isinstance(value, tuple) else (Piece("", via),)
        if op in (":-", "-", ":=", "=", ":+", "+", ":?", "?"):
            if value == "unknown":
                # Only the environment could set it, and rlpatch assumes an empty environment unless
                # given (--env/--use-env): the script's own default is what runs.
                state: bool | None = False
            elif value is None:
                state = False
            else:
                state = True if op[0] != ":" else word_known_prefix_nonempty(value)  # type: ignore[arg-type]
            if state is None:
                return unknown
            operand = lambda: Expander(self.src, self.scope, self.depth + 1).scalar(operand_start, operand_end)  # noqa: E731
            if op in (":+", "+"):
                return operand() if state else (Piece("", via),)
            if state:
                return value  # type: ignore[return-value]
            if op in (":?", "?"):
                return unknown
            word = operand()
            if op in (":=", "="):
                self.scope.assign_default(name, word, self.src.span(operand_start, operand_end))
            return word
        if value == "unknown" or value is None:
            return unknown if value == "unknown" else (Piece("", via),)
        text = word_text(value)  # type: ignore[arg-type]
        if text is None:
            return unknown
        operand_text = word_text(Expander(self.src, self.scope, self.depth + 1).scalar(operand_start, operand_end))
        transformed = _transform(text, op, operand_text, self.arith_text)
        if transformed is None:
            return unknown
        return (Piece(transformed, via, via=via),)

    # ---- arithmetic ---------------------------------------------------------------------
    def arith(self, start: int, end: int) -> int | None:
        """Evaluate the arithmetic expression text[start:end]; None when any operand is unknown."""
        word = Expander(self.src, self.scope, self.depth + 1).scalar(start, end, tilde=False)
        text = word_text(word)
        return None if text is None else self.arith_text(text)

    def arith_text(self, text: str) -> int | None:
        if self.depth > MAX_DEPTH:
            return None
        constant = _ARITH_CONSTANTS.get(text)
        if constant is not None:
            return constant
        arith = Arith(text, self._arith_var)
        value = arith.parse()
        if value is not None and not arith.has_names:
            # No variable in it: the value is the text's alone (a variable's "8" is re-evaluated
            # at every `$((NGPUS * 2))`). Only successes are kept: None may come from recursion depth.
            _ARITH_CONSTANTS[text] = value
        return value

    def _arith_var(self, name: str) -> int | None:
        value = self._value(name)
        if value is None:
            return 0
        if isinstance(value, str):
            return None
        text = word_text(value.first())
        if text is None:
            return None
        if not text.strip():
            return 0
        return Expander(self.src, self.scope, self.depth + 1).arith_text(text)


def _join_words(words: list[Word], via: Span) -> Word:
    joined: list[Piece] = []
    for index, word in enumerate(words):
        if index:
            joined.append(Piece(" ", via))
        joined.extend(word)
    return tuple(joined)


def _transform(text: str, op: str, operand: str | None, arith: Callable[[str], int | None]) -> str | None:
    """Case conversion, prefix/suffix removal, substitution, substring on a known value."""
    import fnmatch

    if op == ",,":
        return text.lower()
    if op == "^^":
        return text.upper()
    if op == ",":
        return text[:1].lower() + text[1:]
    if op == "^":
        return text[:1].upper() + text[1:]
    if operand is None:
        return None
    if op in ("#", "##"):
        lengths = range(len(text) + 1) if op == "#" else range(len(text), -1, -1)
        for size in lengths:
            if fnmatch.fnmatchcase(text[:size], operand):
                return text[size:]
        return text
    if op in ("%", "%%"):
        lengths = range(len(text) + 1) if op == "%" else range(len(text), -1, -1)
        for size in lengths:
            if fnmatch.fnmatchcase(text[len(text) - size:], operand):
                return text[:len(text) - size]
        return text
    if op in ("/", "//", "/#", "/%"):
        pattern, _, replacement = operand.partition("/")
        if any(ch in pattern for ch in "*?["):
            return None
        if op == "//":
            return text.replace(pattern, replacement)
        if op == "/#":
            return replacement + text[len(pattern):] if text.startswith(pattern) else text
        if op == "/%":
            return text[: len(text) - len(pattern)] + replacement if pattern and text.endswith(pattern) else text
        return text.replace(pattern, replacement, 1)
    if op == ":":
        offset_text, _, length_text = operand.partition(":")
        offset = arith(offset_text) if offset_text.strip() else 0
        length = arith(length_text) if length_text.strip() else None
        if offset is None or (length_text.strip() and length is None):
            return None
        sliced = text[offset:] if offset >= 0 else text[len(text) + offset:]
        if length is not None:
            sliced = sliced[:length] if length >= 0 else sliced[:length]
        return sliced
    return None


# ---- scanning for the end of nested constructs --------------------------------------------
def skip_quoted(text: str, pos: int, end: int) -> int:
    """At a quote or `$`-construct or backslash, return the position right after it."""
    char = text[pos]
    if char == "\\":
        return min(pos + 2, end)
    if char == "'":
        close = text.find("'", pos + 1, end)
        return end if close == -1 else close + 1
    if char == '"':
        index = pos + 1
        while index < end:
            if text[index] == "\\":
                index += 2
            elif text[index] == '"':
                return index + 1
            elif text[index] in "$`":
                index = skip_dollar(text, index, end)
            else:
                index += 1
        return end
    if char in "$`":
        return skip_dollar(text, pos, end)
    return pos + 1


def skip_dollar(text: str, pos: int, end: int) -> int:
    if text[pos] == "`":
        return find_backtick_end(text, pos + 1, end)
    if text.startswith("$((", pos):
        close = find_arith_end(text, pos + 3, end)
        if close is not None:
            return close
    if text.startswith("$(", pos):
        return find_paren_end(text, pos + 2, end)
    if text.startswith("${", pos):
        return find_brace_end(text, pos + 2, end)
    return pos + 1


def find_backtick_end(text: str, pos: int, end: int) -> int:
    while pos < end:
        if text[pos] == "\\":
            pos += 2
        elif text[pos] == "`":
            return pos + 1
        else:
            pos += 1
    return end


def find_brace_end(text: str, pos: int, end: int) -> int:
    """Position after the `}` closing a `${` whose body starts at pos."""
    while pos < end:
        char = text[pos]
        if char == "}":
            return pos + 1
        if char in "\\'\"$`":
            pos = skip_quoted(text, pos, end)
        else:
            pos += 1
    return end


def find_paren_end(text: str, pos: int, end: int) -> int:
    """Position after the `)` closing a `$(` whose body starts at pos."""
    depth = 0
    while pos < end:
        char = text[pos]
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return pos + 1
            depth -= 1
        elif char == "#" and (pos == 0 or text[pos - 1] in " \t\n"):
            newline = text.find("\n", pos, end)
            pos = end if newline == -1 else newline
            continue
        if char in "\\'\"$`":
            pos = skip_quoted(text, pos, end)
        else:
            pos += 1
    return end


def find_arith_end(text: str, pos: int, end: int) -> int | None:
    """Position after the `))` closing a `$((` whose body starts at pos; None if it is `$( (...) )`."""
    depth = 0
    while pos < end:
        char = text[pos]
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return pos + 2 if pos + 1 < end and text[pos + 1] == ")" else None
            depth -= 1
        if char in "\\'\"$`":
            pos = skip_quoted(text, pos, end)
        else:
            pos += 1
    return None


# ---- integer arithmetic ---------------------------------------------------------------------
_ARITH_TOKEN = re.compile(
    r"\s*(?:(0[xX][0-9a-fA-F]+|[0-9]+#[0-9a-zA-Z]+|[0-9]+)|([A-Za-z_][A-Za-z0-9_]*)|"
    r"(\*\*|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%()<>!~&|^?:,]))"
)
_BINARY = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, ">": 7, "<=": 7, ">=": 7,
    "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10, "**": 11,
}


class _Unknown(Exception):
    pass


_ARITH_TOKENS: dict[str, list[tuple[str, str]]] = {}  # text -> tokens: tokenizing is pure
_ARITH_CONSTANTS: dict[str, int] = {}  # variable-free text -> its value


class Arith:
    """A small Pratt parser for bash integer arithmetic (no assignment operators)."""

    def __init__(self, text: str, var: Callable[[str], int | None]) -> None:
        self.var = var
        self.index = 0
        tokens = _ARITH_TOKENS.get(text)
        if tokens is None:
            tokens = _ARITH_TOKENS[text] = self._tokenize(text)
        self.tokens = tokens  # shared between instances: never mutated
        self.has_names = any(kind == "name" for kind, _ in tokens)

    @staticmethod
    def _tokenize(text: str) -> list[tuple[str, str]]:
        tokens: list[tuple[str, str]] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            match = _ARITH_TOKEN.match(text, pos)
            if not match or match.end() == pos:
                return [("bad", text)]
            kind = "num" if match.group(1) else "name" if match.group(2) else "op"
            tokens.append((kind, match.group(match.lastindex or 0)))
            pos = match.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        return tokens

    def parse(self) -> int | None:
        if not self.tokens:
            return 0
        try:
            value = self._expr(0)
            if self.index != len(self.tokens):
                return None
            return value
        except (_Unknown, ZeroDivisionError, IndexError, ValueError, OverflowError, RecursionError):
            return None

    def _next(self) -> tuple[str, str]:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def _atom(self) -> int:
        kind, text = self._next()
        if kind == "num":
            if "#" in text:
                base, digits = text.split("#", 1)
                return int(digits, int(base))
            if text.lower().startswith("0x"):
                return int(text, 16)
            return int(text, 8) if len(text) > 1 and text.startswith("0") else int(text)
        if kind == "name":
            value = self.var(text)
            if value is None:
                raise _Unknown
            return value
        if text == "(":
            value = self._expr(0)
            if self._next()[1] != ")":
                raise ValueError
            return value
        if text in ("-", "+", "!", "~"):
            operand = self._expr(12)
            return {"-": -operand, "+": operand, "!": int(not operand), "~": ~operand}[text]
        raise ValueError(text)

    def _expr(self, min_prec: int) -> int:
        left = self._atom()
        while True:
            token = self._peek()
            if token is None or token[0] != "op":
                return left
            op = token[1]
            if op == "?" and min_prec <= 0:
                self.index += 1
                yes = self._expr(0)
                if self._next()[1] != ":":
                    raise ValueError
                no = self._expr(0)
                left = yes if left else no
                continue
            prec = _BINARY.get(op)
            if prec is None or prec < min_prec:
                return left
            self.index += 1
            right = self._expr(prec if op == "**" else prec + 1)
            left = _binary(op, left, right)


_OPERATIONS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b, "&": lambda a, b: a & b,
    "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b), "<": lambda a, b: int(a < b), ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b), ">=": lambda a, b: int(a >= b),
    "&&": lambda a, b: int(bool(a) and bool(b)), "||": lambda a, b: int(bool(a) or bool(b)),
}


def _binary(op: str, left: int, right: int) -> int:
    if op == "/":
        return int(left / right) if right else _raise_zero()
    if op == "%":
        return left - right * int(left / right) if right else _raise_zero()
    if op == "**":
        if right < 0 or right > 256:
            raise ValueError
        return left**right
    if op in ("<<", ">>") and not 0 <= right < 256:
        raise ValueError
    return _OPERATIONS[op](left, right)


def _raise_zero() -> int:
    raise ZeroDivisionError
