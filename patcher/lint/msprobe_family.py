"""RL5xx glue: the msprobe config.json files a run references, checked once, shared by RL501-RL507.

A run points at msprobe configs through overrides (verl's `precision_debugger.config_path`, the
vLLM `dump_config_path` / `dump_config`, SGLang's `msprobe_dump_config`) and env vars
(`MSPROBE_ACTOR_CONFIG` for the training side of a consistency run, `MSPROBE_SGLANG_CONFIG*`).
Each file is read relative to the script (or `--config-root`) and checked by
`rlpatch.lint.msprobe_config` with what the run adds: its dump mode, its world size. Findings point
inside the JSON file, with the override or export that referenced it as a related position.
`rlpatch lint config.json` checks a file on its own (as msprobe would: it needs a dump_path).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, NamedTuple

from rlpatch.lint.rule import Finding, LintContext, LintRule
from rlpatch.shell.api import INFERENCE_DUMP_KEYS, Run, Span

if TYPE_CHECKING:  # imported when a config file is really checked: most scripts reference none
    from rlpatch.lint.msprobe_schema import ConfigFinding, Options

TRAINING_CONFIG_KEY = "global_profiler.global_tool_config.precision_debugger.config_path"
ACTOR_ENV = "MSPROBE_ACTOR_CONFIG"
SGLANG_ENV_PREFIX = "MSPROBE_SGLANG_CONFIG"
_ATTRIBUTE = "_rlpatch_msprobe_findings"


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


def run_findings(ctx: LintContext) -> list[tuple[ConfigFinding, Reference]]:
    """All RL5xx findings of this run (computed once); files not on this machine are skipped."""
    cached = getattr(ctx.run, _ATTRIBUTE, None)
    if cached is not None:
        return cached
    results: list[tuple[ConfigFinding, Reference]] = []
    for reference in references(ctx.run):
        path = ctx.resolve_path(reference.text)
        if os.path.isfile(path):  # a path that exists only on the cluster is not this linter's to judge
            from rlpatch.lint.msprobe_config import check_file

            results.extend((finding, reference) for finding in check_file(path, options_for(reference, ctx.run)))
    setattr(ctx.run, _ATTRIBUTE, results)
    return results


def report_missing(ctx: LintContext) -> None:
    """A referenced config that is not on this machine (RL501). An error when it cannot be anywhere
    else: an absolute path inside the script's own folder (script and configs travel together).
    A warning otherwise, with the path the linter tried: a relative path resolves against each
    Ray worker's working directory at run time, and an absolute one may exist only on the cluster."""
    base = os.path.abspath(ctx.options.config_root or os.path.dirname(ctx.run.file) or ".")
    for reference in references(ctx.run):
        path = ctx.resolve_path(reference.text)
        if os.path.isfile(path):
            continue
        what = f"{reference.what}={reference.text}"
        if os.path.exists(path):
            ctx.report(f"{what}: {path} is not a file", at=reference.span)
        elif not os.path.isabs(reference.text):
            ctx.report(f"{what}: no such file (looked for {path}); a relative path resolves against each Ray "
                       "worker's working directory at run time: prefer an absolute path", at=reference.span,
                       severity="warning")
        elif os.path.commonpath([base, os.path.abspath(path)]) == base:
            ctx.report(f"{what}: no such file ({path}, in the script's own folder)", at=reference.span)
        else:
            ctx.report(f"{what}: not on this machine ({path}); make sure it exists on every node of the cluster",
                       at=reference.span, severity="warning")


def report(ctx: LintContext, code: str) -> None:
    for finding, reference in run_findings(ctx):
        if finding.code == code:
            ctx.report(finding.message, at=_span(finding), severity=finding.severity,  # type: ignore[arg-type]  # ConfigFinding.severity is a str holding a Severity
                       related=[reference.span])


def _span(finding: ConfigFinding) -> Span:
    return Span(finding.file, finding.line, finding.column, finding.end_line, finding.end_column)


def lint_config_file(path: str, rules: Iterable[LintRule]) -> list[Finding]:
    """`rlpatch lint config.json`: the file alone, as msprobe reads it (the selected RL5xx rules).
    A file that is not a regular file or is over the config size limit is an InputError."""
    from rlpatch.lint.msprobe_config import check_bytes, read_config
    from rlpatch.lint.msprobe_schema import Options

    codes = {rule.code for rule in rules}
    found = check_bytes(read_config(path), path, Options())
    return sorted(
        (Finding(f.code, f.severity, f.message, _span(f)) for f in found if f.code in codes),  # type: ignore[arg-type]  # ConfigFinding.severity is a str holding a Severity
        key=Finding.sort_key,
    )


def is_config_path(path: str) -> bool:
    """Files `rlpatch lint` reads as msprobe configs instead of scripts."""
    return path != "-" and path.endswith(".json")
