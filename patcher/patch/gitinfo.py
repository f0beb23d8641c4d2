"""What git knows about a target tree; gitpython is imported lazily and is optional.

Without a git binary (gitpython then fails to import) or outside a checkout every function
answers "no repository" and rlpatch works on the files alone.

`apply --commit` commits the patch and nothing else, even with `--allow-dirty`: the commit's
tree is HEAD's tree with, for each patched file, HEAD's blob plus the patch's own edits
(`git merge-file` of the file before and after patching onto HEAD's blob), built in a temporary
index (`hash-object`, `update-index`, `write-tree`, `commit-tree`, `update-ref`). The working
tree is never touched by git, so the user's uncommitted edits stay exactly where they were,
uncommitted. Whatever cannot be done that way (staged changes in a patched file, the user's
edits touching the patch's lines, an untracked file, no committer identity) is refused before
rlpatch writes anything.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rlpatch.errors import RefusedError
from rlpatch.output.api import links_on_the_way


@dataclass
class Checkout:
    repo: Any  # git.Repo
    toplevel: Path

    def head(self) -> str | None:
        try:
            return self.repo.head.commit.hexsha
        except Exception:  # noqa: BLE001 - an empty repository has no HEAD commit
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
        links_on_the_way(self.repo.git_dir, str(exclude), what="the git folder")  # a planted link: refused, exit 2
        existing = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
        if pattern in existing:
            return
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with open(exclude, "a", encoding="utf-8") as handle:
            if existing and existing[-1] != "":
                handle.write("\n")
            handle.write(f"# rlpatch state (patch manifest, originals, lock)\n{pattern}\n")

    # ---- committing only the patch ---------------------------------------------------------

    def plan_commit(self, changes: Sequence[PatchedFile]) -> list[CommitFile]:
        """What a commit of only the patch holds; RefusedError (nothing written yet) when it cannot be made safely."""
        for variable in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
            try:
                self.repo.git.var(variable)
            except Exception as err:  # noqa: BLE001 - any git failure here is a refusal, with git's own last line
                raise RefusedError(f"--commit: git cannot commit here ({_last_line(err)}); nothing was written") from None
        return [self._commit_file(change) for change in changes]

    def _commit_file(self, change: PatchedFile) -> CommitFile:
        relative = self.relative(change.path)
        head = self._head_blob(relative)
        staged = self.repo.git.ls_files("--stage", "--", relative).split()
        if staged and (head is None or staged[1] != head[1]):
            raise RefusedError(f"--commit: {relative} has staged changes; commit or unstage them first "
                               "(rlpatch commits only the patch); nothing was written")
        mode = staged[0] if staged else ("100755" if (change.mode or 0) & 0o111 else "100644")
        if head is None:
            if change.before is not None:
                raise RefusedError(f"--commit: {relative} is not tracked by git, so the commit would hold all of it; "
                                   "add it to git first or apply without --commit; nothing was written")
            return CommitFile(relative, change.after, mode)
        if change.before is None:
            raise RefusedError(f"--commit: {relative} is deleted in the working tree; nothing was written")
        if change.before == head[0]:
            return CommitFile(relative, change.after, mode)
        return CommitFile(relative, self._patch_onto(relative, head[0], change), mode)

    def _head_blob(self, relative: str) -> tuple[bytes, str] | None:
        """(bytes, sha) of `relative` in HEAD, or None (no HEAD, or not in it)."""
        try:
            blob = self.repo.head.commit.tree / relative
        except Exception:  # noqa: BLE001 - no HEAD commit, or no such path in it
            return None
        return blob.data_stream.read(), blob.hexsha

    def _patch_onto(self, relative: str, head: bytes, change: PatchedFile) -> bytes:
        """HEAD's bytes with the patch's edits (before -> after), the user's own edits left out."""
        with tempfile.TemporaryDirectory(prefix="rlpatch-commit-") as folder:
            names = []
            for name, data in (("head", head), ("before", change.before or b""), ("after", change.after)):
                names.append(os.path.join(folder, name))
                Path(names[-1]).write_bytes(data)
            status, merged, _ = self.repo.git.execute(["git", "merge-file", "-p", "-q", *names],
                                                      with_extended_output=True, with_exceptions=False,
                                                      stdout_as_string=False, strip_newline_in_stdout=False)
        if status != 0:
            raise RefusedError(f"--commit: your uncommitted edits in {relative} touch the lines the patch changes, so "
                               "the patch cannot be committed without them; commit or stash them first, or apply "
                               "without --commit; nothing was written")
        return merged

    def commit_patch(self, files: Sequence[CommitFile], message: str) -> str:
        """Commit exactly `files` on top of HEAD; the working tree and the other index entries are untouched."""
        old = self.head()
        git = self.repo.git
        try:
            with tempfile.TemporaryDirectory(prefix="rlpatch-index-") as folder:
                with git.custom_environment(GIT_INDEX_FILE=os.path.join(folder, "index")):
                    if old:
                        git.read_tree(old)
                    for file in files:
                        git.update_index("--add", "--cacheinfo", f"{file.mode},{self._store(folder, file)},{file.relative}")
                    tree = git.write_tree()
            parents = ["-p", old] if old else []
            new = git.commit_tree(tree, *parents, "-m", message)
            git.update_ref("-m", "rlpatch apply --commit", "HEAD", new, *([old] if old else []))
            # The index follows the new HEAD for these files: the user's edits show as unstaged, as before.
            git.reset("-q", "--", *[file.relative for file in files])
        except Exception as err:  # noqa: BLE001 - any git failure here is a refusal, with git's own last line
            raise RefusedError(f"git commit failed ({_last_line(err)}); the patch is applied but not committed") from None
        return new

    def _store(self, folder: str, file: CommitFile) -> str:
        data = Path(folder) / "blob"
        data.write_bytes(file.data)
        return self.repo.git.hash_object("-w", f"--path={file.relative}", str(data))

    def relative(self, path: Path) -> str:
        return path.resolve().relative_to(self.toplevel).as_posix()

    def contains(self, sha: str) -> bool:
        """Is commit `sha` in HEAD's history (so that `git revert` can undo it)?"""
        try:
            self.repo.git.merge_base("--is-ancestor", sha, "HEAD")
        except Exception:  # noqa: BLE001 - not an ancestor, or git cannot tell: either way not revertible
            return False
        return True


@dataclass(frozen=True)
class PatchedFile:
    """One file as the patch found it (`before`, None when the patch creates it) and leaves it."""

    path: Path
    before: bytes | None
    after: bytes
    mode: int | None


@dataclass(frozen=True)
class CommitFile:
    """One blob of the patch commit: path relative to the toplevel, content, git file mode."""

    relative: str
    data: bytes
    mode: str


def _last_line(err: Exception) -> str:
    detail = str(getattr(err, "stderr", "") or err).strip().splitlines()
    return detail[-1].strip() if detail else str(err)


def checkout_of(root: str) -> Checkout | None:
    """The git checkout that holds `root`, or None (not a checkout, or no git available)."""
    if not _inside_git_tree(Path(root)):
        return None
    try:
        import git  # gitpython: fails to import when no git binary is installed
    except Exception:  # noqa: BLE001 - whatever gitpython raises at import means no usable git
        return None
    try:
        repo = git.Repo(root, search_parent_directories=True)
        if repo.working_tree_dir is None:  # a bare repository
            return None
        toplevel = Path(repo.working_tree_dir).resolve()
    except Exception:  # noqa: BLE001 - not a usable checkout (bare, broken, unreadable): work on the files alone
        return None
    return Checkout(repo, toplevel)


def _inside_git_tree(path: Path) -> bool:
    # Cheap test first: importing gitpython costs ~0.1 s, and site-packages trees have no .git.
    for folder in (path.resolve(), *path.resolve().parents):
        if (folder / ".git").exists():
            return True
    return False
