"""`rlpatch lint` with no verl named checks Hydra overrides against the verl that will run (issue 29.1).

The script's own interpreter when it is known here, else the newest release's config from rlpatch's
cache (downloaded once); one stderr line per invocation says which, or why RL3xx did not run. These
tests build the cache and the interpreters themselves (no network); the real release is the upstream
test at the end.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, run_rlpatch

ENTRY = "python3 -m verl.trainer.main_ppo"
BROKEN = "actor_rollout_ref.rollout.name=vllm trainer.nnode=1"  # verl_mini has trainer.nnodes: RL302
NOTE = "rlpatch lint: RL301-RL306"


@pytest.fixture
def default_on(monkeypatch, tmp_path):
    """The real default (the test kit turns it off), with an empty cache of our own and no index:
    a download fails at once, as offline."""
    monkeypatch.delenv("RLPATCH_DEFAULT_VERL", raising=False)
    monkeypatch.setenv("RLPATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    return tmp_path / "cache"


def cache_release(cache: Path, version: str = "0.9.1") -> Path:
    """The cache as a first download leaves it, holding verl_mini as that release's unpacked tree."""
    tree = cache / "wheels" / "verl" / version / "any" / "tree"
    shutil.copytree(FIXTURES / "verl_mini", tree)
    (tree / ".complete").write_text(f"verl-{version}-py3-none-any.whl\n")
    return tree


def scripts(tmp_path: Path, *lines: str) -> list[str]:
    paths = []
    for index, line in enumerate(lines):
        path = tmp_path / f"run{index}.sh"
        path.write_text(line + "\n")
        paths.append(str(path))
    return paths


def notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(NOTE)]


def test_the_cached_release_is_checked_and_said_once(default_on: Path, tmp_path: Path) -> None:
    tree = cache_release(default_on)
    files = scripts(tmp_path, f"{ENTRY} {BROKEN}", f"{ENTRY} {BROKEN}")
    result = run_rlpatch("lint", "--select", "RL3", *files)
    assert result.returncode == 1, result.stderr
    assert [line.split(": ")[1].split()[0] for line in result.stdout.splitlines() if ": RL" in line] == ["RL302", "RL302"]
    assert result.stderr.splitlines() == [f"{NOTE} checked against verl 0.9.1, the newest release, as no verl was "
                                          "named (give --verl-root, --verl-version or --python to choose)"]
    settings = run_rlpatch("lint", "--show-settings", files[0]).stdout
    assert f"else verl 0.9.1, the newest release (cached: {tree})" in settings
    # --jobs: forked workers find the same verl, and the note is still said once
    parallel = run_rlpatch("lint", "--select", "RL3", "--jobs", "2", *files)
    assert parallel.stdout == result.stdout and notes(parallel.stderr) == notes(result.stderr)


def test_offline_with_nothing_cached_is_one_line_and_the_findings_decide(default_on: Path, tmp_path: Path) -> None:
    files = scripts(tmp_path, f"{ENTRY} {BROKEN}", f"{ENTRY} {BROKEN}")
    assert "(not cached: downloaded on first use)" in run_rlpatch("lint", "--show-settings", files[0]).stdout
    result = run_rlpatch("lint", "--select", "RL3", *files)
    assert result.returncode == 0 and result.stdout == "All checks passed.\n"
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{NOTE} not run: no verl named and verl 0.9.1's config is not cached (cannot download verl==0.9.1")
    assert line.endswith("give --verl-root, --verl-version or --python, or run once online")
    # the failure is remembered: the next lint (a pre-commit hook's next commit) does not try again
    marker = default_on / "schema" / "verl-0.9.1.download-failed"
    tried = marker.stat().st_mtime_ns
    again = run_rlpatch("lint", "--select", "RL3", files[0])
    assert again.returncode == 0 and again.stderr == result.stderr and "not tried again for 10 minutes" in line
    assert marker.stat().st_mtime_ns == tried  # no second download was tried (none failed)
    # forked workers (--jobs) try once between them, and the line is still said once
    marker.unlink()
    parallel = run_rlpatch("lint", "--select", "RL3", "--jobs", "2", *files)
    assert parallel.returncode == 0 and len(parallel.stderr.splitlines()) == 1 and " not run: " in parallel.stderr
    # the other families' findings decide the exit code as usual
    assert run_rlpatch("lint", str(FIXTURES / "lint" / "samples" / "gen_tp_mismatch.sh")).returncode == 1
    assert "Traceback" not in result.stderr + again.stderr


def fake_interpreter(where: Path, verl_root: Path) -> Path:
    """An interpreter that exists here and imports verl from `verl_root` (this Python, another path)."""
    where.mkdir(parents=True)
    python = where / "python3"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={verl_root} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python


def test_the_scripts_own_interpreter_when_it_exists_here(default_on: Path, tmp_path: Path) -> None:
    python = fake_interpreter(tmp_path / "venv" / "bin", FIXTURES / "verl_mini")
    files = scripts(tmp_path, f"{python} -m verl.trainer.main_ppo {BROKEN}", f"{ENTRY} {BROKEN}",
                    f"/nowhere/bin/python3 -m verl.trainer.main_ppo {BROKEN}")
    result = run_rlpatch("lint", "--select", "RL3", *files)
    # the first script is checked against its interpreter's verl; the others (a bare python3 not of
    # rlpatch's environment, an interpreter absent here) fall back to the release, not cached here
    assert [line.split(":")[0] for line in result.stdout.splitlines() if ": RL302" in line] == [files[0]]
    said = notes(result.stderr)
    assert said[0] == f"{NOTE} checked against verl 0.9.1 of {python} (the script's interpreter)"
    assert len(said) == 2 and said[1].startswith(f"{NOTE} not run:")
    # a launch that sets its own PYTHONPATH is not judged by the interpreter alone
    (tmp_path / "run0.sh").write_text(f"PYTHONPATH=/elsewhere {python} -m verl.trainer.main_ppo {BROKEN}\n")
    assert "(the script's interpreter)" not in run_rlpatch("lint", "--select", "RL3", files[0]).stderr


def test_a_named_verl_needs_no_note_and_the_switch_turns_the_default_off(default_on: Path, tmp_path: Path,
                                                                           monkeypatch) -> None:
    cache_release(default_on)
    files = scripts(tmp_path, f"{ENTRY} {BROKEN}")
    named = run_rlpatch("lint", "--select", "RL3", "--verl-root", str(FIXTURES / "verl_mini"), *files)
    assert named.returncode == 1 and notes(named.stderr) == []
    assert f"hydra config (RL3xx): --verl-root {FIXTURES / 'verl_mini'}" in run_rlpatch(
        "lint", "--show-settings", "--verl-root", str(FIXTURES / "verl_mini")).stdout
    monkeypatch.setenv("RLPATCH_DEFAULT_VERL", "none")
    off = run_rlpatch("lint", "--select", "RL3", *files)
    assert (off.returncode, off.stderr) == (0, "")
    assert "hydra config (RL3xx): none named (RLPATCH_DEFAULT_VERL=none" in run_rlpatch("lint", "--show-settings").stdout


SAMPLE = FIXTURES / "lint" / "samples" / "sglang_fsdp_overrides.sh"


@pytest.mark.upstream
def test_the_default_reports_the_crashes_of_the_newest_release() -> None:
    """The shape of verl's gpt-oss example: by default, the two overrides that stop Hydra on 0.9.1."""
    from rlpatch.upstream.wheelcache import unpacked_tree

    unpacked_tree("verl", "0.9.1")  # the cache as a first lint leaves it
    result = run_rlpatch("lint", "--select", "RL3", str(SAMPLE))
    found = re.findall(r":(\d+):(\d+): (RL\d+) \[E\]", result.stdout)
    assert result.returncode == 1 and found == [("15", "5", "RL303"), ("21", "5", "RL302")], result.stdout
    assert "RL303 [E] '+actor_rollout_ref.actor.fsdp_config.model_dtype' adds a key" in result.stdout
    assert "RL302 [E] 'actor_rollout_ref.rollout.engine_kwargs.sglang' is an empty dict" in result.stdout
    assert notes(result.stderr) == [f"{NOTE} checked against verl 0.9.1, the newest release, as no verl was "
                                    "named (give --verl-root, --verl-version or --python to choose)"]
    assert run_rlpatch("lint", "--select", "RL3", "--verl-version", "0.9.1", str(SAMPLE)).stdout == result.stdout


@pytest.mark.parametrize("path", ["{bin}", "{bin}:{other}", "{other}:{bin}", "", ":", "{bin}:{bin}", "{missing}:{bin}"])
@pytest.mark.parametrize("command", ["python3", "python3.11", "./python3", "nothere"])
def test_which_finds_what_shutil_which_finds(tmp_path: Path, monkeypatch, path: str, command: str) -> None:
    """The default verl's own PATH lookup (no shutil on a lint's start) agrees with shutil.which."""
    from rlpatch.lint.verl_default import _which

    folders = {name: tmp_path / name for name in ("bin", "other", "missing")}
    for name in ("bin", "other"):
        folders[name].mkdir()
        (folders[name] / "python3").write_text("#!/bin/sh\n")
        (folders[name] / "python3").chmod(0o755)
    (folders["other"] / "python3.11").write_text("not executable\n")
    (folders["bin"] / "python3.11").mkdir()  # a folder is not a command
    monkeypatch.setenv("PATH", path.format(**{name: str(folder) for name, folder in folders.items()}))
    monkeypatch.chdir(folders["bin"])
    assert _which(command) == shutil.which(command)
