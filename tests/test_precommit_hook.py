"""The `rlpatch-lint` pre-commit hook: the hook definition, its entry run on a sample repo, and
(when pre-commit is installed) `pre-commit try-repo` for real."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BAD = "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8 actor_rollout_ref.rollout.tensor_model_parallel_size=3\n"
GOOD = "#!/usr/bin/env bash\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm trainer.nnodes=1\n"
INSTALL = "#!/bin/sh\nset -e\nmkdir -p ~/.local/bin && cp tool ~/.local/bin/\n"  # an ordinary script: no verl
HIDDEN = 'bash "$TMP" actor_rollout_ref.rollout.enforce_eager=True\n'  # a verl script whose launch is hidden
BAD_CONFIG = '{"task": "statistics", "level": "L7", "dump_path": "/tmp/dump"}\n'  # msprobe refuses level L7
PACKAGE_JSON = '{"name": "tool", "version": "1.0", "scripts": {}}\n'  # a JSON file that is not msprobe's


def hook() -> dict:
    (definition,) = [h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text()) if h["id"] == "rlpatch-lint"]
    return definition


@pytest.fixture
def sample_repo(tmp_path: Path) -> Path:
    (tmp_path / "bad.sh").write_text(BAD)
    (tmp_path / "good").write_text(GOOD)  # no extension: a shell file by its shebang (identify wants +x)
    (tmp_path / "good").chmod(0o755)
    (tmp_path / "tool.py").write_text("print('not shell')\n")
    (tmp_path / "install.sh").write_text(INSTALL)
    (tmp_path / "msprobe.json").write_text(BAD_CONFIG)
    (tmp_path / "package.json").write_text(PACKAGE_JSON)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    return tmp_path


def _is_hooked(path: Path) -> bool:
    """pre-commit's `types_or: [shell, json]` (identify): a .json name, a .sh/.bash/.zsh/.ksh name, or
    a sh/bash shebang."""
    try:
        from identify import identify

        return not {"shell", "json"}.isdisjoint(identify.tags_from_path(str(path)))
    except ImportError:
        if path.suffix == ".json":
            return True
        if not os.access(path, os.X_OK) and path.suffix not in (".sh", ".bash", ".zsh", ".ksh"):
            return False
        if path.suffix in (".sh", ".bash", ".zsh", ".ksh"):
            return True
        first = path.read_text(errors="replace").splitlines()[:1]
        return bool(first) and first[0].startswith("#!") and any(s in first[0] for s in ("sh", "bash"))


def test_hook_definition() -> None:
    definition = hook()
    assert definition["types_or"] == ["shell", "json"] and "types" not in definition
    assert definition["require_serial"] is True  # one process, one summary: lint parallelises itself
    assert definition["language"] == "python"
    assert shlex.split(definition["entry"]) == ["rlpatch", "lint", "--skip-non-verl", "--force-exclude"]


def test_hook_entry_on_a_sample_repo(sample_repo: Path) -> None:
    """What pre-commit does: pass the staged files of the hook's types to the entry, fail on exit != 0."""
    files = [p.name for p in sorted(sample_repo.iterdir()) if p.is_file() and _is_hooked(p)]
    assert files == ["bad.sh", "good", "install.sh", "msprobe.json", "package.json"]
    command = [sys.executable, "-m", "rlpatch", *shlex.split(hook()["entry"])[1:]]
    failing = subprocess.run(command + files, cwd=sample_repo, capture_output=True, text=True, timeout=60)
    assert failing.returncode == 1 and failing.stdout.startswith("bad.sh:1:113: RL401 [E] ")
    assert "msprobe.json:1:33: RL502 [E] level must be one of" in failing.stdout  # a staged config is checked
    assert "install.sh" not in failing.stdout  # not a verl script: not the hook's business
    assert "package.json" not in failing.stdout  # not an msprobe config: not the hook's business either
    assert failing.stdout.count("Found ") == 1
    passing = subprocess.run(command + ["good"], cwd=sample_repo, capture_output=True, text=True, timeout=60)
    assert passing.returncode == 0, passing.stdout


def _pre_commit() -> list[str] | None:
    local = Path(sys.executable).with_name("pre-commit")
    if local.exists() or shutil.which("pre-commit"):
        return [str(local) if local.exists() else "pre-commit"]
    if importlib.util.find_spec("pre_commit") is not None:  # installed, its script elsewhere (a shared venv)
        return [sys.executable, "-m", "pre_commit"]
    return None


@pytest.mark.upstream  # pre-commit installs this repo and its requirements from the package index (~40 s)
@pytest.mark.skipif(_pre_commit() is None, reason="pre-commit is not installed")
def test_pre_commit_try_repo(sample_repo: Path) -> None:
    """`pre-commit try-repo` installs this repo (with its dependencies) into pre-commit's own env."""
    env = dict(os.environ, PRE_COMMIT_HOME=str(sample_repo.parent / "pre-commit-home"))
    proc = subprocess.run([*_pre_commit(), "try-repo", str(ROOT), "rlpatch-lint", "--all-files"], cwd=sample_repo,
                          capture_output=True, text=True, timeout=540, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "bad.sh:1:113: RL401 [E]" in proc.stdout and "msprobe.json:1:33: RL502 [E]" in proc.stdout
    assert proc.stdout.count("Found ") == 1  # require_serial: one summary per run
    assert "package.json" not in proc.stdout and "good:" not in proc.stdout and "tool.py" not in proc.stdout and "install.sh:" not in proc.stdout


def test_skip_non_verl_keeps_verl_scripts_and_plain_lint_unchanged(sample_repo: Path) -> None:
    (sample_repo / "hidden.sh").write_text(HIDDEN)
    lint = [sys.executable, "-m", "rlpatch", "lint"]
    plain = subprocess.run(lint + ["install.sh"], cwd=sample_repo, capture_output=True, text=True, timeout=60)
    assert plain.returncode == 1 and plain.stdout.startswith("install.sh:1:1: RL001 [E] no verl entry point found")
    hook_run = subprocess.run(lint + ["--skip-non-verl", "install.sh", "hidden.sh"], cwd=sample_repo,
                              capture_output=True, text=True, timeout=60)
    assert hook_run.returncode == 1 and hook_run.stdout.startswith("hidden.sh:1:1: RL001 [E] "), hook_run.stdout
    assert "install.sh" not in hook_run.stdout
    alone = subprocess.run(lint + ["--skip-non-verl", "--format", "json", "-"], input=INSTALL, cwd=sample_repo,
                           capture_output=True, text=True, timeout=60)
    assert (alone.returncode, json.loads(alone.stdout)) == (0, {"version": 1, "findings": []})


@pytest.mark.parametrize("text, verl", [
    ("cp overlay.conf /etc/\n", False), ("echo 'reverlify'\n", False), ("export VERL_ROOT=/src\n", True),
    ("cd ~/verl && make\n", True), ("python3 -m verl.trainer.main_ppo\n", True), ("X=msprobe.json\n", True),
    ("bash inner.sh actor_rollout_ref.rollout.n=2\n", True),
])
def test_what_names_verl(text: str, verl: bool) -> None:
    from rlpatch.lint.scope import names_verl

    assert names_verl(text) is verl


@pytest.mark.parametrize("name, text, msprobe", [
    ("config.json", '{"task": "tensor", "dump_path": "/d"}', True),
    ("c.json", '{"statistics": {"scope": []}}', True),
    ("package.json", '{"name": "x", "version": "1", "step": 3}', False),
    ("list.json", "[1, 2]", False),
    ("broken.json", "{", False),
    ("msprobe_broken.json", "{", True),  # broken, but msprobe's by name: its RL501 is kept
    ("big.json", '{"task": ' + "9" * 5000 + "}", False),  # past Python's digit limit: a parse error, no crash
])
def test_which_json_files_the_hook_keeps(name: str, text: str, msprobe: bool) -> None:
    from rlpatch.lint.scope import is_msprobe_config_text

    assert is_msprobe_config_text(name, text) is msprobe
