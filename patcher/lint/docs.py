"""Rule pages: one structure per rule with fixed sections, rendered as text (`rlpatch rule CODE`) and
as Markdown (the docs site, `python -m rlpatch.lint.docs_site`).

A rule module's docstring is its page. After the title line (`RL201: ...` / `verl-engine-fsdp: ...`)
it holds `## Section` blocks with the names of `AUTHORED_LINT` / `AUTHORED_PATCH`; the rest of a page
is generated from the rule itself, so it cannot disagree with the code: the examples are the rule's
own INVALID (bad) and VALID (good) cases, the options and versions come from its metadata, and the
silencing and revert lines are the commands that really do it. Layout after ruff's and ShellCheck's
rule pages. Cheap to import: `rlpatch lint` imports it for the `url` of each finding.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from typing import Any, Iterable, NamedTuple, Sequence

LINT_SECTIONS = ("What it does", "Why", "Example", "Use instead", "Exceptions and how to silence", "Options",
                 "References")
FIX_SECTION = "Fix"  # after "Use instead", on the page of a rule whose cases pin a fix
PATCH_SECTIONS = ("What it patches", "Why", "Example", "Versions", "Which trainer runs it", "How to revert and verify",
                  "References")
# What the docstring says in its own words (the other sections are generated, optionally with a lead-in).
AUTHORED_LINT = ("What it does", "Why", "Use instead", "Exceptions", "Options", "References")
REQUIRED_LINT = ("What it does", "Why", "Use instead")
AUTHORED_PATCH = ("What it patches", "Why", "Versions", "Trainer", "References")
REQUIRED_PATCH = ("What it patches", "Why")
DOCS_URL_ENV = "RLPATCH_DOCS_URL"
PAGES_FOLDER = "rules"  # inside docs/: docs/rules/RL201.md
_HEADING = re.compile(r"^## (.+?)\s*$", re.M)
_CODE_MENTION = re.compile(r"\b(RL\d{3})\b")
_ROOT_FLAGS = {"verl_root": ("verl", "--verl-root"), "sglang_root": ("SGLang", "--sglang-root"),
               "vllm_ascend_root": ("vLLM-Ascend", "--vllm-ascend-root")}
_VERSIONED_TREE = re.compile(r"^(?P<package>[a-z-]+?)-(?P<version>\d[\w.]*?)(?:-msprobe-(?P<msprobe>\d[\w.]*))?$")


class Example(NamedTuple):
    """A case as a page shows it: the script, the files beside it, and how it is linted (in words)."""

    script: str
    files: tuple[tuple[str, str], ...]
    context: tuple[str, ...]
    note: str = ""  # the case's own note, after it
    caption: str = ""  # what the example is, before it (patch rules: patched / refused)


class Section(NamedTuple):
    title: str
    text: str  # prose (Markdown-compatible: backticks for code)
    examples: tuple[Example, ...] = ()


class Page(NamedTuple):
    code: str
    heading: str  # the first line of `rlpatch rule CODE`
    title: str  # the page title
    sections: tuple[Section, ...]


# ---- the docstring ---------------------------------------------------------------------------------------


def parse_docstring(doc: str) -> tuple[str, dict[str, str], str]:
    """(title line, {section: text}, text before the first section) of a rule module's docstring."""
    doc = textwrap.dedent(doc or "").strip("\n")
    title, _, body = doc.partition("\n")
    parts = _HEADING.split(body)
    sections = {parts[i].strip(): textwrap.dedent(parts[i + 1]).strip() for i in range(1, len(parts) - 1, 2)}
    return title.strip(), sections, parts[0].strip()


def docstring_problems(doc: str, authored: Sequence[str], required: Sequence[str]) -> list[str]:
    """What keeps a docstring from being a page: unknown or empty sections, missing ones, stray text."""
    _, sections, stray = parse_docstring(doc)
    problems = [f"text before the first section: {stray[:40]!r}"] if stray else []
    problems += [f"unknown section {name!r} (known: {', '.join(authored)})" for name in sections if name not in authored]
    problems += [f"section {name!r} is missing or empty" for name in required if not sections.get(name)]
    return problems


def _module_doc(cls: type) -> str:
    module = sys.modules.get(cls.__module__)
    return (module.__doc__ if module else "") or ""


# ---- lint rules ------------------------------------------------------------------------------------------


def lint_page(cls: Any) -> Page:
    """The page of a lint rule class (`rlpatch.lint.rule.LintRule`)."""
    from rlpatch.lint.rule import ALL_MODES, SEVERITY_LETTER

    _, authored, _ = parse_docstring(_module_doc(cls))
    modes = "all modes" if cls.modes == ALL_MODES else ", ".join(sorted(cls.modes))
    bad, good = example_pair(cls.INVALID, cls.VALID)
    sections = (
        Section("What it does", authored.get("What it does", cls.summary)),
        Section("Why", authored.get("Why", "")),
        Section("Example", "A script this rule reports:", (bad,) if bad else ()),
        Section("Use instead", authored.get("Use instead", ""), (good,) if good else ()),
        *_fix_sections(cls),
        Section("Exceptions and how to silence", _silence_text(cls, authored.get("Exceptions", ""))),
        Section("Options", _options_text(cls, modes, authored.get("Options", ""))),
        Section("References", _references_text(cls.code, authored)),
    )
    return Page(cls.code, f"{cls.code} ({SEVERITY_LETTER[cls.severity]}, {modes}): {cls.summary}",
                f"{cls.code}: {cls.summary}", sections)


def example_pair(invalid: Sequence[Any], valid: Sequence[Any]) -> tuple[Example | None, Example | None]:
    """The bad example (the first INVALID case, the one the mode tests use) and the good one: the VALID
    case that differs from it in its script, linted the same way when one is (then the difference is
    the fix); a good script identical to the bad one would teach nothing."""
    bad = invalid[0] if invalid else None
    if bad is None or not valid:
        return (case_example(bad) if bad else None), (case_example(valid[0]) if valid else None)
    ranked = sorted(enumerate(valid), key=lambda item: (item[1].script.strip() == bad.script.strip(),
                                                          dict(item[1].options) != dict(bad.options), item[0]))
    return case_example(bad), case_example(ranked[0][1])


def case_example(case: Any) -> Example:
    """A Case in words: never a dict repr, never a path of this checkout (fixture trees are named by
    the option that gives them and, when the tree's name says it, the version)."""
    return Example(case.script.strip("\n"), tuple(case.files.items()), tuple(_context(case.options)), case.note)


def _context(options: Any) -> Iterable[str]:
    for key, value in options.items():
        if key == "extra":
            yield from _context(value)
        elif key in _ROOT_FLAGS or key == "python":
            yield _tree_phrase(key, str(value))
        elif key in ("allow_level", "env", "args"):
            yield from _list_phrases(key, value)
        else:
            yield f"--{key.replace('_', '-')} {value}"


def _tree_phrase(key: str, path: str) -> str:
    if key == "python":
        return "a target interpreter given (--python)"
    package, flag = _ROOT_FLAGS[key]
    article = "an" if package == "SGLang" else "a"
    match = _VERSIONED_TREE.match(os.path.basename(path.rstrip("/")))
    if match is None:
        return f"{article} {package} tree given ({flag})"
    msprobe = f" with mindstudio-probe {match['msprobe']}" if match["msprobe"] else ""
    return f"{article} {package} {match['version']} tree{msprobe} given ({flag})"


def _list_phrases(key: str, value: Any) -> Iterable[str]:
    if key == "env":
        yield from (f"--env {name}={text}" for name, text in dict(value).items())
    elif key == "args":
        yield "-- " + " ".join(str(item) for item in value)
    else:
        yield from (f"--allow-level {level}" for level in value)


def _fix_sections(cls: Any) -> tuple[Section, ...]:
    """"Fix", for a rule whose cases pin a fix: what `--fix` writes for the first of them."""
    fixed = [case for case in cls.INVALID if case.fixed is not None]
    if not fixed:
        return ()
    unsafe = [case.note for case in fixed if "unsafe" in case.note]
    text = ("`rlpatch lint --fix` edits the value or the token where the script writes it, and nothing else "
            "(`--diff` shows the edit first). " + ("Some of its fixes are unsafe (" + "; ".join(unsafe) +
                                                   "): only `--unsafe-fixes` applies them." if unsafe else
                                                   "Its fix is safe: it changes nothing else the script does."))
    first = fixed[0]
    return (Section(FIX_SECTION, text, (case_example(first._replace(script=first.fixed, note="after --fix")),)),)


def _silence_text(cls: Any, exceptions: str) -> str:
    notes = [case.note for case in cls.VALID if case.note]
    parts = [exceptions] if exceptions else []
    if notes:
        parts.append("Not reported:\n\n" + "\n".join(f"- {note}" for note in notes))
    parts.append(f"To silence one command, put `# rlpatch: disable={cls.code}` on its own line right before it; "
                 f"for a whole script, `# rlpatch: disable-file={cls.code}` before its first command. "
                 f"For every script: `rlpatch lint --ignore {cls.code}`, or `ignore = [\"{cls.code}\"]` in "
                 "`[tool.rlpatch]` of `pyproject.toml`.")
    return "\n\n".join(parts)


def _options_text(cls: Any, modes: str, lead: str) -> str:
    flags = sorted({phrase.split()[0] if phrase.startswith("--") else phrase.split("(")[-1].rstrip(")")
                    for case in [*cls.VALID, *cls.INVALID] for phrase in _context(case.options)} - {"--mode"})
    parts = [lead] if lead else []
    parts.append(f"Runs in dump modes: {modes} (detected from the script, or `--mode`). Severity: {cls.severity} "
                 f"(`--fail-on` decides which severities fail the run); selected with `--select {cls.code}` or "
                 f"a prefix such as `--select {cls.code[:3]}`.")
    if flags:
        parts.append("Reads: " + ", ".join(f"`{flag}`" for flag in flags) + " (or the same keys in `[tool.rlpatch]`).")
    return "\n\n".join(parts)


def _references_text(code: str, authored: dict[str, str]) -> str:
    mentioned = sorted({found for text in authored.values() for found in _CODE_MENTION.findall(text)} - {code})
    parts = [authored["References"]] if authored.get("References") else []
    if mentioned:
        parts.append("Related rules: " + ", ".join(f"[{other}]({other}.md)" for other in mentioned) + ".")
    parts.append("[All rules](index.md): `rlpatch rule` lists the lint rules, `rlpatch rules` the patch rules; "
                 "`rlpatch lint --help` has the options.")
    return "\n\n".join(parts)


# ---- patch rules -----------------------------------------------------------------------------------------

_ROOT_OPTION = {"verl": "--verl-root", "sglang": "--sglang-root", "vllm_ascend": "--vllm-ascend-root"}


def patch_page(rule: Any) -> Page:
    """The page of a patch rule instance (`rlpatch.patch.rule.PatchRule`)."""
    module = sys.modules[type(rule).__module__]
    _, authored, _ = parse_docstring(module.__doc__ or "")
    root = _ROOT_OPTION.get(rule.package, "--verl-root")
    # A patch rule's cases are PatchCase objects (rlpatch.patch.rule, never imported here: it needs libcst).
    examples = tuple(Example(textwrap.dedent(case.source).strip("\n"), (), (), caption=caption)
                     for cases, caption in ((rule.VALID, "Patched"), (rule.INVALID, "Refused (the anchor is not there)"))
                     if cases for case in cases[:1])
    versions = f"Supported: {rule.versions}." + (f"\n\n{authored['Versions']}" if authored.get("Versions") else "")
    trainer = f"{(rule.trainer or 'not stated')[:1].upper()}{(rule.trainer or 'not stated')[1:]}." + (f"\n\n{authored['Trainer']}" if authored.get("Trainer") else "")
    files = "\n".join(f"- `{path}`" for path in rule.files)
    sections = (
        Section("What it patches", authored.get("What it patches", rule.summary()) + f"\n\nFiles:\n\n{files}"),
        Section("Why", authored.get("Why", "")),
        Section("Example", "The upstream shape the rule patches, and one it refuses:", examples),
        Section("Versions", versions),
        Section("Which trainer runs it", trainer),
        Section("How to revert and verify", _revert_text(rule, root)),
        Section("References", _patch_references(authored)),
    )
    modes = ", ".join(sorted(rule.modes))
    return Page(rule.id, f"{rule.id} ({rule.package}; {modes}): {rule.summary()}", f"{rule.id}: {rule.summary()}",
                sections)


def _revert_text(rule: Any, root: str) -> str:
    mode = sorted(rule.modes)[0]
    return (f"`rlpatch verify --rules {rule.id} {root} ROOT` checks structurally that the patch is in place "
            f"(exit 1 when not); `rlpatch status` says `applied`, `absent`, `partial`, `drifted` or `not-applicable`. "
            f"`rlpatch revert --rules {rule.id} {root} ROOT` restores every file byte for byte. It is applied by "
            f"`rlpatch apply --mode {mode} {root} ROOT` with the rest of its mode's set (`rlpatch diff` shows the "
            "edits first; without a root, the tree the target Python imports is used).")


def _patch_references(authored: dict[str, str]) -> str:
    parts = [authored["References"]] if authored.get("References") else []
    parts.append("[All rules](index.md): `rlpatch rules` lists the patch rules with their files, versions and trainers.")
    return "\n\n".join(parts)


# ---- lookup and URLs -------------------------------------------------------------------------------------


def page_for(code: str) -> Page | None:
    """The page of a lint rule code or a patch rule id (patch rules import libcst: only when asked)."""
    from rlpatch import registry

    upper = code.upper()
    if upper in registry.lint_rule_codes():
        return lint_page(next(cls for cls in registry.lint_rule_classes() if cls.code == upper))
    if upper.startswith("RL"):
        return None
    rule = next((rule for rule in registry.patch_rules() if rule.id == code), None)
    return None if rule is None else patch_page(rule)


def docs_url(code: str, base: str | None = None) -> str | None:
    """The address of a rule's page on a built docs site, when one is configured (`RLPATCH_DOCS_URL`,
    else `docs-url` in `[tool.rlpatch]`, given as `base`): `{base}/rules/CODE.html`. None otherwise:
    rlpatch has no published site, and a path inside its repository means nothing to a user who
    installed the package."""
    home = docs_home(base)
    return f"{home}{PAGES_FOLDER}/{code}.html" if home else None


def docs_home(base: str | None = None) -> str | None:
    """The docs site's address, when one is configured."""
    base = os.environ.get(DOCS_URL_ENV) or base
    return base.rstrip("/") + "/" if base else None


# ---- rendering -------------------------------------------------------------------------------------------


def render_text(page: Page, base: str | None = None) -> str:
    """What `rlpatch rule CODE` prints."""
    out = [page.heading]
    for section in page.sections:
        out += ["", section.title, "-" * len(section.title)]
        if section.text:
            out += ["", _plain(section.text)]
        for example in section.examples:
            out += ["", *_example_text(example)]
    url = docs_url(page.code, base)
    if url:
        out += ["", f"Documentation: {url}"]
    return "\n".join(out).rstrip() + "\n"


def _plain(text: str) -> str:
    """Prose for a terminal: a link to another page is its name, a web link "name (address)", and
    long generated lines are wrapped."""
    text = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", lambda m: m[1] if m[2].endswith(".md") else f"{m[1]} ({m[2]})", text)
    return "\n".join(_wrap(line) for line in text.splitlines())


def _wrap(line: str) -> str:
    if len(line) <= 100:
        return line
    indent = "  " if line.startswith("- ") else ""
    return textwrap.fill(line, 100, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def _example_text(example: Example) -> list[str]:
    lines = [f"{example.caption}:", ""] if example.caption else []
    lines += [textwrap.indent(example.script, "    ", lambda line: bool(line.strip()))]
    for name, text in example.files:
        lines += ["", f"    with {name}:", textwrap.indent(text.strip("\n"), "    ", lambda line: bool(line.strip()))]
    if example.context:
        lines += ["", f"    linted with {', '.join(example.context)}"]
    if example.note:
        lines += [f"    ({example.note})"]
    return lines


def render_markdown(page: Page) -> str:
    """The docs site's page (generated: never edited by hand)."""
    out = [f"# {page.title}", "", f"`{page.heading}`", ""]
    for section in page.sections:
        out += [f"## {section.title}", ""]
        if section.text:
            out += [_markdown_prose(section.text), ""]
        for example in section.examples:
            out += _example_markdown(example)
    return "\n".join(out).rstrip() + "\n"


def _markdown_prose(text: str) -> str:
    """Docstring prose as Markdown: a list needs an empty line before its first item."""
    lines = text.splitlines()
    out: list[str] = []
    for index, line in enumerate(lines):
        previous = lines[index - 1] if index else ""
        if line.startswith("- ") and previous.strip() and not previous.startswith(("- ", "  ")):
            out.append("")
        out.append(line)
    return "\n".join(out)


def _fence(text: str, language: str) -> list[str]:
    fence = "~~~~" if "```" in text else "```"
    return [f"{fence}{language}", text.strip("\n"), fence, ""]


def _example_markdown(example: Example) -> list[str]:
    out = [f"{example.caption}:", ""] if example.caption else []
    out += _fence(example.script, "sh" if "\n" in example.script or "=" in example.script else "")
    for name, text in example.files:
        language = "json" if name.endswith(".json") else ("yaml" if name.endswith((".yaml", ".yml")) else "")
        out += [f"With `{name}`:", "", *_fence(text, language)]
    if example.context:
        out += ["Linted with " + ", ".join(f"`{part}`" if part.startswith("-") else part for part in example.context) + ".",
                ""]
    if example.note:
        out += [f"({example.note})", ""]
    return out
