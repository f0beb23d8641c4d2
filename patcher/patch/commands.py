"""The engine of `apply`, `verify`/`status`, `revert` and `diff`, without a command line.

Each function takes the selected rules and targets (`selection.select`), holds the trees' locks,
rolls back what an interrupted command left, does its work and returns a typed result; it prints
nothing. What the user must hear while it runs (a recovery) goes to `say`; what it found or did
comes back in the result, which the command line shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rlpatch.errors import InputError, RefusedError
from rlpatch.patch import engine, journal, transaction
from rlpatch.patch.engine import Change, RuleReport, Session
from rlpatch.patch.lock import locked_all
from rlpatch.patch.options import ApplyOptions, Say, silent
from rlpatch.patch.reporting import cannot_take_effect, not_applicable_targets, payload, unchecked_packages
from rlpatch.patch.rule import PatchRule, Target
from rlpatch.patch.statefiles import state_dir
from rlpatch.patch.states import IN_PLACE, REFUSES_APPLY, REFUSES_REVERT, Finding, Outcome


@dataclass(frozen=True)
class RuleOutcome:
    """One rule on one tree, and what the command did with it."""

    report: RuleReport
    outcome: Outcome


@dataclass(frozen=True)
class Commit:
    """The git commit `apply --commit` made in one checkout."""

    sha: str
    toplevel: str


@dataclass
class ApplyResult:
    """What `apply` found and did. With refusals nothing was written; otherwise the patch is in place
    (or, with dry_run, would be). `error` is what failed after the writes (making or recording the
    git commit): the caller shows the reports and the commits made first, then raises it."""

    reports: list[RuleReport]
    refusals: list[RuleReport] = field(default_factory=list)
    outcomes: list[RuleOutcome] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    error: Exception | None = None
    inert: list[str] = field(default_factory=list)  # per tree where the set cannot take effect: why, what works

    @property
    def refused(self) -> bool:
        return bool(self.refusals or self.inert)

    def rules_with(self, outcome: Outcome) -> list[str]:
        """The ids of the rules the command left in `outcome`, sorted."""
        return sorted({done.report.rule.id for done in self.outcomes if done.outcome is outcome})


@dataclass
class VerifyResult:
    """The state of every selected rule on every target (what `verify` and `status` report)."""

    rules: list[PatchRule]
    targets: list[Target]
    reports: list[RuleReport]

    def failing(self) -> list[RuleReport]:
        """The rules neither applied nor not applicable to their release."""
        return [report for report in self.reports if report.finding not in IN_PLACE]

    def not_applicable_targets(self) -> list[Target]:
        """The trees on which no selected rule applies to the release (verify calls the set not applied)."""
        return not_applicable_targets(self.reports, self.targets)

    def unchecked(self) -> list[dict[str, Any]]:
        """The packages some selected rule patches but no tree was checked for."""
        return unchecked_packages(self.rules, self.targets)

    def in_place(self) -> bool:
        """Every selected rule is in place, and some rule applies on every tree (verify's exit 0)."""
        return not (self.failing() or self.not_applicable_targets())

    def payload(self) -> dict[str, Any]:
        """The JSON of `verify --format json`."""
        return payload(self.reports, self.targets, self.rules)


@dataclass
class RevertResult:
    """What `revert` found and did. With refusals (or `refusal`, a reason the engine gave) nothing was
    written; otherwise `notes` say what the user should know (a commit the revert does not undo)."""

    reports: list[RuleReport]
    refusals: list[RuleReport] = field(default_factory=list)
    refusal: str | None = None
    notes: list[str] = field(default_factory=list)
    outcomes: list[RuleOutcome] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        return bool(self.refusals) or self.refusal is not None


@dataclass
class DiffResult:
    """The changes apply would write, or the refusals that stop it."""

    refusals: list[RuleReport]
    changes: list[Change]

    @property
    def refused(self) -> bool:
        return bool(self.refusals)


def verify(targets: Sequence[Target], rules: Sequence[PatchRule], say: Say = silent) -> VerifyResult:
    """The structural state of `rules` on `targets`, after recovering what an interrupted command left."""
    with locked_all([target.root for target in targets], create=False) as held:
        recover(targets, say, held)
        reports = _reports(Session(targets), rules, targets, structural=False)
    return VerifyResult(list(rules), list(targets), reports)


def status_reports(targets: Sequence[Target], rules: Sequence[PatchRule]) -> list[RuleReport]:
    """The structural state of `rules` on `targets` as they are: no lock taken, nothing recovered."""
    return _reports(Session(targets), rules, targets, structural=False)


def apply(targets: Sequence[Target], rules: Sequence[PatchRule], options: ApplyOptions,
          say: Say = silent) -> ApplyResult:
    """Apply `rules` to `targets`, all or nothing (nothing at all with `options.dry_run`).

    Refused (nothing written) when a rule's anchor is missing or ambiguous, a file drifted, a
    release needs `options.force`, or the set cannot take effect on a tree (every selected rule
    not applicable to its release, and the release does not dump natively: `inert`); RefusedError for dirty git files, InputError for `--commit`
    outside a git checkout (both before any write).
    """
    with locked_all([target.root for target in targets], create=not options.dry_run) as held:
        recover(targets, say, held)
        session = Session(targets)
        reports = _reports(session, rules, targets, structural=True)
        refusals = _apply_refusals(reports, options.force)
        if refusals:
            return ApplyResult(reports, refusals)
        inert = [cannot_take_effect(target, reports, options.mode, bool(options.rule_ids))
                 for target in not_applicable_targets(reports, targets)]
        if inert:  # exit 0 with nothing in place would let the run go on and dump nothing that pairs
            return ApplyResult(reports, inert=inert)
        changes = engine.planned_changes(session, reports)
        changed_paths: dict[str, list[Path]] = {}
        for change in changes:
            changed_paths.setdefault(change.root, []).append(Path(change.root) / change.relative)
        checkouts = _check_git(targets, changed_paths, options.allow_dirty)
        commits = _plan_commits(checkouts, changes) if options.commit and changes else {}
        if options.dry_run:
            return ApplyResult(reports, outcomes=_settle(reports, {Finding.ABSENT: Outcome.WOULD_APPLY,
                                                                   Finding.PARTIAL: Outcome.WOULD_APPLY}))
        writes = engine.writes_for_apply(session, changes)
        for root, checkout in checkouts.items():
            session.manifest(root).git_head = checkout.head()
            checkout.exclude(state_dir(root))
        engine.commit_all(session, writes, "apply", say)
        result = ApplyResult(reports, outcomes=_settle(reports, {Finding.ABSENT: Outcome.APPLIED_NOW,
                                                                 Finding.PARTIAL: Outcome.APPLIED_NOW,
                                                                 Finding.APPLIED: Outcome.ALREADY_APPLIED}))
        _commit(session, checkouts, commits, result)
    return result


def _apply_refusals(reports: Sequence[RuleReport], force: bool) -> list[RuleReport]:
    """The rules that stop apply; a release that needs --force is refused with the outcome saying so."""
    refusals = [r for r in reports if r.finding in REFUSES_APPLY]
    refusals += [r for r in reports if r.needs_force and not force and r.finding is not Finding.APPLIED]
    for report in refusals:
        if report.needs_force and report.finding not in REFUSES_APPLY:
            report.outcome = Outcome.NEEDS_FORCE
    return refusals


def _settle(reports: Sequence[RuleReport], outcomes: dict[Finding, Outcome]) -> list[RuleOutcome]:
    """Give each report whose finding is a key of `outcomes` that outcome (what the command did)."""
    done = []
    for report in reports:
        if report.finding in outcomes:
            report.outcome = outcomes[report.finding]
            done.append(RuleOutcome(report, report.outcome))
    return done


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


def _commit(session: Session, checkouts: dict[str, Any], commits: dict[str, list[Any]], result: ApplyResult) -> None:
    """Commit the patch in each checkout, naming the rules applied now; a failure stops here and is
    kept in `result.error` (the patch itself is written)."""
    applied = result.rules_with(Outcome.APPLIED_NOW)
    try:
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
            result.commits.append(Commit(sha, str(checkout.toplevel)))
    except Exception as err:  # noqa: BLE001 - whatever it is, it comes after the reports the caller shows first
        result.error = err


def revert(targets: Sequence[Target], rules: Sequence[PatchRule], say: Say = silent) -> RevertResult:
    """Take `rules` out of `targets`, restoring files byte for byte; refused (nothing written) when a
    rule's state cannot be told or the engine cannot restore a file."""
    with locked_all([target.root for target in targets]) as held:
        recover(targets, say, held)
        session = Session(targets)
        reports = _reports(session, rules, targets, structural=True)
        refused = [r for r in reports if r.finding in REFUSES_REVERT]
        if refused:
            return RevertResult(reports, refusals=refused)
        try:
            writes, notes = engine.revert_writes(session, reports)
        except RefusedError as err:
            return RevertResult(reports, refusal=err.message)
        notes += _committed_notes(session, reports)
        _forget_stale(session, reports, writes)
        engine.commit_all(session, writes, "revert", say)
        outcomes = _settle(reports, {Finding.APPLIED: Outcome.REVERTED, Finding.PARTIAL: Outcome.REVERTED,
                                     Finding.ABSENT: Outcome.NOTHING_TO_REVERT})
    return RevertResult(reports, notes=notes, outcomes=outcomes)


def _committed_notes(session: Session, reports: Sequence[RuleReport]) -> list[str]:
    """After `apply --commit`, reverting changes the working tree only: say how to undo the commit."""
    from rlpatch.patch.gitinfo import checkout_of

    notes = []
    for root in sorted({r.target.root for r in reports if r.finding in (Finding.APPLIED, Finding.PARTIAL)}):
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
        absent = {r.rule.id for r in reports if r.target.root == target.root and r.finding is Finding.ABSENT}
        manifest = session.manifest(target.root)
        if not absent or not any(set(record.rules) & absent for record in manifest.files.values()):
            continue
        root_writes = writes.setdefault(target.root, [])  # a root in `writes` gets its manifest saved
        for relative in manifest.forget(absent):
            stored = manifest.original_path(relative)
            if stored.exists():
                root_writes.append(transaction.Write(str(stored.relative_to(target.root)), None))


def diff(targets: Sequence[Target], rules: Sequence[PatchRule], say: Say = silent) -> DiffResult:
    """The changes apply would write (or the refusals that stop it); writes nothing."""
    with locked_all([target.root for target in targets], create=False) as held:
        recover(targets, say, held)
        session = Session(targets)
        reports = _reports(session, rules, targets, structural=True)
        refusals = [r for r in reports if r.finding in REFUSES_APPLY]
        if refusals:
            return DiffResult(refusals, [])
        return DiffResult([], engine.planned_changes(session, reports))


def _reports(session: Session, rules: Sequence[PatchRule], targets: Sequence[Target], *, structural: bool) -> list[RuleReport]:
    return [session.report(rule, target, structural=structural) for target in targets for rule in rules if rule.package == target.package]


def recover(targets: Sequence[Target], say: Say, held: dict[str, bool] | None = None) -> None:
    """Roll back what an interrupted command left in each locked tree, saying so in one line.

    Read-only commands recover too (as `git status` refreshes the index when it can take its
    lock), so that they report the tree as it really is; a tree they cannot lock (read-only for
    this user) is only reported.
    """
    for target in targets:
        if held is not None and not held.get(target.root, False):
            command = journal.interrupted(target.root)
            if command:
                say(f"rlpatch: interrupted {command} found in {target.root}; run any rlpatch command "
                    "with write access to the tree to roll it back")
            continue
        recovery = journal.recover(target.root)
        if recovery:
            say(recovery.notice(target.root))
