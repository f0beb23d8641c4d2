"""The linter's small, stable facade for the wings that check what they write (`rlpatch gen`).

Other wings import this module, never the linter's others (`rlpatch gen` does, at import time: it
stays light, no rule, no libcst). It hides the engine, the options object and the Hydra machinery
(`hydra_schema`) behind these calls:

- `ExtraArgsCommand`: the click command class that keeps `-- extra overrides` aside, as `lint` does;
- `make_options(...)`: the same versions, env and extra args as `rlpatch lint` would use;
- `lint_file(path, options)`: the findings of every rule on one script (InputError when unreadable);
- `schema_of(options, config_name, group_overrides)`: the composed verl config of that version,
  asked key by key (`KeySchema.has`), or None with the reason when it cannot be composed;
- `run_lint(LintCommand)`: what `rlpatch lint` does with that command line, without printing
  (`LintOutcome`; `ScriptOptions` say how the scripts run), and `findings_json(outcome)`, its
  findings as `--format json` has them (`rlpatch doctor` lints the script it checks this way).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from rlpatch.errors import InputError
from rlpatch.lint.commands import LintCommand, LintOutcome, run_lint
from rlpatch.lint.extra_args import ExtraArgsCommand
from rlpatch.lint.options import ScriptOptions, build_options
from rlpatch.lint.rule import Finding, LintOptions
from rlpatch.upstream.api import Version

__all__ = [
    "ExtraArgsCommand", "Finding", "KeySchema", "LintCommand", "LintOptions", "LintOutcome", "ScriptOptions",
    "findings_json", "lint_file", "make_options", "run_lint", "schema_of", "verl_version_of",
]


def make_options(*, verl_version: str | None = None, verl_root: str | None = None, python: str | None = None,
                 env: dict[str, str] | None = None, mode: str | None = None, args: Sequence[str] = (),
                 sglang_root: str | None = None, vllm_ascend_root: str | None = None,
                 sglang_version: str | None = None, vllm_ascend_version: str | None = None) -> LintOptions:
    """Options exactly as `rlpatch lint` builds them from its command line (no [tool.rlpatch]).

    `sglang_version` / `vllm_ascend_version` are the versions a caller was told (gen's
    --sglang-version / --vllm-ascend-version): the version rules use them before any tree's."""
    cli: dict[str, Any] = dict(verl_version=verl_version, verl_root=verl_root, python=python, mode=mode,
                               env=dict(env or {}), sglang_root=sglang_root, vllm_ascend_root=vllm_ascend_root,
                               sglang_version=sglang_version, vllm_ascend_version=vllm_ascend_version)
    return build_options(cli, {}, list(args))


def findings_json(outcome: LintOutcome) -> list[dict[str, Any]]:
    """The findings of a lint, as `rlpatch lint --format json` prints them (with each rule page's `url`)."""
    from rlpatch.lint.report import finding_dict

    return [finding_dict(finding) for result in outcome.results for finding in result.findings]


def verl_version_of(options: LintOptions) -> Version:
    """The verl version the rules assume for these options (the newest release unless told)."""
    return options.verl_version


def lint_file(path: str, options: LintOptions) -> list[Finding]:
    """Every rule's findings on `path`, sorted; InputError when the file cannot be read as a script."""
    from rlpatch.lint.engine import lint_path, select_rules

    result = lint_path(path, options, select_rules(None, None))
    if result.error:
        raise InputError(result.error)
    return list(result.findings)


@dataclass(frozen=True)
class KeySchema:
    """One composed verl config (a version, a config name, group overrides such as model_engine)."""

    tree: dict[str, Any]
    version: Version | None
    origin: str

    def has(self, key: str) -> bool:
        """Whether `key` exists in the composed config (a plain override of it composes)."""
        from rlpatch.lint.schema_compose import contains

        return contains(self.tree, key)


def _config_source(options: LintOptions, config_name: str | None, config_path: str | None, base_dir: str | None,
                   entry: str | None):
    from rlpatch.lint.hydra_schema import DEFAULT_ENTRY, locate_config

    return locate_config(verl_root=options.verl_root, python=options.python,
                         verl_version=options.verl_version_given, config_path=config_path,
                         config_name=config_name, base_dir=base_dir, entry=entry or DEFAULT_ENTRY)


def schema_of(options: LintOptions, config_name: str | None = None, group_overrides: Sequence[str] = (),
              config_path: str | None = None, base_dir: str | None = None,
              entry: str | None = None) -> tuple[KeySchema | None, str]:
    """The composed config that `python -m ENTRY` (verl.trainer.main_ppo unless told) composes for
    these options, or (None, why) when hydra-core or verl is missing, the config is not in the
    tree or does not compose. A released version (`--verl-version`) is downloaded once and cached."""
    from rlpatch.lint.hydra_schema import SchemaUnavailable, hydra_available, load_schema

    if not hydra_available():
        return None, "hydra-core is not installed"
    try:
        source = _config_source(options, config_name, config_path, base_dir, entry)
        schema = load_schema(source, list(group_overrides))
    except (SchemaUnavailable, InputError) as why:  # InputError: a released wheel could not be downloaded
        return None, getattr(why, "message", None) or str(why)
    return KeySchema(schema.tree, source.verl_version, source.origin), source.origin
