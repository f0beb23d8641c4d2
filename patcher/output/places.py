"""The place a command may write in, and the links on the way to a file inside it.

`root` is the place the user named (a tree, `dumps compare -o O`); `path` a file or folder the
command is about to write under it. Every component from `root` to `path` that exists and is a
symbolic link is resolved: a link that stays inside `root` is allowed (and described, so that the
command can say what it does), a link that leaves it is refused. Nothing is created here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rlpatch.errors import InputError
from rlpatch.output.printable import Note


@dataclass(frozen=True)
class LinkInside:
    """A symbolic link met on the way to a written file that points back inside the place."""

    link: str
    target: str

    def note(self) -> Note:
        return Note(f"{self.link} is a symbolic link to {self.target} (inside the tree): writing there")


def is_inside(path: str, root: str) -> bool:
    """Whether the resolved `path` is `root` or below it (both resolved)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _components(root: str, path: str) -> list[str]:
    """`root/a`, `root/a/b`, ... up to `path` (which must be written under `root`)."""
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if relative == os.curdir:
        return []
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        raise InputError(f"{path}: not inside {root}; nothing was written")
    steps, current = [], os.path.abspath(root)
    for part in relative.split(os.sep):
        current = os.path.join(current, part)
        steps.append(current)
    return steps


def links_on_the_way(root: str, path: str, *, what: str = "the tree", links_allowed: bool = True) -> list[LinkInside]:
    """The links between `root` and `path` that point inside `root`; InputError (exit 2) for a link
    that leaves it, or for any link at all when `links_allowed` is false (rlpatch's own state)."""
    found = []
    for step in _components(root, path):
        if not os.path.islink(step):
            continue
        target = os.path.realpath(step)
        if not links_allowed:
            raise InputError(f"{step}: a symbolic link (to {target}) where rlpatch keeps its own files; "
                             "nothing was written")
        if not is_inside(step, root):
            raise InputError(f"{step}: a symbolic link out of {what} {root} (to {target}); nothing was written")
        found.append(LinkInside(step, target))
    return found


def refuse_links(root: str, paths: list[str], *, what: str = "the tree") -> list[LinkInside]:
    """`links_on_the_way` for every path, checked all before any is written; duplicates dropped."""
    seen: dict[str, LinkInside] = {}
    for path in paths:
        for link in links_on_the_way(root, path, what=what):
            seen.setdefault(link.link, link)
    return list(seen.values())
