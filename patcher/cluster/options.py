"""The `--ray` options, and the command line each node runs (imports click only, never ray)."""

from __future__ import annotations

from typing import Any, Callable

import click

# The parameters that belong to the driver; every other one is passed on to each node.
RAY_PARAMS = ("ray", "ray_runtime_env", "ray_timeout")
FORMAT_PARAM = "output_format"
DEFAULT_TIMEOUT_S = 300.0
RAY_HELP = "Run the command on every alive node of this Ray cluster (`auto`: the cluster this machine belongs to)."
TIMEOUT_HELP = "Seconds to wait for every node's answer."
# The key of click's `ctx.meta` under which the entry point (`rlpatch.cli`) leaves its in-process
# runner of a command line: each node runs the command through it, and this wing never imports the entry.
COMMAND_LINE = "rlpatch.command_line"


def ray_options(command: Callable[..., Any] | None = None, *, ray_help: str = RAY_HELP,
                timeout_help: str = TIMEOUT_HELP, timeout: float = DEFAULT_TIMEOUT_S) -> Any:
    """Add `--ray ADDRESS`, `--ray-runtime-env JSON` and `--ray-timeout S` to a command
    (`@ray_options`, or `@ray_options(ray_help=..., timeout=...)` for a command that uses them otherwise)."""
    if command is None:
        return lambda function: ray_options(function, ray_help=ray_help, timeout_help=timeout_help, timeout=timeout)
    options = [
        click.option("--ray", "ray", metavar="ADDRESS", help=ray_help),
        click.option("--ray-runtime-env", "ray_runtime_env", metavar="JSON",
                     help="A Ray runtime env (JSON object) merged into the one rlpatch ships to the nodes."),
        click.option("--ray-timeout", "ray_timeout", type=click.FloatRange(min=1), default=timeout,
                     show_default=True, metavar="S", help=timeout_help),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def node_argv(ctx: click.Context, extra: tuple[str, ...] = ()) -> list[str]:
    """The command line a node runs: this command with the same options, minus `--ray*`, in JSON."""
    argv = [ctx.info_name or ctx.command.name or ""]
    arguments: list[str] = []
    for param in ctx.command.params:
        if param.name in RAY_PARAMS or param.name == FORMAT_PARAM or param.name is None:
            continue
        value = ctx.params.get(param.name)
        if isinstance(param, click.Argument):
            arguments += [str(item) for item in value] if isinstance(value, (list, tuple)) else ([] if value is None else [str(value)])
        elif isinstance(param, click.Option):
            argv += _option_words(param, value)
    return argv + list(extra) + ["--format", "json"] + (["--", *arguments] if arguments else [])


def _option_words(param: click.Option, value: Any) -> list[str]:
    name = max(param.opts, key=len)  # the long spelling
    if param.is_flag:
        return [name] if value and value != param.default else []
    if value is None or value == param.default:
        return []
    if param.multiple:
        return [word for item in value for word in (name, str(item))]
    return [name, str(value)]
