"""The verl config schema that will run, and Hydra's verdict on each override (RL301-RL306).

verl reads its command line with Hydra: `key=v` must name an existing key, `+key=v` may only add
(or fill a null), `++key=v` always works, `~key` deletes, and `group=option` picks a config file.
Hydra tells the user about a mistake only after the job has been scheduled; this module tells them
while they edit the script, with Hydra's own grammar and the real composed config:

1. `locate_config` finds the config directory: `--verl-root`, the target interpreter's verl (found
   without importing it), or `--verl-version X` (a released wheel in rlpatch's cache).
2. `load_schema` composes it with hydra-core's compose API, honouring the config name and the group
   overrides of the script, and keeps the result on disk per (verl version, config dir, config
   name, group overrides, file fingerprint): composing costs up to a second, reading the cache
   a few milliseconds.
3. `check_overrides` parses every override with Hydra's own `OverridesParser` (results cached too,
   so a warm lint imports no Hydra at all) and replays Hydra's override semantics
   (`ConfigLoaderImpl._apply_overrides_to_config` with OmegaConf's struct mode) on the snapshot.

hydra/omegaconf are imported only on the cold paths (a cache miss), never at module import.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import hashlib
import importlib.util
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlpatch.shell.defaults import renamed_key
from rlpatch.upstream.envprobe import find_package_dir, probe, probe_root
from rlpatch.upstream.versions import Version

_FORMAT = 1  # bump when the cached snapshot layout changes
MISSING = "???"  # OmegaConf's mandatory-value marker, kept as is in the snapshot
DEFAULT_CONFIG_NAME = "ppo_trainer"  # verl.trainer.main_ppo's @hydra.main(config_name=...)
CONFIG_SUBDIR = ("verl", "trainer", "config")

# Keys that disappeared from verl's config; RL302 says so instead of only "unknown key".
REMOVED_KEYS: tuple[tuple[str, str], ...] = (
    (r"(^|\.)megatron\.grad_offload$", "0.9.1"),
    (r"^trainer\.use_legacy_worker_impl$", "0.8.0"),
)
# The inference dump keys: a plain override of them is RL103 (lint family RL1xx), not RL302 as well.
DUMP_KEY_SUFFIXES: tuple[str, ...] = (
    "engine_kwargs.vllm.additional_config.dump_config_path",
    "engine_kwargs.vllm.additional_config.dump_config",
    "engine_kwargs.sglang.msprobe_dump_config",
)
ROLLOUT_NAME_KEY = "actor_rollout_ref.rollout.name"
ROLLOUT_MODE_KEY = "actor_rollout_ref.rollout.mode"
ACTOR_STRATEGY_KEY = "actor_rollout_ref.actor.strategy"


# --------------------------------------------------------------------------------------------- API


@dataclass(frozen=True)
class OverrideRecord:
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
    def from_text(cls, text: str, position: Any = None) -> OverrideRecord:
        prefix = "++" if text.startswith("++") else text[:1] if text[:1] in ("+", "~") else ""
        body = text[len(prefix) :]
        key, sep, value = body.partition("=")
        return cls(text, prefix, key, value if sep else None, position)


@dataclass(frozen=True)
class SchemaProblem:
    """A finding: `index` is the override it is about (None: the run as a whole, e.g. RL305);
    `start`/`end` are 0-based character offsets inside that override's text."""

    code: str
    message: str
    index: int | None = None
    start: int = 0
    end: int = 0


@dataclass(frozen=True)
class ConfigSource:
    """The config directory that will be composed, and where it came from."""

    config_dir: Path
    config_name: str
    verl_version: Version | None
    origin: str
    search_dirs: tuple[Path, ...] = ()  # more directories on Hydra's search path (--config-path runs)


@dataclass
class SchemaResult:
    problems: list[SchemaProblem] = field(default_factory=list)
    skipped: str | None = None  # one line saying why the family did not run
    source: ConfigSource | None = None
    schema: Schema | None = None


class SchemaUnavailable(Exception):
    """The RL3xx family cannot run: no hydra-core, no verl tree, or the config does not compose."""


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
    cache: bool = True,
) -> SchemaResult:
    """Everything RL301-RL306 say about `records`, or the one-line reason the family was skipped."""
    if not hydra_available():
        return SchemaResult(skipped="hydra-core is not installed: RL301-RL306 skipped")
    try:
        source = locate_config(verl_root=verl_root, python=python, verl_version=verl_version,
                               config_path=config_path, config_name=config_name, base_dir=base_dir)
    except SchemaUnavailable as why:
        # The whole family waits for a verl tree, RL301 included: a lint without one stays as fast
        # as if hydra-core were not installed (no Hydra import at all).
        return SchemaResult(skipped=f"{why}: RL301-RL306 skipped (give --verl-root, --verl-version or --python)")
    parsed = parse_overrides([r.text for r in records], cache=cache)
    groups = config_groups(source)
    group_items = [(i, p) for i, p in enumerate(parsed) if p.ok and _is_group_override(p, groups)]
    problems = [problem for i, p in enumerate(parsed) for problem in _grammar_problem(i, p)]
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


# --------------------------------------------------------------------------------- locating verl


def locate_config(
    *,
    verl_root: str | Path | None = None,
    python: str | None = None,
    verl_version: str | None = None,
    config_path: str | Path | None = None,
    config_name: str | None = None,
    base_dir: str | Path | None = None,
) -> ConfigSource:
    """The config directory to compose: an explicit root wins, then a released version, then the
    verl installed for `python` (probed without importing verl)."""
    name = _strip_yaml(config_name) if config_name else DEFAULT_CONFIG_NAME
    if verl_root is not None:
        installed = probe_root("verl", verl_root)
        origin = f"--verl-root {verl_root}"
    elif verl_version is not None:
        from rlpatch.upstream.wheelcache import unpacked_tree

        installed = probe_root("verl", unpacked_tree("verl", verl_version))
        origin = f"verl {verl_version} (released wheel)"
    else:
        installed = probe(python, ("verl",))["verl"]
        origin = f"the verl of {python or 'this interpreter'}"
    if installed.location is None or not Path(installed.location).is_dir():
        raise SchemaUnavailable(f"no verl tree found ({origin})")
    verl_config = Path(installed.location) / Path(*CONFIG_SUBDIR[1:])
    if not verl_config.is_dir():
        raise SchemaUnavailable(f"{verl_config} does not exist")
    if config_path is None:
        return ConfigSource(verl_config.resolve(), name, installed.version, origin)
    primary = _config_path_dir(Path(config_path).expanduser(), verl_config.parent, base_dir)
    if not primary.is_dir():
        raise SchemaUnavailable(f"--config-path {config_path} is not a directory")
    return ConfigSource(primary.resolve(), name, installed.version, origin, (verl_config.resolve(),))


def _config_path_dir(path: Path, trainer_dir: Path, base_dir: str | Path | None) -> Path:
    """Hydra resolves a relative --config-path against the directory of the @hydra.main file
    (verl/trainer for main_ppo); scripts more often mean their own directory: try both."""
    if path.is_absolute():
        return path
    beside_main = trainer_dir / path
    if beside_main.is_dir():
        return beside_main
    return Path(base_dir or ".") / path


def _strip_yaml(name: str) -> str:
    return name.removesuffix(".yaml")


def find_verl_config_dir(root: str | Path) -> Path | None:
    """`<root>/verl/trainer/config` for a checkout, unpacked wheel or site-packages (or the package)."""
    package = find_package_dir("verl", Path(root))
    return package / "trainer" / "config" if package is not None else None


# -------------------------------------------------------------------------------- config groups


def config_groups(source: ConfigSource) -> dict[str, set[str]]:
    """Config group -> its options (yaml file stems), over every directory of the search path."""
    groups: dict[str, set[str]] = {}
    for directory in (source.config_dir, *source.search_dirs):
        for relative in _yaml_files(directory):
            group, _, stem = relative.rpartition("/")
            if group:
                groups.setdefault(group, set()).add(stem[: -len(".yaml")])
    return groups


def _yaml_files(directory: Path) -> Iterator[str]:
    """Relative '/'-separated paths of the yaml files under `directory` (sorted, deterministic)."""
    stack = [(directory, "")]
    found: list[str] = []
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=True) and not entry.name.startswith((".", "__")):
                stack.append((Path(entry.path), f"{prefix}{entry.name}/"))
            elif entry.name.endswith(".yaml"):
                found.append(prefix + entry.name)
    yield from sorted(found)


def _fingerprint(source: ConfigSource) -> str:
    """Changes when any yaml file of the search path changes (a `--verl-root` under development)."""
    digest = hashlib.sha256()
    for directory in (source.config_dir, *source.search_dirs):
        for relative in _yaml_files(directory):
            stat = (directory / relative).stat()
            digest.update(f"{directory}/{relative}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


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
        if _strip_yaml(value) not in options:
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


# ---------------------------------------------------------------------------------- the schema


@dataclass(frozen=True)
class Schema:
    """The composed config as plain data: dicts, lists, scalars, None (null) and MISSING ('???').
    Interpolations are stored resolved (Hydra's `+` check sees the resolved value)."""

    tree: dict[str, Any]
    config_name: str
    verl_version: Version | None
    group_overrides: tuple[str, ...]

    def select(self, key: str) -> Any:
        return select(self.tree, key)

    @property
    def is_megatron(self) -> bool:
        return self.select(ACTOR_STRATEGY_KEY) == "megatron" or self.tree.get("model_engine") == "megatron"


def load_schema(source: ConfigSource, group_overrides: Sequence[str] = (), cache: bool = True) -> Schema:
    """The composed config of `source` with `group_overrides`, from the disk cache when it is warm."""
    key = {
        "format": _FORMAT,
        "hydra": _hydra_version(),
        "verl": str(source.verl_version) if source.verl_version else None,
        "config_dir": str(source.config_dir),
        "search_dirs": [str(d) for d in source.search_dirs],
        "config_name": source.config_name,
        "group_overrides": list(group_overrides),
        "fingerprint": _fingerprint(source),
    }
    path = _cache_root() / "schema" / (hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest() + ".json")
    tree = _read_json(path) if cache else None
    if tree is None:
        tree = compose_snapshot(source, group_overrides)
        if cache:
            _write_json_atomic(path, tree)
    return Schema(tree, source.config_name, source.verl_version, tuple(group_overrides))


def compose_snapshot(source: ConfigSource, group_overrides: Sequence[str]) -> dict[str, Any]:
    """Compose with hydra-core (the cold path: imports hydra and omegaconf) and snapshot the result."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(group_overrides)
    if source.search_dirs:
        overrides.append("hydra.searchpath=[" + ",".join(f"'file://{d}'" for d in source.search_dirs) + "]")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(source.config_dir), version_base=None, job_name="rlpatch"):
            cfg = compose(config_name=source.config_name, overrides=overrides, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException, ValueError) as err:
        raise SchemaUnavailable(_first_line(err)) from None
    finally:
        GlobalHydra.instance().clear()
    return _snapshot(cfg)


def _snapshot(node: Any) -> Any:
    from omegaconf import DictConfig, ListConfig

    if isinstance(node, DictConfig):
        return {str(key): _snapshot_child(node, key) for key in node}
    if isinstance(node, ListConfig):
        return [_snapshot_child(node, index) for index in range(len(node))]
    return _plain(node)


def _snapshot_child(parent: Any, key: Any) -> Any:
    from omegaconf import Container

    raw = parent._get_node(key)
    if raw._is_missing():
        return MISSING
    if raw._is_interpolation():
        try:
            value = parent[key]
        except Exception:  # noqa: BLE001 - an interpolation Hydra cannot resolve stays a plain string
            return str(raw._value())
        return _snapshot(value) if isinstance(value, Container) else _plain(value)
    return _snapshot(raw) if isinstance(raw, Container) else _plain(raw._value())


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)  # enums, paths


def _hydra_version() -> str | None:
    """hydra-core's version read from its `__init__.py` (cheaper than importlib.metadata)."""
    spec = importlib.util.find_spec("hydra")
    if spec is None or not spec.origin:
        return None
    try:
        text = Path(spec.origin).read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
    return match.group(1) if match else None


def _cache_root() -> Path:
    from rlpatch.upstream.wheelcache import cache_dir

    return cache_dir()


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _write_json_atomic(path: Path, data: Any) -> None:
    """Write through a temporary file and rename: a concurrent reader never sees half a cache file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, separators=(",", ":"))
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only cache only costs speed


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


# ------------------------------------------------------------------------------ parsing overrides


@dataclass(frozen=True)
class ParsedOverride:
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


def parse_overrides(texts: Sequence[str], cache: bool = True) -> list[ParsedOverride]:
    """Hydra's parse of each text; results are kept on disk so that a warm lint imports no Hydra."""
    store_path = _cache_root() / "schema" / f"overrides-{_hydra_version()}-{_FORMAT}.json"
    store: dict[str, Any] = (_read_json(store_path) or {}) if cache else {}
    missing = [text for text in dict.fromkeys(texts) if text not in store]
    if missing:
        parser = _hydra_parser()
        for text in missing:
            store[text] = _parse_one(parser, text)
        if cache:
            if len(store) > 50_000:  # keep the file small: forget everything but this run
                store = {text: store[text] for text in texts}
            _write_json_atomic(store_path, store)
    return [ParsedOverride(text=text, **store[text]) for text in texts]


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

    class FirstError(ErrorListener):  # type: ignore[misc]
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


def _grammar_problem(index: int, parsed: ParsedOverride) -> list[SchemaProblem]:
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


# ------------------------------------------------------------------------ Hydra's override replay

_ABSENT = object()


def select(tree: Any, key: str) -> Any:
    """The value at dotted `key`, or _ABSENT. List elements are addressed by index, as in OmegaConf."""
    node = tree
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _ABSENT
    return node


def _is_null(value: Any) -> bool:
    """What OmegaConf.select(..., throw_on_missing=False) returns None for: absent, null, '???'."""
    return value is _ABSENT or value is None or value == MISSING


class Replay:
    """Applies overrides to a snapshot in order, with Hydra's rules, and reports what Hydra rejects.

    Unlike Hydra it does not stop at the first error: a rejected override changes nothing and the
    rest are still checked."""

    def __init__(self, schema: Schema, version: Version | None) -> None:
        self.schema = schema
        self.tree = json.loads(json.dumps(schema.tree))  # private copy: overrides mutate it
        self.version = version
        self.megatron = schema.is_megatron
        self.mode_setter: int | None = None

    def run(self, parsed: Sequence[ParsedOverride], skip: Iterable[int] = ()) -> list[SchemaProblem]:
        skipped = set(skip)
        problems: list[SchemaProblem] = []
        for index, item in enumerate(parsed):
            if index in skipped or not item.ok or item.sweep:
                continue
            problems += self.apply(index, item)
        problems += self.final_checks(parsed)
        return problems

    def apply(self, index: int, item: ParsedOverride) -> list[SchemaProblem]:
        if item.package is not None:
            return [self._problem("RL302", index, item,
                                  f"'{item.text}' looks like a config group override, but there is no config "
                                  f"group '{item.key_or_group}'")]
        handler = {"DEL": self._delete, "ADD": self._add, "FORCE_ADD": self._force_add}.get(item.kind, self._change)
        return handler(index, item)

    def _delete(self, index: int, item: ParsedOverride) -> list[SchemaProblem]:
        current = select(self.tree, item.key_or_group)
        if _is_null(current):
            return [self._missing_key(index, item, "cannot delete it")]
        if item.value is not None and item.value != current:
            return [self._problem("RL302", index, item,
                                  f"cannot delete '{item.key_or_group}': its value is {current!r}, not {item.value!r}")]
        parent_key, _, last = item.key_or_group.rpartition(".")
        parent = select(self.tree, parent_key) if parent_key else self.tree
        if isinstance(parent, dict):
            parent.pop(last, None)
        return []

    def _add(self, index: int, item: ParsedOverride) -> list[SchemaProblem]:
        current = select(self.tree, item.key_or_group)
        if _is_null(current) or isinstance(item.value, (dict, list)):
            _assign(self.tree, item.key_or_group, item.value)
            return []
        return [self._problem(
            "RL303", index, item,
            f"'+{item.key_or_group}' adds a key, but it already has the value {_show(current)}: "
            f"drop the '+' to override it, or write '++' to add or override")]

    def _force_add(self, index: int, item: ParsedOverride) -> list[SchemaProblem]:
        _assign(self.tree, item.key_or_group, item.value)
        return []

    def _change(self, index: int, item: ParsedOverride) -> list[SchemaProblem]:
        key = item.key_or_group
        current = select(self.tree, key)
        if current is _ABSENT or not _parents_are_containers(self.tree, key):
            if key.endswith(DUMP_KEY_SUFFIXES):
                return []  # RL103 reports the inference dump key without '+'
            return [self._missing_key(index, item, f"use '+{item.text}' to add it")]
        if isinstance(item.value, dict) and isinstance(current, dict):
            unknown = _first_unknown_key(current, item.value)
            if unknown is not None:
                return [self._problem("RL302", index, item,
                                      f"'{key}' has no key '{unknown}' (merging a dict cannot add keys): use '+'")]
        _assign(self.tree, key, item.value)
        if key == ROLLOUT_MODE_KEY:
            self.mode_setter = index
        return []

    def _missing_key(self, index: int, item: ParsedOverride, advice: str) -> SchemaProblem:
        key = item.key_or_group
        if _is_megatron_key(key) and not self.megatron:
            switch = "model_engine=megatron" if self._has_model_engine_group else "--config-name ppo_megatron_trainer"
            return self._problem("RL304", index, item,
                                 f"'{key}' is a Megatron key but the run composes the FSDP config: add {switch}")
        removed = _removed_in(key)
        if removed is not None and (self.version is None or self.version >= removed):
            return self._problem("RL302", index, item,
                                 f"'{key}' was removed in verl {removed} (this tree is verl {self.version or 'of unknown version'}): "
                                 "delete the override")
        parent_key, _, last = key.rpartition(".")
        parent = select(self.tree, parent_key) if parent_key else self.tree
        if isinstance(parent, dict) and not parent and parent_key.endswith(("engine_kwargs.vllm", "engine_kwargs.sglang",
                                                                           "engine_kwargs.trtllm")):
            return self._problem("RL302", index, item,
                                 f"'{parent_key}' is an empty dict in verl's config, so '{last}' does not exist: "
                                 f"write '+{item.text}' or '++{item.text}'")
        moved = renamed_key(key, self.version)
        if moved is not None and select(self.tree, moved[0]) is not _ABSENT:
            spelling, rename = moved
            return self._problem("RL302", index, item,
                                 f"the verl config{self._version_note()} has no key '{key}': verl {rename.since} moved "
                                 f"'{rename.old}' to '{rename.new}', so write '{spelling}' here")
        hint = _did_you_mean_key(self.tree, key)
        return self._problem("RL302", index, item,
                             f"the verl config{self._version_note()} has no key '{key}'{hint}; {advice}")

    @property
    def _has_model_engine_group(self) -> bool:
        return "model_engine" in self.tree

    def _version_note(self) -> str:
        return f" ({self.version})" if self.version else ""

    def final_checks(self, parsed: Sequence[ParsedOverride]) -> list[SchemaProblem]:
        problems = []
        name = select(self.tree, ROLLOUT_NAME_KEY)
        if name == MISSING and (self.version is None or self.version >= "0.6.0"):
            problems.append(SchemaProblem(
                "RL305", f"'{ROLLOUT_NAME_KEY}' is mandatory (vllm, sglang, hf or trtllm); the run "
                         "would fail only after Ray starts"))
        mode = select(self.tree, ROLLOUT_MODE_KEY)
        if mode == "sync" and self.mode_setter is not None and (self.version is None or self.version >= "0.7.0"):
            item = parsed[self.mode_setter]
            problems.append(SchemaProblem(
                "RL306", f"'{ROLLOUT_MODE_KEY}=sync' is rejected since verl 0.7 (only async rollout remains)",
                self.mode_setter, item.value_start, len(item.text)))
        return problems

    @staticmethod
    def _problem(code: str, index: int, item: ParsedOverride, message: str) -> SchemaProblem:
        return SchemaProblem(code, message, index, 0, item.key_end)


def _parents_are_containers(tree: Any, key: str) -> bool:
    """Struct mode: every intermediate node must already be a dict (or a list indexed by number)."""
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        node = select(node, part)
        if not isinstance(node, (dict, list)):
            return False
    return True


def _first_unknown_key(target: dict[str, Any], value: dict[str, Any], prefix: str = "") -> str | None:
    for key, item in value.items():
        if key not in target:
            return prefix + str(key)
        if isinstance(item, dict) and isinstance(target[key], dict):
            deeper = _first_unknown_key(target[key], item, f"{prefix}{key}.")
            if deeper is not None:
                return deeper
    return None


def _assign(tree: dict[str, Any], key: str, value: Any) -> None:
    """OmegaConf.update(merge=True, force_add=True) on plain data: non-containers on the way become dicts."""
    parts = key.split(".")
    node: Any = tree
    for part in parts[:-1]:
        child = select(node, part)
        if not isinstance(child, (dict, list)):
            child = {}
            _set(node, part, child)
        node = child
    last = parts[-1]
    current = select(node, last)
    if isinstance(value, dict) and isinstance(current, dict):
        _merge(current, value)
    else:
        _set(node, last, json.loads(json.dumps(value)))


def _set(node: Any, part: str, value: Any) -> None:
    if isinstance(node, list):
        node[int(part)] = value
    else:
        node[part] = value


def _merge(target: dict[str, Any], value: dict[str, Any]) -> None:
    for key, item in value.items():
        if isinstance(item, dict) and isinstance(target.get(key), dict):
            _merge(target[key], item)
        else:
            target[key] = json.loads(json.dumps(item))


def _is_megatron_key(key: str) -> bool:
    return "megatron" in key.split(".")[:-1] or key.split(".")[-1] == "megatron"


def _removed_in(key: str) -> Version | None:
    for pattern, version in REMOVED_KEYS:
        if re.search(pattern, key):
            return Version.parse(version)
    return None


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a dict"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _did_you_mean_key(tree: dict[str, Any], key: str) -> str:
    """The nearest existing key: first among the siblings of the deepest existing parent, then any
    key path of the config (catches a misplaced section)."""
    parts = key.split(".")
    depth = 0
    node: Any = tree
    while depth < len(parts) - 1 and isinstance(node, dict) and isinstance(node.get(parts[depth]), dict):
        node = node[parts[depth]]
        depth += 1
    if isinstance(node, dict):
        close = difflib.get_close_matches(parts[depth], sorted(node), n=1, cutoff=0.75)
        if close:
            return f" (did you mean '{'.'.join(parts[:depth] + [close[0]])}'?)"
    paths = [path for path in _leaf_paths(tree) if not path.startswith("hydra.")]
    close = difflib.get_close_matches(key, paths, n=1, cutoff=0.85)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _leaf_paths(tree: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            path = f"{prefix}{key}"
            yield path
            yield from _leaf_paths(value, path + ".")
