"""Bad inputs and faults (issue 20): nothing lost, nothing written outside its place, no hang, one-line errors.

Every command here runs in a subprocess with a timeout (a hang fails the test instead of hanging the
suite) and an address-space limit (a runaway allocation fails it instead of exhausting the machine);
the in-process property tests run under an alarm for the same reason. FIFOs and device nodes are made
in the test's own temporary folder (a character device needs root: skipped otherwise); the only
devices outside it are /dev/zero and /dev/null, read by path and never written.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import stat
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
from gen_harness import stub_verl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlpatch.lint.config import KNOWN_KEYS, find_config
from rlpatch.lint.engine import lint_path, select_rules
from rlpatch.lint.rule import LintOptions
from rlpatch.msprobe_config.api import MAX_CONFIG_BYTES, Problem, check_file, check_text
from rlpatch.msprobe_config.jsonpos import parse
from rlpatch.shell.api import SourceFile, evaluate_source
from rlpatch.shell.pieces import MAX_ELEMENTS, MAX_VALUE_SIZE, word_size
from rlpatch.shell.source import MAX_SCRIPT_BYTES

RULES = select_rules(None, None)
LAUNCH = "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8 trainer.nnodes=1\n"
MEMORY = 1536 * 1024 * 1024  # address space of one rlpatch run: a runaway allocation fails, not the machine
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                            HealthCheck.too_slow])


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def rlpatch(*args: str, cwd: Path, stdin: Any = subprocess.DEVNULL, shell_prefix: str = "",
            timeout: float = 60) -> subprocess.CompletedProcess:
    """`rlpatch ARGS` in a subprocess, bounded in time and memory (`shell_prefix`: run through bash,
    e.g. to close stdin with `<&-`)."""
    argv = [sys.executable, "-m", "rlpatch.cli", *args]
    if shell_prefix:
        argv = ["bash", "-c", 'exec "$@" ' + shell_prefix, "bash", *argv]
    return subprocess.run(argv, cwd=cwd, stdin=stdin, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_limit_memory, env={**os.environ, "RLPATCH_DEBUG": ""})


def one_line_errors(proc: subprocess.CompletedProcess) -> list[str]:
    """The stderr lines, each checked to be a one-line `rlpatch...: error:` (never a traceback or an internal error)."""
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-2000:]
    for line in lines:
        assert line.startswith("rlpatch") and "error:" in line, proc.stderr[-2000:]
    return lines


@contextmanager
def alarm(seconds: int) -> Iterator[None]:
    """Fail (TimeoutError) instead of hanging when the body runs longer than `seconds`."""
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def char_device(tmp_path: Path) -> Path:
    """A character device (the null device's numbers) inside the test's own folder; root only."""
    path = tmp_path / "null-device"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError) as err:  # pragma: no cover - CI runs as root
        pytest.skip(f"cannot make a device node here: {err}")
    return path


# ---- 7: every input is bounded, whatever its kind ------------------------------------------------------
def test_non_regular_script_paths_are_one_line_errors_and_the_others_are_linted(tmp_path: Path) -> None:
    """A FIFO and a device given as paths: one line each, lint goes on, exit 2, no hang (a directory is
    linted recursively since issue 22; a FIFO inside one is a one-line error too)."""
    os.mkfifo(tmp_path / "pipe.sh")
    (tmp_path / "folder.sh").mkdir()
    os.mkfifo(tmp_path / "folder.sh" / "inner.sh")
    (tmp_path / "good.sh").write_text(LAUNCH.replace("=8", "=3") + "")
    device = char_device(tmp_path)
    proc = rlpatch("lint", "pipe.sh", "/dev/zero", "/dev/null", str(device), "folder.sh", "good.sh", cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_errors(proc) == [
        "rlpatch: error: pipe.sh: a FIFO, not a regular file (rlpatch reads only regular files)",
        "rlpatch: error: /dev/zero: a character device, not a regular file (rlpatch reads only regular files)",
        "rlpatch: error: /dev/null: a character device, not a regular file (rlpatch reads only regular files)",
        f"rlpatch: error: {device}: a character device, not a regular file (rlpatch reads only regular files)",
        "rlpatch: error: folder.sh/inner.sh: a FIFO, not a regular file (rlpatch reads only regular files)",
    ]
    assert "5 files could not be linted" in proc.stdout


@pytest.mark.parametrize("source", ["dev-zero", "yes", "closed", "big-file"])
def test_stdin_is_read_with_a_byte_limit(tmp_path: Path, source: str) -> None:
    """`lint -` reads at most 2 MB + 1 byte of stdin: an endless stream or a closed stdin is one line, exit 2."""
    (tmp_path / "good.sh").write_text(LAUNCH)
    if source == "dev-zero":
        with open("/dev/zero", "rb") as zero:
            proc = rlpatch("lint", "-", "good.sh", cwd=tmp_path, stdin=zero)
        expected = "rlpatch: error: -: input too large (over 2 MB; a launch script is at most 2 MB)"
    elif source == "yes":
        producer = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
        try:
            proc = rlpatch("lint", "-", "good.sh", cwd=tmp_path, stdin=producer.stdout)
        finally:
            producer.kill()
            producer.wait()
        expected = "rlpatch: error: -: input too large (over 2 MB; a launch script is at most 2 MB)"
    elif source == "closed":
        proc = rlpatch("lint", "-", "good.sh", cwd=tmp_path, shell_prefix="<&-")
        expected = "rlpatch: error: -: closed, nothing to read"
    else:
        big = tmp_path / "big"
        big.write_bytes(b"#" * (MAX_SCRIPT_BYTES + 10))
        with open(big, "rb") as handle:
            proc = rlpatch("lint", "-", "good.sh", cwd=tmp_path, stdin=handle)
        expected = "rlpatch: error: -: input too large (over 2 MB; a launch script is at most 2 MB)"
    assert proc.returncode == 2
    assert one_line_errors(proc) == [expected]
    assert "1 file could not be linted" in proc.stdout  # good.sh was linted


def test_stdin_within_the_limit_is_linted(tmp_path: Path) -> None:
    """A script on stdin under the limit is linted as before (the byte limit refuses nothing real)."""
    script = tmp_path / "run.sh"
    script.write_text(LAUNCH.replace("=8", "=3") + "# " + "x" * (MAX_SCRIPT_BYTES - 200) + "\n")
    with open(script, "rb") as handle:
        proc = rlpatch("lint", "--format", "json", "-", cwd=tmp_path, stdin=handle)
    assert proc.returncode == 1 and not proc.stderr
    assert "RL401" in [f["code"] for f in json.loads(proc.stdout)["findings"]]


def _config_script(tmp_path: Path, config: str) -> Path:
    script = tmp_path / f"ref-{config}.sh"
    script.write_text("python3 -m verl.trainer.main_ppo global_profiler.tool=precision_debugger "
                      f"+global_profiler.global_tool_config.precision_debugger.config_path={config}\n")
    return script


def test_msprobe_configs_are_bounded_whatever_their_kind(tmp_path: Path) -> None:
    """Configs: a FIFO, a link to /dev/zero and a 100 MB file given directly are one line each (exit 2,
    refused before parsing); referenced from a script, they never block and the 100 MB one is a warning."""
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    with open(tmp_path / "huge.json", "wb") as handle:  # sparse: 100 MB by size, nothing on disk
        handle.truncate(100 * 1000 * 1000)
    proc = rlpatch("lint", "pipe.json", "zero.json", "huge.json", cwd=tmp_path, timeout=30)
    assert proc.returncode == 2
    assert one_line_errors(proc) == [
        "rlpatch: error: pipe.json: a FIFO, not a regular file (rlpatch reads only regular files)",
        "rlpatch: error: zero.json: a character device, not a regular file (rlpatch reads only regular files)",
        "rlpatch: error: huge.json: file too large (100.0 MB; an msprobe config is at most 1 MB)",
    ]
    scripts = [str(_config_script(tmp_path, name)) for name in ("pipe.json", "zero.json", "huge.json")]
    proc = rlpatch("lint", "--format", "json", "--select", "RL5", *scripts, cwd=tmp_path, timeout=30)
    assert proc.returncode == 1 and not proc.stderr
    found = sorted((Path(f["file"]).name, f["code"], f["severity"], f["message"].replace(f"{tmp_path}/", ""))
                   for f in json.loads(proc.stdout)["findings"])
    assert found == [
        ("huge.json", "RL501", "warning", "not checked: file too large (100.0 MB; an msprobe config is at most 1 MB)"),
        ("ref-pipe.json.sh", "RL501", "error",
         "global_profiler.global_tool_config.precision_debugger.config_path=pipe.json: pipe.json is not a file"),
        ("ref-zero.json.sh", "RL501", "error",
         "global_profiler.global_tool_config.precision_debugger.config_path=zero.json: zero.json is not a file"),
    ]


def test_a_config_that_grows_past_the_limit_while_read_is_bounded(tmp_path: Path) -> None:
    """At most limit + 1 bytes are read even when the size on disk said less (a file being written)."""
    path = tmp_path / "c.json"
    path.write_bytes(b" " * (MAX_CONFIG_BYTES + 5))
    findings = check_file(path)
    assert [(f.problem, f.severity) for f in findings] == [(Problem.NOT_CHECKED, "warning")]


# ---- 9: deep nesting, wrong types, bad options: one line, exit 2 ----------------------------------------
def test_deeply_nested_msprobe_configs_never_crash(tmp_path: Path) -> None:
    """JSON nested past Python's recursion limit (which msprobe's json.load cannot read either) is RL501;
    nested just under it is checked (positions of the deep part point at an ancestor)."""
    (tmp_path / "deep.json").write_text('{"task": ' + "[" * 100000 + "]" * 100000 + "}")
    (tmp_path / "near.json").write_text('{"task": "statistics", "level": ' + "[" * 900 + "]" * 900 + "}")
    proc = rlpatch("lint", "--format", "json", "deep.json", "near.json", str(_config_script(tmp_path, "deep.json")),
                   cwd=tmp_path)
    one_line_errors(proc)
    assert proc.returncode == 1
    codes = sorted({(Path(f["file"]).name, f["code"]) for f in json.loads(proc.stdout)["findings"]})
    assert ("deep.json", "RL501") in codes and ("near.json", "RL502") in codes


@pytest.mark.parametrize(("line", "message"), [
    ("select = 5", "select must be a string or an array of strings, not an integer"),
    ("ignore = {a = 1}", "ignore must be a string or an array of strings, not a table"),
    ("fail-on = 3", 'fail-on must be one of "E", "W", "I" (or error, warning, info), not 3'),
    ("env = 5", 'env must be a table (NAME = "value") or an array of "NAME=value" strings, not an integer'),
    ("env = {A = [1]}", "env A must be a string or an integer, not an array"),
    ("allow-level = 3", "allow-level must be a string or an array of strings, not an integer"),
    ("config-root = 3", "config-root must be a string, not an integer"),
    ("verl-version = 9", "verl-version must be a string, not an integer"),
    ("exit-zero = 'yes'", "exit-zero must be true or false, not a string"),
])
def test_wrong_types_in_tool_rlpatch_are_one_line_errors(tmp_path: Path, line: str, message: str) -> None:
    """[tool.rlpatch] with a wrong type: one line naming the pyproject.toml and the key, exit 2."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.rlpatch]\n{line}\n")
    (tmp_path / "run.sh").write_text(LAUNCH)
    proc = rlpatch("lint", "run.sh", cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_errors(proc) == [f"rlpatch: error: {tmp_path / 'pyproject.toml'}: [tool.rlpatch] {message}"]


def test_a_pyproject_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    """A pyproject.toml that Python's TOML reader cannot parse without recursing too deep: one line, exit 2."""
    (tmp_path / "pyproject.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    (tmp_path / "run.sh").write_text(LAUNCH)
    proc = rlpatch("lint", "run.sh", cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_errors(proc) == [
        f"rlpatch: error: {tmp_path / 'pyproject.toml'}: cannot read [tool.rlpatch] (nested too deeply)"]


@pytest.mark.parametrize("command", [["lint", "run.sh"], ["doctor"],
                                     ["gen", "training", "run.sh", "--dry-run"]])
def test_a_python_option_that_does_not_split_is_one_line(tmp_path: Path, command: list[str]) -> None:
    """`--python '"unterminated'`: one line naming the option, exit 2, nothing written."""
    (tmp_path / "run.sh").write_text(LAUNCH)
    proc = rlpatch(*command, "--python", '"unterminated', cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert len(one_line_errors(proc)) == 1 and "unterminated" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]


@pytest.mark.parametrize(("error", "line"), [
    (IsADirectoryError(21, "Is a directory", "report.html"), "rlpatch: error: report.html: Is a directory"),
    (OSError(28, "No space left on device", "out.json"), "rlpatch: error: out.json: no space left on device"),
    (RecursionError("maximum recursion depth exceeded"),
     "rlpatch: error: input nested too deeply to read (Python's recursion limit)"),
    (MemoryError(), "rlpatch: error: out of memory (the input is too large for this machine)"),
    (ValueError("a\nbug"), "rlpatch: internal error: ValueError: a bug (set RLPATCH_DEBUG=1 for a traceback)"),
])
@pytest.mark.parametrize("argv", [["detect", "x.sh"], ["lint", "x.sh"]])  # read by click; read without click
def test_the_entry_point_turns_what_is_left_into_one_line(monkeypatch: pytest.MonkeyPatch, capsys, error: BaseException,
                                                          line: str, argv: list[str]) -> None:
    """Resource errors (recursion, memory, a failed system call naming its file) are one-line errors; a
    genuinely unexpected exception stays an internal error, with its type and a one-line message. Exit 2."""
    from rlpatch import cli
    from rlpatch.lint import quick_cli

    def fail(*args: Any, **kwargs: Any) -> None:
        raise error

    monkeypatch.delenv("RLPATCH_DEBUG", raising=False)
    monkeypatch.setattr(cli.cli, "main", fail)
    monkeypatch.setattr(quick_cli, "run_lint", fail)
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [line]


# ---- 1: gen's outputs: regular files (or new), never the input ----------------------------------------
def _gen_folder(tmp_path: Path) -> tuple[Path, Path, Path]:
    folder = tmp_path / "work"
    folder.mkdir()
    script = folder / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8 actor_rollout_ref.rollout.name=vllm\n")
    return folder, script, stub_verl(tmp_path, "0.8.0")


def _listing(folder: Path) -> dict[str, tuple[int, int, bytes | None]]:
    return {p.name: (p.lstat().st_mode, p.lstat().st_ino, p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in folder.iterdir()}


def test_gen_refuses_outputs_that_are_the_input_or_not_regular_files(tmp_path: Path) -> None:
    """-o the input (by name, ./name, a symlink, a hard link), a device, a FIFO or a directory, even with
    --force: one line, exit 2, and the folder is byte for byte as before (no config written either)."""
    folder, script, verl = _gen_folder(tmp_path)
    (folder / "link.sh").symlink_to("run.sh")
    os.link(script, folder / "hard.sh")
    os.mkfifo(folder / "pipe.sh")
    (folder / "dir.sh").mkdir()
    device = char_device(folder)
    before = _listing(folder)
    cases = {"run.sh": "is the input script", "./run.sh": "is the input script", "link.sh": "is the input script",
             "hard.sh": "is the input script", device.name: "is a character device", "pipe.sh": "is a FIFO",
             "dir.sh": "is a directory"}
    for out, reason in cases.items():
        for extra in (["--force"], ["--force", "--dry-run"]):
            proc = rlpatch("gen", "training", "run.sh", "--verl-root", str(verl), "-o", out, *extra, cwd=folder,
                           timeout=120)
            assert proc.returncode == 2, (out, proc.stderr)
            [line] = one_line_errors(proc)
            assert line.startswith(f"rlpatch: error: {out}: {reason}") and line.endswith("(nothing written)"), line
            assert _listing(folder) == before, out
    assert stat.S_ISCHR(device.lstat().st_mode)


def test_gen_refuses_a_config_path_that_is_not_a_regular_file(tmp_path: Path) -> None:
    """A config output that is a FIFO (or the input script): refused before anything is written, so the
    new script is not written either."""
    folder, _, verl = _gen_folder(tmp_path)
    os.mkfifo(folder / "new.msprobe-train.json")
    before = _listing(folder)
    proc = rlpatch("gen", "training", "run.sh", "--verl-root", str(verl), "-o", "new.sh", "--force", cwd=folder,
                   timeout=120)
    assert proc.returncode == 2
    [line] = one_line_errors(proc)
    assert "new.msprobe-train.json: is a FIFO" in line
    assert _listing(folder) == before


# ---- 6: the word expander is bounded ----------------------------------------------------------------------
PRELUDE = "S=ab\nA=(x y)\nset -- p q\nX=3\nU=$UNSET_IN_ENV\n"
GROWTH = [
    "S=$S$S", 'S="$S$S$S"', "S+=$S", "S=${S}${S}", 'A=("${A[@]}" "${A[@]}")', 'A+=("${A[@]}")', "A=($S $S)",
    'S="${A[*]}${A[*]}"', 'set -- "$@" "$@"', 'set -- "$@" "${A[@]}"', "X=$((X*X+7))", "A[$((X % 100000))]=v",
    "S=${S//a/$S}", "S=${S#*b}", "S=${S%%b*}x$S", "U=$U$U", 'A=("${A[@]}" "$U")', "S=${S:-$S}$S", "S=${S^^}$S",
    "B=$S$S\nS=$B$B", 'f() { f "$@" "$@"; }\nf "$@"',
]
FINAL = 'python3 -m verl.trainer.main_ppo a=$S b=${#A[@]} c=$# d=$X e=$U "${A[@]}" "$@" f=${A[7]}\n'


def _evaluate(tmp_path: Path, text: str, seconds: int = 20):
    path = tmp_path / "bomb.sh"
    path.write_text(text)
    with alarm(seconds):
        return evaluate_source(SourceFile.read(str(path)))


@PROPERTY
@given(st.lists(st.sampled_from(GROWTH), min_size=1, max_size=60))
def test_growing_values_stay_within_the_documented_bounds(tmp_path: Path, statements: list[str]) -> None:
    """Doubling strings, arrays, positional parameters and numbers, in any order and up to 60 times:
    the evaluation ends in seconds and every launch argument stays within MAX_VALUE_SIZE, MAX_ELEMENTS."""
    evaluation = _evaluate(tmp_path, PRELUDE + "\n".join(statements) + "\n" + FINAL)
    for launch in evaluation.launches:
        assert len(launch.args) <= MAX_ELEMENTS + 8
        assert sum(word_size(arg.word) for arg in launch.args) <= 2 * MAX_VALUE_SIZE + 4096


@pytest.mark.parametrize("doublings", [20, 30])
def test_the_issue_doubling_scripts_end_fast_with_unknown_values(tmp_path: Path, doublings: int) -> None:
    """The issue's inputs (20 lines of `S=$S$S`: 45 s and 948 MB before; arrays likewise): linted in a
    subprocess within the time and memory bounds, the values past the cap reported as RL002."""
    text = ("S=ab\nA=(x y)\n" + "S=$S$S\n" * doublings + 'A=("${A[@]}" "${A[@]}")\n' * doublings
            + "python3 -m verl.trainer.main_ppo trainer.experiment_name=$S trainer.project_name=${#A[@]}\n")
    (tmp_path / "bomb.sh").write_text(text)
    proc = rlpatch("lint", "--format", "json", "bomb.sh", cwd=tmp_path, timeout=30)
    one_line_errors(proc)
    messages = [f["message"] for f in json.loads(proc.stdout)["findings"] if f["code"] == "RL002"]
    assert any("trainer.experiment_name=$S (over rlpatch's 64 KiB / 4096-element limit" in m for m in messages)
    assert any("trainer.project_name=${#A[@]}" in m for m in messages)


def test_values_under_the_bounds_are_still_known(tmp_path: Path) -> None:
    """The bounds change nothing below them: a 32 KiB value and a 2048-element array are known exactly."""
    text = "S=ab\n" + "S=$S$S\n" * 14 + "A=(x y)\n" + 'A=("${A[@]}" "${A[@]}")\n' * 10 + \
        "python3 -m verl.trainer.main_ppo a=$S b=${#A[@]} c=$((2**64 + 5))\n"
    [launch] = _evaluate(tmp_path, text).launches
    texts = [arg.text for arg in launch.args]
    assert f"a={'ab' * 2**14}" in texts and "b=2048" in texts and "c=5" in texts  # bash: 64-bit wrap-around


@PROPERTY
@given(st.integers(1, 3000), st.sampled_from(["${X:-%s}", '"$(( %s ))"', "$((1+(%s)))", "[%s]", "{ %s; }",
                                              "if true; then %s; fi", "( %s )", "'%s'", '"${A[%s]}"']))
def test_deep_nesting_is_linted_or_refused_in_one_line(tmp_path: Path, depth: int, shape: str) -> None:
    """Constructs nested thousands deep: a result or a one-line error, never a crash or a hang."""
    inner = "1"
    for _ in range(depth):
        inner = shape % inner
    path = tmp_path / "deep.sh"
    path.write_text(f"V={inner}\nR={inner}\n" + LAUNCH.replace("=1\n", "=$V\n"))
    with alarm(30):
        result = lint_path(str(path), LintOptions(), RULES)
    assert result.error is None or "\n" not in result.error


# ---- the JSON and TOML readers over hostile documents ----------------------------------------------------
JSON_SCALARS = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | \
    st.text(max_size=8)
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4) |
                           st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=30)
KEYS = ["task", "level", "rank", "step", "dump_path", "async_dump", "extra_info", "dump_enable", "precision",
        "risk_level", "custom_op_namespaces", "load", "statistics", "tensor", "nan_check", "diff_check",
        "structure", "scope", "list", "data_mode", "summary_mode", "slice", "tensor_list", "diff_nums", "request_id"]
SECTION = st.dictionaries(st.sampled_from(KEYS), JSON_VALUES, max_size=6)
CONFIGS = st.dictionaries(st.sampled_from(KEYS), JSON_VALUES | SECTION, max_size=10)


@PROPERTY
@given(CONFIGS, st.sampled_from(["statistics", "tensor", "nan_check", "diff_check", "structure", None]))
def test_msprobe_configs_of_any_shape_give_findings_never_exceptions(config: dict, task: str | None) -> None:
    """Wrong types at every key msprobe reads: findings with positions and one-line messages."""
    if task is not None:
        config = {**config, "task": task}
    text = json.dumps(config, indent=1)
    for finding in check_text(text, "c.json"):
        assert finding.line >= 1 and finding.column >= 1 and "\n" not in finding.message


@PROPERTY
@given(st.lists(st.sampled_from(['{"k": %s}', "[%s]", '[1, %s, "x"]', '{"a": 1, "b": %s}']), min_size=1,
                max_size=40), st.integers(0, 2500), st.sampled_from(KEYS))
def test_json_nested_at_any_depth_never_crashes_the_readers(shapes: list[str], repeat: int, key: str) -> None:
    """Random nesting (up to tens of thousands deep) under any key: jsonpos gives positions or a JsonError,
    the config checker findings (UNREADABLE when Python's json cannot read it, as msprobe's json.load cannot)."""
    inner = "0"
    for index in range(repeat + len(shapes)):
        inner = shapes[index % len(shapes)] % inner
    text = json.dumps({key: "__X__"}).replace('"__X__"', inner)
    try:
        document = parse(text)
        assert document.span((key,)).line == 1
    except ValueError:
        pass
    for finding in check_text(text, "c.json"):
        assert "\n" not in finding.message


TOML_SCALARS = st.booleans() | st.integers(-10, 10) | st.floats(-5, 5) | st.text(max_size=6)
TOML_VALUES = st.recursive(TOML_SCALARS, lambda inner: st.lists(inner, max_size=3) |
                           st.dictionaries(st.from_regex(r"[A-Za-z_]{1,5}", fullmatch=True), inner, max_size=3),
                           max_leaves=8)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return "{" + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + "}"


@PROPERTY
@given(st.dictionaries(st.sampled_from(sorted(KNOWN_KEYS)), TOML_VALUES, min_size=1, max_size=4))
def test_tool_rlpatch_tables_of_any_type_lint_or_fail_in_one_line(tmp_path: Path, table: dict) -> None:
    """Any types under [tool.rlpatch]: lint runs (exit 0/1) or says in one line which key of which file is
    wrong (exit 2); never an internal error."""
    from conftest import run_cli

    (tmp_path / "pyproject.toml").write_text("[tool.rlpatch]\n" + "".join(
        f"{key.replace('_', '-')} = {_toml(value)}\n" for key, value in table.items()))
    (tmp_path / "run.sh").write_text(LAUNCH)
    find_config.cache_clear()
    result = run_cli("lint", str(tmp_path / "run.sh"))
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert result.exit_code in (0, 1, 2)
    if result.exit_code == 2:
        assert len(result.stderr.splitlines()) == 1
