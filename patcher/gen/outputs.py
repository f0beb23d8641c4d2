"""Where gen writes, whether it may, and the writing itself (then the lint of what it wrote).

Every output is named before anything is written; an output that is the input script (by device
and inode) or not a regular file is refused, an existing one needs --force. The files are written
together, each through a temporary file and a rename; --dry-run writes them into a scratch folder
instead, so that the same lint runs, and its findings point back at the real paths.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from rlpatch.errors import InputError
from rlpatch.lint.api import Finding, LintOptions, lint_file
from rlpatch.output.api import discard, publish, stage
from rlpatch.shell.api import Span, file_kind

CONFIG_ROLES = ("train", "infer", "infer-prefill", "infer-decode")


def _stem(name: str) -> str:
    return name[:-3] if name.endswith(".sh") else name


def output_paths(script: str, mode: str, out: str | None, config_dir: str | None) -> tuple[str, dict[str, str]]:
    """The new script, and each config role's file name relative to the new script's folder."""
    new = out or os.path.join(os.path.dirname(script) or ".", f"{_stem(os.path.basename(script))}.{mode}-dump.sh")
    folder = os.path.dirname(os.path.abspath(new))
    configs = os.path.abspath(config_dir) if config_dir else folder
    # Named after the new script, so that the scripts of two modes never share (and overwrite) a config.
    out_stem = _stem(os.path.basename(new))
    names = {}
    for role in CONFIG_ROLES:
        names[role] = os.path.relpath(os.path.join(configs, f"{out_stem}.msprobe-{role}.json"), folder)
    return new, names


def dump_root(new_path: str, given: str | None) -> str:
    """Where the dumps land: the one given, else `<stem>-dumps` beside the new script."""
    folder = os.path.dirname(os.path.abspath(new_path))
    stem = os.path.basename(new_path).rsplit(".", 1)[0]
    if given:
        return os.path.abspath(given)
    # `run.consistency-dump.sh` -> `run.consistency-dumps`; any other name (`-o run.inf511.sh`) gets
    # `-dumps` appended: the folder must never share the script's own stem.
    return os.path.join(folder, stem.removesuffix("-dump") + "-dumps")


def config_text(content: dict[str, Any]) -> str:
    return json.dumps(content, indent=2) + "\n"


def output_problem(path: str, script: str) -> str | None:
    """Why gen must not write `path`, or None: an output replaces only a regular file that is not
    the input script (compared by device and inode: a symlink or hard link to it is it too)."""
    try:
        info = os.stat(path)  # follows symlinks: what a write would reach
    except FileNotFoundError:
        return None  # new (or a dangling symlink, which the rename replaces)
    except OSError as err:
        return f"cannot check it ({err.strerror or err})"
    kind = file_kind(info.st_mode)
    if kind is not None:
        return f"is {kind}; gen writes only regular files"
    if os.path.samestat(info, os.stat(script)):
        return f"is the input script {script}; gen never replaces its input"
    return None


def refuse_bad_outputs(files: dict[str, str], script: str, overwrite: bool) -> None:
    """InputError (nothing written) when any output path is the input or not a regular file, or
    exists and may not be overwritten."""
    for path in files:
        problem = output_problem(path, script)
        if problem:
            raise InputError(f"{path}: {problem} (nothing written)")
    if not overwrite:
        existing = [path for path in files if os.path.exists(path)]
        if existing:
            raise InputError(f"{existing[0]} exists: give --force to overwrite it (nothing written)")


class LintFailed(Exception):
    """The files are written but the linter could not read them back."""


def _lint(path: str, lint_options: LintOptions) -> list[Finding]:
    try:
        return lint_file(path, lint_options)
    except InputError as err:
        raise LintFailed(err.message) from None


def write_and_lint(files: dict[str, str], new_path: str, script: str, lint_options: LintOptions,
                   dry_run: bool) -> list[Finding]:
    """Write the files (into a scratch folder for --dry-run) and lint the new script."""
    if dry_run:
        with tempfile.TemporaryDirectory(prefix="rlpatch-gen-") as scratch:
            folder = os.path.dirname(os.path.abspath(new_path))
            # The configs beside the new script go beside its scratch copy (paths relative to the new
            # script's folder, not to the current directory); the lint must find them there.
            moved = {os.path.join(scratch, os.path.relpath(path, folder)): text
                     for path, text in files.items() if not os.path.relpath(path, folder).startswith("..")}
            moved[os.path.join(scratch, os.path.basename(new_path))] = files[new_path]
            write_all(moved, script)
            findings = _lint(os.path.join(scratch, os.path.basename(new_path)), lint_options)
            return [_moved_back(f, scratch, os.path.dirname(os.path.abspath(new_path))) for f in findings]
    write_all(files, script)
    return _lint(new_path, lint_options)


def _moved_back(finding: Finding, scratch: str, folder: str) -> Finding:
    """A finding of the scratch copy, pointing at the file the real run would write."""
    def back(span: Span) -> Span:
        if not span.file.startswith(scratch):
            return span
        return span._replace(file=os.path.join(folder, os.path.relpath(span.file, scratch)))

    return finding._replace(span=back(finding.span), related=tuple(back(r) for r in finding.related))


def write_all(files: dict[str, str], script: str) -> None:
    """Each file staged (a temporary beside it, fsynced), then all published by renames (a link at an
    output path is replaced, never written through); the new script gets the original's mode bits.
    A file that cannot be staged (disk full) leaves no temporary behind and the message names it."""
    staged: list[tuple[str, str]] = []
    try:
        for index, (path, text) in enumerate(files.items()):
            directory = os.path.dirname(os.path.abspath(path))
            os.makedirs(directory, exist_ok=True)
            mode = os.stat(script).st_mode & 0o777 if index == 0 else None
            staged.append((stage(os.path.join(directory, os.path.basename(path)), text.encode("utf-8"), mode), path))
    except OSError as err:
        discard([temporary for temporary, _ in staged])
        raise InputError(f"cannot write {err.filename or 'the output'}: {err.strerror or err} (nothing written)") from None
    publish(staged)
