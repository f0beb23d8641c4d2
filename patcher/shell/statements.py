"""One shell process of the evaluator: statements, assignments, commands, functions, `source`/`bash FILE`.

`Shell` walks a tree-sitter-bash tree in file order with bash semantics and never executes
anything: it keeps variables (scalars and arrays, exported or not), functions and positional
parameters, answers `$(dirname "$0")`-style substitutions itself, follows `source FILE` and
`bash FILE args`, and hands every command that launches a verl entry point to its path's run as a
`Launch`. Control flow lives in `rlpatch.shell.control`.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Callable, Iterator

from rlpatch.shell.control import ControlFlow, PathExit, ScopeReturn
from rlpatch.shell.launch import find_launch
from rlpatch.shell.parse import ParsedScript
from rlpatch.shell.pieces import (
    MAX_ELEMENTS,
    MAX_VALUE_SIZE,
    UNKNOWN,
    Lookup,
    Piece,
    Value,
    Variables,
    Word,
    is_over,
    over_limit,
    word_size,
)
from rlpatch.shell.results import Arg
from rlpatch.shell.source import SourceFile, Span
from rlpatch.shell.words import Expander

if TYPE_CHECKING:
    from rlpatch.shell.evaluator import PathRun

MAX_INCLUDE_DEPTH = 8

_SKIP_ARG_TYPES = {"file_redirect", "heredoc_redirect", "herestring_redirect", "comment"}
_SCRIPT_PATH = r'"?\$\{?(?:0|BASH_SOURCE(?:\[0\])?)\}?"?'
_SCRIPT_DIR = re.compile(r'\$\(\s*dirname\s+' + _SCRIPT_PATH + r'\s*\)')
_SCRIPT_DIR_ABS = re.compile(
    r'\$\(\s*(?:cd\s+"?\$\(\s*dirname\s+' + _SCRIPT_PATH + r'\s*\)"?\s*(?:&&|;)\s*pwd(?:\s+-P)?'
    r'|(?:realpath|readlink\s+-f)\s+"?\$\(\s*dirname\s+' + _SCRIPT_PATH + r'\s*\)"?'
    r'|dirname\s+"?\$\(\s*(?:realpath|readlink\s+-f)\s+' + _SCRIPT_PATH + r'\s*\)"?)\s*\)'
)


class Shell(ControlFlow):
    """One shell process evaluating one path: implements pieces.Scope."""

    def __init__(self, run: "PathRun", source: SourceFile, parsed: ParsedScript, variables: Variables,
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

    # ---- pieces.Scope ------------------------------------------------------------------------
    def lookup(self, name: str) -> Lookup:
        return self.variables.get(name, UNKNOWN)

    def assign_default(self, name: str, word: Word, span: Span) -> None:
        self.variables[name] = Value(scalar=word, span=span).within_limits(name, span)

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

    def run_node(self, node) -> bool | None:
        """Run one node of the tree: its status (True/False), or None when it cannot be told."""
        self.run.step()
        if not node.is_named:  # `;`, `&`, newlines, keywords
            return True
        handler = _NODE_HANDLERS.get(node.type)
        return handler(self, node) if handler is not None else None  # a node kind with no effect we model

    # ---- one handler per node kind (the table `_NODE_HANDLERS` below) -----------------------------
    def run_nothing(self, node) -> bool | None:
        return True

    def run_compound(self, node) -> bool | None:
        """`{ ...; }`, or `(( ... ))` (tree-sitter-bash gives both the same node kind)."""
        if node.child_count and node.children[0].type == "((":
            return self.arith_statement(node)
        return self.run_block(node.named_children)

    def run_children(self, node) -> bool | None:
        return self.run_block(node.named_children)

    def run_redirected(self, node) -> bool | None:
        body = node.child_by_field_name("body") or (node.named_children[0] if node.named_children else None)
        return self.run_node(body) if body is not None and body.type not in _SKIP_ARG_TYPES else True

    def run_assignment(self, node) -> bool | None:
        self.assign(node)
        return True

    def run_assignments(self, node) -> bool | None:
        for child in node.named_children:
            self.assign(child)
        return True

    def run_declaration(self, node) -> bool | None:
        self.declare(node)
        return True

    def run_unset(self, node) -> bool | None:
        for child in node.named_children:
            if child.type == "variable_name":
                self.variables[self.text(child)] = None  # unset (a name absent from the table is unknown)
        return True

    def run_pipeline(self, node) -> bool | None:
        status = None
        for child in node.named_children:
            status = self.run_node(child)
        return status

    def run_negated(self, node) -> bool | None:
        status = self.run_block(node.named_children)
        return None if status is None else not status

    def run_loop(self, node) -> bool | None:
        """`while`/`until`/C-style `for`: the body runs once or not at all (a choice of the path)."""
        body = node.child_by_field_name("body")
        if body is not None and self.run.chooser.choose(2) == 0:
            self.run_node(body)
        return None

    def define_function(self, node) -> bool | None:
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name is not None and body is not None:
            self.functions[self.text(name)] = (self, body)
        return True

    def run_error(self, node) -> bool | None:
        self.run.unknown(f"unparsable shell text {self.text(node)[:40]!r}", self.node_span(node))
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
        char_offset = self.source.char_offset
        for node in nodes:
            kind = node.type
            if kind in _SKIP_ARG_TYPES or kind == "(" or kind == ")":  # redirects, comments, array parens
                if current:
                    yield current
                current = None
                continue
            start, end = char_offset(node.start_byte), char_offset(node.end_byte)
            if current is not None and current[1] == start:
                current = (current[0], end)
            else:
                if current:
                    yield current
                current = (start, end)
        if current:
            yield current

    def args_of(self, nodes) -> list[Arg]:
        return self.args_in(list(self.word_ranges(nodes)))

    def args_in(self, ranges: list[tuple[int, int]]) -> list[Arg]:
        """The words of `ranges`, expanded. Past MAX_ELEMENTS words or MAX_VALUE_SIZE in all, the
        rest is one unknown word (`"$@" "$@"` doubling in a loop or a recursive function)."""
        args: list[Arg] = []
        span_of, fields = self.source.span, self.expander.fields
        size = 0
        for start, end in ranges:
            span = span_of(start, end)
            for word in fields(start, end):
                size += word_size(word)
                if size > MAX_VALUE_SIZE or len(args) >= MAX_ELEMENTS:
                    args.append(Arg(over_limit(span, self.source.text[start:end]), span))
                    return args
                args.append(Arg(word, span))
        return args

    @staticmethod
    def args_over(args: list[Arg]) -> bool:
        """Whether `args_in` cut these words at the bounds (their count is then unknown)."""
        return bool(args) and is_over(args[-1].word)

    # ---- assignments ------------------------------------------------------------------------
    def _assignment(self, node) -> tuple | None:
        """What an assignment node says, read from the tree once per script (not once per path):
        name, subscript text, `+=`, the value's character range, the array elements' ranges."""
        key = ("assign", node.id)
        memo = self.parsed.memo
        if key in memo:
            return memo[key]
        children = node.children
        shape = None
        if children:
            name_node = children[0]
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
            elements = None
            if value_nodes and value_nodes[0].type == "array":
                array = value_nodes[0]
                elements = list(self.word_ranges(array.children[1:-1] if array.child_count >= 2 else []))
            shape = (name, index_text, append, value_start, self.end(node), elements)
        memo[key] = shape
        return shape

    def assign(self, node, exported: bool | None = None, target: Variables | dict[str, Value] | None = None) -> None:
        shape = self._assignment(node)
        if shape is None:
            return
        name, index_text, append, value_start, value_end, elements = shape
        target = self.variables if target is None else target
        span = self.source.span(value_start, value_end)
        old = target.get(name)
        old = old if isinstance(old, Value) else None
        was_exported = bool(old and old.exported)
        if elements is not None:
            args = self.args_in(elements)
            words = [arg.word for arg in args]
            if append and old is not None:
                words = old.elements() + words
            value = Value(array=words, span=span)
            if self.args_over(args) or (append and old is not None and old.over):
                value = Value(scalar=over_limit(span, f"${name}"), span=span, over=True)
        else:
            word = self.expander.scalar(value_start, value_end)
            if index_text is not None:
                index = self.expander.arith_text(index_text)
                items = old.elements() if old else []
                if index is None:
                    value = Value(array=items, span=span)
                elif index >= MAX_ELEMENTS or old is not None and old.over:
                    value = Value(scalar=over_limit(span, f"{name}[{index_text}]"), span=span, over=True)
                elif index < -len(items):  # bash: "bad array subscript", nothing assigned
                    return
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
        target[name] = value.within_limits(name, span)

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

    # ---- commands -----------------------------------------------------------------------------
    def _command_shape(self, node) -> tuple[list, list[tuple[int, int]]]:
        """A command's prefix assignments and its words' ranges, read from the tree once per script."""
        key = ("command", node.id)
        shape = self.parsed.memo.get(key)
        if shape is None:
            assignments, words = [], []
            for child in node.children:
                if child.type == "variable_assignment":
                    assignments.append(child)
                elif child.type != "subshell":
                    words.append(child)
            shape = self.parsed.memo[key] = (assignments, list(self.word_ranges(words)))
        return shape

    def command(self, node) -> bool | None:
        prefix: dict[str, Value] = {}
        assignments, ranges = self._command_shape(node)
        for child in assignments:
            self.assign(child, exported=True, target=prefix)
        # The argv as a whole is remembered like a word (paths replay the same commands).
        argv = self.expander.remembered(("argv", node.id), lambda: self.args_in(ranges), self.parsed.memo)
        if not argv:
            self.variables.update(prefix)
            return True
        name = argv[0].text
        if name in ("true", ":"):
            return True
        if name == "false":
            return False
        if name in ("exit",):
            raise PathExit
        if name == "return":
            raise ScopeReturn
        if name in ("source", "."):
            self.include(argv[1:], node, same_shell=True)
            return None
        if name in ("bash", "sh"):
            self.include(argv[1:], node, same_shell=False, prefix=prefix)
            return None
        if name == "set" and len(argv) > 1 and argv[1].text == "--":
            self.positional_words = [arg.word for arg in argv[2:]]
            self.args_known = not self.args_over(argv)
            return True
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
        launch = find_launch(argv, self.node_span(node), lambda: self.launch_env(prefix))
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
        self.args_known = not self.args_over(args)
        self.depth += 1
        try:
            if owner is self:
                return self.run_node(body)
            owner.variables = self.variables
            return owner.run_node(body)
        except ScopeReturn:
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
            # Named by its own word, not a cut of the command text: the arguments it would get are
            # kept apart (a wrapper's overrides, for "lint the original with -- overrides").
            runner = "source" if same_shell else "bash"
            self.run.unknown(f"cannot tell which file `{runner} {target.display}` runs", target.span,
                             tuple(arg.display for arg in rest[1:]))
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
            env: Variables = {name: value.copy() for name, value in self.launch_env(prefix or {}).items()}
            shell = Shell(self.run, source, parsed, env, positional, self.depth + 1)
        self.run.stack.append(path)
        try:
            shell.run_node(parsed.tree.root_node)
        except ScopeReturn:
            pass
        except PathExit:
            if same_shell:  # `exit` in a sourced file ends the script that sourced it
                raise
        finally:
            self.run.stack.pop()
        if same_shell:
            self.functions.update(shell.functions)


# What each kind of tree-sitter-bash node does when run; a kind not in the table has no effect we
# model (its status cannot be told).
_NODE_HANDLERS: dict[str, Callable[[Shell, Any], bool | None]] = {
    "comment": Shell.run_nothing,
    **dict.fromkeys((";", ";;", "&", "\n"), Shell.run_nothing),  # separators, should tree-sitter ever name one
    "program": Shell.run_children,
    "do_group": Shell.run_children,
    "subshell": Shell.run_children,
    "compound_statement": Shell.run_compound,
    "redirected_statement": Shell.run_redirected,
    "variable_assignment": Shell.run_assignment,
    "variable_assignments": Shell.run_assignments,
    "declaration_command": Shell.run_declaration,
    "unset_command": Shell.run_unset,
    "command": Shell.command,
    "list": Shell.run_list,
    "pipeline": Shell.run_pipeline,
    "negated_command": Shell.run_negated,
    "if_statement": Shell.run_if,
    "case_statement": Shell.run_case,
    "for_statement": Shell.run_for,
    "while_statement": Shell.run_loop,
    "c_style_for_statement": Shell.run_loop,
    "function_definition": Shell.define_function,
    "test_command": Shell.test,
    "ERROR": Shell.run_error,
}
