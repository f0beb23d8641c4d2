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
from typing import Any, Callable

from rlpatch.shell.arith import ArithmeticExpansion
from rlpatch.shell.params import _NAME_RE, ParameterExpansion
from rlpatch.shell.pieces import UNKNOWN, Fields, Lookup, Piece, Scope, Value, Word, over_limit
from rlpatch.shell.quoting import find_arith_end, find_backtick_end, find_brace_end, find_paren_end
from rlpatch.shell.source import SourceFile, Span

# `_new(Piece, (...))` builds a Piece without the Python-level NamedTuple __new__ (all six fields
# given, in order): the expander creates one per literal run and per variable use.
_new = tuple.__new__

_SPECIAL = "@*#?$!-0123456789"
_UNQUOTED_SPECIAL = re.compile(r"[\\'\"$`]")  # where a literal run ends outside quotes
_QUOTED_SPECIAL = re.compile(r'[\\"$`]')  # ... and inside double quotes
_DYNAMIC = re.compile(r"[$`~]")  # what makes a word's expansion depend on variables
_NEEDS_EXPANSION = re.compile(r"[\\'\"$`~]")  # a word without these is its own single field


class Expander(ParameterExpansion, ArithmeticExpansion):
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
                cached = self.src.cache[key] = self._fields(start, end)
            return cached
        return self.remembered(("dfields", start, end), lambda: self._fields(start, end))

    def _fields(self, start: int, end: int) -> list[Word]:
        out = Fields()
        self._expand(start, end, out, quoted=False, tilde=True)
        if out.over:  # past MAX_VALUE_SIZE / MAX_ELEMENTS: the whole word is unknown
            return [over_limit(self.src.span(start, end), self.text[start:end])]
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
        if not self._static(start, end):
            return self.remembered(("dscalar", start, end, tilde), lambda: self._scalar(start, end, tilde))
        word = self.src.cache[key] = self._scalar(start, end, tilde)
        return word

    def _scalar(self, start: int, end: int, tilde: bool) -> Word:
        out = Fields()
        self._expand(start, end, out, quoted=False, tilde=tilde, join=True)
        if out.over:
            return over_limit(self.src.span(start, end), self.text[start:end])
        return tuple([piece for field in out.fields for piece in field])

    def remembered(self, key: tuple, expand: Callable[[], Any], memo: dict | None = None) -> Any:
        """`expand()` (an expansion that reads variables), shared wherever the same reads give the
        same answers: every path of a script replays the statements before its first different
        decision, and a function body or a loop re-expands the same words. Only top-level
        expansions are remembered (nested ones read through them); never one that assigns
        (`${X:=default}`). Inside another remembered expansion, checking a memo reads through the
        outer recorder, so the outer one depends on what the inner one did."""
        if self.depth:
            return expand()
        variants = (self.src.cache if memo is None else memo).setdefault(key, [])
        scope = self.scope
        for reads, result in variants:
            if _reads_hold(scope, reads):
                return result
        recorder = self.scope = _Recorder(scope)
        try:
            result = expand()
        finally:
            self.scope = scope
        if recorder.pure and len(variants) < _MEMO_VARIANTS:
            variants.append((tuple(recorder.reads), result))
        return result

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
        while pos < end and not out.over:
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
        while pos < end and not out.over:
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
            arith_end = find_arith_end(text, pos + 3, end)
            if arith_end is not None:
                value = self.arith(pos + 3, arith_end - 2)
                piece = Piece(None if value is None else str(value), self.src.span(pos, arith_end),
                              desc="" if value is not None else text[pos:arith_end])
                self._add_word(out, (piece,), quoted, join)
                return arith_end
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
                if out.over:
                    return
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
        if not isinstance(value, Value):  # UNKNOWN or unset
            out.add(Piece(None, via, desc=self.text[start:stop]), quoted=True)
            return
        if value.over:  # a value past the bounds: this use is unknown (its own short description)
            out.add(over_limit(via, self.text[start:stop])[0], quoted=True)
            return
        self._add_word(out, self._used(value.first(), via), quoted, join)

    def _value(self, name: str) -> Lookup:
        if name.isdigit():
            args = self.scope.positional()
            if name == "0":
                return Value(scalar=(Piece(self.src.path, self.src.span(0, 0)),))
            index = int(name) - 1
            return Value(scalar=args[index]) if index < len(args) else UNKNOWN
        if name in "?$!-":
            return UNKNOWN
        return self.scope.lookup(name)


    def _nested(self) -> "Expander":
        """A fresh expander one level deeper (operands, defaults, arithmetic variables)."""
        return Expander(self.src, self.scope, self.depth + 1)


_MEMO_VARIANTS = 16  # remembered expansions per word (one per distinct set of values it read)


def _same(now: Lookup, then: Lookup) -> bool:
    """Whether an expansion would see the same thing in `now` as in `then`: the same words (not
    where the variable was assigned, nor whether it is exported). Values are never changed in
    place, so the same object is the same value; another path's copy compares equal word for
    word, and its words are mostly the very same tuples (remembered), so the comparison is short."""
    if now is then:
        return True
    if isinstance(now, Value) and isinstance(then, Value):
        return now.scalar == then.scalar and now.array == then.array
    return now == then


class _Recorder:
    """A Scope that notes every answer an expansion read, so the result can be reused where the
    same questions get equal answers (equal words: compared by identity first, so cheaply)."""

    __slots__ = ("scope", "reads", "pure")

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.reads: list[tuple[int, str, object]] = []
        self.pure = True

    def lookup(self, name: str) -> Lookup:
        value = self.scope.lookup(name)
        self.reads.append((0, name, value))
        return value

    def positional(self) -> list[Word]:
        words = self.scope.positional()
        self.reads.append((1, "", tuple(words)))
        return words

    def positional_known(self) -> bool:
        known = self.scope.positional_known()
        self.reads.append((2, "", known))
        return known

    def assign_default(self, name: str, word: Word, span: Span) -> None:
        self.pure = False
        self.scope.assign_default(name, word, span)

    def command_substitution(self, text: str, span: Span) -> Word | None:
        return self.scope.command_substitution(text, span)  # the script's path and the text alone


def _reads_hold(scope: Scope, reads: tuple) -> bool:
    for kind, name, answer in reads:
        if kind == 0:
            if not _same(scope.lookup(name), answer):
                return False
        elif kind == 1:
            if tuple(scope.positional()) != answer:
                return False
        elif scope.positional_known() != answer:
            return False
    return True
