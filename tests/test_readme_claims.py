"""What the README says about commands matches what they do or what their spec says (issue 10, item 15), and its
command lines and option reference match the real options of every command (issue 22, item 13)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from rlpatch.cli import cli

ROOT = Path(__file__).resolve().parent.parent
# The README and the manual (docs/*.md, the rule pages aside: generated from the rules).
README = "\n".join(path.read_text(encoding="utf-8") for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
REFERENCE = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")


def test_doctor_is_not_said_to_use_rlpatchs_own_msprobe() -> None:
    # `rlpatch doctor` (shared spec doctor-cluster.md) probes the interpreter that runs verl in a
    # subprocess; the `[msprobe]` extra in rlpatch's own environment is for the runtime tests only.
    for line in README.splitlines():
        if "[msprobe]" in line or "mindstudio-probe for" in line:
            assert "for `doctor`" not in line, line


# ---- README's command lines and the real options (issue 22, item 13) ---------------------------------
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
_HELP_ONLY = {"-h", "--help"}


def _commands() -> dict[str, set[str]]:
    """"apply", "dumps check", ... -> every option spelling the command accepts (besides -h/--help)."""
    context = click.Context(cli)

    def walk(command: click.Command, path: list[str]):
        if isinstance(command, click.Group):
            for name in command.list_commands(context):
                yield from walk(command.get_command(context, name), path + [name])
        else:
            yield " ".join(path), command

    return {name: {spelling for param in command.params if isinstance(param, click.Option)
                   for spelling in param.opts + param.secondary_opts} - _HELP_ONLY
            for name, command in walk(cli, [])}


COMMANDS = _commands()


def _reference_rows() -> list[tuple[list[str], set[str]]]:
    section = REFERENCE
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) != 3 or cells[0] in ("command", "---"):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        rows.append((names, set(_OPTION.findall(cells[1].split("` ")[0].replace("\\|", " ")))))
    return rows


def test_the_reference_lists_every_option_of_every_command_and_no_other() -> None:
    listed: dict[str, set[str]] = {name: set() for name in COMMANDS}
    for names, options in _reference_rows():
        for name in names:
            assert name in COMMANDS, f"README reference names a command that does not exist: {name}"
            listed[name] |= options
    for name, options in COMMANDS.items():
        assert listed[name] == options, (f"`rlpatch {name}`: in --help, not in README: {sorted(options - listed[name])}; "
                                         f"in README, not in --help: {sorted(listed[name] - options)}")


def _command_lines() -> list[str]:
    """Every `rlpatch CMD ...` command line of README: in code blocks (continuations joined) and in
    inline code spans."""
    lines = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", README, re.DOTALL):
        lines += block.replace("\\\n", " ").splitlines()
    outside = re.sub(r"```.*?```", "", README, flags=re.DOTALL)
    lines += re.findall(r"`(rlpatch [^`]+)`", outside)
    return [line for line in lines if re.search(r"(?:^|[\s|;(])rlpatch ", line)]


def _invocations(line: str) -> list[tuple[str, list[str]]]:
    """(command, option words) for each rlpatch invocation on a line; words after `--` are overrides."""
    text = line.split(" # ", 1)[0].split("  #", 1)[0]
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    found = []
    for start, word in enumerate(words):
        if word != "rlpatch" or start + 1 >= len(words):
            continue
        rest = words[start + 1:]
        name = " ".join(rest[:2]) if rest[0] == "dumps" and len(rest) > 1 else rest[0]
        if name not in COMMANDS:
            continue
        options = []
        for token in rest[len(name.split()):]:
            if token in ("--", "|", ">", "&&", ";") or token.startswith((">", "|")):
                break
            options += [match for match in _OPTION.findall(token.strip("[]")) if token.lstrip("[").startswith("-")]
        found.append((name, options))
    return found


def test_readme_examples_use_only_real_options() -> None:
    checked = 0
    for line in _command_lines():
        for name, options in _invocations(line):
            checked += 1
            unknown = [option for option in options if option not in COMMANDS[name] | _HELP_ONLY]
            assert not unknown, f"README: `rlpatch {name}` has no option {unknown}: {line.strip()}"
    assert checked > 40  # the parse found README's examples


@pytest.mark.parametrize("line, expected", [
    ("rlpatch lint --format json|sarif run.sh -- trainer.nnodes=2", [("lint", ["--format"])]),
    ("cat run.sh | rlpatch lint -", [("lint", [])]),
    ("rlpatch detect [--format json] run.sh      # --not-an-option", [("detect", ["--format"])]),
    ('rlpatch doctor --python "uv run --frozen python3" --mode consistency', [("doctor", ["--python", "--mode"])]),
    ("rlpatch dumps compare --train A -o out", [("dumps compare", ["--train", "-o"])]),
    ("rlpatch gen: would write x", []),
])
def test_the_example_parser(line: str, expected: list) -> None:
    assert _invocations(line) == expected
