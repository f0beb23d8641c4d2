"""An input that could not be linted never looks like a pass, in any output format (issue 10, item 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

FORMATS = ("concise", "full", "json", "github", "sarif")
CLEAN = "python3 -m verl.trainer.main_ppo trainer.nnodes=1\n"
BAD = ("python3 -m verl.trainer.main_ppo \\\n"
       "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=d.json \\\n"
       "    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.enforce_eager=False\n")


def lint(fmt: str, *paths: Path):
    return run_cli("lint", "--format", fmt, "--select", "RL1", "--jobs", "1", *map(str, paths))


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_unreadable_file_alone_is_not_a_pass(fmt: str, tmp_path: Path) -> None:
    result = lint(fmt, tmp_path / "missing.sh")
    assert result.exit_code == 2
    assert result.stderr == f"rlpatch: error: {tmp_path / 'missing.sh'}: no such file\n"
    assert "passed" not in result.stdout.lower()
    if fmt in ("concise", "full"):
        assert result.stdout == "No findings, but 1 file could not be linted (errors on stderr).\n"
    elif fmt == "json":
        assert json.loads(result.stdout)["findings"] == []  # the findings contract; the error is on stderr
    elif fmt == "github":  # an annotation, so the pull request shows the failure
        assert result.stdout == f"::error file={tmp_path / 'missing.sh'},title=rlpatch (input error)::" \
                                f"{tmp_path / 'missing.sh'}: no such file\n"
    else:
        invocation = json.loads(result.stdout)["runs"][0]["invocations"][0]
        assert invocation["executionSuccessful"] is False
        assert "no such file" in invocation["toolExecutionNotifications"][0]["message"]["text"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_failed_file_beside_linted_ones(fmt: str, tmp_path: Path) -> None:
    clean, bad = tmp_path / "clean.sh", tmp_path / "bad.sh"
    clean.write_text(CLEAN)
    bad.write_text(BAD)
    both_fine = lint(fmt, clean, clean)
    assert both_fine.exit_code == 0 and both_fine.stderr == ""
    with_failure = lint(fmt, clean, tmp_path / "gone.sh")  # (a directory is linted recursively since issue 22)
    assert with_failure.exit_code == 2 and "passed" not in with_failure.stdout.lower()
    with_findings = lint(fmt, bad, tmp_path / "missing.sh")
    assert with_findings.exit_code == 2
    if fmt in ("concise", "full"):
        assert both_fine.stdout.endswith("All checks passed.\n")
        assert with_failure.stdout.endswith("No findings, but 1 file could not be linted (errors on stderr).\n")
        assert with_findings.stdout.endswith("Found 1 finding, but 1 file could not be linted (errors on stderr).\n")
    elif fmt == "github":
        assert both_fine.stdout == ""
        assert with_failure.stdout.startswith("::error ") and "title=rlpatch (input error)" in with_failure.stdout
        assert [line.split(" ")[0] for line in with_findings.stdout.splitlines()] == ["::error", "::error"]
    elif fmt == "sarif":
        for result, ok in ((both_fine, True), (with_failure, False), (with_findings, False)):
            assert json.loads(result.stdout)["runs"][0]["invocations"][0]["executionSuccessful"] is ok


def test_github_escapes_file_properties(tmp_path: Path) -> None:
    odd = tmp_path / "a,b:c.sh"
    result = lint("github", odd)
    assert result.stdout.startswith(f"::error file={tmp_path}/a%2Cb%3Ac.sh,title=")
