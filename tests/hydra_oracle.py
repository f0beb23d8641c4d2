"""Hydra's own verdict on a verl launch (issue 29.3): the real `compose` of the argv a script hands verl,
against the config of the entry module it runs, in a given verl tree (a released wheel or a checkout).

Nothing here is rlpatch's model of Hydra: the entry module's `@hydra.main(config_path, config_name)` is
read from its source in the tree; `--config-path`/`--config-name` (and `-cp`/`-cn`) are taken as Hydra's
command line takes them (a relative `--config-path` is relative to the module's own folder,
`hydra.utils.compute_search_path_dir`); then Hydra composes, honouring `hydra.searchpath` itself. Compose
runs with the tree as the working directory, because verl's configs name `file://verl/trainer/config`
(relative to where the run starts: verl's examples run from the repository root), and with each
`pkg://` package of the search path served from the tree's folder of that name without importing it.

The verdict is "composes", "fails" (Hydra refuses: verl would die before training) or "unknown" (the
outcome depends on something outside the tree, e.g. a `pkg://` package or `file://` folder the tree
does not hold, or the launch is not a Hydra entry of this tree).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

COMPOSES, FAILS, UNKNOWN = "composes", "fails", "unknown"
# Hydra's own command-line options (hydra/_internal/utils.py get_args_parser) that take a value.
_VALUE_OPTIONS = {"--config-path": "path", "-cp": "path", "--config-name": "name", "-cn": "name",
                  "--config-dir": "dir", "-cd": "dir", "--cfg": "other", "-c": "other", "--package": "other",
                  "-p": "other", "--info": "other", "-i": "other", "--experimental-rerun": "other",
                  "--shell-completion": "other", "-sc": "other"}
_MULTIRUN = {"--multirun", "-m"}
# The rules whose claim is "Hydra refuses this launch" (RL103: a plain override below an empty
# engine_kwargs dict, the inference dump key's own message); RL305/RL306 claim that the launch composes
# and dies later (their oracle is the composed value, `runtime_facts`).
COMPOSE_CODES = ("RL103", "RL301", "RL302", "RL303", "RL304")
RUNTIME_CODES = ("RL305", "RL306")
ROLLOUT = "actor_rollout_ref.rollout"


@dataclass
class Verdict:
    outcome: str  # COMPOSES, FAILS or UNKNOWN
    detail: str = ""  # Hydra's message for FAILS, the reason for UNKNOWN
    entry: str = ""
    config: Any = None  # the composed DictConfig for COMPOSES
    facts: set[str] = field(default_factory=set)  # RUNTIME_CODES the composed config confirms


def entry_module(argv: list[str], root: Path) -> str | None:
    """The module a launch runs: the `-m MODULE` (of possibly several: `torchrun -m`, `python3 -m
    torch.distributed.run ... -m`) that is a module of this tree, else the last `-m MODULE` naming verl."""
    modules = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "-m" and not argv[i + 1].startswith("-")]
    for module in modules:
        if module_file(root, module) is not None:
            return module
    named = [m for m in modules if m.split(".")[0] in ("verl", "recipe")]
    return named[-1] if named else None


def hydra_args(argv: list[str], entry: str) -> list[str]:
    """What follows `-m ENTRY` (the arguments `sys.argv[1:]` of the entry)."""
    index = next(i for i in range(len(argv) - 1) if argv[i] == "-m" and argv[i + 1] == entry)
    return argv[index + 2:]


def module_file(root: Path, module: str) -> Path | None:
    base = root / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__main__.py"):
        if candidate.is_file():
            return candidate
    return None


def hydra_main(source: Path) -> tuple[str | None, str | None] | None:
    """(config_path, config_name) of the module's `@hydra.main(...)`, None when it has none."""
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("hydra.main", "main"):
            options = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
            positional = [a.value for a in node.args if isinstance(a, ast.Constant)]
            path = options.get("config_path", positional[0] if positional else None)
            name = options.get("config_name", positional[1] if len(positional) > 1 else None)
            if path is not None or name is not None:
                return (None if path is None else str(path)), (None if name is None else str(name))
    return None


@dataclass
class CommandLine:
    config_path: str | None
    config_name: str | None
    overrides: list[str]
    unmodelled: str = ""  # an option whose effect is not composing (or not modelled here)


def parse_command_line(args: list[str], config_path: str | None, config_name: str | None) -> CommandLine:
    """Hydra's argparse of the entry's arguments: options (`--opt value` or `--opt=value`), overrides."""
    line = CommandLine(config_path, config_name, [])
    items = iter(args)
    for arg in items:
        option, eq, value = arg.partition("=")
        if option in _VALUE_OPTIONS:
            value = value if eq else next(items, "")
            kind = _VALUE_OPTIONS[option]
            if kind == "path":
                line.config_path = value
            elif kind == "name":
                line.config_name = value
            else:
                line.unmodelled = line.unmodelled or f"{option} (not a plain run)"
        elif arg in _MULTIRUN:
            line.unmodelled = line.unmodelled or "--multirun"
        elif arg.startswith("-"):
            line.unmodelled = line.unmodelled or f"{arg} (not a Hydra option)"
        else:
            line.overrides.append(arg)
    return line


def config_dir(root: Path, module: Path, config_path: str | None) -> Path | None:
    if config_path is None:
        return None
    if config_path.startswith("pkg://"):
        return root / config_path[len("pkg://"):].replace(".", "/")
    if os.path.isabs(config_path):
        return Path(config_path)
    return Path(os.path.normpath(os.path.realpath(module.parent) + os.sep + config_path))


def _search_path(overrides: list[str], primary: Path | None) -> list[str]:
    """hydra.searchpath as Hydra takes it: the command line's, else the primary config's."""
    for override in overrides:
        key, _, value = override.partition("=")
        if key == "hydra.searchpath":
            return [item.strip().strip("'\"") for item in value.strip().strip("[]").split(",") if item.strip()]
    if primary is None or not primary.is_file():
        return []
    try:
        loaded = yaml.safe_load(primary.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return []
    hydra_node = loaded.get("hydra") if isinstance(loaded, dict) else None
    found = hydra_node.get("searchpath") if isinstance(hydra_node, dict) else None
    return [str(item) for item in found] if isinstance(found, list) else []


def _outside_tree(root: Path, search_path: list[str]) -> str:
    """The first search-path entry whose content is not in the tree (its verdict is the user's machine's)."""
    for item in search_path:
        if item.startswith("pkg://"):
            if not (root / item[len("pkg://"):].replace(".", "/")).is_dir():
                return f"hydra.searchpath {item}: no such package in the tree"
        elif item.startswith("file://"):
            folder = Path(item[len("file://"):])
            if not (folder if folder.is_absolute() else root / folder).is_dir():
                return f"hydra.searchpath {item}: no such folder in the tree"
    return ""


@contextlib.contextmanager
def _served_from(root: Path, search_path: list[str]) -> Iterator[None]:
    """cwd = the tree; each `pkg://a.b` of the search path importable as the tree's folder a/b, without
    running any `__init__.py` of the tree (importlib.resources only needs the module's spec)."""
    added: list[str] = []
    before = os.getcwd()
    try:
        os.chdir(root)
        for item in search_path:
            if not item.startswith("pkg://"):
                continue
            name = item[len("pkg://"):]
            folder = root / name.replace(".", "/")
            parts = name.split(".")
            for depth in range(1, len(parts) + 1):
                package = ".".join(parts[:depth])
                if package in sys.modules:
                    continue
                where = root.joinpath(*parts[:depth])
                spec = importlib.util.spec_from_file_location(package, where / "__init__.py",
                                                              submodule_search_locations=[str(where)])
                assert spec is not None, folder
                sys.modules[package] = importlib.util.module_from_spec(spec)
                added.append(package)
        yield
    finally:
        os.chdir(before)
        for package in added:
            sys.modules.pop(package, None)


def compose_launch(root: Path, argv: list[str]) -> Verdict:
    """Hydra's verdict on `argv` (a recorded launch) run from the root of verl tree `root`."""
    entry = entry_module(argv, root)
    if entry is None:
        return Verdict(UNKNOWN, "no verl entry module in the launch")
    module = module_file(root, entry)
    if module is None:
        return Verdict(UNKNOWN, f"entry module {entry} is not in this tree", entry)
    decorated = hydra_main(module)
    if decorated is None:
        return Verdict(UNKNOWN, f"{entry} has no @hydra.main", entry)
    line = parse_command_line(hydra_args(argv, entry), *decorated)
    if line.unmodelled:
        return Verdict(UNKNOWN, f"runs with {line.unmodelled}", entry)
    folder = config_dir(root, module, line.config_path)
    if folder is None or line.config_name is None:
        return Verdict(UNKNOWN, f"{entry}: no config folder or name", entry)
    name = line.config_name.removesuffix(".yaml")
    search_path = _search_path(line.overrides, folder / f"{name}.yaml")
    outside = _outside_tree(root, search_path)
    if outside:
        return Verdict(UNKNOWN, outside, entry)
    try:
        config = _compose(root, folder, name, line.overrides, search_path)
    except Exception as error:  # noqa: BLE001 - any Hydra/OmegaConf error is the verdict: verl dies there
        return Verdict(FAILS, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}", entry)
    return Verdict(COMPOSES, "", entry, config, runtime_facts(config, tree_version(root)))


def _compose(root: Path, folder: Path, name: str, overrides: list[str], search_path: list[str]) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with _served_from(root, search_path), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with initialize_config_dir(config_dir=str(folder), version_base=None, job_name="rlpatch-oracle"):
                return compose(config_name=name, overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


def tree_version(root: Path) -> tuple[int, ...]:
    path = root / "verl" / "version" / "version"
    text = path.read_text().strip() if path.is_file() else "0"
    return tuple(int("".join(c for c in part if c.isdigit()) or 0) for part in text.split(".")[:3])


def runtime_facts(config: Any, version: tuple[int, ...]) -> set[str]:
    """The RUNTIME_CODES whose claim the composed config bears out: no rollout backend (`???`), the
    synchronous rollout mode on verl >= 0.7 (which removed it)."""
    from omegaconf import OmegaConf

    facts = set()
    rollout = OmegaConf.select(config, ROLLOUT, default=None, throw_on_missing=False)
    if rollout is not None and OmegaConf.is_missing(rollout, "name"):  # `"name" in rollout` is False for ???
        facts.add("RL305")
    if rollout is not None and version >= (0, 7) and OmegaConf.select(rollout, "mode", default=None) == "sync":
        facts.add("RL306")
    return facts
