"""The patch engine's guarantees (spec section 0), on a small fixture tree of our own.

Each test can fail: it checks bytes on disk, exit codes and messages, not just that a command ran.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ENGINE_RULES, run_cli, run_rlpatch, snapshot

from rlpatch.testing import paused_cli

FSDP = "verl/workers/engine/fsdp/transformer_impl.py"
MEGATRON = "verl/workers/engine/megatron/transformer_impl.py"


@pytest.fixture
def tree(fixture_tree):
    return fixture_tree("verl_engine")


def apply(tree: Path, *extra: str):
    return run_cli("apply", "--verl-root", str(tree), *extra)


# --- apply / verify / revert ------------------------------------------------------------------


def test_apply_verify_revert_round_trip(tree):
    pristine = snapshot(tree)
    result = apply(tree)
    assert result.exit_code == 0, result.stderr
    assert "applied now" in result.stdout
    for relative in (FSDP, MEGATRON):
        compile((tree / relative).read_text(), relative, "exec")
    assert run_cli("verify", "--verl-root", str(tree)).exit_code == 0

    patched = snapshot(tree)
    again = apply(tree)
    assert again.exit_code == 0 and again.stdout.count("already applied, nothing to do") == 2
    assert snapshot(tree) == patched

    reverted = run_cli("revert", "--verl-root", str(tree))
    assert reverted.exit_code == 0, reverted.stderr
    assert snapshot(tree) == pristine  # byte-identical, and no .rlpatch/ left behind


def test_verify_exit_codes_and_status(tree):
    assert run_cli("verify", "--verl-root", str(tree)).exit_code == 1
    status = run_cli("status", "--verl-root", str(tree), "--format", "json")
    assert status.exit_code == 0
    rules = json.loads(status.stdout)["targets"][0]["rules"]
    assert {r["id"]: r["state"] for r in rules if r["id"] in ENGINE_RULES} == {"verl-engine-fsdp": "absent", "verl-engine-megatron": "absent"}


def test_json_contract(tree):
    result = apply(tree, "--format", "json")
    payload = json.loads(result.stdout)
    target = payload["targets"][0]
    assert target["package"] == "verl" and target["version"] == "0.9.1" and target["root"] == str(tree)
    engine_rules = [r for r in target["rules"] if r["id"] in ENGINE_RULES]
    assert [r["id"] for r in engine_rules] == ["verl-engine-fsdp", "verl-engine-megatron"]
    for rule in engine_rules:
        assert set(rule) == {"id", "state", "files", "message"}
        assert rule["state"] == "applied"
    assert target["rules"][0]["files"] == [FSDP]


def test_backend_and_rules_selection(tree):
    assert apply(tree, "--backend", "megatron").exit_code == 0
    states = {r["id"]: r["state"] for r in json.loads(run_cli("status", "--verl-root", str(tree), "--format", "json").stdout)["targets"][0]["rules"] if r["id"] in ENGINE_RULES}
    assert states == {"verl-engine-fsdp": "absent", "verl-engine-megatron": "applied"}
    assert apply(tree, "--rules", "no-such-rule").exit_code == 2


def test_package_folder_accepted_as_root(tree):
    assert run_cli("apply", "--verl-root", str(tree / "verl")).exit_code == 0
    assert run_cli("verify", "--verl-root", str(tree)).exit_code == 0


def test_compatibility_identifiers_present(tree):
    apply(tree)
    fsdp, megatron = (tree / FSDP).read_text(), (tree / MEGATRON).read_text()
    for name in ("_ensure_debugger", "_log_update_actor_step", "DUMP_ON", "update_actor_log.jsonl", "PrecisionDebugger"):
        assert name in fsdp and name in megatron
    assert "self._debugger.start(" in fsdp
    assert "_finish_dump_step" in megatron and "_dump_should_record" in megatron


def test_never_reformats(tree):
    """Only added lines: every original line is still there, in order."""
    original = (tree / FSDP).read_text().splitlines()
    apply(tree)
    patched = iter((tree / FSDP).read_text().splitlines())
    assert all(any(line == candidate for candidate in patched) for line in original)


def test_crlf_and_mode_bits_survive(tree):
    path = tree / FSDP
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    os.chmod(path, 0o640)
    pristine = snapshot(tree)
    assert apply(tree).exit_code == 0
    data = path.read_bytes()
    assert b"\r\n" in data and data.count(b"\n") == data.count(b"\r\n")  # no bare LF added
    assert (path.stat().st_mode & 0o777) == 0o640
    assert run_cli("revert", "--verl-root", str(tree)).exit_code == 0
    assert snapshot(tree) == pristine


def test_diff_writes_nothing_and_reapplies_exactly(tree, tmp_path):
    pristine = snapshot(tree)
    result = run_cli("diff", "--verl-root", str(tree))
    assert result.exit_code == 0 and snapshot(tree) == pristine

    import unidiff

    patch_set = unidiff.PatchSet(result.stdout)
    assert sorted(p.path for p in patch_set) == [FSDP, MEGATRON]

    copy = tmp_path / "copy"
    shutil.copytree(tree, copy)
    diff_file = tmp_path / "rlpatch.diff"
    diff_file.write_text(result.stdout)
    subprocess.run(["patch", "-p1", "-s", "-i", str(diff_file)], cwd=copy, check=True)
    apply(tree)
    for relative in (FSDP, MEGATRON):
        assert (copy / relative).read_bytes() == (tree / relative).read_bytes()


# --- refusals write nothing ------------------------------------------------------------------


@pytest.mark.parametrize(
    "mutation, expected",
    [
        (lambda s: s.replace("def forward_backward_batch", "def forward_backward_batches"), "forward_backward_batch"),
        (lambda s: s.replace("        return output_lst", "        for micro_batch in micro_batches:\n            with ctx:\n                self.forward_step(micro_batch, loss_function=None, forward_only=True)\n        return output_lst"), "for loop over micro_batches"),
        (lambda s: s.replace("            with ctx, sync_ctx:\n", "            if True:\n"), "`with` statement"),
    ],
    ids=["renamed-method", "duplicated-loop", "removed-with"],
)
def test_drift_is_refused_and_nothing_is_written(tree, mutation, expected):
    path = tree / FSDP
    path.write_text(mutation(path.read_text()))
    before = snapshot(tree)
    result = apply(tree)
    assert result.exit_code == 1
    assert expected in result.stderr and FSDP in result.stderr and "0.9.1" in result.stderr
    assert "FSDPEngine" in result.stderr
    assert snapshot(tree) == before  # not even .rlpatch/ content changed (only the lock folder may exist)


def test_refusal_in_one_rule_leaves_other_files_untouched(tree):
    (tree / MEGATRON).write_text((tree / MEGATRON).read_text().replace("losses_reduced = forward_backward_func(", "losses = forward_backward_func("))
    before = snapshot(tree, skip_state=True)
    assert apply(tree).exit_code == 1
    assert snapshot(tree, skip_state=True) == before  # FSDP file, patchable on its own, untouched too


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda t: t / "missing", "no such directory"),
        (lambda t: (shutil.rmtree(t / "verl"), t)[1], "holds no verl/ package folder"),
    ],
    ids=["missing-root", "root-without-verl"],
)
def test_bad_roots(tree, setup, message):
    result = apply(setup(tree))
    assert result.exit_code == 2 and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "content, message",
    [(b"def broken(:\n", "not valid Python"), (b"\x00\x01\x02binary", "binary file"), (b"caf\xe9 = 1\n", "not UTF-8")],
    ids=["invalid-python", "binary", "not-utf8"],
)
def test_bad_target_files(tree, content, message):
    (tree / FSDP).write_bytes(content)
    before = snapshot(tree)
    result = apply(tree)
    assert result.exit_code == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert snapshot(tree, skip_state=True) == {k: v for k, v in before.items() if not k.startswith(".rlpatch")}


def test_read_only_tree_writes_nothing(tree, monkeypatch):
    # Root ignores permission bits, so read-only is simulated where the engine asks.
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path).startswith(str(tree / "verl")) else real_access(path, mode))
    before = snapshot(tree, skip_state=True)
    result = apply(tree)
    assert result.exit_code == 2 and "not writable" in result.stderr
    assert snapshot(tree, skip_state=True) == before


def test_version_gates(tree):
    (tree / "verl/version/version").write_text("0.6.1\n")
    refused = apply(tree)
    assert refused.exit_code == 1 and "--force" in refused.stderr + refused.stdout
    assert apply(tree, "--force").exit_code == 0
    (tree / "verl/version/version").write_text("0.7.1\n")
    warned = run_cli("status", "--verl-root", str(tree))
    assert "use_legacy_worker_impl=disable" in warned.stdout
    (tree / "verl/version/version").write_text("0.5.0\n")
    result = run_cli("status", "--verl-root", str(tree), "--format", "json")
    assert {r["state"] for r in json.loads(result.stdout)["targets"][0]["rules"]} == {"not-applicable"}


# --- user edits, partial state ---------------------------------------------------------------


def test_revert_keeps_user_edits_outside_the_patch(tree):
    original = (tree / FSDP).read_text()
    apply(tree)
    path = tree / FSDP
    path.write_text(path.read_text() + "\nUSER_EDIT = 1\n")
    result = run_cli("revert", "--verl-root", str(tree))
    assert result.exit_code == 0, result.stderr
    assert path.read_text() == original + "\nUSER_EDIT = 1\n"
    assert "kept your edits" in result.stderr


def test_revert_refuses_when_patch_code_was_edited(tree):
    apply(tree)
    path = tree / FSDP
    path.write_text(path.read_text().replace("self._debugger.start(model=self.module)", "self._debugger.start(model=None)"))
    before = snapshot(tree)
    result = run_cli("revert", "--verl-root", str(tree))
    assert result.exit_code == 1 and "drifted" in result.stderr and FSDP in result.stderr
    assert snapshot(tree) == before
    assert run_cli("verify", "--verl-root", str(tree)).exit_code == 1


def test_partial_set_is_reported_and_completed(tree):
    pristine_megatron = (tree / MEGATRON).read_bytes()
    apply(tree)
    (tree / MEGATRON).write_bytes(pristine_megatron)  # one file reverted by hand
    status = json.loads(run_cli("status", "--verl-root", str(tree), "--format", "json").stdout)
    states = {r["id"]: r["state"] for r in status["targets"][0]["rules"] if r["id"] in ENGINE_RULES}
    assert states == {"verl-engine-fsdp": "applied", "verl-engine-megatron": "absent"}
    assert apply(tree).exit_code == 0
    assert run_cli("verify", "--verl-root", str(tree)).exit_code == 0


def test_partial_within_a_file_is_reported(tree):
    apply(tree)
    path = tree / FSDP
    path.write_text(path.read_text().replace("        _dump_this_pass = self._ensure_debugger(forward_only)\n", ""))
    result = run_cli("verify", "--verl-root", str(tree), "--format", "json")
    rule = json.loads(result.stdout)["targets"][0]["rules"][0]
    assert result.exit_code == 1 and rule["state"] == "partial" and "before the micro-batch loop" in rule["message"]


# --- crash safety and locking -----------------------------------------------------------------


def test_sigkill_during_apply_leaves_whole_files_and_revert_recovers(tree):
    pristine = snapshot(tree)
    originals = {rel: (tree / rel).read_bytes() for rel in (FSDP, MEGATRON)}
    # The pause follows every write, the undo copy made before FSDP's file too: this test waits one pause
    # for FSDP's write, then has one pause to kill before the Megatron file's (5 s: ample, polled at 50 ms).
    process = subprocess.Popen(
        paused_cli(5, "apply", "--verl-root", str(tree)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while (tree / FSDP).read_bytes() == originals[FSDP] and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (tree / FSDP).read_bytes() != originals[FSDP], "the first file was never written"
    assert (tree / MEGATRON).read_bytes() == originals[MEGATRON]  # wholly old
    compile((tree / FSDP).read_text(), FSDP, "exec")  # wholly new, never half-written
    assert (tree / ".rlpatch" / "journal.json").exists()

    result = run_cli("revert", "--verl-root", str(tree))
    assert result.exit_code == 0 and "an interrupted apply was rolled back in" in result.stderr
    assert snapshot(tree) == pristine


def test_interrupted_apply_is_rolled_back_before_the_next_apply(tree):
    process = subprocess.Popen(
        paused_cli(30, "apply", "--verl-root", str(tree)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    journal = tree / ".rlpatch" / "journal.json"
    deadline = time.monotonic() + 60
    while not journal.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    process.send_signal(signal.SIGKILL)
    process.wait()
    result = apply(tree)
    assert result.exit_code == 0 and "rolled back" in result.stderr
    assert run_cli("verify", "--verl-root", str(tree)).exit_code == 0


def test_concurrent_applies_do_not_interleave(tree):
    processes = [
        subprocess.Popen([sys.executable, "-m", "rlpatch.cli", "apply", "--verl-root", str(tree)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [process.communicate() for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    assert sum(out.count("applied now") for out, _ in outputs) == 2  # two rules, applied once in all
    assert run_cli("verify", "--verl-root", str(tree)).exit_code == 0
    assert run_cli("revert", "--verl-root", str(tree)).exit_code == 0


def test_held_lock_refuses_after_timeout(tree):
    import fcntl

    (tree / ".rlpatch").mkdir()
    with open(tree / ".rlpatch" / "lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        result = run_rlpatch("apply", "--verl-root", str(tree), env={"RLPATCH_LOCK_TIMEOUT": "0.3"})
    assert result.returncode == 1 and "another rlpatch process" in result.stderr


# --- git ------------------------------------------------------------------------------------


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def git_tree(tree):
    _git(tree, "init", "-q")
    _git(tree, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "add", "-A")
    _git(tree, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "init")
    return tree


def test_git_state_folder_excluded_and_head_recorded(git_tree):
    head = _git(git_tree, "rev-parse", "HEAD").strip()
    assert apply(git_tree).exit_code == 0
    status = _git(git_tree, "status", "--porcelain")
    assert ".rlpatch" not in status and FSDP in status
    manifest = json.loads((git_tree / ".rlpatch" / "manifest.json").read_text())
    assert manifest["git_head"] == head


def test_git_dirty_target_refused_unless_allowed(git_tree):
    (git_tree / FSDP).write_text((git_tree / FSDP).read_text() + "\n# local change\n")
    result = apply(git_tree)
    assert result.exit_code == 1 and "uncommitted changes" in result.stderr
    assert apply(git_tree, "--allow-dirty").exit_code == 0


def test_git_commit_option(git_tree):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    result = run_rlpatch("apply", "--verl-root", str(git_tree), "--commit", env=env)
    assert result.returncode == 0, result.stderr
    assert _git(git_tree, "log", "--format=%s").splitlines()[0].startswith("rlpatch: apply verl-engine-fsdp")
    assert _git(git_tree, "status", "--porcelain") == ""


def test_works_without_a_git_binary(git_tree, tmp_path):
    # PATH holds no git; the interpreter is called by its real path (a symlink to a venv's python
    # elsewhere is no longer that venv: it has no pyvenv.cfg beside it, so rlpatch would be missing).
    bare_path = tmp_path / "bin"
    bare_path.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "rlpatch.cli", "apply", "--verl-root", str(git_tree)],
        capture_output=True, text=True, env={**os.environ, "PATH": str(bare_path)},
    )
    assert result.returncode == 0, result.stderr
    assert "applied now" in result.stdout


# --- target discovery -----------------------------------------------------------------------


def test_default_target_is_the_tree_the_interpreter_imports(tree):
    env = {"PYTHONPATH": str(tree)}
    result = run_rlpatch("status", env=env)
    assert result.returncode == 0, result.stderr
    assert f"verl 0.9.1 at {tree}" in result.stdout and "imported by" in result.stderr


def test_no_tree_found_is_an_input_error(tmp_path):
    result = run_rlpatch("status", "--python", sys.executable, cwd=str(tmp_path), env={"PYTHONPATH": ""})
    if "using verl" in result.stderr:
        pytest.skip("a verl is installed in this interpreter")
    assert result.returncode == 2 and "no tree of verl" in result.stderr


def test_dry_run_writes_nothing(tree):
    before = snapshot(tree)
    result = apply(tree, "--dry-run")
    assert result.exit_code == 0 and result.stdout.count("would apply") == 2
    assert snapshot(tree) == before


def test_revert_without_state_folder_strips_the_patch(tree):
    pristine = snapshot(tree)
    apply(tree)
    shutil.rmtree(tree / ".rlpatch")  # manifest and originals lost: revert works from structure alone
    result = run_cli("revert", "--verl-root", str(tree))
    assert result.exit_code == 0, result.stderr
    assert snapshot(tree) == pristine


def test_symlinked_target_stays_a_link(tree, tmp_path):
    """A link inside the tree to a file inside it is followed (issue 30: one out of the tree is
    refused, tests/test_faults_links.py)."""
    real = tree / "real_fsdp.py"
    shutil.move(tree / FSDP, real)
    (tree / FSDP).symlink_to(real)
    original = real.read_bytes()
    assert apply(tree).exit_code == 0
    assert (tree / FSDP).is_symlink() and real.read_bytes() != original
    assert run_cli("revert", "--verl-root", str(tree)).exit_code == 0
    assert (tree / FSDP).is_symlink() and real.read_bytes() == original


@pytest.mark.skipif(os.getuid() != 0, reason="only root can hand files to another owner")
def test_owner_of_patched_files_is_kept(tree):
    os.chown(tree / FSDP, 12345, 12345)
    assert apply(tree).exit_code == 0
    assert (tree / FSDP).stat().st_uid == 12345
    assert run_cli("revert", "--verl-root", str(tree)).exit_code == 0
    assert (tree / FSDP).stat().st_uid == 12345
