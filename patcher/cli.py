"""The `rlpatch` command line.

Subcommands are loaded lazily from `COMMANDS` so that `rlpatch --help` and `rlpatch lint` never
import the patch engine (and with it libcst): the pre-commit hook must start fast.
"""

from __future__ import annotations

import importlib
import io
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import click

from rlpatch import __version__
from rlpatch.errors import EXIT_USAGE, RlpatchError, error_line

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
def cli() -> None:
    """Patch verl / SGLang / vLLM-Ascend trees for msprobe dumps, and lint verl launch scripts."""


def main(argv: list[str] | None = None) -> Any:
    """Entry point: every error becomes one line on stderr and an exit code, never a traceback."""
    try:
        result = cli.main(args=argv, prog_name="rlpatch", standalone_mode=False)
    except RlpatchError as err:
        click.echo(error_line(err), err=True)
        sys.exit(err.exit_code)
    except click.exceptions.Exit as exit_:
        sys.exit(exit_.exit_code)
    except click.ClickException as err:
        err.show()
        sys.exit(EXIT_USAGE if err.exit_code == 2 else err.exit_code)
    except click.exceptions.Abort:
        click.echo("rlpatch: aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("rlpatch: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except (RecursionError, MemoryError, OSError) as err:
        # What the machine or the input's shape ran out of, not a bug in one command: one line.
        if os.environ.get("RLPATCH_DEBUG"):
            raise
        click.echo(error_line(err), err=True)
        sys.exit(EXIT_USAGE)
    except Exception as err:  # the last line of defence against a traceback
        if os.environ.get("RLPATCH_DEBUG"):
            raise
        click.echo(error_line(err), err=True)
        sys.exit(EXIT_USAGE)
    # Commands return their exit code (click returns it too when a command calls ctx.exit).
    sys.exit(result if isinstance(result, int) else 0)


def capture(argv: list[str]) -> tuple[int, str, str]:
    """Run `rlpatch ARGV` in this process: (exit code, stdout, stderr), as a subprocess would give them.

    The wings that run other commands (`doctor` asks `verify` and `lint`, a `--ray` node runs the
    local command) go through here rather than importing those commands' wings.
    """
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
