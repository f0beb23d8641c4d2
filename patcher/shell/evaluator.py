"""Walk a bash syntax tree (tree-sitter-bash) in file order, with bash semantics, never executing.

The evaluator keeps variables (scalars and arrays, exported or not), functions and positional
parameters, follows `source FILE` and `bash FILE args`, and records every command that launches
a verl entry point as a `Launch` with its fully expanded argv. Control flow whose condition is
unknown (`if [ "$BACKEND" = megatron ]` with BACKEND from the environment) is *forked*: the
script is evaluated once per plausible path (re-run with a different choice at each unknown
decision, depth-first, capped), so each launch a script can make is seen with consistent values.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from typing import Iterator

from rlpatch.shell.launch import Launch, find_launch
from rlpatch.shell.parse import ParsedScript, parse_file
from rlpatch.shell.source import SourceFile, Span
from rlpatch.shell.words import Expander, Piece, Value, Word, word_text

MAX_PATHS = 16
MAX_DECISIONS = 48
MAX_INCLUDE_DEPTH = 8
MAX_LOOP_ITEMS = 16
MAX_STEPS = 20000

_SKIP_ARG_TYPES = {"file_redirect", "heredoc_redirect", "herestring_redirect", "comment"}


class _Exit(Exception):
    """`exit` ends this path of the script."""


class _Return(Exception):
    """`return` ends a function or a sourced file."""


@dataclass
class Arg:
    """One argv field of a command: its expanded pieces and the source token it came from."""

    word: Word
    span: Span

    @property
    def text(self) -> str | None:
        return word_text(self.word)

    @property
    def display(self) -> str:
        """The text with unknown parts shown as their source (`trainer.nnodes=$SLURM_NNODES`)."""
        return "".join(piece.text if piece.text is not None else piece.desc for piece in self.word)

    def sub_span(self, start: int, end: int) -> Span:
        """Span of characters [start, end) of the expanded text (falls back to the whole token)."""
        offset = 0
        for piece in self.word:
            size = len(piece.text or "")
            if piece.text is not None and offset <= start and end <= offset + size:
                if piece.span.file.startswith("<"):  # `-- extra` / --env values: point at their use
                    return piece.via or self.span
                if piece.exact and piece.span.line == piece.span.end_line:
                    base = piece.span.column + (start - offset)
                    return Span(piece.span.file, piece.span.line, base, piece.span.line, base + (end - start))
                return piece.span
            offset += size
        return self.span

    def origins(self, start: int = 0, end: int | None = None) -> list[Piece]:
        """The pieces covering [start, end) of the text (unknown pieces have zero length)."""
        end = 1 << 30 if end is None else end
        chosen, offset = [], 0
        for piece in self.word:
            size = len(piece.text or "")
            if offset < end and offset + size > start or (size == 0 and start <= offset <= end):
                chosen.append(piece)
            offset += size
        return chosen


@dataclass
class Unknown:
    """Something the evaluator could not resolve, with where it is."""

    what: str
    span: Span


@dataclass
class Evaluation:
    """Everything learnt from one script (all paths)."""

    source: SourceFile
    parsed: ParsedScript
    launches: list[Launch] = field(default_factory=list)
    unknowns: list[Unknown] = field(default_factory=list)
    paths: int = 0


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


@dataclass
class Options:
    env: dict[str, str] = field(default_factory=dict)  # --env / --use-env: the starting environment
    args: list[str] = field(default_factory=list)  # `-- extra overrides`: the script's "$@"


class Shell:
    """One shell process evaluating one path: implements words.Scope."""

    def __init__(self, run: "PathRun", source: SourceFile, parsed: ParsedScript, variables: dict[str, Value],
                 positional: list[Word], depth: int) -> None:
        self.run = run
        self.source = source
        self.parsed = parsed
        self.variables = variables
        self.positional_words = positional
        self.args_known = True  # False for a top-level script linted without `-- args`: $# is unknown
        self.functions: dict[str, tuple["Shell", object]] = {}
        self.depth = depth
        self.expander = Expander(source, self)
        self.variables.setdefault("BASH_SOURCE", Value(array=[(Piece(source.path, source.span(0, 0)),)]))

    # ---- words.Scope ------------------------------------------------------------------------
    def lookup(self, name: str) -> Value | None | str:
        return self.variables.get(name, "unknown")

    def assign_default(self, name: str, word: Word, span: Span) -> None:
        self.variables[name] = Value(scalar=word, span=span)

    def positional(self) -> list[Word]:
        return self.positional_words

    def positional_known(self) -> bool:
        return self.args_known

    def command_substitution(self, text: str, span: Span) -> Word | None:
        directory = os.path.dirname(self.source.path) or "."
        if _SCRIPT_DIR_ABS.fullmatch(text):
            return (Piece(os.path.abspath(directory), span),)
        if _SCRIPT_DIR.fullmatch(text):
            return (Piece(directory, span),)
        return None

    # ---- statements ---------------------------------------------------------------------------
    def run_block(self, nodes) -> bool | None:
        status: bool | None = True
        for node in nodes:
            status = self.run_node(node)
        return status

    def run_node(self, node) -> bool | None:  # noqa: C901 - one dispatch table over node types
        self.run.step()
        kind = node.type
        if kind in ("comment", ";", ";;", "&", "\n") or not node.is_named:
            return True
        if kind in ("program", "compound_statement", "do_group", "subshell"):
            if kind == "compound_statement" and node.child_count and node.children[0].type == "((":
                return self.arith_statement(node)
            return self.run_block(node.named_children)
        if kind == "redirected_statement":
            body = node.child_by_field_name("body") or (node.named_children[0] if node.named_children else None)
            return self.run_node(body) if body is not None and body.type not in _SKIP_ARG_TYPES else True
        if kind == "variable_assignment":
            self.assign(node)
            return True
        if kind == "variable_assignments":
            for child in node.named_children:
                self.assign(child)
            return True
        if kind == "declaration_command":
            self.declare(node)
            return True
        if kind == "unset_command":
            for child in node.named_children:
                if child.type == "variable_name":
                    self.variables[self.text(child)] = None  # type: ignore[assignment]
            return True
        if kind == "command":
            return self.command(node)
        if kind == "list":
            return self.run_list(node)
        if kind == "pipeline":
            status = None
            for child in node.named_children:
                status = self.run_node(child)
            return status
        if kind == "negated_command":
            status = self.run_block(node.named_children)
            return None if status is None else not status
        if kind == "if_statement":
            return self.run_if(node)
        if kind == "case_statement":
            return self.run_case(node)
        if kind == "for_statement":
            return self.run_for(node)
        if kind in ("while_statement", "c_style_for_statement"):
            body = node.child_by_field_name("body")
            if body is not None and self.run.chooser.choose(2) == 0:
                self.run_node(body)
            return None
        if kind == "function_definition":
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            if name is not None and body is not None:
                self.functions[self.text(name)] = (self, body)
            return True
        if kind == "test_command":
            return self.test(node)
        if kind == "ERROR":
            self.run.unknown(f"unparsable shell text {self.text(node)[:40]!r}", self.node_span(node))
            return None
        return None

    # ---- helpers ------------------------------------------------------------------------------
    def text(self, node) -> str:
        return self.source.text[self.start(node):self.end(node)]

    def start(self, node) -> int:
        return self.source.char_offset(node.start_byte)

    def end(self, node) -> int:
        return self.source.char_offset(node.end_byte)

    def node_span(self, node) -> Span:
        return self.source.span(self.start(node), self.end(node))

    def word_ranges(self, nodes) -> Iterator[tuple[int, int]]:
        """Character ranges of the words among `nodes`, merging siblings that touch (error recovery)."""
        current: tuple[int, int] | None = None
        for node in nodes:
            if node.type in _SKIP_ARG_TYPES or node.type in ("(", ")"):  # redirects, comments, array parens
                if current:
                    yield current
                current = None
                continue
            start, end = self.start(node), self.end(node)
            if current is not None and current[1] == start:
                current = (current[0], end)
            else:
                if current:
                    yield current
                current = (start, end)
        if current:
            yield current

    def args_of(self, nodes) -> list[Arg]:
        args: list[Arg] = []
        for start, end in self.word_ranges(nodes):
            span = self.source.span(start, end)
            for word in self.expander.fields(start, end):
                args.append(Arg(word, span))
        return args

    # ---- assignments ------------------------------------------------------------------------
    def assign(self, node, exported: bool | None = None, target: dict[str, Value] | None = None) -> None:
        children = node.children
        if not children:
            return
        name_node = children[0]
        target = self.variables if target is None else target
        name = self.text(name_node)
        index_text = None
        if name_node.type == "subscript":
            base = name_node.child_by_field_name("name")
            index = name_node.child_by_field_name("index")
            name = self.text(base) if base is not None else name.split("[", 1)[0]
            index_text = self.text(index) if index is not None else None
        operator = children[1] if len(children) > 1 else None
        append = operator is not None and self.text(operator) == "+="
        value_start = self.end(operator) if operator is not None else self.end(name_node)
        value_nodes = children[2:]
        span = self.source.span(value_start, self.end(node))
        old = target.get(name)
        old = old if isinstance(old, Value) else None
        was_exported = bool(old and old.exported)
        if value_nodes and value_nodes[0].type == "array":
            elements = self.args_of(value_nodes[0].children[1:-1] if value_nodes[0].child_count >= 2 else [])
            words = [arg.word for arg in elements]
            if append and old is not None:
                words = old.elements() + words
            value = Value(array=words, span=span)
        else:
            word = self.expander.scalar(value_start, self.end(node))
            if index_text is not None:
                index = self.expander.arith_text(index_text)
                items = old.elements() if old else []
                if index is None:
                    value = Value(array=items, span=span)
                else:
                    items = items + [()] * max(0, index + 1 - len(items))
                    items[index] = word
                    value = Value(array=items, span=span)
            elif append and old is not None:
                if old.array is not None:
                    value = Value(array=old.elements() + [word], span=span)
                else:
                    value = Value(scalar=tuple(old.first()) + word, span=span)
            else:
                value = Value(scalar=word, span=span)
        value.exported = was_exported if exported is None else exported or was_exported
        target[name] = value

    def declare(self, node) -> None:
        keyword = self.text(node.children[0]) if node.children else ""
        flags = "".join(self.text(c)[1:] for c in node.named_children if c.type == "word" and self.text(c).startswith("-"))
        exported = keyword == "export" or "x" in flags
        for child in node.named_children:
            if child.type == "variable_assignment":
                self.assign(child, exported=exported or None)
            elif child.type == "variable_name" and exported:
                name = self.text(child)
                value = self.variables.get(name)
                if isinstance(value, Value):
                    value.exported = True

    def arith_statement(self, node) -> bool | None:
        inner = self.text(node)[2:-2]
        match = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)\s*(.*?)\s*", inner, re.S)
        if match:
            value = self.expander.arith_text(match.group(2))
            span = self.node_span(node)
            piece = Piece(None if value is None else str(value), span, desc="" if value is not None else inner)
            self.variables[match.group(1)] = Value(scalar=(piece,), span=span)
            return True
        value = self.expander.arith_text(inner)
        return None if value is None else value != 0

    # ---- control flow -----------------------------------------------------------------------
    def decide(self, status: bool | None) -> bool:
        if status is None:
            return self.run.chooser.choose(2) == 0
        return status

    def run_list(self, node) -> bool | None:
        children = node.children
        left = self.run_node(children[0])
        operator = self.text(children[1]) if len(children) > 2 else ";"
        right = children[-1]
        if left is None and not _is_test(children[0]):
            # `cd dir && python3 ...`, `mkdir -p x || true`: an ordinary command is assumed to
            # succeed; only tests (`[ -z "$X" ] && X=1`) are real alternatives worth a second path.
            left = True
        if operator == "&&":
            return self.run_node(right) if self.decide(left) else False
        if operator == "||":
            return True if self.decide(left) else self.run_node(right)
        return self.run_node(right)

    def run_if(self, node) -> bool | None:
        branches: list[tuple[list, list]] = []  # (condition nodes, body nodes)
        condition: list = []
        body: list = []
        state = "cond"
        otherwise: list | None = None
        for child in node.children:
            if child.type in ("if", "fi"):
                continue
            if child.type == "then":
                state = "body"
                continue
            if child.type == "elif_clause":
                branches.append((condition, body))
                condition, body = self._clause(child)
                continue
            if child.type == "else_clause":
                otherwise = [c for c in child.named_children]
                continue
            if child.is_named:
                (condition if state == "cond" else body).append(child)
        branches.append((condition, body))
        for cond, block in branches:
            if self.decide(self.run_block(cond)):
                return self.run_block(block)
        return self.run_block(otherwise) if otherwise is not None else True

    def _clause(self, clause) -> tuple[list, list]:
        condition, body, state = [], [], "cond"
        for child in clause.children:
            if child.type == "then":
                state = "body"
            elif child.is_named:
                (condition if state == "cond" else body).append(child)
        return condition, body

    def run_case(self, node) -> bool | None:
        value_node = node.child_by_field_name("value")
        subject = word_text(self.expander.scalar(self.start(value_node), self.end(value_node))) if value_node else None
        items = [c for c in node.named_children if c.type == "case_item"]
        plausible = []
        for item in items:
            patterns, body = self._case_item(item)
            if subject is None:
                plausible.append(body)
                continue
            if any(p is None for p in patterns):
                plausible.append(body)
                continue
            if any(fnmatch.fnmatchcase(subject, p) for p in patterns):  # type: ignore[arg-type]
                plausible.append(body)
                break
        if subject is None:
            plausible.append([])  # no pattern matched
        if not plausible:
            return True
        choice = self.run.chooser.choose(len(plausible)) if len(plausible) > 1 else 0
        return self.run_block(plausible[choice])

    def _case_item(self, item) -> tuple[list[str | None], list]:
        patterns: list[str | None] = []
        body = []
        seen_paren = False
        for child in item.children:
            if not seen_paren:
                if child.type == ")":
                    seen_paren = True
                elif child.is_named:
                    patterns.append(word_text(self.expander.scalar(self.start(child), self.end(child), tilde=False)))
                continue
            if child.is_named and child.type != "comment":
                body.append(child)
        return patterns, body

    def run_for(self, node) -> bool | None:
        variable = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        value_nodes = [c for c in node.children_by_field_name("value")]
        if variable is None or body is None:
            return None
        items = self.args_of(value_nodes) if value_nodes else [Arg(w, self.node_span(node)) for w in self.positional_words]
        name = self.text(variable)
        if any(arg.text is None for arg in items) or not items:
            items = items[:1] if items else []
        for arg in items[:MAX_LOOP_ITEMS]:
            self.variables[name] = Value(scalar=arg.word, span=arg.span)
            self.run_node(body)
        return None

    def test(self, node) -> bool | None:
        expressions = [c for c in node.named_children]
        if len(expressions) != 1:
            return None
        return self.test_expr(expressions[0], double="[[" in self.text(node)[:2])

    def test_expr(self, node, double: bool) -> bool | None:
        kind = node.type
        if kind == "parenthesized_expression" and node.named_children:
            return self.test_expr(node.named_children[0], double)
        if kind == "unary_expression" and node.child_count == 2:
            op = self.text(node.children[0])
            if op == "!":
                inner = self.test_expr(node.children[1], double)
                return None if inner is None else not inner
            operand = self.scalar(node.children[1])
            if operand is None:
                return None
            if op == "-z":
                return operand == ""
            if op == "-n":
                return operand != ""
            return None
        if kind == "binary_expression" and node.child_count == 3:
            left, op_node, right = node.children
            op = self.text(op_node)
            if op in ("&&", "-a", "||", "-o"):
                a, b = self.test_expr(left, double), self.test_expr(right, double)
                if op in ("&&", "-a"):
                    return False if a is False or b is False else (None if a is None or b is None else True)
                return True if a or b else (None if a is None or b is None else False)
            a, b = self.scalar(left), self.scalar(right)
            if a is None or b is None:
                return None
            return _compare(op, a, b, double)
        if kind in ("word", "string", "raw_string", "simple_expansion", "expansion", "concatenation"):
            value = self.scalar(node)
            return None if value is None else value != ""
        return None

    def scalar(self, node) -> str | None:
        return word_text(self.expander.scalar(self.start(node), self.end(node), tilde=False))

    # ---- commands -----------------------------------------------------------------------------
    def command(self, node) -> bool | None:
        prefix: dict[str, Value] = {}
        words = []
        for child in node.children:
            if child.type == "variable_assignment":
                self.assign(child, exported=True, target=prefix)
            elif child.type == "command_name":
                words.append(child)
            elif child.type == "subshell":
                continue
            else:
                words.append(child)
        argv = self.args_of(words)
        if not argv:
            self.variables.update(prefix)
            return True
        name = argv[0].text
        if name in ("true", ":"):
            return True
        if name == "false":
            return False
        if name in ("exit",):
            raise _Exit
        if name == "return":
            raise _Return
        if name in ("source", "."):
            self.include(argv[1:], node, same_shell=True)
            return None
        if name in ("bash", "sh"):
            self.include(argv[1:], node, same_shell=False, prefix=prefix)
            return None
        if name == "set" and len(argv) > 1 and argv[1].text == "--":
            self.positional_words = [arg.word for arg in argv[2:]]
            return True
        if name == "set" and len(argv) > 1 and argv[1].text == "--":
            self.args_known = True
        if name == "shift":
            count = int(argv[1].text) if len(argv) > 1 and (argv[1].text or "").isdigit() else 1
            self.positional_words = self.positional_words[count:]
            return True
        if name == "read":
            for arg in argv[1:]:
                if arg.text and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", arg.text):
                    self.variables[arg.text] = Value(scalar=(Piece(None, arg.span, desc=f"read {arg.text}"),))
            return None
        if name is not None and name in self.functions:
            return self.call(name, argv[1:])
        launch = find_launch(argv, self.node_span(node), self.launch_env(prefix))
        if launch is not None:
            self.run.launch(launch)
        return None

    def launch_env(self, prefix: dict[str, Value]) -> dict[str, Value]:
        env = {name: value for name, value in self.variables.items()
               if isinstance(value, Value) and value.exported}
        env.update(prefix)
        return env

    def call(self, name: str, args: list[Arg]) -> bool | None:
        owner, body = self.functions[name]
        if self.depth > MAX_INCLUDE_DEPTH * 4:
            return None
        saved, saved_known = self.positional_words, self.args_known
        self.positional_words = [arg.word for arg in args]
        self.args_known = True
        self.depth += 1
        try:
            if owner is self:
                return self.run_node(body)
            owner.variables = self.variables
            return owner.run_node(body)
        except _Return:
            return None
        finally:
            self.depth -= 1
            self.positional_words, self.args_known = saved, saved_known

    def include(self, args: list[Arg], node, same_shell: bool, prefix: dict[str, Value] | None = None) -> None:
        """`source FILE args` / `bash FILE args`: evaluate FILE when it exists, else note it."""
        rest = list(args)
        while not same_shell and rest and (rest[0].text or "").startswith("-") and rest[0].text != "-":
            if rest[0].text in ("-c",):
                return
            rest = rest[1:]
        if not rest:
            return
        target = rest[0]
        if target.text is None:
            self.run.unknown(f"cannot tell which file `{self.text(node)[:60]}` runs", target.span)
            return
        path = self.run.resolve(target.text, self.source.path)
        if path is None:
            self.run.unknown(f"{target.text}: not found, not followed", target.span)
            return
        if self.depth >= MAX_INCLUDE_DEPTH or path in self.run.stack:
            return
        loaded = self.run.load(path)
        if loaded is None:
            return
        source, parsed = loaded
        positional = [arg.word for arg in rest[1:]] if len(rest) > 1 or not same_shell else self.positional_words
        if same_shell:
            shell = Shell(self.run, source, parsed, self.variables, positional, self.depth + 1)
            shell.functions = self.functions
            shell.args_known = self.args_known or len(rest) > 1
        else:
            env = {name: value.copy() for name, value in self.launch_env(prefix or {}).items()}
            shell = Shell(self.run, source, parsed, env, positional, self.depth + 1)
        self.run.stack.append(path)
        try:
            shell.run_node(parsed.tree.root_node)
        except (_Return, _Exit):
            pass
        finally:
            self.run.stack.pop()
        if same_shell:
            self.functions.update(shell.functions)


def _is_test(node) -> bool:
    """A condition whose outcome decides the branch: `[ ]`, `[[ ]]`, `(( ))`, `test`, `! ...`, or a list of them."""
    kind = node.type
    if kind in ("test_command", "negated_command"):
        return True
    if kind == "compound_statement":
        return bool(node.child_count) and node.children[0].type == "(("
    if kind == "list":
        return any(_is_test(child) for child in node.named_children)
    if kind == "command":
        name = node.child_by_field_name("name")
        return name is not None and name.text in (b"test", b"[", b"[[")
    return False


def _compare(op: str, a: str, b: str, double: bool) -> bool | None:
    if op in ("=", "=="):
        return fnmatch.fnmatchcase(a, b) if double else a == b
    if op == "!=":
        return not fnmatch.fnmatchcase(a, b) if double else a != b
    if op in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
        try:
            x, y = int(a), int(b)
        except ValueError:
            return None
        return {"-eq": x == y, "-ne": x != y, "-lt": x < y, "-le": x <= y, "-gt": x > y, "-ge": x >= y}[op]
    if op == "=~":
        try:
            return re.search(b, a) is not None
        except re.error:
            return None
    return None


_SCRIPT_PATH = r'"?\$\{?(?:0|BASH_SOURCE(?:\[0\])?)\}?"?'
_SCRIPT_DIR = re.compile(r'\$\(\s*dirname\s+' + _SCRIPT_PATH + r'\s*\)')
_SCRIPT_DIR_ABS = re.compile(
    r'\$\(\s*(?:cd\s+"?\$\(\s*dirname\s+' + _SCRIPT_PATH + r'\s*\)"?\s*(?:&&|;)\s*pwd(?:\s+-P)?'
    r'|(?:realpath|readlink\s+-f)\s+"?\$\(\s*dirname\s+' + _SCRIPT_PATH + r'\s*\)"?'
    r'|dirname\s+"?\$\(\s*(?:realpath|readlink\s+-f)\s+' + _SCRIPT_PATH + r'\s*\)"?)\s*\)'
)


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
            raise _Exit

    def launch(self, launch: Launch) -> None:
        self.launches.append(launch)

    def unknown(self, what: str, span: Span) -> None:
        self.unknowns.append(Unknown(what, span))

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
            except (_Exit, _Return, RecursionError):
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

    def initial_variables(self, source: SourceFile) -> dict[str, Value]:
        origin = Span("<env>", 1, 1, 1, 1)
        return {name: Value(scalar=(Piece(text, origin),), span=origin, exported=True)
                for name, text in self.options.env.items()}

    def initial_args(self, source: SourceFile) -> list[Word]:
        origin = Span("<command line>", 1, 1, 1, 1)
        return [(Piece(text, origin),) for text in self.options.args]
