"""Where verl's Hydra config lives (the discovery step of the RL3xx family).

`locate_config` finds the config directory that verl's trainer would compose: `--verl-root`, a
released wheel in rlpatch's cache (`--verl-version X`), or the verl installed for the target
interpreter (`--python`, probed by `rlpatch.upstream.envprobe` without importing verl), plus the
extra directories a `--config-path` run puts on Hydra's search path. `config_groups` lists the
config groups and their options found there. Nothing here imports Hydra: this is plain file system
work, shared by the composition (`schema_compose`) and the cache key (`schema_cache`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from rlpatch.upstream.api import Version, probe, probe_root

DEFAULT_CONFIG_NAME = "ppo_trainer"  # verl.trainer.main_ppo's @hydra.main(config_name=...)
CONFIG_SUBDIR = ("verl", "trainer", "config")


class ConfigSource(NamedTuple):
    """The config directory that will be composed, and where it came from."""

    config_dir: Path
    config_name: str
    verl_version: Version | None
    origin: str
    search_dirs: tuple[Path, ...] = ()  # more directories on Hydra's search path (--config-path runs)


class SchemaUnavailable(Exception):
    """The RL3xx family cannot run: no hydra-core, no verl tree, or the config does not compose."""


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
    name = strip_yaml(config_name) if config_name else DEFAULT_CONFIG_NAME
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
