"""The `rlpatch` command line.

Subcommands are loaded lazily from `COMMANDS` so that `rlpatch --help` and `rlpatch lint` never
import the patch engine (and with it libcst): the pre-commit hook must start fast. For the same
reason a plain `rlpatch lint ...` is read without click (`rlpatch.lint.quick_cli`, which hands
every other command line to click): this module imports click only when click reads the command
line, and the click group `cli` is built on first use.
"""

from __future__ import annotations

import os
import sys

from rlpatch import __version__
from rlpatch.errors import exit_for

# Not `typing.TYPE_CHECKING` (the type checker treats any TYPE_CHECKING as true): typing is imported
# once `main` has raised the collector's threshold (see `_fewer_collections`), not before.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import click

GC_THRESHOLD = 100_000  # allocations between two young-generation collections (see `_fewer_collections`)

# command name -> (module, attribute, one-line help shown by `rlpatch --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "apply": ("rlpatch.patch.cli", "apply_cmd", "Apply the selected patch rules to the target trees."),
    "verify": ("rlpatch.patch.cli", "verify_cmd", "Check structurally that the patches are in place."),
    "status": ("rlpatch.patch.cli", "status_cmd", "Like verify, but exit 0 whatever the rule states."),
    "revert": ("rlpatch.patch.cli", "revert_cmd", "Restore every patched file byte for byte."),
    "diff": ("rlpatch.patch.cli", "diff_cmd", "Print the unified diff apply would write; write nothing."),
    "rules": ("rlpatch.patch.cli", "rules_cmd", "List the patch rules (apply/verify/revert); lint rules: `rule`."),
    "lint": ("rlpatch.lint.cli", "lint_cmd", "Lint verl launch scripts without running them."),
    "detect": ("rlpatch.lint.cli", "detect_cmd", "Show what a launch script will run: mode, backends, sizes, env."),
    "dumps": ("rlpatch.dumps.cli", "dumps_group", "After the run: check the dumps, pair training with inference, compare."),
    "gen": ("rlpatch.gen.cli", "gen_cmd", "Write the msprobe collection script and configs for a training script."),
    "rule": ("rlpatch.lint.cli", "rule_cmd", "Lint rules (RLxxx), or any rule's page; patch rules: `rules`."),
    "doctor": ("rlpatch.doctor.cli", "doctor_cmd", "Check the Python that really runs verl: msprobe, versions, patches."),
}


def _build_cli() -> click.Group:
    import importlib

    import click

    class LazyGroup(click.Group):
        """A click group whose subcommands are imported only when they are invoked."""

        def list_commands(self, ctx: click.Context) -> list[str]:
            return sorted(COMMANDS)

        def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
            spec = COMMANDS.get(cmd_name)
            if spec is None:
                return None
            module_name, attr, _ = spec
            return getattr(importlib.import_module(module_name), attr)

        def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            # Uses the static help strings so that `--help` imports no subcommand module.
            rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    @click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="rlpatch")
    @click.pass_context
    def cli(ctx: click.Context) -> None:
        """Patch verl / SGLang / vLLM-Ascend trees for msprobe dumps, and lint verl launch scripts."""
        # `--ray` runs this command line on every node: the cluster wing finds it here
        # (`rlpatch.cluster.api.COMMAND_LINE`), never importing the entry point.
        ctx.meta["rlpatch.command_line"] = capture

    return cli


def _group() -> click.Group:
    """The click group `cli`, built on first use and then kept as this module's `cli`."""
    group = globals().get("cli")
    if group is None:
        group = globals()["cli"] = _build_cli()
    return group


def __getattr__(name: str) -> Any:
    """`rlpatch.cli.cli` (PEP 562): the click group, built when first asked for."""
    if name != "cli":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _group()


def main(argv: list[str] | None = None) -> Any:
    """Entry point: every error becomes one line on stderr and an exit code, never a traceback."""
    _fewer_collections()
    try:
        result = _run(argv)
    except BaseException as err:  # noqa: BLE001 - `exit_for` gives each its line, or lets it go on
        exit_for(err)
    # Commands return their exit code (click returns it too when a command calls ctx.exit).
    sys.exit(result if isinstance(result, int) else 0)


def _fewer_collections() -> None:
    """Raise the cyclic collector's first threshold, as mypy does: a command's start allocates mostly
    what lives as long as the process (modules, classes, the composed config), and with the default
    (700) the collector ran about 30 times in a one-script lint, walking those objects each time,
    some 5 ms of a pre-commit hook's cold start. Cycles are still collected, after more allocations."""
    import gc

    if gc.get_threshold()[0] < GC_THRESHOLD:
        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])


def _run(argv: list[str] | None) -> Any:
    """Run the command line: a plain `lint` one without click, any other with it."""
    from rlpatch.lint.quick_cli import lint_and_print, read_lint_args

    # Shell completion (`_RLPATCH_COMPLETE`) is click's to answer, whatever the command line.
    command = None if "_RLPATCH_COMPLETE" in os.environ else read_lint_args(sys.argv[1:] if argv is None else argv)
    if command is not None:
        return lint_and_print(command)
    return _group().main(args=argv, prog_name="rlpatch", standalone_mode=False)


def capture(argv: list[str]) -> tuple[int, str, str]:
    """Run `rlpatch ARGV` in this process: (exit code, stdout, stderr), as a subprocess would give them.

    A `--ray` node runs the local command through it, handed down in the click context (`cli`):
    no module but the entry imports the entry.
    """
    import io
    from contextlib import redirect_stderr, redirect_stdout

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return code, out.getvalue(), err.getvalue()


if __name__ == "__main__":
    main()
