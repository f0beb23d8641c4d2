"""`--select` / `--ignore` are one filter on every finding, whatever changes the rule set (issue 10, item 13).

Some findings do not come from the rule of their code: the RL3xx family and RL605 say "not
checked" as RL002 when the target they were given has no usable verl; config files give RL5xx on
their own. Each option that changes which rules run, or what they can see, is combined here with
`--ignore RL002` (and with other selections) and must never let an unselected code through.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

CONSISTENCY = (
    "export DUMP_ON=1 PROMPTS_ONLY=1\n"
    "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm \\\n"
    "    trainer.n_gpus_per_node=$(nproc) \\\n"
    "    +actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=dump.json\n"
)
PLAIN = "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$(nproc) actor_rollout_ref.rollout.name=vllm\n"


def codes(*args: str) -> list[str]:
    result = run_cli("lint", "--format", "json", "--exit-zero", *args)
    assert result.exit_code == 0, result.stderr
    return sorted({finding["code"] for finding in json.loads(result.stdout)["findings"]})


@pytest.fixture
def bare_python(tmp_path: Path) -> str:
    """An interpreter that sees no site-packages at all: no verl, whatever this machine has."""
    wrapper = tmp_path / "bare-python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


@pytest.fixture
def scripts(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "dump.json").write_text('{"task": "tensor", "level": "mix", "dump_path": "/tmp/d"}\n')
    paths = {}
    for name, text in (("consistency", CONSISTENCY), ("plain", PLAIN)):
        (tmp_path / f"{name}.sh").write_text(text)
        paths[name] = str(tmp_path / f"{name}.sh")
    return paths


def target_options(tmp_path: Path, bare_python: str) -> dict[str, list[str]]:
    """Every option that changes the rule set or what the rules know about the target."""
    versioned = tmp_path / "verl-no-config"  # a verl tree without a config dir: RL3xx say "skipped" as RL002
    (versioned / "verl" / "version").mkdir(parents=True)
    (versioned / "verl" / "version" / "version").write_text("0.9.1\n")
    empty = tmp_path / "empty-root"
    empty.mkdir()
    return {
        "nothing": [],
        "python": ["--python", bare_python],
        "verl-root (fixture)": ["--verl-root", str(FIXTURES / "verl_mini")],
        "verl-root (no config)": ["--verl-root", str(versioned)],
        # RL3 ignored too: with a version only, the RL3xx family would download that verl wheel
        "verl-version": ["--verl-version", "0.8.0", "--ignore", "RL3"],
        "sglang-root": ["--sglang-root", str(empty)],
        "vllm-ascend-root": ["--vllm-ascend-root", str(empty)],
        "mode": ["--mode", "consistency"],
        "python and mode": ["--python", bare_python, "--mode", "training"],
    }


def test_the_rl002_notes_of_other_families_exist(tmp_path: Path, bare_python: str, scripts) -> None:
    """What the filter is up against: RL002 findings reported by RL3xx and RL605."""
    result = run_cli("lint", "--format", "json", "--exit-zero", "--python", bare_python, "--select", "RL3,RL605,RL002",
                     scripts["consistency"])
    messages = [f["message"] for f in json.loads(result.stdout)["findings"] if f["code"] == "RL002"]
    assert any("RL301-RL306 skipped" in m for m in messages)
    assert any("RL605 not checked" in m for m in messages)
    # ...they come with the rules that gave them (no silent pass for `--select RL3`)...
    assert "RL002" in codes("--python", bare_python, "--select", "RL3,RL605", scripts["consistency"])
    # ...but never past an ignore of their code, nor without their rule
    assert "RL002" not in codes("--python", bare_python, "--select", "RL3,RL605", "--ignore", "RL002",
                                scripts["consistency"])
    assert "RL002" not in codes("--python", bare_python, "--select", "RL2", scripts["consistency"])


@pytest.mark.parametrize("name", ["nothing", "python", "verl-root (fixture)", "verl-root (no config)", "verl-version",
                                  "sglang-root", "vllm-ascend-root", "mode", "python and mode"])
def test_ignore_holds_with_every_target_option(name: str, tmp_path: Path, bare_python: str, scripts) -> None:
    extra = target_options(tmp_path, bare_python)[name]
    for script in scripts.values():
        everything = codes(*extra, script)
        assert "RL002" in everything  # the $(nproc) alone gives one
        without = codes(*extra, "--ignore", "RL002", script)
        assert "RL002" not in without and without == [c for c in everything if c != "RL002"]
        assert codes(*extra, "--select", "RL2", "--ignore", "RL002", script) == [c for c in everything
                                                                                 if c.startswith("RL2")]
        assert codes(*extra, "--select", "RL002", script) == ["RL002"]
        assert codes(*extra, "--ignore", "RL0,RL1,RL2,RL3,RL4,RL5,RL6", script) == []


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ignore_holds_in_worker_processes(jobs: str, bare_python: str, scripts) -> None:
    files = list(scripts.values())
    assert "RL002" in codes("--jobs", jobs, "--python", bare_python, *files)
    assert "RL002" not in codes("--jobs", jobs, "--python", bare_python, "--ignore", "RL002", *files)


def test_pyproject_selection_layers_like_ruff(tmp_path: Path, bare_python: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.rlpatch]\nignore = ["RL002"]\n')
    script = project / "run.sh"
    script.write_text(CONSISTENCY)
    assert "RL002" not in codes("--python", bare_python, str(script))
    # the command line's --ignore adds to the table's ignore (it used to replace it)
    found = codes("--python", bare_python, "--ignore", "RL101", str(script))
    assert "RL002" not in found and "RL101" not in found and "RL211" in found
    # a command-line --select starts over, as in ruff
    assert codes("--python", bare_python, "--select", "RL002", str(script)) == ["RL002"]
    assert "RL002" in codes("--no-config", "--python", bare_python, str(script))

    selected = tmp_path / "selected"
    selected.mkdir()
    (selected / "pyproject.toml").write_text('[tool.rlpatch]\nselect = ["RL0", "RL6"]\n')
    (selected / "run.sh").write_text(CONSISTENCY)
    # RL605 [W]: the named Python has no vLLM-Ascend tree to check for the dispatch logger (issue 18.2)
    assert codes("--python", bare_python, str(selected / "run.sh")) == ["RL002", "RL605"]
    assert codes("--python", bare_python, "--ignore", "RL002", str(selected / "run.sh")) == ["RL605"]


def test_directives_silence_other_families_notes(bare_python: str, scripts) -> None:
    script = Path(scripts["consistency"])
    text = script.read_text().replace("python3 -m", "# rlpatch: disable=RL002\npython3 -m", 1)
    script.write_text(text)
    assert "RL002" not in codes("--python", bare_python, str(script))
    script.write_text("# rlpatch: disable-file=RL0\n" + CONSISTENCY)
    assert not [c for c in codes("--python", bare_python, str(script)) if c.startswith("RL0")]


def test_config_files_pass_the_same_filter(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"task": "tensor", "level": "L9"}\n')
    everything = codes(str(config))
    assert everything and all(c.startswith("RL5") for c in everything)
    assert codes("--ignore", "RL5", str(config)) == []
    assert codes("--select", everything[0], str(config)) == [everything[0]]


def test_rl605_note_for_the_verl_of_this_interpreter(tmp_path: Path, scripts) -> None:
    """No target option: the verl importable here is checked, and when that check cannot run
    (here: an engine file that is not UTF-8) the note says so instead of a silent pass."""
    tree = tmp_path / "site"
    package = tree / "verl"
    (package / "version").mkdir(parents=True)
    (package / "version" / "version").write_text("0.9.1\n")
    (package / "__init__.py").write_text("")
    engine = package / "workers" / "engine" / "fsdp"
    engine.mkdir(parents=True)
    (engine / "transformer_impl.py").write_bytes(b"\xff\xfe not python\n")
    old_path, old_env = list(sys.path), os.environ.get("PYTHONPATH")
    sys.path.insert(0, str(tree))  # this process finds the verl...
    os.environ["PYTHONPATH"] = str(tree)  # ...and so does the `rlpatch verify` it runs
    try:
        result = run_cli("lint", "--format", "json", "--select", "RL605,RL002", scripts["consistency"])
    finally:
        sys.path[:] = old_path
        if old_env is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_env
    notes = [f["message"] for f in json.loads(result.stdout)["findings"] if "RL605 not checked" in f["message"]]
    assert len(notes) == 1 and "not UTF-8" in notes[0], result.stdout
