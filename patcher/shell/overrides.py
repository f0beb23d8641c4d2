"""One Hydra override of a launch (`[~|+|++]key[=value]`) and where each part of it is written.

`parse_override` reads an argv field of the verl launch; `Override` keeps its text and maps its
key and value back to source positions (through variables, arrays and continuations); a dict
value's leaves are overrides of their own (`Override.leaves`, read by `hydra_dict`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlpatch.shell.results import Arg
from rlpatch.shell.source import Span

if TYPE_CHECKING:  # the dict reader loads with the first `key={...}` value: most scripts have none
    from rlpatch.shell.hydra_dict import Leaf


class Override:
    """One Hydra argument: `[~|+|++]key[=value]`, with its positions. (A plain class, not a
    dataclass: it is created at every cold start of `rlpatch lint`.)"""

    __slots__ = ("arg", "text", "prefix", "key", "value", "value_known", "leaf")

    def __init__(self, arg: Arg, text: str, prefix: str, key: str, value: str | None, value_known: bool,
                 leaf: Leaf | None = None) -> None:
        self.arg = arg
        self.text = text
        self.prefix = prefix  # "", "+", "++" or "~"
        self.key = key
        self.value = value  # None: no `=` (deletion `~key`) or unknown
        self.value_known = value_known
        # A leaf of a dict value (`key={a:1}` read as `key.a=1`): where its key and value are in the text.
        self.leaf = leaf

    def _fields(self) -> tuple:
        return (self.arg, self.text, self.prefix, self.key, self.value, self.value_known, self.leaf)

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, Override) else NotImplemented

    def __repr__(self) -> str:
        return f"Override({self.text!r})"

    @property
    def span(self) -> Span:
        """Where the override's text is written (an array element, a variable, or the token)."""
        if self.leaf is not None:
            return self.arg.sub_span(self.leaf.key_start, self.leaf.key_end)
        return self.arg.sub_span(0, len(self.prefix) + len(self.key))

    @property
    def used_at(self) -> Span:
        return self.arg.span

    @property
    def key_span(self) -> Span:
        if self.leaf is not None:
            return self.span
        return self.arg.sub_span(len(self.prefix), len(self.prefix) + len(self.key))

    @property
    def _value_start(self) -> int:
        return self.leaf.value_start if self.leaf is not None else len(self.prefix) + len(self.key) + 1

    @property
    def value_span(self) -> Span:
        start = self._value_start
        pieces = self.arg.origins(start)
        text = self.arg.text
        if text is not None:
            end = self.leaf.value_end if self.leaf is not None else len(text)
            return self.arg.sub_span(start, max(end, start + 1)) if start < len(text) else self.arg.span
        # An unknown value: point at the piece that cannot be known (`${HOME}`, `$(date)`), wherever
        # it was written, not at the start of the word or the variable that carried it.
        unknown = next((piece for piece in pieces if piece.text is None), None)
        if unknown is not None:
            return unknown.span
        return pieces[-1].span if pieces else self.arg.span

    def leaves(self) -> list["Override"]:
        """A dict value's leaves as overrides of their own (`key={a:1,b:{c:2}}`: `key.a`, `key.b.c`)."""
        if not self.value_known or self.value is None or "{" not in self.value:
            return []
        from rlpatch.shell.hydra_dict import dict_leaves

        start = len(self.prefix) + len(self.key) + 1
        return [Override(self.arg, self.text, self.prefix, f"{self.key}.{leaf.key}", leaf.value, True, leaf)
                for leaf in dict_leaves(self.value, start) or ()]

    def related(self) -> tuple[Span, ...]:
        """Use sites that differ from where the value was written (for findings)."""
        spans: set[Span] = set()
        for piece in self.arg.origins(self._value_start):
            spans.update(piece.chain)
            if piece.via is not None:
                spans.add(piece.via)
        primary = self.value_span
        return tuple(sorted(s for s in spans if s != primary and s.file != "<command line>"))


def unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def parse_override(arg: Arg) -> Override | None:
    text = arg.text
    if text is None:
        # `key=$(...)`: the key is known even when the value is not.
        known = ""
        for piece in arg.word:
            if piece.text is None:
                break
            known += piece.text
        if "=" not in known:
            return None
        key_text = known
    else:
        key_text = text
    prefix = "~" if key_text.startswith("~") else "++" if key_text.startswith("++") else "+" if key_text.startswith("+") else ""
    body = key_text[len(prefix):]
    key, eq, value = body.partition("=")
    if not key or (not eq and prefix != "~"):
        return None
    value_known = text is not None
    return Override(arg, text if text is not None else arg.display, prefix, key,
                    (value if eq else None) if value_known else None, value_known)
