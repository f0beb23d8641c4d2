"""Rule pages (issue 22, item 10): every rule's page has its fixed sections, `rlpatch rule CODE` renders
it without reprs or paths, the committed docs/rules pages are the generator's output, the site builds
with `mkdocs build --strict`, and every lint finding links to its page (JSON, SARIF, full)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from rlpatch import registry
from rlpatch.lint import docs, docs_site
from rlpatch.testing import FIXTURES_ROOT

ROOT = Path(__file__).resolve().parent.parent
LINT_CODES = [cls.code for cls in registry.lint_rule_classes()]
PATCH_IDS = [rule.id for rule in registry.patch_rules()]
BAD = ("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.enforce_eager=False \\\n"
       "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=/tmp/rlpatch-docs-test.json\n")


def _doc(cls: type) -> str:
    return sys.modules[cls.__module__].__doc__ or ""


@pytest.mark.parametrize("code", LINT_CODES)
def test_lint_rule_docstring_is_a_page(code: str) -> None:
    cls = next(c for c in registry.lint_rule_classes() if c.code == code)
    assert docs.docstring_problems(_doc(cls), docs.AUTHORED_LINT, docs.REQUIRED_LINT) == []


@pytest.mark.parametrize("rule_id", PATCH_IDS)
def test_patch_rule_docstring_is_a_page(rule_id: str) -> None:
    rule = next(r for r in registry.patch_rules() if r.id == rule_id)
    assert docs.docstring_problems(_doc(type(rule)), docs.AUTHORED_PATCH, docs.REQUIRED_PATCH) == []


def test_docstring_problems_are_found() -> None:
    problems = docs.docstring_problems("RL9: x\n\nstray\n\n## Why\n\n## Colour\n\nblue\n", docs.AUTHORED_LINT,
                                       docs.REQUIRED_LINT)
    assert any("stray" in p for p in problems) and any("Colour" in p for p in problems)
    assert any("'Why' is missing or empty" in p for p in problems) and any("What it does" in p for p in problems)


@pytest.mark.parametrize("code", LINT_CODES + PATCH_IDS)
def test_every_section_is_there_and_non_empty(code: str) -> None:
    page = docs.page_for(code)
    assert page is not None
    expected = docs.LINT_SECTIONS if code in LINT_CODES else docs.PATCH_SECTIONS
    titles = tuple(section.title for section in page.sections)
    if docs.FIX_SECTION in titles:  # the rules whose cases pin a fix: right after "Use instead"
        assert titles.index(docs.FIX_SECTION) == expected.index("Use instead") + 1
        titles = tuple(title for title in titles if title != docs.FIX_SECTION)
    assert titles == expected
    for section in page.sections:
        assert section.text.strip(), (code, section.title)
    example = next(s for s in page.sections if s.title == "Example")
    assert example.examples, code
    if code in LINT_CODES:
        assert next(s for s in page.sections if s.title == "Use instead").examples, code


@pytest.mark.parametrize("code", LINT_CODES + PATCH_IDS)
def test_rule_command_renders_without_reprs_or_paths(code: str) -> None:
    result = run_cli("rule", code)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.startswith(f"{code} (")
    for title in (docs.LINT_SECTIONS if code in LINT_CODES else docs.PATCH_SECTIONS):
        assert f"\n{title}\n{'-' * len(title)}\n" in out, title
    for forbidden in ("{'", "'}", "extra=", "fixtures/", FIXTURES_ROOT, str(ROOT), "Case(", "LintOptions("):
        assert forbidden not in out, (code, forbidden)
    assert "Documentation:" not in out and "docs/rules" not in out  # no address configured: none that would not open


def test_rl601_page_names_the_trees_by_option_and_version() -> None:
    out = run_cli("rule", "RL601").stdout
    assert "linted with an SGLang 0.5.10 tree given (--sglang-root)" in out
    bad, good = docs.example_pair(*(lambda c: (c.INVALID, c.VALID))(
        next(c for c in registry.lint_rule_classes() if c.code == "RL601")))
    assert bad is not None and good is not None and bad.script != good.script


@pytest.mark.parametrize("code", LINT_CODES)
def test_bad_and_good_examples_differ(code: str) -> None:
    cls = next(c for c in registry.lint_rule_classes() if c.code == code)
    bad, good = docs.example_pair(cls.INVALID, cls.VALID)
    assert bad is not None and good is not None
    assert (bad.script, bad.files, bad.context) != (good.script, good.files, good.context)


def test_unknown_rule_is_a_one_line_error() -> None:
    result = run_cli("rule", "RL999")
    assert result.exit_code == 2 and result.stderr.startswith("rlpatch: error: unknown rule code: RL999")
    assert run_cli("rule", "no-such-patch").exit_code == 2


def test_committed_pages_are_the_generators_output() -> None:
    assert docs_site.stale(str(ROOT / "docs")) == [], "run `make docs-pages` (never edit docs/rules by hand)"


def test_generator_writes_and_checks(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "RL000.md").write_text("a page no rule has\n")
    assert docs_site.main([str(tmp_path), "--check"]) == 1
    assert docs_site.main([str(tmp_path)]) == 0
    assert docs_site.main([str(tmp_path), "--check"]) == 0
    assert not (tmp_path / "rules" / "RL000.md").exists()
    assert len(list((tmp_path / "rules").glob("*.md"))) == len(LINT_CODES) + len(PATCH_IDS) + 1


def test_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra (pip install '.[docs]'); make test installs it")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "rules" / "RL201.html").is_file()
    assert (tmp_path / "site" / "rules" / "verl-engine-fsdp.html").is_file()


def _lint(tmp_path: Path, fmt: str, env: dict[str, str] | None = None) -> str:
    (tmp_path / "run.sh").write_text(BAD)
    proc = subprocess.run([sys.executable, "-m", "rlpatch", "lint", "--format", fmt, "run.sh"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None})
    assert proc.returncode == 1, proc.stderr
    return proc.stdout


def test_findings_point_at_what_works_installed_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No docs address configured: a path inside rlpatch's repository would open nothing for a pip, pipx or
    uv user, so the text points at `rlpatch rule CODE`, JSON has no url, and SARIF carries the page itself."""
    monkeypatch.delenv(docs.DOCS_URL_ENV, raising=False)
    findings = json.loads(_lint(tmp_path, "json"))["findings"]
    assert findings and all(f["url"] is None for f in findings)
    full = _lint(tmp_path, "full")
    assert "  docs: rlpatch rule RL101\n" in full and "docs/rules" not in full
    rules = json.loads(_lint(tmp_path, "sarif"))["runs"][0]["tool"]["driver"]["rules"]
    assert all("helpUri" not in rule for rule in rules)
    # GitHub code scanning renders help.markdown beside the alert: the whole page, as the docs site has it.
    for rule in rules:
        page = (ROOT / "docs" / "rules" / f"{rule['id']}.md").read_text(encoding="utf-8")
        assert page.endswith(rule["help"]["markdown"]) and rule["help"]["markdown"].startswith("# "), rule["id"]


def test_findings_link_to_the_configured_site(tmp_path: Path) -> None:
    env = {docs.DOCS_URL_ENV: "https://docs.example.org/rlpatch/"}
    findings = json.loads(_lint(tmp_path, "json", env))["findings"]
    assert {f["url"] for f in findings} >= {"https://docs.example.org/rlpatch/rules/RL101.html"}
    assert "  docs: https://docs.example.org/rlpatch/rules/RL101.html\n" in _lint(tmp_path, "full", env)
    sarif = json.loads(_lint(tmp_path, "sarif", env))
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert all(rule["helpUri"] == f"https://docs.example.org/rlpatch/rules/{rule['id']}.html" for rule in rules)
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} <= {rule["id"] for rule in rules}


def test_docs_url_from_pyproject(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(docs.DOCS_URL_ENV, raising=False)
    (tmp_path / "pyproject.toml").write_text('[tool.rlpatch]\ndocs-url = "https://site.example.org"\n')
    findings = json.loads(_lint(tmp_path, "json"))["findings"]
    assert {f["url"] for f in findings} >= {"https://site.example.org/rules/RL101.html"}
    monkeypatch.chdir(tmp_path)
    assert run_cli("rule", "RL101").stdout.rstrip().endswith("Documentation: https://site.example.org/rules/RL101.html")
