"""Faults through symbolic links (issue 30, item 1): rlpatch writes only inside the place the user
named, never through a link that leaves it.

Each case plants a link inside the named place that points at a victim file (or folder) outside it;
the victim is checked byte for byte after the command, which must refuse with one line and exit 2
(nothing written), or, for a link that stays inside the place, do the write there and say so.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import FIXTURES, run_cli, snapshot

FSDP = "verl/workers/engine/fsdp/transformer_impl.py"
VICTIM_BYTES = b"# a file outside the tree: no rlpatch command may change it\n"


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(FIXTURES / "verl_engine", root)
    return root


def _victim(tmp_path: Path, data: bytes = VICTIM_BYTES) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    victim = outside / "victim.py"
    victim.write_bytes(data)
    return victim


def _refused(result, victim: Path, data: bytes) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert len(lines) == 1 and "symbolic link" in lines[0], result.stderr
    assert victim.read_bytes() == data


def test_apply_refuses_a_target_file_linked_out_of_the_tree(tmp_path):
    root = _tree(tmp_path)
    victim = _victim(tmp_path, (root / FSDP).read_bytes())
    (root / FSDP).unlink()
    (root / FSDP).symlink_to(victim)
    before = snapshot(root)
    result = run_cli("apply", "--verl-root", str(root))
    _refused(result, victim, (FIXTURES / "verl_engine" / FSDP).read_bytes())
    assert snapshot(root) == before and not (root / ".rlpatch").exists()


def test_apply_refuses_a_parent_folder_linked_out_of_the_tree(tmp_path):
    root = _tree(tmp_path)
    folder = root / os.path.dirname(FSDP)
    outside = tmp_path / "outside-folder"
    shutil.move(str(folder), outside)
    folder.symlink_to(outside, target_is_directory=True)
    victim = outside / os.path.basename(FSDP)
    data = victim.read_bytes()
    result = run_cli("apply", "--verl-root", str(root))
    _refused(result, victim, data)
    assert not (root / ".rlpatch").exists()


def test_apply_refuses_a_state_folder_linked_elsewhere(tmp_path):
    root = _tree(tmp_path)
    victim = _victim(tmp_path)
    elsewhere = victim.parent
    (root / ".rlpatch").symlink_to(elsewhere, target_is_directory=True)
    before = snapshot(root)
    result = run_cli("apply", "--verl-root", str(root))
    _refused(result, victim, VICTIM_BYTES)
    assert snapshot(root) == before and sorted(os.listdir(elsewhere)) == ["victim.py"]


def test_apply_refuses_a_planted_manifest_link(tmp_path):
    root = _tree(tmp_path)
    victim = _victim(tmp_path)
    (root / ".rlpatch").mkdir()
    (root / ".rlpatch" / "manifest.json").symlink_to(victim)
    result = run_cli("apply", "--verl-root", str(root))
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert victim.read_bytes() == VICTIM_BYTES


def test_apply_follows_a_link_inside_the_tree_and_says_so(tmp_path):
    root = _tree(tmp_path)
    real = root / "verl" / "real_transformer_impl.py"
    shutil.move(str(root / FSDP), real)
    (root / FSDP).symlink_to(real)
    result = run_cli("apply", "--verl-root", str(root))
    assert result.exit_code == 0, result.stderr
    assert f"{root / FSDP} is a symbolic link to {real} (inside the tree): writing there" in result.stderr
    assert (root / FSDP).is_symlink() and real.read_bytes() != (FIXTURES / "verl_engine" / FSDP).read_bytes()
    result = run_cli("revert", "--verl-root", str(root))
    assert result.exit_code == 0, result.stderr
    assert real.read_bytes() == (FIXTURES / "verl_engine" / FSDP).read_bytes()


# --- dumps compare -o, lint -o, gen -o -------------------------------------------------------


def _compare_setup(tmp_path: Path) -> tuple[list[str], Path]:
    from test_dumps import infer_record, infer_tree, train_record, train_tree
    from test_faults_dumps import _fake_msprobe

    train = train_tree(tmp_path / "t", [train_record(0, ["r1"])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [("r1", "new")])])
    out = tmp_path / "out"
    argv = ["dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(out),
            "--python", _fake_msprobe(tmp_path)]
    return argv, out


def _pair_folder(argv: list[str], out: Path) -> Path:
    """The folder the one pair writes in (a first run, then emptied)."""
    result = run_cli(*argv, "--format", "json")
    assert result.exit_code == 0, result.stderr
    folder = next(out.iterdir())
    shutil.rmtree(out)
    out.mkdir()
    return out / folder.name


def test_compare_refuses_a_log_linked_out_of_the_output_folder(tmp_path):
    argv, out = _compare_setup(tmp_path)
    folder = _pair_folder(argv, out)
    victim = _victim(tmp_path)
    folder.mkdir()
    (folder / "msprobe_compare.log").symlink_to(victim)
    _refused(run_cli(*argv), victim, VICTIM_BYTES)
    assert sorted(os.listdir(folder)) == ["msprobe_compare.log"]


def test_compare_refuses_a_pair_folder_linked_elsewhere(tmp_path):
    argv, out = _compare_setup(tmp_path)
    folder = _pair_folder(argv, out)
    victim = _victim(tmp_path)
    folder.symlink_to(victim.parent, target_is_directory=True)
    _refused(run_cli(*argv), victim, VICTIM_BYTES)
    assert sorted(os.listdir(victim.parent)) == ["victim.py"]


def test_compare_follows_a_pair_folder_linked_inside_the_output_folder_and_says_so(tmp_path):
    argv, out = _compare_setup(tmp_path)
    folder = _pair_folder(argv, out)
    (out / "elsewhere").mkdir()
    folder.symlink_to(out / "elsewhere", target_is_directory=True)
    result = run_cli(*argv)
    assert result.exit_code == 0, result.stderr
    assert "is a symbolic link to" in result.stdout + result.stderr
    assert "msprobe_compare.log" in os.listdir(out / "elsewhere")


def test_lint_output_file_replaces_a_link_instead_of_writing_through_it(tmp_path):
    victim = _victim(tmp_path)
    report = tmp_path / "report.txt"
    report.symlink_to(victim)
    result = run_cli("lint", "-o", str(report), str(FIXTURES / "lint" / "consistency" / "fsdp_vllm.sh"))
    assert result.exit_code in (0, 1), result.stderr
    assert victim.read_bytes() == VICTIM_BYTES
    assert not report.is_symlink() and report.is_file()


def test_gen_output_replaces_a_link_instead_of_writing_through_it(tmp_path):
    victim = _victim(tmp_path)
    output = tmp_path / "gen.sh"
    output.symlink_to(victim)
    result = run_cli("gen", "consistency", str(FIXTURES / "gen" / "megatron_vllm.sh"), "-o", str(output))
    assert victim.read_bytes() == VICTIM_BYTES, result.stderr
    assert result.exit_code != 0 or not output.is_symlink()


def test_apply_refuses_a_git_exclude_file_linked_out_of_the_checkout(tmp_path):
    import subprocess

    root = _tree(tmp_path)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], check=True)
    victim = _victim(tmp_path)
    exclude = root / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.unlink(missing_ok=True)
    exclude.symlink_to(victim)
    before = (root / FSDP).read_bytes()
    _refused(run_cli("apply", "--verl-root", str(root)), victim, VICTIM_BYTES)
    assert (root / FSDP).read_bytes() == before and not (root / ".rlpatch").exists()


def test_revert_refuses_a_patched_file_replaced_by_a_link_out(tmp_path):
    root = _tree(tmp_path)
    assert run_cli("apply", "--verl-root", str(root)).exit_code == 0
    patched = (root / FSDP).read_bytes()
    victim = _victim(tmp_path, patched)
    (root / FSDP).unlink()
    (root / FSDP).symlink_to(victim)
    _refused(run_cli("revert", "--verl-root", str(root)), victim, patched)


def test_apply_refuses_a_link_inside_the_state_folder(tmp_path):
    root = _tree(tmp_path)
    outside = tmp_path / "outside-originals"
    outside.mkdir()
    (root / ".rlpatch").mkdir()
    (root / ".rlpatch" / "originals").symlink_to(outside, target_is_directory=True)
    before = (root / FSDP).read_bytes()
    result = run_cli("apply", "--verl-root", str(root))
    assert result.exit_code == 2 and "where rlpatch keeps its own files" in result.stderr, result.stderr
    assert not list(outside.iterdir()) and (root / FSDP).read_bytes() == before
