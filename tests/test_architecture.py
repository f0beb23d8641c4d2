"""The house shows its architecture: wings, what each may import; files over 500 lines are reported.

Each subpackage of `rlpatch` (a wing) declares in its `__init__.py` the top-level parts of
`rlpatch` it may import (`MAY_IMPORT`); this test reads every module with `ast` (nothing is
imported) and checks each `rlpatch.*` import against the declaration of the wing it is in.
"""

from __future__ import annotations

import ast
import configparser
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "patcher"
RULES = ROOT / "rules"
TOP_LEVEL_MODULES = {"__init__", "__main__", "cli", "errors", "registry", "testing"}
# A file past this many lines is reported (a warning), not failed: split a module where its
# responsibilities differ, not to meet a number.
REPORT_LINES = 500


def _wings() -> list[Path]:
    return sorted(p for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def _declared(wing: Path) -> tuple[str, ...]:
    tree = ast.parse((wing / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "MAY_IMPORT":
            return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"{wing.name}/__init__.py declares no MAY_IMPORT")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(("rlpatch",) + parts)


def _rlpatch_imports(path: Path) -> list[tuple[int, str]]:
    """Every `rlpatch.X` a module imports (absolute or relative), module-level or inside functions."""
    found: list[tuple[int, str]] = []
    if path.is_relative_to(RULES):  # packaged as `rlpatch.rules`
        package = ".".join(("rlpatch", "rules", *path.relative_to(RULES).parent.parts))
    else:
        package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "rlpatch"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "rlpatch":
                continue
            if module == "rlpatch":  # `from rlpatch import registry` names a part; `__version__` does not
                found += [(node.lineno, f"rlpatch.{alias.name}" if _is_part(alias.name) else "rlpatch")
                          for alias in node.names]
            else:  # `from rlpatch.patch import api` imports the module rlpatch.patch.api
                found += [(node.lineno, _submodule(module, alias.name)) for alias in node.names]
    return found


def _submodule(package: str, name: str) -> str:
    """`package.name` when `name` is a module of that package, else the package itself."""
    folder = PACKAGE.joinpath(*package.split(".")[1:])
    is_module = folder.is_dir() and ((folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists())
    return f"{package}.{name}" if is_module else package


def _is_part(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").exists() or name == "rules"


def _part(module: str) -> str:
    """The top-level part of rlpatch a module belongs to: a wing, `rules`, or a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_top_level_holds_only_the_entry_errors_registry_and_test_support() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules <= TOP_LEVEL_MODULES, sorted(modules - TOP_LEVEL_MODULES)


def test_every_wing_says_what_it_owns_and_may_import() -> None:
    for wing in _wings():
        doc = ast.get_docstring(ast.parse((wing / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 30, f"{wing.name}/__init__.py needs a paragraph saying what it owns"
        for part in _declared(wing):
            assert (PACKAGE / part).is_dir() or (PACKAGE / f"{part}.py").exists(), (wing.name, part)


@pytest.mark.parametrize("wing", [w.name for w in _wings()])
def test_imports_follow_the_declared_direction(wing: str) -> None:
    allowed = set(_declared(PACKAGE / wing)) | {wing, "__init__"}
    bad = []
    for path in sorted((PACKAGE / wing).rglob("*.py")):
        for line, module in _rlpatch_imports(path):
            part = _part(module)
            if part == "rules":
                part = "registry"  # the rules reach the wings only through the registry
            if part not in allowed:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module} ({wing} may import {sorted(allowed)})")
    assert not bad, "\n".join(bad)


ENTRY = "rlpatch.cli"
# The entry point, and `python -m rlpatch`, which only runs it.
ENTRY_FILES = {PACKAGE / "cli.py", PACKAGE / "__main__.py"}


def _dynamic_imports(path: Path) -> list[tuple[int, str]]:
    """`importlib.import_module("rlpatch.X")` and `__import__("rlpatch.X")` with a literal name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def test_no_module_imports_the_entry_point_but_the_entry() -> None:
    """`rlpatch.cli` is the top of the house: the wings, the top-level modules and the rules never
    import it (a `--ray` node gets the command line handed down in the click context)."""
    bad = []
    for path in sorted([*PACKAGE.rglob("*.py"), *RULES.rglob("*.py")]):
        if path in ENTRY_FILES:
            continue
        for line, module in _rlpatch_imports(path) + _dynamic_imports(path):
            if module == ENTRY or module.startswith(ENTRY + "."):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


WING_DOOR = "api"  # the one module of a wing other wings may import (Ray's public modules vs _private)


@pytest.mark.parametrize("wing", [w.name for w in _wings()])
def test_other_wings_are_reached_only_through_their_api(wing: str) -> None:
    """A wing imports another wing's `api` module and nothing else of it: the typed door is the
    seam, so a wing's inside can change without the others noticing."""
    others = {w.name for w in _wings()} - {wing}
    bad = []
    for path in sorted((PACKAGE / wing).rglob("*.py")):
        for line, module in _rlpatch_imports(path):
            parts = module.split(".")
            if _part(module) in others and parts[2:] != [WING_DOOR]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}; use rlpatch.{parts[1]}.{WING_DOOR}")
    assert not bad, "\n".join(bad)


def test_every_wing_others_import_has_a_documented_api() -> None:
    used = {_part(module) for w in _wings() for path in (PACKAGE / w.name).rglob("*.py")
            for _, module in _rlpatch_imports(path) if _part(module) != w.name}
    for wing in sorted(used & {w.name for w in _wings()}):
        tree = ast.parse((PACKAGE / wing / f"{WING_DOOR}.py").read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{wing}/{WING_DOOR}.py needs a docstring saying what it offers"
        names = [n for n in tree.body if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)]
        assert names, f"{wing}/{WING_DOOR}.py must declare __all__"


def test_wing_dependencies_have_no_cycle() -> None:
    graph = {wing.name: set(_declared(wing)) & {w.name for w in _wings()} for wing in _wings()}
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, " -> ".join(path + (node,))
        if node in done:
            return
        for dep in graph.get(node, ()):
            visit(dep, path + (node,))
        done.add(node)

    for node in graph:
        visit(node, ())


def test_every_wing_is_packaged() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    packages = set(config["options"]["packages"].split())
    expected = {"rlpatch", "rlpatch.rules"} | {_module_name(p / "__init__.py") for p in PACKAGE.rglob("*") if (p / "__init__.py").exists()}
    assert expected <= packages, sorted(expected - packages)


# A file past REPORT_LINES is a signal to look at its responsibilities, not a wall (the design card):
# one that was looked at and keeps one responsibility is listed here, with why; any other one fails.
LONG_FILES_LOOKED_AT: dict[str, str] = {}


def test_long_source_files_were_looked_at() -> None:
    long = {str(p.relative_to(ROOT)): n for p in sorted([*PACKAGE.rglob("*.py"), *RULES.glob("*.py")])
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > REPORT_LINES}
    unreviewed = [f"{path}: {n} lines" for path, n in long.items() if path not in LONG_FILES_LOOKED_AT]
    assert not unreviewed, (f"source files over {REPORT_LINES} lines: split where responsibilities differ, or list "
                            "the file in LONG_FILES_LOOKED_AT with why it is one responsibility: " + ", ".join(unreviewed))
    stale = sorted(set(LONG_FILES_LOOKED_AT) - set(long))
    assert not stale, f"LONG_FILES_LOOKED_AT lists files that are no longer long (remove them): {stale}"


# ---- domain wings pulled out of the lint engine (issue 31): typed findings, codes stated in the rules
# A domain wing knows its subject (msprobe's config.json) and answers in typed findings; the lint rules
# map those to their codes. Neither the wing nor the lint engine states a code of the family; a rule
# reaches the wing only through its `api`.
DOMAIN_WINGS: dict[str, str] = {"msprobe_config": "RL5"}  # wing -> the code family its findings feed
_CODE = re.compile(r"\bRL\d{3}\b")


@pytest.mark.parametrize("wing", sorted(DOMAIN_WINGS))
def test_domain_wings_never_name_a_lint_code(wing: str) -> None:
    named = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}" for path in sorted((PACKAGE / wing).rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if _CODE.search(line)]
    assert not named, "a domain wing answers in typed findings, never in lint codes:\n" + "\n".join(named)


def _code_literals(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module that is exactly a lint code (docstrings and messages that
    mention a code in prose are not)."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _CODE.fullmatch(node.value)]


@pytest.mark.parametrize("family", sorted(set(DOMAIN_WINGS.values())))
def test_each_code_of_a_domain_family_is_stated_once_in_its_rule(family: str) -> None:
    stated: dict[str, list[str]] = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *RULES.glob("*.py")]):
        for line, code in _code_literals(path):
            if code.startswith(family):
                stated.setdefault(code, []).append(f"{path.relative_to(ROOT)}:{line}")
    rules = {path.stem.split("_", 1)[0].upper(): path for path in RULES.glob("rl*.py")}
    assert {code for code in rules if code.startswith(family)} <= set(stated), "every rule states its own code"
    elsewhere = {code: places for code, places in stated.items()
                 if len(places) != 1 or not places[0].startswith(f"{rules[code].relative_to(ROOT)}:")}
    assert not elsewhere, f"each {family}xx code is stated once, in its rule module: {elsewhere}"


@pytest.mark.parametrize("wing", sorted(DOMAIN_WINGS))
def test_rules_reach_domain_wings_only_through_their_api(wing: str) -> None:
    bad = [f"{path.relative_to(ROOT)}:{line} imports {module}; use rlpatch.{wing}.{WING_DOOR}"
           for path in sorted(RULES.glob("*.py")) for line, module in _rule_imports(path)
           if module.split(".")[1:2] == [wing] and module.split(".")[2:] != [WING_DOOR]]
    assert not bad, "\n".join(bad)


def _rule_imports(path: Path) -> list[tuple[int, str]]:
    """Every `rlpatch.X` module a rule module imports (the rules are the package `rlpatch.rules`)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("rlpatch.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rlpatch."):
            found += [(node.lineno, _submodule(node.module or "", alias.name)) for alias in node.names]
    return found
