"""Name resolution of inserted code (spec 0.8 "names resolve"), checked with `ast` and `symtable`.

Given a file before and after a patch, report every problem a reviewer would otherwise find at
run time:
- a name the inserted code loads that is bound nowhere it could come from (a missing `import os`);
- a name the inserted code loads from its function's locals before any binding of it in that
  function (straight-line approximation: the binding must stand on an earlier line);
- an upstream name whose scope changed because of the patch (an `import os` inserted in the middle
  of a function makes `os` local to the whole function: UnboundLocalError on earlier uses).
"""

from __future__ import annotations

import ast
import builtins
import difflib
import symtable
from dataclasses import dataclass, field

_SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)
_TABLE_NAMES = {ast.Lambda: "lambda", ast.GeneratorExp: "genexpr", ast.ListComp: "listcomp",
                ast.SetComp: "setcomp", ast.DictComp: "dictcomp"}


def _table_name(node: ast.AST) -> str:
    return getattr(node, "name", None) or _TABLE_NAMES[type(node)]


@dataclass
class _Use:
    name: str
    line: int
    column: int
    scopes: list[symtable.SymbolTable]  # innermost last


@dataclass
class _Walker:
    """Pairs every Name load with the chain of symbol tables it is resolved in."""

    uses: list[_Use] = field(default_factory=list)
    # (id of table, name) -> lines where the name is bound in that scope
    bound_at: dict[tuple[int, str], list[int]] = field(default_factory=dict)

    def visit(self, node: ast.AST, scopes: list[symtable.SymbolTable]) -> None:
        if isinstance(node, _SCOPE_NODES):
            self._enter(node, scopes)
            return
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self.uses.append(_Use(node.id, node.lineno, node.col_offset, scopes))
            else:
                self._bind(scopes[-1], node.id, node.lineno)
        elif isinstance(node, ast.ExceptHandler) and node.name:  # `except E as name` binds a plain str
            self._bind(scopes[-1], node.name, node.lineno)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                self._bind(scopes[-1], (alias.asname or alias.name).split(".")[0], node.lineno)
        for child in ast.iter_child_nodes(node):
            self.visit(child, scopes)

    def _enter(self, node: ast.AST, scopes: list[symtable.SymbolTable]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._bind(scopes[-1], node.name, node.lineno)
        # Evaluated in the enclosing scope: decorators, bases, defaults, a comprehension's first iterable.
        outer: list[ast.AST] = [*getattr(node, "decorator_list", []), *getattr(node, "bases", []),
                                *getattr(node, "keywords", [])]
        args = getattr(node, "args", None)
        if isinstance(args, ast.arguments):
            outer += [*args.defaults, *[d for d in args.kw_defaults if d is not None]]
        generators = getattr(node, "generators", None)
        if generators:
            outer.append(generators[0].iter)
        for expr in outer:
            self.visit(expr, scopes)
        table = self._child_table(scopes[-1], node)
        inner = scopes + [table] if table is not None else scopes
        if isinstance(args, ast.arguments):
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    self._bind(inner[-1], arg.arg, node.lineno)  # type: ignore[attr-defined]
        skip = {id(expr) for expr in outer} | {id(args)}
        for child in self._inner_children(node):
            if id(child) not in skip:
                self.visit(child, inner)

    @staticmethod
    def _inner_children(node: ast.AST) -> list[ast.AST]:
        children: list[ast.AST] = []
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.comprehension):
                children += [child.target, child.iter, *child.ifs]
            else:
                children.append(child)
        return children

    def _bind(self, table: symtable.SymbolTable, name: str, line: int) -> None:
        self.bound_at.setdefault((id(table), name), []).append(line)

    @staticmethod
    def _child_table(table: symtable.SymbolTable, node: ast.AST) -> symtable.SymbolTable | None:
        for child in table.get_children():
            if child.get_lineno() == node.lineno and child.get_name() == _table_name(node):
                return child
        return None  # an inlined comprehension: its names live in the enclosing scope


def _uses(source: str, path: str) -> tuple[list[_Use], _Walker, symtable.SymbolTable]:
    top = symtable.symtable(source, path, "exec")
    walker = _Walker()
    walker.visit(ast.parse(source, path), [top])
    return walker.uses, walker, top


def _classification(use: _Use) -> str:
    table = use.scopes[-1]
    try:
        symbol = table.lookup(use.name)
    except KeyError:
        return "global"
    if symbol.is_local() and table.get_type() != "module":
        return "local"
    if symbol.is_free():
        return "free"
    return "global"


def _resolves(use: _Use, walker: _Walker, top: symtable.SymbolTable) -> str | None:
    """None when the load is bound where Python will look for it, else the problem."""
    kind = _classification(use)
    if kind == "local":
        lines = walker.bound_at.get((id(use.scopes[-1]), use.name), [])
        in_comprehension = use.scopes[-1].get_name() in _TABLE_NAMES.values()  # targets bind before the element
        if not in_comprehension and not any(line <= use.line for line in lines):
            return f"{use.name!r} (line {use.line}) is local to its function but bound only after this use"
        return None
    if kind == "free":
        return None  # symtable found the enclosing function that binds it
    if use.name in _top_names(top) and (top.lookup(use.name).is_assigned() or top.lookup(use.name).is_imported()):
        return None
    if hasattr(builtins, use.name) or use.name in ("__file__", "__name__"):
        return None
    return f"{use.name!r} (line {use.line}) is bound nowhere: not local, not in the module, not a builtin"


def _top_names(top: symtable.SymbolTable) -> set[str]:
    return {symbol.get_name() for symbol in top.get_symbols()}


def _added_lines(original: str, patched: str) -> tuple[set[int], dict[int, int]]:
    """1-based lines of `patched` that the patch added or changed, and patched->original line map."""
    matcher = difflib.SequenceMatcher(a=original.splitlines(), b=patched.splitlines(), autojunk=False)
    added: set[int] = set()
    kept: dict[int, int] = {}
    for tag, a1, _a2, b1, b2 in matcher.get_opcodes():
        if tag == "equal":
            kept.update({b1 + k + 1: a1 + k + 1 for k in range(b2 - b1)})
        else:
            added.update(range(b1 + 1, b2 + 1))
    return added, kept


def scope_problems(original: str, patched: str, path: str = "<patched>") -> list[str]:
    """Every name-resolution problem the patch introduces (empty: the inserted code is sound)."""
    added, kept = _added_lines(original, patched)
    uses, walker, top = _uses(patched, path)
    problems = [
        f"{path}: {problem}"
        for use in uses
        if use.line in added and (problem := _resolves(use, walker, top)) is not None
    ]
    before = {(use.line, use.column, use.name): _classification(use) for use in _uses(original, path)[0]}
    for use in uses:
        key = (kept.get(use.line), use.column, use.name)
        if key in before:
            was, now = before[key], _classification(use)
            if was != now:
                problems.append(f"{path}: upstream {use.name!r} (line {use.line}) changed scope: {was} -> {now}")
    return problems
