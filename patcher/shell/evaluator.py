"""Walk a bash syntax tree (tree-sitter-bash) in file order, with bash semantics, never executing.

The evaluator keeps variables (scalars and arrays, exported or not), functions and positional
parameters, follows `source FILE` and `bash FILE args`, and records every command that launches
a verl entry point as a `Launch` with its fully expanded argv. Control flow whose condition is
unknown (`if [ "$BACKEND" = megatron ]` with BACKEND from the environment) is *forked*: the
script is evaluated once per plausible path (re-run with a different choice at each unknown
decision, depth-first, capped), so each launch a script can make is seen with consistent values.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from rlpatch.errors import InputError
from rlpatch.shell.control import PathExit, ScopeReturn
from rlpatch.shell.launch import Launch
from rlpatch.shell.parse import ParsedScript, parse_file
from rlpatch.shell.pieces import Piece, Value, Variables, Word
from rlpatch.shell.results import Evaluation, Unknown
from rlpatch.shell.source import SourceFile, Span
from rlpatch.shell.statements import Shell

MAX_PATHS = 16
MAX_DECISIONS = 48
MAX_STEPS = 20000


class Chooser:
    """Replays a plan of choices and records the decisions of one path."""

    def __init__(self, plan: list[int]) -> None:
        self.plan = plan
        self.trace: list[tuple[int, int]] = []

    def choose(self, options: int) -> int:
        if len(self.trace) >= MAX_DECISIONS:
            return 0
        index = len(self.trace)
        choice = self.plan[index] if index < len(self.plan) else 0
        self.trace.append((choice, options))
        return choice

    def next_plan(self) -> list[int] | None:
        for index in range(len(self.trace) - 1, -1, -1):
            choice, options = self.trace[index]
            if choice + 1 < options:
                return [c for c, _ in self.trace[:index]] + [choice + 1]
        return None


class Options:
    """What the script starts with. (Not a dataclass: created at every cold start of `rlpatch lint`.)"""

    __slots__ = ("env", "args")

    def __init__(self, env: dict[str, str] | None = None, args: list[str] | None = None) -> None:
        self.env: dict[str, str] = {} if env is None else env  # --env / --use-env: the starting environment
        self.args: list[str] = [] if args is None else args  # `-- extra overrides`: the script's "$@"


class PathRun:
    """The state shared by all shells of one path, plus the cross-path caches."""

    def __init__(self, evaluator: "Evaluator", chooser: Chooser) -> None:
        self.evaluator = evaluator
        self.chooser = chooser
        self.launches: list[Launch] = []
        self.unknowns: list[Unknown] = []
        self.stack: list[str] = []
        self.steps = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise PathExit

    def launch(self, launch: Launch) -> None:
        self.launches.append(launch)

    def unknown(self, what: str, span: Span, args: tuple[str, ...] = ()) -> None:
        self.unknowns.append(Unknown(what, span, args))

    def resolve(self, target: str, from_file: str) -> str | None:
        return self.evaluator.resolve(target, from_file)

    def load(self, path: str) -> tuple[SourceFile, ParsedScript] | None:
        return self.evaluator.load(path)


class Evaluator:
    """Evaluates one top-level script over all its plausible paths."""

    def __init__(self, options: Options | None = None) -> None:
        self.options = options or Options()
        self.cache: dict[str, tuple[SourceFile, ParsedScript] | None] = {}

    def resolve(self, target: str, from_file: str) -> str | None:
        """The file `bash/source TARGET` runs: relative to the script's folder, then to each folder
        above it (verl's scripts are run from the repository top: `bash tests/special_e2e/...`),
        then to the current directory."""
        if os.path.isabs(target):
            return target if os.path.isfile(target) else None
        directory = os.path.dirname(from_file) or "."
        for _ in range(12):
            candidate = os.path.normpath(os.path.join(directory, target))
            if os.path.isfile(candidate):
                return candidate
            parent = os.path.dirname(os.path.abspath(directory))
            if parent == os.path.abspath(directory):
                break
            directory = os.path.relpath(parent) if not os.path.isabs(from_file) else parent
        return os.path.normpath(target) if os.path.isfile(target) else None

    def load(self, path: str) -> tuple[SourceFile, ParsedScript] | None:
        if path not in self.cache:
            try:
                source = SourceFile.read(path)
                self.cache[path] = (source, parse_file(source))
            except Exception:  # noqa: BLE001 - a followed file we cannot read is simply not followed
                self.cache[path] = None
        return self.cache[path]

    def evaluate(self, source: SourceFile, parsed: ParsedScript) -> Evaluation:
        result = Evaluation(source, parsed)
        plan: list[int] | None = []
        seen: set[tuple] = set()
        while plan is not None and result.paths < MAX_PATHS:
            chooser = Chooser(plan)
            run = PathRun(self, chooser)
            shell = Shell(run, source, parsed, self.initial_variables(source), self.initial_args(source), 0)
            shell.args_known = bool(self.options.args)
            run.stack.append(source.path)
            try:
                shell.run_node(parsed.tree.root_node)
            except (PathExit, ScopeReturn, RecursionError):
                pass
            result.paths += 1
            for launch in run.launches:
                key = launch.identity()
                if key not in seen:
                    seen.add(key)
                    result.launches.append(launch)
            known = {(u.what, u.span) for u in result.unknowns}
            result.unknowns.extend(u for u in run.unknowns if (u.what, u.span) not in known)
            plan = chooser.next_plan()
        return result

    def initial_variables(self, source: SourceFile) -> Variables:
        origin = Span("<env>", 1, 1, 1, 1)
        return {name: Value(scalar=(Piece(text, origin),), span=origin, exported=True)
                for name, text in self.options.env.items()}

    def initial_args(self, source: SourceFile) -> list[Word]:
        origin = Span("<command line>", 1, 1, 1, 1)
        return [(Piece(text, origin),) for text in self.options.args]


def evaluate_source(source: SourceFile, options: Options | None = None) -> Evaluation:
    """Parse and evaluate one script (raises InputError for unreadable input)."""
    return Evaluator(options).evaluate(source, parse_file(source))


def env_assignments(pairs: Iterable[object], where: str = "--env") -> dict[str, str]:
    """The environment a script starts with, from `KEY=VALUE` words (`--env`, repeatable, as `lint`,
    `gen` and `doctor` take it; later words win, as in `K=1 K=2 bash run.sh`)."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, eq, value = str(pair).partition("=")
        if not eq or not name:
            raise InputError(f"{where}: expected KEY=VALUE, got {pair!r}")
        env[name] = value
    return env
