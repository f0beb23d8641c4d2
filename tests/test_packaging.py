"""What a user gets from the sdist and the wheel (issue 22): the licence, the files each archive holds,
the declared requirements, `python -m rlpatch`, and the download fallbacks of a pip-less environment.

The archives are built with this interpreter's setuptools (no isolation, no download) from a copy of the
working tree, in a few seconds. The tests that install the wheel into fresh virtual environments fetch
rlpatch's requirements from the package index: they are marked `upstream` (CI runs them, `make test-fast`
does not).
"""

from __future__ import annotations

import ast
import configparser
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the lint extra's tomli
    import tomli as tomllib
from email.parser import Parser
from pathlib import Path

import pytest

from rlpatch.errors import InputError
from rlpatch.upstream import wheelcache

ROOT = Path(__file__).resolve().parent.parent
SETUP = configparser.ConfigParser()
SETUP.read(ROOT / "setup.cfg")


def _requirements(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


INSTALL_REQUIRES = _requirements(SETUP["options"]["install_requires"])
EXTRAS = {name: _requirements(value) for name, value in SETUP["options.extras_require"].items()}
DEV_GROUPS: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["dependency-groups"]


def _project_copy(tmp: Path) -> Path:
    """The working tree without the venv, git and build leftovers (setuptools writes egg-info beside it)."""
    ignore = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                    ".hypothesis", ".rlpatch")
    return Path(shutil.copytree(ROOT, tmp / "src", ignore=ignore))


def _build(kind: str, source: Path, out: Path) -> Path:
    code = f"import sys, setuptools.build_meta as b; print(b.build_{kind}(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", code, str(out)], cwd=source, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out / proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("packaging")
    source = _project_copy(tmp)
    return {"sdist": _build("sdist", source, tmp / "dist"), "wheel": _build("wheel", source, tmp / "dist")}


def test_the_wheel_holds_the_package_and_the_licence_only(archives: dict[str, Path]) -> None:
    names = zipfile.ZipFile(archives["wheel"]).namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert top == {"rlpatch", archives["wheel"].name.split("-py3")[0] + ".dist-info"}, top
    assert "rlpatch/__main__.py" in names and "rlpatch/py.typed" in names and "rlpatch/rules/__init__.py" in names
    assert "rlpatch/schemas/lint.schema.json" in names and "rlpatch/schemas/dumps-compare.schema.json" in names
    assert any(name.endswith(".dist-info/LICENSE") or name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert not [name for name in names if "fixtures/" in name or "/tests/" in name or "__pycache__" in name]


def test_the_wheel_metadata(archives: dict[str, Path]) -> None:
    archive = zipfile.ZipFile(archives["wheel"])
    (metadata_name,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
    metadata = Parser().parsestr(archive.read(metadata_name).decode())
    assert metadata["License-Expression"] == "Apache-2.0"  # an SPDX expression, not the deprecated classifier
    assert metadata["Author"] == "the rlpatch authors" and "verl" in metadata["Keywords"]
    classifiers = metadata.get_all("Classifier")
    for wanted in ("Environment :: Console", "Operating System :: POSIX :: Linux",
                   "Development Status :: 3 - Alpha"):
        assert wanted in classifiers
    requires = metadata.get_all("Requires-Dist")
    runtime = [r for r in requires if "extra ==" not in r]
    assert not [r for r in runtime if r.startswith("unidiff")], runtime
    assert not [r for r in requires if r.startswith(("unidiff", "pytest", "ruff", "mkdocs"))], requires  # dev groups
    assert any(r.startswith("packaging") for r in runtime)
    assert any(r.startswith("tomli") and 'python_version < "3.11"' in r for r in runtime)
    assert not metadata.get_all("Project-URL")  # no published address to point to yet


def test_the_sdist_holds_what_its_tests_need(archives: dict[str, Path]) -> None:
    with tarfile.open(archives["sdist"]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for wanted in ("LICENSE", "README.md", "CHANGELOG.md", ".pre-commit-hooks.yaml", "setup.cfg", "pyproject.toml",
                   "MANIFEST.in", "Makefile", "tests/test_packaging.py", "tests/conftest.py", "patcher/__main__.py",
                   "patcher/schemas/lint.schema.json"):
        assert wanted in names, wanted
    if (ROOT / ".git").exists():
        tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "fixtures", "tests"], capture_output=True,
                                 text=True).stdout.split()
    else:  # run from an unpacked sdist
        tracked = [str(p.relative_to(ROOT)) for folder in ("fixtures", "tests") for p in (ROOT / folder).rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts]
    assert tracked and not sorted(set(tracked) - names)[:5]  # every fixture and test
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]


def test_the_licence_is_the_apache_text_with_our_notice() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text and "Copyright 2026 the rlpatch authors" in text
    assert "[yyyy]" not in text


# Import name -> the distribution that provides it (declared here or, for antlr4, by hydra-core).
PROVIDED_BY = {"click": "click", "git": "gitpython", "hydra": "hydra-core", "antlr4": "hydra-core", "libcst": "libcst",
               "matplotlib": "matplotlib", "msprobe": "mindstudio-probe", "omegaconf": "omegaconf",
               "packaging": "packaging", "plotly": "plotly", "ray": "ray", "tomli": "tomli", "tree_sitter": "tree-sitter",
               "tree_sitter_bash": "tree-sitter-bash", "yaml": "pyyaml"}


def _third_party_imports() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted([*ROOT.joinpath("patcher").rglob("*.py"), *ROOT.joinpath("rules").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "rlpatch":
                    found.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return found


def _names(requirements: list[str]) -> set[str]:
    return {requirement.split(";")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower()
            for requirement in requirements}


def test_every_import_of_the_product_is_declared_and_unidiff_is_not_one() -> None:
    imports = _third_party_imports()
    assert "unidiff" not in imports, imports.get("unidiff")
    declared = _names(INSTALL_REQUIRES) | {name for extra in EXTRAS.values() for name in _names(extra)}
    undeclared = {name: files for name, files in imports.items() if PROVIDED_BY.get(name) not in declared}
    assert not undeclared, undeclared
    assert "unidiff" not in _names(INSTALL_REQUIRES) and "unidiff" in _names(DEV_GROUPS["test"])


def test_what_only_development_needs_is_no_extra_users_install() -> None:
    """test, lint, bench, docs and rehearsal are PEP 735 dependency groups, not extras (issue 32.7)."""
    assert set(EXTRAS) == {"msprobe", "report", "ray"}
    assert set(DEV_GROUPS) == {"test", "lint", "bench", "docs", "rehearsal"}
    build = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]
    assert build == ["setuptools>=77"]  # it builds wheels itself: no `wheel`


def test_python_dash_m_rlpatch() -> None:
    version = subprocess.run([sys.executable, "-m", "rlpatch", "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("rlpatch, version ")
    lint = subprocess.run([sys.executable, "-m", "rlpatch", "lint", "-"], input="python3 -m verl.trainer.main_ppo\n",
                          capture_output=True, text=True, timeout=60)
    assert (lint.returncode, lint.stdout) == (0, "All checks passed.\n"), lint.stderr
    usage = subprocess.run([sys.executable, "-m", "rlpatch", "lint", "--bogus"], capture_output=True, text=True,
                           timeout=60)
    assert usage.returncode == 2 and "Usage: rlpatch lint" in usage.stderr


# ---- downloads without the interpreter's pip --------------------------------------------------------------
def _no_pip(monkeypatch: pytest.MonkeyPatch, on_path: dict[str, str]) -> None:
    # The modules wheelcache imports when it looks for a pip (the same module objects as here).
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pip" else real(name, *a))
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: on_path.get(name))


def test_downloads_prefer_this_interpreters_pip() -> None:
    assert wheelcache.pip_command("verl", "0.9.1") == [sys.executable, "-m", "pip"]


@pytest.mark.parametrize("on_path, expected", [
    ({"pip3": "/bin/pip3", "pip": "/bin/pip", "uv": "/bin/uv"}, ["/bin/pip3"]),
    ({"pip": "/bin/pip", "uv": "/bin/uv"}, ["/bin/pip"]),
    ({"uv": "/bin/uv"}, ["/bin/uv", "tool", "run", "--from", "pip", "pip"]),  # uv has no `pip download`
])
def test_downloads_fall_back_to_a_pip_on_path_then_uv(monkeypatch: pytest.MonkeyPatch, on_path, expected) -> None:
    _no_pip(monkeypatch, on_path)
    assert wheelcache.pip_command("verl", "0.9.1") == expected


def test_without_any_pip_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_pip(monkeypatch, {})
    monkeypatch.setenv("RLPATCH_CACHE", str(tmp_path))
    with pytest.raises(InputError) as caught:
        wheelcache.wheel_path("verl", "0.9.1")
    message = caught.value.message
    assert message.startswith("cannot download verl==0.9.1: no pip to download it with") and "\n" not in message
    assert "-m ensurepip" in message and "--verl-root" in message


def test_lint_says_the_version_could_not_be_fetched(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Not "No findings, but 1 file could not be linted": one error about the version, exit 2, no report."""
    from rlpatch.cli import capture

    _no_pip(monkeypatch, {})
    monkeypatch.setenv("RLPATCH_CACHE", str(tmp_path))
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
    code, out, err = capture(["lint", "--verl-version", "0.9.1", str(script), str(script)])
    assert (code, out) == (2, "")
    assert err.startswith("rlpatch: error: cannot download verl==0.9.1: no pip") and err.count("\n") == 1


# ---- the wheel in fresh environments (downloads rlpatch's requirements) -----------------------------------
def _venv(path: Path, *args: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", *args, str(path)], check=True, timeout=300)
    return path / "bin"


def _install(bin_dir: Path, wheel: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "-q",
                           str(wheel)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.upstream
def test_the_wheel_installed_without_extras(archives: dict[str, Path], tmp_path: Path) -> None:
    bin_dir = _venv(tmp_path / "env")
    _install(bin_dir, archives["wheel"])
    assert not (bin_dir / "unidiff").exists()  # no test-only console script in the user's venv
    version = subprocess.run([str(bin_dir / "rlpatch"), "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith("rlpatch, version ")
    samples = sorted(str(p) for p in (ROOT / "fixtures" / "lint" / "samples").glob("*.sh"))
    lint = subprocess.run([str(bin_dir / "python"), "-m", "rlpatch", "lint", *samples], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    summary = [line for line in lint.stdout.splitlines() if line.startswith(("Found ", "All checks passed"))]
    assert lint.returncode in (0, 1) and len(summary) == 1
    # stderr: at most the line that says which verl RL3xx checked against (no verl named here)
    assert all(line.startswith("rlpatch lint: RL301-RL306 ") for line in lint.stderr.splitlines()), lint.stderr


@pytest.mark.upstream
def test_a_pip_less_environment_downloads_with_what_it_has(archives: dict[str, Path], tmp_path: Path) -> None:
    """`venv --without-pip` (as `uv tool install` makes): --verl-version works through a pip on PATH, and with
    nothing on PATH the one-line error names what to install."""
    bin_dir = _venv(tmp_path / "env", "--without-pip")
    _install(bin_dir, archives["wheel"])
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.no_such_key=1\n")
    lint = [str(bin_dir / "rlpatch"), "lint", "--verl-version", "0.9.1", str(script)]
    pip_dir = Path(sys.executable).parent
    with_pip = dict(os.environ, RLPATCH_CACHE=str(tmp_path / "cache"), PATH=f"{pip_dir}:/usr/bin:/bin")
    found = subprocess.run(lint, capture_output=True, text=True, timeout=600, env=with_pip)
    assert found.returncode == 1 and "RL302" in found.stdout, found.stdout + found.stderr
    bare = dict(os.environ, RLPATCH_CACHE=str(tmp_path / "cache2"), PATH=str(tmp_path / "nothing"))
    failed = subprocess.run(lint, capture_output=True, text=True, timeout=120, env=bare)
    assert (failed.returncode, failed.stdout) == (2, "")
    assert failed.stderr.startswith("rlpatch: error: cannot download verl==0.9.1: no pip to download it with")
