"""Bash parameter expansion: `${VAR:-default}`, `${#A[@]}`, `${A[1]}`, `${X,,}`, `${X#pat}` and friends.

`ParameterExpansion` is the part of the word expander that handles everything between `${` and
`}`: lengths, subscripts, the default/alternative operators (`:-`, `:=`, `:+`, `:?` and their
colon-less forms) and the transformations of a known value (case, prefix/suffix removal,
substitution, substring). A value only the environment could supply is unknown; the script's own
default is what runs unless the user gave the environment (`--env`, `--use-env`).
"""

from __future__ import annotations

import re
from typing import Callable

from rlpatch.shell.pieces import (
    MAX_DEPTH,
    MAX_VALUE_SIZE,
    OVER,
    UNKNOWN,
    ExpanderHost,
    Fields,
    Piece,
    Unresolved,
    Value,
    Word,
    over_limit,
    word_known_prefix_nonempty,
    word_text,
)
from rlpatch.shell.source import Span

# `${X#pattern}` and `${X%pattern}` try every prefix (suffix) length with fnmatch: quadratic in the
# value's length. On a longer value the result is unknown (a launch script's values are short).
MAX_PATTERN_TEXT = 4096

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LENGTH_RE = re.compile(r"#([A-Za-z_][A-Za-z0-9_]*|[@*#0-9])(\[[@*]\])?")  # ${#A}, ${#A[@]}
_SPECIAL_PARAM_RE = re.compile(r"[0-9]+|[@*#?$!-]")
_PARAM_OPS = (":-", ":=", ":+", ":?", "-", "=", "+", "?", ",,", ",", "^^", "^", "##", "#", "%%", "%", "//", "/#",
              "/%", "/", ":", "@")
_PARAM_OP_RE = re.compile("|".join(re.escape(op) for op in _PARAM_OPS))  # alternatives tried in order


class ParameterExpansion(ExpanderHost):
    """`${...}` for the word expander (a base of `rlpatch.shell.words.Expander`; what it uses of the
    expander is `ExpanderHost`, abstract here, so mypy refuses an expander that lacks a part of it)."""

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
        found = _PARAM_OP_RE.match(inner, rest)  # the first of _PARAM_OPS that matches there
        op = found.group() if found else ""
        operand_start = body + rest + len(op)
        value = self._subscripted(name, subscript, via, whole)
        if value is OVER:  # a value past the bounds: this use is unknown, and says why
            out.add(over_limit(via, whole)[0], quoted=True)
            return
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
        if value is UNKNOWN:
            return Piece(None, via, desc=whole)
        if value is None:
            return Piece("0", via)
        if value.over:  # past the value bounds: neither its elements nor its length are known
            return over_limit(via, whole)[0]
        if of_array:
            return Piece(str(len(value.elements())), via)
        text = word_text(value.first())
        return Piece(None if text is None else str(len(text)), via, desc="" if text is not None else whole)

    def _subscripted(self, name: str, subscript: str | None, via: Span, whole: str
                     ) -> Word | list[Word] | Unresolved | None:
        """A scalar word, a list of words (`[@]`), None (unset), UNKNOWN or OVER (past the bounds)."""
        if name in ("@", "*") and subscript is None:
            return [self._used(w, via) for w in self.scope.positional()]
        value = self._value(name)
        if not isinstance(value, Value):  # UNKNOWN or unset
            return value
        if value.over:
            return OVER
        if subscript in ("@", "*"):
            return [self._used(w, via) for w in value.elements()]
        if subscript is None:
            return self._used(value.first(), via)
        index = self.arith_text(subscript)
        elements = value.elements()
        if index is None:
            return UNKNOWN
        if 0 <= index < len(elements):
            return self._used(elements[index], via)
        return None

    def _apply_op(self, name: str, value: Word | Unresolved | None, op: str, operand_start: int, operand_end: int,
                  via: Span, whole: str) -> Word:
        if not op:
            if value is UNKNOWN:
                return _unknown(via, whole)
            return value if isinstance(value, tuple) else (Piece("", via),)
        word = value if isinstance(value, tuple) else None
        if op in (":-", "-", ":=", "=", ":+", "+", ":?", "?"):
            # Unset, or UNKNOWN: only the environment could set it, and rlpatch assumes an empty
            # environment unless given (--env/--use-env): the script's own default is what runs.
            state: bool | None = False
            if word is not None:
                state = True if op[0] != ":" else word_known_prefix_nonempty(word)
            if state is None:
                return _unknown(via, whole)
            operand = lambda: self._nested().scalar(operand_start, operand_end)  # noqa: E731
            if op in (":+", "+"):
                return operand() if state else (Piece("", via),)
            if state and word is not None:  # (state is True only for a word)
                return word
            if op in (":?", "?"):
                return _unknown(via, whole)
            default = operand()
            if op in (":=", "="):
                self.scope.assign_default(name, default, self.src.span(operand_start, operand_end))
            return default
        if word is None:
            return _unknown(via, whole) if value is UNKNOWN else (Piece("", via),)
        text = word_text(word)
        if text is None:
            return _unknown(via, whole)
        operand_text = word_text(self._nested().scalar(operand_start, operand_end))
        transformed = _transform(text, op, operand_text, self.arith_text)
        if transformed is None:
            return _unknown(via, whole)
        return (Piece(transformed, via, via=via),)



def _unknown(via: Span, whole: str) -> Word:
    """`(Piece(None, via, desc=whole),)`, built only when needed and without the NamedTuple's
    Python-level __new__ (every `${X:-default}` used to build one it then threw away)."""
    return (tuple.__new__(Piece, (None, via, False, None, whole, ())),)


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
    if op in ("#", "##", "%", "%%") and len(text) > MAX_PATTERN_TEXT:
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
        if not pattern and op in ("/", "//"):
            return text  # bash: an empty pattern replaces nothing (Python's replace would insert everywhere)
        if op == "//":
            if pattern and text.count(pattern) * len(replacement) > MAX_VALUE_SIZE:
                return None  # the result would pass the value bound
            return text.replace(pattern, replacement)
        if op == "/#":
            return replacement + text[len(pattern):] if text.startswith(pattern) else text
        if op == "/%":
            return text[: len(text) - len(pattern)] + replacement if text.endswith(pattern) else text
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
