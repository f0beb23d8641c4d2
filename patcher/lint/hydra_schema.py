"""The RL3xx family's entry: Hydra's verdict on each override of a run (RL301-RL306).

verl reads its command line with Hydra: `key=v` must name an existing key, `+key=v` may only add
(or fill a null), `++key=v` always works, `~key` deletes, and `group=option` picks a config file.
Hydra tells the user about a mistake only after the job has been scheduled; `lint_overrides` tells
them while they edit the script, with Hydra's own grammar and the real composed config. It takes
the overrides as `OverrideRecord`s and returns a `SchemaResult`, and it owns the order of the
steps, each in its own module:

1. `schema_discovery` finds the config the launch's entry module composes (its `@hydra.main`,
   `--config-path`/`--config-name`, `hydra.searchpath`) in the verl tree (`--verl-root`,
   `--verl-version X`, or the verl of `--python`, found without importing it) and its config
   groups; a config the tree does not hold (a `pkg://` package or a recipe not there) is noted, not
   judged;
2. `schema_grammar` parses every override with Hydra's `OverridesParser` (RL301); group overrides
   naming no option of their group are checked here (RL302);
3. `schema_compose` composes the config with the valid group overrides and replays the other
   overrides on the snapshot with Hydra's semantics (RL302-RL306);
4. `schema_cache` keeps composed snapshots and parsed overrides on disk, so a warm lint imports no
   Hydra at all.

hydra/omegaconf are imported only on the cold paths (a cache miss), never at module import.
"""

# No `from __future__ import annotations`: typing compiles each string annotation of a NamedTuple's
# fields (a ForwardRef each) at import, on every cold start of `rlpatch lint`; evaluated ones it takes as they are.

import functools
import importlib.util
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rlpatch.lint.rule import Fact, per_invocation
from rlpatch.lint.schema_compose import Replay, Schema, load_schema
from rlpatch.lint.schema_discovery import (
    DEFAULT_ENTRY,
    ConfigSource,
    SchemaUnavailable,
    SchemaUnknown,
    config_groups,
    locate_config,
    strip_yaml,
)
from rlpatch.lint.schema_grammar import ParsedOverride, SchemaProblem, grammar_problems, parse_overrides

SEARCHPATH_KEY = "hydra.searchpath"


class OverrideRecord(NamedTuple):
    """One override as Hydra receives it (after bash quoting is removed).

    `text` is the whole token (`+a.b=1`); `prefix` is '', '+', '++' or '~'; `position` is opaque to
    this module and handed back untouched (the front end's source position of the token).
    """

    text: str
    prefix: str = ""
    key: str = ""
    value: str | None = None
    position: Any = None

    @classmethod
    def from_text(cls, text: str, position: Any = None) -> "OverrideRecord":
        prefix = "++" if text.startswith("++") else text[:1] if text[:1] in ("+", "~") else ""
        body = text[len(prefix) :]
        key, sep, value = body.partition("=")
        return cls(text, prefix, key, value if sep else None, position)


class SchemaResult(NamedTuple):
    problems: list[SchemaProblem] = []  # one shared empty list, never appended to: a result is built whole
    skipped: str | None = None  # one line saying why the family did not run
    source: ConfigSource | None = None
    schema: Schema | None = None


# Where the config is and its groups: the same for every run of a lint invocation (`per_invocation`).
LOCATED: Fact[ConfigSource] = Fact("config source")
GROUPS: Fact[dict[str, set[str]]] = Fact("config groups")


@functools.lru_cache(maxsize=1)
def hydra_available() -> bool:
    # Memoised: asked once per run, and find_spec walks sys.path each time; what is installed does
    # not change while rlpatch runs.
    return importlib.util.find_spec("hydra") is not None and importlib.util.find_spec("omegaconf") is not None


def lint_overrides(
    records: Sequence[OverrideRecord],
    *,
    verl_root: str | Path | None = None,
    python: str | None = None,
    verl_version: str | None = None,
    config_path: str | Path | None = None,
    config_name: str | None = None,
    base_dir: str | Path | None = None,
    entry: str = DEFAULT_ENTRY,
    cache: bool = True,
) -> SchemaResult:
    """Everything RL301-RL306 say about `records` of a launch of `entry`, or the one-line reason the
    family was skipped."""
    if not hydra_available():
        return SchemaResult(skipped="hydra-core is not installed: RL301-RL306 skipped")
    parsed = parse_overrides([r.text for r in records], cache=cache)
    try:
        searchpath = _script_searchpath(parsed)
        key = (verl_root, python, verl_version, config_path, config_name, base_dir, entry,
               None if searchpath is None else tuple(searchpath))  # every argument below: runs share only equal ones
        source = per_invocation(LOCATED, lambda: locate_config(
            verl_root=verl_root, python=python, verl_version=verl_version, config_path=config_path,
            config_name=config_name, base_dir=base_dir, entry=entry, searchpath=searchpath), key)
    except SchemaUnknown as why:  # the run composes a config this tree does not hold: no verdict, no error
        return SchemaResult(skipped=f"{why}: RL301-RL306 skipped")
    except SchemaUnavailable as why:
        # The whole family waits for a verl tree, RL301 included: a lint without one stays as fast
        # as if hydra-core were not installed (no Hydra import at all).
        return SchemaResult(skipped=f"{why}: RL301-RL306 skipped (give --verl-root, --verl-version or --python)")
    groups = per_invocation(GROUPS, lambda: config_groups(source), source)
    group_items = [(i, p) for i, p in enumerate(parsed) if p.ok and _is_group_override(p, groups)]
    problems = [problem for i, p in enumerate(parsed) for problem in grammar_problems(i, p)]
    problems += _group_option_problems(group_items, groups)
    chosen = [parsed[i].text for i, _ in group_items if not _has_problem(problems, i)]
    try:
        schema = load_schema(source, chosen, cache=cache)
    except SchemaUnavailable as why:
        culprit = _culprit(str(why), group_items)
        problems.append(SchemaProblem("RL302", f"the config does not compose: {why}", culprit, 0,
                                      len(parsed[culprit].text) if culprit is not None else 0))
        return SchemaResult(problems=problems, source=source)
    problems += Replay(schema, source.verl_version).run(parsed, skip={i for i, _ in group_items})
    return SchemaResult(problems=sorted(problems, key=_problem_order), source=source, schema=schema)


def _script_searchpath(parsed: Sequence[ParsedOverride]) -> list[str] | None:
    """The script's `hydra.searchpath=[...]` (the first, as Hydra takes it), which replaces the primary
    config's own; None when the script sets none. A value known only at run time makes the config unknown."""
    for item in parsed:
        if item.ok and item.key_or_group == SEARCHPATH_KEY and item.kind != "DEL":
            if isinstance(item.value, list) and all(isinstance(entry, str) for entry in item.value):
                return list(item.value)
            raise SchemaUnknown(f"hydra.searchpath is {item.text.partition('=')[2]!r} here, not a list of "
                                "paths: the config it adds is unknown")
    return None


def _is_group_override(parsed: ParsedOverride, groups: dict[str, set[str]]) -> bool:
    key = parsed.key_or_group
    return key in groups or key.startswith("hydra/")


def _group_option_problems(items: list[tuple[int, ParsedOverride]], groups: dict[str, set[str]]) -> list[SchemaProblem]:
    problems = []
    for index, parsed in items:
        options = groups.get(parsed.key_or_group)
        value = parsed.value
        if options is None or parsed.kind == "DEL" or not isinstance(value, str):
            continue  # hydra's own groups, deletions and multi-select lists: composition decides
        if strip_yaml(value) not in options:
            hint = _did_you_mean(value, options)
            problems.append(SchemaProblem(
                "RL302",
                f"config group '{parsed.key_or_group}' has no option '{value}'{hint}",
                index, parsed.value_start, len(parsed.text)))
    return problems


def _has_problem(problems: list[SchemaProblem], index: int) -> bool:
    return any(problem.index == index for problem in problems)


def _culprit(message: str, items: list[tuple[int, ParsedOverride]]) -> int | None:
    for index, parsed in items:
        if parsed.key_or_group in message:
            return index
    return items[0][0] if items else None


def _problem_order(problem: SchemaProblem) -> tuple[int, int, str]:
    return (-1 if problem.index is None else problem.index, problem.start, problem.code)


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    import difflib  # only when a name is wrong: a clean lint does not pay for it

    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
