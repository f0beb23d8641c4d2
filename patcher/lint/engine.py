"""The lint engine: scripts in, findings out, for every rule alike.

For each file: read it (one-line InputError for anything that is not a script), evaluate it with
the shell front end, build one `Run` per verl launch, run each selected rule's `check` on each run
whose mode it covers and `check_file` once, drop duplicates (several paths of one script often
give the same finding) and findings silenced by directive comments. The rules checking one run
share that run's `Facts` (what one computes, such as the composed verl config, the next reuses),
those checking the file the file's. Rules come only from the registry (the `rlNNN_*` modules of
`rlpatch.rules`); this module never imports libcst or a patch rule.
"""

# No `from __future__ import annotations`: typing compiles each string annotation of a NamedTuple's
# fields (a ForwardRef each) at import, on every cold start of `rlpatch lint`; evaluated ones it takes as they are.

import gc
import os
from typing import Callable, Iterator, NamedTuple, Union

from rlpatch import registry
from rlpatch.errors import InputError
from rlpatch.lint.rule import (
    SEVERITY_RANK,
    Facts,
    FileContext,
    Finding,
    LintContext,
    LintOptions,
    LintRule,
    Skipped,
    one_invocation,
)
from rlpatch.lint.suppressions import Suppressions
from rlpatch.shell.api import Evaluation, Run, SourceFile, Span, script_runs
from rlpatch.upstream.api import Version


class FileResult:
    """What linting one file gave: its findings, or the error that stopped it (and, in-process, the
    runs and evaluation that `detect` and `gen` read). The records of the lint path are plain
    classes: a dataclass costs about a millisecond of every cold start to create."""

    __slots__ = ("path", "findings", "runs", "error", "evaluation", "notes")

    def __init__(self, path: str, findings: list[Finding] | None = None, runs: list[Run] | None = None,
                 error: str | None = None, evaluation: Evaluation | None = None, notes: tuple[str, ...] = ()) -> None:
        self.path = path
        self.findings: list[Finding] = [] if findings is None else findings
        self.runs: list[Run] = [] if runs is None else runs
        self.error = error
        self.evaluation = evaluation
        self.notes = notes  # the invocation's notes (`LintOptions.notes`) as they stood after this file

    def __repr__(self) -> str:
        return f"FileResult({self.path!r}, {len(self.findings)} findings, error={self.error!r})"


# ---- the registry ---------------------------------------------------------------------------------
def rule_classes() -> tuple[type[LintRule], ...]:
    """Every lint rule class, sorted by code (the registry finds one class per rule module)."""
    return registry.lint_rule_classes()


def rule_by_code(code: str) -> type[LintRule] | None:
    return next((cls for cls in rule_classes() if cls.code == code.upper()), None)


def _matches(code: str, selectors: list[str]) -> bool:
    return any(sel == "ALL" or code.startswith(sel) for sel in selectors)


class CodeFilter(NamedTuple):
    """`--select` / `--ignore` (ruff-style code prefixes) as one predicate on findings.

    It is applied once, in `lint_path`, to every finding of a file after all families ran: a rule
    may report under another code (RL3xx and RL605 say "not checked" as RL002), a config file gives
    RL5xx findings, and none of them may slip past `--ignore`. Such a note comes with the rule that
    gave it (`--select RL3` still says that RL3xx could not run: no silent pass), unless its own
    code is ignored."""

    select: tuple[str, ...] = ("ALL",)
    ignore: tuple[str, ...] = ()

    def allows(self, code: str) -> bool:
        return _matches(code, list(self.select)) and not _matches(code, list(self.ignore))

    def keeps(self, finding: Finding) -> bool:
        if self.allows(finding.code):
            return True
        return bool(finding.origin) and self.allows(finding.origin) and not _matches(finding.code, list(self.ignore))


class RuleSet:
    """The rules a selection runs (those whose own code it allows), with the selection itself.

    Rules are imported and created when first needed: `for_modes` gives those that check runs of
    the given dump modes (and every rule of all modes, the only ones that check whole files), so a
    script without a dump never imports the consistency rules. Iterating gives every selected rule."""

    def __init__(self, codes: CodeFilter) -> None:
        self.codes = codes
        self._rules: dict[type[LintRule], LintRule] = {}
        self._chosen: dict[frozenset[str] | None, list[LintRule]] = {}  # asked once per file: chosen once

    def for_modes(self, modes: frozenset[str] | None) -> list[LintRule]:
        chosen = self._chosen.get(modes)
        if chosen is None:
            chosen = self._chosen[modes] = [self._rule(cls) for cls in registry.lint_rule_classes(modes)
                                            if self.codes.allows(cls.code)]
        return chosen

    def _rule(self, cls: type[LintRule]) -> LintRule:
        """One instance per rule class, whichever modes asked for it first."""
        if cls not in self._rules:
            self._rules[cls] = cls()
        return self._rules[cls]

    def __iter__(self) -> Iterator[LintRule]:
        return iter(self.for_modes(None))

    def __len__(self) -> int:
        return len(self.for_modes(None))


Rules = Union[RuleSet, "list[LintRule]"]  # a selection, or rule instances given by hand (a rule's cases)


def select_rules(select: list[str] | None, ignore: list[str] | None) -> RuleSet:
    """Ruff-style selection by code prefix (`RL2` selects RL2xx, `ALL` everything)."""
    select = [s.strip().upper() for s in (select or ["ALL"]) if s.strip()]
    ignore = [s.strip().upper() for s in (ignore or []) if s.strip()]
    check_codes(select + ignore)
    return RuleSet(CodeFilter(tuple(select), tuple(ignore)))


def check_codes(selectors: list[str], where: str = "") -> None:
    """InputError for a selector that is no rule's code or prefix (nor ALL)."""
    known = registry.lint_rule_codes()
    for selector in selectors:
        selector = selector.strip().upper()
        if selector != "ALL" and not any(code.startswith(selector) for code in known):
            raise InputError(f"{where}: unknown rule code or prefix: {selector}" if where else
                             f"unknown rule code or prefix: {selector}")


# ---- linting ---------------------------------------------------------------------------------------
def read_version(verl_root: str) -> Version | None:
    """The version of a verl tree (`<root>/verl/version/version` or `<root>/version/version`)."""
    for candidate in (os.path.join(verl_root, "verl", "version", "version"), os.path.join(verl_root, "version", "version")):
        try:
            with open(candidate, encoding="utf-8") as handle:
                return Version.maybe(handle.read().strip())
        except OSError:
            continue
    return None


def lint_source(source: SourceFile, options: LintOptions, rules: Rules) -> FileResult:
    """Lint one script already read; raises InputError for an unreadable script."""
    evaluation, runs = script_runs(source, options.verl_version, env=options.env, args=options.args, mode=options.mode,
                                   verl_root=options.verl_root)
    parsed = evaluation.parsed
    if isinstance(rules, RuleSet):
        rules = rules.for_modes(frozenset(run.mode for run in runs))
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for run in runs:
        mode = run.mode
        run_facts = Facts()  # what the rules compute about this run (its composed schema, its configs)
        for rule in rules:
            if rule.applies_to(mode):
                rule.check(LintContext(rule, run, options, findings, skipped, run_facts))
    file_facts = Facts()
    suppress = Suppressions.of(source, parsed, registry.lint_rule_codes())
    checked = frozenset(rule.code for rule in rules)
    for rule in sorted(rules, key=lambda r: r.after_others):
        rule.check_file(FileContext(rule, source, evaluation, runs, options, findings, skipped, file_facts,
                                    suppressions=suppress, checked_codes=checked))
    unique = merge_paths({f for f in findings if not suppress.silences(f)})
    return FileResult(source.path, unique, runs, None, evaluation)


def merge_paths(findings: set[Finding]) -> list[Finding]:
    """One finding per problem, sorted. Several paths of a script often reach the same launch with
    the same value set in different places (`case` branches, `if`/`else`): the same message, used
    at the same positions, written at different ones. They become one finding at the first place,
    with the others as related positions and named in the message."""
    groups: dict[tuple, list[Finding]] = {}
    alone: list[Finding] = []
    for finding in findings:
        if finding.related:
            groups.setdefault((finding.code, finding.severity, finding.message, frozenset(finding.related)), []).append(finding)
        else:
            alone.append(finding)
    for group in groups.values():
        group.sort(key=Finding.sort_key)
        first, others = group[0], group[1:]
        if not others:
            alone.append(first)
            continue
        lines = ", ".join(f"{_where(f.span, first.span)}" for f in others)
        alone.append(Finding(first.code, first.severity,
                             f"{first.message} ({len(group)} paths reach this launch with this value; also set at {lines})",
                             first.span, tuple(first.related) + tuple(f.span for f in others), first.origin, first.fix))
    return _merge_related(alone)


def _merge_related(findings: list[Finding]) -> list[Finding]:
    """One finding per place: two paths of a wrapper that reach the same problem at the same place
    with different related positions give one finding with the related positions of both."""
    merged: dict[tuple, Finding] = {}
    # Related positions break ties: the merged order is the same on every run (the findings come from a set).
    for finding in sorted(findings, key=lambda f: (Finding.sort_key(f), f.related)):
        key = (finding.code, finding.severity, finding.message, finding.span)
        prior = merged.get(key)
        if prior is None:
            merged[key] = finding
        else:
            extra = tuple(span for span in finding.related if span not in prior.related)
            merged[key] = prior._replace(related=prior.related + extra)
    return list(merged.values())


def _where(span: Span, relative_to: Span) -> str:
    return f"line {span.line}" if span.file == relative_to.file else f"{span.file}:{span.line}"


def lint_path(path: str, options: LintOptions, rules: Rules, stdin_text: bytes | None = None) -> FileResult:
    """Lint one path ("-" reads `stdin_text`); an input problem becomes `FileResult.error`.
    With a `RuleSet` (from `select_rules`) every finding then passes its code filter."""
    result = _lint_path(path, options, rules, stdin_text)
    result.notes = tuple(options.notes)
    if isinstance(rules, RuleSet):
        result.findings = [finding for finding in result.findings if rules.codes.keeps(finding)]
    return result


def _lint_path(path: str, options: LintOptions, rules: Rules, stdin_text: bytes | None) -> FileResult:
    from rlpatch.lint.config_files import is_config_path, lint_config_file

    try:
        if is_config_path(path):  # an msprobe config.json given directly: RL5xx on the file alone
            return FileResult(path, lint_config_file(path, rules))
        source = SourceFile.from_bytes("-", stdin_text or b"") if path == "-" else SourceFile.read(path)
        return lint_source(source, options, rules)
    except InputError as err:
        return FileResult(path, error=err.message)
    except RecursionError:
        return FileResult(path, error=f"{path}: script nested too deeply to read")


# ---- many files: in-process or forked workers ----------------------------------------------------
LintTask = tuple[str, LintOptions, Rules]

# Below this much script text, `--jobs` left to its default lints in-process: forking and sending
# results back costs more than the few milliseconds a handful of scripts take (a pre-commit hook).
IN_PROCESS_BYTES = 96 * 1024


def default_jobs(tasks: list[LintTask], stdin_text: bytes | None = None) -> int:
    """`--jobs` when not given: one worker per CPU (like ruff) for a big input, else in-process."""
    if len(tasks) < 2 or sum(task_sizes(tasks, stdin_text)) < IN_PROCESS_BYTES:
        return 1
    return os.cpu_count() or 1


def _findings_only(result: FileResult) -> FileResult:
    """What the reporters read. Runs and the evaluation are dropped as soon as a file is done:
    they are large to pickle back from a worker, and, kept for hundreds of files, they make every
    full garbage collection walk all of them."""
    return FileResult(result.path, result.findings, error=result.error, notes=result.notes)


Advance = Callable[[int], None]  # told how many more files are done (0: only look at the clock)


def lint_paths(tasks: list[LintTask], stdin_text: bytes | None = None, jobs: int = 1,
               progress: Advance | None = None) -> list[FileResult]:
    """Lint every task, results (findings and errors only) in task order. With `jobs > 1` and
    several tasks, forked workers share the files (like ruff); otherwise, and where fork is
    unavailable, they run in-process. `progress(n)` is called as files are done."""
    workers = min(jobs, len(tasks))
    with one_invocation():  # the trees read do not change while these files are linted (workers inherit it)
        if workers > 1 and hasattr(os, "fork"):
            return _lint_forked(tasks, stdin_text, workers, progress)
        # What exists now (the modules, rules, options) outlives the lint: frozen, the collections that
        # the lint's allocations trigger do not walk it (a few ms of a one-script cold start).
        gc.freeze()
        try:
            return [_one_done(_findings_only(lint_path(path, options, rules, stdin_text)), progress)
                    for path, options, rules in tasks]
        finally:
            gc.unfreeze()


def _one_done(result: FileResult, progress: Advance | None) -> FileResult:
    if progress is not None:
        progress(1)
    return result


def task_sizes(tasks: list[LintTask], stdin_text: bytes | None = None) -> list[int]:
    """Each task's size in bytes (0 when it cannot be read: it costs nothing to lint)."""
    sizes = []
    for path, _, _ in tasks:
        try:
            sizes.append(len(stdin_text or b"") if path == "-" else os.path.getsize(path))
        except OSError:
            sizes.append(0)
    return sizes


def _shares(tasks: list[LintTask], stdin_text: bytes | None, workers: int) -> list[list[int]]:
    """Task indices dealt to `workers` workers, biggest file first to the least loaded (sizes are
    known before the work: no queue and no round trip per file are needed to balance it)."""
    sizes = task_sizes(tasks, stdin_text)
    shares: list[list[int]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for index in sorted(range(len(tasks)), key=lambda i: -sizes[i]):
        least = loads.index(min(loads))
        shares[least].append(index)
        loads[least] += sizes[index] + 1
    return [share for share in shares if share]


def _lint_forked(tasks: list[LintTask], stdin_text: bytes | None, workers: int,
                 progress: Advance | None = None) -> list[FileResult]:
    """Fork one worker per share: it inherits the loaded rules and options (nothing to pickle on
    the way in), lints its files and sends the results back through a pipe in one piece. Cheaper
    to start than a process pool by far, which matters on a pre-commit hook's few files. With
    `progress`, each worker also writes one byte per file done to a shared pipe, read before the results."""
    import pickle
    import signal

    children: list[tuple[int, int, list[int]]] = []
    results: list[FileResult | None] = [None] * len(tasks)
    for selection in {id(rules): rules for _, _, rules in tasks if isinstance(rules, RuleSet)}.values():
        selection.for_modes(None)  # imported once here, not once in every worker
    # What exists now (modules, rules, options) is never garbage: frozen, the workers' collections
    # do not walk it, nor copy its pages (each visit of an inherited object writes to its page).
    gc.freeze()
    ticks = os.pipe() if progress is not None else None
    try:
        for share in _shares(tasks, stdin_text, workers):
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: never returns into the caller's code
                status = 1
                try:
                    os.close(read_end)
                    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
                    done = [(i, _ticked(_findings_only(lint_path(*tasks[i], stdin_text)), ticks)) for i in share]
                    if ticks is not None:  # closed before the results go: the parent's count ends at EOF
                        os.close(ticks[1])
                    with os.fdopen(write_end, "wb") as pipe:
                        pickle.dump(done, pipe, protocol=pickle.HIGHEST_PROTOCOL)
                    status = 0
                finally:
                    os._exit(status)  # no atexit handlers, no second flush of the parent's buffers
            os.close(write_end)
            children.append((pid, read_end, share))
        if ticks is not None and progress is not None:
            os.close(ticks[1])
            _count_ticks(ticks[0], progress)
        for pid, read_end, _ in children:
            with os.fdopen(read_end, "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
            if status != 0 or not data:
                raise InputError("a lint worker process died; run with --jobs 1 to see which file")
            for index, result in pickle.loads(data):
                results[index] = result
                tasks[index][1].notes.update(dict.fromkeys(result.notes))  # a worker's notes are the parent's too
    finally:
        for pid, _, _ in children:  # after an error: end the workers this call started, by PID
            try:
                if os.waitpid(pid, os.WNOHANG) == (0, 0):
                    os.kill(pid, signal.SIGTERM)
                    os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        gc.unfreeze()
    return results  # type: ignore[return-value]  # every slot is filled above, or an error was raised


def _ticked(result: FileResult, ticks: tuple[int, int] | None) -> FileResult:
    """In a worker: one byte on the progress pipe for a file done."""
    if ticks is not None:
        os.write(ticks[1], b".")
    return result


def _count_ticks(read_end: int, progress: Advance) -> None:
    """In the parent: the workers' bytes, each a file done, until every worker has closed the pipe;
    the clock is looked at every second even when no file ends."""
    import select

    with os.fdopen(read_end, "rb", buffering=0) as pipe:
        while True:
            ready, _, _ = select.select([pipe], [], [], 1.0)
            if not ready:
                progress(0)
                continue
            chunk = pipe.read(4096)
            if not chunk:
                return
            progress(len(chunk))


def exit_code(results: list[FileResult], fail_on: str, exit_zero: bool) -> int:
    if any(result.error for result in results):
        return 2
    if exit_zero:
        return 0
    threshold = SEVERITY_RANK[fail_on]
    failing = any(SEVERITY_RANK[f.severity] >= threshold for r in results for f in r.findings)
    return 1 if failing else 0


__all__ = ["CodeFilter", "check_codes", "FileResult", "LintTask", "RuleSet", "Span", "exit_code", "lint_path", "lint_paths", "lint_source",
           "rule_by_code", "rule_classes", "select_rules"]
