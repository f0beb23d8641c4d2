"""RL3xx (and RL605) against the real config directories of released verl wheels.

Every scenario of issue 6's proof list, on verl 0.6.0, 0.7.1, 0.8.0, 0.9.0 and 0.9.1, through the
real `rlpatch lint` command; plus, per version, rlpatch's verdict on single overrides compared with
hydra-core composing that override into the wheel's own config.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from rlpatch.upstream.versions import Version
from rlpatch.upstream.wheelcache import fresh_copy, unpacked_tree

pytestmark = pytest.mark.upstream

VERSIONS = ["0.6.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1"]
ENTRY = "python3 -m verl.trainer.main_ppo"
NAME = "actor_rollout_ref.rollout.name=vllm"
SGLANG_KEY = "actor_rollout_ref.rollout.engine_kwargs.sglang"


@pytest.fixture(scope="module", params=VERSIONS)
def verl(request: pytest.FixtureRequest) -> tuple[Version, Path]:
    return Version.parse(request.param), unpacked_tree("verl", request.param)


def lint(tmp_path: Path, root: Path, *overrides: str, config_name: str | None = None,
         select: str = "RL3,RL103", env: str = "") -> list[tuple[str, int, int]]:
    """(code, line, column) of every finding, one override per script line."""
    head = f"{ENTRY} --config-name {config_name}" if config_name else ENTRY
    script = env + head + "".join(f" \\\n    {override}" for override in overrides) + "\n"
    path = tmp_path / "run.sh"
    path.write_text(script)
    result = run_cli("lint", "--format", "json", "--exit-zero", "--select", select, "--verl-root", str(root), str(path))
    assert result.exit_code == 0, result.stderr
    return [(f["code"], f["line"], f["column"]) for f in json.loads(result.stdout)["findings"]]


def codes(findings: list[tuple[str, int, int]]) -> list[str]:
    return sorted(code for code, _, _ in findings)


def megatron_switch(version: Version) -> tuple[list[str], str | None]:
    """Overrides / config name that select Megatron on this version."""
    return (["model_engine=megatron"], None) if version >= "0.8.0" else ([], "ppo_megatron_trainer")


def test_clean_script(verl: tuple[Version, Path], tmp_path: Path) -> None:
    _, root = verl
    assert lint(tmp_path, root, NAME, "trainer.nnodes=1", "trainer.logger=[console,wandb]") == []


def test_plus_on_null_key_is_fine_on_scalar_is_rl303(verl: tuple[Version, Path], tmp_path: Path) -> None:
    _, root = verl
    assert lint(tmp_path, root, NAME, "+trainer.resume_from_path=/ckpt") == []
    assert lint(tmp_path, root, NAME, "+actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16") == [("RL303", 3, 5)]
    assert lint(tmp_path, root, NAME, "++actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16") == []


def test_engine_kwargs_need_plus(verl: tuple[Version, Path], tmp_path: Path) -> None:
    _, root = verl
    assert lint(tmp_path, root, NAME, f"{SGLANG_KEY}.attention_backend=triton") == [("RL302", 3, 5)]
    assert lint(tmp_path, root, NAME, f"+{SGLANG_KEY}.attention_backend=triton") == []
    # the dump key itself is RL103's (inference mode), not RL302 as well
    found = lint(tmp_path, root, "actor_rollout_ref.rollout.name=sglang", f"{SGLANG_KEY}.msprobe_dump_config=d.json")
    assert codes(found) == ["RL103"]


def test_grad_offload_removed_in_091(verl: tuple[Version, Path], tmp_path: Path) -> None:
    version, root = verl
    switch, config_name = megatron_switch(version)
    found = lint(tmp_path, root, NAME, *switch, "actor_rollout_ref.actor.megatron.grad_offload=True",
                 config_name=config_name)
    assert codes(found) == (["RL302"] if version >= "0.9.1" else [])


def test_use_legacy_worker_impl_removed_in_080(verl: tuple[Version, Path], tmp_path: Path) -> None:
    version, root = verl
    found = lint(tmp_path, root, NAME, "trainer.use_legacy_worker_impl=disable")
    assert codes(found) == (["RL302"] if version >= "0.8.0" else [])


def test_megatron_keys_need_megatron(verl: tuple[Version, Path], tmp_path: Path) -> None:
    version, root = verl
    key = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"
    assert lint(tmp_path, root, NAME, key) == [("RL304", 3, 5)]
    switch, config_name = megatron_switch(version)
    assert lint(tmp_path, root, NAME, *switch, key, config_name=config_name) == []


def test_grammar_errors(verl: tuple[Version, Path], tmp_path: Path) -> None:
    _, root = verl
    assert lint(tmp_path, root, NAME, "data.train_files=~/x") == [("RL301", 3, 22)]
    assert lint(tmp_path, root, NAME, "trainer.logger=console,wandb") == [("RL301", 3, 20)]
    assert lint(tmp_path, root, NAME, "data.train_files=$HOME/x", "trainer.logger='[console,wandb]'") == []


def test_rollout_name_mandatory(verl: tuple[Version, Path], tmp_path: Path) -> None:
    _, root = verl
    assert lint(tmp_path, root, "trainer.nnodes=1") == [("RL305", 1, 12)]
    assert lint(tmp_path, root, NAME) == []


def test_rollout_mode_sync(verl: tuple[Version, Path], tmp_path: Path) -> None:
    version, root = verl
    found = lint(tmp_path, root, NAME, "actor_rollout_ref.rollout.mode=sync")
    assert found == ([("RL306", 3, 36)] if version >= "0.7.0" else [])
    assert lint(tmp_path, root, NAME, "actor_rollout_ref.rollout.mode=async") == []


def test_did_you_mean(verl: tuple[Version, Path], tmp_path: Path) -> None:
    _, root = verl
    path = tmp_path / "run.sh"
    path.write_text(f"{ENTRY} {NAME} trainer.n_gpu_per_node=8\n")
    result = run_cli("lint", "--select", "RL302", "--verl-root", str(root), str(path))
    assert result.exit_code == 1
    assert "did you mean 'trainer.n_gpus_per_node'" in result.stdout


def test_did_you_mean_knows_the_skip_rename(verl: tuple[Version, Path], tmp_path: Path) -> None:
    """The rollout skip switch moved in 0.9.0: each side is told the spelling of its own version."""
    version, root = verl
    path = tmp_path / "run.sh"
    for old, new in (("actor_rollout_ref.rollout.skip.enable", "skip.rollout.enable"),
                     ("skip.rollout.enable", "actor_rollout_ref.rollout.skip.enable")):
        path.write_text(f"{ENTRY} {NAME} {old}=False\n")
        result = run_cli("lint", "--select", "RL302", "--verl-root", str(root), str(path))
        exists_here = (version >= "0.9.0") == old.startswith("skip.") and version >= "0.8.0"
        if exists_here:
            assert result.exit_code == 0, result.stdout
        elif version >= "0.8.0":
            assert f"write '{new}' here" in result.stdout and "'+" not in result.stdout, result.stdout


SINGLE_OVERRIDES = [
    "trainer.nnodes=2",
    "trainer.nnode=2",
    "+trainer.nnodes=2",
    "++trainer.brand_new=1",
    "+trainer.resume_from_path=/x",
    "trainer.resume_from_path=/x",
    "+actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16",
    "+actor_rollout_ref.actor.fsdp_config={model_dtype:bf16}",
    f"{SGLANG_KEY}.attention_backend=triton",
    f"+{SGLANG_KEY}.attention_backend=triton",
    "actor_rollout_ref.rollout.engine_kwargs.vllm={a:1}",
    "actor_rollout_ref.actor.megatron.grad_offload=True",
    "trainer.use_legacy_worker_impl=disable",
    "actor_rollout_ref.rollout.skip.enable=False",
    "skip.rollout.enable=False",
    "~trainer.logger",
    "~trainer.resume_from_path",
    "trainer.logger=console,wandb",
    "data.train_files=~/x",
    "hydra.run.dir=/tmp/x",
    "model_engine=megatron",
    "actor@actor_rollout_ref.actor=megatron_actor",
]


@pytest.mark.parametrize("override", SINGLE_OVERRIDES)
def test_verdict_equals_hydra_compose(verl: tuple[Version, Path], override: str) -> None:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from rlpatch.lint.hydra_schema import OverrideRecord, lint_overrides

    _, root = verl
    config_dir = root / "verl" / "trainer" / "config"
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            compose(config_name="ppo_trainer", overrides=[override])
        hydra_rejects = False
    except Exception:  # noqa: BLE001 - any composition error is a rejection
        hydra_rejects = True
    finally:
        GlobalHydra.instance().clear()
    result = lint_overrides([OverrideRecord.from_text(override)], verl_root=root)
    ours = [p.code for p in result.problems if p.code in ("RL301", "RL302", "RL303", "RL304")]
    assert bool(ours) == hydra_rejects, (override, [p.message for p in result.problems])


@pytest.mark.parametrize("version", ["0.9.1"])
def test_rl605_follows_rlpatch_verify(version: str, tmp_path: Path) -> None:
    root = fresh_copy("verl", version, tmp_path / "verl")
    env = "export DUMP_ON=1 PROMPTS_ONLY=1\n"
    dump = "+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=d.json"
    before = lint(tmp_path, root, NAME, dump, select="RL605", env=env)
    # One finding for the verl tree (its patches are absent), one for the vLLM-Ascend tree no option named.
    assert codes(before) == ["RL605", "RL605"]
    applied = run_cli("apply", "--verl-root", str(root), "--mode", "consistency")
    assert applied.exit_code == 0, applied.stderr
    after = lint(tmp_path, root, NAME, dump, select="RL605", env=env)
    assert len(after) == 1 and after[0] in before  # the verl finding is gone; the vLLM-Ascend one stays
