"""Hydra dict values read as their keys: `key={a:"P",b:{c:1}}` sets `key.a` and `key.b.c`.

Hydra merges a dict value into the node it overrides, so for the run model a dict override is the
same as one override per leaf (msprobe's own docs write the vLLM dump key as
`+...additional_config={dump_config_path:"P"}`). This reader follows Hydra's override grammar for
dicts (`{key: value, ...}`, values quoted, bare, lists or nested dicts) and gives each leaf's text
and its offsets in the override, so findings point at the leaf. Anything it cannot read is left
alone (RL301, with Hydra's own parser, reports grammar errors).
"""

from __future__ import annotations

from typing import NamedTuple


class Leaf(NamedTuple):
    """One leaf of a dict value: its dotted key below the dict, its text, and offsets in the text read.
    (A NamedTuple: `rlpatch lint` imports it at every cold start, a frozen dataclass costs a millisecond.)"""

    key: str
    value: str
    key_start: int
    key_end: int
    value_start: int
    value_end: int


class _Unreadable(Exception):
    pass


def dict_leaves(text: str, offset: int = 0) -> list[Leaf] | None:
    """The leaves of `text` when it is a whole Hydra dict (`{...}`), else None. Offsets are shifted
    by `offset` (where `text` starts in the override)."""
    stripped = text.rstrip()
    start = len(text) - len(text.lstrip())
    if not stripped.lstrip().startswith("{") or not stripped.endswith("}"):
        return None
    try:
        leaves, end = _read_dict(text, start, "", offset)
    except _Unreadable:
        return None
    return leaves if text[end:].strip() == "" else None


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t":
        index += 1
    return index


def _read_dict(text: str, index: int, prefix: str, offset: int) -> tuple[list[Leaf], int]:
    """Read `{...}` starting at `text[index] == "{"`; the leaves and the index after `}`."""
    leaves: list[Leaf] = []
    index = _skip_space(text, index + 1)
    if index < len(text) and text[index] == "}":
        return leaves, index + 1
    while True:
        key_start = index
        colon = text.find(":", index)
        if colon < 0:
            raise _Unreadable
        key = text[index:colon].strip()
        if not key or any(c in key for c in "{}[],'\""):
            raise _Unreadable
        key_end = key_start + len(text[index:colon].rstrip())
        index = _skip_space(text, colon + 1)
        dotted = f"{prefix}{key}"
        if index < len(text) and text[index] == "{":
            inner, index = _read_dict(text, index, dotted + ".", offset)
            leaves.extend(inner)
        else:
            value_start = index
            index = _read_value(text, index)
            value_end = value_start + len(text[value_start:index].rstrip())
            leaves.append(Leaf(dotted, text[value_start:value_end], key_start + offset, key_end + offset,
                               value_start + offset, value_end + offset))
        index = _skip_space(text, index)
        if index >= len(text):
            raise _Unreadable
        if text[index] == "}":
            return leaves, index + 1
        if text[index] != ",":
            raise _Unreadable
        index = _skip_space(text, index + 1)


def _read_value(text: str, index: int) -> int:
    """The index just after one value: a quoted string, a bracketed list, or bare text up to `,`/`}`."""
    depth = 0
    while index < len(text):
        char = text[index]
        if char in "'\"":
            close = text.find(char, index + 1)
            while close > 0 and text[close - 1] == "\\":
                close = text.find(char, close + 1)
            if close < 0:
                raise _Unreadable
            index = close + 1
            continue
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif depth == 0 and char in ",}":
            return index
        index += 1
    raise _Unreadable
