"""Faults in the patch wing (issue 20): SIGKILL at random moments, races, damaged state, a full disk.

The promises checked here: nothing is lost (every tree ends byte-identical to a state the user had:
the original or the wholly patched one), nothing is written outside its place (no `*.rlpatch-tmp`
left behind, no write outside the tree), no hang, and every failure is one line with exit 2 or 1,
never an internal error. Trial counts are kept small enough for two busy cores; each test reports
its counts in its assertion message.

Kills use `os.fork` of this (already imported) interpreter running `rlpatch.cli.main`, so that the
random delay falls in the command's own work rather than in Python's start-up: the child is a
separate process killed with SIGKILL like any other.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlpatch.testing import paused_cli

FSDP = "verl/workers/engine/fsdp/transformer_impl.py"
MEGATRON = "verl/workers/engine/megatron/transformer_impl.py"
KILL_TRIALS = 60  # per command (apply, revert); two in three aimed at the transaction
RACE_TRIALS = 20


# --- helpers ----------------------------------------------------------------------------------


def _fresh(base: Path, name: str = "tree") -> Path:
    destination = base / name
    if destination.exists():
        shutil.rmtree(destination)
    shutil.copytree(FIXTURES / "verl_engine", destination)
    return destination


def _temporaries(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*.rlpatch-tmp"))


def _fork_rlpatch(argv: list[str], stderr_path: Path | None = None, gate: tuple[int, int] | None = None) -> int:
    """Start `rlpatch ARGV` in a forked child; returns its pid. With `gate` (a pipe), the child
    waits for the pipe to close before running (so that several children start together)."""
    pid = os.fork()
    if pid:
        return pid
    code = 3
    try:
        if gate is not None:
            os.close(gate[1])
            os.read(gate[0], 1)
        sink = os.open(os.devnull, os.O_WRONLY)
        os.dup2(sink, 1)
        os.dup2(os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) if stderr_path else sink, 2)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        from rlpatch.cli import main

        main(argv)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)
    return 0  # unreachable


def _wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _watch(pid: int, journal: Path, kill_after_journal: float | None = None) -> tuple[float, float]:
    """Wait for the child, polling the journal every 0.2 ms; with `kill_after_journal`, SIGKILL the
    child that long after the journal is first seen. Returns (seconds until the child ended,
    seconds the journal existed)."""
    start = time.monotonic()
    seen = gone = None
    while True:
        now = time.monotonic() - start
        exists = journal.exists()
        if seen is None and exists:
            seen = now
        if seen is not None and gone is None and not exists:
            gone = now
        if seen is not None and kill_after_journal is not None and now >= seen + kill_after_journal:
            os.kill(pid, signal.SIGKILL)
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            end = time.monotonic() - start
            return end, ((gone or end) - seen) if seen is not None else 0.0
        time.sleep(0.0002)


@pytest.fixture
def states(tmp_path):
    """The two states a user has: the pristine tree and the wholly patched one (full snapshots,
    `.rlpatch/` included), and a copy of the patched tree to start reverts from."""
    pristine_tree = _fresh(tmp_path, "pristine")
    pristine = snapshot(pristine_tree)
    patched_tree = _fresh(tmp_path, "patched")
    assert run_cli("apply", "--verl-root", str(patched_tree)).exit_code == 0
    return pristine, snapshot(patched_tree), pristine_tree, patched_tree


# --- SIGKILL at random moments ----------------------------------------------------------------


def _kill_trials(tmp_path, states, command: str, seed: int) -> None:
    """A third of the kills fall at a uniform moment of the whole command, the others at a uniform
    moment of its transaction (from the journal's appearance to a bit past the calibrated end), so that the
    short writing phase is hit often; the moments are random, not at pauses of a test hook."""
    pristine, patched, pristine_tree, patched_tree = states
    start_from = pristine_tree if command == "apply" else patched_tree
    rng = random.Random(seed)
    total = window = 0.0
    for _ in range(2):  # calibration: how long the command runs, how long its transaction lasts
        calibration = tmp_path / "calibration"
        shutil.rmtree(calibration, ignore_errors=True)
        shutil.copytree(start_from, calibration)
        run_total, run_window = _watch(_fork_rlpatch([command, "--verl-root", str(calibration)]), calibration / ".rlpatch" / "journal.json")
        total, window = max(total, run_total), max(window, run_window, 0.002)
    failures, interrupted, next_commands = [], 0, ["status", "verify", "diff", "apply", "revert"]
    for trial in range(KILL_TRIALS):
        tree = tmp_path / "trial"
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(start_from, tree)
        pid = _fork_rlpatch([command, "--verl-root", str(tree)])
        if trial % 3:
            moment = f"{rng.uniform(0.0, window * 1.5) * 1000:.1f} ms into the transaction"
            _watch(pid, tree / ".rlpatch" / "journal.json", float(moment.split()[0]) / 1000)
        else:
            delay = rng.uniform(0.0, total * 1.1)
            moment = f"{delay * 1000:.0f} ms after start"
            time.sleep(delay)
            os.kill(pid, signal.SIGKILL)
            _wait(pid)
        journal = (tree / ".rlpatch" / "journal.json").exists()
        interrupted += journal
        follow = next_commands[trial % len(next_commands)]
        result = run_cli(follow, "--verl-root", str(tree))
        problems = []
        if result.exit_code not in (0, 1) or "internal error" in result.stderr:
            problems.append(f"{follow} exit {result.exit_code}: {result.stderr.strip()[-200:]}")
        if journal and f"an interrupted {command} was rolled back in {tree}" not in result.stderr:
            problems.append(f"{follow} did not say it recovered: {result.stderr.strip()[-200:]}")
        if _temporaries(tree):
            problems.append(f"temporaries left: {_temporaries(tree)}")
        if snapshot(tree) not in (pristine, patched):
            problems.append("tree is neither the original nor the patched one")
        if problems:
            failures.append(f"trial {trial} ({moment}, then {follow}): " + "; ".join(problems))
    held = KILL_TRIALS - len(failures)
    print(f"{command}: {held}/{KILL_TRIALS} kills held, {interrupted} landed mid-transaction")
    assert not failures, f"{held}/{KILL_TRIALS} held ({interrupted} killed mid-transaction):\n" + "\n".join(failures[:8])
    assert interrupted >= 5, f"only {interrupted}/{KILL_TRIALS} kills landed mid-transaction: the test proves little"


def test_sigkill_at_random_moments_of_apply(tmp_path, states):
    """A SIGKILL at any moment of `apply`: the next command (whichever) says it rolled back the
    interrupted apply, leaves no temporary file, and the tree is the original or the patched one."""
    _kill_trials(tmp_path, states, "apply", seed=20)


def test_sigkill_at_random_moments_of_revert(tmp_path, states):
    """A SIGKILL at any moment of `revert`: same promise, starting from the patched tree."""
    _kill_trials(tmp_path, states, "revert", seed=21)


def test_sigkill_of_a_real_process_and_of_the_recovery(tmp_path, states):
    """A real `python -m rlpatch.cli apply` killed mid-transaction, then the recovering command
    itself killed: the third command still ends in a state the user had, with no temporaries."""
    pristine, patched, pristine_tree, _ = states
    tree = tmp_path / "real"
    shutil.copytree(pristine_tree, tree)
    process = subprocess.Popen(
        paused_cli(0.3, "apply", "--verl-root", str(tree)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (tree / ".rlpatch" / "journal.json").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(random.Random(23).uniform(0.0, 0.5))
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (tree / ".rlpatch" / "journal.json").exists()
    rng = random.Random(22)
    duration = 0.3
    for _ in range(5):  # kill the recovering `status` at random moments too
        pid = _fork_rlpatch(["status", "--verl-root", str(tree)])
        time.sleep(rng.uniform(0.0, duration))
        os.kill(pid, signal.SIGKILL)
        _wait(pid)
    result = run_cli("status", "--verl-root", str(tree))
    assert result.exit_code == 0, result.stderr
    assert not _temporaries(tree)
    assert snapshot(tree) in (pristine, patched)


# --- races --------------------------------------------------------------------------------------


def test_apply_racing_revert(tmp_path, states):
    """`apply` and `revert` started together on one tree: each exits 0 (or 1 with a clear message),
    never 2 or an internal error, and the tree ends as the original or the patched one."""
    pristine, patched, pristine_tree, patched_tree = states
    failures: list[str] = []
    for trial in range(RACE_TRIALS):
        tree = tmp_path / "race"
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(patched_tree if trial % 2 else pristine_tree, tree)
        read_end, write_end = os.pipe()
        commands = ["apply", "revert", "status"] if trial % 4 == 3 else ["apply", "revert"]
        children = []
        for index, command in enumerate(commands):
            err = tmp_path / f"race-{index}.err"
            children.append((command, err, _fork_rlpatch([command, "--verl-root", str(tree)], err, gate=(read_end, write_end))))
        os.close(read_end)
        os.close(write_end)  # start them all
        for command, err, pid in children:
            code = _wait(pid)
            message = err.read_text()
            if code not in (0, 1) or "internal error" in message or "error:" in message:
                failures.append(f"trial {trial}: {command} exit {code}: {message.strip()[-200:]}")
            elif code == 1 and "another rlpatch process holds" not in message:
                failures.append(f"trial {trial}: {command} refused without saying why: {message.strip()[-200:]}")
        if _temporaries(tree) or snapshot(tree) not in (pristine, patched):
            failures.append(f"trial {trial}: tree left neither original nor patched")
    failed = len({failure.split(":")[0] for failure in failures})
    print(f"races: {RACE_TRIALS - failed}/{RACE_TRIALS} held")
    assert not failures, f"{RACE_TRIALS - failed}/{RACE_TRIALS} held:\n" + "\n".join(failures[:8])


def test_lock_survives_its_folder_being_removed(tmp_path):
    """A command waiting for the lock while another removes `.rlpatch/` gets the lock, never
    "cannot open .rlpatch/lock"."""
    from rlpatch.patch import lock

    tree = _fresh(tmp_path)
    for _ in range(20):
        with lock.locked(str(tree)):
            shutil.rmtree(tree / ".rlpatch")
        with lock.locked(str(tree)):
            assert (tree / ".rlpatch" / "lock").exists()
        shutil.rmtree(tree / ".rlpatch", ignore_errors=True)


# --- damaged state ----------------------------------------------------------------------------


def _json_values():
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number" if isinstance(value, float) else "int"
    return type(value).__name__


# Where each field of a manifest lives and which JSON kinds it may hold.
FIELDS = {
    ("files",): {"dict"},
    ("versions",): {"dict"},
    ("git_head",): {"str", "null"},
    ("git_commit",): {"str", "null"},
    ("format",): {"int"},
    ("files", FSDP): {"dict"},
    ("files", FSDP, "original_sha256"): {"str", "null"},
    ("files", FSDP, "patched_sha256"): {"str"},
    ("files", FSDP, "mode"): {"int"},
    ("files", FSDP, "rules"): {"list"},
    ("versions", "verl"): {"str"},
}


@pytest.fixture(scope="module")
def patched_template(tmp_path_factory):
    base = tmp_path_factory.mktemp("manifest")
    tree = _fresh(base)
    assert run_cli("apply", "--verl-root", str(tree)).exit_code == 0
    return tree


def _damaged_run(template: Path, manifest_bytes: bytes, command: str) -> tuple[int, str, bool]:
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "tree"
        shutil.copytree(template, tree)
        (tree / ".rlpatch" / "manifest.json").write_bytes(manifest_bytes)
        before = snapshot(tree)
        outside = snapshot(Path(scratch))
        result = run_cli(command, "--verl-root", str(tree))
        untouched = snapshot(tree) == before and snapshot(Path(scratch)) == outside
    return result.exit_code, result.stderr, untouched


def _assert_damage_reported(code: int, stderr: str, untouched: bool) -> None:
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rlpatch: error: "), stderr
    assert "manifest.json" in lines[0] and "internal error" not in lines[0], stderr
    assert untouched, "a damaged manifest led to a write"


COMMANDS = st.sampled_from(["apply", "revert", "status", "verify", "diff"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(sorted(FIELDS)), value=_json_values(), command=COMMANDS)
def test_manifest_with_a_wrong_type(patched_template, field, value, command):
    """A manifest field holding a JSON value of the wrong type: one-line error naming the file, exit
    2, nothing written."""
    if _kind(value) in FIELDS[field]:
        return
    manifest = json.loads((patched_template / ".rlpatch" / "manifest.json").read_text())
    holder = manifest
    for key in field[:-1]:
        holder = holder[key]
    holder[field[-1]] = value
    _assert_damage_reported(*_damaged_run(patched_template, json.dumps(manifest).encode(), command))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), command=COMMANDS)
def test_truncated_or_nested_or_escaping_manifest(patched_template, data, command):
    """A truncated manifest, one nested thousands deep (RecursionError), not UTF-8, or naming a path
    outside the tree: one-line error naming the file, exit 2, nothing written anywhere."""
    good = (patched_template / ".rlpatch" / "manifest.json").read_bytes()
    manifest = json.loads(good)
    depth = data.draw(st.integers(2_000, 200_000), label="depth")
    escape = data.draw(st.sampled_from(["../outside.py", "/etc/hosts", "verl/../../x.py", ".rlpatch/lock", ""]), label="path")
    escaping = copy.deepcopy(manifest)
    escaping["files"][escape] = escaping["files"][FSDP]
    damaged = data.draw(
        st.sampled_from([
            good[: data.draw(st.integers(0, len(good) - 2), label="cut")],
            b"[" * depth + b"]" * depth,
            b'{"files": ' + b"[" * depth + b"]" * depth + b"}",
            b"\xff\xfe" + good,
            json.dumps(escaping).encode(),
            b"[]",
            b"null",
        ]),
        label="manifest",
    )
    _assert_damage_reported(*_damaged_run(patched_template, damaged, command))


def test_damaged_journal_is_reported(tmp_path, states):
    """A journal that is not what rlpatch writes (truncated, wrong types, a path outside the tree):
    one-line error naming it, exit 2, nothing restored from it."""
    _, _, _, patched_tree = states
    for damaged in (b'{"writes": [', b'{"writes": 5}', b'{"writes": [{"relative": "../x", "existed": false, "mode": null}]}'):
        tree = tmp_path / "journal"
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(patched_tree, tree)
        (tree / ".rlpatch" / "journal.json").write_bytes(damaged)
        before = snapshot(tmp_path)
        result = run_cli("apply", "--verl-root", str(tree))
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and "journal.json" in lines[0], result.stderr
        assert snapshot(tmp_path) == before


# --- full disk ----------------------------------------------------------------------------------


def _failing_call(monkeypatch, name: str, fail_at: int, code: int) -> list[int]:
    """Make the `fail_at`-th call of os.NAME on a file (fd > 2) raise OSError(code)."""
    real = getattr(os, name)
    calls = [0]

    def fake(fd, *args):
        if fd > 2:
            calls[0] += 1
            if calls[0] == fail_at:
                raise OSError(code, os.strerror(code))
        return real(fd, *args)

    monkeypatch.setattr(os, name, fake)
    return calls


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_disk_full_at_every_write(tmp_path, states, monkeypatch, command):
    """ENOSPC or EDQUOT from any os.write or os.fsync of apply or revert: one-line error naming the
    file and the cause, exit 2, and the tree (state folder included) exactly as before; only a
    failing fsync of the state folder once the transaction is over may pass (the command is done)."""
    pristine, patched, pristine_tree, patched_tree = states
    start, expected = (pristine_tree, pristine) if command == "apply" else (patched_tree, patched)
    expected_after = patched if command == "apply" else pristine
    tried, committed, failures = 0, 0, []
    for name in ("write", "fsync"):
        for code in (errno.ENOSPC, errno.EDQUOT):
            fail_at = 1 if code == errno.ENOSPC else 2  # each call fails once, with one errno or the other
            while True:
                tree = tmp_path / "full"
                shutil.rmtree(tree, ignore_errors=True)
                shutil.copytree(start, tree)
                with monkeypatch.context() as patch:
                    calls = _failing_call(patch, name, fail_at, code)
                    result = run_cli(command, "--verl-root", str(tree))
                if calls[0] < fail_at:
                    break  # the command made fewer calls: every one has failed once
                tried += 1
                lines = result.stderr.strip().splitlines()
                finished = expected_after == snapshot(tree) and not _temporaries(tree)
                if result.exit_code == 0 and finished:
                    committed += 1  # the folder's fsync after the journal was removed: the command was done
                elif not (result.exit_code == 2 and len(lines) == 1 and os.strerror(code) in lines[0] and str(tree) in lines[0]):
                    failures.append(f"{name} #{fail_at} {errno.errorcode[code]}: exit {result.exit_code}: {result.stderr.strip()[-200:]}")
                elif snapshot(tree) != expected or _temporaries(tree):
                    failures.append(f"{name} #{fail_at} {errno.errorcode[code]}: tree changed")
                fail_at += 2
    print(f"disk full during {command}: {tried - len(failures)}/{tried} held ({committed} after the commit point)")
    assert tried >= 8, tried
    assert committed <= 4, f"{committed} failures ignored: only the last folder fsync may be"
    assert not failures, f"{tried - len(failures)}/{tried} held:\n" + "\n".join(failures[:8])


def test_disk_full_on_a_real_tiny_filesystem(tmp_path, states):
    """A real 64 KiB tmpfs filled to leave 0..40 KiB free: apply either succeeds wholly or ends in a
    one-line error with exit 2 and the tree as before (needs root and mount; skipped otherwise)."""
    pristine, patched, pristine_tree, _ = states
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    outcomes = []
    try:
        for free_kib in range(0, 44, 4):
            tree = mount_point / "tree"
            shutil.rmtree(tree, ignore_errors=True)
            (mount_point / "filler").unlink(missing_ok=True)
            shutil.copytree(pristine_tree, tree)
            available = shutil.disk_usage(mount_point).free
            with open(mount_point / "filler", "wb") as filler:
                try:
                    filler.write(b"\0" * max(0, available - free_kib * 1024))
                except OSError:
                    pass
            result = run_cli("apply", "--verl-root", str(tree))
            lines = result.stderr.strip().splitlines()
            state = snapshot(tree)
            if result.exit_code == 0:
                ok = state == patched and not _temporaries(tree)
            else:
                ok = result.exit_code == 2 and len(lines) == 1 and "rlpatch: error:" in lines[0] and state == pristine and not _temporaries(tree)
            outcomes.append((free_kib, result.exit_code, ok, lines[-1] if lines else ""))
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)
    print(f"tiny tmpfs: {sum(ok for _, _, ok, _ in outcomes)}/{len(outcomes)} held: {outcomes}")
    assert all(ok for _, _, ok, _ in outcomes), outcomes
    assert any(code == 2 for _, code, _, _ in outcomes) and any(code == 0 for _, code, _, _ in outcomes), outcomes


# --- bytes outside the patch ------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["bom", "bom+crlf", "no-final-newline", "crlf+no-final-newline"])
def test_bytes_outside_the_patch_stay(tmp_path, shape):
    """apply never reformats: a UTF-8 BOM, CRLF line ends and a missing final newline stay; `diff`
    shows exactly what apply writes; revert gives the bytes back."""
    tree = _fresh(tmp_path)
    path = tree / FSDP
    data = path.read_bytes()
    if "crlf" in shape:
        data = data.replace(b"\n", b"\r\n")
    if "no-final-newline" in shape:
        data = data.rstrip(b"\r\n")
    if "bom" in shape:
        data = b"\xef\xbb\xbf" + data
    path.write_bytes(data)
    pristine = snapshot(tree)
    diff = run_cli("diff", "--verl-root", str(tree), "--rules", "verl-engine-fsdp")
    assert diff.exit_code == 0
    assert run_cli("apply", "--verl-root", str(tree), "--rules", "verl-engine-fsdp").exit_code == 0
    patched = path.read_bytes()
    assert patched.startswith(b"\xef\xbb\xbf") == data.startswith(b"\xef\xbb\xbf")
    assert patched.endswith(b"\n") == data.endswith(b"\n")
    if "crlf" in shape:
        assert patched.count(b"\n") == patched.count(b"\r\n")
    # the diff, applied by git to the original, gives exactly the patched bytes
    check = tmp_path / "check"
    check.mkdir()
    (check / "file").write_bytes(data)
    (check / "p.diff").write_text(diff.stdout.replace(FSDP, "file"), newline="")
    subprocess.run(["git", "apply", "--unsafe-paths", "p.diff"], cwd=check, check=True, capture_output=True)
    assert (check / "file").read_bytes() == patched
    assert run_cli("revert", "--verl-root", str(tree)).exit_code == 0
    assert snapshot(tree) == pristine
