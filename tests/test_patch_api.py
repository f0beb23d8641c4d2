"""The patch wing's typed door (`rlpatch.patch.api`): usable without the command line, and what a
command did to a rule is an `Outcome` the code can ask, kept apart from what the rule found (`Finding`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ENGINE_RULES, snapshot

from rlpatch.patch import api


@pytest.fixture
def tree(fixture_tree):
    return fixture_tree("verl_engine")


def test_the_door_imports_no_command_line() -> None:
    code = "import sys, rlpatch.patch.api\nprint('click' in sys.modules, 'rlpatch.patch.cli' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_apply_and_revert_say_what_they_did_to_each_rule(tree: Path) -> None:
    pristine = snapshot(tree)
    heard: list[str] = []
    options = api.ApplyOptions(verl_root=str(tree), rule_ids=",".join(ENGINE_RULES))
    rules, targets = api.select(options, heard.append)

    dry = api.apply(targets, rules, api.ApplyOptions(verl_root=str(tree), rule_ids=",".join(ENGINE_RULES), dry_run=True))
    assert dry.rules_with(api.Outcome.WOULD_APPLY) == sorted(ENGINE_RULES) and snapshot(tree) == pristine

    applied = api.apply(targets, rules, options, heard.append)
    assert not applied.refused and applied.error is None and not applied.commits
    assert applied.rules_with(api.Outcome.APPLIED_NOW) == sorted(ENGINE_RULES)
    assert [report.message for report in applied.reports] == ["applied now"] * len(ENGINE_RULES)
    assert api.verify(targets, rules).in_place()

    again = api.apply(targets, rules, options)
    assert again.rules_with(api.Outcome.APPLIED_NOW) == []
    assert again.rules_with(api.Outcome.ALREADY_APPLIED) == sorted(ENGINE_RULES)

    reverted = api.revert(targets, rules)
    assert not reverted.refused and [done.outcome for done in reverted.outcomes] == [api.Outcome.REVERTED] * len(ENGINE_RULES)
    assert snapshot(tree) == pristine
    assert heard == []  # nothing to recover, no root ignored: nothing to say


def test_verify_payload_is_verify_json_without_a_lock(tree: Path) -> None:
    rules, targets = api.select(api.TargetOptions(verl_root=str(tree)))
    assert api.verify_payload(verl_root=str(tree)) == api.verify(targets, rules).payload()
    assert not (tree / ".rlpatch").exists()


def test_a_report_keeps_what_it_found_apart_from_what_the_command_did(tree: Path) -> None:
    """The finding is decided by reading the tree and never changes; the outcome says what the command
    did; the state and message shown derive from the two (never rewritten after the fact)."""
    options = api.ApplyOptions(verl_root=str(tree), rule_ids=",".join(ENGINE_RULES))
    rules, targets = api.select(options)
    applied = api.apply(targets, rules, options)
    first = applied.reports[0]
    assert (first.finding, first.outcome, first.state, first.message) == (
        api.Finding.ABSENT, api.Outcome.APPLIED_NOW, "applied", "applied now")
    assert first.remark == "applied now"  # what the text report shows in brackets

    looked = api.verify(targets, rules).reports[0]
    assert (looked.finding, looked.outcome, looked.state, looked.message, looked.remark) == (
        api.Finding.APPLIED, None, "applied", "applied", "")
    reverted = api.revert(targets, rules).reports[0]
    assert (reverted.finding, reverted.outcome, reverted.state) == (api.Finding.APPLIED, api.Outcome.REVERTED, "absent")


def test_a_release_that_needs_force_is_refused_by_its_outcome(tree: Path) -> None:
    (tree / "verl/version/version").write_text("0.6.0\n")
    options = api.ApplyOptions(verl_root=str(tree), rule_ids=",".join(ENGINE_RULES))
    rules, targets = api.select(options)
    result = api.apply(targets, rules, options)
    assert result.refused and result.refusals
    for report in result.refusals:
        assert (report.finding, report.outcome, report.state) == (api.Finding.ABSENT, api.Outcome.NEEDS_FORCE, "refused")
        assert report.message == f"{report.warning}; pass --force to patch anyway"
    forced = api.apply(targets, rules, api.ApplyOptions(verl_root=str(tree), rule_ids=",".join(ENGINE_RULES), force=True))
    assert not forced.refused and forced.rules_with(api.Outcome.APPLIED_NOW) == sorted(ENGINE_RULES)
