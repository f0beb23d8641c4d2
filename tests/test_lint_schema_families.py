"""The RL3xx/RL5xx/RL6xx families inside `rlpatch lint`: wiring, skips, imports, version probing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES, run_cli

from rlpatch.upstream.envprobe import probe_here, probe_interpreter, probe_root

ENTRY = "python3 -m verl.trainer.main_ppo"
DUMP_KEY = "+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path"


def lint_json(*args: str) -> tuple[int, list[dict]]:
    result = run_cli("lint", "--format", "json", *args)
    return result.exit_code, json.loads(result.stdout)["findings"] if result.stdout else []


def test_lint_a_config_json_directly(tmp_path: Path) -> None:
    config = tmp_path / "msprobe.json"
    config.write_text('{\n  "task": "tensor",\n  "level": "L9"\n}\n')
    code, findings = lint_json(str(config))
    assert code == 1
    assert [(f["code"], f["line"], f["column"]) for f in findings] == [("RL504", 1, 1), ("RL502", 3, 12)]
    config.write_text('{"task": "tensor", "dump_path": "/d", "level": "mix"}')
    assert lint_json(str(config)) == (0, [])
    assert run_cli("lint", str(tmp_path / "missing.json")).exit_code == 2


def test_config_followed_from_env_with_the_reference_as_related(tmp_path: Path) -> None:
    (tmp_path / "actor.json").write_text('{"task": "statistics", "dump_path": "/d", "level": "mix"}\n')
    (tmp_path / "infer.json").write_text('{"task": "tensor", "dump_path": "/d", "level": "mix"}\n')
    script = tmp_path / "run.sh"
    script.write_text(f"export DUMP_ON=1 PROMPTS_ONLY=1 MSPROBE_ACTOR_CONFIG=actor.json\n"
                      f"{ENTRY} actor_rollout_ref.rollout.name=vllm {DUMP_KEY}=infer.json\n")
    result = run_cli("lint", "--format", "full", "--select", "RL507", str(script))
    # an FSDP run: statistics cannot compare the training q/k/v with vLLM's fused qkv_proj (an error)
    assert result.exit_code == 1
    assert f"{tmp_path / 'actor.json'}:1:10: RL507 [E]" in result.stdout
    assert "run.sh:1:" in result.stdout  # the export that referenced it


def test_config_only_on_the_cluster_is_not_read_but_noted(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(f"{ENTRY} actor_rollout_ref.rollout.name=vllm {DUMP_KEY}=/cluster/only/dump.json\n")
    code, findings = lint_json("--select", "RL5", str(script))
    assert code == 0 and [(f["code"], f["severity"]) for f in findings] == [("RL501", "warning")]


def test_rank_outside_the_run(tmp_path: Path) -> None:
    (tmp_path / "dump.json").write_text('{"task": "tensor", "dump_path": "/d", "level": "mix", "rank": [8]}')
    script = tmp_path / "run.sh"
    script.write_text(f"{ENTRY} actor_rollout_ref.rollout.name=vllm trainer.n_gpus_per_node=8 trainer.nnodes=2 "
                      f"{DUMP_KEY}=dump.json\n")
    assert [f["code"] for f in lint_json("--select", "RL506", str(script))[1]] == []
    script.write_text(script.read_text().replace("nnodes=2", "nnodes=1"))
    assert [f["code"] for f in lint_json("--select", "RL506", str(script))[1]] == ["RL506"]


def lint_in_fresh_process(args: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[str, list[str]]:
    """stdout of `rlpatch lint ARGS` run in a new interpreter, and which heavy modules it imported."""
    probe = (
        "import sys\n"
        "from rlpatch.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('MODULES', ','.join(m for m in ('hydra', 'omegaconf', 'libcst') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False,
                            env={"PATH": "/usr/bin:/bin", **env}, cwd=cwd)
    output, _, modules = result.stdout.rpartition("MODULES ")
    return output, [name for name in modules.strip().split(",") if name]


def test_schema_family_without_verl_is_silent_and_imports_no_hydra(tmp_path: Path) -> None:
    """No verl named and the default verl turned off (RLPATCH_DEFAULT_VERL=none; without it, the
    newest release: test_lint_default_verl): no finding, and the lint process never imports Hydra
    or libcst. Named but unusable (a --verl-root without verl): the one-line "skipped" note."""
    if probe_here(("verl",))["verl"].found:
        return  # this interpreter has verl: the family runs (covered by the tests below)
    script = tmp_path / "run.sh"
    script.write_text(f"{ENTRY} data.train_files=~/x\n")
    args = ["lint", "--format", "json", "--exit-zero", "--select", "RL3", str(script)]
    output, modules = lint_in_fresh_process(args, {"RLPATCH_DEFAULT_VERL": "none"}, tmp_path)
    assert json.loads(output)["findings"] == []
    assert modules == []
    bare = tmp_path / "bare" / "verl"  # a verl package without its trainer/config directory
    (bare / "version").mkdir(parents=True)
    (bare / "__init__.py").write_text("")
    (bare / "version" / "version").write_text("0.9.1\n")
    output, modules = lint_in_fresh_process([*args, "--verl-root", str(bare.parent)], {}, tmp_path)
    findings = json.loads(output)["findings"]
    assert [(f["code"], f["severity"]) for f in findings] == [("RL002", "info")]
    assert "RL301-RL306 skipped" in findings[0]["message"]
    assert modules == []


def test_warm_schema_lint_imports_no_hydra(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(f"{ENTRY} actor_rollout_ref.rollout.name=vllm trainer.nnode=1\n")
    args = ["lint", "--exit-zero", "--select", "RL3", "--verl-root", str(FIXTURES / "verl_mini"), str(script)]
    env = {"RLPATCH_CACHE": str(tmp_path / "cache")}
    first, first_modules = lint_in_fresh_process(args, env)
    second, second_modules = lint_in_fresh_process(args, env)
    assert "RL302" in first and "RL302" in second
    assert "hydra" in first_modules
    assert second_modules == []


def test_versions_from_roots_and_interpreters() -> None:
    targets = FIXTURES / "targets"
    assert str(probe_root("sglang", targets / "sglang-0.5.10").version) == "0.5.10"
    assert str(probe_root("mindstudio-probe", targets / "sglang-0.5.11-msprobe-8.3").version) == "8.3.0"
    assert str(probe_root("vllm-ascend", targets / "vllm-ascend-0.12.0").version) == "0.12.0"
    assert str(probe_root("verl", FIXTURES / "verl_mini").version) == "0.9.1"
    assert not probe_root("sglang", targets / "vllm-ascend-0.12.0").found
    # the subprocess probe of an interpreter and the in-process probe agree (and import nothing)
    assert probe_interpreter(sys.executable) == probe_here()
