"""What a lint rule is, as the lint engine sees it (the stable base for every RLxxx family).

A lint rule is one class in one module of `rules/`, in the style of Fixit:

    class RolloutTpEqualsCards(LintRule):
        \"\"\"Why the rule exists (this docstring is what `rlpatch rule RL201` prints).\"\"\"

        code = "RL201"
        severity = "error"
        modes = frozenset({"consistency"})        # dump modes it applies to (default: all)
        summary = "one line for listings"
        VALID = [Case("...script that must not trigger...")]
        INVALID = [Case("...script that must trigger...", expect=[(3, 5)])]

        def check(self, ctx: LintContext) -> None:
            tp = ctx.run.setting("actor_rollout_ref.rollout.tensor_model_parallel_size")
            if ctx.unresolved(tp):
                return
            ...
            ctx.report("message", at=tp.span, related=tp.related())

`check(ctx)` runs once per verl launch of the script (`ctx.run`, a `rlpatch.shell.api.Run`) when
the launch's mode is in `modes`; `check_file(fctx)` runs once per script after that (file-level
rules: no entry point, continuation mistakes, a summary of what stayed unknown). A rule never
prints and never raises on bad input: it calls `report(message, at=Span)` with *any* position of
*any* file (a script line, a key inside a config.json the script references: `ctx.json_position`),
so later families (RL3xx Hydra schema, RL5xx msprobe config files, RL6xx versions and patch
state) are new modules with the same shape. Options every rule can read are on `ctx.options`
(`verl_version`, `verl_root`, `allow_level`, `config_root`, `env` ...). What several rules need
and is costly to compute (a run's composed verl config, the msprobe configs it names, the target
environment's versions) is computed once and shared: `ctx.facts.get_or_compute(FACT, compute)` for
the run (or the file, in `check_file`), `ctx.target_facts` for the whole lint invocation.

The VALID/INVALID cases are tests: one parametrized test lints each case and checks that the rule
fires (at the `expect`ed 1-based line/column pairs when given) or stays silent.
"""

# No `from __future__ import annotations`: typing compiles each string annotation of a NamedTuple's
# fields (a ForwardRef each) at import, on every cold start of `rlpatch lint`; evaluated ones it takes as they are.

import os
import re
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Iterable, Literal, Mapping, NamedTuple, Sequence, TypeVar

from rlpatch.shell.api import NEWEST_VERL, Span
from rlpatch.upstream.api import Version

if TYPE_CHECKING:
    from rlpatch.lint.suppressions import Suppressions
    from rlpatch.shell.api import Evaluation, Run, Setting, SourceFile

Severity = Literal["error", "warning", "info"]
SEVERITY_LETTER: dict[str, str] = {"error": "E", "warning": "W", "info": "I"}
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "error": 2}
ALL_MODES: frozenset[str] = frozenset({"training", "inference", "consistency", "none"})
Position = Span  # re-exported for rule modules: a file, 1-based line/column, exclusive end


# The records below are NamedTuples or plain classes, not dataclasses: every rule module and the
# engine import them at each cold start of `rlpatch lint` (a pre-commit hook), and creating a
# dataclass costs about a millisecond of that start.


class Edit(NamedTuple):
    """Replace the text at `span` (which must still read `original`) with `replacement`."""

    span: Span
    original: str
    replacement: str


class Fix(NamedTuple):
    """A mechanical fix of a finding, as ruff has them: edits of the script's own text (the token,
    keeping the author's style), `safe` when it cannot change what else the script does, `unsafe`
    when it might (a variable used elsewhere too); only `--unsafe-fixes` applies those."""

    title: str
    edits: tuple[Edit, ...]
    applicability: Literal["safe", "unsafe"] = "safe"


class Finding(NamedTuple):
    """One problem at one position; `related` are secondary positions (where a value was used)."""

    code: str
    severity: Severity
    message: str
    span: Span
    related: tuple[Span, ...] = ()
    # The rule that reported it, when that is not `code` (RL3xx and RL605 say "not checked" as RL002):
    # selecting that rule brings its notes along. Not part of equality: one note, however many rules say it.
    origin: str = ""
    fix: Fix | None = None  # not part of equality either

    def sort_key(self) -> tuple:
        return (self.span.file, self.span.line, self.span.column, self.code, self.message)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Finding):
            return NotImplemented
        return self[:5] == other[:5]

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self[:5])


_NOTHING: Mapping[str, Any] = MappingProxyType({})


class Case(NamedTuple):
    """A rule's own example, run as a test.

    `files` are written next to the script (sourced scripts, msprobe config.json files, YAML);
    `options` are LintOptions fields (mode, verl_version, env, args, allow_level, ...);
    `expect` lists the (line, column) of every finding of this rule, or None for "at least one"
    (INVALID) / "none" (VALID); `messages`, when given, pins the message of each finding, in the
    order of their positions (as Fixit's expected_message); `fixed` is the script once every fix of this
    rule's findings (unsafe ones too) is applied, and it must then lint clean for this rule (as Fixit's
    expected_replacement).
    """

    script: str
    files: Mapping[str, str] = _NOTHING
    options: Mapping[str, Any] = _NOTHING
    expect: Sequence[tuple[int, int]] | None = None
    note: str = ""
    fixed: str | None = None
    messages: Sequence[str] | None = None


FactValue = TypeVar("FactValue")


class Fact(Generic[FactValue]):
    """The name of one kind of computed fact (a run's composed-schema verdict, a project's installed
    version ...); its type parameter is the type of the value, so that `Facts` hands it back typed."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Fact({self.name!r})"


class Facts:
    """Facts the rules share, each computed once, on the first rule's ask, then kept for the scope
    that owns this cache: the engine gives every run of a file its own (`LintContext.facts`), the
    file one (`FileContext.facts`), and the options one for the whole lint invocation
    (`LintOptions.target_facts`: the target environment's versions and patch states)."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[tuple[Fact[Any], Hashable], Any] = {}

    def get_or_compute(self, fact: Fact[FactValue], compute: Callable[[], FactValue],
                       about: Hashable = None) -> FactValue:
        """The value of `fact` (for `about`, when one fact has several subjects), computed once."""
        key = (fact, about)
        if key in self._known:
            return self._known[key]
        value = self._known[key] = compute()
        return value


# The trees a lint reads (verl's config directory, a released wheel's tree) do not change during one
# lint invocation, as `LintOptions.target_facts` says of the target environment, yet every run of
# every script asks about them (a script's eight `if`/`case` paths are eight runs). While the engine
# lints (`with one_invocation():` in `engine.lint_paths`) what `per_invocation` computes is kept;
# outside it (a library call, a test that edits a tree between two calls) nothing is.
_invocation: Facts | None = None


@contextmanager
def one_invocation() -> Iterator[None]:
    """Keep `per_invocation` facts while the block runs (inside another, the outer one's)."""
    global _invocation
    outer = _invocation
    _invocation = outer if outer is not None else Facts()
    try:
        yield
    finally:
        _invocation = outer


def per_invocation(fact: Fact[FactValue], compute: Callable[[], FactValue], about: Hashable = None) -> FactValue:
    """`compute()`, once per lint invocation (for `about`); every time outside one."""
    if _invocation is None:
        return compute()
    return _invocation.get_or_compute(fact, compute, about)


class LintOptions:
    """What the user told `rlpatch lint` (CLI, then `[tool.rlpatch]`), visible to every rule: typed,
    and frozen once built (`replace` makes a changed copy). A plain class with slots, not a dataclass,
    for the cold start noted above."""

    __slots__ = ("verl_version", "verl_root", "mode", "env", "args", "allow_level", "config_root", "python",
                 "sglang_root", "vllm_ascend_root", "sglang_version", "vllm_ascend_version", "verl_version_given",
                 "verl_default", "target_facts", "notes")
    verl_version: Version  # the newest released verl unless told otherwise
    verl_root: str | None
    mode: str | None
    env: dict[str, str]
    args: list[str]
    allow_level: frozenset[str]
    config_root: str | None
    python: str | None  # the target interpreter (`--python`), whose installed trees RL6xx and RL3xx ask
    sglang_root: str | None
    vllm_ascend_root: str | None
    sglang_version: Version | None  # told by the caller (gen): no tree needed for it
    vllm_ascend_version: Version | None
    verl_version_given: str | None  # `--verl-version` as given (RL3xx then checks that release's config)
    verl_default: str | None  # `--verl-default`: which verl RL3xx checks when none is named
    target_facts: Facts
    notes: dict[str, None]

    def __init__(self, verl_version: Version = NEWEST_VERL, verl_root: str | None = None, mode: str | None = None,
                 env: dict[str, str] | None = None, args: list[str] | None = None,
                 allow_level: frozenset[str] = frozenset(), config_root: str | None = None, *,
                 python: str | None = None, sglang_root: str | None = None, vllm_ascend_root: str | None = None,
                 sglang_version: Version | None = None, vllm_ascend_version: Version | None = None,
                 verl_version_given: str | None = None, verl_default: str | None = None) -> None:
        values = dict(verl_version=verl_version, verl_root=verl_root, mode=mode, env={} if env is None else env,
                      args=[] if args is None else args, allow_level=allow_level, config_root=config_root,
                      python=python, sglang_root=sglang_root, vllm_ascend_root=vllm_ascend_root,
                      sglang_version=sglang_version, vllm_ascend_version=vllm_ascend_version,
                      verl_version_given=verl_version_given, verl_default=verl_default,
                      # Answers about the target environment, kept for one lint invocation (this options
                      # object): the trees may change between invocations, never during one.
                      target_facts=Facts(),
                      # One-line notes about the whole invocation (which verl RL3xx checked against), printed
                      # once: an ordered set, filled by the rules and, from forked workers, by the engine.
                      notes={})
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"LintOptions is frozen: cannot set {name} (use replace)")

    def replace(self, **changes: Any) -> "LintOptions":
        """A copy with `changes`, and its own invocation facts and notes."""
        return LintOptions(**{**self._given(), **changes})

    def _given(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__ if name not in ("target_facts", "notes")}

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (a spawned worker, a test) as what was given: slots would be restored through the
        # frozen __setattr__.
        return (_options_from, (self._given(),))

    def __repr__(self) -> str:
        return f"LintOptions(verl_version={self.verl_version}, verl_root={self.verl_root!r}, mode={self.mode!r})"


def _options_from(given: dict[str, Any]) -> LintOptions:
    return LintOptions(**given)


class Skipped(NamedTuple):
    """A rule that could not decide because a value it needs is unknown (reported by RL002)."""

    code: str
    what: str
    span: Span


class _Reporter:
    """What both contexts share: reporting findings and reading files the script points at."""

    def __init__(self, rule: "LintRule", options: LintOptions, findings: list[Finding], skipped: list[Skipped],
                 script_path: str, facts: Facts | None) -> None:
        self.rule = rule
        self.options = options
        self.findings = findings
        self.skipped = skipped
        self.script_path = script_path
        self.facts = Facts() if facts is None else facts

    @property
    def target_facts(self) -> Facts:
        """Facts about the target environment, shared by every file of this lint invocation."""
        return self.options.target_facts

    def report(self, message: str, at: Span, *, severity: Severity | None = None,
               related: Iterable[Span] = (), code: str | None = None, fix: Fix | None = None) -> None:
        """Record a finding of this rule at any position of any file (with its fix, when it has one)."""
        code = code or self.rule.code
        self.findings.append(Finding(code, severity or self.rule.severity, message, at,
                                     tuple(s for s in related if s != at), "" if code == self.rule.code else self.rule.code,
                                     fix))

    def resolve_path(self, text: str) -> str:
        """A path written in the script, as the linter can open it (relative to the script or --config-root)."""
        if os.path.isabs(text):
            return text
        base = self.options.config_root or os.path.dirname(self.script_path) or "."
        return os.path.normpath(os.path.join(base, text))

    def read_json(self, path: str) -> tuple[Any, str] | None:
        """(parsed JSON, text) of a file the script references, or None when unreadable or not JSON."""
        import json  # here: most scripts reference no JSON file

        from rlpatch.errors import InputError
        from rlpatch.msprobe_config.api import read_config

        try:  # a regular file within the config size limit only: a FIFO would block, /dev/zero never ends
            text = read_config(path).decode("utf-8")
            return json.loads(text), text
        except (InputError, ValueError, RecursionError):
            return None

    @staticmethod
    def json_position(path: str, text: str, key: str) -> Span:
        """The position of `"key":` inside a JSON text (first occurrence), else the file's first line."""
        match = re.search(r'"' + re.escape(key) + r'"\s*:', text)
        if not match:
            return Span(path, 1, 1, 1, 2)
        line = text.count("\n", 0, match.start()) + 1
        column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
        return Span(path, line, column, line, column + len(key) + 2)


class LintContext(_Reporter):
    """Passed to `LintRule.check` for one verl launch; `facts` are this run's, shared by every rule."""

    def __init__(self, rule: "LintRule", run: "Run", options: LintOptions, findings: list[Finding],
                 skipped: list[Skipped], facts: Facts | None = None) -> None:
        super().__init__(rule, options, findings, skipped, run.file, facts)
        self.run = run

    def unresolved(self, *settings: "Setting") -> bool:
        """True (and noted for RL002) when any of the settings is unknown: the rule must not guess."""
        unknown = [s for s in settings if not s.known]
        for setting in unknown:
            self.skipped.append(Skipped(self.rule.code, f"{setting.key}={setting.desc or '<unknown>'}", setting.span))
        return bool(unknown)


class FileContext(_Reporter):
    """Passed to `LintRule.check_file` once per script, after every launch was checked; `facts` are
    the file's, shared by every rule."""

    def __init__(self, rule: "LintRule", source: "SourceFile", evaluation: "Evaluation", runs: list["Run"],
                 options: LintOptions, findings: list[Finding], skipped: list[Skipped],
                 facts: Facts | None = None, *, suppressions: "Suppressions | None" = None,
                 checked_codes: frozenset[str] = frozenset()) -> None:
        super().__init__(rule, options, findings, skipped, source.path, facts)
        self.source = source
        self.evaluation = evaluation
        self.runs = runs
        self.suppressions = suppressions  # the script's `# rlpatch: disable=` comments (RL005 reads them)
        self.checked_codes = checked_codes  # the codes of the rules that checked this script


class LintRule:
    """Base class of every lint rule; see the module docstring."""

    code: ClassVar[str]
    severity: ClassVar[Severity] = "error"
    modes: ClassVar[frozenset[str]] = ALL_MODES
    summary: ClassVar[str] = ""
    VALID: ClassVar[Sequence[Case]] = ()
    INVALID: ClassVar[Sequence[Case]] = ()
    after_others: ClassVar[bool] = False  # check_file runs after every other rule's (RL002 summarises them)
    cases_need_every_rule: ClassVar[bool] = False  # its cases are linted with every rule selected (RL005 judges theirs)

    def check(self, ctx: LintContext) -> None:
        """Called once per verl launch whose mode is in `modes`."""

    def check_file(self, ctx: FileContext) -> None:
        """Called once per script after all launches were checked."""

    @classmethod
    def applies_to(cls, mode: str) -> bool:
        return mode in cls.modes

    @classmethod
    def why(cls) -> str:
        """The rule's explanation: the Why section of its module docstring (else the docstring without its title)."""
        import inspect
        import sys

        from rlpatch.lint.docs import parse_docstring

        module = sys.modules.get(cls.__module__)
        doc = inspect.cleandoc(cls.__doc__ or (module.__doc__ if module else "") or "")
        _, sections, _ = parse_docstring(doc)
        if sections.get("Why"):  # a rule page's docstring: its "## Why" section
            return sections["Why"]
        first, _, rest = doc.partition("\n")
        return rest.strip() if first.startswith(cls.code) else doc

    @classmethod
    def documentation(cls) -> str:
        """The rule's page as `rlpatch rule CODE` prints it (rlpatch.lint.docs: the module docstring's
        sections, an INVALID and a VALID case as bad and good examples, options, how to silence)."""
        from rlpatch.lint.docs import lint_page, render_text

        return render_text(lint_page(cls))
