"""Each patch rule's own VALID / INVALID cases, turned into tests (Fixit style).

VALID sources must be patched into code that compiles, that `locate` then finds applied, and that
stripping turns back into the original bytes. INVALID sources must be refused with an AnchorError.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from rlpatch import registry
from rlpatch.patch import edits
from rlpatch.patch.rule import AnchorError

RULES = registry.patch_rules()


def _cases(kind: str):
    for rule in RULES:
        module = __import__(type(rule).__module__, fromlist=[kind])
        for index, source in enumerate(getattr(module, kind, [])):
            yield pytest.param(rule, textwrap.dedent(source).lstrip("\n"), id=f"{rule.id}-{kind.lower()}-{index}")


@pytest.mark.parametrize("rule, source", list(_cases("VALID")))
def test_valid_case_patches_and_strips_back(rule, source):
    path = rule.files[0]
    module = cst.parse_module(source)
    insertions = rule.insertions(path, module)
    assert insertions and all(edits.locate(module, i).state == "absent" for i in insertions)
    patched = edits.insert(module, insertions).code
    compile(patched, path, "exec")

    reparsed = cst.parse_module(patched)
    sites = [edits.locate(reparsed, i) for i in rule.insertions(path, reparsed)]
    assert [site.state for site in sites] == ["applied"] * len(insertions)
    assert edits.strip(reparsed, sites).code == source


@pytest.mark.parametrize("rule, source", list(_cases("INVALID")))
def test_invalid_case_is_refused(rule, source):
    with pytest.raises(AnchorError) as raised:
        rule.insertions(rule.files[0], cst.parse_module(source))
    assert "expected" in str(raised.value) and "found" in str(raised.value)


def test_every_rule_has_cases():
    for rule in RULES:
        module = __import__(type(rule).__module__, fromlist=["VALID"])
        assert getattr(module, "VALID", None), f"{rule.id} has no VALID cases"
        assert getattr(module, "INVALID", None), f"{rule.id} has no INVALID cases"


def test_every_rule_documents_different_good_and_bad_shapes():
    """`rlpatch rule ID` shows the first VALID (good) and INVALID (bad) case: they must differ."""
    same = []
    for rule in RULES:
        module = __import__(type(rule).__module__, fromlist=["VALID"])
        good, bad = getattr(module, "VALID", [""])[0], getattr(module, "INVALID", [""])[0]
        if textwrap.dedent(good).strip() == textwrap.dedent(bad).strip():
            same.append(rule.id)
    assert not same, same
