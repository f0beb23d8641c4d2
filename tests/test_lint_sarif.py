"""SARIF for code scanning (issue 32, item 6): fingerprints that survive unrelated edits, rule tags, the
lowest severity written set in [tool.rlpatch], and informationUri only for a configured address."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

SCRIPT = """\
python3 -m verl.trainer.main_ppo \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=3 \\
    trainer.n_gpus_per_node=$(nproc)
"""


def _sarif(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> dict:
    from rlpatch.lint.config import find_config

    find_config.cache_clear()  # run in-process: a pyproject.toml written between runs must be read
    monkeypatch.chdir(tmp_path)
    return json.loads(run_cli("lint", "--format", "sarif", *args, "run.sh").stdout)


def _fingerprints(log: dict) -> dict[str, str]:
    return {r["ruleId"]: r["partialFingerprints"]["rlpatch/v1"] for r in log["runs"][0]["results"]}


def test_fingerprints_survive_unrelated_edits_and_change_with_the_finding(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLPATCH_DOCS_URL", raising=False)
    (tmp_path / "run.sh").write_text(SCRIPT)
    before = _fingerprints(_sarif(tmp_path, monkeypatch, "--no-config"))
    assert set(before) == {"RL002"} and all(value.endswith(":1") for value in before.values())
    (tmp_path / "run.sh").write_text("#!/bin/bash\n# a comment added above\nset -e\n\n" + SCRIPT)
    assert _fingerprints(_sarif(tmp_path, monkeypatch, "--no-config")) == before  # lines moved: same alerts
    (tmp_path / "run.sh").write_text(SCRIPT.replace("$(nproc)", "$(nproc --all)"))
    assert _fingerprints(_sarif(tmp_path, monkeypatch, "--no-config")) != before  # what it flags changed


def test_rule_tags_severity_floor_and_information_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLPATCH_DOCS_URL", raising=False)
    (tmp_path / "run.sh").write_text(SCRIPT.replace("$(nproc)", "8"))
    log = _sarif(tmp_path, monkeypatch, "--no-config")
    driver = log["runs"][0]["tool"]["driver"]
    assert "informationUri" not in driver
    tags = {rule["id"]: rule["properties"]["tags"] for rule in driver["rules"]}
    assert tags["RL401"] == ["rlpatch", "parallel-sizes"] and tags["RL302"] == ["rlpatch", "hydra-config"]
    assert tags["RL201"] == ["rlpatch", "training-inference-consistency", "mode:consistency"]
    assert {r["ruleId"] for r in log["runs"][0]["results"]} >= {"RL401"}
    (tmp_path / "pyproject.toml").write_text('[tool.rlpatch]\nsarif-severity = "error"\n'
                                             'docs-url = "https://docs.example.org/rlpatch"\n')
    (tmp_path / "run.sh").write_text(SCRIPT.replace("trainer.n_gpus_per_node=$(nproc)", "data.train_files=$HOME/d"))
    # an RL002 info (the path) and the RL401 error
    log = _sarif(tmp_path, monkeypatch)
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["RL401"]
    assert log["runs"][0]["tool"]["driver"]["informationUri"] == "https://docs.example.org/rlpatch/"
    assert sorted(r["ruleId"] for r in _sarif(tmp_path, monkeypatch, "-S", "info")["runs"][0]["results"]) == ["RL002", "RL401"]
