"""`rlpatch apply | verify | status | revert | diff | rules`: the patch commands.

Exit codes: 0 success (nothing to do and not-applicable rules included, as long as some selected
rule applies on every tree or the release dumps natively); 1 refused (anchor missing or ambiguous,
drift, a version that needs --force, a set that cannot take effect on a tree because no rule of it
applies to its release, verify finding a rule not applied, dirty git files); 2 usage or input error.
"""

from __future__ import annotations

import json
import sys
from dataclasses import fields
from typing import Any, Callable, Sequence, TypeVar

import click

from rlpatch import registry
from rlpatch.cluster.api import ray_options
from rlpatch.errors import EXIT_OK, EXIT_REFUSED, InputError
from rlpatch.output.api import Note, shown, versioned
from rlpatch.patch import api
from rlpatch.patch.engine import RuleReport, set_state
from rlpatch.patch.rule import PatchRule, Target
from rlpatch.upstream.api import ALL_TRAINERS, OPTION_OF, TARGET_OPTIONS, describe_coverage

# ---------------------------------------------------------------------------------------------
# Options shared by every patch command
# ---------------------------------------------------------------------------------------------


def target_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        *(TARGET_OPTIONS[name].click_option() for name in ("verl_root", "sglang_root", "vllm_ascend_root")),
        TARGET_OPTIONS["python"].click_option("this one", use="the one whose imported trees are patched when no root is given"),
        click.option("--mode", type=click.Choice(["consistency", "inference"]), help="Select the rules of one dump mode (default: every rule for the given roots; consistency when no root is given)."),
        click.option("--backend", type=click.Choice(["fsdp", "megatron", "all"]), default="all", show_default=True, help="Training engine whose worker is patched."),
        click.option("--rules", "rule_ids", type=str, help="Comma-separated rule ids (overrides --mode)."),
        click.option("--force", is_flag=True, help="Patch versions that need it (verl 0.6.x)."),
        click.option("--allow-dirty", is_flag=True, help="Patch git-tracked files that have uncommitted changes."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def format_option(command: Callable[..., Any]) -> Callable[..., Any]:
    command = quiet_option(command)
    return click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)(command)


def quiet_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--quiet", "-q", is_flag=True,
                        help="Print no notes on stderr (which tree is used, links followed): refusals, errors and "
                             "the report stay.")(command)


def on_cluster(options: dict[str, Any]) -> int | None:
    """With `--ray ADDRESS`, the command runs on every node of the cluster (the cluster wing does it)."""
    if not options.get("ray"):
        return None
    from rlpatch.cluster.api import run_on_cluster  # imports ray when called: only with --ray

    return run_on_cluster(click.get_current_context())


def say(message: str) -> None:
    click.echo(shown(message), err=True)  # paths inside a tree are its own: one line, no terminal escapes


def teller(options: dict[str, Any]) -> Callable[[str], None]:
    """`say`, or with `--quiet` a `say` that drops the notes (the tree an interpreter gave, a note, a link
    inside a tree followed: each made a `Note`). Refusals, recovery notices, commits and what a revert
    kept stay."""
    if not options.get("quiet"):
        return say

    def say_unless_note(message: str) -> None:
        if not isinstance(message, Note):
            say(message)

    return say_unless_note


# ---------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------


def print_reports(reports: Sequence[RuleReport], targets: Sequence[Target], output_format: str,
                  rules: Sequence[PatchRule] = ()) -> None:
    if output_format == "json":
        click.echo(json.dumps(versioned(api.payload(reports, targets, rules)), indent=2))
        return
    for target in targets:
        click.echo(f"{target.package} {target.version_text} at {target.root} ({target.origin})")
        for report in (r for r in reports if r.target is target):
            files = ", ".join(plan.relative for plan in report.files)
            line = f"  {report.rule.id:<28} {report.state:<15}"
            if target.package == "verl":  # which trainer runs the rule's code
                line += f" {_runs_under(report.rule):<18}"
            click.echo(line + (f" {files}" if files else "") + (f"  [{report.remark}]" if report.remark else ""))
            if report.warning:
                click.echo(f"    warning: {report.warning}")
        state, not_applied = set_state([report for report in reports if report.target is target])
        click.echo(f"  set: {state}" + (f"; not applied: {', '.join(not_applied)}" if not_applied else ""))
        if target.package == "verl" and any(report.target is target for report in reports):
            own = [report for report in reports if report.target is target]
            click.echo(f"  trainers: {describe_coverage(api.coverage(own), target.version)}")


def _runs_under(rule: PatchRule) -> str:
    if rule.trainers == ALL_TRAINERS:
        return "[every trainer]"
    short = {"v0": "RayPPOTrainer", "v1": "v1 PPOTrainer", "fully-async": "FullyAsync"}
    return "[" + ", ".join(short.get(t, t) for t in sorted(rule.trainers, reverse=True)) + "]" if rule.trainers else ""


def print_refusal(report: RuleReport) -> None:
    say(f"rlpatch: refused: {report.rule.id}: {report.message}")


# ---------------------------------------------------------------------------------------------
# Commands: click's options become one frozen options object; the api does the work; print it
# ---------------------------------------------------------------------------------------------

Options = TypeVar("Options", bound=api.TargetOptions)


def options_of(kind: type[Options], options: dict[str, Any], **renamed: str) -> Options:
    """The frozen options object of a command from click's keyword arguments (`renamed`: field=option)."""
    return kind(**{f.name: options[renamed.get(f.name, f.name)] for f in fields(kind)})


def _setup(options: api.TargetOptions, output_format: str, say: Callable[[str], None] = say) -> api.Selection:
    selection = api.select(options, say)
    if output_format != "json":
        for target in selection.targets:
            if target.origin.startswith("imported"):
                say(Note(f"using {target.package} {target.version_text} at {target.root} ({target.origin})"))
    return selection


@click.command("apply")
@target_options
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option("--commit", "make_commit", is_flag=True, help="In a git checkout, commit the patch as one commit.")
@format_option
@ray_options
def apply_cmd(**options: Any) -> int:
    """Apply the selected patch rules, all or nothing."""
    if (code := on_cluster(options)) is not None:
        return code
    wanted, say = options_of(api.ApplyOptions, options, commit="make_commit"), teller(options)
    rules, targets = _setup(wanted, options["output_format"], say)
    result = api.apply(targets, rules, wanted, say)
    for report in result.refusals:
        print_refusal(report)
    for why in result.inert:
        say(f"rlpatch: refused: {why}")
    print_reports(result.reports, targets, options["output_format"])
    if result.refused:
        say("nothing was written")
        return EXIT_REFUSED
    for commit in result.commits:
        say(f"committed {commit.sha[:12]} in {commit.toplevel} (the patch's changes only)")
    if result.error is not None:
        raise result.error
    return EXIT_OK


def _verify(options: dict[str, Any], *, always_zero: bool) -> int:
    if (code := on_cluster(options)) is not None:
        return code
    say = teller(options)
    rules, targets = _setup(options_of(api.TargetOptions, options), options["output_format"], say)
    result = api.verify(targets, rules, say)
    print_reports(result.reports, targets, options["output_format"], rules)
    if options["output_format"] != "json":
        for target in result.not_applicable_targets():
            say(f"not applied: no selected rule applies to {target.package} {target.version_text} at {target.root}")
        for missing in result.unchecked():
            say(Note(f"note: the selected set also has {', '.join(missing['rules'])} for {missing['package']}, and no "
                     f"{missing['package']} tree was checked: give {OPTION_OF[missing['package']]} to check it "
                     "(incomplete set)"))
    return EXIT_OK if always_zero or result.in_place() else EXIT_REFUSED


@click.command("verify")
@target_options
@format_option
@ray_options
def verify_cmd(**options: Any) -> int:
    """Check structurally that every selected rule is applied; exit 1 if one is not."""
    return _verify(options, always_zero=False)


@click.command("status")
@target_options
@format_option
@ray_options
def status_cmd(**options: Any) -> int:
    """Report the state of every selected rule. Exit 0 whatever the states (verify exits 1 on one not
    applied); 2 on bad input (no tree, unknown rule); with --ray, 1 when a node cannot answer."""
    return _verify(options, always_zero=True)


@click.command("revert")
@target_options
@format_option
@ray_options
def revert_cmd(**options: Any) -> int:
    """Take the selected rules out of the trees, restoring files byte for byte."""
    if (code := on_cluster(options)) is not None:
        return code
    say = teller(options)
    rules, targets = _setup(options_of(api.TargetOptions, options), options["output_format"], say)
    result = api.revert(targets, rules, say)
    for report in result.refusals:
        print_refusal(report)
    if result.refusal is not None:
        say(f"rlpatch: refused: {result.refusal}")
    if result.refused:
        say("nothing was written")
        return EXIT_REFUSED
    for note in result.notes:
        say(note)
    print_reports(result.reports, targets, options["output_format"])
    return EXIT_OK


@click.command("diff")
@target_options
@quiet_option
def diff_cmd(**options: Any) -> int:
    """Print the unified diff that apply would write (paths relative to each root); write nothing."""
    from rlpatch.patch.difftext import unified_diff

    say = teller(options)
    rules, targets = _setup(options_of(api.TargetOptions, options), "text", say)
    result = api.diff(targets, rules, say)
    for report in result.refusals:
        print_refusal(report)
    if result.refused:
        return EXIT_REFUSED
    for change in result.changes:
        sys.stdout.write(unified_diff(change.relative, change.before, change.after))
    return EXIT_OK


@click.command("rules")
@click.argument("rule_id", required=False, metavar="[ID]")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_cmd(rule_id: str | None, output_format: str) -> int:
    """List the PATCH rules (what apply/verify/revert change in verl, SGLang, vLLM-Ascend): id, package,
    modes, target files, versions, the trainer that runs them, summary; with ID, that rule only.

    The lint rules (RLxxx) are listed by `rlpatch rule`; `rlpatch rule ID` shows any rule's page.
    """
    known = [rule.id for rule in registry.patch_rules()]
    if rule_id is not None and rule_id not in known:
        if rule_id.upper() in registry.lint_rule_codes():
            raise InputError(f"{rule_id.upper()} is a lint rule: rlpatch rule {rule_id.upper()}")
        raise InputError(f"unknown patch rule: {rule_id} (`rlpatch rules` lists them; lint rules: `rlpatch rule`)")
    rows = [
        {
            "id": rule.id,
            "package": rule.package,
            "modes": sorted(rule.modes),
            "files": list(rule.files),
            "versions": rule.versions,
            "trainer": rule.trainer,
            "trainers": sorted(rule.trainers),
            "summary": rule.summary(),
        }
        for rule in registry.patch_rules()
        if rule_id is None or rule.id == rule_id
    ]
    if output_format == "json":
        click.echo(json.dumps(versioned({"rules": rows}), indent=2))
        return EXIT_OK
    for row in rows:
        click.echo(f"{row['id']}  [{row['package']}; {', '.join(row['modes'])}; {row['versions']}]")
        click.echo(f"    {row['summary']}")
        click.echo(f"    runs under: {row['trainer'] or 'not stated'}")
        for path in row["files"]:
            click.echo(f"    {path}")
    return EXIT_OK
