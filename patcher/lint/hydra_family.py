"""RL3xx facts: one Hydra/schema verdict per run, shared by the RL301-RL306 rule modules.

`rlpatch.lint.hydra_schema` decides; this module turns a `Run` into its override records, picks the
verl tree (the one the lint options name, else `verl_default`'s: the verl that will run), keeps the
verdict in the run's facts (six rules, one compose), and maps each problem's offsets inside an override back to the script (through variables, arrays
and continuations, via `Arg.sub_span`). Each rule module reports its own problems from the verdict.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

from rlpatch.lint.rule import Fact, LintContext, LintOptions, per_invocation
from rlpatch.shell.api import Override, Span

if TYPE_CHECKING:  # imported when a run is checked: a lint that never gets there does not pay for it
    from rlpatch.lint.hydra_schema import OverrideRecord, SchemaResult

SCHEMA_VERDICT: Fact[SchemaResult] = Fact("hydra schema verdict")  # a run's (LintContext.facts)
OVERRIDE_LIST_VERDICT: Fact[SchemaResult] = Fact("hydra verdict of an override list")  # per lint invocation
DEFAULT_ROOT: Fact[str | None] = Fact("default verl root")  # a run's, when no verl is named


class ScriptProblem(NamedTuple):
    """One problem of the verdict, placed in the script (inside the override that caused it)."""

    message: str
    at: Span
    related: tuple[Span, ...]
    override: Override | None = None  # the override that caused it (None: a problem of the launch)


def schema_verdict(ctx: LintContext) -> SchemaResult | None:
    """The Hydra verdict on `ctx.run`, composed once per run and shared by RL301-RL306, against the
    verl the user named, else the verl that will run (`verl_default`); None when there is none to
    check against: the family stays silent for the run (the invocation's one note says why)."""
    options = ctx.options
    if _target_named(options):
        return ctx.facts.get_or_compute(SCHEMA_VERDICT, lambda: _compute(ctx, options.verl_root))
    from rlpatch.lint.verl_default import default_verl

    root = ctx.facts.get_or_compute(DEFAULT_ROOT, lambda: default_verl(options, ctx.run).root)
    if root is None:
        return None
    return ctx.facts.get_or_compute(SCHEMA_VERDICT, lambda: _compute(ctx, root))


def _compute(ctx: LintContext, verl_root: str | None) -> SchemaResult:
    from rlpatch.lint.hydra_schema import OverrideRecord, SchemaResult, lint_overrides

    run = ctx.run
    if run.entry_check().exists is False:  # RL004 says so; composing a config for it would only repeat it
        return SchemaResult()
    records = tuple(_record(o, OverrideRecord) for o in run.overrides)
    options = ctx.options
    python, verl_version = options.python, options.verl_version_given
    base_dir = os.path.dirname(os.path.abspath(run.file))  # stdin ("-"): the working folder
    config_path, config_name, entry = run.config_dir, run.config_name, run.launch.entry

    def compose() -> SchemaResult:
        return lint_overrides(records, verl_root=verl_root, python=python, verl_version=verl_version,
                              config_path=config_path, config_name=config_name, base_dir=base_dir, entry=entry)

    # A script's paths often launch the same override list (its `if`/`case` branches differ in what
    # they export, not in what they pass): equal lists composed against the same config get the same
    # answer from Hydra, so they share one verdict in a lint invocation (verl's
    # run_qwen3_235b_a22b_megatron.sh has 8 paths and 4 override lists).
    return per_invocation(OVERRIDE_LIST_VERDICT, compose,
                          (records, verl_root, python, verl_version, config_path, config_name, base_dir, entry))


def _target_named(options: LintOptions) -> bool:
    """A verl the user named: its problems (no hydra-core, no config dir) are the run's RL002 note."""
    return bool(options.verl_root or options.python or options.verl_version_given)


# A value the script computes at run time (`trainer.nnodes=$SLURM_NNODES`) is unknown, but its key is
# not: the key is still checked (by the rules that judge keys alone) with a placeholder value standing
# in for the real one.
_PLACEHOLDER = "0"


def _record(override: Override, record: type[OverrideRecord]) -> OverrideRecord:
    """The override as Hydra is given it (`record` is `OverrideRecord`, imported once by the caller)."""
    if override.value_known:
        return record(override.text, override.prefix, override.key, override.value)
    return record(_checked_text(override), override.prefix, override.key, None if override.prefix == "~" else _PLACEHOLDER)


def _checked_text(override: Override) -> str:
    """The text checked for an override whose value the script computes at run time."""
    return f"{override.prefix}{override.key}" + ("" if override.prefix == "~" else f"={_PLACEHOLDER}")


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
            message = message.replace(_checked_text(override), f"{override.prefix}{override.key}=...")
        at = override.arg.sub_span(problem.start, max(problem.end, problem.start + 1))
        placed.append(ScriptProblem(message, at, tuple(override.related()), override))
    return placed
