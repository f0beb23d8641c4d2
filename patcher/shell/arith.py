"""Bash integer arithmetic (`$((...))`, array subscripts, substring offsets), evaluated statically.

`Arith` evaluates an expression text with bash's operators and precedence, asking for variables
through a callback; an unknown operand makes the whole value unknown (None), never a guess.
`ArithmeticExpansion` is the part of the word expander that evaluates `$((...))` against the
scope, memoising variable-free expressions (their value is the text's alone).
"""

from __future__ import annotations

import re
from typing import Callable

from rlpatch.shell.pieces import MAX_DEPTH, UNKNOWN, ExpanderHost, word_text

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
            return _wrap(value)
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
            return _wrap(int(text, 8) if len(text) > 1 and text.startswith("0") else int(text))
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
            return _wrap({"-": -operand, "+": operand, "!": int(not operand), "~": ~operand}[text])
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


def _wrap(value: int) -> int:
    """The value as bash's signed 64-bit integers hold it (`$((2**64))` is 0). Besides being bash's
    answer, it keeps `X=$((X*X))` in a loop from growing a number of millions of digits."""
    return ((value + _HALF) & _MASK) - _HALF


_HALF, _MASK = 1 << 63, (1 << 64) - 1


def _binary(op: str, left: int, right: int) -> int:
    return _wrap(_binary_exact(op, left, right))


def _binary_exact(op: str, left: int, right: int) -> int:
    if op == "/":
        return int(left / right) if right else _raise_zero()
    if op == "%":
        return left - right * int(left / right) if right else _raise_zero()
    if op == "**":
        if right < 0:  # bash: "exponent less than 0"
            raise ValueError
        return pow(left, right, 1 << 64)
    if op in ("<<", ">>") and not 0 <= right < 256:
        raise ValueError
    return _OPERATIONS[op](left, right)


def _raise_zero() -> int:
    raise ZeroDivisionError


class ArithmeticExpansion(ExpanderHost):
    """`$((...))` for the word expander (a base of `rlpatch.shell.words.Expander`; what it uses of the
    expander is `ExpanderHost`, abstract here: operands are expanded by `_nested()` before they are
    evaluated)."""

    def arith(self, start: int, end: int) -> int | None:
        """Evaluate the arithmetic expression text[start:end]; None when any operand is unknown."""
        word = self._nested().scalar(start, end, tilde=False)
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
        if value is UNKNOWN:
            return None
        text = word_text(value.first())
        if text is None:
            return None
        if not text.strip():
            return 0
        return self._nested().arith_text(text)

