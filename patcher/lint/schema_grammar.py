"""Hydra's grammar applied to each override: how Hydra reads `key=v` (RL301).

`parse_overrides` parses every override with Hydra's own `OverridesParser` and reduces the result to
plain data (`ParsedOverride`: kind, key or group, package, value, sweep), which `schema_cache`
keeps on disk so that a warm lint imports no Hydra. An override Hydra cannot parse, or a sweep
that Hydra would refuse as ambiguous, is an RL301 `SchemaProblem`, positioned at the character
where Hydra's generated ANTLR grammar fails. `SchemaProblem` is the finding every RL3xx check
returns. Hydra (and antlr4) are imported only on a cache miss.
"""

# No `from __future__ import annotations`: typing compiles each string annotation of a NamedTuple's
# fields (a ForwardRef each) at import, on every cold start of `rlpatch lint`; evaluated ones it takes as they are.

import contextlib
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from rlpatch.lint.rule import Fact, per_invocation
from rlpatch.lint.schema_cache import overrides_store_path, parsed_overrides_path, read_json, write_json_atomic


class SchemaProblem(NamedTuple):
    """A finding: `index` is the override it is about (None: the run as a whole, e.g. RL305);
    `start`/`end` are 0-based character offsets inside that override's text. (NamedTuples, not
    frozen dataclasses, here and in the family's other modules: importing `dataclasses`, with
    inspect, and creating each frozen class cost a `lint --verl-version` cold start milliseconds.)"""

    code: str
    message: str
    index: int | None = None  # type: ignore[assignment]  # a field named like tuple.index: only read as the field
    start: int = 0
    end: int = 0


class ParsedOverride(NamedTuple):
    """Hydra's parse of one override, reduced to plain data (so that it can be cached)."""

    text: str
    ok: bool
    kind: str = ""  # CHANGE, ADD, FORCE_ADD, DEL
    key_or_group: str = ""
    package: str | None = None
    value: Any = None
    sweep: bool = False
    error: str = ""
    error_column: int = 0  # 0-based offset in text

    @property
    def key_end(self) -> int:
        """Offset just after the key (the '=' or the end)."""
        index = self.text.find("=")
        return index if index >= 0 else len(self.text)

    @property
    def value_start(self) -> int:
        index = self.text.find("=")
        return index + 1 if index >= 0 else len(self.text)


PARSED: Fact[list[ParsedOverride]] = Fact("Hydra's parse of a list of overrides")  # per lint invocation


def parse_overrides(texts: Sequence[str], cache: bool = True) -> list[ParsedOverride]:
    """Hydra's parse of each text; results are kept on disk so that a warm lint imports no Hydra:
    the list's own small file (`parsed_overrides_path`), else the store of every text parsed so far.
    Once per lint invocation for each list (a script's paths often pass the same overrides)."""
    if not cache:
        return _parsed(texts, cache)
    listed = tuple(texts)
    parsed: list[ParsedOverride] = per_invocation(PARSED, lambda: _parsed(listed, cache), listed)
    return list(parsed)  # a list of its own to the caller


def _parsed(texts: Sequence[str], cache: bool) -> list[ParsedOverride]:
    run_path = parsed_overrides_path(texts) if cache else None
    if run_path is not None:
        known = _known_parse(texts, read_json(run_path))
        if known is not None:
            return known
    store_path = overrides_store_path()
    store: dict[str, Any] = (read_json(store_path) or {}) if cache else {}
    missing = [text for text in dict.fromkeys(texts) if text not in store]
    if missing:
        parser = _hydra_parser()
        for text in missing:
            store[text] = _parse_one(parser, text)
        if cache:
            if len(store) > 50_000:  # keep the file small: forget everything but this run
                store = {text: store[text] for text in texts}
            write_json_atomic(store_path, store)
    if run_path is not None:
        write_json_atomic(run_path, [store[text] for text in texts])
    return [ParsedOverride(text=text, **store[text]) for text in texts]


def _known_parse(texts: Sequence[str], cached: Any) -> list[ParsedOverride] | None:
    """The list's cached parse, or None when the file is missing or not what this version wrote."""
    if not isinstance(cached, list) or len(cached) != len(texts):
        return None
    try:
        return [ParsedOverride(text=text, **fields) for text, fields in zip(texts, cached, strict=True)]
    except TypeError:
        return None


def _hydra_parser() -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def _parse_one(parser: Any, text: str) -> dict[str, Any]:
    from hydra.errors import HydraException

    try:
        override = parser.parse_overrides([text])[0]
    except HydraException as err:
        return {"ok": False, "error": _parse_error_message(err), "error_column": _error_column(text)}
    sweep = override.is_sweep_override()
    value = None if sweep else override.value()
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        value = str(value)
    return {
        "ok": True,
        "kind": override.type.name,
        "key_or_group": override.key_or_group,
        "package": override.package,
        "value": value,
        "sweep": sweep,
    }


def _parse_error_message(err: Exception) -> str:
    lines = [line for line in str(err).splitlines() if line.strip() and not line.startswith("See https")]
    lines = [line for line in lines if set(line.strip()) != {"^"}]
    return (lines[0] if lines else "invalid override").replace("LexerNoViableAltException: ", "unexpected character in ")


def _error_column(text: str) -> int:
    """The 0-based offset where Hydra's generated ANTLR lexer/parser first fails on `text`.

    Hydra's exception loses the position for some parser errors, so the same generated grammar is
    run once more with a listener that only records where the first error is."""
    from antlr4 import CommonTokenStream, InputStream
    from antlr4.error.ErrorListener import ErrorListener
    from hydra.grammar.gen.OverrideLexer import OverrideLexer
    from hydra.grammar.gen.OverrideParser import OverrideParser

    class FirstError(ErrorListener):
        column: int | None = None

        def syntaxError(self, recognizer: Any, offending: Any, line: int, column: int, msg: str, e: Any) -> None:
            if self.column is None:
                self.column = getattr(offending, "start", None) if offending is not None else None
                if self.column is None or self.column < 0:
                    self.column = column

    listener = FirstError()
    lexer = OverrideLexer(InputStream(text))
    lexer.removeErrorListeners()
    lexer.addErrorListener(listener)
    parser = OverrideParser(CommonTokenStream(lexer))
    parser.removeErrorListeners()
    parser.addErrorListener(listener)
    with contextlib.suppress(Exception):  # only the recorded position matters here
        parser.override()
    column = listener.column if listener.column is not None else 0
    return max(0, min(column, max(len(text) - 1, 0)))


def grammar_problems(index: int, parsed: ParsedOverride) -> list[SchemaProblem]:
    if not parsed.ok:
        hint = _grammar_hint(parsed.text, parsed.error_column)
        return [SchemaProblem("RL301", f"Hydra cannot parse '{parsed.text}': {parsed.error}{hint}", index,
                              parsed.error_column, min(parsed.error_column + 1, len(parsed.text)))]
    if parsed.sweep:
        return [SchemaProblem(
            "RL301",
            f"'{parsed.text}' is a sweep (Hydra stops: \"Ambiguous value\"): write a list "
            f"{parsed.text[:parsed.value_start]}[...] or quote the value",
            index, parsed.value_start, len(parsed.text))]
    return []


def _grammar_hint(text: str, column: int) -> str:
    char = text[column : column + 1]
    if char == "~":
        return " (bash does not expand ~ after 'key=': write the absolute path or $HOME)"
    if char in "<>":
        return " (a placeholder left in the script?)"
    return ""
