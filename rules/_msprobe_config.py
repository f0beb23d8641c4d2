"""The msprobe-config family (RL501-RL507): its base class, and the configs a run references, checked once.

The knowledge is the msprobe config wing's (`rlpatch.msprobe_config.api`): it reads each file, checks
it as mindstudio-probe 26.2 would and answers in findings of a `Problem` kind, never in codes. Each
rule of this family is a `MsprobeConfigRule` that names the kinds it owns (`problems`) next to its
code, so each code is stated once, in its rule. A run's referenced files are read relative to the
script (or `--config-root`) and checked with what the run adds (its dump mode, its world size, its
training backend) once per run (the run's facts), whichever rule asks first; each finding points
inside the JSON file, with the override or export that referenced it as a related position. A config
given on its own (`rlpatch lint config.json`, as msprobe reads it: it needs a dump_path) is checked by
the linter once, and each selected rule keeps its own kinds (`config_file_findings`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, ClassVar

from rlpatch.lint.rule import Fact, Finding, LintContext, LintRule
from rlpatch.msprobe_config import api as msprobe_config
from rlpatch.msprobe_config.api import Problem, Reference
from rlpatch.shell.api import Run, Span

if TYPE_CHECKING:  # loaded when a config file is really checked: most scripts reference none
    from rlpatch.msprobe_config.api import CheckOptions, ConfigFinding

CONFIG_FINDINGS: Fact[list[tuple[ConfigFinding, Span]]] = Fact("msprobe config findings")  # a run's (LintContext.facts)


class MsprobeConfigRule(LintRule):
    """A rule that reports the findings of the kinds it owns, in every msprobe config the run references
    and in a config given on its own."""

    problems: ClassVar[frozenset[Problem]] = frozenset()

    def check(self, ctx: LintContext) -> None:
        for finding, reference in run_findings(ctx):
            if finding.problem in self.problems:
                ctx.report(finding.message, at=_span(finding), severity=finding.severity, related=(reference,))

    def config_file_findings(self, found: list[ConfigFinding]) -> list[Finding]:
        """This rule's findings in a config file linted on its own (`found`: the wing's, for the file)."""
        return [Finding(self.code, f.severity, f.message, _span(f)) for f in found if f.problem in self.problems]


def run_findings(ctx: LintContext) -> list[tuple[ConfigFinding, Span]]:
    """Every finding in the configs this run references, each with the span of its reference (each file
    read and checked once per run); files not on this machine are skipped (RL501 reports them)."""
    return ctx.facts.get_or_compute(CONFIG_FINDINGS, lambda: _check_referenced_files(ctx))


def _check_referenced_files(ctx: LintContext) -> list[tuple[ConfigFinding, Span]]:
    results: list[tuple[ConfigFinding, Span]] = []
    for reference in msprobe_config.references(ctx.run):
        path = ctx.resolve_path(reference.text)
        if os.path.isfile(path):  # a path that exists only on the cluster is not this linter's to judge
            results.extend((finding, reference.span)
                           for finding in msprobe_config.check_file(path, options_for(reference, ctx.run)))
    return results


def options_for(reference: Reference, run: Run) -> CheckOptions:
    """What the run adds to the file: verl passes dump_path itself for its training tool; RL105
    already reports a missing dump_path on the inference side; RL507 applies in consistency runs."""
    mode = run.mode
    file_mode: str | None
    if reference.role == "training":
        file_mode = "training"
    elif mode == "consistency":
        file_mode = "consistency"
    else:
        file_mode = "inference" if reference.role == "inference" else None
    return msprobe_config.CheckOptions(mode=file_mode, world_size=run.world_size(),
                                       backend=run.train_backend_why()[0])


def _span(finding: ConfigFinding) -> Span:
    return Span(finding.file, finding.line, finding.column, finding.end_line, finding.end_column)
