"""`rlpatch lint`, `rlpatch detect` and `rlpatch rule`: the launch-script linter's commands.

Imports stay light on purpose (click, tree-sitter, the lint engine): `rlpatch lint` is a
pre-commit hook and must start fast; it never imports libcst or a patch rule.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any

import click

from rlpatch.errors import InputError
from rlpatch.lint.config import find_config
from rlpatch.lint.options import ExtraArgsCommand, build_options, split_list
from rlpatch.lint.rule import LintOptions
from rlpatch.shell.api import MODES

FAIL_ON = {"E": "error", "W": "warning", "I": "info", "ERROR": "error", "WARNING": "warning", "INFO": "info"}


def read_stdin() -> bytes:
    """`-`: standard input, bounded like a script file (a closed stdin or an endless stream is an
    InputError, not a hang or an exhausted memory)."""
    from rlpatch.shell.api import MAX_SCRIPT_BYTES, read_stream

    stream = sys.stdin.buffer if sys.stdin is not None else None
    return read_stream(stream, "-", MAX_SCRIPT_BYTES)


ROLLOUT_ROOTS = ("--sglang-root", "--vllm-ascend-root")


def _common(function, rollout_roots: bool = True):
    options = [
        ("--mode", click.option("--mode", type=click.Choice(MODES), help="Force the dump mode instead of detecting it.")),
        ("--env", click.option("--env", "env", multiple=True, metavar="KEY=VAL", help="Environment the script starts with.")),
        ("--use-env", click.option("--use-env", is_flag=True, help="Start from this process's environment.")),
        ("--verl-root", click.option("--verl-root", type=click.Path(),
                                     help="A verl tree: its version picks version-dependent keys.")),
        ("--verl-version", click.option("--verl-version", metavar="X.Y.Z",
                                        help="The verl version that will run (default: newest).")),
        ("--config-root", click.option("--config-root", type=click.Path(),
                                       help="Resolve config.json paths against this directory.")),
        ("--python", click.option("--python", "python", metavar="PATH",
                                  help="The interpreter that will run verl (versions, config).")),
        ("--sglang-root", click.option("--sglang-root", type=click.Path(), help="An SGLang tree (RL6xx versions).")),
        ("--vllm-ascend-root", click.option("--vllm-ascend-root", type=click.Path(),
                                            help="A vLLM-Ascend tree (RL6xx versions).")),
        ("--no-config", click.option("--no-config", is_flag=True, help="Ignore [tool.rlpatch] in pyproject.toml.")),
    ]
    for name, option in reversed(options):
        # Only the RL6xx lint rules read the rollout trees: detect, which shows no rollout version, has no such option.
        if rollout_roots or name not in ROLLOUT_ROOTS:
            function = option(function)
    return function


def _selection(select: tuple[str, ...], ignore: tuple[str, ...], table: dict[str, Any]) -> tuple[list[str] | None, list[str]]:
    """(select, ignore) layered like ruff: a command-line --select starts over (the table's select
    and ignore no longer apply); without one, the table's selection stands and --ignore adds to it."""
    cli_select, cli_ignore = split_list(select), split_list(ignore) or []
    if cli_select:
        return cli_select, cli_ignore
    return split_list(table.get("select")), (split_list(table.get("ignore")) or []) + cli_ignore


def _groups(files: tuple[str, ...], no_config: bool) -> list[tuple[dict[str, Any], list[str]]]:
    """Files grouped by the [tool.rlpatch] table that applies to them (in command-line order)."""
    groups: dict[str | None, tuple[dict[str, Any], list[str]]] = {}
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


@click.command("lint", cls=ExtraArgsCommand)
@click.argument("files", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["concise", "full", "json", "github", "sarif"]), default="concise",
              show_default=True)
@click.option("--select", multiple=True, help="Rule codes or prefixes to run (comma separated; default ALL).")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to skip.")
@click.option("--fail-on", type=click.Choice(["E", "W", "I", "error", "warning", "info"], case_sensitive=False),
              help="Lowest severity that fails (default E).")
@click.option("--severity", "-S", type=click.Choice(["error", "warning", "info"], case_sensitive=False),
              help="Lowest severity reported, as ShellCheck's -S (default info: all); findings below it are "
                   "neither shown nor counted.")
@click.option("--statistics", is_flag=True, help="Print how many findings each rule has instead of the findings.")
@click.option("--output-file", "-o", metavar="FILE",
              help="Write the report to FILE (a regular file, never an input) instead of stdout.")
@click.option("--show-settings", is_flag=True,
              help="Print the resolved settings (selection, fail-on, mode, versions, config file) and exit 0.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Colour the concise and full formats (auto: on a terminal, unless NO_COLOR is set).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even with findings (input errors still exit 2).")
@click.option("--allow-level", multiple=True, help="msprobe levels accepted besides mix (RL109).")
@click.option("--skip-non-verl", is_flag=True,
              help="Skip files with no verl launch that never name verl (install.sh): for pre-commit hooks.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), metavar="N",
              help="Lint several files in N worker processes (default: the number of CPUs for a large input, "
                   "in-process for a few small files; 1 = in-process).")
@_common
@click.pass_context
def lint_cmd(ctx: click.Context, files: tuple[str, ...], fmt: str, select, ignore, fail_on, severity, statistics,
             output_file, show_settings, color, exit_zero, allow_level, skip_non_verl, jobs, mode, env, use_env, verl_root,
             verl_version, config_root, python, sglang_root, vllm_ascend_root, no_config) -> int:
    """Lint verl launch scripts (FILES, or - for stdin) without running them.

    A directory is linted recursively (its *.sh files; hidden folders, node_modules, __pycache__ and
    virtualenvs skipped); without FILES, the current directory. Extra Hydra overrides after `--` are
    passed to the script as "$@".
    """
    from rlpatch.lint.engine import FileResult, LintTask, default_jobs, exit_code, lint_paths, select_rules
    from rlpatch.lint.report import REPORTERS, keep_severity, report_concise, report_full, report_statistics, use_color
    from rlpatch.lint.scope import check_output_file, expand_paths

    files = tuple(expand_paths(files or (".",)))
    if output_file is not None:
        check_output_file(output_file, files)
    if statistics and fmt not in ("concise", "full", "json"):
        raise InputError(f"--statistics: a count per rule is printed as text or json, not --format {fmt}")
    if not files and not show_settings:  # as ruff: a warning, not an error (an empty tree is clean)
        click.echo("rlpatch lint: warning: no *.sh files found", err=True)
    extra = ctx.meta.get("rlpatch.extra", [])
    cli = dict(mode=mode, env=env, use_env=use_env, verl_root=verl_root, verl_version=verl_version,
               allow_level=allow_level, config_root=config_root, python=python, sglang_root=sglang_root,
               vllm_ascend_root=vllm_ascend_root)
    if show_settings:
        text = settings_text(files, no_config, cli, extra, select, ignore, fail_on, exit_zero, severity)
        _write(text, output_file)
        return 0
    stdin, stdin_error = None, None
    if "-" in files:
        try:
            stdin = read_stdin()
        except InputError as err:  # one input of several: reported like an unreadable file
            stdin_error = err.message
    tasks: list[LintTask] = []
    fail = FAIL_ON[fail_on.upper()] if fail_on else None
    zero = exit_zero
    for table, paths in _groups(files, no_config):
        options = build_options(cli, table, extra)
        rules = select_rules(*_selection(select, ignore, table))
        fail = fail or FAIL_ON[str(table.get("fail_on", "E")).upper()]
        zero = zero or bool(table.get("exit_zero"))
        tasks.extend((path, options, rules) for path in paths if not (path == "-" and stdin_error))
    results = lint_paths(tasks, stdin, jobs or default_jobs(tasks, stdin))
    if skip_non_verl:
        from rlpatch.lint.scope import skip_non_verl as drop_non_verl

        results = drop_non_verl(results, stdin)
    if stdin_error:
        results.append(FileResult("-", error=stdin_error))
    if severity:
        results = keep_severity(results, severity.lower())
    for result in results:
        if result.error:
            click.echo(f"rlpatch: error: {result.error}", err=True)
    order = {path: index for index, path in enumerate(files)}
    results.sort(key=lambda r: order.get(r.path, 0))
    # One write: reporters write piecewise, and each write through click's stream wrapper costs.
    report = io.StringIO()
    if statistics:
        report_statistics(results, report, fmt == "json")
    elif fmt in ("concise", "full"):
        text_reporter = report_concise if fmt == "concise" else report_full
        text_reporter(results, report, use_color(color, output_file is None and sys.stdout.isatty()))
    else:
        REPORTERS[fmt](results, report)
    _write(report.getvalue(), output_file)
    return exit_code(results, fail or "error", zero)


def _version_of_python(options: LintOptions) -> None:
    """`detect --python`: the run is described for the verl that interpreter imports."""
    from rlpatch.lint.versions_family import installed

    found = installed(options, "verl")
    if found.version is None:
        raise InputError(f"--python {options.extra['python']}: no verl installed for that interpreter")
    options.verl_version = found.version


def _write(text: str, output_file: str | None) -> None:
    if output_file is None:
        sys.stdout.write(text)
        return
    try:
        with open(output_file, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as err:
        raise InputError(f"--output-file {output_file}: {err.strerror or err}") from None


def settings_text(files: tuple[str, ...], no_config: bool, cli: dict[str, Any], extra: list[str],
                  select: tuple[str, ...], ignore: tuple[str, ...], fail_on: str | None, exit_zero: bool,
                  severity: str | None) -> str:
    """`--show-settings`: the settings each group of files is linted with (one block per config file)."""
    groups = _groups(files, no_config) if files else [_cwd_group(no_config)]
    blocks = []
    for table, paths in groups:
        options = build_options(cli, table, extra)
        chosen, skipped = _selection(select, ignore, table)
        fail = FAIL_ON[fail_on.upper()] if fail_on else FAIL_ON[str(table.get("fail_on", "E")).upper()]
        config = "none (--no-config)" if no_config else (table.get("__path__") or _config_path(paths))
        lines = [
            ("config file", config),
            ("files", str(len(paths))),
            ("select", ",".join(chosen or ["ALL"])),
            ("ignore", ",".join(skipped) or "(none)"),
            ("fail-on", fail),
            ("exit-zero", str(exit_zero or bool(table.get("exit_zero"))).lower()),
            ("severity", (severity or "info").lower()),
            ("mode", options.mode or "detected from each script"),
            ("verl version", str(options.verl_version) + ("" if options.verl_root or cli.get("verl_version")
                                                         or table.get("verl_version") else " (newest release)")),
            ("verl root", options.verl_root or "(none)"),
            ("python", options.extra.get("python") or "(none)"),
            ("sglang root", options.extra.get("sglang_root") or "(none)"),
            ("vllm-ascend root", options.extra.get("vllm_ascend_root") or "(none)"),
            ("config root", options.config_root or "(none)"),
            ("allow-level", ",".join(sorted(options.allow_level)) or "(none)"),
            ("env", (" ".join(f"{key}={value}" for key, value in sorted(options.env.items())) or "(none)")
             if not cli.get("use_env") else f"this process's environment ({len(options.env)} variables)"),
            ("extra overrides", " ".join(extra) or "(none)"),
        ]
        blocks.append("".join(f"{key}: {value}\n" for key, value in lines))
    return "\n".join(blocks)


def _cwd_group(no_config: bool) -> tuple[dict[str, Any], list[str]]:
    return ({} if no_config else find_config(os.getcwd())[1]), []


def _config_path(paths: list[str]) -> str:
    path = paths[0] if paths else "-"
    directory = os.getcwd() if path == "-" else os.path.dirname(os.path.abspath(path))
    return find_config(directory)[0] or "none"


@click.command("detect", cls=ExtraArgsCommand)
@click.argument("files", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@lambda function: _common(function, rollout_roots=False)
@click.pass_context
def detect_cmd(ctx: click.Context, files: tuple[str, ...], fmt: str, mode, env, use_env, verl_root, verl_version,
               config_root, python, no_config) -> int:
    """Print what each launch script will run: mode, backends, world size, sizes, env, unknowns."""
    import json

    from rlpatch.lint.detect import describe_file, render_text

    extra = ctx.meta.get("rlpatch.extra", [])
    stdin = read_stdin() if "-" in files else None
    cli = dict(mode=mode, env=env, use_env=use_env, verl_root=verl_root, verl_version=verl_version,
               config_root=config_root, python=python)
    objects, failed = [], False
    for table, paths in _groups(files, no_config):
        options = build_options(cli, table, extra)
        if options.extra.get("python") and not options.verl_root and not verl_version:
            _version_of_python(options)
        for path in paths:
            described = describe_file(path, options, stdin)
            if described is None:
                failed = True
                continue
            objects.append(described)
    if fmt == "json":
        click.echo(json.dumps(objects[0] if len(files) == 1 and objects else objects, indent=2))
    else:
        for obj in objects:
            click.echo(render_text(obj))
    return 2 if failed else 0
