"""Which verl, SGLang, vLLM-Ascend and mindstudio-probe a target environment has, without importing them.

The RL3xx and RL6xx lint rules depend on the versions that will *run*, not on whatever happens to be
importable by rlpatch itself. Importing verl or SGLang would cost seconds and can fail or have side
effects (CUDA/NPU probing), so versions come from metadata only:

- a target interpreter (`--python`): one subprocess runs the shared probe (`target_probe`), which
  asks `importlib.util.find_spec` for the top-level package (finders only, the package is not
  executed) and `importlib.metadata.version`;
- a source or unpacked root (`--verl-root` ...): the `*.dist-info/METADATA` beside the package, or
  the project's own version file (`verl/version/version`, `sglang/version.py`, ...).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from typing import TYPE_CHECKING, NamedTuple

from rlpatch.upstream.versions import Version

if TYPE_CHECKING:  # pathlib is imported where a Path is made: `rlpatch lint` asks `probe_here` at
    from pathlib import Path  # every cold start, and mostly learns that verl is not installed here

# distribution name -> top-level import name
PROJECTS: dict[str, str] = {
    "verl": "verl",
    "sglang": "sglang",
    "vllm-ascend": "vllm_ascend",
    "mindstudio-probe": "msprobe",
}

# Version files relative to the package directory, in the order they are tried. A regex with one
# group extracts the version; None means the whole (stripped) file is the version.
_VERSION_FILES: dict[str, tuple[tuple[str, str | None], ...]] = {
    "verl": (("version/version", None),),
    "sglang": (("version.py", r"__version__\s*=\s*['\"]([^'\"]+)['\"]"),),
    "vllm-ascend": (("_version.py", r"(?:__version__|version)\s*(?::\s*str)?\s*=\s*['\"]([^'\"]+)['\"]"),),
    "mindstudio-probe": (("version.py", r"__version__\s*=\s*['\"]([^'\"]+)['\"]"),),
}

_PROBE_TIMEOUT_S = 30


class Installed(NamedTuple):
    """One project as found in a target environment: where its package is and which version it is."""

    project: str
    location: Path | None
    version: Version | None

    @property
    def found(self) -> bool:
        return self.location is not None or self.version is not None


def probe_interpreter(python: str, projects: tuple[str, ...] = tuple(PROJECTS)) -> dict[str, Installed]:
    """The projects installed for the interpreter `python` starts (`--python`: a path, a launcher
    prefix or a venv), found without importing any of them."""
    from rlpatch.upstream.interpreter import ask_interpreter

    answer = ask_interpreter(python, {name: PROJECTS[name] for name in projects}, _PROBE_TIMEOUT_S)
    found = answer.get("packages", {})
    return {name: _installed_from_probe(name, found.get(name) or {}) for name in projects}


def probe_here(projects: tuple[str, ...] = tuple(PROJECTS)) -> dict[str, Installed]:
    """The same answer for the interpreter running rlpatch, without a subprocess (still no import)."""
    found = {}
    for name in projects:
        try:
            spec = importlib.util.find_spec(PROJECTS[name])
        except (ImportError, ValueError):
            spec = None
        location = None
        if spec is not None:
            from pathlib import Path

            paths = list(spec.submodule_search_locations or [])
            location = Path(paths[0]) if paths else (Path(spec.origin) if spec.origin else None)
        version = None
        if location is not None and location.is_dir():
            version = version_from_dist_info(name, location.parent) or version_from_package_dir(name, location)
        found[name] = Installed(name, location, version)
    return found


def probe(python: str | None, projects: tuple[str, ...] = tuple(PROJECTS)) -> dict[str, Installed]:
    """`probe_interpreter` for another interpreter, `probe_here` for this one (or when none is named)."""
    if python is None or is_this_interpreter(python):
        return probe_here(projects)
    return probe_interpreter(python, projects)


def is_this_interpreter(python: str) -> bool:
    """Whether `python` is the interpreter running rlpatch *and* its environment: every venv's python
    links to the same base interpreter, so the resolved files alone would make two venvs one. A
    launcher prefix (`uv run python3`, `python -I`) is another interpreter: it is asked."""
    from rlpatch.upstream.interpreter import single_path

    path = single_path(python)
    return path is not None and os.path.realpath(path) == os.path.realpath(sys.executable) \
        and _venv_of(path) == _venv_of(sys.executable)


def _venv_of(python: str) -> str | None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    return root if os.path.isfile(os.path.join(root, "pyvenv.cfg")) else None


def _installed_from_probe(project: str, raw: dict[str, str | None]) -> Installed:
    from pathlib import Path

    location_text = raw.get("location")
    location = Path(location_text) if location_text else None
    version = Version.maybe(raw.get("installed_version"))  # importlib.metadata's answer
    if version is None and location is not None and location.is_dir():
        # A source checkout on PYTHONPATH has no dist-info: fall back to its version file.
        version = version_from_package_dir(project, location)
    return Installed(project, location, version)


def probe_root(project: str, root: str | Path) -> Installed:
    """The project found under `root`: a git checkout, an unpacked wheel, a site-packages directory,
    or the package directory itself."""
    from pathlib import Path

    package_dir = find_package_dir(project, Path(root))
    if package_dir is None:
        return Installed(project, None, None)
    version = version_from_dist_info(project, package_dir.parent) or version_from_package_dir(project, package_dir)
    return Installed(project, package_dir, version)


def find_package_dir(project: str, root: Path) -> Path | None:
    """`root/<module>` (or `root/python/<module>`, SGLang's git layout), or root itself when it is the package."""
    module = PROJECTS[project]
    for candidate in (root / module, root / "python" / module):
        if (candidate / "__init__.py").is_file():
            return candidate
    if root.name == module and (root / "__init__.py").is_file():
        return root
    return None


def version_from_dist_info(project: str, site_dir: Path) -> Version | None:
    """The `Version:` of `<project>-*.dist-info/METADATA` (or egg-info PKG-INFO) in `site_dir`."""
    stem = project.replace("-", "_")
    patterns = (f"{stem}-*.dist-info/METADATA", f"{project}-*.dist-info/METADATA", f"{stem}*.egg-info/PKG-INFO")
    for pattern in patterns:
        for metadata in sorted(site_dir.glob(pattern)):
            version = _metadata_version(metadata, project)
            if version is not None:
                return version
    return None


def _metadata_version(metadata: Path, project: str) -> Version | None:
    name = version = None
    try:
        with open(metadata, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    break  # the headers end at the first blank line
                if line.startswith("Name:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("Version:"):
                    version = line.split(":", 1)[1].strip()
    except OSError:
        return None
    if name is None or _normalise(name) != _normalise(project):
        return None
    return Version.maybe(version)


def version_from_package_dir(project: str, package_dir: Path) -> Version | None:
    """The version written in the project's own version file inside its package directory."""
    for relative, pattern in _VERSION_FILES.get(project, ()):
        try:
            text = (package_dir / relative).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if pattern is None:
            found = Version.maybe(text.strip())
        else:
            match = re.search(pattern, text)
            found = Version.maybe(match.group(1)) if match else None
        if found is not None:
            return found
    return None


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
