"""What `rlpatch lint`, `rlpatch detect` and `rlpatch rule` do, apart from their command line.

Each command's click callback turns its options into one frozen object (`LintCommand`,
`DetectCommand`) and calls `run_lint` / `run_detect` here, which return what was found and the
text to show (`LintOutcome`, `DetectOutcome`); the callback only prints it and returns the exit
code. `rule_listing` and `rule_page` are the texts of `rlpatch rule`.

Imports stay light (`rlpatch lint` is a pre-commit hook): the engine and the reporters are
imported inside the functions that use them, and the patch rules (libcst) only by `rule_page`
asked for a patch rule id.
"""

from __future__ import annotations

import io
import os
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

from rlpatch.errors import InputError
from rlpatch.lint.config import find_config
from rlpatch.lint.options import ScriptOptions, options_for, split_list
from rlpatch.lint.rule import LintOptions

if TYPE_CHECKING:
    from rlpatch.lint.engine import FileResult, LintTask

FAIL_ON = {"E": "error", "W": "warning", "I": "info", "ERROR": "error", "WARNING": "warning", "INFO": "info"}
Group = tuple[dict[str, Any], list[str]]  # one [tool.rlpatch] table and the files it applies to

# The commands and their outcomes are NamedTuples (immutable, typed), not frozen dataclasses: this
# module is imported at each cold start of `rlpatch lint` (a pre-commit hook), and creating a frozen
# dataclass costs about a millisecond and a half of that start, a NamedTuple a third of one.


class LintCommand(NamedTuple):
    """Everything `rlpatch lint` was told: the inputs, the rule selection, the report wanted."""

    files: tuple[str, ...] = ()  # as given: `-` is stdin, a directory its *.sh files, none the current one
    script: ScriptOptions = ScriptOptions()
    no_config: bool = False
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    fail_on: str | None = None  # None: [tool.rlpatch] fail-on, else errors
    exit_zero: bool = False
    severity: str | None = None  # the lowest reported; None: all
    output_format: str = "concise"
    statistics: bool = False
    output_file: str | None = None  # None: stdout
    show_settings: bool = False
    color: str = "auto"
    skip_non_verl: bool = False
    jobs: int | None = None  # None: decided by the size of the input


class LintOutcome(NamedTuple):
    """What a lint command gave: the files it linted, their results in command-line order, the
    warnings and per-file errors for stderr (in the order they are printed), the report for stdout
    or `--output-file`, and the exit code (0 clean, 1 findings that fail, 2 an input error)."""

    files: tuple[str, ...]
    results: tuple[FileResult, ...]
    warnings: tuple[str, ...]
    errors: tuple[str, ...]
    report: str
    exit_code: int


class DetectCommand(NamedTuple):
    """Everything `rlpatch detect` was told: the scripts and how they will run."""

    files: tuple[str, ...]
    script: ScriptOptions = ScriptOptions()
    no_config: bool = False
    output_format: str = "text"


class DetectOutcome(NamedTuple):
    """The run model of each script that could be read (files that could not were reported on
    stderr as they were met), the report for stdout, and the exit code (2 when a file failed)."""

    described: tuple[dict[str, Any], ...]
    report: str
    exit_code: int


def read_stdin() -> bytes:
    """`-`: standard input, bounded like a script file (a closed stdin or an endless stream is an
    InputError, not a hang or an exhausted memory)."""
    from rlpatch.shell.api import MAX_SCRIPT_BYTES, read_stream

    stream = sys.stdin.buffer if sys.stdin is not None else None
    return read_stream(stream, "-", MAX_SCRIPT_BYTES)


# ---- rlpatch lint ------------------------------------------------------------------------------------
def run_lint(command: LintCommand) -> LintOutcome:
    """Lint the command's files, each with the `[tool.rlpatch]` that applies to it (or print the
    settings they would be linted with); InputError for what stops the whole command."""
    from rlpatch.lint.scope import check_output_file, expand_paths

    files = tuple(expand_paths(command.files or (".",)))
    if command.output_file is not None:
        check_output_file(command.output_file, files)
    if command.statistics and command.output_format not in ("concise", "full", "json"):
        raise InputError(f"--statistics: a count per rule is printed as text or json, not --format {command.output_format}")
    if command.show_settings:
        return LintOutcome(files, (), (), (), settings_text(command, files), 0)
    # As ruff: a warning, not an error (an empty tree is clean).
    warnings = () if files else ("no *.sh files found",)
    results, fail_on, exit_zero = _lint_groups(command, files)
    errors = tuple(result.error for result in results if result.error)
    order = {path: index for index, path in enumerate(files)}
    results.sort(key=lambda r: order.get(r.path, 0))
    return LintOutcome(files, tuple(results), warnings, errors, lint_report(command, results), _exit_code(results, fail_on, exit_zero))


def _exit_code(results: list[FileResult], fail_on: str, exit_zero: bool) -> int:
    from rlpatch.lint.engine import exit_code

    return exit_code(results, fail_on, exit_zero)


def _lint_groups(command: LintCommand, files: tuple[str, ...]) -> tuple[list[FileResult], str, bool]:
    """Every file's result (findings kept at `--severity`), in the order of the config groups, with
    the fail-on and exit-zero that apply (the command line's, else the first table that sets them)."""
    from rlpatch.lint.engine import FileResult, default_jobs, lint_paths, select_rules
    from rlpatch.lint.report import keep_severity

    stdin, stdin_error = None, None
    if "-" in files:
        try:
            stdin = read_stdin()
        except InputError as err:  # one input of several: reported like an unreadable file
            stdin_error = err.message
    tasks: list[LintTask] = []
    fail = FAIL_ON[command.fail_on.upper()] if command.fail_on else None
    zero = command.exit_zero
    for table, paths in _groups(files, command.no_config):
        options = options_for(command.script, table)
        rules = select_rules(*_selection(command.select, command.ignore, table))
        fail = fail or FAIL_ON[str(table.get("fail_on", "E")).upper()]
        zero = zero or bool(table.get("exit_zero"))
        tasks.extend((path, options, rules) for path in paths if not (path == "-" and stdin_error))
    results = lint_paths(tasks, stdin, command.jobs or default_jobs(tasks, stdin))
    if command.skip_non_verl:
        from rlpatch.lint.scope import skip_non_verl

        results = skip_non_verl(results, stdin)
    if stdin_error:
        results.append(FileResult("-", error=stdin_error))
    if command.severity:
        results = keep_severity(results, command.severity.lower())
    return results, fail or "error", zero


def lint_report(command: LintCommand, results: list[FileResult]) -> str:
    """The report in the command's format: the findings, or their count per rule (`--statistics`)."""
    from rlpatch.lint.report import REPORTERS, report_concise, report_full, report_statistics, use_color

    # Built whole, then written at once: reporters write piecewise, and each write to a terminal costs.
    report = io.StringIO()
    if command.statistics:
        report_statistics(results, report, command.output_format == "json")
    elif command.output_format in ("concise", "full"):
        text_reporter = report_concise if command.output_format == "concise" else report_full
        to_terminal = command.output_file is None and sys.stdout.isatty()
        text_reporter(results, report, use_color(command.color, to_terminal))
    else:
        REPORTERS[command.output_format](results, report)
    return report.getvalue()


def write_report(text: str, output_file: str | None) -> None:
    """The report on stdout, or in `--output-file` (InputError when it cannot be written)."""
    if output_file is None:
        sys.stdout.write(text)
        return
    from rlpatch.output.api import write_output

    try:  # whole or not at all; a link at the path is replaced, never written through into its target
        write_output(output_file, text)
    except OSError as err:
        raise InputError(f"--output-file {output_file}: {err.strerror or err}") from None


def _selection(select: tuple[str, ...], ignore: tuple[str, ...], table: dict[str, Any]) -> tuple[list[str] | None, list[str]]:
    """(select, ignore) layered like ruff: a command-line --select starts over (the table's select
    and ignore no longer apply); without one, the table's selection stands and --ignore adds to it."""
    cli_select, cli_ignore = split_list(select), split_list(ignore) or []
    if cli_select:
        return cli_select, cli_ignore
    return split_list(table.get("select")), (split_list(table.get("ignore")) or []) + cli_ignore


def _groups(files: tuple[str, ...], no_config: bool) -> list[Group]:
    """Files grouped by the [tool.rlpatch] table that applies to them (in command-line order)."""
    groups: dict[str | None, Group] = {}
    for path in files:
        key: str | None
        table: dict[str, Any]
        if no_config:
            key, table = None, {}
        else:
            directory = os.getcwd() if path == "-" else os.path.dirname(os.path.abspath(path))
            key, table = find_config(directory)
        groups.setdefault(key, (table, []))[1].append(path)
    return list(groups.values())


def settings_text(command: LintCommand, files: tuple[str, ...]) -> str:
    """`--show-settings`: the settings each group of files is linted with (one block per config file)."""
    groups = _groups(files, command.no_config) if files else [_cwd_group(command.no_config)]
    return "\n".join(_settings_block(command, table, paths) for table, paths in groups)


def _settings_block(command: LintCommand, table: dict[str, Any], paths: list[str]) -> str:
    script = command.script
    options = options_for(script, table)
    chosen, skipped = _selection(command.select, command.ignore, table)
    fail = FAIL_ON[command.fail_on.upper()] if command.fail_on else FAIL_ON[str(table.get("fail_on", "E")).upper()]
    config = "none (--no-config)" if command.no_config else (table.get("__path__") or _config_path(paths))
    lines = [
        ("config file", config),
        ("files", str(len(paths))),
        ("select", ",".join(chosen or ["ALL"])),
        ("ignore", ",".join(skipped) or "(none)"),
        ("fail-on", fail),
        ("exit-zero", str(command.exit_zero or bool(table.get("exit_zero"))).lower()),
        ("severity", (command.severity or "info").lower()),
        ("mode", options.mode or "detected from each script"),
        ("verl version", str(options.verl_version) + ("" if options.verl_root or script.verl_version
                                                     or table.get("verl_version") else " (newest release)")),
        ("verl root", options.verl_root or "(none)"),
        ("python", options.extra.get("python") or "(none)"),
        ("sglang root", options.extra.get("sglang_root") or "(none)"),
        ("vllm-ascend root", options.extra.get("vllm_ascend_root") or "(none)"),
        ("config root", options.config_root or "(none)"),
        ("allow-level", ",".join(sorted(options.allow_level)) or "(none)"),
        ("env", (" ".join(f"{key}={value}" for key, value in sorted(options.env.items())) or "(none)")
         if not script.use_env else f"this process's environment ({len(options.env)} variables)"),
        ("extra overrides", " ".join(script.extra) or "(none)"),
    ]
    return "".join(f"{key}: {value}\n" for key, value in lines)


def _cwd_group(no_config: bool) -> Group:
    return ({} if no_config else find_config(os.getcwd())[1]), []


def _config_path(paths: list[str]) -> str:
    path = paths[0] if paths else "-"
    directory = os.getcwd() if path == "-" else os.path.dirname(os.path.abspath(path))
    return find_config(directory)[0] or "none"


# ---- rlpatch detect ----------------------------------------------------------------------------------
def run_detect(command: DetectCommand) -> DetectOutcome:
    """The run model of each script (an unreadable one is reported on stderr, and exits 2)."""
    from rlpatch.lint.detect import describe_file

    stdin = read_stdin() if "-" in command.files else None
    described: list[dict[str, Any]] = []
    failed = False
    for table, paths in _groups(command.files, command.no_config):
        options = options_for(command.script, table)
        if options.extra.get("python") and not options.verl_root and not command.script.verl_version:
            _version_of_python(options)
        for path in paths:
            found = describe_file(path, options, stdin)
            if found is None:
                failed = True
                continue
            described.append(found)
    return DetectOutcome(tuple(described), detect_report(command, described), 2 if failed else 0)


def detect_report(command: DetectCommand, described: list[dict[str, Any]]) -> str:
    """JSON (one object for one file, else a list) or the text of each script."""
    from rlpatch.lint.detect import render_text

    if command.output_format == "json":
        import json

        single = len(command.files) == 1 and bool(described)
        return json.dumps(described[0] if single else described, indent=2) + "\n"
    return "".join(render_text(obj) + "\n" for obj in described)


def _version_of_python(options: LintOptions) -> None:
    """`detect --python`: the run is described for the verl that interpreter imports."""
    from rlpatch.lint.versions_family import installed

    found = installed(options, "verl")
    if found.version is None:
        raise InputError(f"--python {options.extra['python']}: no verl installed for that interpreter")
    options.verl_version = found.version


# ---- rlpatch rule ------------------------------------------------------------------------------------
def rule_listing() -> str:
    """`rlpatch rule`: one line per lint rule (code, severity letter, summary)."""
    from rlpatch.lint.engine import rule_classes
    from rlpatch.lint.rule import SEVERITY_LETTER

    return "".join(f"{cls.code} {SEVERITY_LETTER[cls.severity]}  {cls.summary}\n" for cls in rule_classes())


def rule_page(code: str) -> str:
    """`rlpatch rule CODE`: the page of a lint rule code or a patch rule id (InputError when unknown)."""
    from rlpatch.lint.docs import page_for, render_text

    page = page_for(code)
    if page is None:
        raise InputError(f"unknown rule code: {code} (see `rlpatch rule` and `rlpatch rules` for the lists)")
    return render_text(page, _docs_base())


def _docs_base() -> str | None:
    """`docs-url` of `[tool.rlpatch]` in the pyproject.toml nearest the current directory."""
    value = find_config(os.getcwd())[1].get("docs_url")
    return value if isinstance(value, str) else None
