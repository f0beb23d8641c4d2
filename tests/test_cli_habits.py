"""Issue 22, items 8, 9 and 12: command-line habits of ruff, ShellCheck and pre-commit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RLPATCH = [sys.executable, "-c", "from rlpatch.cli import main; main()"]
UNKNOWN = "python3 -m verl.trainer.main_ppo trainer.nnodes=1 x=$UNSET\n"


def rlpatch(*args: str, cwd: Path | None = None, env: dict | None = None):
    proc = subprocess.run(RLPATCH + list(args), cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **(env or {})))
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for folder in ("sub", ".git", ".venv", "node_modules", "__pycache__", ".hidden"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.sh").write_text(UNKNOWN)
    (tmp_path / "a.sh").write_text(UNKNOWN)
    (tmp_path / "sub" / "notes.txt").write_text("echo hi\n")
    return tmp_path


# ---- item 8: directories, and `.` by default ----------------------------------------------------------
def test_a_directory_is_linted_recursively_skipping_hidden_and_vendored_folders(tree: Path) -> None:
    code, out, err = rlpatch("lint", str(tree))
    files = [line.split(":")[0] for line in out.splitlines()[:-1]]
    assert (code, err) == (0, "")
    assert files == [str(tree / "a.sh"), str(tree / "sub" / "x.sh")]


def test_no_argument_lints_the_current_directory(tree: Path) -> None:
    code, out, _ = rlpatch("lint", cwd=tree)
    assert code == 0 and [line.split(":")[0] for line in out.splitlines()[:-1]] == ["a.sh", "sub/x.sh"]


def test_an_explicit_file_is_linted_whatever_its_name_and_once(tree: Path) -> None:
    code, out, _ = rlpatch("lint", "sub/notes.txt", ".", "a.sh", cwd=tree)
    assert code == 1
    assert [line.split(":")[0] for line in out.splitlines()[:-1]] == ["sub/notes.txt", "a.sh", "sub/x.sh"]


def test_a_directory_without_scripts_warns_and_passes(tmp_path: Path) -> None:
    assert rlpatch("lint", str(tmp_path)) == (0, "All checks passed.\n", "rlpatch lint: warning: no *.sh files found\n")


# ---- item 9: severity filter, statistics, output file, settings ---------------------------------------
WARNING = "python3 -m verl.trainer.main_ppo \\\n    # comment\n    trainer.nnodes=1 x=$UNSET\n"


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    (tmp_path / "w.sh").write_text(WARNING)
    (tmp_path / "i.sh").write_text(UNKNOWN.replace("\n", " y=$OTHER\n"))
    return tmp_path


def test_severity_hides_and_does_not_count_lower_findings(mixed: Path) -> None:
    _, everything, _ = rlpatch("lint", cwd=mixed)
    assert "[I]" in everything and "[W]" in everything
    code, out, _ = rlpatch("lint", "--severity", "warning", "--fail-on", "I", cwd=mixed)
    assert code == 1 and "[I]" not in out and "[W]" in out and out.endswith("Found 1 finding.\n")
    assert rlpatch("lint", "-S", "error", cwd=mixed)[1] == "All checks passed.\n"


def test_statistics_counts_per_rule(mixed: Path) -> None:
    code, out, _ = rlpatch("lint", "--statistics", cwd=mixed)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("2\tRL002\t[I] ") and lines[-1] == "Found 3 findings."
    code, out, _ = rlpatch("lint", "--statistics", "--format", "json", cwd=mixed)
    assert [(row["code"], row["count"]) for row in __import__("json").loads(out)["statistics"]][0] == ("RL002", 2)
    assert rlpatch("lint", "--statistics", "--format", "sarif", cwd=mixed)[0] == 2


def test_output_file_gets_the_report_and_refuses_inputs_devices_and_folders(mixed: Path) -> None:
    code, out, err = rlpatch("lint", "-o", "report.txt", cwd=mixed)
    assert (code, out, err) == (0, "", "") and (mixed / "report.txt").read_text().endswith("Found 3 findings.\n")
    (mixed / "folder").mkdir()
    for target, why in [("w.sh", "is the input w.sh"), ("/dev/null", "not a regular file"),
                        ("folder", "is a directory"), ("nowhere/r.txt", "no folder nowhere")]:
        code, out, err = rlpatch("lint", "--output-file", target, cwd=mixed)
        assert code == 2 and out == "" and err.startswith(f"rlpatch: error: --output-file {target}: {why}"), err
        assert err.count("\n") == 1
    assert (mixed / "w.sh").read_text() == WARNING


def test_show_settings_prints_the_resolved_settings_and_exits_0(mixed: Path) -> None:
    (mixed / "pyproject.toml").write_text('[tool.rlpatch]\nignore = ["RL002"]\nfail-on = "W"\n')
    code, out, _ = rlpatch("lint", "--show-settings", "--mode", "consistency", "--env", "A=1", cwd=mixed)
    settings = dict(line.split(": ", 1) for line in out.splitlines())
    assert code == 0
    assert settings["config file"] == str(mixed / "pyproject.toml") and settings["ignore"] == "RL002"
    assert (settings["fail-on"], settings["mode"], settings["env"], settings["files"]) == ("warning", "consistency",
                                                                                        "A=1", "2")


# ---- item 12: rule / rules, detect ---------------------------------------------------------------------
def test_rule_and_rules_point_at_each_other() -> None:
    _, rule_help, _ = rlpatch("rule", "--help")
    _, rules_help, _ = rlpatch("rules", "--help")
    assert "LINT rules" in rule_help and "rlpatch rules" in rule_help
    assert "PATCH rules" in rules_help and "rlpatch rule" in rules_help
    assert rlpatch("rules", "rl101") == (2, "", "rlpatch: error: RL101 is a lint rule: rlpatch rule RL101\n")
    code, out, _ = rlpatch("rules", "verl-engine-fsdp")
    assert code == 0 and out.startswith("verl-engine-fsdp  [verl;") and out.count("\n    runs under") == 1
    code, out, _ = rlpatch("rule", "verl-engine-fsdp")
    assert code == 0 and "What it patches" in out
    assert rlpatch("rules", "nope")[0] == 2


LAUNCHERS = ('ARGS="trainer.nnodes=1 actor_rollout_ref.rollout.tensor_model_parallel_size=2"\n'
             'if [ "$USE_TORCHRUN" = 1 ]; then\n  torchrun -m verl.trainer.main_ppo $ARGS\n'
             'else\n  python3 -m verl.trainer.main_ppo $ARGS\nfi\n')


def test_detect_shows_a_run_reached_by_two_launchers_once(tmp_path: Path) -> None:
    (tmp_path / "two.sh").write_text(LAUNCHERS)
    code, out, _ = rlpatch("detect", "two.sh", cwd=tmp_path)
    assert code == 0 and out.count("two.sh: verl.trainer.main_ppo") == 1 and "another launch" not in out
    code, out, _ = rlpatch("detect", "--format", "json", "two.sh", cwd=tmp_path)
    assert code == 0 and "other_launches" not in out


def test_detect_uses_python_and_has_no_rollout_root_options(tmp_path: Path) -> None:
    (tmp_path / "two.sh").write_text(LAUNCHERS)
    assert rlpatch("detect", "--sglang-root", ".", "two.sh", cwd=tmp_path)[0] == 2
    assert rlpatch("detect", "--vllm-ascend-root", ".", "two.sh", cwd=tmp_path)[0] == 2
    code, out, err = rlpatch("detect", "--python", sys.executable, "two.sh", cwd=tmp_path)
    assert code == 2 and out == "" and err.startswith(f"rlpatch: error: --python {sys.executable}: no verl installed")


def test_color_always_never_and_no_color(tree: Path) -> None:
    from rlpatch.lint.report import use_color

    _, coloured, _ = rlpatch("lint", "--color", "always", "a.sh", cwd=tree)
    assert coloured.startswith("\x1b[1ma.sh:1:53:\x1b[0m \x1b[36m\x1b[1mRL002 [I]\x1b[0m ")
    _, full, _ = rlpatch("lint", "--color", "always", "--format", "full", "a.sh", cwd=tree)
    assert full.startswith("\x1b[1ma.sh:")
    assert "\x1b" not in rlpatch("lint", "a.sh", cwd=tree)[1]  # auto, not a terminal
    assert "\x1b" not in rlpatch("lint", "--color", "never", "a.sh", cwd=tree)[1]
    assert "\x1b" not in rlpatch("lint", "--color", "always", "--format", "json", "a.sh", cwd=tree)[1]
    assert use_color("auto", True, {}) and not use_color("auto", True, {"NO_COLOR": "1"})
    assert use_color("always", False, {"NO_COLOR": "1"}) and not use_color("never", True, {})
    assert not use_color("auto", True, {"NO_COLOR": "1"})


def test_completion_script_is_offered() -> None:
    code, out, _ = rlpatch("", env={"_RLPATCH_COMPLETE": "bash_source"})
    assert code == 0 and "_rlpatch_completion" in out


def test_dumps_check_lists_the_expected_ranks() -> None:
    from rlpatch.dumps.text import rank_list

    assert rank_list([0]) == "0" and rank_list([0, 1]) == "0, 1"
    assert rank_list([0, 1, 2, 3, 5, 7, 8, 9]) == "0-3, 5, 7-9" and rank_list([]) == ""


def test_rl002_shows_a_list_value_with_its_known_text(tmp_path: Path) -> None:
    (tmp_path / "arr.sh").write_text("A=$HOME\npython3 -m verl.trainer.main_ppo trainer.nnodes=1 "
                                     "trainer.default_local_dir=\"['$A', '$HOME']\" x=$(nproc)\n")
    _, out, _ = rlpatch("lint", "arr.sh", cwd=tmp_path)
    assert "cannot be known statically: trainer.default_local_dir=['$HOME', '$HOME']" in out
    assert "cannot be known statically: x=$(nproc)" in out


def test_one_finding_per_place_with_the_related_notes_of_every_path() -> None:
    from rlpatch.lint.engine import merge_paths
    from rlpatch.lint.rule import Finding
    from rlpatch.shell.source import Span

    at, used_a, used_b = Span("w.sh", 3, 5, 3, 9), Span("run.sh", 7, 1, 7, 4), Span("run.sh", 9, 1, 9, 4)
    findings = {Finding("RL101", "error", "must be True", at, (used_a,)),
                Finding("RL101", "error", "must be True", at, (used_b,)),
                Finding("RL101", "error", "must be True", at, (used_a,))}
    [merged] = merge_paths(findings)
    assert merged.span == at and set(merged.related) == {used_a, used_b} and len(merged.related) == 2
