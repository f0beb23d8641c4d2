"""Each patch rule class's own VALID / INVALID cases (PatchCase), turned into tests (Fixit / LibCST style),
as tests/test_lint_rule_cases.py turns each lint rule class's Cases.

A VALID case pins the exact patched text (`expected`, the diff users review); it must also compile,
be found applied so that a second apply is a no-op, and strip back into the original bytes. An
INVALID case must be refused with an AnchorError whose message holds its `refusal`.
"""

from __future__ import annotations

import textwrap

import pytest

from rlpatch import registry
from rlpatch.patch.rule import PatchCase
from rlpatch.testing import check_patch_case, check_refused_case

RULES = registry.patch_rules()


def _cases(kind: str):
    for rule in RULES:
        for index, case in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, case, id=f"{rule.id}-{kind.lower()}-{index}")


@pytest.mark.parametrize("rule, case", list(_cases("VALID")))
def test_valid_case_patches_into_its_expected_text_and_strips_back(rule, case):
    assert isinstance(case, PatchCase) and case.expected is not None
    check_patch_case(rule, case)


@pytest.mark.parametrize("rule, case", list(_cases("INVALID")))
def test_invalid_case_is_refused_with_its_message(rule, case):
    assert isinstance(case, PatchCase) and case.refusal
    check_refused_case(rule, case)


def test_every_rule_has_cases():
    for rule in RULES:
        assert rule.VALID, f"{rule.id} has no VALID cases"
        assert rule.INVALID, f"{rule.id} has no INVALID cases"


def test_cases_are_class_attributes_of_the_rule():
    """Like a lint rule's Cases, a patch rule's cases live on its class, not beside it in the module."""
    for rule in RULES:
        module = __import__(type(rule).__module__, fromlist=["VALID"])
        assert not hasattr(module, "VALID") and not hasattr(module, "INVALID"), type(rule).__module__


def test_every_rule_documents_different_good_and_bad_shapes():
    """`rlpatch rule ID` shows the first VALID (good) and INVALID (bad) case: they must differ."""
    same = []
    for rule in RULES:
        good, bad = rule.VALID[0], rule.INVALID[0]
        if textwrap.dedent(good.source).strip() == textwrap.dedent(bad.source).strip():
            same.append(rule.id)
    assert not same, same


def test_a_case_is_either_patched_or_refused():
    with pytest.raises(ValueError):
        PatchCase("x = 1\n")
    with pytest.raises(ValueError):
        PatchCase("x = 1\n", expected="x = 1\n", refusal="found 0")
