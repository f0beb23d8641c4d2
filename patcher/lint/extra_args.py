"""The click command class of `lint`, `detect` and `gen`: everything after `--` is kept aside.

Apart from `rlpatch.lint.options` so that a lint command line read without click
(`rlpatch.lint.quick_cli`) never imports click.
"""

from __future__ import annotations

import click


class ExtraArgsCommand(click.Command):
    """Keeps everything after `--` aside: those are extra Hydra overrides for the script's "$@"."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            index = args.index("--")
            ctx.meta["rlpatch.extra"] = args[index + 1:]
            args = args[:index]
        return super().parse_args(ctx, args)
