"""RL3xx facts: one Hydra/schema verdict per run, shared by the RL301-RL306 rule modules.

`rlpatch.lint.hydra_schema` decides; this module turns a `Run` into its override records, picks the
verl config from the lint options, keeps the verdict in the run's facts (six rules, one compose),
and maps each problem's offsets inside an override back to the script (through variables, arrays
and continuations, via `Arg.sub_span`). Each rule module reports its own problems from the verdict.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

from rlpatch.lint.rule import Fact, LintContext, LintOptions
from rlpatch.shell.api import Override, Span

if TYPE_CHECKING:  # imported when a run is checked: a lint that never gets there does not pay for it
    from rlpatch.lint.hydra_schema import OverrideRecord, SchemaResult

SCHEMA_VERDICT: Fact[SchemaResult] = Fact("hydra schema verdict")  # a run's (LintContext.facts)
VERL_FOUND_HERE: Fact[bool] = Fact("verl found here")  # the lint invocation's (target_facts)


class ScriptProblem(NamedTuple):
    """One problem of the verdict, placed in the script (inside the override that caused it)."""

    message: str
    at: Span
    related: tuple[Span, ...]


def schema_verdict(ctx: LintContext) -> SchemaResult | None:
    """The Hydra verdict on `ctx.run`, composed once per run and shared by RL301-RL306; None when
    no verl is named or installed here: the family stays silent, without even importing the schema
    module (the verdict could only be "skipped: no verl tree found")."""
    if not _target_named(ctx.options):
        return None
    return ctx.facts.get_or_compute(SCHEMA_VERDICT, lambda: _compute(ctx))


def _compute(ctx: LintContext) -> SchemaResult:
    from rlpatch.lint.hydra_schema import SchemaResult, lint_overrides

    run = ctx.run
    if run.entry_check().exists is False:  # RL004 says so; composing a config for it would only repeat it
        return SchemaResult()
    records = [_record(o) for o in run.overrides]
    options = ctx.options
    return lint_overrides(
        records,
        verl_root=options.verl_root,
        python=options.extra.get("python"),
        verl_version=options.extra.get("verl_version_given"),
        config_path=run.config_dir,
        config_name=run.config_name,
        base_dir=os.path.dirname(os.path.abspath(run.file)),  # stdin ("-"): the working folder
        entry=run.launch.entry,
    )


def _target_named(options: LintOptions) -> bool:
    """The "skipped" note is for a user who named a verl (or whose verl is found) and still gets no
    schema check (no hydra-core, no config dir). Without any verl and without a target option the
    family stays silent, like RL5xx/RL6xx: a pre-commit hook on a laptop without verl would
    otherwise print the same note for every script."""
    if options.verl_root or options.extra.get("python") or options.extra.get("verl_version_given"):
        return True
    # Asked by six rules for every run: find_spec walks sys.path each time, so ask once per lint invocation.
    return options.target_facts.get_or_compute(VERL_FOUND_HERE, _verl_found_here)


def _verl_found_here() -> bool:
    from rlpatch.upstream.api import probe_here

    return probe_here(("verl",))["verl"].found


# A value the script computes at run time (`trainer.nnodes=$SLURM_NNODES`) is unknown, but its key is
# not: the key is still checked (by the rules that judge keys alone) with a placeholder value standing
# in for the real one.
_PLACEHOLDER = "0"


def _record(override: Override) -> OverrideRecord:
    from rlpatch.lint.hydra_schema import OverrideRecord

    if override.value_known:
        return OverrideRecord(override.text, override.prefix, override.key, override.value)
    text = f"{override.prefix}{override.key}" + ("" if override.prefix == "~" else f"={_PLACEHOLDER}")
    return OverrideRecord(text, override.prefix, override.key, None if override.prefix == "~" else _PLACEHOLDER)


def note_unchecked(ctx: LintContext, verdict: SchemaResult) -> None:
    """The one-line note (as RL002, from the rule that asks) when the schema could not be checked."""
    if verdict.skipped:
        ctx.report(verdict.skipped, at=ctx.run.entry_span, severity="info", code="RL002")


def problems_in_script(ctx: LintContext, verdict: SchemaResult, code: str, *, value_needed: bool) -> list[ScriptProblem]:
    """The verdict's problems of `code`, placed in the script: offsets inside an override mapped back
    through variables, arrays and continuations (`Arg.sub_span`); a problem of no override at the
    launch. An override whose value the script computes at run time was checked with a placeholder:
    its problems count only for a rule that judges the key alone (`value_needed=False`), and say
    `key=...` rather than show the placeholder."""
    placed: list[ScriptProblem] = []
    overrides = ctx.run.overrides
    for problem in verdict.problems:
        if problem.code != code:
            continue
        if problem.index is None:
            placed.append(ScriptProblem(problem.message, ctx.run.entry_span, ()))
            continue
        override = overrides[problem.index]
        if value_needed and not override.value_known:
            continue
        message = problem.message
        if not override.value_known:
            message = message.replace(_record(override).text, f"{override.prefix}{override.key}=...")
        at = override.arg.sub_span(problem.start, max(problem.end, problem.start + 1))
        placed.append(ScriptProblem(message, at, tuple(override.related())))
    return placed
