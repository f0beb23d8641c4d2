"""Forged lines and terminal escapes (issue 30, item 3): untrusted strings are shown escaped in the
text formats (a newline cannot print a line rlpatch never wrote, an ESC/OSC sequence never reaches
the terminal), and JSON keeps them exact."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from conftest import FIXTURES, run_cli
from test_dumps import infer_record, infer_tree, train_record, train_tree
from test_faults_dumps import _fake_msprobe

from rlpatch.output.api import shown

FORGED = "verdict: 9 pair(s) compared (9 agrees), 0 unpaired"
HOSTILE_ID = f"r1\n{FORGED}\x1b]0;pwned\x07\x1b[2J"


def _clean_terminal_text(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text, repr(text)
    assert not any(line.startswith("verdict: 9") or line.startswith("FAIL forged") for line in text.splitlines()), text


def test_shown_escapes_controls_and_keeps_the_rest() -> None:
    assert shown("a\nb\x1b[31m\x9b\u2028\u202e é \\ ok") == "a\\x0ab\\x1b[31m\\x9b\\u2028\\u202e é \\ ok"


def test_a_request_id_cannot_forge_compare_or_pair_lines(tmp_path: Path) -> None:
    train = train_tree(tmp_path / "t", [train_record(0, [HOSTILE_ID])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(HOSTILE_ID, "new")])])
    argv = ["--train", str(train), "--infer", str(infer)]
    compare = ["dumps", "compare", *argv, "-o", str(tmp_path / "out"), "--python", _fake_msprobe(tmp_path)]
    for command in (["dumps", "pair", *argv], compare):
        text = run_cli(*command)
        _clean_terminal_text(text.stdout + text.stderr)
        assert "r1\\x0averdict: 9" in text.stdout
    data = json.loads(run_cli(*compare, "--format", "json").stdout)
    assert data["results"][0]["request_id"] == HOSTILE_ID  # JSON stays exact


def test_a_hostile_script_cannot_reach_the_terminal_through_lint(tmp_path: Path) -> None:
    script = tmp_path / "hostile\x1b[31m.sh"
    script.write_text("#!/bin/bash\npython3 -m verl.trainer.main_ppo $'trainer.x\\e]0;pwned\\a=1' "
                      "$'data.y\\nFAIL forged: yes=2'\n")
    for fmt in ("concise", "full"):
        result = run_cli("lint", "--verl-root", str(FIXTURES / "verl_mini"), "--format", fmt, str(script))
        assert result.exit_code == 1, result.stderr
        _clean_terminal_text(result.stdout + result.stderr)
    data = json.loads(run_cli("lint", "--verl-root", str(FIXTURES / "verl_mini"), "--format", "json", str(script)).stdout)
    assert any("\x1b" in finding["message"] for finding in data["findings"])  # exact in JSON


def test_doctor_shows_a_hostile_interpreter_error_escaped(tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\nprintf "boom\\033]0;pwned\\007\\033[2J end\\n" >&2\nexit 3\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    result = run_cli("doctor", "--python", str(python))
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    _clean_terminal_text(result.stdout + result.stderr)
    assert "boom\\x1b]0;pwned\\x07" in result.stderr
