"""Scanning shell text for the end of quoted and nested constructs, without expanding them.

Given the position of a quote, backslash, backtick or `$`-construct, these return the position
right after it (`$(...)` with comments and nested parentheses, `${...}`, `$((...))`, backticks,
single and double quotes). The expander uses them to find a construct's extent before it expands
the inside; they never look at values.
"""

from __future__ import annotations


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


def _closing_paren(text: str, pos: int, end: int, comments: bool) -> int | None:
    """Index of the `)` that closes depth 0 from pos (quotes skipped; with `comments`, a `#` word
    starts a comment, as in a command substitution), or None when there is none before end."""
    depth = 0
    while pos < end:
        char = text[pos]
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return pos
            depth -= 1
        elif comments and char == "#" and (pos == 0 or text[pos - 1] in " \t\n"):
            newline = text.find("\n", pos, end)
            pos = end if newline == -1 else newline
            continue
        if char in "\\'\"$`":
            pos = skip_quoted(text, pos, end)
        else:
            pos += 1
    return None


def find_paren_end(text: str, pos: int, end: int) -> int:
    """Position after the `)` closing a `$(` whose body starts at pos (end when unclosed)."""
    close = _closing_paren(text, pos, end, comments=True)
    return end if close is None else close + 1


def find_arith_end(text: str, pos: int, end: int) -> int | None:
    """Position after the `))` closing a `$((` whose body starts at pos; None if it is `$( (...) )`.
    No comments inside: `#` is arithmetic's base notation (`16#ff`)."""
    close = _closing_paren(text, pos, end, comments=False)
    if close is None:
        return None
    return close + 2 if close + 1 < end and text[close + 1] == ")" else None
