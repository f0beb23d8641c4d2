"""The patch wing's typed door (`rlpatch.patch.api`): usable without the command line, and what a
command did to a rule is an `Outcome` the code can ask, whose value is the message the report shows.
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
