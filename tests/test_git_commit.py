"""`rlpatch apply --commit` commits the patch and nothing else; `revert` after it (issue 10, item 14).

The user's own uncommitted edits in a patched file stay in the working tree, uncommitted; the
commit holds exactly what the patch changes in a clean tree. What cannot be committed that way
is refused before anything is written.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli, run_rlpatch, snapshot

FSDP = "verl/workers/engine/fsdp/transformer_impl.py"
MEGATRON = "verl/workers/engine/megatron/transformer_impl.py"
IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.invalid"}
TOP_EDIT = "# my own edit at the top\n"
END_EDIT = "# my own edit at the end\n"


def git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True, text=True).stdout


@pytest.fixture(autouse=True)
def identity(monkeypatch) -> None:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def clean_patched(tmp_path: Path) -> dict[str, str]:
    """What the patch makes of each file of a clean tree: the only content the commit may have."""
    tree = tmp_path / "clean"
    shutil.copytree(FIXTURES / "verl_engine", tree)
    assert run_cli("apply", "--verl-root", str(tree)).exit_code == 0
    return {relative: (tree / relative).read_text() for relative in (FSDP, MEGATRON)}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    shutil.copytree(FIXTURES / "verl_engine", tree)
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "init")
    return tree


def apply_commit(tree: Path, *extra: str):
    return run_cli("apply", "--verl-root", str(tree), "--commit", *extra)


def edit_around(tree: Path) -> str:
    """The user's unrelated edits: a line at the top and one at the end of the FSDP file."""
    path = tree / FSDP
    original = path.read_text()
    path.write_text(TOP_EDIT + original + END_EDIT)
    return original


def test_commit_holds_only_the_patch_and_the_edits_stay_uncommitted(repo: Path, clean_patched) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    edit_around(repo)
    result = apply_commit(repo, "--allow-dirty")
    assert result.exit_code == 0, result.stderr
    head = git(repo, "rev-parse", "HEAD").strip()
    assert git(repo, "rev-parse", "HEAD~1").strip() == base
    # the commit: exactly the patch of a clean tree, in exactly the patched files
    assert git(repo, "diff", "--name-only", base, head).split() == sorted([FSDP, MEGATRON])
    for relative, patched in clean_patched.items():
        assert git(repo, "show", f"{head}:{relative}") == patched
    assert "my own edit" not in git(repo, "show", head)
    # the working tree: the patch and the user's edits; the edits alone are uncommitted, nothing staged
    assert (repo / FSDP).read_text() == TOP_EDIT + clean_patched[FSDP] + END_EDIT
    assert git(repo, "diff", "--cached") == ""
    added = [line for line in git(repo, "diff").splitlines() if line.startswith(("+", "-")) and line[1:2] not in "+-"]
    assert added == ["+" + TOP_EDIT.strip(), "+" + END_EDIT.strip()]
    assert git(repo, "status", "--porcelain") == f" M {FSDP}\n"
    manifest = json.loads((repo / ".rlpatch" / "manifest.json").read_text())
    assert manifest["git_commit"] == head and manifest["git_head"] == base
    assert f"committed {head[:12]}" in result.stderr


def test_other_staged_work_is_neither_committed_nor_unstaged(repo: Path) -> None:
    (repo / "notes.txt").write_text("mine\n")
    git(repo, "add", "notes.txt")
    assert apply_commit(repo).exit_code == 0
    assert "notes.txt" not in git(repo, "show", "--name-only", "HEAD")
    assert git(repo, "status", "--porcelain") == "A  notes.txt\n"


def test_a_clean_tree_commits_everything_the_patch_wrote(repo: Path) -> None:
    result = run_rlpatch("apply", "--verl-root", str(repo), "--commit", env=IDENTITY)
    assert result.returncode == 0, result.stderr
    assert git(repo, "log", "--format=%s").splitlines()[0] == "rlpatch: apply verl-engine-fsdp, verl-engine-megatron"
    assert git(repo, "status", "--porcelain") == ""


def test_edits_on_the_patched_lines_are_refused_with_nothing_written(repo: Path, clean_patched) -> None:
    original = (repo / FSDP).read_text().splitlines(keepends=True)
    patched = clean_patched[FSDP].splitlines(keepends=True)
    first_new = next(i for i, (a, b) in enumerate(zip(original, patched, strict=False)) if a != b)
    edited = original[:first_new - 1] + [original[first_new - 1].rstrip("\n") + "  # mine\n"] + original[first_new:]
    (repo / FSDP).write_text("".join(edited))  # the line the patch inserts after
    before, head = snapshot(repo), git(repo, "rev-parse", "HEAD")
    result = apply_commit(repo, "--allow-dirty")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"rlpatch: error: --commit: your uncommitted edits in {FSDP} touch the lines the patch changes, so the patch "
        "cannot be committed without them; commit or stash them first, or apply without --commit; nothing was written")
    assert snapshot(repo) == before and git(repo, "rev-parse", "HEAD") == head
    assert apply(repo, "--allow-dirty").exit_code == 0  # without --commit it still applies


def apply(tree: Path, *extra: str):
    return run_cli("apply", "--verl-root", str(tree), *extra)


def test_staged_changes_in_a_patched_file_are_refused(repo: Path) -> None:
    edit_around(repo)
    git(repo, "add", FSDP)
    before = snapshot(repo)
    result = apply_commit(repo, "--allow-dirty")
    assert result.exit_code == 1 and f"{FSDP} has staged changes" in result.stderr
    assert snapshot(repo) == before and git(repo, "status", "--porcelain") == f"M  {FSDP}\n"


def test_no_committer_identity_is_refused_before_writing(repo: Path, monkeypatch) -> None:
    for name in IDENTITY:
        monkeypatch.delenv(name)
    git(repo, "config", "user.useConfigOnly", "true")
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "EMAIL": ""}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    before = snapshot(repo)
    result = apply_commit(repo)
    assert result.exit_code == 1 and "--commit: git cannot commit here" in result.stderr
    assert snapshot(repo) == before


def test_commit_outside_a_checkout_writes_nothing(tmp_path: Path) -> None:
    tree = tmp_path / "plain"
    shutil.copytree(FIXTURES / "verl_engine", tree)
    before = snapshot(tree)
    result = apply_commit(tree)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "rlpatch: error: --commit: the target tree is not a git checkout; nothing was written")
    assert snapshot(tree) == before


def test_revert_after_commit_says_how_to_undo_the_commit(repo: Path) -> None:
    original = edit_around(repo)
    assert apply_commit(repo, "--allow-dirty").exit_code == 0
    sha = git(repo, "rev-parse", "HEAD").strip()
    result = run_cli("revert", "--verl-root", str(repo))
    assert result.exit_code == 0, result.stderr
    assert f"undo the commit itself with `git revert {sha}`" in result.stderr
    assert (repo / FSDP).read_text() == TOP_EDIT + original + END_EDIT  # the user's edits are still there
    assert not (repo / ".rlpatch").exists()


def test_a_noop_revert_removes_a_stale_state_folder(repo: Path) -> None:
    assert apply_commit(repo).exit_code == 0
    git(repo, "revert", "--no-edit", "HEAD")  # the user undid the commit with git itself
    assert (repo / ".rlpatch" / "manifest.json").exists()
    result = run_cli("revert", "--verl-root", str(repo))
    assert result.exit_code == 0 and result.stdout.count("not applied, nothing to do") == 2
    assert "git revert" not in result.stderr  # the commit is undone already: nothing to say about it
    assert not (repo / ".rlpatch").exists()
    assert git(repo, "status", "--porcelain") == ""
