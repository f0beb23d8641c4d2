"""Reporters: concise | full | json | github | sarif. Columns are 1-based character columns.

Every reporter writes findings only to stdout; input errors go to stderr as one line each
(`rlpatch: error: ...`), so `--format json` / `sarif` output is always parseable. No reporter
ever says or implies "clean" when an input could not be linted: the text summaries count the
failed files instead of passing, GitHub gets an error annotation per failed file, and SARIF marks
the invocation unsuccessful.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, TextIO

from rlpatch import __version__
from rlpatch.errors import RlpatchError
from rlpatch.lint.config import find_config
from rlpatch.lint.engine import FileResult, rule_classes
from rlpatch.lint.rule import SEVERITY_LETTER, SEVERITY_RANK, Finding, Fix, LintRule
from rlpatch.output.api import shown

FORMATS = ("concise", "full", "json", "github", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def finding_dict(finding: Finding) -> dict:
    """The stable JSON object of one finding (`--format json`), with the rule page's `url` (null when
    no docs address is configured: `rlpatch rule CODE` prints the page)."""
    span = finding.span
    return {"code": finding.code, "severity": finding.severity, "message": finding.message, "file": span.file,
            "line": span.line, "column": span.column, "end_line": span.end_line, "end_column": span.end_column,
            "url": rule_url(finding.code, span.file), "fix": fix_dict(finding)}


def fix_dict(finding: Finding) -> dict | None:
    """The finding's fix (`--format json`), or None: its edits, as 1-based lines and columns."""
    fix = finding.fix
    if fix is None:
        return None
    return {"applicability": fix.applicability, "message": fix.title,
            "edits": [{"content": e.replacement, "line": e.span.line, "column": e.span.column,
                       "end_line": e.span.end_line, "end_column": e.span.end_column} for e in fix.edits]}


def rule_url(code: str, path: str) -> str | None:
    """The page of a rule, for a finding in `path`: `RLPATCH_DOCS_URL`, else `docs-url` of the
    `[tool.rlpatch]` that configures that file, else None."""
    from rlpatch.lint.docs import docs_url  # the concise format, a pre-commit hook's, shows no page

    try:
        base = find_config(os.path.dirname(os.path.abspath(path)) if path != "-" else os.getcwd())[1].get("docs_url")
    except RlpatchError:  # an unreadable pyproject.toml was reported when the file was linted
        base = None
    return docs_url(code, base if isinstance(base, str) else None)


def _findings(results: list[FileResult]) -> list[Finding]:
    return [finding for result in results for finding in result.findings]


# ANSI colours of the text formats (`--color`): the place bold, the code in its severity's colour.
_SEVERITY_COLOUR = {"error": "red", "warning": "yellow", "info": "cyan"}


def _headline(f: Finding, color: bool) -> str:
    # The file name and the message quote the script (a hostile one holds newlines and escapes).
    place = f"{shown(f.span.file)}:{f.span.line}:{f.span.column}:"
    code = f"{f.code} [{SEVERITY_LETTER[f.severity]}]"
    if color:
        import click

        place = click.style(place, bold=True)
        code = click.style(code, fg=_SEVERITY_COLOUR[f.severity], bold=True)
    return f"{place} {code} {shown(f.message)}\n"


def use_color(choice: str, to_terminal: bool, environ: Mapping[str, str] | None = None) -> bool:
    """`--color auto|always|never`: auto colours a terminal unless NO_COLOR is set (no-color.org);
    the option given on the command line wins over NO_COLOR."""
    if choice != "auto":
        return choice == "always"
    variables = os.environ if environ is None else environ
    return to_terminal and not variables.get("NO_COLOR")


def report_concise(results: list[FileResult], out: TextIO, color: bool = False) -> None:
    findings = _findings(results)
    for f in findings:
        out.write(_headline(f, color))
    _summary(results, out)


def report_full(results: list[FileResult], out: TextIO, color: bool = False) -> None:
    findings = _findings(results)
    lines_cache: dict[str, list[str]] = {}
    for f in findings:
        out.write(_headline(f, color))
        text = _line(lines_cache, f.span.file, f.span.line)
        if text is not None:
            width = max(1, (f.span.end_column - f.span.column) if f.span.end_line == f.span.line else len(text) - f.span.column + 1)
            out.write(f"  {f.span.line:>4} | {shown(text)}\n       | {' ' * (f.span.column - 1)}{'^' * width}\n")
        for span in f.related:
            out.write(f"  note: see also {shown(span.file)}:{span.line}:{span.column}\n")
        if f.fix is not None:
            out.write(f"  fix ({f.fix.applicability}): {shown(f.fix.title)}\n")
        out.write(f"  docs: {shown(rule_url(f.code, f.span.file) or f'rlpatch rule {f.code}')}\n\n")
    _summary(results, out)


def _line(cache: dict[str, list[str]], path: str, line: int) -> str | None:
    if path not in cache:
        try:
            with open(path, encoding="utf-8") as handle:
                cache[path] = handle.read().splitlines()
        except (OSError, UnicodeDecodeError):
            cache[path] = []
    lines = cache[path]
    return lines[line - 1].expandtabs(1) if 0 < line <= len(lines) else None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def summary_line(results: list[FileResult]) -> str:
    """The last line of the text formats: a pass only when every input was linted and is clean."""
    findings = len(_findings(results))
    failed = sum(1 for result in results if result.error)
    if failed:
        found = f"Found {_plural(findings, 'finding')}" if findings else "No findings"
        return f"{found}, but {_plural(failed, 'file')} could not be linted (errors on stderr)."
    if not findings:
        return "All checks passed."
    fixes = [f.fix.applicability for f in _findings(results) if f.fix is not None]
    safe, unsafe = fixes.count("safe"), fixes.count("unsafe")
    hint = f"\n[*] {safe} fixable with `rlpatch lint --fix`" if safe else ""
    if unsafe:
        hint += (f" ({unsafe} more with --unsafe-fixes)" if safe else
                 f"\n{unsafe} fixable with `rlpatch lint --fix --unsafe-fixes`")
    hint += "." if hint else ""
    return f"Found {_plural(findings, 'finding')}.{hint}"


def _summary(results: list[FileResult], out: TextIO) -> None:
    out.write(summary_line(results) + "\n")


def keep_severity(results: list[FileResult], lowest: str) -> list[FileResult]:
    """`--severity`: the findings at `lowest` or above (the others are neither shown nor counted)."""
    for result in results:
        result.findings = [f for f in result.findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK[lowest]]
    return results


def report_statistics(results: list[FileResult], out: TextIO, as_json: bool = False) -> None:
    """`--statistics`, as ruff's: how many findings each rule has, most frequent first."""
    counts: dict[str, int] = {}
    for f in _findings(results):
        counts[f.code] = counts.get(f.code, 0) + 1
    summaries = {cls.code: (cls.severity, cls.summary) for cls in rule_classes()}
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if as_json:
        import json

        from rlpatch.output.api import versioned

        json.dump(versioned({"statistics": [{"code": code, "severity": summaries.get(code, ("error", ""))[0],
                                             "summary": summaries.get(code, ("", ""))[1], "count": count}
                                            for code, count in rows]}), out, indent=2)
        out.write("\n")
        return
    width = max((len(str(count)) for _, count in rows), default=1)
    for code, count in rows:
        severity, summary = summaries.get(code, ("error", ""))
        out.write(f"{count:>{width}}\t{code}\t[{SEVERITY_LETTER[severity]}] {summary}\n")
    _summary(results, out)


def report_json(results: list[FileResult], out: TextIO) -> None:
    import json  # here: the concise output of a pre-commit hook does not need it

    from rlpatch.output.api import versioned

    json.dump(versioned({"findings": [finding_dict(f) for f in _findings(results)]}), out, indent=2)
    out.write("\n")


def report_github(results: list[FileResult], out: TextIO) -> None:
    level = {"error": "error", "warning": "warning", "info": "notice"}
    for f in _findings(results):
        s = f.span
        out.write(f"::{level[f.severity]} file={_github_property(s.file)},line={s.line},col={s.column},"
                  f"endLine={s.end_line},endColumn={s.end_column},title=rlpatch ({f.code})::{f.code} "
                  f"{_github_data(f.message)}\n")
    for result in results:  # an unlintable file must not look clean in the pull request
        if result.error:
            out.write(f"::error file={_github_property(result.path)},title=rlpatch (input error)::"
                      f"{_github_data(result.error)}\n")


def _github_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    return _github_data(text).replace(":", "%3A").replace(",", "%2C")


def repo_root(start: str) -> str:
    """The top of the git work tree containing `start` (else the current directory)."""
    current = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return os.getcwd()
        current = parent


def _uri(path: str, root: str) -> str:
    if path == "-":
        return "stdin"
    relative = os.path.relpath(os.path.abspath(path), root)
    return relative.replace(os.sep, "/")


def sarif_document(results: list[FileResult]) -> dict:
    """A SARIF 2.1.0 log with repo-relative artifact URIs (uriBaseId %SRCROOT%)."""
    root = repo_root(os.getcwd())
    classes = rule_classes()
    index = {cls.code: i for i, cls in enumerate(classes)}
    level = {"error": "error", "warning": "warning", "info": "note"}
    rules = [_sarif_rule(cls, level[cls.severity], rule_url(cls.code, "-")) for cls in classes]
    fingerprints = _Fingerprints()

    def location(span) -> dict:
        return {"physicalLocation": {
            "artifactLocation": {"uri": _uri(span.file, root), "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": span.line, "startColumn": span.column,
                       "endLine": span.end_line, "endColumn": max(span.end_column, span.column)},
        }}

    sarif_results = []
    for f in _findings(results):
        result: dict[str, Any] = {"ruleId": f.code, "level": level[f.severity], "message": {"text": f.message},
                  "locations": [location(f.span)]}
        result["partialFingerprints"] = {"rlpatch/v1": fingerprints.of(f, _uri(f.span.file, root))}
        if f.code in index:
            result["ruleIndex"] = index[f.code]
        if f.fix is not None:
            result["fixes"] = [_sarif_fix(f.fix, root)]
        if f.related:
            result["relatedLocations"] = [dict(location(s), id=i, message={"text": "used here"})
                                          for i, s in enumerate(f.related) if s.line > 0]
        sarif_results.append(result)
    notifications = [{"level": "error", "message": {"text": r.error}} for r in results if r.error]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": _driver(rules)},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": "file://" + root.rstrip("/") + "/"}},
            "columnKind": "unicodeCodePoints",
            "invocations": [{"executionSuccessful": not notifications, "toolExecutionNotifications": notifications}],
            "results": sarif_results,
        }],
    }


def _sarif_fix(fix: Fix, root: str) -> dict:
    """A SARIF fix: one artifactChange per file, each edit a replacement of a region."""
    changes: dict[str, list[dict]] = {}
    for edit in fix.edits:
        span = edit.span
        changes.setdefault(span.file, []).append({
            "deletedRegion": {"startLine": span.line, "startColumn": span.column, "endLine": span.end_line,
                              "endColumn": span.end_column},
            "insertedContent": {"text": edit.replacement}})
    return {"description": {"text": f"{fix.title} ({fix.applicability})"},
            "artifactChanges": [{"artifactLocation": {"uri": _uri(path, root), "uriBaseId": "%SRCROOT%"},
                                 "replacements": replacements} for path, replacements in changes.items()]}


def _driver(rules: list[dict]) -> dict:
    """The tool: `informationUri` only where a docs address is configured (rlpatch has no published
    site, and SARIF wants an absolute URI)."""
    driver: dict[str, Any] = {"name": "rlpatch", "version": __version__, "rules": rules}
    from rlpatch.lint.docs import docs_home

    base = find_config(os.getcwd())[1].get("docs_url")
    home = docs_home(base if isinstance(base, str) else None)
    if home:
        driver["informationUri"] = home
    return driver


class _Fingerprints:
    """`partialFingerprints` that survive unrelated edits: the rule, the file, and the text the finding
    points at (not its line number), with the occurrence of that same text in the file when it repeats."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {}
        self.seen: dict[str, int] = {}

    def of(self, finding: Finding, uri: str) -> str:
        import hashlib

        span = finding.span
        text = _line(self.lines, span.file, span.line) if span.line > 0 else None
        if text is not None and span.end_line == span.line:
            text = text[span.column - 1:max(span.end_column - 1, span.column)]
        flagged = " ".join((text if text is not None else finding.message).split())
        key = "\0".join((finding.code, uri, flagged))
        occurrence = self.seen.get(key, 0)
        self.seen[key] = occurrence + 1
        return hashlib.sha256(f"{key}\0{occurrence}".encode()).hexdigest()[:32] + ":1"


def _sarif_rule(cls: type[LintRule], level: str, url: str | None) -> dict:
    """A reportingDescriptor with the whole rule page in `help.markdown` (GitHub code scanning renders
    it beside the alert: no address needed); `helpUri` only for a configured absolute address."""
    from rlpatch.lint.docs import lint_page, render_markdown

    rule = {
        "id": cls.code,
        "name": cls.__name__,
        "shortDescription": {"text": cls.summary},
        "fullDescription": {"text": " ".join(cls.why().split()) or cls.summary},
        "help": {"text": cls.documentation(), "markdown": render_markdown(lint_page(cls))},
        "defaultConfiguration": {"level": level},
        "properties": {"tags": _tags(cls)},
    }
    if url and "://" in url:
        rule["helpUri"] = url
    return rule


def _tags(cls: type[LintRule]) -> list[str]:
    """Code scanning filters on these: the rule's family, and the dump modes it checks."""
    from rlpatch.rules import LINT_FAMILIES

    tags = ["rlpatch", LINT_FAMILIES.get(cls.code[:3], "other")]
    modes = sorted(cls.modes - {"none"})
    if len(modes) < 3:
        tags += [f"mode:{mode}" for mode in modes]
    return tags


def report_sarif(results: list[FileResult], out: TextIO) -> None:
    import json

    json.dump(sarif_document(results), out, indent=2)
    out.write("\n")


REPORTERS: dict[str, Callable[[list[FileResult], TextIO], None]] = {
    "concise": report_concise, "full": report_full, "json": report_json, "github": report_github,
    "sarif": report_sarif,
}
