"""The patch engine: state of every selected rule on every target tree, and apply / revert / diff.

Each target file is read and parsed once per command. A rule's state is decided structurally
(`edits.locate`), except for a fast path: a file whose bytes are exactly what rlpatch wrote (its
SHA-256 is in the manifest) is known to be applied without parsing it.

All refusals are decided before anything is written; writes go through `transaction.commit`, one
transaction per root, all roots planned first: a refusal in one tree leaves every tree untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from rlpatch.errors import InputError
from rlpatch.patch import transaction
from rlpatch.patch.manifest import FileRecord, Manifest, sha256
from rlpatch.patch.rule import AnchorError, NewFile, PatchRule, Target
from rlpatch.patch.statefiles import STATE_DIR
from rlpatch.patch.states import STATE_AFTER, Finding, Outcome, RuleState
from rlpatch.patch.transaction import Write

if TYPE_CHECKING:  # edits (and libcst) are imported only when a file must be parsed
    from rlpatch.patch.edits import Edit


# ---------------------------------------------------------------------------------------------
# Reading and parsing each target file once
# ---------------------------------------------------------------------------------------------


@dataclass
class SourceFile:
    """One target file as read from disk, parsed lazily at most once."""

    root: str
    relative: str
    data: bytes
    mode: int
    _module: object = None

    @property
    def path(self) -> Path:
        return Path(self.root) / self.relative

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")

    def module(self):  # -> libcst.Module
        if self._module is None:
            import libcst as cst

            try:
                self._module = cst.parse_module(self.text)
            except cst.ParserSyntaxError as err:
                raise InputError(f"{self.path}:{err.raw_line}:{err.raw_column}: not valid Python ({err.message})") from None
        return self._module


def read_source(root: str, relative: str) -> SourceFile:
    """Read a target file, refusing binary or undecodable content with a one-line error."""
    path = Path(root) / relative
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a Python file")
    try:
        data = path.read_bytes()
        mode = path.stat().st_mode
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    if b"\0" in data:
        raise InputError(f"{path}: binary file, expected Python source")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 (byte {err.start}); expected Python source") from None
    return SourceFile(root, relative, data, mode)


UTF8_BOM = b"\xef\xbb\xbf"


def encode_like(source: SourceFile, code: str) -> bytes:
    """The bytes of new code for `source`'s file: libcst drops a UTF-8 BOM when it parses, and
    apply never reformats, so the BOM the file had is put back (CRLF and a missing final newline
    survive libcst's round trip by themselves)."""
    data = code.encode("utf-8")
    if source.data.startswith(UTF8_BOM) and not data.startswith(UTF8_BOM):
        data = UTF8_BOM + data
    return data


# ---------------------------------------------------------------------------------------------
# State of rules
# ---------------------------------------------------------------------------------------------


@dataclass
class FilePlan:
    """What one rule finds in, and would do to, one file."""

    relative: str
    state: RuleState
    pending: list[Edit] = field(default_factory=list)  # insertions apply would add
    applied_sites: list = field(default_factory=list)  # edits.Site objects in place
    new_file: NewFile | None = None
    detail: str = ""


@dataclass
class RuleReport:
    """A rule on a target: what it found there (`finding`, with its `detail` for the user), its files,
    and what the command then did with it (`outcome`; None while the command only looked)."""

    rule: PatchRule
    target: Target
    finding: Finding
    files: list[FilePlan] = field(default_factory=list)
    detail: str = ""  # the finding said for the user: "applied", "not applied", what drifted, why not applicable
    warning: str = ""
    needs_force: bool = False
    outcome: Outcome | None = None

    @property
    def state(self) -> RuleState:
        """The state the report shows: the finding's, or the one the command's outcome left."""
        after = STATE_AFTER.get(self.outcome) if self.outcome is not None else None
        return after or self.finding.value

    @property
    def message(self) -> str:
        """The report's message: what the command did, else what the rule found."""
        if self.outcome is Outcome.NEEDS_FORCE:
            return f"{self.warning}; pass --force to patch anyway"
        return self.outcome.value if self.outcome is not None else self.detail

    @property
    def remark(self) -> str:
        """What the text report adds in brackets: the message, unless the state already says it all
        (a plain applied or absent finding, or nothing to say)."""
        if self.outcome is None and self.finding in (Finding.APPLIED, Finding.ABSENT):
            return ""
        return self.message

    def as_json(self) -> dict:
        return {
            "id": self.rule.id,
            "state": self.state,
            "files": [plan.relative for plan in self.files],
            "message": self.message,
        }


def _combine(states: Sequence[RuleState]) -> RuleState:
    if not states:
        return "not-applicable"
    if "drifted" in states:
        return "drifted"
    if all(state == "applied" for state in states):
        return "applied"
    if all(state == "absent" for state in states):
        return "absent"
    return "partial"


class Session:
    """One command's view of the target trees: files are read and parsed once and shared by rules."""

    def __init__(self, targets: Sequence[Target]) -> None:
        self.targets = list(targets)
        self._sources: dict[tuple[str, str], SourceFile] = {}
        self.manifests: dict[str, Manifest] = {}

    def manifest(self, root: str) -> Manifest:
        if root not in self.manifests:
            self.manifests[root] = Manifest.load(root)
        return self.manifests[root]

    def source(self, root: str, relative: str) -> SourceFile:
        key = (root, relative)
        if key not in self._sources:
            self._sources[key] = read_source(root, relative)
        return self._sources[key]

    # -- per rule ------------------------------------------------------------------------------

    def report(self, rule: PatchRule, target: Target, *, structural: bool = True) -> RuleReport:
        gate = rule.gate(target)
        if gate.status == "not-applicable":
            return RuleReport(rule, target, Finding.NOT_APPLICABLE, detail=gate.message)
        present = [relative for relative in rule.files if (Path(target.root) / relative).exists()]
        creates = [new.path for new in rule.new_files(target)]
        edited = [relative for relative in present if relative not in creates]
        if not edited:
            missing = ", ".join(rule.files)
            return RuleReport(
                rule, target, Finding.NOT_APPLICABLE, detail=f"{target.package} {target.version_text} has no {missing}"
            )
        report = RuleReport(rule, target, Finding.ABSENT, warning=gate.message if gate.status in ("warn", "force") else "")
        report.needs_force = gate.status == "force"
        try:
            plans = [self._file_plan(rule, target, relative, structural) for relative in edited]
        except AnchorError as err:
            report.finding = Finding.SHAPE_UNKNOWN
            report.detail = f"{err} (in {target.package} {target.version_text})"
            return report
        # A rule whose anchor moved between files across releases (verl's request-id client) has
        # no edit in the file of the other releases: that file is not the rule's in this tree.
        report.files = [plan for plan in plans if plan.state != "not-applicable"]
        for new in rule.new_files(target):
            report.files.append(self._new_file_plan(target, new))
        if not report.files:
            return RuleReport(
                rule, target, Finding.NOT_APPLICABLE,
                detail=f"{target.package} {target.version_text}: no anchor of {rule.id} in {', '.join(edited)}",
            )
        report.finding = Finding(_combine([plan.state for plan in report.files]))
        report.detail = _describe(report)
        return report

    def _file_plan(self, rule: PatchRule, target: Target, relative: str, structural: bool) -> FilePlan:
        source = self.source(target.root, relative)
        record = self.manifest(target.root).files.get(relative)
        if not structural and record and rule.id in record.rules and record.patched_sha256 == sha256(source.data):
            return FilePlan(relative, "applied")  # fast path: the exact bytes rlpatch wrote
        from rlpatch.patch import edits

        needle = rule.anchor_text(relative)
        if needle is not None and needle not in source.text:
            return FilePlan(relative, "not-applicable", detail="no anchor of the rule in this file")
        module = source.module()
        insertions = rule.insertions(relative, module)
        if not insertions:
            return FilePlan(relative, "not-applicable", detail="no anchor of the rule in this file")
        sites = [edits.locate(module, insertion) for insertion in insertions]
        states = [site.state for site in sites]
        plan = FilePlan(relative, _combine(states))
        plan.pending = [site.insertion for site in sites if site.state == "absent"]
        plan.applied_sites = [site for site in sites if site.state == "applied"]
        drifted = [site for site in sites if site.state == "drifted"]
        if drifted:
            plan.detail = "; ".join(f"{site.insertion.label}: {site.detail}" for site in drifted)
        elif plan.state == "absent" and rule.markers:
            leftovers = [name for name in rule.markers if name in source.text]
            if leftovers:
                plan.state = "drifted"
                plan.detail = f"patch code ({', '.join(leftovers)}) found away from its anchors"
        elif plan.state == "partial":
            missing = [site.insertion.label for site in sites if site.state == "absent"]
            plan.detail = "missing: " + "; ".join(missing)
        return plan

    def _new_file_plan(self, target: Target, new: NewFile) -> FilePlan:
        path = Path(target.root) / new.path
        if not path.exists():
            return FilePlan(new.path, "absent", new_file=new)
        source = self.source(target.root, new.path)
        if source.data == new.text.encode("utf-8"):
            return FilePlan(new.path, "applied", new_file=new)
        return FilePlan(new.path, "drifted", new_file=new, detail="the file differs from what the patch creates")


def set_state(reports: Sequence[RuleReport]) -> tuple[RuleState, list[str]]:
    """The state of a set of rules on one target, and the files where the set is not in place.

    A set some of whose rules are applied and others not (one file reverted by hand) is partial;
    rules that do not apply to the release do not count.
    """
    active = [report for report in reports if report.state != "not-applicable"]
    states = [report.state for report in active]
    state: RuleState = "refused" if "refused" in states else _combine(states)
    files = sorted({
        plan.relative for report in active if report.state != "applied" for plan in report.files if plan.state != "applied"
    })
    return state, files


def _describe(report: RuleReport) -> str:
    if report.finding is Finding.APPLIED:
        return "applied"
    if report.finding is Finding.ABSENT:
        return "not applied"
    details = [f"{plan.relative}: {plan.state}" + (f" ({plan.detail})" if plan.detail else "") for plan in report.files if plan.state != "applied" or plan.detail]
    return "; ".join(details)


# ---------------------------------------------------------------------------------------------
# Apply
# ---------------------------------------------------------------------------------------------


@dataclass
class Change:
    """The new bytes of one file, and the rules they carry."""

    root: str
    relative: str
    before: bytes | None
    after: bytes | None
    mode: int | None
    rules: list[str]


def planned_changes(session: Session, reports: Iterable[RuleReport]) -> list[Change]:
    """New contents for every file where some selected rule is absent or partial."""
    from rlpatch.patch import edits

    pending: dict[tuple[str, str], list[tuple[str, list[Edit]]]] = {}
    changes: list[Change] = []
    for report in reports:
        for plan in report.files:
            if plan.new_file is not None:
                if plan.state == "absent":
                    data = plan.new_file.text.encode("utf-8")
                    changes.append(Change(report.target.root, plan.relative, None, data, 0o644, [report.rule.id]))
                continue
            if plan.pending:
                pending.setdefault((report.target.root, plan.relative), []).append((report.rule.id, plan.pending))
    for (root, relative), per_rule in pending.items():
        source = session.source(root, relative)
        insertions = [insertion for _, group in per_rule for insertion in group]
        code = edits.insert(source.module(), insertions).code
        try:
            compile(code, str(source.path), "exec", dont_inherit=True)
        except SyntaxError as err:  # a bug in a rule, never the user's fault: refuse, write nothing
            raise InputError(f"{source.path}: patched code does not compile ({err.msg}, line {err.lineno}); nothing written") from None
        changes.append(Change(root, relative, source.data, encode_like(source, code), source.mode, [rule for rule, _ in per_rule]))
    return changes


def writes_for_apply(session: Session, changes: Sequence[Change]) -> dict[str, list[Write]]:
    """The writes of an apply per root, with the manifest updated to match.

    A file patched for the first time has its bytes kept under `.rlpatch/originals/` (exact
    revert); a file already in the manifest keeps the original it had.
    """
    writes: dict[str, list[Write]] = {}
    for change in changes:
        manifest = session.manifest(change.root)
        record = manifest.files.get(change.relative)
        if record is None:
            original = None if change.before is None else sha256(change.before)
            record = FileRecord(original, "", change.mode or 0o644, [])
            manifest.files[change.relative] = record
            if change.before is not None:
                stored = manifest.original_path(change.relative).relative_to(change.root)
                writes.setdefault(change.root, []).append(Write(str(stored), change.before, 0o644))
        record.patched_sha256 = sha256(change.after or b"")
        record.rules = sorted(set(record.rules) | set(change.rules))
        writes.setdefault(change.root, []).append(Write(change.relative, change.after, change.mode))
    return writes


# ---------------------------------------------------------------------------------------------
# Revert
# ---------------------------------------------------------------------------------------------


def _stored_original(manifest: Manifest, relative: str) -> bytes | None:
    record = manifest.files.get(relative)
    path = manifest.original_path(relative)
    if record is None or record.original_sha256 is None or not path.exists():
        return None
    data = path.read_bytes()
    return data if sha256(data) == record.original_sha256 else None


def revert_writes(session: Session, reports: Sequence[RuleReport]) -> tuple[dict[str, list[Write]], list[str]]:
    """The writes that take the selected rules out of every file, or raise RefusedError.

    A file whose bytes are still exactly what rlpatch wrote gets its stored original back (byte for
    byte, mode included). A file the user edited since keeps the edits: only the patch's own
    statements are removed. Patch code the user edited is never removed silently: refuse.
    """
    from rlpatch.errors import RefusedError
    from rlpatch.patch import edits

    by_file: dict[tuple[str, str], list[tuple[RuleReport, FilePlan]]] = {}
    for report in reports:
        for plan in report.files:
            if plan.state == "absent":
                continue
            if plan.state == "drifted":
                raise RefusedError(
                    f"{Path(report.target.root) / plan.relative}: {report.rule.id} is drifted ({plan.detail}); "
                    "reverting would lose your edits to the patch code: restore it or revert that file by hand "
                    f"(its original is in {STATE_DIR}/originals/)"
                )
            by_file.setdefault((report.target.root, plan.relative), []).append((report, plan))
    writes: dict[str, list[Write]] = {}
    notes: list[str] = []
    for (root, relative), entries in sorted(by_file.items()):
        manifest = session.manifest(root)
        record = manifest.files.get(relative)
        leaving = {report.rule.id for report, _ in entries}
        remaining = sorted(set(record.rules if record else []) - leaving)
        new_file = entries[0][1].new_file
        if new_file is not None:
            writes.setdefault(root, []).append(Write(relative, None))
            manifest.files.pop(relative, None)
            continue
        source = session.source(root, relative)
        original = _stored_original(manifest, relative)
        if not remaining and record and original is not None and record.patched_sha256 == sha256(source.data):
            after, mode = original, record.mode
        else:
            sites = [site for _, plan in entries for site in plan.applied_sites]
            stripped = edits.strip(source.module(), sites).code
            leftovers = sorted({name for report, _ in entries for name in report.rule.markers if name in stripped})
            if leftovers:
                # Removing only the intact statements would leave patch code that no longer runs.
                raise RefusedError(
                    f"{source.path}: patch code ({', '.join(leftovers)}) remains outside its intact statements; "
                    f"restore the patch code or revert that file by hand (its original is in {STATE_DIR}/originals/)"
                )
            after, mode = encode_like(source, stripped), source.mode
            if original is not None and after != original and not remaining:
                notes.append(f"{source.path}: kept your edits made after apply; removed only the patch code")
        writes.setdefault(root, []).append(Write(relative, after, mode))
        if remaining and record:
            record.rules = remaining
            record.patched_sha256 = sha256(after)
        else:
            manifest.files.pop(relative, None)
            stored = manifest.original_path(relative)
            if stored.exists():
                writes[root].append(Write(str(stored.relative_to(root)), None))
    return writes, notes


# ---------------------------------------------------------------------------------------------
# Committing writes across roots
# ---------------------------------------------------------------------------------------------


def commit_all(session: Session, writes: dict[str, list[Write]], command: str, say: Callable[[str], None]) -> None:
    """Check every root is writable and every file stays inside its tree (links that point back
    inside are said), then commit root by root (each one all-or-nothing)."""
    for root, root_writes in writes.items():
        for link in transaction.check_links(root, root_writes):
            say(link.note())
    for root, root_writes in writes.items():
        transaction.check_writable(root, [w for w in root_writes if not w.relative.startswith(STATE_DIR)])
    for root, root_writes in writes.items():
        manifest = session.manifest(root)
        transaction.commit(root, root_writes, manifest, command)
