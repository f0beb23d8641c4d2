"""The format version of rlpatch's JSON documents.

Every JSON document a command prints or writes (`--format json` on stdout, the files `dumps compare`
keeps in `-o`) carries `"version": JSON_VERSION` as its first key; SARIF carries SARIF's own
`version` ("2.1.0"). The number changes only when a field changes meaning or goes away: a field
that is added does not change it, so a reader ignores the keys it does not know. Each document's
JSON Schema ships in the package (`rlpatch/schemas/*.schema.json`); docs/json.md documents them.
"""

from __future__ import annotations

from typing import Any

JSON_VERSION = 1


def versioned(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with `version` first (a new dict; `document` is left as it is)."""
    return {"version": JSON_VERSION, **{key: value for key, value in document.items() if key != "version"}}
