"""`rlpatch gen`, issue 18: the printed next steps are runnable as printed (apply with every tree it
patches, doctor --script, the dumps commands) and name the real dump layout; consistency runs dump
L0, use one full rollout replica per card on FSDP, are bounded to the compared prefill and say how
large the dump will be; device branches ask for the variable that chooses them; CUDA scripts are
refused or warned about; training mode stops after the last dumped step."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from gen_harness import copy_fixtures, run_with_stand_ins, stub_verl, written

AR = "actor_rollout_ref"
HEAD = "#!/bin/bash\nset -e\n"


def _vllm_ascend_tree(tmp: Path) -> Path:
    root = tmp / "site-packages"
    (root / "vllm_ascend").mkdir(parents=True)
    (root / "vllm_ascend" / "__init__.py").write_text("")
    (root / "vllm_ascend-0.13.0.dist-info").mkdir()
    (root / "vllm_ascend-0.13.0.dist-info" / "METADATA").write_text("Name: vllm-ascend\nVersion: 0.13.0\n")
    return root


def _lines_after(text: str, head: str) -> list[str]:
    block = text.split(head + "\n", 1)[1]
    return [line for line in block.splitlines() if line.startswith("  ")]


def test_next_steps_are_runnable_with_both_roots(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    verl, ascend = stub_verl(tmp_path, "0.9.1"), _vllm_ascend_tree(tmp_path)
    new = folder / "megatron_vllm.consistency-dump.sh"
    result = run_cli("gen", "consistency", str(folder / "megatron_vllm.sh"), "--verl-root", str(verl),
                     "--vllm-ascend-root", str(ascend))
    assert written(result), result.stdout + result.stderr
    steps = _lines_after(result.stdout, "next steps:")
    assert steps[0] == f"  1. rlpatch apply --mode consistency --verl-root {verl} --vllm-ascend-root {ascend}"
    assert steps[1] == f"  2. rlpatch verify --mode consistency --verl-root {verl} --vllm-ascend-root {ascend}"
    assert steps[2] == f"  3. rlpatch doctor --script {new} --mode consistency"
    assert steps[3] == f"  4. bash {new}"
    assert "fill in" not in result.stdout
    dumps = folder / "megatron_vllm.consistency-dumps"
    where = _lines_after(result.stdout, "dumps:")[:2]
    assert where == [
        f"  training: {dumps}/train/step{{N}}/rank{{R}}/ and {dumps}/train/{{pid}}/update_actor_log.jsonl "
        "(rlpatch engine patch; one step per dumped micro-batch)",
        f"  inference: {dumps}/infer/{{pid}}/step{{N}}/rank{{R}}/ next to {dumps}/infer/{{pid}}/dispatch_log.jsonl "
        "(one {pid} folder per vLLM-Ascend process)",
    ]
    after = _lines_after(result.stdout, "after the run:")
    pair = f"--train {dumps}/train --infer {dumps}/infer --backend megatron"
    assert after == [
        f"  5. rlpatch dumps check {dumps}/train --mode consistency --script {new}",
        f"  6. rlpatch dumps check {dumps}/infer --mode consistency --script {new}",
        f"  7. rlpatch dumps pair {pair}",
        f"  8. rlpatch dumps compare {pair}",
    ]
    assert "vLLM-Ascend 0.13.0" in new.read_text()  # the version comes from the tree


def test_unknown_root_is_a_placeholder_that_must_be_filled(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    verl = stub_verl(tmp_path, "0.9.1")
    result = run_cli("gen", "consistency", str(folder / "megatron_vllm.sh"), "--verl-root", str(verl), "--dry-run")
    assert written(result), result.stdout + result.stderr
    steps = _lines_after(result.stdout, "next steps:")
    assert steps[0] == f"  1. rlpatch apply --mode consistency --verl-root {verl} --vllm-ascend-root VLLM_ASCEND_ROOT"
    assert steps[1].startswith("     fill in VLLM_ASCEND_ROOT: the folder holding vllm_ascend/")


def test_printed_commands_parse(tmp_path: Path) -> None:
    """Every printed rlpatch command is accepted by rlpatch's own command line (as --help would)."""
    import shlex

    folder = copy_fixtures(tmp_path)
    result = run_cli("gen", "consistency", str(folder / "megatron_vllm.sh"), "--verl-root",
                     str(stub_verl(tmp_path, "0.9.1")), "--vllm-ascend-root", str(_vllm_ascend_tree(tmp_path)))
    commands = [line.split(". ", 1)[1] for line in result.stdout.splitlines()
                if line.startswith("  ") and ". rlpatch " in line]
    assert len(commands) == 7
    for command in commands:
        argv = shlex.split(command)[1:]
        parsed = run_cli(*argv[:2], "--help") if argv[0] == "dumps" else run_cli(argv[0], "--help")
        assert parsed.exit_code == 0
        options = [a for a in argv if a.startswith("--")]
        assert all(option in parsed.stdout for option in options), (command, parsed.stdout)


def test_bad_vllm_ascend_root_is_bad_input(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    result = run_cli("gen", "consistency", str(folder / "megatron_vllm.sh"), "--verl-root",
                     str(stub_verl(tmp_path, "0.9.1")), "--vllm-ascend-root", str(tmp_path / "nowhere"))
    assert result.exit_code == 2 and "--vllm-ascend-root" in result.stderr and result.stderr.count("\n") == 1
    assert not list(folder.glob("megatron_vllm.consistency-dump*"))


def test_consistency_level_defaults_to_l0_and_can_be_overridden(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    root = stub_verl(tmp_path, "0.9.1")
    assert written(run_cli("gen", "consistency", str(folder / "megatron_vllm.sh"), "--verl-root", str(root)))
    for role in ("train", "infer"):
        assert json.loads((folder / f"megatron_vllm.consistency-dump.msprobe-{role}.json").read_text())["level"] == "L0"
    result = run_cli("gen", "consistency", str(folder / "megatron_vllm.sh"), "--verl-root", str(root), "--level", "mix",
                     "--force")
    # written as asked, and the lint of what gen wrote says plainly that it cannot be compared (exit 1)
    assert result.exit_code == 1 and ": RL109 " in result.stdout
    assert json.loads((folder / "megatron_vllm.consistency-dump.msprobe-infer.json").read_text())["level"] == "mix"
    assert "Conflicting comparison data" in result.stdout
    help_text = run_cli("gen", "--help").stdout
    assert "L0 in consistency mode" in " ".join(help_text.split())


def _model(tmp: Path) -> Path:
    model = tmp / "Qwen3-tiny"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 8,
        "head_dim": 128, "intermediate_size": 3072, "vocab_size": 151936, "torch_dtype": "bfloat16"}))
    return model


def test_dump_size_from_a_local_model_and_free_space(tmp_path: Path) -> None:
    model = _model(tmp_path)
    script = tmp_path / "run.sh"
    script.write_text(HEAD + f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm {AR}.model.path={model} "
                      "trainer.device=npu trainer.n_gpus_per_node=2 data.max_prompt_length=511 "
                      "data.max_response_length=32768 \"$@\"\n")
    result = run_cli("gen", "consistency", str(script), "--verl-root", str(stub_verl(tmp_path, "0.9.1")), "--minimal")
    assert written(result), result.stdout + result.stderr
    # per token: 2 * (17*1024 + 2*2048 + 2*1024 + 5*3072) + 4*1024 + 151936 = 233856 elements; 512 tokens, 2 bytes
    assert "about 228.4 MiB per request per side: up to 512 tokens x 2 layers, hidden 1024" in result.stdout
    assert "this run dumps 2 requests on each side: about 913.5 MiB" in result.stdout
    assert "disk: " in result.stdout and "free at " in result.stdout
    final = run_with_stand_ins(tmp_path / "run.consistency-dump.sh", tmp_path)[0].final()
    assert final["data.max_response_length"] == "1" and final["trainer.test_freq"] == "-1"
    assert final[f"{AR}.rollout.tensor_model_parallel_size"] == "1" and final[f"{AR}.rollout.n"] == "2"
    header = (tmp_path / "run.consistency-dump.sh").read_text()
    assert "# assumed: FSDP: rollout tensor_model_parallel_size=1" in header


def test_dump_size_unknown_for_a_hub_id(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    result = run_cli("gen", "consistency", str(folder / "megatron_vllm.sh"), "--verl-root",
                     str(stub_verl(tmp_path, "0.9.1")), "--dry-run")
    assert "dump size: unknown: the model path Qwen/Qwen3-0.6B is not a folder on this machine" in result.stdout


def test_dump_size_on_one_card_says_one_step(tmp_path: Path) -> None:
    """Issue 28 item 5: one card under --minimal (one request, n = DP = 1) reads "1 request", never "1 requests"."""
    model = _model(tmp_path)
    for path, says in ((str(model), "this run dumps 1 request on each side: about"),
                       ("Qwen/Qwen3-0.6B", "(1 request in this run)")):
        script = tmp_path / "run.sh"
        script.write_text(HEAD + f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm {AR}.model.path={path} "
                          "trainer.device=npu trainer.n_gpus_per_node=1 \"$@\"\n")
        result = run_cli("gen", "consistency", str(script), "--verl-root", str(stub_verl(tmp_path, "0.9.1")),
                         "--dry-run", "--minimal")
        assert says in result.stdout, result.stdout + result.stderr
        assert "1 requests" not in result.stdout


def test_device_branches_ask_for_the_choosing_variable(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    root = stub_verl(tmp_path, "0.9.1")
    for fixture in ("device_if_branch", "device_case_branch"):
        result = run_cli("gen", "consistency", str(folder / f"{fixture}.sh"), "--verl-root", str(root), "--minimal")
        assert result.exit_code == 2 and "--env DEVICE=VALUE" in result.stderr, result.stderr
        assert "n_trainer_devices=" not in result.stderr.split("give", 1)[1]
        result = run_cli("gen", "consistency", str(folder / f"{fixture}.sh"), "--verl-root", str(root),
                         "--env", "DEVICE=npu", "--minimal")
        assert written(result), result.stdout + result.stderr
        new = folder / f"{fixture}.consistency-dump.sh"
        assert "# assumed: DEVICE=npu (--env)" in new.read_text()
        final = run_with_stand_ins(new, tmp_path, ())[0].final()  # DEVICE detected as gpu here: the header says so
        assert final["data.max_response_length"] == "1"
        assert final[f"{AR}.rollout.tensor_model_parallel_size"] == "1"


def test_case_branch_npu_values(tmp_path: Path) -> None:
    """run_qwen3_8b_fsdp.sh's NPU branch: 32k responses, SP 4, 8 cards: bounded and SP 1 on every branch."""
    folder = copy_fixtures(tmp_path)
    result = run_cli("gen", "consistency", str(folder / "device_case_branch.sh"), "--verl-root",
                     str(stub_verl(tmp_path, "0.9.1")), "--env", "DEVICE=npu", "--format", "json", "--minimal")
    data = json.loads(result.stdout)
    by_key = {o["key"]: o for o in data["overrides"]}
    assert by_key["data.max_response_length"]["replaces"] == "32768" and by_key["data.max_response_length"]["value"] == "1"
    assert by_key[f"{AR}.actor.fsdp_config.ulysses_sequence_parallel_size"]["value"] == "1"
    assert by_key[f"{AR}.rollout.n"]["value"] == "8"


def test_cuda_script_is_refused_and_unmarked_script_warned(tmp_path: Path) -> None:
    root = stub_verl(tmp_path, "0.9.1")
    script = tmp_path / "cuda.sh"
    script.write_text(HEAD + f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm trainer.device=cuda\n")
    for mode in ("inference", "consistency"):
        result = run_cli("gen", mode, str(script), "--verl-root", str(root))
        assert result.exit_code == 2 and "runs on CUDA" in result.stderr and "vLLM-Ascend" in result.stderr
    script.write_text(HEAD + f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm trainer.n_gpus_per_node=2\n")
    result = run_cli("gen", "inference", str(script), "--verl-root", str(root), "--dry-run")
    assert result.exit_code == 0 and "warning: nothing in this script says NPU" in result.stdout
    script.write_text(HEAD + "export ASCEND_RT_VISIBLE_DEVICES=0,1\n"
                      f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm trainer.n_gpus_per_node=2\n")
    result = run_cli("gen", "inference", str(script), "--verl-root", str(root), "--dry-run")
    assert result.exit_code == 0 and "says NPU" not in result.stdout


def test_training_stops_after_the_last_dumped_step(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(HEAD + f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm trainer.total_epochs=15 \"$@\"\n")
    result = run_cli("gen", "training", str(script), "--verl-root", str(stub_verl(tmp_path, "0.9.1")), "--steps", "2,3")
    assert result.exit_code == 0, result.stdout + result.stderr
    final = run_with_stand_ins(tmp_path / "run.training-dump.sh", tmp_path)[0].final()
    assert final["trainer.total_training_steps"] == "3" and final["global_profiler.steps"] == "[2,3]"
    dumps = tmp_path / "run.training-dumps" / "train"
    assert f"training: {dumps}/step_{{G}}/{{stage}}/step0/rank{{R}}/ (G in [2,3]" in result.stdout
    assert f"rlpatch dumps check {dumps} --mode training --script" in result.stdout


def test_training_config_lints_clean_alone(tmp_path: Path) -> None:
    """gen's training config has no dump_path (verl passes its own, RL104); alone, RL504 says so as an info."""
    script = tmp_path / "run.sh"
    script.write_text(HEAD + f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm \"$@\"\n")
    assert run_cli("gen", "training", str(script), "--verl-root", str(stub_verl(tmp_path, "0.9.1"))).exit_code == 0
    config = tmp_path / "run.training-dump.msprobe-train.json"
    assert "dump_path" not in json.loads(config.read_text())
    result = run_cli("lint", "--format", "json", str(config))
    assert result.exit_code == 0, result.stdout
    findings = json.loads(result.stdout)["findings"]
    assert [(f["code"], f["severity"]) for f in findings] == [("RL504", "info")]
    assert "precision_debugger" in findings[0]["message"]


def test_dump_size_names_the_variable_the_model_path_depends_on(tmp_path: Path) -> None:
    """verl's run_qwen3_next_80b_fsdp.sh shape: MODEL_PATH=${WORK_DIR}/..., WORK_DIR from $HOME (issue 28 item 4)."""
    folder = copy_fixtures(tmp_path)
    root = str(stub_verl(tmp_path, "0.9.1"))
    result = run_cli("gen", "consistency", str(folder / "home_model_path.sh"), "--verl-root", root, "--dry-run")
    assert "the script sets no model path" not in result.stdout
    assert "the model path (WORK_DIR, MODEL_PATH) depends on $HOME" in result.stdout
    assert "pass --env HOME=..." in result.stdout
    model = tmp_path / "home" / "verl" / "Qwen3-Next-80B-A3B-Instruct"
    model.parent.mkdir(parents=True)
    _model(tmp_path).rename(model)
    result = run_cli("gen", "consistency", str(folder / "home_model_path.sh"), "--verl-root", root, "--dry-run",
                     "--env", f"HOME={tmp_path / 'home'}")
    assert "dump size (estimate" in result.stdout and "2 layers, hidden 1024" in result.stdout


def test_inference_mode_stops_after_the_last_dumped_step(tmp_path: Path) -> None:
    """Inference mode bounds the job (issue 28 item 4): steps 0..K need at most K+1 training steps."""
    folder = copy_fixtures(tmp_path)
    root = str(stub_verl(tmp_path, "0.9.1"))
    assert written(run_cli("gen", "inference", str(folder / "megatron_vllm.sh"), "--verl-root", root, "--steps", "0,3"))
    final = run_with_stand_ins(folder / "megatron_vllm.inference-dump.sh", tmp_path)[0].final()
    assert final["trainer.total_training_steps"] == "4"


def test_minimal_refuses_a_model_whose_weights_exceed_one_card(tmp_path: Path) -> None:
    """Issue 27: TP 1 on an 80B MoE (figures of Qwen3-Next-80B-A3B's config.json) cannot start; the
    script's own rollout TP (8) is written instead when --minimal is not asked."""
    model = tmp_path / "Qwen3-Next-80B-A3B-Instruct"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2,
        "head_dim": 256, "intermediate_size": 5120, "num_experts": 512, "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512, "vocab_size": 151936, "torch_dtype": "bfloat16"}))
    script = tmp_path / "run.sh"
    script.write_text(HEAD + f"python3 -m verl.trainer.main_ppo {AR}.rollout.name=vllm {AR}.model.path={model} "
                      f"trainer.device=npu trainer.n_gpus_per_node=16 {AR}.rollout.tensor_model_parallel_size=8 "
                      f"data.train_batch_size=16 {AR}.actor.ppo_mini_batch_size=16 \"$@\"\n")
    root = str(stub_verl(tmp_path, "0.9.1"))
    result = run_cli("gen", "consistency", str(script), "--verl-root", root, "--minimal")
    assert result.exit_code == 2 and "over one card's 64.0 GiB: drop --minimal" in result.stderr, result.stderr
    assert "147.1 GiB (79.0 B parameters" in result.stderr and not list(tmp_path.glob("run.consistency-dump*"))
    result = run_cli("gen", "consistency", str(script), "--verl-root", root)
    assert written(result), result.stdout + result.stderr
    assert "kept the script's rollout TP (8), batch (data.train_batch_size 16 x rollout.n 1)" in result.stdout
