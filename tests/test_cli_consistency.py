"""`rlpatch apply --mode consistency` end to end on real verl releases (issue 3), through the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli, snapshot
from scopecheck import scope_problems

from rlpatch.upstream.wheelcache import fresh_copy, unpacked_tree

pytestmark = pytest.mark.upstream

CONSISTENCY = ("verl-prompts-only", "verl-prompts-only-async", "verl-debug-metrics", "verl-rollout-corr",
               "verl-request-id", "verl-request-id-async", "verl-prompts-only-v1", "verl-request-id-v1")
APPLIED_FROM = {"verl-prompts-only": "0.7.0", "verl-debug-metrics": "0.7.0", "verl-rollout-corr": "0.7.0",
                "verl-request-id": "0.7.1", "verl-prompts-only-async": "0.8.0", "verl-request-id-async": "0.8.0",
                "verl-prompts-only-v1": "0.9.0", "verl-request-id-v1": "0.9.0"}
METRICS = "verl/utils/debug/metrics.py"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _json(*args: str) -> dict:
    result = run_cli(*args, "--format", "json")
    return {"exit_code": result.exit_code, **json.loads(result.stdout)["targets"][0]}


def _states(payload: dict) -> dict[str, str]:
    return {rule["id"]: rule["state"] for rule in payload["rules"]}


@pytest.mark.parametrize("version", ["0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1"])
def test_apply_mode_consistency_on_a_release(verl_tree, tmp_path: Path, version: str) -> None:
    tree = verl_tree(version)
    pristine = snapshot(tree)
    root = ["--verl-root", str(tree), "--mode", "consistency"]

    diff = run_cli("diff", *root)
    assert diff.exit_code == 0 and snapshot(tree) == pristine

    applied = _json("apply", *root)
    assert applied["exit_code"] == 0
    states = _states(applied)
    for rule_id in CONSISTENCY:
        expected = "applied" if _key(version) >= _key(APPLIED_FROM[rule_id]) else "not-applicable"
        assert states[rule_id] == expected, (rule_id, states[rule_id])
    assert applied["state"] == "applied" and applied["not_applied"] == []

    source = unpacked_tree("verl", version)
    touched = sorted({path for rule in applied["rules"] for path in rule["files"]})
    for relative in touched:
        original, patched = (source / relative).read_text(), (tree / relative).read_text()
        compile(patched, relative, "exec")
        assert scope_problems(original, patched, relative) == []

    assert run_cli("verify", *root).exit_code == 0
    patched_tree = snapshot(tree)
    again = run_cli("apply", *root)
    assert again.exit_code == 0 and snapshot(tree) == patched_tree  # idempotent

    diff_file = tmp_path / "consistency.diff"
    diff_file.write_text(diff.stdout, encoding="utf-8")
    for tool in (["git", "apply"], ["patch", "-p1", "-s", "-i"]):
        copy = fresh_copy("verl", version, tmp_path / f"copy-{tool[0]}")
        subprocess.run([*tool, str(diff_file)], cwd=copy, check=True, capture_output=True)
        for relative in touched:
            assert (copy / relative).read_bytes() == (tree / relative).read_bytes(), (tool[0], relative)

    assert run_cli("revert", *root).exit_code == 0
    assert snapshot(tree) == pristine


@pytest.mark.parametrize("version", ["0.6.0", "0.6.1"])
def test_consistency_rules_are_not_applicable_before_0_7(verl_tree, version: str) -> None:
    tree = verl_tree(version)
    payload = _json("status", "--verl-root", str(tree), "--rules", ",".join(CONSISTENCY))
    assert payload["exit_code"] == 0
    assert set(_states(payload).values()) == {"not-applicable"}
    assert all(f"verl {version}" in rule["message"] for rule in payload["rules"])


def test_status_names_the_file_reverted_by_hand_and_apply_completes_it(verl_tree) -> None:
    tree = verl_tree("0.9.1")
    root = ["--verl-root", str(tree), "--rules", ",".join(CONSISTENCY)]
    assert run_cli("apply", *root).exit_code == 0
    pristine_metrics = (unpacked_tree("verl", "0.9.1") / METRICS).read_bytes()
    (tree / METRICS).write_bytes(pristine_metrics)  # one file reverted by hand

    payload = _json("status", *root)
    assert payload["exit_code"] == 0
    assert payload["state"] == "partial" and payload["not_applied"] == [METRICS]
    assert _states(payload)["verl-debug-metrics"] == "absent"
    text = run_cli("status", *root)
    assert text.exit_code == 0 and f"set: partial; not applied: {METRICS}" in text.stdout
    assert run_cli("verify", *root).exit_code == 1

    assert run_cli("apply", *root).exit_code == 0
    completed = _json("status", *root)
    assert completed["state"] == "applied" and set(_states(completed).values()) == {"applied"}
    assert "skipping debug metrics" in (tree / METRICS).read_text()
    assert run_cli("verify", *root).exit_code == 0


def test_hand_edited_request_id_is_drifted_and_revert_refuses(verl_tree) -> None:
    tree = verl_tree("0.9.1")
    root = ["--verl-root", str(tree), "--rules", "verl-request-id"]
    assert run_cli("apply", *root).exit_code == 0
    server = tree / "verl/workers/rollout/llm_server.py"
    server.write_text(server.read_text().replace("request_id=vllm_request_id,", "request_id=uuid4().hex,"))
    before = snapshot(tree)
    status = _json("status", *root)
    assert _states(status)["verl-request-id"] == "drifted"
    assert run_cli("revert", *root).exit_code == 1
    assert snapshot(tree) == before
