"""Which upstream tree a command acts on, and which version it is.

A root is the directory that contains the package folder (`verl/`, `sglang/`, `vllm_ascend/`):
a git checkout or a site-packages directory; the package folder itself is accepted too. With no
root given, the tree is the one the target interpreter really imports, found with
`importlib.util.find_spec` in that interpreter (the shared probe, `target_probe`), which locates a
top-level package without executing it (importing verl would pull in torch and Ray).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rlpatch.errors import InputError
from rlpatch.upstream.versions import Version

Package = Literal["verl", "sglang", "vllm_ascend"]


@dataclass(frozen=True)
class Target:
    """One upstream tree: the directory that contains the package folder."""

    package: Package
    root: str
    version: Version | None
    origin: str = "given"  # "given" (a --*-root option) or "imported by PY"

    @property
    def version_text(self) -> str:
        return str(self.version) if self.version else "unknown version"


# The distribution (package index) name of each package, as it appears in `*.dist-info` folder names.
DISTRIBUTIONS: dict[str, str] = {"verl": "verl", "sglang": "sglang", "vllm_ascend": "vllm_ascend"}
OPTION_OF: dict[str, str] = {"verl": "--verl-root", "sglang": "--sglang-root", "vllm_ascend": "--vllm-ascend-root"}

_VERSION_ASSIGNMENT = re.compile(r"""^(?:__version__|version|VERSION)\s*(?::\s*str\s*)?=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", re.M)


def resolve_root(path: str, package: Package) -> str:
    """The root for a user-given path: the directory holding `package/`, or that folder's parent."""
    given = Path(path).expanduser()
    option = OPTION_OF[package]
    if not given.exists():
        raise InputError(f"{option} {path}: no such directory")
    if not given.is_dir():
        raise InputError(f"{option} {path}: not a directory")
    resolved = given.resolve()
    if resolved.name == package and (resolved / "__init__.py").is_file():
        return str(resolved.parent)
    if (resolved / package).is_dir():
        return str(resolved)
    raise InputError(f"{option} {path}: holds no {package}/ package folder")


def _version_from_files(package: str, root: Path) -> Version | None:
    """The version a tree states about itself: its version file, or a dist-info folder beside it."""
    plain = root / package / "version" / "version"  # verl
    if plain.is_file():
        found = Version.maybe(plain.read_text(encoding="utf-8", errors="replace").strip())
        if found:
            return found
    for candidate in ("_version.py", "version.py", "__init__.py"):
        source = root / package / candidate
        if source.is_file():
            match = _VERSION_ASSIGNMENT.search(source.read_text(encoding="utf-8", errors="replace"))
            found = Version.maybe(match.group(1)) if match else None
            if found:
                return found
    dist = DISTRIBUTIONS[package]
    for info in sorted(root.glob("*.dist-info")):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        if name.replace("-", "_").lower() == dist:
            found = Version.maybe(version)
            if found:
                return found
    return None


def detect_version(package: Package, root: str) -> Version | None:
    """The version of the tree at `root`, read from its files (never by importing it)."""
    return _version_from_files(package, Path(root))


def target_for_root(package: Package, path: str) -> Target:
    """A Target for a user-given root."""
    root = resolve_root(path, package)
    return Target(package, root, detect_version(package, root), f"given by {OPTION_OF[package]}")


def _ask_interpreter(python: str, package: Package) -> dict:
    """The probe's answer about `package` in `python`: its "locations", "installed_version" and the
    interpreter's "python" version."""
    from rlpatch.upstream.interpreter import ask_interpreter

    answer = ask_interpreter(python, {DISTRIBUTIONS[package]: package}, 60)
    return {**answer.get("packages", {}).get(DISTRIBUTIONS[package], {}), "python": answer.get("python")}


def imported_target(package: Package, python: str | None) -> Target | None:
    """The tree of `package` that `python` (default: this interpreter) imports, or None."""
    interpreter = python or sys.executable
    answer = _ask_interpreter(interpreter, package)
    for location in answer.get("locations", []):
        # Resolved: a package installed as a link (site-packages/verl -> a checkout) is patched where it
        # lives; the tree is that package's real parent, so the writes never cross a link out of it.
        folder = Path(location)
        folder = folder.resolve() if folder.resolve().name == package else folder
        if folder.name == package and folder.is_dir():
            root = str(folder.parent)
            version = detect_version(package, root) or Version.maybe(answer.get("installed_version"))
            return Target(package, root, version, f"imported by {interpreter}")
    return None
