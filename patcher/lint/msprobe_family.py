"""RL5xx glue: the msprobe config.json files a run references, checked once, shared by RL501-RL507.

A run points at msprobe configs through overrides (verl's `precision_debugger.config_path`, the
vLLM `dump_config_path` / `dump_config`, SGLang's `msprobe_dump_config`) and env vars
(`MSPROBE_ACTOR_CONFIG` for the training side of a consistency run, `MSPROBE_SGLANG_CONFIG*`).
Each file is read relative to the script (or `--config-root`) and checked by
`rlpatch.lint.msprobe_config` with what the run adds: its dump mode, its world size, once per run
(the run's facts); each RL5xx rule module reports its own findings. Findings point inside the JSON
file, with the override or export that referenced it as a related position.
`rlpatch lint config.json` checks a file on its own (as msprobe would: it needs a dump_path).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, NamedTuple, cast

from rlpatch.errors import InputError
from rlpatch.lint.rule import Fact, Finding, LintContext, LintRule, Severity
from rlpatch.shell.api import INFERENCE_DUMP_KEYS, Run, Span

if TYPE_CHECKING:  # imported when a config file is really checked: most scripts reference none
    from rlpatch.lint.msprobe_schema import ConfigFinding, Options

TRAINING_CONFIG_KEY = "global_profiler.global_tool_config.precision_debugger.config_path"
ACTOR_ENV = "MSPROBE_ACTOR_CONFIG"
SGLANG_ENV_PREFIX = "MSPROBE_SGLANG_CONFIG"
CONFIG_FINDINGS: Fact[list[ConfigProblem]] = Fact("msprobe config findings")  # a run's (LintContext.facts)


class Reference(NamedTuple):
    """One place where the run names a config file."""

    role: str  # training | inference | actor
    what: str  # the key or env var
    text: str  # the path as written
    span: Span


def references(run: Run) -> list[Reference]:
    """Every msprobe config path the run names with a known value."""
    found = []
    for key, role in [(TRAINING_CONFIG_KEY, "training")] + [(key, "inference") for key in INFERENCE_DUMP_KEYS]:
        setting = run.setting(key)
        if setting.is_set and setting.known and not setting.is_null() and setting.value:
            found.append(Reference(role, key, setting.value.strip(), setting.span))
    for name, var in sorted(run.env.items()):
        if var.text and (name == ACTOR_ENV or name.startswith(SGLANG_ENV_PREFIX)):
            found.append(Reference("actor" if name == ACTOR_ENV else "inference", name, var.text.strip(), var.span))
    return found


def options_for(reference: Reference, run: Run) -> Options:
    """What the run adds to the file: verl passes dump_path itself for its training tool; RL105
    already reports a missing dump_path on the inference side; RL507 applies in consistency runs."""
    from rlpatch.lint.msprobe_schema import Options

    mode = run.mode
    file_mode: str | None
    if reference.role == "training":
        file_mode = "training"
    elif mode == "consistency":
        file_mode = "consistency"
    else:
        file_mode = "inference" if reference.role == "inference" else None
    return Options(mode=file_mode, world_size=run.world_size(), backend=run.train_backend_why()[0])


class ConfigProblem(NamedTuple):
    """One finding inside a config file the run references, with the reference as related position."""

    code: str
    severity: Severity
    message: str
    at: Span
    related: tuple[Span, ...]


def run_findings(ctx: LintContext) -> list[ConfigProblem]:
    """Every RL5xx finding of the configs this run references (each file read and checked once per
    run, shared by RL501-RL507); files not on this machine are skipped (RL501 reports them)."""
    return ctx.facts.get_or_compute(CONFIG_FINDINGS, lambda: _check_referenced_files(ctx))


def _check_referenced_files(ctx: LintContext) -> list[ConfigProblem]:
    results: list[ConfigProblem] = []
    for reference in references(ctx.run):
        path = ctx.resolve_path(reference.text)
        if os.path.isfile(path):  # a path that exists only on the cluster is not this linter's to judge
            from rlpatch.lint.msprobe_config import check_file

            results.extend(ConfigProblem(finding.code, _severity(finding), finding.message, _span(finding), (reference.span,))
                           for finding in check_file(path, options_for(reference, ctx.run)))
    return results


def _severity(finding: ConfigFinding) -> Severity:
    return cast(Severity, finding.severity)  # msprobe_config writes only "error", "warning" and "info"


def _span(finding: ConfigFinding) -> Span:
    return Span(finding.file, finding.line, finding.column, finding.end_line, finding.end_column)


def lint_config_file(path: str, rules: Iterable[LintRule]) -> list[Finding]:
    """`rlpatch lint config.json`: the file alone, as msprobe reads it (the selected RL5xx rules).
    A file that is not a regular file or is over the config size limit is an InputError."""
    from rlpatch.lint.msprobe_config import check_bytes, read_config
    from rlpatch.lint.msprobe_schema import Options

    codes = {rule.code for rule in rules}
    try:
        found = check_bytes(read_config(path), path, Options())
    except InputError as err:  # the parser's own errors do not know the file
        raise InputError(err.message if err.message.startswith(f"{path}:") else f"{path}: {err.message}") from None
    return sorted(
        (Finding(f.code, _severity(f), f.message, _span(f)) for f in found if f.code in codes),
        key=Finding.sort_key,
    )


def is_config_path(path: str) -> bool:
    """Files `rlpatch lint` reads as msprobe configs instead of scripts."""
    return path != "-" and path.endswith(".json")
