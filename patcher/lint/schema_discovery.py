"""Where verl's Hydra config lives (the discovery step of the RL3xx family).

`locate_config` finds the config that the launch's entry module composes, in the verl tree of
`--verl-root`, a released wheel in rlpatch's cache (`--verl-version X`), or the verl installed for
the target interpreter (`--python`, probed by `rlpatch.upstream.envprobe` without importing verl):
the module's own `@hydra.main(config_path, config_name)` (read from its source by the upstream
wing), `--config-path`/`--config-name` applied as Hydra applies them, and the folders of Hydra's
search path (`hydra.searchpath`, the script's or the primary config's, `pkg://` read from the tree). `config_groups` lists the
config groups and their options found there. Nothing here imports Hydra: this is plain file system
work, shared by the composition (`schema_compose`) and the cache key (`schema_cache`).
"""

# No `from __future__ import annotations`: typing compiles each string annotation of a NamedTuple's
# fields (a ForwardRef each) at import, on every cold start of `rlpatch lint`; evaluated ones it takes as they are.

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from rlpatch.upstream.api import Version, entry_file, probe, probe_root, read_hydra_main

DEFAULT_ENTRY = "verl.trainer.main_ppo"  # what a caller that names no entry composes
CONFIG_SUBDIR = ("verl", "trainer", "config")
MAX_PRIMARY_BYTES = 1024 * 1024  # bounded read of the primary config, for its `hydra.searchpath` (verl's are a few KB)


class ConfigSource(NamedTuple):
    """The config directory that will be composed, and where it came from."""

    config_dir: Path
    config_name: str
    verl_version: Version | None
    origin: str
    search_dirs: tuple[Path, ...] = ()  # the rest of Hydra's search path (`hydra.searchpath`), resolved to folders


class SchemaUnavailable(Exception):
    """The RL3xx family cannot run: no hydra-core, no verl tree, or the config does not compose."""


class SchemaUnknown(SchemaUnavailable):
    """The run's config cannot be known here (an entry module or a `pkg://` package not in the tree):
    the family notes it, and reports no error."""


# --------------------------------------------------------------------------------- locating verl


def locate_config(
    *,
    verl_root: str | Path | None = None,
    python: str | None = None,
    verl_version: str | None = None,
    config_path: str | Path | None = None,
    config_name: str | None = None,
    base_dir: str | Path | None = None,
    entry: str = DEFAULT_ENTRY,
    searchpath: Sequence[str] | None = None,
) -> ConfigSource:
    """The config that `python -m ENTRY` composes, as Hydra finds it: the entry module's
    `@hydra.main(config_path, config_name)`, changed by `--config-path`/`--config-name`, plus the
    search path (`searchpath`, the script's `hydra.searchpath=[...]`, else the primary config's own).
    The verl tree: an explicit root wins, then a released version, then the verl installed for
    `python` (probed without importing verl). `base_dir` is the script's folder: a recipe's entry
    module is looked for in the checkout and in the folders above the script."""
    package, installed_version, origin = _verl_package(verl_root, python, verl_version)
    run_dirs = _run_dirs(package, base_dir)
    module_file = entry_file(entry, str(package), run_dirs)
    if module_file is None:
        raise SchemaUnknown(f"the entry module {entry} is not in {origin}: its config is unknown")
    declared = read_hydra_main(module_file)
    if declared is None:
        raise SchemaUnknown(f"{module_file} has no @hydra.main this linter can read: its config is unknown")
    name = strip_yaml(config_name) if config_name else declared.config_name
    path = str(config_path) if config_path is not None else declared.config_path
    if not name or not path:
        raise SchemaUnknown(f"{module_file}'s @hydra.main names no config_path and config_name: its config is unknown")
    cwd = _launch_dir(entry, module_file, package, run_dirs)
    primary = _primary_dir(path, module_file, package, run_dirs)  # missing: Hydra's error, when composing
    entries = list(searchpath) if searchpath is not None else _primary_searchpath(primary / f"{name}.yaml")
    search_dirs = tuple(_search_dir(item, cwd, package, run_dirs) for item in entries)
    return ConfigSource(primary.resolve(), name, installed_version, origin,
                        tuple(d.resolve() for d in search_dirs if d.is_dir()))


def _verl_package(verl_root: str | Path | None, python: str | None,
                  verl_version: str | None) -> tuple[Path, Version | None, str]:
    """The `verl` package folder to read, its version, and where it came from (for messages)."""
    if verl_root is not None:
        installed = probe_root("verl", verl_root)
        origin = f"--verl-root {verl_root}"
    elif verl_version is not None:
        from rlpatch.upstream.api import unpacked_tree

        installed = probe_root("verl", unpacked_tree("verl", verl_version))
        origin = f"verl {verl_version} (released wheel)"
    else:
        installed = probe(python, ("verl",))["verl"]
        origin = f"the verl of {python or 'this interpreter'}"
    if installed.location is None or not Path(installed.location).is_dir():
        raise SchemaUnavailable(f"no verl tree found ({origin})")
    package = Path(installed.location)
    if not (package / Path(*CONFIG_SUBDIR[1:])).is_dir():
        raise SchemaUnavailable(f"{package / Path(*CONFIG_SUBDIR[1:])} does not exist")
    return package, installed.version, origin


def _run_dirs(package: Path, base_dir: str | Path | None) -> tuple[str, ...]:
    """The folders a launch may run from: the checkout that holds the verl package (verl's scripts
    run from there), then the script's folder and each folder above it."""
    found = [str(package.parent)]
    if base_dir is not None:
        folder = Path(base_dir).resolve()
        found += [str(folder), *(str(parent) for parent in folder.parents)]
    return tuple(dict.fromkeys(found))


def _launch_dir(entry: str, module_file: str, package: Path, run_dirs: tuple[str, ...]) -> Path:
    """The working folder the launch is assumed to run in (what a relative `file://` search path is
    relative to): the folder a recipe's entry module was found from, else the checkout."""
    for folder in run_dirs:
        if not entry.startswith("verl.") and entry_file(entry, None, (folder,)) == module_file:
            return Path(folder)
    return package.parent


def _primary_dir(path: str, module_file: str, package: Path, run_dirs: tuple[str, ...]) -> Path:
    """Hydra's rule (`hydra._internal.utils.compute_search_path_dir`, for a module run with `-m` or
    as a script, whose task function lives in `__main__`): an absolute config path as is, a
    `pkg://` one from its package, and a relative one from the folder of the file that declares
    @hydra.main (its real path), whichever config path it is (the decorator's or --config-path)."""
    if path.startswith("pkg://"):
        return _package_dir(path.removeprefix("pkg://"), package, run_dirs)
    if os.path.isabs(path):
        return Path(path)
    return Path(os.path.normpath(os.path.join(os.path.realpath(os.path.dirname(module_file)), path)))


def _primary_searchpath(primary_file: Path) -> list[str]:
    """The primary config's own `hydra.searchpath` (Hydra reads it before composing; a command-line
    `hydra.searchpath=[...]` replaces it). Only the top-level `hydra:` block is parsed: most configs
    have none, and verl's ppo_trainer.yaml takes tens of milliseconds to load whole, on every cold
    lint. An unreadable file has none: composing it says why."""
    try:
        with open(primary_file, "rb") as handle:
            text = handle.read(MAX_PRIMARY_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    block = _top_level_block(text, "hydra")
    if block is None:
        return []
    try:
        import yaml

        data = yaml.safe_load(block)
    except Exception:  # noqa: BLE001 - a broken primary config is the composition's error to report
        return []
    hydra = data.get("hydra") if isinstance(data, dict) else None
    entries = hydra.get("searchpath") if isinstance(hydra, dict) else None
    return [str(item) for item in entries] if isinstance(entries, list) else []


def _top_level_block(text: str, key: str) -> str | None:
    """The lines of the top-level mapping entry `key:` of a YAML document (up to the next top-level
    key), or None when it has none."""
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if line.startswith(f"{key}:"):
            end = next((i for i in range(start + 1, len(lines))
                        if lines[i][:1] not in ("", " ", "\t", "#", "-")), len(lines))
            return "\n".join(lines[start:end]) + "\n"
    return None


def _search_dir(item: str, cwd: Path, package: Path, run_dirs: tuple[str, ...]) -> Path:
    """One `hydra.searchpath` entry as a folder: `file://X` relative to the launch's working folder
    (Hydra opens it as given), `pkg://a.b` the package folder in the tree (Hydra imports it in the
    run's environment, which is this tree, not rlpatch's)."""
    if item.startswith("pkg://"):
        return _package_dir(item.removeprefix("pkg://"), package, run_dirs)
    folder = Path(item.removeprefix("file://"))
    if folder.is_absolute():
        return folder
    if not (cwd / folder).is_dir():  # the launch may well run where it is: what it adds is unknown here
        raise SchemaUnknown(f"hydra.searchpath names {item}, no folder {cwd / folder} here (a relative path is the "
                            "working folder's at run time): the config it adds is unknown")
    return cwd / folder


def _package_dir(name: str, package: Path, run_dirs: tuple[str, ...]) -> Path:
    """The folder of package `name` (`verl.trainer.config`, `verl_mlite.config`) in the verl tree or
    a folder the launch may run from; SchemaUnknown when none holds it."""
    parts = name.strip("/").replace("/", ".").split(".")
    roots = (str(package.parent),) if parts[0] == "verl" else run_dirs
    for root in roots:
        folder = Path(root, *parts)
        if folder.is_dir():
            return folder
    raise SchemaUnknown(f"hydra.searchpath names pkg://{name}, a package not in {package.parent} nor beside "
                        "the script: the config it adds is unknown")


def strip_yaml(name: str) -> str:
    return name.removesuffix(".yaml")


# -------------------------------------------------------------------------------- config groups


def config_groups(source: ConfigSource) -> dict[str, set[str]]:
    """Config group -> its options (yaml file stems), over every directory of the search path."""
    groups: dict[str, set[str]] = {}
    for directory in (source.config_dir, *source.search_dirs):
        for relative in yaml_files(directory):
            group, _, stem = relative.rpartition("/")
            if group:
                groups.setdefault(group, set()).add(stem[: -len(".yaml")])
    return groups


def yaml_files(directory: Path) -> Iterator[str]:
    """Relative '/'-separated paths of the yaml files under `directory` (sorted, deterministic)."""
    stack: list[tuple[str | Path, str]] = [(directory, "")]
    found: list[str] = []
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=True) and not entry.name.startswith((".", "__")):
                stack.append((entry.path, f"{prefix}{entry.name}/"))
            elif entry.name.endswith(".yaml"):
                found.append(prefix + entry.name)
    yield from sorted(found)
