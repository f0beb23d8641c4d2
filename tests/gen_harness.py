"""Running a script `rlpatch gen` wrote, with stand-ins for python3/python/uv/ray/torchrun, composing what
verl receives with Hydra on a released verl's real config, and the spec's tables.

The stand-ins are tiny bash scripts put first on PATH (or, sealed, alone on it with a few plain
shell tools): each records its argv and environment to a file and exits 0, so the generated script
really runs (bash expands everything: arrays, `"$@"`, `$(cd ... && pwd)`, `bash other.sh args`) and
the test sees what verl would receive. `compose_real()` composes it as the entry module's
`@hydra.main` would. `expected()` is the spec's tables (gen.md sections 3 to 5) written out
independently of gen's own code.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conftest import FIXTURES

from rlpatch.upstream.wheelcache import unpacked_tree

GEN_FIXTURES = FIXTURES / "gen"
STAND_INS = ("python3", "python", "uv", "ray", "torchrun")
# Needs nothing from PATH (a sealed PATH holds only the stand-ins and SEALED_TOOLS).
_STAND_IN = """#!/bin/bash
out="$RLPATCH_RECORD_DIR/${0##*/}.$$.$RANDOM"
{ printf '%s\\n' "$#"; printf '%s\\0' "${0##*/}" "$@"; /usr/bin/env -0; } > "$out"
exit 0
"""
# The only real programs on a sealed PATH: what the fixtures' shell plumbing calls, none of which can
# start a job, install a package or reach a device.
SEALED_TOOLS = ("bash", "basename", "cat", "date", "dirname", "mkdir", "tee")
# Machine and device probes a launch script may call: present, printing the same thing on every host
# (a run that reads the card count from `nproc` gets 2 whatever the test machine has).
INERT_TOOLS = {"nvidia-smi": "", "npu-smi": "", "nproc": "2"}
AR = "actor_rollout_ref"


@dataclass
class Received:
    """One recorded call of a stand-in: what verl's entry would get."""

    program: str
    argv: list[str]
    env: dict[str, str]

    @property
    def entry(self) -> str:
        """The module after `-m` (the verl entry that composes the config)."""
        return self.argv[self.argv.index("-m") + 1]

    @property
    def hydra_args(self) -> list[str]:
        """The arguments after `-m <entry>` (Hydra overrides and options)."""
        index = self.argv.index("-m")
        return self.argv[index + 2:]

    def overrides(self) -> list[str]:
        return [a for a in self.hydra_args if not a.startswith("-")]

    def final(self) -> dict[str, str]:
        """key -> the value Hydra keeps (the last one; `+`/`++` prefixes dropped)."""
        values: dict[str, str] = {}
        for arg in self.overrides():
            key, _, value = arg.lstrip("+").partition("=")
            values[key] = value
        return values


def copy_fixtures(tmp: Path) -> Path:
    folder = tmp / "scripts"
    shutil.copytree(GEN_FIXTURES, folder)
    return folder


def run_with_stand_ins(script: Path, tmp: Path, args: tuple[str, ...] = (), *, sealed: bool = False,
                       env: dict[str, str] | None = None) -> list[Received]:
    """Run `bash script args` with the stand-ins first on PATH; every call that starts a verl entry.

    sealed: PATH holds only the stand-ins, SEALED_TOOLS and INERT_TOOLS (nothing that can start a real
    job), and the environment only PATH, HOME (a fresh folder) and `env`."""
    bin_dir, records, home = tmp / "bin", tmp / "records", tmp / "home"
    for folder in (bin_dir, records, home):
        folder.mkdir(parents=True, exist_ok=True)
    for name in STAND_INS:
        path = bin_dir / name
        path.write_text(_STAND_IN)
        path.chmod(0o755)
    for old in records.iterdir():
        old.unlink()
    path_value = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    if sealed:
        _seal(bin_dir)
        path_value = str(bin_dir)
    run_env = {**(env or {}), "PATH": path_value, "HOME": str(home), "RLPATCH_RECORD_DIR": str(records)}
    bash = shutil.which("bash") or "/bin/bash"
    result = subprocess.run([bash, str(script), *args], cwd=script.parent, env=run_env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    calls = [_parse(path.read_bytes()) for path in sorted(records.iterdir())]
    return [call for call in calls if "-m" in call.argv and call.argv.index("-m") + 1 < len(call.argv)]


def _seal(bin_dir: Path) -> None:
    for name in SEALED_TOOLS:
        real = shutil.which(name)
        link = bin_dir / name
        if real is not None and not link.exists():
            link.symlink_to(real)
    for name, output in INERT_TOOLS.items():
        path = bin_dir / name
        path.write_text("#!/bin/bash\n" + (f"echo {output}\n" if output else "") + "exit 0\n")
        path.chmod(0o755)


def _parse(data: bytes) -> Received:
    count_text, _, rest = data.partition(b"\n")
    fields = rest.split(b"\0")
    argv = [f.decode() for f in fields[1:int(count_text) + 1]]
    env = {}
    for item in fields[int(count_text) + 1:]:
        name, eq, value = item.decode().partition("=")
        if eq:
            env[name] = value
    return Received(fields[0].decode(), argv, env)


class EntryMissing(LookupError):
    """The module a launch runs (`-m verl.x.y`) is not in this verl release."""


def entry_config(version: str, entry: str) -> tuple[Path, str, str]:
    """(module folder, config_path, config_name) of the `@hydra.main` in verl release `version`'s
    module `entry`, read from the released wheel's source (what `python -m entry` composes)."""
    module = unpacked_tree("verl", version) / (entry.replace(".", "/") + ".py")
    if not module.is_file():
        raise EntryMissing(f"verl {version} has no module {entry}")
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("hydra.main", "main"):
            options = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
            if "config_name" in options:
                return module.parent, str(options.get("config_path", ".")), str(options["config_name"])
    raise EntryMissing(f"verl {version}'s {entry} has no @hydra.main")


def compose_real(version: str, hydra_args: list[str], entry: str = "verl.trainer.main_ppo"):
    """Hydra's own compose of `python -m entry HYDRA_ARGS` on verl release `version`'s real config
    tree (`--config-path`/`--config-name`, either spelling, as Hydra's command line reads them)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    folder, config_path, name = entry_config(version, entry)
    overrides: list[str] = []
    args = iter(hydra_args)
    for arg in args:
        option, eq, value = arg.partition("=")
        if option in ("--config-name", "-cn", "--config-path", "-cp"):
            value = value if eq else next(args, "")
            if option in ("--config-name", "-cn"):
                name = value
            else:
                config_path = value
        elif not arg.startswith("-"):
            overrides.append(arg)
    config_dir = (folder / config_path).resolve()  # Hydra: relative to the module's folder
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None, job_name="rlpatch-test"):
            return compose(config_name=name, overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


def stub_verl(tmp: Path, version: str) -> Path:
    """A verl tree that has only its version file: gen's version facts without a config to compose."""
    root = tmp / f"verl-stub-{version}"
    (root / "verl" / "version").mkdir(parents=True, exist_ok=True)
    (root / "verl" / "__init__.py").write_text("")
    (root / "verl" / "version" / "version").write_text(version + "\n")
    return root


# ---- the spec's tables ----------------------------------------------------------------------------------
def _v(text: str) -> tuple[int, ...]:
    return tuple(int("".join(c for c in part if c.isdigit()) or 0) for part in text.split(".")[:3])


def expected(mode: str, verl: str, *, rollout: str = "vllm", megatron: bool = False, per_node: int = 8,
             nodes: int = 1, rollout_tp: int = 2, sglang: str | None = None,
             vllm_ascend: str | None = None, minimal: bool = False) -> tuple[dict[str, str], dict[str, str]]:
    """(overrides verl must receive, env vars the workers must see) for one case of the spec.

    Consistency keeps the script's own rollout TP and batch on verl >= 0.9.0 (the rows pairing);
    `minimal` (gen --minimal, and every verl before 0.9.0) is the smoke configuration: TP 1, batch 1."""
    overrides: dict[str, str] = {}
    env: dict[str, str] = {}
    if mode == "training":
        overrides.update({
            "global_profiler.tool": "precision_debugger", "global_profiler.steps": "[1]",
            f"{AR}.actor.profiler.enable": "True", "trainer.total_training_steps": "1",
        })
        return overrides, env
    overrides[f"{AR}.rollout.enforce_eager"] = "True"
    overrides["trainer.val_before_train"] = "False"
    env["TORCHDYNAMO_DISABLE"] = "1"
    if mode == "consistency":
        world = per_node * nodes
        env.update({"DUMP_ON": "1", "PROMPTS_ONLY": "1", "DUMP_PHASE": "log_prob"})
        minimal = minimal or _v(verl) < (0, 9, 0)
        for key in ("data.train_batch_size", f"{AR}.actor.ppo_mini_batch_size", f"{AR}.actor.ppo_micro_batch_size_per_gpu",
                    f"{AR}.ref.log_prob_micro_batch_size_per_gpu", f"{AR}.rollout.log_prob_micro_batch_size_per_gpu",
                    f"{AR}.rollout.agent.num_workers", f"{AR}.rollout.max_num_seqs"):
            if minimal:
                overrides[key] = "1"
        overrides["trainer.total_training_steps"] = "1"
        for key in (f"{AR}.actor.ppo_micro_batch_size", f"{AR}.ref.log_prob_micro_batch_size",
                    f"{AR}.rollout.log_prob_micro_batch_size"):
            if minimal:
                overrides[key] = "null"
        for key in ("algorithm.rollout_correction.rollout_is", "algorithm.rollout_correction.rollout_rs",
                    "algorithm.rollout_correction.rollout_rs_threshold"):
            overrides[key] = "null"
        for key in (f"{AR}.actor.use_dynamic_bsz", f"{AR}.ref.log_prob_use_dynamic_bsz",
                    f"{AR}.rollout.log_prob_use_dynamic_bsz", "trainer.balance_batch", f"{AR}.rollout.enable_prefix_caching"):
            if minimal:
                overrides[key] = "False"
        overrides["algorithm.rollout_correction.rollout_is_batch_normalize"] = "False"
        overrides[f"{AR}.model.use_remove_padding"] = "True"
        # bounded to what is compared: one prefill per request, no validation, no checkpoint
        overrides.update({"data.max_response_length": "1", "trainer.test_freq": "-1", "trainer.save_freq": "-1"})
        if megatron:
            dp = world // rollout_tp
            for role in ("actor", "ref"):
                overrides[f"{AR}.{role}.megatron.tensor_model_parallel_size"] = str(rollout_tp)
                overrides[f"{AR}.{role}.megatron.pipeline_model_parallel_size"] = "1"
            overrides[f"{AR}.rollout.pipeline_model_parallel_size"] = "1"
        else:
            dp = world
            for role in ("actor", "ref"):
                overrides[f"{AR}.{role}.ulysses_sequence_parallel_size"] = "1"
                overrides[f"{AR}.{role}.fsdp_config.ulysses_sequence_parallel_size"] = "1"
            if minimal:  # single-request pairing: one full-model replica per card
                overrides[f"{AR}.rollout.tensor_model_parallel_size"] = "1"
            overrides[f"{AR}.rollout.data_parallel_size"] = "1"
        if minimal:
            overrides[f"{AR}.rollout.n"] = str(dp)
        if _v(verl) >= (0, 9, 0):
            overrides["skip.rollout.enable"] = "False"  # no trainer switch: the set covers v1 and v0
        elif _v(verl) >= (0, 8, 0):
            overrides[f"{AR}.rollout.skip.enable"] = "False"
        else:
            overrides["trainer.use_legacy_worker_impl"] = "disable"
    if rollout == "sglang" and (sglang is None or _v(sglang) >= (0, 5, 11)):
        overrides[f"{AR}.rollout.engine_kwargs.sglang.msprobe_dump_config"] = "<config>"
    elif rollout == "sglang":
        env["MSPROBE_SGLANG_CONFIG"] = "<config>"
    elif vllm_ascend is not None and _v(vllm_ascend) < (0, 13, 0):
        overrides[f"{AR}.rollout.engine_kwargs.vllm.additional_config.dump_config"] = "<config>"
    else:
        overrides[f"{AR}.rollout.engine_kwargs.vllm.additional_config.dump_config_path"] = "<config>"
    return overrides, env


def written(result) -> bool:
    """gen wrote the files and its lint found no error but the not-yet-applied RL605/RL607."""
    if result.exit_code == 0:
        return True
    if result.exit_code != 1:
        return False
    if result.stdout.startswith("{"):
        errors = {f["code"] for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"}
        return errors <= {"RL605", "RL607"}
    return False


def check_received(call: Received, want: dict[str, str], want_env: dict[str, str], folder: Path) -> list[str]:
    """The differences between what verl received and the spec's tables ("<config>": an absolute path
    of an existing config file beside the new script)."""
    final = call.final()
    problems = []
    for key, value in want.items():
        got = final.get(key)
        if value == "<config>":
            if got is None or not os.path.isabs(got) or not os.path.isfile(got) or Path(got).parent != folder:
                problems.append(f"{key}: {got!r} is not a config file beside the new script")
        elif got != value:
            problems.append(f"{key}: want {value!r}, got {got!r}")
    for name, value in want_env.items():
        got = call.env.get(name)
        if value == "<config>":
            if got is None or not os.path.isfile(got):
                problems.append(f"env {name}: {got!r} is not a config file")
        elif got != value:
            problems.append(f"env {name}: want {value!r}, got {got!r}")
    return problems
