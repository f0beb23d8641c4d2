"""The composed verl config, and Hydra's override semantics replayed on it (RL302-RL306).

`load_schema` composes the config directory found by `schema_discovery` with hydra-core's compose
API, honouring the config name and the group overrides of the script, and keeps a plain-data
snapshot (`Schema`) in `schema_cache`. `Replay` then applies the script's overrides to that snapshot
the way Hydra does (`ConfigLoaderImpl._apply_overrides_to_config` with OmegaConf's struct mode):
an unknown key or a failed merge is RL302, a `+` on an existing value RL303, a Megatron key in an
FSDP run RL304, a mandatory rollout name left unset RL305, a sync rollout mode since verl 0.7
RL306. Unlike Hydra it does not stop at the first error. hydra/omegaconf are imported only when a
snapshot is composed (a cache miss), never at module import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from rlpatch.lint.rule import Fact, per_invocation
from rlpatch.lint.schema_cache import read_json, schema_path, write_json_atomic
from rlpatch.lint.schema_discovery import ConfigSource, SchemaUnavailable
from rlpatch.lint.schema_grammar import ParsedOverride, SchemaProblem
from rlpatch.shell.api import renamed_key
from rlpatch.upstream.api import Version

if TYPE_CHECKING:
    from pathlib import Path

MISSING = "???"  # OmegaConf's mandatory-value marker, kept as is in the snapshot

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
SNAPSHOT: Fact[dict[str, Any]] = Fact("composed config snapshot")  # per lint invocation


# ---------------------------------------------------------------------------------- the schema


class Schema(NamedTuple):
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
    """The composed config of `source` with `group_overrides`, from the disk cache when it is warm
    (read once per lint invocation: every run composing the same config shares it; `Replay` copies it)."""
    if cache:
        chosen = tuple(group_overrides)
        tree = per_invocation(SNAPSHOT, lambda: _cached_snapshot(schema_path(source, chosen), source, chosen),
                              (source, chosen))
    else:
        tree = compose_snapshot(source, group_overrides)
    return Schema(tree, source.config_name, source.verl_version, tuple(group_overrides))


def _cached_snapshot(path: Path, source: ConfigSource, group_overrides: Sequence[str]) -> dict[str, Any]:
    tree = read_json(path)
    if tree is None:
        tree = compose_snapshot(source, group_overrides)
        write_json_atomic(path, tree)
    return tree


def compose_snapshot(source: ConfigSource, group_overrides: Sequence[str]) -> dict[str, Any]:
    """Compose with hydra-core (the cold path: imports hydra and omegaconf) and snapshot the result."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    # The search path is always given, resolved to folders: the primary config's own `pkg://`/relative
    # `file://` entries would be looked up in rlpatch's environment and working folder, not the run's.
    overrides = [*group_overrides, "hydra.searchpath=[" + ",".join(f"'file://{d}'" for d in source.search_dirs) + "]"]
    if not source.config_dir.is_dir():  # Hydra's "Primary config directory not found", with the folder named
        raise SchemaUnavailable(f"the primary config directory {source.config_dir} does not exist")
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

def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


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


def contains(tree: Any, key: str) -> bool:
    """Whether dotted `key` exists in the composed snapshot (a plain override of it composes)."""
    return select(tree, key) is not _ABSENT


def _is_null(value: Any) -> bool:
    """What OmegaConf.select(..., throw_on_missing=False) returns None for: absent, null, '???'."""
    return value is _ABSENT or value is None or value == MISSING


class Replay:
    """Applies overrides to a snapshot in order, with Hydra's rules, and reports what Hydra rejects.

    Unlike Hydra it does not stop at the first error: a rejected override changes nothing and the
    rest are still checked."""

    def __init__(self, schema: Schema, version: Version | None) -> None:
        self.schema = schema
        # Copy on write: the snapshot is shared by every run of a lint invocation, and copying it whole
        # for each run cost more than replaying the run's overrides. Overrides change this replay's
        # tree; `_own` first copies the snapshot's nodes on the way to what they change.
        self.tree = dict(schema.tree)
        self._owned = {id(self.tree)}
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
        self._own(item.key_or_group)
        parent = select(self.tree, parent_key) if parent_key else self.tree
        if isinstance(parent, dict):
            parent.pop(last, None)
        return []

    def _add(self, index: int, item: ParsedOverride) -> list[SchemaProblem]:
        current = select(self.tree, item.key_or_group)
        if _is_null(current) or isinstance(item.value, (dict, list)):
            self._own(item.key_or_group, inside=isinstance(item.value, dict))
            _assign(self.tree, item.key_or_group, item.value)
            return []
        return [self._problem(
            "RL303", index, item,
            f"'+{item.key_or_group}' adds a key, but it already has the value {_show(current)}: "
            f"drop the '+' to override it, or write '++' to add or override")]

    def _force_add(self, index: int, item: ParsedOverride) -> list[SchemaProblem]:
        self._own(item.key_or_group, inside=isinstance(item.value, dict))
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
        self._own(key, inside=isinstance(item.value, dict))
        _assign(self.tree, key, item.value)
        if key == ROLLOUT_MODE_KEY:
            self.mode_setter = index
        return []

    def _own(self, key: str, *, inside: bool = False) -> None:
        """Make this replay's own the containers from the root to `key`'s parent (copies of the shared
        snapshot's) and, `inside` (a dict merged into it), the value at `key`, whole."""
        node = self.tree
        parts = key.split(".")
        last = len(parts) - 1
        for depth, part in enumerate(parts):
            child = select(node, part)
            if not isinstance(child, (dict, list)) or (depth == last and not inside):
                return  # what `_assign` creates from here on is new: its own
            if id(child) not in self._owned:
                if depth < last:
                    child = dict(child) if isinstance(child, dict) else list(child)
                else:
                    child = plain_copy(child)
                _set(node, part, child)
                self._owned.add(id(child))
            node = child

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
        if moved is not None and contains(self.tree, moved[0]):
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
        _set(node, last, plain_copy(value))


def plain_copy(value: Any) -> Any:
    """`json.loads(json.dumps(value))`, without the JSON text where the data is already JSON's own:
    dicts with str keys, lists and scalars are copied as they are (a snapshot three times faster, a
    scalar is itself); anything else still goes through JSON."""
    kind = type(value)
    if kind is dict and all(type(key) is str for key in value):
        return {key: plain_copy(item) for key, item in value.items()}
    if kind is list:
        return [plain_copy(item) for item in value]
    if value is None or kind in (str, int, float, bool):
        return value
    return json.loads(json.dumps(value))


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
            target[key] = plain_copy(item)


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


def _did_you_mean_key(tree: dict[str, Any], key: str) -> str:
    """The nearest existing key: first among the siblings of the deepest existing parent, then any
    key path of the config (catches a misplaced section)."""
    import difflib  # only when a name is wrong: a clean lint does not pay for it

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
