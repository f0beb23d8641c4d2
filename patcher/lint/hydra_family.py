"""RL3xx glue: one Hydra/schema verdict per run, shared by the RL301-RL306 rule modules.

`rlpatch.lint.hydra_schema` decides; this module turns a `Run` into its override records, picks the
verl config from the lint options, remembers the answer on the run (six rules, one compose), and
maps each problem's offsets inside an override back to the script (through variables, arrays and
continuations, via `Arg.sub_span`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rlpatch.lint.rule import LintContext, LintOptions
from rlpatch.lint.versions_family import _cache
from rlpatch.shell.api import Override

if TYPE_CHECKING:  # imported when a run is checked: a lint that never gets there does not pay for it
    from rlpatch.lint.hydra_schema import OverrideRecord, SchemaResult

_ATTRIBUTE = "_rlpatch_schema_result"


def schema_result(ctx: LintContext) -> SchemaResult:
    """The RL3xx verdict for `ctx.run`, computed once per run."""
    run = ctx.run
    cached = getattr(run, _ATTRIBUTE, None)
    if cached is None:
        cached = _compute(ctx)
        setattr(run, _ATTRIBUTE, cached)
    return cached


def _compute(ctx: LintContext) -> SchemaResult:
    from rlpatch.lint.hydra_schema import lint_overrides

    run = ctx.run
    records = [_record(o) for o in run.overrides]
    options = ctx.options
    return lint_overrides(
        records,
        verl_root=options.verl_root,
        python=options.extra.get("python"),
        verl_version=options.extra.get("verl_version_given"),
        config_path=run.config_dir,
        config_name=run.config_name,
        base_dir=options.config_root or os.path.dirname(run.file) or ".",
    )


def _target_named(options: LintOptions) -> bool:
    """The "skipped" note is for a user who named a verl (or whose verl is found) and still gets no
    schema check (no hydra-core, no config dir). Without any verl and without a target option the
    family stays silent, like RL5xx/RL6xx: a pre-commit hook on a laptop without verl would
    otherwise print the same note for every script."""
    if options.verl_root or options.extra.get("python") or options.extra.get("verl_version_given"):
        return True
    # Asked by six rules for every run: find_spec walks sys.path each time, so ask once per lint
    # invocation (the versions family's per-options cache).
    cache = _cache(options)
    if ("verl found here",) not in cache:
        from rlpatch.upstream.envprobe import probe_here

        cache[("verl found here",)] = probe_here(("verl",))["verl"].found
    return cache[("verl found here",)]


# A value the script computes at run time (`trainer.nnodes=$SLURM_NNODES`) is unknown, but its key is
# not: the key is still checked (RL302/RL304) with a placeholder value standing in for the real one.
_PLACEHOLDER = "0"
_KEY_ONLY_CODES = ("RL302", "RL304")


def _record(override: Override) -> OverrideRecord:
    from rlpatch.lint.hydra_schema import OverrideRecord

    if override.value_known:
        return OverrideRecord(override.text, override.prefix, override.key, override.value)
    text = f"{override.prefix}{override.key}" + ("" if override.prefix == "~" else f"={_PLACEHOLDER}")
    return OverrideRecord(text, override.prefix, override.key, None if override.prefix == "~" else _PLACEHOLDER)


def _decidable(override: Override, code: str) -> bool:
    """Grammar, `+` and value rules need the real value; key existence does not."""
    return override.value_known or code in _KEY_ONLY_CODES


def report(ctx: LintContext, code: str) -> None:
    """Report this rule's problems; the one-line "skipped" note when the family cannot run."""
    if not _target_named(ctx.options):
        # No verl named and none installed here: the verdict could only be "skipped" (no verl tree
        # found), which stays silent; do not even import the schema module to learn it.
        return
    result = schema_result(ctx)
    if result.skipped:
        ctx.report(result.skipped, at=ctx.run.entry_span, severity="info", code="RL002")
    overrides = ctx.run.overrides
    for problem in result.problems:
        if problem.code != code:
            continue
        if problem.index is None:
            ctx.report(problem.message, at=ctx.run.entry_span)
            continue
        override = overrides[problem.index]
        if not _decidable(override, code):
            continue
        message = problem.message
        if not override.value_known:  # say "key=..." rather than show the placeholder
            message = message.replace(_record(override).text, f"{override.prefix}{override.key}=...")
        at = override.arg.sub_span(problem.start, max(problem.end, problem.start + 1))
        ctx.report(message, at=at, related=override.related())
