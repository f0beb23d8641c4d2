"""`rlpatch apply | verify | status | revert | diff | rules`: the patch commands.

Exit codes: 0 success (nothing to do and not-applicable rules included); 1 refused (anchor
missing or ambiguous, drift, a version that needs --force, verify finding a rule not applied,
dirty git files); 2 usage or input error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import click

from rlpatch import registry
from rlpatch.cluster.api import ray_options
from rlpatch.errors import EXIT_OK, EXIT_REFUSED, InputError, RefusedError
from rlpatch.patch import api, transaction
from rlpatch.patch.engine import Change, RuleReport, Session, set_state
from rlpatch.patch.rule import PatchRule, Target
from rlpatch.upstream import trainers as verl_trainers
from rlpatch.upstream.targets import OPTION_OF, Package, imported_target, target_for_root

# ---------------------------------------------------------------------------------------------
# Options shared by every patch command
# ---------------------------------------------------------------------------------------------


def target_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--verl-root", type=str, help="Tree holding verl/ (a git checkout or site-packages)."),
        click.option("--sglang-root", type=str, help="Tree holding sglang/."),
        click.option("--vllm-ascend-root", type=str, help="Tree holding vllm_ascend/."),
        click.option("--python", "python", type=str, help="Interpreter whose imported trees are patched when no root is given (default: this one)."),
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
    return click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)(command)


def select_rules(mode: str | None, backend: str, rule_ids: str | None, packages_given: set[str]) -> list[PatchRule]:
    rules = registry.patch_rules()
    if rule_ids:
        wanted = [part.strip() for part in rule_ids.split(",") if part.strip()]
        known = {rule.id: rule for rule in rules}
        unknown = [rule_id for rule_id in wanted if rule_id not in known]
        if unknown:
            raise InputError(f"--rules: unknown rule {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return [known[rule_id] for rule_id in wanted]
    if mode is None and not packages_given:
        mode = "consistency"
    selected = [rule for rule in rules if mode is None or mode in rule.modes]
    if mode is None:  # every rule for the given roots: the other packages' rules are not part of the question
        selected = [rule for rule in selected if rule.package in packages_given]
    if backend != "all":
        selected = [rule for rule in selected if rule.backend in (None, backend)]
    return selected


def resolve_targets(options: dict[str, Any], rules: Sequence[PatchRule], quiet: bool = False) -> list[Target]:
    given: dict[Package, str | None] = {
        "verl": options.get("verl_root"),
        "sglang": options.get("sglang_root"),
        "vllm_ascend": options.get("vllm_ascend_root"),
    }
    every: tuple[Package, ...] = ("verl", "sglang", "vllm_ascend")
    packages = [package for package in every if any(rule.package == package for rule in rules)]
    if any(given.values()):
        targets = [target_for_root(package, path) for package, path in given.items() if path]
        for target in targets:
            if target.package not in packages and not quiet:
                say(f"note: no selected rule patches {target.package}; {OPTION_OF[target.package]} ignored")
        return [target for target in targets if target.package in packages]
    targets = []
    for package in packages:
        found = imported_target(package, options.get("python"))
        if found is not None:
            targets.append(found)
    if not targets:
        wanted = ", ".join(packages) or "any package"
        raise InputError(f"no tree of {wanted} found for {options.get('python') or sys.executable}; pass --verl-root (or --sglang-root / --vllm-ascend-root)")
    return targets


def on_cluster(options: dict[str, Any]) -> int | None:
    """With `--ray ADDRESS`, the command runs on every node of the cluster (the cluster wing does it)."""
    if not options.get("ray"):
        return None
    from rlpatch.cluster.api import run_on_cluster  # imports ray when called: only with --ray

    return run_on_cluster(click.get_current_context())


def say(message: str) -> None:
    click.echo(message, err=True)


# ---------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------


def print_reports(reports: Sequence[RuleReport], targets: Sequence[Target], output_format: str,
                  rules: Sequence[PatchRule] = ()) -> None:
    if output_format == "json":
        click.echo(json.dumps(api.payload(reports, targets, rules), indent=2))
        return
    for target in targets:
        click.echo(f"{target.package} {target.version_text} at {target.root} ({target.origin})")
        for report in (r for r in reports if r.target is target):
            files = ", ".join(plan.relative for plan in report.files)
            line = f"  {report.rule.id:<28} {report.state:<15}"
            if target.package == "verl":  # which trainer runs the rule's code
                line += f" {_runs_under(report.rule):<18}"
            extra = report.message if report.message not in ("", "applied", "not applied", report.state) else ""
            click.echo(line + (f" {files}" if files else "") + (f"  [{extra}]" if extra else ""))
            if report.warning:
                click.echo(f"    warning: {report.warning}")
        state, not_applied = set_state([report for report in reports if report.target is target])
        click.echo(f"  set: {state}" + (f"; not applied: {', '.join(not_applied)}" if not_applied else ""))
        if target.package == "verl" and any(report.target is target for report in reports):
            own = [report for report in reports if report.target is target]
            click.echo(f"  trainers: {verl_trainers.describe(api.coverage(own), target.version)}")


def _runs_under(rule: PatchRule) -> str:
    if rule.trainers == verl_trainers.ALL_TRAINERS:
        return "[every trainer]"
    short = {"v0": "RayPPOTrainer", "v1": "v1 PPOTrainer", "fully-async": "FullyAsync"}
    return "[" + ", ".join(short.get(t, t) for t in sorted(rule.trainers, reverse=True)) + "]" if rule.trainers else ""


def print_refusal(report: RuleReport) -> None:
    say(f"rlpatch: refused: {report.rule.id}: {report.message}")


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------


def _setup(options: dict[str, Any]) -> tuple[list[PatchRule], list[Target]]:
    given = {package for package, key in (("verl", "verl_root"), ("sglang", "sglang_root"), ("vllm_ascend", "vllm_ascend_root")) if options.get(key)}
    rules = select_rules(options.get("mode"), options.get("backend", "all"), options.get("rule_ids"), given)
    targets = resolve_targets(options, rules)
    if options.get("output_format") != "json":
        for target in targets:
            if target.origin.startswith("imported"):
                say(f"using {target.package} {target.version_text} at {target.root} ({target.origin})")
    return rules, targets


def _reports(session: Session, rules: Sequence[PatchRule], targets: Sequence[Target], *, structural: bool) -> list[RuleReport]:
    return [session.report(rule, target, structural=structural) for target in targets for rule in rules if rule.package == target.package]


def _recover(targets: Sequence[Target], held: dict[str, bool] | None = None) -> None:
    """Roll back what an interrupted command left in each locked tree, saying so in one line.

    Read-only commands recover too (as `git status` refreshes the index when it can take its
    lock), so that they report the tree as it really is; a tree they cannot lock (read-only for
    this user) is only reported.
    """
    for target in targets:
        if held is not None and not held.get(target.root, False):
            command = transaction.interrupted(target.root)
            if command:
                say(f"rlpatch: interrupted {command} found in {target.root}; run any rlpatch command "
                    "with write access to the tree to roll it back")
            continue
        recovery = transaction.recover(target.root)
        if recovery:
            say(recovery.notice(target.root))


def _check_git(targets: Sequence[Target], changed: dict[str, list[Path]], allow_dirty: bool) -> dict[str, Any]:
    from rlpatch.patch.gitinfo import checkout_of

    checkouts = {}
    for target in targets:
        checkout = checkout_of(target.root)
        if checkout is None:
            continue
        checkouts[target.root] = checkout
        dirty = checkout.dirty(changed.get(target.root, []))
        if dirty and not allow_dirty:
            raise RefusedError(f"uncommitted changes in {', '.join(dirty)}; commit or stash them, or pass --allow-dirty")
    return checkouts


@click.command("apply")
@target_options
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option("--commit", "make_commit", is_flag=True, help="In a git checkout, commit the patch as one commit.")
@format_option
@ray_options
def apply_cmd(**options: Any) -> int:
    """Apply the selected patch rules, all or nothing."""
    from rlpatch.patch import engine

    if (code := on_cluster(options)) is not None:
        return code
    rules, targets = _setup(options)
    roots = [target.root for target in targets]
    with transaction.locked_all(roots, create=not options["dry_run"]) as held:
        _recover(targets, held)
        session = Session(targets)
        reports = _reports(session, rules, targets, structural=True)
        refusals = [r for r in reports if r.state in ("refused", "drifted")]
        refusals += [r for r in reports if r.needs_force and not options["force"] and r.state != "applied"]
        if refusals:
            for report in refusals:
                if report.needs_force and report.state not in ("refused", "drifted"):
                    report.message = f"{report.warning}; pass --force to patch anyway"
                    report.state = "refused"
                print_refusal(report)
            print_reports(reports, targets, options["output_format"])
            say("nothing was written")
            return EXIT_REFUSED
        changes = engine.planned_changes(session, reports)
        changed_paths: dict[str, list[Path]] = {}
        for change in changes:
            changed_paths.setdefault(change.root, []).append(Path(change.root) / change.relative)
        checkouts = _check_git(targets, changed_paths, options["allow_dirty"])
        commits = _plan_commits(checkouts, changes) if options["make_commit"] and changes else {}
        if options["dry_run"]:
            for report in reports:
                if report.state in ("absent", "partial"):
                    report.message = "would apply"
            print_reports(reports, targets, options["output_format"])
            return EXIT_OK
        writes = engine.writes_for_apply(session, changes)
        for root, checkout in checkouts.items():
            session.manifest(root).git_head = checkout.head()
            checkout.exclude(transaction.state_dir(root))
        engine.commit_all(session, writes, "apply")
        for report in reports:
            if report.state in ("absent", "partial"):
                report.state, report.message = "applied", "applied now"
            elif report.state == "applied":
                report.message = "already applied, nothing to do"
        print_reports(reports, targets, options["output_format"])
        _commit(session, checkouts, commits, reports)
    return EXIT_OK


def _plan_commits(checkouts: dict[str, Any], changes: Sequence[Change]) -> dict[str, list[Any]]:
    """Per root, the blobs of a commit holding only the patch (refused here, before any write)."""
    from rlpatch.patch.gitinfo import PatchedFile

    if not checkouts:
        raise InputError("--commit: the target tree is not a git checkout; nothing was written")
    plans = {}
    for root, checkout in checkouts.items():
        files = [PatchedFile(Path(c.root) / c.relative, c.before, c.after or b"", c.mode) for c in changes if c.root == root]
        if files:
            plans[root] = checkout.plan_commit(files)
    return plans


def _commit(session: Session, checkouts: dict[str, Any], commits: dict[str, list[Any]], reports: Sequence[RuleReport]) -> None:
    applied = sorted({report.rule.id for report in reports if report.message == "applied now"})
    for root, files in commits.items():
        checkout = checkouts[root]
        sha = checkout.commit_patch(files, f"rlpatch: apply {', '.join(applied)}\n\nApplied by rlpatch; "
                                           "undo with `git revert` of this commit.")
        manifest = session.manifest(root)
        manifest.git_commit = sha
        try:
            manifest.save()
        except OSError as err:
            raise InputError(f"{err.filename}: cannot record commit {sha[:12]} ({err.strerror}); the patch is applied "
                             "and committed, but revert will not name the commit") from None
        say(f"committed {sha[:12]} in {checkout.toplevel} (the patch's changes only)")


def _verify(options: dict[str, Any], *, always_zero: bool) -> int:
    if (code := on_cluster(options)) is not None:
        return code
    rules, targets = _setup(options)
    with transaction.locked_all([target.root for target in targets], create=False) as held:
        _recover(targets, held)
        session = Session(targets)
        reports = _reports(session, rules, targets, structural=False)
    print_reports(reports, targets, options["output_format"], rules)
    failing = [r for r in reports if r.state not in ("applied", "not-applicable")]
    nothing_applies = api.not_applicable_targets(reports, targets)
    if options["output_format"] != "json":
        for target in nothing_applies:
            say(f"not applied: no selected rule applies to {target.package} {target.version_text} at {target.root}")
        for missing in api.unchecked_packages(rules, targets):
            say(f"note: the selected set also has {', '.join(missing['rules'])} for {missing['package']}, and no "
                f"{missing['package']} tree was checked: give {OPTION_OF[missing['package']]} to check it (incomplete set)")
    return EXIT_OK if always_zero or not (failing or nothing_applies) else EXIT_REFUSED


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
    from rlpatch.patch import engine

    if (code := on_cluster(options)) is not None:
        return code
    rules, targets = _setup(options)
    roots = [target.root for target in targets]
    with transaction.locked_all(roots) as held:
        _recover(targets, held)
        session = Session(targets)
        reports = _reports(session, rules, targets, structural=True)
        refused = [r for r in reports if r.state == "refused"]
        if refused:
            for report in refused:
                print_refusal(report)
            say("nothing was written")
            return EXIT_REFUSED
        try:
            writes, notes = engine.revert_writes(session, reports)
        except RefusedError as err:
            say(f"rlpatch: refused: {err.message}")
            say("nothing was written")
            return EXIT_REFUSED
        notes += _committed_notes(session, reports)
        _forget_stale(session, reports, writes)
        engine.commit_all(session, writes, "revert")
        for note in notes:
            say(note)
        for report in reports:
            if report.state in ("applied", "partial"):
                report.state, report.message = "absent", "reverted"
            elif report.state == "absent":
                report.message = "not applied, nothing to do"
        print_reports(reports, targets, options["output_format"])
    return EXIT_OK


def _committed_notes(session: Session, reports: Sequence[RuleReport]) -> list[str]:
    """After `apply --commit`, reverting changes the working tree only: say how to undo the commit."""
    from rlpatch.patch.gitinfo import checkout_of

    notes = []
    for root in sorted({r.target.root for r in reports if r.state in ("applied", "partial")}):
        sha = session.manifest(root).git_commit
        checkout = checkout_of(root) if sha else None
        if sha and checkout is not None and checkout.contains(sha):
            notes.append(f"{root}: the patch was committed as {sha[:12]} (rlpatch apply --commit); this revert changes "
                         f"the working tree only: commit it, or undo the commit itself with `git revert {sha}`")
    return notes


def _forget_stale(session: Session, reports: Sequence[RuleReport], writes: dict[str, list[transaction.Write]]) -> None:
    """Rules the manifest lists but that are no longer in their files (a `git revert` of the patch
    commit, a checkout): forget them, so that a revert with nothing to do leaves no `.rlpatch/`."""
    for target in {report.target.root: report.target for report in reports}.values():
        absent = {r.rule.id for r in reports if r.target.root == target.root and r.state == "absent"}
        manifest = session.manifest(target.root)
        if not absent or not any(set(record.rules) & absent for record in manifest.files.values()):
            continue
        root_writes = writes.setdefault(target.root, [])  # a root in `writes` gets its manifest saved
        for relative in manifest.forget(absent):
            stored = manifest.original_path(relative)
            if stored.exists():
                root_writes.append(transaction.Write(str(stored.relative_to(target.root)), None))


@click.command("diff")
@target_options
def diff_cmd(**options: Any) -> int:
    """Print the unified diff that apply would write (paths relative to each root); write nothing."""
    from rlpatch.patch import engine
    from rlpatch.patch.difftext import unified_diff

    rules, targets = _setup(options)
    with transaction.locked_all([target.root for target in targets], create=False) as held:
        _recover(targets, held)
        session = Session(targets)
        reports = _reports(session, rules, targets, structural=True)
        refusals = [r for r in reports if r.state in ("refused", "drifted")]
        for report in refusals:
            print_refusal(report)
        if refusals:
            return EXIT_REFUSED
        changes = engine.planned_changes(session, reports)
    for change in changes:
        sys.stdout.write(unified_diff(change.relative, change.before, change.after))
    return EXIT_OK


def patch_rule_documentation(rule_id: str) -> str | None:
    """A patch rule's documentation: its module docstring (why, what), versions, files, and the
    shapes it patches (good) and refuses (bad) from its own cases; None for an unknown id."""
    import textwrap

    rule = next((rule for rule in registry.patch_rules() if rule.id == rule_id), None)
    if rule is None:
        return None
    module = sys.modules[type(rule).__module__]
    parts = [
        f"{rule.id} ({rule.package}; {', '.join(sorted(rule.modes))}): {rule.summary()}",
        textwrap.dedent(module.__doc__ or "").strip(),
        f"Versions: {rule.versions}",
        f"Runs under: {rule.trainer or 'not stated'}",
        "Files:\n" + "\n".join(f"    {path}" for path in rule.files),
    ]
    for title, cases in (("Good (patched)", getattr(module, "VALID", [])), ("Bad (refused: drifted anchor)", getattr(module, "INVALID", []))):
        if cases:
            parts.append(f"{title}:\n\n" + textwrap.indent(textwrap.dedent(cases[0]).strip("\n"), "    "))
    return "\n\n".join(parts) + "\n"


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
        click.echo(json.dumps(rows, indent=2))
        return EXIT_OK
    for row in rows:
        click.echo(f"{row['id']}  [{row['package']}; {', '.join(row['modes'])}; {row['versions']}]")
        click.echo(f"    {row['summary']}")
        click.echo(f"    runs under: {row['trainer'] or 'not stated'}")
        for path in row["files"]:
            click.echo(f"    {path}")
    return EXIT_OK
