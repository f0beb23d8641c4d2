"""What `gen` will add, as data: overrides, environment switches, msprobe configs, next steps.

`Facts` answers questions about one verl launch of the original script with the linter's run
model (`rlpatch.shell.api.Run`): the effective value of a key (last override wins, then the
user's config file, then verl's default), with the values the script cannot know statically
(`$(nproc)`) taken from `--env` by the name of the variable that holds them. A value that stays
unknown raises `NeedValue`, which the command line turns into "give --env NAME=...".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from rlpatch.shell.api import Piece, Run, Setting, SourceFile, Span, parse_file, unquote
from rlpatch.upstream.api import Version


class NeedValue(Exception):
    """A value gen needs is not known statically; `names` are the variables that would give it."""

    def __init__(self, key: str, desc: str, names: list[str], span: Span) -> None:
        super().__init__(key)
        self.key, self.desc, self.names, self.span = key, desc, names, span


@dataclass
class Planned:
    """One override gen appends: what Hydra receives (`value`) and the shell word that gives it."""

    key: str
    value: str
    why: str
    prefix: str = ""  # "" for schema keys, "++" for free-form dicts (decided against the schema)
    free_form: bool = False
    shell_value: str | None = None  # the value as written in the script when it is not a literal
    replaces: str | None = None  # the user's effective value this neutralises

    @property
    def text(self) -> str:
        return f"{self.prefix}{self.key}={self.value}"


@dataclass
class EnvSwitch:
    name: str
    value: str
    why: str
    shell_value: str | None = None  # e.g. "${RLPATCH_GEN_DIR}/x.json"


@dataclass
class ConfigFile:
    """An msprobe config.json gen writes beside the new script."""

    name: str  # file name (no folder)
    role: str  # "train", "infer", "infer-prefill", ...
    content: dict


@dataclass(frozen=True)
class ApplyStep:
    """The `rlpatch apply` a mode needs: its mode and the trees it patches (verl, vllm_ascend, sglang)."""

    mode: str
    packages: tuple[str, ...]


@dataclass
class Plan:
    overrides: list[Planned] = field(default_factory=list)
    env: list[EnvSwitch] = field(default_factory=list)
    configs: list[ConfigFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    apply: ApplyStep | None = None  # the `rlpatch apply` the mode needs, if any
    assumptions: list[str] = field(default_factory=list)  # said in the new script's header
    dumps: list[str] = field(default_factory=list)  # where the dumps land
    dump_dirs: dict[str, str] = field(default_factory=dict)  # role (train, infer, ...) -> the dump folder

    def add(self, key: str, value: str, why: str, **more) -> None:
        self.overrides = [o for o in self.overrides if o.key != key]
        self.overrides.append(Planned(key, value, why, **more))

    def export(self, name: str, value: str, why: str, shell_value: str | None = None) -> None:
        self.env = [e for e in self.env if e.name != name]
        self.env.append(EnvSwitch(name, value, why, shell_value))


@dataclass
class Targets:
    """The versions gen writes for (each assumed when not known, and said so)."""

    verl: Version
    sglang: Version | None
    vllm_ascend: Version | None
    verl_assumed: bool = False


class Facts:
    """Effective settings of one launch, with `--env` standing in for values unknown statically."""

    def __init__(self, run: Run, env: dict[str, str]) -> None:
        self.run = run
        self.env = env
        # key -> (value, variable, what the script assigns it): values gen took from --env for a variable
        # the script itself computes (`NGPUS=$(nproc)`), which the new script's `export` cannot reach
        self.recomputed: dict[str, tuple[str, str, str]] = {}

    # ---- values ---------------------------------------------------------------------------------
    def setting(self, key: str) -> Setting:
        return self.run.setting(key)

    def is_set(self, key: str) -> bool:
        return self.setting(key).is_set

    def value(self, key: str) -> str | None:
        """The effective value (quotes removed); None when unknown even with --env."""
        setting = self.setting(key)
        if setting.known:
            return setting.value
        return self._from_env(setting)

    def need(self, key: str) -> str:
        value = self.value(key)
        if value is None:
            setting = self.setting(key)
            raise NeedValue(key, setting.desc or "?", self._names(setting), setting.span)
        return value

    def need_int(self, key: str) -> int:
        text = self.need(key).strip()
        try:
            return int(text)
        except ValueError:
            setting = self.setting(key)
            raise NeedValue(key, text, self._names(setting), setting.span) from None

    def int_or(self, key: str, default: int) -> int:
        value = self.value(key)
        try:
            return int(value) if value not in (None, "null", "") else default
        except ValueError:
            return default

    def flag(self, key: str) -> bool:
        return (self.value(key) or "").strip().lower() == "true"

    def user_value(self, key: str) -> str | None:
        """The user's own value of `key` (an override or the config file), None when not set."""
        setting = self.setting(key)
        if not setting.is_set:
            return None
        return setting.text if setting.known else setting.override.text if setting.override else None

    def user_keys(self, predicate) -> list[str]:
        """Keys the user overrides (not deleted) that match `predicate`, in order, once each."""
        keys = [o.key for o in self.run.overrides if o.prefix != "~" and predicate(o.key)]
        return list(dict.fromkeys(keys))

    # ---- unknown values and the variables that hold them ------------------------------------------
    def _unknown_pieces(self, setting: Setting) -> list[Piece]:
        if setting.override is None:
            return []
        return [piece for piece in setting.override.arg.word if piece.text is None]

    def _from_env(self, setting: Setting) -> str | None:
        """Rebuild the override's value with each unknown piece replaced by its variable's --env value."""
        override = setting.override
        if override is None or not self.env:
            return None
        parts = []
        computed: list[tuple[str, str]] = []
        for piece in override.arg.word:
            if piece.text is not None:
                parts.append(piece.text)
                continue
            names = [n for n in variable_names(piece) if n in self.env]
            if not names:
                return None
            parts.append(self.env[names[0]])
            if piece.desc.lstrip().startswith(("$(", "`")):  # a command substitution the script runs
                computed.append((names[0], piece.desc.strip()))
        text = "".join(parts)
        head = f"{override.prefix}{override.key}="
        if not text.startswith(head):
            return None
        value = unquote(text[len(head):])
        if computed:
            self.recomputed[override.key] = (value, *computed[0])
        return value

    def _names(self, setting: Setting) -> list[str]:
        names: list[str] = []
        for piece in self._unknown_pieces(setting):
            names.extend(n for n in variable_names(piece) if n not in names)
        return names


# ---- the variable behind an unknown piece, from the syntax tree (never from the text) -----------------
_TREES: dict[tuple, tuple[SourceFile, object] | None] = {}


def _tree(path: str):
    stat = os.stat(path)
    key = (path, stat.st_mtime_ns, stat.st_size)  # a file rewritten in the same process is read again
    if key not in _TREES:
        try:
            source = SourceFile.read(path)
            _TREES[key] = (source, parse_file(source))
        except Exception:  # noqa: BLE001 - a file we cannot read names no variable
            _TREES[key] = None
    return _TREES[key]


def _offset(source: SourceFile, line: int, column: int) -> int:
    lines = source.text.split("\n")
    return sum(len(text) + 1 for text in lines[:line - 1]) + column - 1


def _node_at(path: str, span: Span):
    loaded = _tree(path) if path and not path.startswith("<") and os.path.isfile(path) else None
    if loaded is None:
        return None, None
    source, parsed = loaded
    start = len(source.text[:_offset(source, span.line, span.column)].encode("utf-8"))
    end = len(source.text[:_offset(source, span.end_line, span.end_column)].encode("utf-8"))
    return parsed.tree.root_node.descendant_for_byte_range(start, max(start, end - 1)), source


def _assigned_name(node) -> str | None:
    """The variable a `NAME=value` assignment (scalar, not an array of arguments) gives a value to."""
    while node is not None:
        if node.type == "variable_assignment":
            value = node.child_by_field_name("value")
            if value is not None and value.type == "array":
                return None
            name = node.child_by_field_name("name")
            return name.text.decode() if name is not None else None
        node = node.parent
    return None


def _expanded_name(node) -> str | None:
    """The variable of the `$NAME` / `${NAME...}` expansion at or around `node`."""
    while node is not None and node.type not in ("simple_expansion", "expansion"):
        node = node.parent
    if node is None:
        return None
    for child in node.named_children:
        if child.type in ("variable_name", "special_variable_name"):
            return child.text.decode()
    return None


def variable_names(piece: Piece) -> list[str]:
    """Variables that decide an unknown piece, innermost first: the one assigned `$(nproc)` (the
    piece's own position), then the ones expanded where it was used."""
    names: list[str] = []
    node, _ = _node_at(piece.span.file, piece.span)
    for name in (_assigned_name(node), _expanded_name(node)):
        if name and name not in names:
            names.append(name)
    for use in (*piece.chain, piece.via):
        if use is None:
            continue
        found, _ = _node_at(use.file, use)
        name = _expanded_name(found)
        if name and name not in names:
            names.append(name)
    return names


# ---- the variables that choose a branch (`--env DEVICE=npu`, not a variable derived in the branch) ------------
def _assigned_in(node) -> set[str]:
    names, stack = set(), [node]
    while stack:
        current = stack.pop()
        if current.type == "variable_assignment":
            name = current.child_by_field_name("name")
            if name is not None:
                names.add(name.text.decode())
        stack.extend(current.named_children)
    return names


def _expanded_in(nodes) -> list[str]:
    names: list[str] = []
    stack = list(reversed(nodes))
    while stack:
        current = stack.pop()
        if current.type in ("simple_expansion", "expansion"):
            name = _expanded_name(current.named_children[0] if current.named_children else current)
            if name and name not in names:
                names.append(name)
        stack.extend(reversed(current.named_children))
    return names


def _condition_nodes(node) -> list:
    """The nodes whose value decides which branch of an `if`/`elif` or `case` runs."""
    if node.type == "case_statement":
        value = node.child_by_field_name("value")
        return [value] if value is not None else []
    conditions = node.children_by_field_name("condition")
    for clause in node.named_children:
        if clause.type == "elif_clause":
            conditions.extend(clause.children_by_field_name("condition"))
    return conditions


def branch_choosers(path: str, derived: list[str] | None = None, known: dict[str, str] | None = None) -> list[str]:
    """Variables tested by the `if`/`case` statements of `path` that assign one of `derived` (any
    variable when None): the values to ask for with --env instead of the derived ones. Variables
    already given (`known`) are left out."""
    loaded = _tree(path) if path and os.path.isfile(path) else None
    if loaded is None:
        return []
    _, parsed = loaded
    found: list[str] = []
    stack = [parsed.tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(reversed(node.named_children))
        if node.type not in ("if_statement", "case_statement"):
            continue
        assigned = _assigned_in(node)
        if not assigned or (derived is not None and not assigned & set(derived)):
            continue
        for name in _expanded_in(_condition_nodes(node)):
            if name not in found and name not in (known or {}) and name not in (derived or []):
                found.append(name)
    return found
