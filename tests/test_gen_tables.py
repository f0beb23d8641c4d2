"""`rlpatch gen`: the rows of the spec's tables that the fixture scripts do not reach (neutralised user
values, PD disaggregation, the fully-async entry, a generated script given back)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from gen_harness import run_with_stand_ins, stub_verl

AR = "actor_rollout_ref"
HEAD = "#!/bin/bash\nset -e\n"


def _gen(tmp_path: Path, body: str, mode: str, *more: str, version: str = "0.9.1") -> tuple[int, dict, Path]:
    script = tmp_path / "run.sh"
    script.write_text(HEAD + body)
    result = run_cli("gen", mode, str(script), "--verl-root", str(stub_verl(tmp_path, version)), "--format", "json", *more)
    data = json.loads(result.stdout) if result.exit_code != 2 else {}
    return result.exit_code, data, tmp_path / f"run.{mode}-dump.sh"


def _received(tmp_path: Path, new: Path) -> dict[str, str]:
    return run_with_stand_ins(new, tmp_path)[0].final()


def test_training_neutralises_other_tools(tmp_path: Path) -> None:
    body = ("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm global_profiler.tool=nsys "
            f"{AR}.actor.profiler.tool=torch global_profiler.profile_continuous_steps=True \"$@\"\n")
    code, data, new = _gen(tmp_path, body, "training", "--stages", "actor_update", "--steps", "2,3")
    assert code == 0
    final = _received(tmp_path, new)
    assert final["global_profiler.tool"] == "precision_debugger" and final[f"{AR}.actor.profiler.tool"] == "precision_debugger"
    assert final["global_profiler.profile_continuous_steps"] == "False" and final["global_profiler.steps"] == "[2,3]"
    assert final["global_profiler.global_tool_config.precision_debugger.stages"] == "[actor_update]"
    assert {o["key"]: o["replaces"] for o in data["overrides"]}["global_profiler.tool"] == "nsys"
    assert "global_profiler.tool=nsys" in new.read_text()  # never deleted from the copy


def test_vllm_neutralises_old_key_graphs_and_sglang(tmp_path: Path) -> None:
    vllm = f"{AR}.rollout.engine_kwargs.vllm"
    body = (f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm +{vllm}.additional_config.dump_config=old.json "
            f"+{vllm}.compilation_config.cudagraph_capture_sizes=[1,2] "
            f"+{AR}.rollout.engine_kwargs.sglang.msprobe_dump_config=x.json\n")
    code, _, new = _gen(tmp_path, body, "inference", "--vllm-ascend-version", "0.23.0", "--steps", "0,1")
    assert code == 0
    run = run_with_stand_ins(new, tmp_path)[0]
    final = run.final()
    assert final[f"{vllm}.additional_config.dump_config"] == "null"
    assert final[f"{vllm}.compilation_config.cudagraph_capture_sizes"] == "null"
    assert final[f"{AR}.rollout.engine_kwargs.sglang.msprobe_dump_config"] == "null"
    assert run.env["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    config = json.loads(Path(final[f"{vllm}.additional_config.dump_config_path"]).read_text())
    assert config["step"] == [0, 1] and config["dump_path"].endswith("/infer")


def test_sglang_pd_disaggregation_gets_two_configs(tmp_path: Path) -> None:
    body = (f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=sglang "
            f"+{AR}.rollout.engine_kwargs.sglang.disaggregation_mode=prefill\n")
    code, data, new = _gen(tmp_path, body, "inference", "--sglang-version", "0.5.10.post1")
    assert code == 0
    env = run_with_stand_ins(new, tmp_path)[0].env
    prefill, decode = (json.loads(Path(env[f"MSPROBE_SGLANG_CONFIG_{s}"]).read_text()) for s in ("PREFILL", "DECODE"))
    assert prefill["dump_path"] != decode["dump_path"]
    assert env["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"] == "0"


def test_fully_async_entry(tmp_path: Path) -> None:
    body = (f"python3 -m verl.experimental.fully_async_policy.fully_async_main {AR}.rollout.name=vllm "
            "trainer.n_gpus_per_node=4 algorithm.rollout_correction.bypass_mode=True\n")
    code, _, new = _gen(tmp_path, body, "consistency")
    assert code in (0, 1)
    final = _received(tmp_path, new)
    assert final[f"{AR}.hybrid_engine"] == "False" and final["algorithm.rollout_correction.bypass_mode"] == "False"


def test_a_generated_script_is_refused(tmp_path: Path) -> None:
    body = f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm \"$@\"\n"
    code, _, new = _gen(tmp_path, body, "inference")
    assert code == 0
    result = run_cli("gen", "inference", str(new), "--verl-root", str(stub_verl(tmp_path, "0.9.1")))
    assert result.exit_code == 2 and "written by rlpatch gen" in result.stderr


def test_ray_job_submit_gets_the_runtime_env(tmp_path: Path) -> None:
    body = (f"ray job submit --address=http://head:8265 -- python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm "
            "trainer.n_gpus_per_node=2 \"$@\"\n")
    code, _, new = _gen(tmp_path, body, "inference")
    assert code == 0
    call = run_with_stand_ins(new, tmp_path)[0]
    assert call.program == "ray"
    assert call.final()["ray_kwargs.ray_init.runtime_env.env_vars.TORCHDYNAMO_DISABLE"] == '"1"'


def test_paths_that_disagree_need_env(tmp_path: Path) -> None:
    body = ('if [ "$DEVICE" = npu ]; then CARDS=16; else CARDS=8; fi\n'
            f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm trainer.n_gpus_per_node=$CARDS\n")
    code, _, _ = _gen(tmp_path, body, "consistency", "--minimal")  # rollout.n = DP differs between the paths
    assert code == 2 and not list(tmp_path.glob("run.consistency-dump*"))
    code, data, _ = _gen(tmp_path, body, "consistency")  # the script's own batch: one script serves both paths
    assert code in (0, 1) and f"{AR}.rollout.n" not in {o["key"] for o in data["overrides"]}
    for path in tmp_path.glob("run.consistency-dump*"):
        path.unlink()
    code, data, new = _gen(tmp_path, body, "consistency", "--env", "DEVICE=npu", "--minimal")
    assert code in (0, 1) and {o["key"]: o["value"] for o in data["overrides"]}[f"{AR}.rollout.n"] == "16"
    assert "# assumed: DEVICE=npu (--env)" in new.read_text()
