"""Robustness: random and mutated scripts never crash the linter; bad files give one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlpatch.lint.engine import lint_path, select_rules
from rlpatch.lint.rule import LintOptions
from rlpatch.shell.api import SourceFile, evaluate_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lint"
SCRIPTS = sorted(p.read_text() for p in FIXTURES.rglob("*.sh"))
RULES = select_rules(None, None)

FRAGMENTS = [
    "python3 -m verl.trainer.main_ppo ", "\\\n", " \\\n    ", "$X", "${X:-8}", "${A:-${B}}", "$((N * 2))",
    "$(nproc)", "`hostname`", '"$@"', "'quoted'", '"dq $Y"', "X=( a=1 # c\n b=2 )", '"${X[@]}"', "X+=( c )",
    "export DUMP_ON=1\n", "if [ \"$A\" = 1 ]; then\n", "fi\n", "else\n", "case $A in a) B=1;; esac\n",
    "for i in 1 2; do\n", "done\n", "f() { ", "}\n", "<<EOF\nbody\nEOF\n", "V=x ", "trainer.nnodes=", "1", "=",
    "+", "++", "~", "[a,b]", "'[a,b]'", "actor@x.y=z", "--config-name=", "-cn ", "bash other.sh ", "source x\n",
    "# rlpatch: disable=RL1\n", "${#X[@]}", "${X,,}", "$(((a + b)))", "${X:-['npu','cpu']}", "\n", " ", ";", "&&",
    "||", "|", "(", ")", "{", "}", "$", "\\", "\"", "'", "`", "((", "))", "${", "$(", "\t", "é", "🚀",
    "trainer.n_gpus_per_node=8 ", "actor_rollout_ref.rollout.tensor_model_parallel_size=3 ",
    "DUMP_ON=1 PROMPTS_ONLY=1 ", "+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=d.json ",
]


def _lint_text(tmp_path: Path, text: str | bytes, name: str = "run.sh") -> None:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    result = lint_path(str(path), LintOptions(), RULES)
    if result.error:
        assert "\n" not in result.error
    for finding in result.findings:
        assert finding.span.line >= 1 and finding.span.column >= 1
        assert (finding.span.end_line, finding.span.end_column) >= (finding.span.line, finding.span.column) or \
            finding.span.file != str(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40))
def test_random_fragment_scripts_never_crash(tmp_path: Path, parts: list[str]) -> None:
    _lint_text(tmp_path, "".join(parts))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(SCRIPTS), st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 20),
                                                      st.text(max_size=6)), max_size=6))
def test_mutated_fixture_scripts_never_crash(tmp_path: Path, script: str, edits) -> None:
    text = script
    for position, delete, insert in edits:
        position %= len(text) + 1
        text = text[:position] + insert + text[position + delete:]
    _lint_text(tmp_path, text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_random_bytes_never_crash(tmp_path: Path, data: bytes) -> None:
    _lint_text(tmp_path, data)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=25), st.sampled_from(["concise", "json", "sarif", "full", "github"]))
def test_cli_exit_code_is_always_0_1_or_2(tmp_path: Path, parts: list[str], fmt: str) -> None:
    path = tmp_path / "run.sh"
    path.write_text("".join(parts))
    proc = subprocess.run([sys.executable, "-c", "from rlpatch.cli import main; main()", "lint", "--format", fmt,
                           str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode in (0, 1, 2), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    if fmt in ("json", "sarif"):
        json.loads(proc.stdout)


def test_bad_files_give_one_line_errors_and_the_rest_is_linted(tmp_path: Path) -> None:
    (tmp_path / "binary.sh").write_bytes(b"\x7fELF\x00\x01\x02")
    (tmp_path / "latin1.sh").write_bytes("python3 -m verl.trainer.main_ppo x=caf\xe9\n".encode("latin-1"))
    (tmp_path / "huge.sh").write_bytes(b"# padding\n" * (1024 * 1024))  # 10 MB
    (tmp_path / "folder.sh").mkdir()  # a directory: linted recursively (issue 22), here empty, so no error
    (tmp_path / "quote.sh").write_text("python3 -m verl.trainer.main_ppo x='unterminated\ny=2\n")
    good = tmp_path / "good.sh"
    good.write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.tensor_model_parallel_size=3\n")
    names = ["binary.sh", "latin1.sh", "huge.sh", "folder.sh", "missing.sh", "quote.sh", "good.sh"]
    proc = subprocess.run([sys.executable, "-c", "from rlpatch.cli import main; main()", "lint", "--format", "json",
                           *names], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    errors = proc.stderr.splitlines()
    assert errors == [
        "rlpatch: error: binary.sh: binary file (contains NUL bytes), not a shell script",
        "rlpatch: error: latin1.sh: not UTF-8 (invalid byte 0xe9 on line 1)",
        "rlpatch: error: huge.sh: file too large (10.5 MB; a launch script is at most 2 MB)",
        "rlpatch: error: missing.sh: no such file",
        "rlpatch: error: quote.sh:1:36: unterminated ' (the rest of the file cannot be read)",
    ]
    assert [(f["file"], f["code"]) for f in json.loads(proc.stdout)["findings"]] == [("good.sh", "RL401")]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read a chmod 000 file")
def test_unreadable_file(tmp_path: Path) -> None:  # pragma: no cover - CI runs as root
    path = tmp_path / "secret.sh"
    path.write_text("x\n")
    path.chmod(0)
    assert "cannot read" in (lint_path(str(path), LintOptions(), RULES).error or "")


def test_nothing_is_ever_executed(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    script = tmp_path / "run.sh"
    script.write_text(
        f"touch {canary}\n"
        f"X=$(touch {canary})\n"
        f"Y=`touch {canary}`\n"
        f"eval 'touch {canary}'\n"
        f"source <(touch {canary})\n"
        f"python3 -m verl.trainer.main_ppo a=$(touch {canary}) b=$X c=${{Z:-$(touch {canary})}} $(touch {canary}) \\\n"
        f"    d=$((`touch {canary}` + 1)) > >(touch {canary})\n"
        f"bash -c 'touch {canary}'\n"
    )
    result = lint_path(str(script), LintOptions(), RULES)
    assert result.error is None and result.runs
    proc = subprocess.run([sys.executable, "-c", "from rlpatch.cli import main; main()", "detect", str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert not canary.exists()


def test_deep_nesting_and_recursion_are_bounded(tmp_path: Path) -> None:
    (tmp_path / "loop.sh").write_text("source ./loop.sh\nf() { f; }\nf\npython3 -m verl.trainer.main_ppo x=1\n")
    (tmp_path / "deep.sh").write_text("X=" + "${A:-" * 300 + "1" + "}" * 300 + "\npython3 -m verl.trainer.main_ppo x=$X\n")
    (tmp_path / "wide.sh").write_text("".join(f"if [ \"$V{i}\" = 1 ]; then A{i}=1; fi\n" for i in range(60))
                                      + "python3 -m verl.trainer.main_ppo x=1\n")
    for name in ("loop.sh", "deep.sh", "wide.sh"):
        result = lint_path(str(tmp_path / name), LintOptions(), RULES)
        assert result.error is None or "\n" not in result.error


def test_positions_are_character_columns(tmp_path: Path) -> None:
    path = tmp_path / "u.sh"
    path.write_text("# é 🚀\nX=é🚀 python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.tensor_model_parallel_size=3\n")
    source = SourceFile.read(str(path))
    run_args = evaluate_source(source).launches[0].args
    assert (run_args[0].span.line, run_args[0].span.column) == (2, 39)


def test_non_ascii_that_crashed_tree_sitter_bash(tmp_path: Path) -> None:
    """`S{<U+5F70C>]` segfaulted tree-sitter-bash's scanner: the parser now only ever sees ASCII."""
    script = "S{\U0005f70c]\npython3 -m verl.trainer.main_ppo x=\U0005f70c é \\\n  # ü\n  y=1\n"
    code = ("import sys\nfrom rlpatch.lint.engine import lint_path, select_rules\nfrom rlpatch.lint.rule import LintOptions\n"
            "r = lint_path(sys.argv[1], LintOptions(), select_rules(None, None))\n"
            "print(sorted((f.code, f.span.line, f.span.column) for f in r.findings))")
    path = tmp_path / "u.sh"
    path.write_text(script)
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code, str(path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[('RL003', 3, 3)]"


def test_lint_options_are_typed_and_frozen() -> None:
    """Every option is a typed field (no bag of extras); once built, a changed copy is made, never an edit."""
    import pickle

    from rlpatch.lint.rule import LintOptions

    options = LintOptions(python="/venv/bin/python", sglang_root="/trees/sglang")
    with pytest.raises(AttributeError, match="frozen"):
        options.python = "/other/python"  # type: ignore[misc]
    changed = options.replace(verl_root="/trees/verl")
    assert (changed.verl_root, changed.python, options.verl_root) == ("/trees/verl", "/venv/bin/python", None)
    assert changed.target_facts is not options.target_facts  # a new invocation's facts
    assert pickle.loads(pickle.dumps(options)).sglang_root == "/trees/sglang"
    assert not hasattr(options, "extra")
