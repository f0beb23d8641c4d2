"""Reading one verl launch into a `Run`: which arguments are config-file options, other options or
Hydra overrides (a value that cannot be told is kept as unknown), the environment the launch sees,
and the values of the user's own config file. What the run then means is `model.Run`'s.
"""

from __future__ import annotations

from rlpatch.shell.config_file import config_file_path, read_config_values
from rlpatch.shell.launch import Launch
from rlpatch.shell.model import EnvVar, Mode, Run
from rlpatch.shell.overrides import parse_override
from rlpatch.shell.pieces import unknown_descs, unknown_value, word_text
from rlpatch.shell.results import Arg, Unknown
from rlpatch.upstream.api import Version


def read_run(launch: Launch, file: str, version: Version, forced_mode: Mode | None = None,
             verl_root: str | None = None) -> Run:
    """The run one launch starts: its arguments, the environment it sees, and the user's config file
    (`--config-path/--config-name`), whose values stand under the overrides."""
    run = Run(launch, file, version, forced_mode=forced_mode, verl_root=verl_root)
    _read_arguments(run, list(launch.args))
    for name, env_value in launch.env.items():
        run.env[name] = EnvVar(name, word_text(env_value.first()), env_value.span or launch.command_span,
                               "--env" if env_value.span and env_value.span.file == "<env>" else "export")
    path = config_file_path(file, run.config_dir, run.config_name)
    if path is not None:  # the user's own YAML: its values, under the overrides
        run.config_values = read_config_values(path)
    return run


def _read_arguments(run: Run, args: list[Arg]) -> None:
    """Sort the launch's arguments into the config file options, other options, and the Hydra
    overrides (an argument or a value that cannot be told is noted as unknown)."""
    index = 0
    while index < len(args):
        arg = args[index]
        text = arg.text
        option = _config_option(text)
        if option is not None:
            name, value = option
            if value is None and index + 1 < len(args):
                index += 1
                value = args[index].text
            run.options_args.append(arg)
            if name == "path":
                run.config_dir = value
            else:
                run.config_name = value[:-5] if value and value.endswith(".yaml") else value
        elif text is not None and text.startswith("-"):
            run.options_args.append(arg)
        else:
            _read_override(run, arg)
        index += 1


def _read_override(run: Run, arg: Arg) -> None:
    override = parse_override(arg)
    if override is not None:
        run.overrides.append(override)
        if not override.value_known:
            run.unknown.append(Unknown(f"{override.key}={unknown_value(arg.word)}", override.value_span))
    elif arg.text is None:
        run.unknown.append(Unknown(f"argument {' '.join(unknown_descs(arg.word))}", arg.span))


def _config_option(text: str | None) -> tuple[str, str | None] | None:
    """`--config-path X`, `--config-path=X`, `-cp X`, `-cp=X`, and the same for the name."""
    if text is None:
        return None
    for name, spellings in (("path", ("--config-path", "-cp")), ("name", ("--config-name", "-cn"))):
        for spelling in spellings:
            if text == spelling:
                return name, None
            if text.startswith(spelling + "="):
                return name, text[len(spelling) + 1:]
    return None
