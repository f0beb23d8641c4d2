"""What git knows about a target tree; gitpython is imported lazily and is optional.

Without a git binary (gitpython then fails to import) or outside a checkout every function
answers "no repository" and rlpatch works on the files alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rlpatch.errors import RefusedError


@dataclass
class Checkout:
    repo: Any  # git.Repo
    toplevel: Path

    def head(self) -> str | None:
        try:
            return self.repo.head.commit.hexsha
        except Exception:  # an empty repository has no HEAD commit
            return None

    def dirty(self, paths: Sequence[Path]) -> list[str]:
        """Tracked target files with uncommitted changes, relative to the toplevel."""
        relative = [str(path.resolve().relative_to(self.toplevel)) for path in paths if path.exists()]
        if not relative:
            return []
        output = self.repo.git.status("--porcelain", "--untracked-files=no", "--", *relative)
        return [line[3:] for line in output.splitlines() if line.strip()]

    def exclude(self, folder: Path) -> None:
        """Keep rlpatch's state folder out of `git status` via `.git/info/exclude`."""
        pattern = "/" + str(folder.resolve().relative_to(self.toplevel)).replace(os.sep, "/") + "/"
        exclude = Path(self.repo.git_dir) / "info" / "exclude"
        existing = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
        if pattern in existing:
            return
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with open(exclude, "a", encoding="utf-8") as handle:
            if existing and existing[-1] != "":
                handle.write("\n")
            handle.write(f"# rlpatch state (patch manifest, originals, lock)\n{pattern}\n")

    def commit(self, paths: Sequence[Path], message: str) -> str:
        relative = [str(path.resolve().relative_to(self.toplevel)) for path in paths]
        try:
            self.repo.git.add("--", *relative)
            self.repo.git.commit("-m", message, "--", *relative)
        except Exception as err:
            detail = str(getattr(err, "stderr", "") or err).strip().splitlines()
            raise RefusedError(f"git commit failed ({detail[-1] if detail else err}); the patch is applied but not committed") from None
        return self.repo.head.commit.hexsha


def checkout_of(root: str) -> Checkout | None:
    """The git checkout that holds `root`, or None (not a checkout, or no git available)."""
    if not _inside_git_tree(Path(root)):
        return None
    try:
        import git  # gitpython: fails to import when no git binary is installed
    except Exception:
        return None
    try:
        repo = git.Repo(root, search_parent_directories=True)
        toplevel = Path(repo.working_tree_dir).resolve()
    except Exception:
        return None
    return Checkout(repo, toplevel)


def _inside_git_tree(path: Path) -> bool:
    # Cheap test first: importing gitpython costs ~0.1 s, and site-packages trees have no .git.
    for folder in (path.resolve(), *path.resolve().parents):
        if (folder / ".git").exists():
            return True
    return False
