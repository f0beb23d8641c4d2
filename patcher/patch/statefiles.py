"""The state rlpatch keeps next to a tree, and the checks of the state files it reads back.

Layout of `<root>/.rlpatch/` (kept out of `git status` through `.git/info/exclude`):
- `lock`: held (flock) for the whole of a command that reads or writes the tree (`lock`);
- `manifest.json`: which rules are applied to which files, each file's original and patched
  SHA-256 and mode, the upstream version and git HEAD at apply time (`manifest`);
- `originals/<path>`: the bytes of each patched file before the first patch (exact revert);
- `journal.json` + `undo/<path>`: present only while a transaction writes (`transaction`), rolled
  back by the next command when a kill left them (`journal`).

The state files are written by rlpatch, but a disk, a hand edit or a copy can damage them: whatever
is not what rlpatch writes (truncated, wrong types, nested too deep, a path outside the tree)
becomes `Damaged`, which the caller turns into a one-line error before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path

STATE_DIR = ".rlpatch"


def state_dir(root: str) -> Path:
    return Path(root) / STATE_DIR


class Damaged(Exception):
    """State rlpatch did not write as it is (truncated, wrong types, a path outside the tree)."""


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise Damaged(what)


def read_json(path: Path) -> object:
    """Parse a state file; any way it cannot be read or parsed becomes Damaged."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise Damaged(f"not UTF-8 at byte {err.start}") from None
    except ValueError as err:
        raise Damaged(f"not JSON: {err}") from None
    except RecursionError:
        raise Damaged("JSON nested too deeply") from None
    except OSError as err:
        raise Damaged(f"cannot read: {err.strerror}") from None


def json_object(raw: dict, key: str) -> dict:
    value = raw.get(key, {})
    expect(isinstance(value, dict), f"{key}: not a JSON object")
    return value


def safe_relative(name: object, *, state_ok: bool = False) -> bool:
    """A path relative to the root that stays inside it (and outside the state folder, unless
    `state_ok`: the journal lists the stored originals)."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name or "\0" in name:
        return False
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts) or parts[0] == ".git":
        return False
    return state_ok or parts[0] != STATE_DIR


def check_file_record(name: str, record: object) -> None:
    """One entry of the manifest's `files`: a path inside the tree and the four fields, typed."""
    expect(safe_relative(name), f"files: {name!r} is not a path inside the tree")
    expect(isinstance(record, dict) and set(record) == {"original_sha256", "patched_sha256", "mode", "rules"},
           f"files: {name}: not a file record")
    assert isinstance(record, dict)
    expect(record["original_sha256"] is None or isinstance(record["original_sha256"], str), f"files: {name}: original_sha256 is not a string")
    expect(isinstance(record["patched_sha256"], str), f"files: {name}: patched_sha256 is not a string")
    expect(type(record["mode"]) is int and 0 <= record["mode"] < 1 << 32, f"files: {name}: mode is not a file mode")
    expect(isinstance(record["rules"], list) and all(isinstance(rule, str) for rule in record["rules"]),
           f"files: {name}: rules is not a list of rule ids")


def check_journal(journal: object) -> None:
    """The journal of a transaction: a list of writes inside the tree (stored originals included)."""
    expect(isinstance(journal, dict) and isinstance(journal.get("writes"), list), "no list of writes")
    assert isinstance(journal, dict)
    for entry in journal["writes"]:
        expect(isinstance(entry, dict) and safe_relative(entry.get("relative"), state_ok=True), "a write outside the tree")
        expect(type(entry.get("existed")) is bool and (entry.get("mode") is None or type(entry.get("mode")) is int),
               f"{entry.get('relative')}: not a journal entry")
    expect(type(journal.get("manifest_existed", False)) is bool, "manifest_existed is not true or false")
