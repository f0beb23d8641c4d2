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
from rlpatch.lint.config import find_config, read_config_file, table_base, table_name
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
    config_file: str | None = None  # --config FILE: this table for every file, instead of discovery
    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    force_exclude: bool = False  # exclude patterns apply to files named on the command line too
    respect_gitignore: bool | None = None  # None: [tool.rlpatch] respect-gitignore, else true
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
    fix: bool = False  # write the fixes into the scripts, then report what remains
    diff: bool = False  # print the fixes as a unified diff instead of the report; write nothing
    unsafe_fixes: bool = False  # apply (or show) the unsafe fixes too
    quiet: bool = False  # -q: no notes and no progress on stderr (errors, warnings and the report stay)


class LintOutcome(NamedTuple):
    """What a lint command gave: the files it linted, their results in command-line order, the
    warnings and per-file errors for stderr (in the order they are printed), the report for stdout
    or `--output-file`, the exit code (0 clean, 1 findings that fail, 2 an input error), and the
    invocation's notes for stderr, each said once however many scripts it concerns (which verl RL3xx
    checked against when none was named, or why it did not run)."""

    files: tuple[str, ...]
    results: tuple[FileResult, ...]
    warnings: tuple[str, ...]
    errors: tuple[str, ...]
    report: str
    exit_code: int
    notes: tuple[str, ...] = ()
    fix_notes: tuple[str, ...] = ()  # what --fix / --diff did, printed after the report


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
    from rlpatch.lint.scope import check_output_file

    files = _files_to_lint(command)
    if command.output_file is not None:
        check_output_file(command.output_file, files)
    if command.statistics and command.output_format not in ("concise", "full", "json"):
        raise InputError(f"--statistics: a count per rule is printed as text or json, not --format {command.output_format}")
    if command.show_settings:
        return LintOutcome(files, (), (), (), settings_text(command, files), 0)
    # As ruff: a warning, not an error (an empty tree is clean).
    warnings = () if files else ("no *.sh files found",)
    results, fail_on, exit_zero = _lint_groups(command, files)
    fix_notes: tuple[str, ...] = ()
    if command.diff:
        return _diff_outcome(command, files, results, warnings)
    if command.fix:
        results, fix_notes = _fixed(command, files, results)
    errors = tuple(result.error for result in results if result.error)
    order = {path: index for index, path in enumerate(files)}
    results.sort(key=lambda r: order.get(r.path, 0))
    return LintOutcome(files, tuple(results), warnings, errors, lint_report(command, results),
                       _exit_code(results, fail_on, exit_zero), _notes(results), fix_notes)


def _notes(results: list[FileResult]) -> tuple[str, ...]:
    """The invocation's notes for stderr, each said once however many scripts it concerns."""
    return tuple(dict.fromkeys(note for result in results for note in result.notes))


def _diff_outcome(command: LintCommand, files: tuple[str, ...], results: list[FileResult],
                  warnings: tuple[str, ...]) -> LintOutcome:
    """`--diff`: the fixes as one unified diff; exit 1 when there is one (as ruff), 2 on an input error."""
    from rlpatch.lint.fixes import fixed_files, unified_diff

    errors = tuple(result.error for result in results if result.error)
    fixed = fixed_files((f for r in results for f in r.findings), command.unsafe_fixes)
    count = sum(item.applied for item in fixed)
    note = f"Would fix {count} finding{'s' if count != 1 else ''}." if count else "No fixes available."
    code = 2 if errors else (1 if fixed else 0)
    return LintOutcome(files, tuple(results), warnings, errors, "".join(unified_diff(item) for item in fixed), code,
                       _notes(results), (note + _hidden_unsafe(results, command.unsafe_fixes),))


def _fixed(command: LintCommand, files: tuple[str, ...], results: list[FileResult]) -> tuple[list[FileResult], tuple[str, ...]]:
    """`--fix`: write every file's fixes, then lint again: what is reported is what remains."""
    from rlpatch.lint.engine import FileResult
    from rlpatch.lint.fixes import fixed_files, write_fixed

    fixed = fixed_files((f for r in results for f in r.findings), command.unsafe_fixes)
    failed: list[FileResult] = []
    for item in fixed:
        try:
            write_fixed(item)
        except InputError as err:
            failed.append(FileResult(item.path, error=err.message))
    if not fixed:
        return results, ("No fixes applied." + _hidden_unsafe(results, command.unsafe_fixes),)
    written = {item.path for item in fixed} - {result.path for result in failed}
    again, _, _ = _lint_groups(command, files)
    count = sum(item.applied for item in fixed if item.path in written)
    note = f"Fixed {count} finding{'s' if count != 1 else ''} in {len(written)} file{'s' if len(written) != 1 else ''}."
    return again + failed, (note + _hidden_unsafe(again, command.unsafe_fixes),)


def _hidden_unsafe(results: list[FileResult], unsafe_shown: bool) -> str:
    hidden = 0 if unsafe_shown else sum(1 for r in results for f in r.findings if f.fix and f.fix.applicability == "unsafe")
    return f" ({hidden} more with --unsafe-fixes)" if hidden else ""


def _files_to_lint(command: LintCommand) -> tuple[str, ...]:
    """The command's files with directories walked, then what `exclude` and `.gitignore` leave out
    (see `rlpatch.lint.file_selection`)."""
    from rlpatch.lint.scope import expand_paths

    files, walked = expand_paths(command.files or (".",))
    kept = []
    for table, paths in _groups(tuple(files), command.no_config, command.config_file):
        patterns = split_list(table.get("exclude")) or []
        respect = command.respect_gitignore if command.respect_gitignore is not None else table.get("respect_gitignore", True)
        if patterns:
            from rlpatch.lint.file_selection import excluded

            base = table_base(table)
            paths = [p for p in paths if not ((p in walked or command.force_exclude) and excluded(p, patterns, base))]
        if respect and walked:
            from rlpatch.lint.file_selection import git_ignored

            ignored = git_ignored(p for p in paths if p in walked)
            paths = [p for p in paths if p not in ignored]
        kept.extend(paths)
    keep = set(kept)
    return tuple(path for path in files if path in keep)


def _exit_code(results: list[FileResult], fail_on: str, exit_zero: bool) -> int:
    from rlpatch.lint.engine import exit_code

    return exit_code(results, fail_on, exit_zero)


def _lint_groups(command: LintCommand, files: tuple[str, ...]) -> tuple[list[FileResult], str, bool]:
    """Every file's result (findings kept at `--severity`), in the order of the config groups, with
    the fail-on and exit-zero that apply (the command line's, else the first table that sets them)."""
    from rlpatch.lint.engine import FileResult, check_codes, default_jobs, lint_paths, select_rules
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
    table_of: dict[str, dict[str, Any]] = {}  # each file's table, for what is applied to its findings after the lint
    for table, paths in _groups(files, command.no_config, command.config_file):
        table_of.update((path, table) for path in paths)
        options = options_for(command.script, table)
        rules = select_rules(*_selection(command, table))
        for codes in (table.get("per_file_ignores") or {}).values():
            check_codes(split_list(codes) or [], f"{table_name(table)} per-file-ignores")
        fail = fail or FAIL_ON[str(table.get("fail_on", "E")).upper()]
        zero = zero or bool(table.get("exit_zero"))
        tasks.extend((path, options, rules) for path in paths if not (path == "-" and stdin_error))
    from rlpatch.output.api import log_progress

    # A folder's many scripts in a batch log: a done/total line every few seconds (none on a terminal, or -q).
    with log_progress("rlpatch lint", len(tasks) if len(tasks) > 1 else 0, "files linted", command.quiet) as progress:
        results = lint_paths(tasks, stdin, command.jobs or default_jobs(tasks, stdin),
                             None if progress is None else progress.advance)
    if command.skip_non_verl:
        from rlpatch.lint.scope import skip_non_verl

        results = skip_non_verl(results, stdin)
    results = _per_file_ignores(results, table_of)
    if stdin_error:
        results.append(FileResult("-", error=stdin_error))
    if command.severity:
        results = keep_severity(results, command.severity.lower())
    elif command.output_format == "sarif":  # code scanning: each info would become an alert
        for result in results:
            lowest = table_of.get(result.path, {}).get("sarif_severity")
            if lowest:
                keep_severity([result], str(lowest).lower())
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


def _selection(command: LintCommand, table: dict[str, Any]) -> tuple[list[str] | None, list[str]]:
    """(select, ignore) layered like ruff: a command-line --select starts over (the table's select
    and ignore no longer apply); without one, the table's selection stands and --ignore adds to it.
    extend-select (the table's, then the command line's) adds to whichever selection stands."""
    cli_select, cli_ignore = split_list(command.select), split_list(command.ignore) or []
    cli_extend = split_list(command.extend_select) or []
    if cli_select:
        return cli_select + cli_extend, cli_ignore
    select = split_list(table.get("select"))
    extend = (split_list(table.get("extend_select")) or []) + cli_extend
    if select is not None and extend:
        select = select + extend
    return select, (split_list(table.get("ignore")) or []) + cli_ignore


def _per_file_ignores(results: list[FileResult], table_of: dict[str, dict[str, Any]]) -> list[FileResult]:
    """The findings `per-file-ignores` of each file's table drops (codes or prefixes, as --ignore)."""
    for result in results:
        table = table_of.get(result.path, {})
        per_file = table.get("per_file_ignores")
        if not per_file or result.error:
            continue
        from rlpatch.lint.file_selection import ignored_codes  # only where a table has per-file-ignores

        codes = ignored_codes(result.path, {p: split_list(c) or [] for p, c in per_file.items()}, table_base(table))
        if codes:
            result.findings = [f for f in result.findings if not any(f.code.startswith(code) for code in codes)]
    return results


def _table_for(path: str, no_config: bool, config_file: str | None) -> tuple[str | None, dict[str, Any]]:
    """(config file, table) that applies to `path`: none, `--config FILE`, else the nearest one."""
    if no_config:
        return None, {}
    if config_file is not None:
        return config_file, read_config_file(config_file)
    directory = os.getcwd() if path == "-" else os.path.dirname(os.path.abspath(path))
    return find_config(directory)


def _groups(files: tuple[str, ...], no_config: bool, config_file: str | None = None) -> list[Group]:
    """Files grouped by the [tool.rlpatch] table that applies to them (in command-line order)."""
    groups: dict[str | None, Group] = {}
    for path in files:
        key: str | None
        table: dict[str, Any]
        if no_config or config_file is not None:
            key, table = _table_for(path, no_config, config_file)
        else:
            directory = os.getcwd() if path == "-" else os.path.dirname(os.path.abspath(path))
            key, table = find_config(directory)
        groups.setdefault(key, (table, []))[1].append(path)
    return list(groups.values())


def settings_text(command: LintCommand, files: tuple[str, ...]) -> str:
    """`--show-settings`: the settings each group of files is linted with (one block per config file)."""
    groups = _groups(files, command.no_config, command.config_file) if files else [
        _cwd_group(command.no_config, command.config_file)]
    return "\n".join(_settings_block(command, table, paths) for table, paths in groups)


def _settings_block(command: LintCommand, table: dict[str, Any], paths: list[str]) -> str:
    script = command.script
    options = options_for(script, table)
    chosen, skipped = _selection(command, table)
    fail = FAIL_ON[command.fail_on.upper()] if command.fail_on else FAIL_ON[str(table.get("fail_on", "E")).upper()]
    config = "none (--no-config)" if command.no_config else (command.config_file or _config_path(paths))
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
        ("hydra config (RL3xx)", _schema_verl(options)),
        ("python", options.python or "(none)"),
        ("sglang root", options.sglang_root or "(none)"),
        ("vllm-ascend root", options.vllm_ascend_root or "(none)"),
        ("config root", options.config_root or "(none)"),
        ("allow-level", ",".join(sorted(options.allow_level)) or "(none)"),
        ("env", (" ".join(f"{key}={value}" for key, value in sorted(options.env.items())) or "(none)")
         if not script.use_env else f"this process's environment ({len(options.env)} variables)"),
        ("extra overrides", " ".join(script.extra) or "(none)"),
    ]
    return "".join(f"{key}: {value}\n" for key, value in lines)


def _schema_verl(options: LintOptions) -> str:
    from rlpatch.lint.verl_default import describe

    return describe(options)


def _cwd_group(no_config: bool, config_file: str | None = None) -> Group:
    return _table_for("-", no_config, config_file)[1], []


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
        if options.python and not options.verl_root and not command.script.verl_version:
            options = _version_of_python(options)
        for path in paths:
            found = describe_file(path, options, stdin)
            if found is None:
                failed = True
                continue
            described.append(found)
    return DetectOutcome(tuple(described), detect_report(command, described), 2 if failed else 0)


def detect_report(command: DetectCommand, described: list[dict[str, Any]]) -> str:
    """JSON (for one file its object, else `{"version", "scripts": [...]}`) or the text of each script."""
    from rlpatch.lint.detect import render_text

    if command.output_format == "json":
        import json

        from rlpatch.output.api import versioned

        single = len(command.files) == 1 and bool(described)
        return json.dumps(versioned(described[0] if single else {"scripts": described}), indent=2) + "\n"
    return "".join(render_text(obj) + "\n" for obj in described)


def _version_of_python(options: LintOptions) -> LintOptions:
    """`detect --python`: the run is described for the verl that interpreter imports."""
    from rlpatch.lint.versions_family import installed

    found = installed(options, "verl")
    if found.version is None:
        raise InputError(f"--python {options.python}: no verl installed for that interpreter")
    return options.replace(verl_version=found.version)


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
