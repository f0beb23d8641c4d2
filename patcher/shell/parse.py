"""tree-sitter-bash parsing, shared by the evaluator and the lint engine.

tree-sitter never raises and keeps comments and positions. It marks a few real constructs as
errors (the evaluator recovers from those word by word), but an unterminated quote swallows the
rest of the file: that one is reported as an input error instead of being linted as garbage.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from rlpatch.errors import InputError
from rlpatch.shell.source import SourceFile

if TYPE_CHECKING:
    from tree_sitter import Tree

_NON_ASCII_BYTE = re.compile(rb"[\x80-\xff]")


@lru_cache(maxsize=1)
def language():
    from tree_sitter import Language

    return Language(_bash_grammar())


def _bash_grammar() -> object:
    """The tree-sitter-bash grammar pointer, from the package's `_binding` extension.

    The package's `__init__` imports `importlib.resources` for its highlight queries, which we
    never use: about 6 ms of a cold `rlpatch lint` (the pre-commit hook's start-up). The extension
    is loaded directly when it is where the package keeps it, else through the package.
    """
    import importlib.machinery
    import importlib.util
    import os

    spec = importlib.util.find_spec("tree_sitter_bash")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_binding" + suffix)
            if os.path.isfile(path):
                loader = importlib.machinery.ExtensionFileLoader("tree_sitter_bash._binding", path)
                module_spec = importlib.util.spec_from_loader(loader.name, loader)
                assert module_spec is not None  # None only when no loader is given
                module = importlib.util.module_from_spec(module_spec)
                loader.exec_module(module)
                return module.language()
    import tree_sitter_bash

    return tree_sitter_bash.language()


def _parser():
    # A fresh parser per file: reusing one across many malformed inputs crashed tree-sitter-bash's
    # external scanner (found by the fuzz tests); creating one costs microseconds.
    from tree_sitter import Parser

    return Parser(language())


class ParsedScript:
    """A script's tree-sitter tree, with the evaluator's per-tree memo."""

    __slots__ = ("tree", "memo")

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        # Per-tree memo for the evaluator, keyed by node ids (which are only unique within one tree):
        # what a statement's nodes say does not change from one path of the script to the next.
        self.memo: dict = {}


def parse_file(source: SourceFile) -> ParsedScript:
    tree = _parser().parse(ascii_shadow(source))
    root = tree.root_node
    if root.has_error:
        _check_unterminated(source, root)
    return ParsedScript(tree)


def ascii_shadow(source: SourceFile) -> bytes:
    """The script's bytes with every non-ASCII character replaced by as many `x` bytes.

    tree-sitter-bash's external scanner crashes (segfault) on some non-ASCII characters in some
    contexts (found by the fuzz tests: `S{<U+5F70C>]`). Bash syntax is all ASCII and bash treats
    other bytes as ordinary word characters, exactly like `x`, so the tree is the same, and byte
    offsets are unchanged: positions still map onto the real text (SourceFile.char_offset).
    """
    data = source.encoded
    if data.isascii():
        return data
    return _NON_ASCII_BYTE.sub(b"x", data)  # one `x` per byte of each non-ASCII character


def _check_unterminated(source: SourceFile, root) -> None:
    """Raise InputError when a quote or a `$(`/`${` is never closed (the rest of the file is lost)."""
    end = len(source.encoded)
    stack = [root]
    while stack:
        node = stack.pop()
        if not node.has_error and not node.is_missing:
            continue
        if node.is_missing and node.type in ('"', "'", "`", ")", "}", "))"):
            opener = node.parent if node.parent is not None else node
            _raise_unterminated(source, opener.start_byte, node.type)
        if node.type == "ERROR" and node.end_byte >= end - 1:
            text = source.encoded[node.start_byte:node.end_byte]
            for quote in (b'"', b"'", b"`"):
                index = text.find(quote)
                if index != -1 and text.count(quote) % 2 == 1:
                    _raise_unterminated(source, node.start_byte + index, quote.decode())
        stack.extend(node.children)


def _raise_unterminated(source: SourceFile, byte_offset: int, what: str) -> None:
    line, column = source.line_col(source.char_offset(byte_offset))
    raise InputError(f"{source.path}:{line}:{column}: unterminated {what!s} (the rest of the file cannot be read)")
