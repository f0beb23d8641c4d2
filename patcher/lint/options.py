"""What `rlpatch lint` and its facade share: what the command line says about how the scripts will
run (`ScriptOptions`), and the one way to build `LintOptions` from command-line values over
`[tool.rlpatch]`. (The click command class that keeps `-- extra overrides` aside is
`rlpatch.lint.extra_args`: a lint read without click never imports click.)

Neither the CLI (`rlpatch.lint.cli`) nor the facade (`rlpatch.lint.api`, used by `rlpatch gen`)
owns these: both import them from here, so the linter's core never depends on its command line.
"""

# No `from __future__ import annotations`: typing compiles each string annotation of a NamedTuple's
# fields (a ForwardRef each) at import, on every cold start of `rlpatch lint`; evaluated ones it takes as they are.

import os
from typing import Any, NamedTuple

from rlpatch.errors import InputError
from rlpatch.lint.rule import LintOptions
from rlpatch.shell.api import MODES, NEWEST_VERL, env_assignments
from rlpatch.upstream.api import Version


class ScriptOptions(NamedTuple):
    """How the scripts will run, as the command line of `lint` or `detect` says: each value, when
    given, wins over `[tool.rlpatch]` (`options_for`); `extra` are the Hydra overrides after `--`.
    A NamedTuple (immutable) rather than a frozen dataclass: cheaper to create at each cold start."""

    mode: str | None = None
    env: tuple[str, ...] = ()
    use_env: bool = False
    verl_root: str | None = None
    verl_version: str | None = None
    config_root: str | None = None
    python: str | None = None
    sglang_root: str | None = None
    vllm_ascend_root: str | None = None
    allow_level: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    # No command-line option: a caller that knows the interpreter and found no verl there (doctor)
    # says "release" so that RL3xx checks against the release, never rlpatch's own verl.
    verl_default: str | None = None

    def command_line(self) -> dict[str, Any]:
        """The values as `build_options` reads them (the extra overrides apart)."""
        values = self._asdict()
        del values["extra"]
        return values


def options_for(script: ScriptOptions, table: dict[str, Any]) -> LintOptions:
    """`LintOptions` for the files one `[tool.rlpatch]` table (`{}`: none) applies to."""
    return build_options(script.command_line(), table, list(script.extra))


def split_list(values: tuple[str, ...] | list[str] | str | None) -> list[str] | None:
    """Comma-separated items, from one option or several (None when the option was not given)."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    items = [item.strip() for value in values for item in str(value).split(",") if item.strip()]
    return items


def _env_pairs(pairs: Any, where: str) -> dict[str, str]:
    if isinstance(pairs, dict):  # [tool.rlpatch] env = {K = "V"}
        return {str(k): str(v) for k, v in pairs.items()}
    return env_assignments(pairs or (), where)


def _version(text: str | None, where: str) -> Version | None:
    if text is None:
        return None
    version = Version.maybe(str(text))
    if version is None:
        raise InputError(f"{where}: not a version number: {text!r}")
    return version


def build_options(cli: dict[str, Any], config: dict[str, Any], extra: list[str]) -> LintOptions:
    """CLI options over `[tool.rlpatch]` over defaults."""
    from rlpatch.lint.engine import read_version

    def pick(name: str) -> Any:
        value = cli.get(name)
        return value if value not in (None, (), []) else config.get(name)

    env: dict[str, str] = dict(os.environ) if cli.get("use_env") else {}
    env.update(_env_pairs(config.get("env"), "[tool.rlpatch] env"))
    env.update(_env_pairs(cli.get("env"), "--env"))
    verl_root = pick("verl_root")
    version = _version(cli.get("verl_version"), "--verl-version")
    if version is None and verl_root:
        if not os.path.isdir(verl_root):
            raise InputError(f"--verl-root {verl_root}: not a directory")
        version = read_version(verl_root)
        if version is None:
            raise InputError(f"--verl-root {verl_root}: no verl/version/version file, cannot tell the verl version")
    version = version or _version(config.get("verl_version"), "[tool.rlpatch] verl-version")
    mode = pick("mode")
    if mode is not None and mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    verl_version_given = str(version) if version and cli.get("verl_version") else None
    if verl_version_given and not verl_root:
        # Fetched before any file is read: a failed download is one error about the version, not N files
        # that "could not be linted".
        from rlpatch.upstream.api import unpacked_tree

        unpacked_tree("verl", verl_version_given)
    return LintOptions(verl_version=version or NEWEST_VERL, verl_root=verl_root, mode=mode, env=env, args=list(extra),
                       allow_level=frozenset(split_list(pick("allow_level")) or ()), config_root=pick("config_root"),
                       python=pick("python") or None, sglang_root=pick("sglang_root") or None,
                       vllm_ascend_root=pick("vllm_ascend_root") or None,
                       # told by the caller (gen): no tree needed for them
                       sglang_version=_version(cli.get("sglang_version"), "--sglang-version"),
                       vllm_ascend_version=_version(cli.get("vllm_ascend_version"), "--vllm-ascend-version"),
                       verl_version_given=verl_version_given, verl_default=cli.get("verl_default") or None)
