"""What is applied to a tree: `.rlpatch/manifest.json`, read back and written durably.

The manifest lists which rules are applied to which files, each file's original and patched SHA-256
and mode, the upstream versions and git HEAD at apply time (and the commit `apply --commit` made).
A manifest that is not what rlpatch writes is refused with a one-line error before anything is
written; a manifest left with no file is removed, so a tree where nothing is applied is as it was.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from rlpatch.errors import InputError
from rlpatch.output.api import atomic_write
from rlpatch.patch import statefiles
from rlpatch.patch.statefiles import STATE_DIR, Damaged, expect, state_dir

MANIFEST_FORMAT = 1


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class FileRecord:
    original_sha256: str | None  # None: the patch created the file
    patched_sha256: str
    mode: int
    rules: list[str]

    @property
    def created(self) -> bool:
        return self.original_sha256 is None


@dataclass
class Manifest:
    """What is applied to one root. Paths are relative to the root, with `/` separators."""

    root: str
    files: dict[str, FileRecord] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)  # package -> version at apply time
    git_head: str | None = None
    git_commit: str | None = None  # the commit `apply --commit` made (revert says how to undo it)

    @classmethod
    def load(cls, root: str) -> "Manifest":
        path = state_dir(root) / "manifest.json"
        if not path.exists() and not path.is_symlink():
            return cls(root)
        try:
            raw = statefiles.read_json(path)
            if not isinstance(raw, dict):
                raise Damaged("not a JSON object")
            expect(raw.get("format", MANIFEST_FORMAT) == MANIFEST_FORMAT and type(raw.get("format", 1)) is int,
                    f"format {raw.get('format')!r}, this rlpatch reads format {MANIFEST_FORMAT}")
            files = {name: _file_record(name, record) for name, record in statefiles.json_object(raw, "files").items()}
            versions = statefiles.json_object(raw, "versions")
            expect(all(isinstance(v, str) for v in versions.values()), "versions: a version that is not a string")
            heads = [raw.get(key) for key in ("git_head", "git_commit")]
            expect(all(head is None or isinstance(head, str) for head in heads), "git_head/git_commit: not a string")
        except Damaged as err:
            raise InputError(f"{path}: damaged rlpatch manifest ({err}); nothing was written; "
                             f"move {STATE_DIR}/ away to start over (its originals/ holds the unpatched files)") from None
        return cls(root, files, dict(versions), heads[0], heads[1])

    def save(self) -> None:
        path = state_dir(self.root) / "manifest.json"
        if not self.files:
            if path.exists():
                path.unlink()
            return
        payload = {
            "format": MANIFEST_FORMAT,
            "tool": "rlpatch",
            "versions": self.versions,
            "git_head": self.git_head,
            "git_commit": self.git_commit,
            "files": {name: record.__dict__ for name, record in sorted(self.files.items())},
        }
        atomic_write(path, (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode())

    def original_path(self, relative: str) -> Path:
        return state_dir(self.root) / "originals" / relative

    def forget(self, rule_ids: set[str]) -> list[str]:
        """Drop rules that are no longer in their files (undone by `git revert`, a checkout...):
        the files left with no rule, whose stored originals are then stale too."""
        gone = []
        for relative, record in list(self.files.items()):
            if not set(record.rules) & rule_ids:
                continue
            record.rules = sorted(set(record.rules) - rule_ids)
            if not record.rules:
                del self.files[relative]
                gone.append(relative)
        return gone

    def rules_of(self, relative: str) -> list[str]:
        record = self.files.get(relative)
        return list(record.rules) if record else []


def _file_record(name: str, record: object) -> FileRecord:
    statefiles.check_file_record(name, record)
    assert isinstance(record, dict)
    return FileRecord(record["original_sha256"], record["patched_sha256"], record["mode"], list(record["rules"]))
