"""Every lint rule's own VALID/INVALID cases, as one parametrized test over the registry."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from rlpatch import rules
from rlpatch.lint.engine import rule_classes
from rlpatch.lint.rule import LintRule
from rlpatch.testing import fixed_case, lint_case

CASES = [
    pytest.param(cls, kind, case, id=f"{cls.code}-{kind}-{index}")
    for cls in rule_classes()
    for kind, cases in (("valid", cls.VALID), ("invalid", cls.INVALID))
    for index, case in enumerate(cases)
]


@pytest.mark.parametrize("rule_cls,kind,case", CASES)
def test_rule_case(rule_cls: type[LintRule], kind: str, case) -> None:
    findings = lint_case(rule_cls, case)
    positions = sorted((f.span.line, f.span.column) for f in findings)
    if kind == "valid":
        assert findings == [], f"{rule_cls.code} fired on a VALID case: {[f.message for f in findings]}"
    else:
        assert findings, f"{rule_cls.code} did not fire on an INVALID case"
        if case.expect is not None:
            assert positions == sorted(case.expect), [f.message for f in findings]
        if case.messages is not None:
            in_order = [f.message for f in sorted(findings, key=lambda f: (f.span.line, f.span.column))]
            assert in_order == list(case.messages)
        for finding in findings:
            assert finding.severity in ("error", "warning", "info")
            assert finding.span.line >= 1 and finding.span.column >= 1


FIX_CASES = [pytest.param(cls, case, id=f"{cls.code}-fix-{index}")
             for cls in rule_classes() for index, case in enumerate(cls.INVALID) if case.fixed is not None]


@pytest.mark.parametrize("rule_cls,case", FIX_CASES)
def test_rule_fix(rule_cls: type[LintRule], case) -> None:
    """The fix writes exactly the expected script, and that script no longer has this rule's findings."""
    fixed = fixed_case(rule_cls, case)
    assert fixed == case.fixed
    assert lint_case(rule_cls, case._replace(script=fixed, fixed=None)) == []


def test_every_rule_has_cases_and_docs() -> None:
    for cls in rule_classes():
        assert cls.VALID and cls.INVALID, cls.code
        assert cls.why().strip(), cls.code
        assert cls.summary, cls.code
        doc = cls.documentation()
        assert "\nExample\n" in doc and "\nUse instead\n" in doc


def test_registry_lists_every_lint_module_once() -> None:
    names = [m.name for m in pkgutil.iter_modules(rules.__path__)]
    lint_modules = [n for n in names if n.startswith("rl") and n[2:5].isdigit()]
    assert sorted(lint_modules) == sorted(rules.LINT_RULE_MODULES)
    assert len(set(rules.LINT_RULE_MODULES)) == len(rules.LINT_RULE_MODULES)
    codes = [cls.code for cls in rule_classes()]
    assert len(codes) == len(set(codes))
    for name in rules.LINT_RULE_MODULES:
        module = importlib.import_module(f"rlpatch.rules.{name}")
        assert module.__doc__ and module.__doc__.startswith(name[:5].upper()), name


MODES = ("training", "inference", "consistency", "none")
MODE_CASES = [
    pytest.param(cls, mode, id=f"{cls.code}-{mode}")
    for cls in rule_classes() if cls.INVALID and not cls.code.startswith("RL0")
    for mode in MODES
]


@pytest.mark.parametrize("rule_cls,mode", MODE_CASES)
def test_rule_fires_exactly_in_its_modes(rule_cls: type[LintRule], mode: str) -> None:
    """The first INVALID case, with the mode forced (`--mode`): it triggers in every mode the rule
    covers, at the same positions, and is a near-miss in every other mode."""
    case = rule_cls.INVALID[0]
    forced = case._replace(options={**case.options, "mode": mode})
    findings = lint_case(rule_cls, forced)
    if mode in rule_cls.modes:
        assert findings, f"{rule_cls.code} silent in mode {mode}"
        if case.expect is not None:
            assert sorted((f.span.line, f.span.column) for f in findings) == sorted(case.expect)
    else:
        assert findings == [], f"{rule_cls.code} fired in mode {mode}, which it does not cover"


def test_every_rule_shows_different_bad_and_good_examples() -> None:
    """`rlpatch rule CODE` shows a bad and a good example: the two must differ (issue 10.8)."""
    same = []
    for cls in rule_classes():
        doc = cls.documentation()
        if cls.INVALID and cls.VALID:
            bad, _, good = doc.partition("\nExample\n")[2].partition("\nUse instead\n")
            good = good.partition("\nExceptions and how to silence\n")[0]
            if bad.strip() == good.strip():
                same.append(cls.code)
    assert not same, same
