"""`rlpatch gen` against released verl wheels (0.7.1, 0.8.0, 0.9.1): the generated script, run under
stand-ins, hands verl overrides that compose with hydra-core against that version's real config
tree, with the spec's values; `rlpatch lint` (same version) finds no error in it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from gen_harness import (
    GEN_FIXTURES,
    check_received,
    compose_real,
    copy_fixtures,
    expected,
    run_with_stand_ins,
    written,
)
from test_gen import CASES

pytestmark = pytest.mark.upstream


def _plain(value) -> str:
    from omegaconf import ListConfig

    if value is None:
        return "null"
    if isinstance(value, ListConfig):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


@pytest.mark.parametrize("fixture,mode,verl,options,shape", CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_received_overrides_compose_on_the_real_config(tmp_path: Path, fixture, mode, verl, options, shape) -> None:
    from omegaconf import OmegaConf

    folder = copy_fixtures(tmp_path)
    original = (folder / f"{fixture}.sh").read_bytes()
    result = run_cli("gen", mode, str(folder / f"{fixture}.sh"), "--verl-version", verl, *options)
    assert written(result), result.stdout + result.stderr
    assert (folder / f"{fixture}.sh").read_bytes() == original
    new = folder / f"{fixture}.{mode}-dump.sh"
    calls = run_with_stand_ins(new, tmp_path)
    want, want_env = expected(mode, verl, **shape)
    for call in calls:
        assert check_received(call, want, want_env, folder.resolve()) == []
        config = compose_real(verl, call.hydra_args)
        for key, value in want.items():
            composed = OmegaConf.select(config, key, throw_on_missing=False)
            assert value == "<config>" and composed == call.final()[key] or _plain(composed) == value, key
        if shape.get("megatron"):
            assert OmegaConf.select(config, "actor_rollout_ref.actor.strategy") == "megatron"
    lint = run_cli("lint", "--format", "json", "--verl-version", verl, str(new))
    errors = [f for f in json.loads(lint.stdout)["findings"] if f["severity"] == "error"]
    assert errors == [], errors


def test_unknown_release_is_bad_input(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    before = sorted(p.name for p in folder.iterdir())
    result = run_cli("gen", "inference", str(folder / "legacy_07.sh"), "--verl-version", "0.9.9")
    assert result.exit_code == 2 and "cannot download verl==0.9.9" in result.stderr
    assert sorted(p.name for p in folder.iterdir()) == before


@pytest.mark.upstream
def test_consistency_on_verl_0_5_0_is_refused_before_writing(tmp_path: Path) -> None:
    """Issue 28 item 2: the consistency set cannot take effect on 0.5.0; gen refuses like training mode does."""
    script = tmp_path / "run.sh"
    shutil.copy(GEN_FIXTURES / "megatron_vllm.sh", script)
    result = run_cli("gen", "consistency", str(script), "--verl-version", "0.5.0")
    assert result.exit_code == 2 and "consistency mode needs verl >= 0.7.0" in result.stderr
    assert "inference mode" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]
