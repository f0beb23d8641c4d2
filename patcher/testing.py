"""Test support: what rule cases and the crash-safety tests need, kept out of the product's code paths.

The rule classes' VALID/INVALID cases run against small upstream-shaped trees in the repository's
`fixtures/` folder (a wheel does not ship it: those cases run from a checkout only). `lint_case`
runs one lint case, `check_patch_case` / `check_refused_case` one patch rule case (PatchCase);
`paused_cli` is the command line of an rlpatch process that holds each patch transaction open
between two file writes, so a test can SIGKILL it there.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlpatch.lint.rule import Case, Finding, LintOptions, LintRule
    from rlpatch.patch.rule import PatchCase, PatchRule

# The repository's fixtures, next to the package's source folder (patcher/).
FIXTURES_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "fixtures")


def case_root(name: str) -> str:
    """A tree of the repository's fixtures (the rule cases run against them)."""
    return os.path.join(FIXTURES_ROOT, name)


def hydra_case_options(**more: object) -> dict[str, object]:
    """Options for the RL3xx rule cases: the small verl-shaped config tree of the repository's
    fixtures (a verl 0.9.1 look-alike), so that the cases run without downloading verl."""
    return {"verl_root": case_root("verl_mini"), **more}


def lint_case(rule_cls: type[LintRule], case: Case, directory: str | None = None) -> list[Finding]:
    """Lint one Case in a temporary directory with only `rule_cls` selected (every rule, for a rule
    that judges the others' findings); its findings."""
    import tempfile

    from rlpatch.lint.engine import lint_path, select_rules

    with tempfile.TemporaryDirectory(prefix="rlpatch-case-") as tmp:
        base = directory or tmp
        for name, text in case.files.items():
            target = os.path.join(base, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(text)
        script = os.path.join(base, "run.sh")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(case.script)
        rules = select_rules(None, None) if rule_cls.cases_need_every_rule else [rule_cls()]
        result = lint_path(script, case_lint_options(case), rules)
        if result.error:
            raise AssertionError(result.error)
        return [f for f in result.findings if f.code == rule_cls.code]


def fixed_case(rule_cls: type[LintRule], case: Case) -> str:
    """The case's script with every fix of this rule's findings applied (unsafe ones too)."""
    from rlpatch.lint.fixes import apply_fixes
    from rlpatch.shell.api import SourceFile

    fixes = [f.fix for f in lint_case(rule_cls, case) if f.fix is not None and f.span.file.endswith("run.sh")]
    return apply_fixes(SourceFile("run.sh", case.script), fixes)[0]


def case_lint_options(case: Case) -> LintOptions:
    """The LintOptions a Case's `options` stand for (versions and level sets spelled as plain values)."""
    from rlpatch.lint.rule import LintOptions
    from rlpatch.upstream.versions import Version

    values = dict(case.options)
    if "verl_version" in values and isinstance(values["verl_version"], str):
        values["verl_version"] = Version.parse(values["verl_version"])
    if "allow_level" in values:
        values["allow_level"] = frozenset(values["allow_level"])
    return LintOptions(**values)


def check_patch_case(rule: PatchRule, case: PatchCase) -> None:
    """A VALID case, as LibCST's assertCodemod checks a codemod: the rule turns the case's text into
    exactly `expected`; the result compiles; the engine finds it applied and a second apply writes
    nothing; stripping it gives the original bytes back."""
    import difflib

    import libcst as cst

    from rlpatch.patch import edits

    path = case_path(rule, case)
    module = cst.parse_module(case.text)
    insertions = rule.insertions(path, module)
    states = [edits.locate(module, insertion).state for insertion in insertions]
    assert insertions and states == ["absent"] * len(insertions), f"{rule.id}: before patching: {states}"
    patched = edits.insert(module, insertions).code
    assert patched == case.patched, f"{rule.id}: the patched text is not the case's expected text:\n" + "".join(
        difflib.unified_diff(case.patched.splitlines(True), patched.splitlines(True), "expected", "patched"))
    compile(patched, path, "exec", dont_inherit=True)

    reparsed = cst.parse_module(patched)
    sites = [edits.locate(reparsed, insertion) for insertion in rule.insertions(path, reparsed)]
    assert [site.state for site in sites] == ["applied"] * len(insertions), f"{rule.id}: {[s.state for s in sites]}"
    # What apply inserts into a file is its edits still absent (engine.Session._file_plan): none here.
    pending = [site.insertion for site in sites if site.state == "absent"]
    assert edits.insert(reparsed, pending).code == patched, f"{rule.id}: a second apply changes the file"
    assert edits.strip(reparsed, sites).code == case.text, f"{rule.id}: stripping does not give the source back"


def case_path(rule: PatchRule, case: PatchCase) -> str:
    """The file of the rule a case stands for: its `path`, one of the rule's files, else the first."""
    assert case.path is None or case.path in rule.files, f"{rule.id}: {case.path} is none of the rule's files"
    return case.path or rule.files[0]


def check_refused_case(rule: PatchRule, case: PatchCase) -> None:
    """An INVALID case: the rule refuses the case's text with an AnchorError whose message holds `refusal`."""
    import libcst as cst

    from rlpatch.patch.rule import AnchorError

    try:
        rule.insertions(case_path(rule, case), cst.parse_module(case.text))
    except AnchorError as refused:
        assert case.refusal and case.refusal in str(refused), f"{rule.id}: refused with {str(refused)!r}"
    else:
        raise AssertionError(f"{rule.id}: the case was not refused (expected {case.refusal!r})")


def pause_between_writes(seconds: float) -> None:
    """Make every patch transaction of this process sleep `seconds` after each file it writes."""
    import time

    from rlpatch.patch import transaction

    transaction.after_each_write = lambda: time.sleep(seconds)


_PAUSED_CLI = "import sys; from rlpatch.testing import pause_between_writes; pause_between_writes(float(sys.argv.pop(1))); " \
              "from rlpatch.cli import main; main()"


def paused_cli(seconds: float, *args: str) -> list[str]:
    """The command line of `rlpatch ARGS` in a new process whose transactions pause between writes."""
    return [sys.executable, "-c", _PAUSED_CLI, str(seconds), *args]
