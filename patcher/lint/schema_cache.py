"""The RL3xx family's on-disk cache: composed configs and Hydra's parse of overrides.

Composing verl's config costs up to a second and importing Hydra's parser a few hundred
milliseconds; reading a JSON file costs a few. Both results are therefore kept under
`<rlpatch cache>/schema/` (`~/.cache/rlpatch/schema`, or `$RLPATCH_CACHE/schema`): a composed
snapshot per (cache format, hydra-core version, verl version, config dir and search path, config
name, group overrides, fingerprint of every yaml file), and one store of parsed overrides per
hydra-core version. A warm lint thus imports no Hydra at all. Files are written atomically, and a
cache that cannot be read or written only costs speed.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlpatch.lint.rule import Fact, per_invocation
from rlpatch.lint.schema_discovery import ConfigSource, yaml_files


def _sha256_constructor() -> Callable[..., Any]:
    """CPython's own sha256 (`_sha2` from Python 3.12, `_sha256` before), the same digest as hashlib's:
    hashlib would first load OpenSSL, about 5 ms of a lint's start for three short cache keys."""
    for name in ("_sha2", "_sha256"):
        try:
            return importlib.import_module(name).sha256
        except (ImportError, AttributeError):
            continue
    from hashlib import sha256 as standard

    return standard


sha256 = _sha256_constructor()

FORMAT = 1  # bump when the cached snapshot layout changes
FINGERPRINT: Fact[str] = Fact("fingerprint of a config search path")  # per lint invocation


def schema_path(source: ConfigSource, group_overrides: Sequence[str]) -> Path:
    """The cache file of the snapshot of `source` composed with `group_overrides`."""
    key = {
        "format": FORMAT,
        "hydra": hydra_version(),
        "verl": str(source.verl_version) if source.verl_version else None,
        "config_dir": str(source.config_dir),
        "search_dirs": [str(d) for d in source.search_dirs],
        "config_name": source.config_name,
        "group_overrides": list(group_overrides),
        "fingerprint": fingerprint(source),
    }
    return _schema_dir() / (sha256(json.dumps(key, sort_keys=True).encode()).hexdigest() + ".json")


def overrides_store_path() -> Path:
    """The store of Hydra's parse of override texts (one per hydra-core version)."""
    return _schema_dir() / f"overrides-{hydra_version()}-{FORMAT}.json"


def parsed_overrides_path(texts: Sequence[str]) -> Path:
    """The parse of one run's list of overrides, as one small file: a warm lint reads this alone.
    (The store of every override ever parsed grows with use, to megabytes: reading it for every run
    cost a single-script lint more than the rest of its work.)"""
    key = json.dumps([FORMAT, hydra_version(), list(texts)])
    return _schema_dir() / "parsed" / (sha256(key.encode()).hexdigest() + ".json")


def fingerprint(source: ConfigSource) -> str:
    """Changes when any yaml file of the search path changes (a `--verl-root` under development).
    Taken once per lint invocation (a stat of every yaml file, asked by every run)."""
    directories = (source.config_dir, *source.search_dirs)
    return per_invocation(FINGERPRINT, lambda: _fingerprint(directories), directories)


def _fingerprint(directories: tuple[Path, ...]) -> str:
    digest = sha256()
    for directory in directories:
        for relative in yaml_files(directory):
            path = f"{directory}/{relative}"  # os.stat of the text: a Path per file cost more than its stat
            stat = os.stat(path)
            digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def hydra_version() -> str | None:
    """hydra-core's version read from its `__init__.py` (cheaper than importlib.metadata). Memoised:
    part of every cache key, and what is installed does not change while rlpatch runs."""
    spec = importlib.util.find_spec("hydra")
    if spec is None or not spec.origin:
        return None
    try:
        text = Path(spec.origin).read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
    return match.group(1) if match else None


def _schema_dir() -> Path:
    from rlpatch.upstream.api import cache_dir

    return cache_dir() / "schema"


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def write_json_atomic(path: Path, data: Any) -> None:
    """Written whole or not at all (the output wing's durable write): a concurrent reader never
    sees half a cache file, and a link at `path` is replaced, never written through."""
    from rlpatch.output.api import atomic_write  # a cache miss only: a warm lint writes nothing

    try:
        atomic_write(path, json.dumps(data, separators=(",", ":")).encode("utf-8"), follow_link=False)
    except OSError:
        pass  # a read-only cache only costs speed
