"""`rlpatch doctor` against target interpreters built here: venvs with small stand-in packages.

Each venv is a real interpreter (`python -m venv --without-pip`) whose site-packages holds only
what the case needs: no msprobe; an msprobe whose `msprobe.pytorch` needs a torch that is absent;
a working one; a torch that auto-loads a torch_npu without CANN. The real mindstudio-probe 26.2.0
with torch CPU is checked in the runtime test at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli, snapshot

MSPROBE_METADATA = "Metadata-Version: 2.1\nName: mindstudio-probe\nVersion: {version}\n"


def site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def stand_in_msprobe(version: str = "26.2.0", pytorch: str = "import torch\n\nclass PrecisionDebugger:\n    pass\n") -> dict[str, str]:
    return {
        "msprobe/__init__.py": "",
        "msprobe/pytorch/__init__.py": pytorch,
        f"mindstudio_probe-{version}.dist-info/METADATA": MSPROBE_METADATA.format(version=version),
    }


STAND_IN_TORCH = {"torch/__init__.py": "__version__ = '2.13.0'\n",
                  "torch-2.13.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n"}


@pytest.fixture
def venv(tmp_path):
    """A factory: a fresh venv with the given stand-in files in its site-packages; returns its python."""

    def make(name: str, *packages: dict[str, str]) -> Path:
        root = tmp_path / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
        for files in packages:
            write(site_packages(root), files)
        return root / "bin" / "python"

    return make


def doctor(*args: str):
    return run_cli("doctor", *args)


def doctor_json(*args: str) -> tuple[int, dict]:
    result = doctor(*args, "--format", "json")
    assert result.stdout.strip(), result.stderr
    return result.exit_code, json.loads(result.stdout)


def verdict(payload: dict, check: str) -> dict:
    return next(v for v in payload["verdicts"] if v["check"] == check)


def test_no_msprobe(venv):
    python = venv("bare")
    result = doctor("--python", str(python))
    assert result.exit_code == 1, result.stderr
    assert "mindstudio-probe  absent" in result.stdout
    assert f"FAIL msprobe-import: msprobe is not installed for {python}" in result.stdout
    assert f"{python} -m pip install mindstudio-probe" in result.stdout


def test_msprobe_without_torch_names_torch(venv):
    python = venv("notorch", stand_in_msprobe())
    result = doctor("--python", str(python))
    assert result.exit_code == 1
    assert "msprobe import: FAILED: No module named 'torch' (failing module: torch)" in result.stdout
    assert f"mindstudio-probe  26.2.0           {site_packages(python.parent.parent) / 'msprobe'}" in result.stdout
    assert "torch             absent" in result.stdout


def test_working_msprobe(venv):
    python = venv("working", stand_in_msprobe(), STAND_IN_TORCH)
    code, payload = doctor_json("--python", str(python))
    assert code == 0, payload["verdicts"]
    assert payload["msprobe_import"]["ok"] is True
    assert payload["packages"]["torch"]["version"] == "2.13.0"
    assert payload["interpreter"]["executable"] == str(python)
    assert verdict(payload, "msprobe-import")["level"] == "OK"


def test_torch_npu_without_cann_is_its_own_cause(venv):
    npu = {"torch/__init__.py": "import torch_npu\n",
           "torch_npu/__init__.py": "raise ImportError('libascend_hal.so: cannot open shared object file: No such file or directory')\n"}
    python = venv("npu", stand_in_msprobe(), npu)
    code, payload = doctor_json("--python", str(python))
    assert code == 1
    assert payload["msprobe_import"]["cause"] == "cann"
    assert "CANN environment is missing" in verdict(payload, "msprobe-import")["message"]


def test_old_msprobe_version_gates(venv):
    python = venv("old", stand_in_msprobe("8.3.0"), STAND_IN_TORCH)
    code, payload = doctor_json("--python", str(python), "--mode", "consistency")
    messages = [v["message"] for v in payload["verdicts"] if v["check"] == "msprobe-version"]
    assert any("consistent_check" in m for m in messages) and any("request_id" in m for m in messages)
    assert code == 1  # consistency needs request_id (26.2)


def test_verl_source_tree_on_pythonpath_only(venv, fixture_tree, monkeypatch):
    python = venv("withverl", stand_in_msprobe(), STAND_IN_TORCH)
    tree = fixture_tree("verl_engine")
    monkeypatch.setenv("PYTHONPATH", str(tree))
    code, payload = doctor_json("--python", str(python), "--mode", "consistency")
    verl = payload["packages"]["verl"]
    assert (verl["location"], verl["version"], verl["version_from"]) == (str(tree / "verl"), "0.9.1", "version file")
    patches = verdict(payload, "patches")
    assert code == 1 and patches["level"] == "FAIL" and str(tree) in patches["message"]
    assert f"rlpatch apply --mode consistency --verl-root {tree}" in patches["message"]
    assert run_cli("apply", "--verl-root", str(tree)).exit_code == 0
    code, payload = doctor_json("--python", str(python), "--mode", "consistency")
    assert verdict(payload, "patches")["level"] == "OK"
    # a consistency run also needs a rollout engine, which this target lacks (issue 18.6)
    failing = [v for v in payload["verdicts"] if v["level"] == "FAIL"]
    assert code == 1 and [v["check"] for v in failing] == ["imports"], failing
    assert "cannot import vllm_ascend or sglang" in failing[0]["message"]


def test_a_tree_first_on_sys_path_shadows_the_installed_verl(venv, fixture_tree, monkeypatch):
    installed = {"verl/__init__.py": "", "verl/version/version": "0.8.0\n",
                 "verl-0.8.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: verl\nVersion: 0.8.0\n"}
    python = venv("shadowed", stand_in_msprobe(), STAND_IN_TORCH, installed)
    tree = fixture_tree("verl_engine")
    monkeypatch.setenv("PYTHONPATH", str(tree))
    code, payload = doctor_json("--python", str(python))
    shadow = verdict(payload, "shadowed")
    assert shadow["level"] == "WARN" and str(tree / "verl") in shadow["message"] and "installed verl 0.8.0" in shadow["message"]


def uv_like(bin_dir: Path, python: Path, name: str = "uv") -> Path:
    """A `uv run [--frozen] python3 ARGS...` stand-in: a shell script that execs the venv's python."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / name
    script.write_text(f'#!/bin/sh\n[ "$1" = run ] && shift\n[ "$1" = --frozen ] && shift\nshift\nexec {python} "$@"\n')
    script.chmod(0o755)
    return script


def test_uv_run_prefix(venv, tmp_path):
    python = venv("uvproject", stand_in_msprobe(), STAND_IN_TORCH)
    uv = uv_like(tmp_path / "bin", python)
    code, payload = doctor_json("--python", f"{uv} run --frozen python3")
    assert code == 0, payload["verdicts"]
    assert payload["interpreter"]["argv"] == [str(uv), "run", "--frozen", "python3"]
    assert payload["interpreter"]["executable"] == str(python)


def test_script_launcher_cwd_and_exported_pythonpath(venv, tmp_path, fixture_tree, monkeypatch):
    python = venv("scripted", stand_in_msprobe(), STAND_IN_TORCH)
    uv_like(tmp_path / "bin", python)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    tree = fixture_tree("verl_engine")
    project = tmp_path / "project"
    project.mkdir()
    script = project / "run.sh"
    script.write_text(f'export PYTHONPATH={tree}:$PYTHONPATH\nLAUNCH=(uv run --frozen python3)\n'
                      '"${LAUNCH[@]}" -m verl.trainer.main_ppo trainer.nnodes=1\n')
    code, payload = doctor_json("--script", str(script))
    assert payload["interpreter"]["argv"] == ["uv", "run", "--frozen", "python3"]
    assert payload["interpreter"]["cwd"] == str(project)
    assert payload["packages"]["verl"]["location"] == str(tree / "verl")
    assert any(v["check"].startswith("lint") for v in payload["verdicts"])


def test_py_executable_is_the_workers_python(venv, tmp_path):
    workers = venv("workers", stand_in_msprobe(), STAND_IN_TORCH)
    script = tmp_path / "run.sh"
    script.write_text(f"{sys.executable} -m verl.trainer.main_ppo +ray_kwargs.ray_init.runtime_env.py_executable={workers}\n")
    code, payload = doctor_json("--script", str(script))
    assert payload["interpreter"]["executable"] == str(workers)
    assert "py_executable" in payload["interpreter"]["chosen_by"]
    differs = verdict(payload, "workers-python")
    assert differs["level"] == "WARN" and str(workers) in differs["message"] and sys.executable in differs["message"]


def test_install_uses_the_targets_pip_then_checks_again(venv):
    # A stand-in pip that "installs" the stand-in msprobe into its own site-packages.
    files = "".join(f"    {relative!r}: {text!r},\n" for relative, text in stand_in_msprobe().items())
    fake_pip = {"pip/__init__.py": "", "pip/__main__.py": (
        "import os, sys\nhere = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
        f"FILES = {{\n{files}}}\n"
        "assert sys.argv[1:] == ['install', 'mindstudio-probe'], sys.argv\n"
        "for relative, text in FILES.items():\n"
        "    path = os.path.join(here, relative)\n    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
        "    open(path, 'w').write(text)\nprint('Successfully installed mindstudio-probe-26.2.0')\n")}
    python = venv("installable", fake_pip, STAND_IN_TORCH)
    before = snapshot(python.parent.parent)
    assert doctor("--python", str(python)).exit_code == 1
    assert snapshot(python.parent.parent) == before  # without --install nothing changes
    result = doctor("--python", str(python), "--install")
    assert result.stderr.startswith(f"installing: {python} -m pip install mindstudio-probe\n"), result.stderr
    assert result.exit_code == 0, result.stdout
    assert "msprobe import: OK" in result.stdout


def test_install_quiet_says_only_that_pip_failed(venv):
    failing_pip = {"pip/__init__.py": "", "pip/__main__.py": "print('ERROR: no such distribution')\nraise SystemExit(3)\n"}
    python = venv("failing", failing_pip, STAND_IN_TORCH)
    loud = doctor("--python", str(python), "--install")
    assert loud.stderr.startswith("installing: ") and "  pip: ERROR: no such distribution\n" in loud.stderr
    quiet = doctor("--python", str(python), "--install", "-q")
    assert quiet.stderr == "--install: pip exited 3\n"
    assert (quiet.exit_code, quiet.stdout) == (loud.exit_code, loud.stdout)


# --- bad input: one line, exit 2, nothing on stdout ---------------------------------------------


def _one_line_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("rlpatch: error: "), result.stderr
    for word in words:
        assert word in result.stderr


def test_interpreter_not_found_names_it(tmp_path):
    missing = tmp_path / "no-such-python"
    _one_line_error(doctor("--python", str(missing)), str(missing), "no such interpreter")
    _one_line_error(doctor("--python", f"{missing} run python3"), str(missing))


def test_not_a_python(tmp_path):
    _one_line_error(doctor("--python", "/bin/true"), "/bin/true", "not a working Python")


def test_probe_timeout(venv):
    python = venv("slow", stand_in_msprobe(pytorch="import time\ntime.sleep(30)\n"))
    _one_line_error(doctor("--python", str(python), "--timeout", "1"), "timed out")


def test_bad_scripts(tmp_path):
    _one_line_error(doctor("--script", str(tmp_path / "missing.sh")), "missing.sh")
    empty = tmp_path / "empty.sh"
    empty.write_text("echo hello\n")
    _one_line_error(doctor("--script", str(empty)), "no verl launch")
    unknown = tmp_path / "unknown.sh"
    unknown.write_text("$(pick_python) -m verl.trainer.main_ppo trainer.nnodes=1\n")
    _one_line_error(doctor("--script", str(unknown)), "pass --python")


@pytest.mark.parametrize("command", ["doctor", "verify", "status", "apply", "revert"])
def test_bad_ray_runtime_env(command):
    _one_line_error(run_cli(command, "--ray", "auto", "--ray-runtime-env", "{not json"), "--ray-runtime-env", "JSON")
    _one_line_error(run_cli(command, "--ray", "auto", "--ray-runtime-env", "[1]"), "JSON object")


def test_ray_missing_is_one_line_with_the_install_hint():
    code = ("import sys; sys.modules['ray'] = None\n"
            "from rlpatch.cli import main\nmain(['verify', '--ray', 'auto'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "pip install 'rlpatch[ray]'" in done.stderr, done.stderr


def test_ray_bad_address_is_one_line(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    _one_line_error(run_cli("verify", "--ray", "127.0.0.1:9", "--ray-timeout", "5"), "--ray 127.0.0.1:9")


# --- the real mindstudio-probe 26.2.0 with torch CPU ------------------------------------------------


@pytest.mark.runtime
def test_real_msprobe_in_this_venv():
    pytest.importorskip("msprobe")
    code, payload = doctor_json("--python", sys.executable)
    assert payload["packages"]["mindstudio-probe"]["version"] == "26.2.0"
    assert payload["packages"]["torch"]["location"]
    assert payload["msprobe_import"]["ok"] is True, payload["msprobe_import"]
    assert verdict(payload, "msprobe-import")["level"] == "OK"
    assert code == 0, payload["verdicts"]


def test_fixture_tree_is_untouched_by_doctor(venv, monkeypatch):
    """doctor only reads: the trees it checks are byte for byte what they were."""
    python = venv("readonly", stand_in_msprobe(), STAND_IN_TORCH)
    before = snapshot(FIXTURES / "verl_engine")
    monkeypatch.setenv("PYTHONPATH", str(FIXTURES / "verl_engine"))
    doctor("--python", str(python), "--mode", "consistency")
    assert snapshot(FIXTURES / "verl_engine") == before


# --- verl's own example shape: `uv run` or python3, py_executable null (issue 18.6) -------------------

VERL_EXAMPLE = FIXTURES / "doctor" / "run_grpo_uv_or_python.sh"


@pytest.fixture
def only_python3(tmp_path, monkeypatch):
    """A PATH whose `python3` is the given venv's and that has no `uv` (this machine's case)."""

    def use(python: Path) -> Path:
        bin_dir = tmp_path / "pathbin"
        bin_dir.mkdir(exist_ok=True)
        wrapper = bin_dir / "python3"  # a wrapper, not a symlink: a venv is known by its own bin/ folder
        wrapper.write_text(f'#!/bin/sh\nexec {python} "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
        for name in ("VERL_USE_UV", "DEVICE", "INFER_BACKEND"):
            monkeypatch.delenv(name, raising=False)
        return bin_dir

    return use


def test_a_launcher_missing_here_is_a_fail_that_names_env(venv, only_python3):
    only_python3(venv("example", stand_in_msprobe(), STAND_IN_TORCH))
    code, payload = doctor_json("--script", str(VERL_EXAMPLE))
    assert code == 1
    launcher = verdict(payload, "launcher")
    assert launcher["level"] == "FAIL" and "no uv" in launcher["message"] and "--env NAME=VALUE" in launcher["message"]
    assert payload["interpreter"]["argv"][:2] == ["uv", "-v"]  # the workers' launcher on the uv path
    assert payload["packages"] == {} and any(v["check"].startswith("lint") for v in payload["verdicts"])
    assert payload["script"] == str(VERL_EXAMPLE)  # the mode line says the script configures no dump
    assert "mode: none: " in doctor("--script", str(VERL_EXAMPLE)).stdout


@pytest.mark.parametrize("env", ["VERL_USE_UV=0", "DEVICE=npu"])
def test_env_chooses_the_path_and_py_executable_null_is_the_drivers_python(venv, only_python3, env):
    python = venv("example", stand_in_msprobe(), STAND_IN_TORCH)
    only_python3(python)
    code, payload = doctor_json("--script", str(VERL_EXAMPLE), "--env", env)
    assert payload["interpreter"]["argv"] == ["python3"]
    assert payload["interpreter"]["prefix"] == str(python.parent.parent)  # the venv behind PATH's python3
    workers = verdict(payload, "workers-python")
    assert workers["level"] == "OK" and "py_executable=null" in workers["message"]
    assert payload["interpreter"]["executable"] in workers["message"]
    assert code == 0, payload["verdicts"]


def test_env_needs_a_script_and_a_pair():
    _one_line_error(doctor("--env", "A=1"), "--env", "--script")
    _one_line_error(doctor("--script", str(VERL_EXAMPLE), "--env", "NOEQUALS"), "--env", "KEY=VALUE")


def test_a_dump_mode_needs_verl_and_the_rollout_engine(venv, tmp_path):
    python = venv("noverl", stand_in_msprobe(), STAND_IN_TORCH)
    code, payload = doctor_json("--python", str(python), "--mode", "training")
    imports = [v for v in payload["verdicts"] if v["check"] == "imports"]
    assert code == 1 and [v["level"] for v in imports] == ["FAIL"] and "cannot import verl" in imports[0]["message"]

    verl = {"verl/__init__.py": "", "verl/version/version": "0.9.1\n"}
    python = venv("verlonly", stand_in_msprobe(), STAND_IN_TORCH, verl)
    script = tmp_path / "run.sh"
    script.write_text(f"{python} -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=sglang trainer.nnodes=1\n")
    code, payload = doctor_json("--script", str(script), "--mode", "inference")
    failing = [v for v in payload["verdicts"] if v["check"] == "imports" and v["level"] == "FAIL"]
    assert code == 1 and len(failing) == 1, payload["verdicts"]
    assert "cannot import sglang (the script's rollout.name=sglang)" in failing[0]["message"]
    assert doctor_json("--python", str(python), "--mode", "training")[0] == 0  # training needs verl only


def test_the_scripts_pythonpath_sitecustomize_runs_in_the_probe(venv, tmp_path, fixture_tree):
    """doctor starts the script's launcher with the script's PYTHONPATH: a sitecustomize there runs
    first, as it does for the real run (here it puts a verl tree on sys.path)."""
    python = venv("site", stand_in_msprobe(), STAND_IN_TORCH)
    tree = fixture_tree("verl_engine")
    site = tmp_path / "hooks"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"import sys\nsys.path.append({str(tree)!r})\nprint('site hook says hello')\n")
    script = tmp_path / "run.sh"
    script.write_text(f"export PYTHONPATH={site}\n{python} -m verl.trainer.main_ppo trainer.nnodes=1\n")
    code, payload = doctor_json("--script", str(script))
    assert payload["packages"]["verl"]["location"] == str(tree / "verl")


def test_mode_line_when_the_script_configures_no_dump() -> None:
    """Issue 28 item 5: with --script given, doctor no longer says "pass --mode or --script"."""
    from rlpatch.doctor.examine import _no_mode

    assert _no_mode("run.sh") == "none: run.sh configures no msprobe dump (pass --mode for its checks)"
    assert "--script" in _no_mode(None)


def _dist(name: str, version: str) -> dict[str, str]:
    module = name.replace("-", "_")
    return {f"{module}/__init__.py": "", f"{module}-{version}.dist-info/METADATA":
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}


def test_an_npu_script_without_torch_npu_warns(venv, tmp_path):
    """Issue 28 item 5: trainer.device=npu needs torch_npu in the target; the fix names torch's release."""
    python = venv("nonpu", stand_in_msprobe(), STAND_IN_TORCH)
    script = tmp_path / "run.sh"
    for device, warned in (("npu", True), ("cuda", False)):
        script.write_text(f"{python} -m verl.trainer.main_ppo trainer.device={device} trainer.nnodes=1\n")
        payload = doctor_json("--script", str(script))[1]
        found = [v for v in payload["verdicts"] if v["check"] == "torch-npu"]
        assert bool(found) == warned, payload["verdicts"]
    assert found == [] and payload["script"] == str(script)
    script.write_text(f"{python} -m verl.trainer.main_ppo trainer.device=npu trainer.nnodes=1\n")
    result = doctor("--script", str(script))
    line = next(line for line in result.stdout.splitlines() if "torch-npu:" in line)
    assert line.startswith(f"  WARN torch-npu: torch_npu is not installed for {python}, but the script sets "
                           "trainer.device=npu"), line
    assert f"{python} -m pip install 'torch_npu==2.13.0.*'" in line
    python = venv("withnpu", stand_in_msprobe(), STAND_IN_TORCH, _dist("torch_npu", "2.13.0"))
    script.write_text(f"{python} -m verl.trainer.main_ppo trainer.device=npu trainer.nnodes=1\n")
    assert not [v for v in doctor_json("--script", str(script))[1]["verdicts"] if v["check"] == "torch-npu"]


def test_vllm_ascend_without_vllm_warns(venv):
    """Issue 28 item 5: vllm_ascend is a plugin vLLM loads: without vllm no vLLM rollout starts."""
    python = venv("novllm", stand_in_msprobe(), STAND_IN_TORCH, _dist("vllm-ascend", "0.13.0rc1"))
    code, payload = doctor_json("--python", str(python))
    found = [v for v in payload["verdicts"] if v["check"] == "vllm"]
    assert code == 0 and [v["level"] for v in found] == ["WARN"], payload["verdicts"]
    assert "vLLM-Ascend 0.13.0rc1 is installed" in found[0]["message"]
    assert f"{python} -m pip install vllm==0.13.0" in found[0]["message"]
    python = venv("both", stand_in_msprobe(), STAND_IN_TORCH, _dist("vllm-ascend", "0.13.0"), _dist("vllm", "0.13.0"))
    assert not [v for v in doctor_json("--python", str(python))[1]["verdicts"] if v["check"] == "vllm"]


def test_lint_checks_against_the_targets_verl_else_the_release(venv, tmp_path, fixture_tree, monkeypatch):
    """doctor lints the script against the verl its target imports (issue 29.1); a target without verl
    gets the newest release's config from the cache (here verl_mini stands in for it), offline a WARN."""
    monkeypatch.delenv("RLPATCH_DEFAULT_VERL", raising=False)
    monkeypatch.setenv("RLPATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm trainer.nnode=1\n")
    python = venv("noverl", stand_in_msprobe(), STAND_IN_TORCH)

    def lint_verdicts() -> list[tuple[str, str, str]]:
        payload = doctor_json("--python", str(python), "--script", str(script))[1]
        return [(v["level"], v["check"], v["message"]) for v in payload["verdicts"] if v["check"].startswith("lint")]

    offline = lint_verdicts()
    assert [(level, check) for level, check, _ in offline] == [("OK", "lint"), ("WARN", "lint")]
    assert "RL301-RL306 not run: no verl named and verl 0.9.1's config is not cached" in offline[1][2]
    release = tmp_path / "cache" / "wheels" / "verl" / "0.9.1" / "any" / "tree"
    shutil.copytree(FIXTURES / "verl_mini", release)
    (release / ".complete").write_text("verl-0.9.1-py3-none-any.whl\n")
    against_release = lint_verdicts()
    assert [(level, check) for level, check, _ in against_release] == [("FAIL", "lint RL302"), ("OK", "lint")]
    assert against_release[1][2].endswith("checked against verl 0.9.1, the newest release, as the interpreter "
                                          "that runs verl has none")
    # a target that imports verl (here a tree that has `trainer.nnode`): that tree decides, and no note
    target_tree = fixture_tree("verl_mini")
    config = target_tree / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    config.write_text(config.read_text().replace("  nnodes: 1\n", "  nnodes: 1\n  nnode: 1\n"))
    monkeypatch.setenv("PYTHONPATH", str(target_tree))
    assert lint_verdicts() == [("OK", "lint", f"rlpatch lint {script}: no findings")]
