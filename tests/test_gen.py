"""`rlpatch gen`: the original stays byte-identical, the new script really delivers the spec's
overrides and environment to verl (run under stand-in python3/python/uv/ray), it lints clean, and
every bad input is one line, exit 2, nothing written.

These tests use verl trees that hold only a version file (the version facts without a config to
compose, no download); `tests/test_gen_upstream.py` repeats the runs against released wheels and
composes what verl received with Hydra.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli
from gen_harness import (
    check_received,
    copy_fixtures,
    expected,
    run_with_stand_ins,
    stub_verl,
    written,
)

# (fixture, mode, verl, extra gen options, expected() keywords)
CASES = [
    ("fsdp_vllm_launch_array", "training", "0.9.1", (), {}),
    ("fsdp_vllm_launch_array", "inference", "0.9.1", (), {}),
    ("fsdp_vllm_launch_array", "consistency", "0.9.1", (), {}),
    ("fsdp_vllm_launch_array", "consistency", "0.8.0", (), {}),
    ("fsdp_vllm_launch_array", "consistency", "0.9.1", ("--minimal",), {"minimal": True}),
    ("megatron_vllm", "training", "0.9.1", (), {"megatron": True}),
    ("megatron_vllm", "inference", "0.8.0", (), {"megatron": True}),
    ("megatron_vllm", "consistency", "0.9.1", (), {"megatron": True, "rollout_tp": 4}),
    ("megatron_vllm", "consistency", "0.8.0", (), {"megatron": True, "rollout_tp": 4}),
    ("megatron_vllm", "consistency", "0.9.1", ("--minimal",), {"megatron": True, "rollout_tp": 4, "minimal": True}),
    ("fsdp_sglang_multinode", "inference", "0.9.1", (), {"rollout": "sglang", "nodes": 2}),
    ("fsdp_sglang_multinode", "inference", "0.9.1", ("--sglang-version", "0.5.5"),
     {"rollout": "sglang", "nodes": 2, "sglang": "0.5.5"}),
    ("fsdp_sglang_multinode", "training", "0.9.1", (), {"rollout": "sglang", "nodes": 2}),
    ("legacy_07", "consistency", "0.7.1", (), {"per_node": 4}),
    ("legacy_07", "inference", "0.7.1", ("--vllm-ascend-version", "0.12.0rc1"), {"vllm_ascend": "0.12.0rc1"}),
    ("forward_outer", "inference", "0.9.1", (), {"per_node": 2}),
    ("forward_outer", "consistency", "0.9.1", (), {"per_node": 2}),
]


def _gen(folder: Path, fixture: str, mode: str, root: Path, *more: str):
    return run_cli("gen", mode, str(folder / f"{fixture}.sh"), "--verl-root", str(root), *more)


@pytest.mark.parametrize("fixture,mode,verl,options,shape", CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_generated_script_delivers_the_spec(tmp_path: Path, fixture, mode, verl, options, shape) -> None:
    folder = copy_fixtures(tmp_path)
    originals = {path.name: path.read_bytes() for path in folder.iterdir()}
    result = _gen(folder, fixture, mode, stub_verl(tmp_path, verl), *options)
    assert written(result), result.stdout + result.stderr
    for name, data in originals.items():
        assert (folder / name).read_bytes() == data, f"{name} changed"
    new = folder / f"{fixture}.{mode}-dump.sh"
    assert new.stat().st_mode & 0o777 == (folder / f"{fixture}.sh").stat().st_mode & 0o777
    calls = run_with_stand_ins(new, tmp_path)
    assert calls, "the new script started no verl entry"
    want, want_env = expected(mode, verl, **shape)
    for call in calls:
        assert check_received(call, want, want_env, folder.resolve()) == []
        if shape.get("nodes", 1) > 1:  # exports reach other nodes only through Ray's runtime env
            for name, value in want_env.items():
                got = call.final().get(f"ray_kwargs.ray_init.runtime_env.env_vars.{name}")
                assert got is not None and json.loads(got) == (call.env[name] if value == "<config>" else value)
    _check_configs(folder, mode, fixture)


def _check_configs(folder: Path, mode: str, fixture: str) -> None:
    configs = sorted(folder.glob(f"{fixture}.{mode}-dump.msprobe-*.json"))
    assert configs
    for path in configs:
        content = json.loads(path.read_text())
        assert content["level"] == ("L0" if mode == "consistency" else "mix")
        if mode == "training":
            assert "dump_path" not in content and content["step"] == []
        else:
            assert Path(content["dump_path"]).is_absolute()
    if mode == "consistency":
        paths = {json.loads(p.read_text())["dump_path"] for p in configs}
        assert len(paths) == 2 and all(json.loads(p.read_text())["task"] == "tensor" for p in configs)


def test_new_script_lints_without_errors(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    root = stub_verl(tmp_path, "0.9.1")
    assert _gen(folder, "megatron_vllm", "consistency", root).exit_code == 0
    result = run_cli("lint", "--format", "json", "--verl-root", str(root), str(folder / "megatron_vllm.consistency-dump.sh"))
    errors = [f for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"
              and f["code"] not in ("RL605", "RL607")]
    assert errors == []


def test_original_without_forwarding_still_gets_the_overrides(tmp_path: Path) -> None:
    """Overrides given to the original on its command line would be dropped (no "$@"): gen's are not."""
    folder = copy_fixtures(tmp_path)
    assert "$@" not in (folder / "fsdp_sglang_multinode.sh").read_text().split("set -x", 1)[1]
    assert _gen(folder, "fsdp_sglang_multinode", "inference", stub_verl(tmp_path, "0.9.1")).exit_code == 0
    calls = run_with_stand_ins(folder / "fsdp_sglang_multinode.inference-dump.sh", tmp_path)
    assert calls[0].final()["actor_rollout_ref.rollout.enforce_eager"] == "True"
    assert calls[0].program == "python"


def test_uv_launch_array_keeps_its_launcher(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    assert _gen(folder, "fsdp_vllm_launch_array", "inference", stub_verl(tmp_path, "0.9.1")).exit_code == 0
    calls = run_with_stand_ins(folder / "fsdp_vllm_launch_array.inference-dump.sh", tmp_path, ("trainer.total_epochs=7",))
    assert calls[0].program == "uv" and calls[0].argv[:2] == ["run", "--frozen"]
    assert calls[0].final()["trainer.total_epochs"] == "7"  # the new script still forwards "$@"


def test_extra_overrides_come_last(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    result = _gen(folder, "fsdp_vllm_launch_array", "inference", stub_verl(tmp_path, "0.9.1"), "--",
                  "trainer.total_epochs=9")
    assert result.exit_code == 0, result.stderr
    calls = run_with_stand_ins(folder / "fsdp_vllm_launch_array.inference-dump.sh", tmp_path)
    assert calls[0].overrides()[-1] == "trainer.total_epochs=9"


def test_env_gives_a_value_the_script_computes(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    root = stub_verl(tmp_path, "0.9.1")
    result = _gen(folder, "nproc_cards", "consistency", root)
    assert result.exit_code == 2 and "--env NGPUS=" in result.stderr
    assert not list(folder.glob("nproc_cards.consistency-dump*"))
    result = _gen(folder, "nproc_cards", "consistency", root, "--env", "NGPUS=4", "--minimal")
    assert written(result), result.stderr
    text = (folder / "nproc_cards.consistency-dump.sh").read_text()
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=1" in text and "actor_rollout_ref.rollout.n=4" in text


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    before = sorted(p.name for p in folder.iterdir())
    result = _gen(folder, "megatron_vllm", "consistency", stub_verl(tmp_path, "0.9.1"), "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in folder.iterdir()) == before
    assert '+++ ' in result.stdout and 'RLPATCH_GEN_OVERRIDES' in result.stdout and '"dump_path"' in result.stdout


def test_json_output_shape(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    result = _gen(folder, "legacy_07", "consistency", stub_verl(tmp_path, "0.7.1"), "--format", "json")
    assert written(result), result.stderr
    data = json.loads(result.stdout)
    assert list(data) == ["version", "script", "configs", "mode", "backends", "versions", "overrides", "env", "findings",
                          "next_steps", "dumps", "after_run"]
    assert data["mode"] == "consistency" and data["versions"]["verl"] == "0.7.1" and len(data["configs"]) == 2
    assert all(set(o) == {"key", "value", "why", "replaces"} for o in data["overrides"])
    by_key = {o["key"]: o for o in data["overrides"]}
    assert by_key["trainer.use_legacy_worker_impl"]["value"] == "disable"
    assert by_key["data.train_batch_size"]["replaces"] == "256"
    assert {e["name"] for e in data["env"]} >= {"DUMP_ON", "PROMPTS_ONLY", "DUMP_PHASE", "MSPROBE_ACTOR_CONFIG"}


# ---- refusals and bad input: one line, exit 2, nothing written -------------------------------------------------
REFUSALS = [
    ("legacy_07", "training", "0.7.1", (), "needs verl >= 0.8.0"),
    ("megatron_vllm", "training", "0.8.0", (), "needs verl >= 0.9.0"),
    ("fsdp_vllm_launch_array", "inference", "0.9.1", ("--vllm-ascend-version", "0.11.0"), "has no msprobe dump"),
    ("fsdp_vllm_launch_array", "consistency", "0.9.1", ("--vllm-ascend-version", "0.9.1"), "has no msprobe dump"),
    ("fsdp_vllm_launch_array", "consistency", "0.9.1", ("--minimal", "--", "data.train_batch_size=3"), "3/1 = 1"),
    ("fsdp_sglang_multinode", "consistency", "0.9.1", (), "rolls out with 'sglang'"),
    ("no_launch", "inference", "0.9.1", (), "no verl entry point"),
    ("fsdp_vllm_launch_array", "training", "0.9.1", ("--stages", "critic_update"), "training mode dumps only"),
    ("fsdp_vllm_launch_array", "training", "0.9.1", ("--steps", "one"), "--steps"),
    ("fsdp_vllm_launch_array", "training", "0.9.1", ("--verl-version", "0.9.1"), "at most one of"),
]


@pytest.mark.parametrize("fixture,mode,verl,options,message", REFUSALS)
def test_refusals(tmp_path: Path, fixture, mode, verl, options, message) -> None:
    folder = copy_fixtures(tmp_path)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    result = _gen(folder, fixture, mode, stub_verl(tmp_path, verl), *options)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stderr.startswith("rlpatch: error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_megatron_training_on_080_with_force_warns(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    result = _gen(folder, "megatron_vllm", "training", stub_verl(tmp_path, "0.8.0"), "--force")
    assert result.exit_code == 0 and "warning: verl 0.8.0 finds no model to dump on Megatron" in result.stdout


def test_existing_output_needs_force(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    root = stub_verl(tmp_path, "0.9.1")
    out = folder / "fsdp_vllm_launch_array.inference-dump.sh"
    out.write_text("mine\n")
    result = _gen(folder, "fsdp_vllm_launch_array", "inference", root)
    assert result.exit_code == 2 and "--force" in result.stderr
    assert out.read_text() == "mine\n" and not list(folder.glob("*.msprobe-*.json"))
    assert _gen(folder, "fsdp_vllm_launch_array", "inference", root, "--force").exit_code == 0
    assert "RLPATCH_GEN_OVERRIDES" in out.read_text()


def test_launch_in_a_script_that_does_not_forward(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    (folder / "inner.sh").write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm\n")
    (folder / "outer.sh").write_text("#!/bin/bash\nbash inner.sh trainer.nnodes=1\n")
    before = sorted(p.name for p in folder.iterdir())
    result = run_cli("gen", "inference", str(folder / "outer.sh"), "--verl-root", str(stub_verl(tmp_path, "0.9.1")))
    assert result.exit_code == 2 and "does not forward" in result.stderr
    assert sorted(p.name for p in folder.iterdir()) == before


def test_a_later_export_in_the_script_does_not_win(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    (folder / "own_env.sh").write_text(
        "#!/bin/bash\nset -e\nexport TORCHDYNAMO_DISABLE=0\n"
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm trainer.n_gpus_per_node=2 \"$@\"\n")
    result = run_cli("gen", "inference", str(folder / "own_env.sh"), "--verl-root", str(stub_verl(tmp_path, "0.9.1")))
    assert result.exit_code == 0, result.stderr
    assert "set by the script itself (line 3)" in result.stdout
    assert "export TORCHDYNAMO_DISABLE=0\n" in (folder / "own_env.inference-dump.sh").read_text()
    calls = run_with_stand_ins(folder / "own_env.inference-dump.sh", tmp_path)
    assert calls[0].env["TORCHDYNAMO_DISABLE"] == "1"


def test_config_dir_and_python_target(tmp_path: Path) -> None:
    """--config-dir puts the configs elsewhere (still found from the new script's folder at run time);
    --python names the interpreter whose packages give the versions (none here: the newest assumed)."""
    import sys

    folder = copy_fixtures(tmp_path)
    result = run_cli("gen", "inference", str(folder / "legacy_07.sh"), "--config-dir", str(folder / "configs"),
                     "--python", sys.executable)
    assert result.exit_code == 0, result.stderr
    assert "verl 0.9.1 assumed" in result.stdout
    new = folder / "legacy_07.inference-dump.sh"
    assert '"${RLPATCH_GEN_DIR}/configs/legacy_07.inference-dump.msprobe-infer.json"' in new.read_text()
    final = run_with_stand_ins(new, tmp_path)[0].final()
    path = Path(final["actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path"])
    assert path.is_file() and path.parent == (folder / "configs").resolve()


def test_consistency_refusal_for_sglang_names_what_works(tmp_path) -> None:
    """Issue 28 item 5: the refusal names the vLLM-Ascend rollout, inference and training modes."""
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang trainer.nnodes=1\n")
    result = run_cli("gen", "consistency", str(script), "--verl-root", str(FIXTURES / "verl_trainers"))
    assert result.exit_code == 2, result.stderr
    assert "rollout.name=vllm" in result.stderr and "inference mode" in result.stderr
    assert "training mode" in result.stderr and list(tmp_path.iterdir()) == [script]


def test_doctor_article() -> None:
    from rlpatch.doctor.verdicts import _article

    assert (_article("inference"), _article("training"), _article("consistency")) == ("an", "a", "a")


def test_rl106_names_the_tool_the_line_sets(tmp_path) -> None:
    """Issue 28 item 5: with --mode training on `tool=npu`, RL106 says what the line sets."""
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo global_profiler.tool=npu\n")
    result = run_cli("lint", str(script), "--mode", "training", "--select", "RL106")
    assert "RL106" in result.stdout and "global_profiler.tool=npu" in result.stdout, result.stdout + result.stderr


def test_dump_root_of_any_output_name_ends_in_dumps(tmp_path) -> None:
    """Issue 28 item 5: `-o run.inf511.sh` dumps into `run.inf511-dumps`, not `run.inf511`."""
    from rlpatch.gen.outputs import dump_root

    assert dump_root(str(tmp_path / "run.inf511.sh"), None) == str(tmp_path / "run.inf511-dumps")
    assert dump_root(str(tmp_path / "run.consistency-dump.sh"), None) == str(tmp_path / "run.consistency-dumps")


def test_detect_names_the_runtime_env_a_multinode_run_carries(tmp_path) -> None:
    """Issue 28 item 5: after gen's runtime-env overrides, detect no longer says only "does NOT reach"."""
    script = tmp_path / "run.sh"
    script.write_text("export DUMP_ON=1\npython3 -m verl.trainer.main_ppo trainer.nnodes=2 "
                      "++ray_kwargs.ray_init.runtime_env.env_vars.DUMP_ON='\"1\"'\n")
    result = run_cli("detect", str(script))
    assert "the Ray runtime env carries DUMP_ON" in result.stdout and "NOT reach" not in result.stdout


@pytest.mark.parametrize("fixture,mode,option,version,project", [
    ("fsdp_vllm_launch_array", "inference", "--vllm-ascend-version", "0.23.0.post1", "vllm-ascend"),
    ("fsdp_vllm_launch_array", "consistency", "--vllm-ascend-version", "0.23.0.post1", "vllm-ascend"),
    ("fsdp_sglang_multinode", "inference", "--sglang-version", "0.5.11", "sglang"),
])
def test_gen_lints_with_the_versions_it_was_given(tmp_path, fixture, mode, option, version, project) -> None:
    """Issue 28 item 5: gen's own lint knows the backend version gen was told (no RL002 "give --...-root")."""
    folder = copy_fixtures(tmp_path)
    result = _gen(folder, fixture, mode, stub_verl(tmp_path, "0.9.1"), option, version, "--format", "json")
    assert written(result), result.stdout + result.stderr
    notes = [f["message"] for f in json.loads(result.stdout)["findings"] if f["code"] == "RL002"]
    assert notes and not [n for n in notes if f"the {project} version" in n], notes


def test_gen_lint_judges_the_given_vllm_ascend_version(tmp_path) -> None:
    """The told version is the one the version rules check: without it, RL603 was skipped."""
    from rlpatch.lint import api as linter

    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
                      "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=d.json\n")
    root = str(stub_verl(tmp_path, "0.9.1"))
    codes = [f.code for f in linter.lint_file(str(script), linter.make_options(verl_root=root, vllm_ascend_version="0.12.0"))]
    assert "RL603" in codes
    codes = [f.code for f in linter.lint_file(str(script), linter.make_options(verl_root=root, vllm_ascend_version="0.13.0"))]
    assert "RL603" not in codes
