"""`rlpatch lint`, `rlpatch detect` and `rlpatch rule`: the launch-script linter's commands.

Each callback only turns its options into one immutable command object and calls the linter
(`rlpatch.lint.commands`), then prints what came back. Imports stay light on purpose (click, the
lint configuration): `rlpatch lint` is a pre-commit hook and must start fast; it never imports
libcst or a patch rule.
"""

from __future__ import annotations

from typing import Any

import click

from rlpatch.lint.commands import DetectCommand, LintCommand, rule_listing, rule_page, run_detect
from rlpatch.lint.extra_args import ExtraArgsCommand
from rlpatch.lint.options import ScriptOptions
from rlpatch.lint.quick_cli import lint_and_print
from rlpatch.shell.api import MODES
from rlpatch.upstream.api import TARGET_OPTIONS

# The options that say how the scripts will run (`_common`'s, and lint's --allow-level).
SCRIPT_OPTIONS = tuple(name for name in ScriptOptions._fields if name != "extra")
ROLLOUT_ROOTS = ("--sglang-root", "--vllm-ascend-root")


def _common(function, rollout_roots: bool = True):
    options = [
        ("--mode", click.option("--mode", type=click.Choice(MODES), help="Force the dump mode instead of detecting it.")),
        ("--env", click.option("--env", "env", multiple=True, metavar="KEY=VAL", help="Environment the script starts with.")),
        ("--use-env", click.option("--use-env", is_flag=True, help="Start from this process's environment.")),
        ("--verl-root", TARGET_OPTIONS["verl_root"].click_option(use="its version, config and entry modules")),
        ("--verl-version", click.option("--verl-version", metavar="X.Y.Z",
                                        help="The verl version that will run (default: newest).")),
        ("--config-root", click.option("--config-root", type=click.Path(),
                                       help="Resolve config.json paths against this directory.")),
        ("--python", TARGET_OPTIONS["python"].click_option(use="the one that will run verl: its versions and config")),
        ("--sglang-root", TARGET_OPTIONS["sglang_root"].click_option(use="RL6xx versions")),
        ("--vllm-ascend-root", TARGET_OPTIONS["vllm_ascend_root"].click_option(use="RL6xx versions")),
        ("--no-config", click.option("--no-config", is_flag=True, help="Ignore [tool.rlpatch] in pyproject.toml.")),
    ]
    for name, option in reversed(options):
        # Only the RL6xx lint rules read the rollout trees: detect, which shows no rollout version, has no such option.
        if rollout_roots or name not in ROLLOUT_ROOTS:
            function = option(function)
    return function


@click.command("lint", cls=ExtraArgsCommand)
@click.argument("files", nargs=-1)
@click.option("--format", "output_format", type=click.Choice(["concise", "full", "json", "github", "sarif"]), default="concise",
              show_default=True)
@click.option("--select", multiple=True, help="Rule codes or prefixes to run (comma separated; default ALL).")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to run besides the selection.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to skip.")
@click.option("--config", "config_file", metavar="FILE",
              help="Read settings from FILE (its [tool.rlpatch], else its top level) for every file, instead of "
                   "the nearest pyproject.toml.")
@click.option("--force-exclude", is_flag=True,
              help="Apply [tool.rlpatch] exclude to files named on the command line too (for pre-commit).")
@click.option("--respect-gitignore/--no-respect-gitignore", default=None,
              help="Leave out of a directory walk what git ignores (default: on, or respect-gitignore).")
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
              help="Skip files with no verl launch that never name verl (install.sh), and JSON files that are not "
                   "msprobe configs: for pre-commit hooks.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), metavar="N",
              help="Lint several files in N worker processes (default: the number of CPUs for a large input, "
                   "in-process for a few small files; 1 = in-process).")
@click.option("--fix", is_flag=True, help="Write the safe fixes into the scripts, then report what remains.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff instead of the findings; write nothing "
                                           "(exit 1 when there is a fix).")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff, apply the unsafe fixes too (a variable "
                                                   "that may be used elsewhere).")
@click.option("--quiet", "-q", is_flag=True, help="Print no notes and no progress on stderr: only the report, "
                                                "warnings and errors (as ruff's -q).")
@_common
@click.pass_context
def lint_cmd(ctx: click.Context, files: tuple[str, ...], **values: Any) -> int:
    """Lint verl launch scripts (FILES, or - for stdin) without running them.

    A directory is linted recursively (its *.sh files; hidden folders, node_modules, __pycache__ and
    virtualenvs skipped); without FILES, the current directory. Extra Hydra overrides after `--` are
    passed to the script as "$@".
    """
    if values["config_file"] is not None and values["no_config"]:
        raise click.UsageError("--config and --no-config: give one of them")
    if values["fix"] and values["diff"]:
        raise click.UsageError("--fix and --diff: give one of them (--diff writes nothing)")
    # A plain command line is read without click by `rlpatch.cli.main` (`quick_cli`): both end here.
    return lint_and_print(LintCommand(files=files, script=_script_options(ctx, values), **values))


@click.command("detect", cls=ExtraArgsCommand)
@click.argument("files", nargs=-1, required=True)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@lambda function: _common(function, rollout_roots=False)
@click.pass_context
def detect_cmd(ctx: click.Context, files: tuple[str, ...], **values: Any) -> int:
    """Print what each launch script will run: mode, backends, world size, sizes, env, unknowns."""
    outcome = run_detect(DetectCommand(files=files, script=_script_options(ctx, values), **values))
    click.echo(outcome.report, nl=False)
    return outcome.exit_code


def _script_options(ctx: click.Context, values: dict[str, Any]) -> ScriptOptions:
    """The options `_common` adds, taken out of `values`, with the extra overrides after `--`."""
    given = {name: values.pop(name) for name in SCRIPT_OPTIONS if name in values}
    return ScriptOptions(**given, extra=tuple(ctx.meta.get("rlpatch.extra", [])))


@click.command("rule")
@click.argument("code", required=False)
@click.option("--quiet", "-q", is_flag=True, help="Without CODE, leave out the note on stderr about patch rules.")
def rule_cmd(code: str | None, quiet: bool) -> int:
    """Without CODE, list the LINT rules (RLxxx: what `rlpatch lint` checks in launch scripts). With CODE,
    show that rule's page: what it does, why, example, use instead, how to silence, options, references.

    CODE may also be a patch rule id (listed by `rlpatch rules`): its page says what it patches,
    versions, trainer, how to revert.
    """
    # The one command that documents both rule families; the pages are the linter's, which imports
    # the patch rules (libcst) only for a patch rule id.
    if code is None:
        click.echo(rule_listing(), nl=False)
        if not quiet:
            click.echo("Patch rules: `rlpatch rules` lists them, `rlpatch rule ID` documents one.", err=True)
        return 0
    click.echo(rule_page(code), nl=False)
    return 0
