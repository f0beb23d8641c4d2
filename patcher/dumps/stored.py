"""What `dumps compare` keeps in `-o` so that a second run and `dumps report` need no msprobe.

Per pair, `{pair folder}/rlpatch_result.json` (RESULT_NAME): the key of what msprobe was asked (the
planned argv, the pair's rows, the msprobe and rlpatch versions), the fingerprint of its inputs (the
size and modification time of every file in the two dump folders msprobe reads, and of the TP
shards' folders), the argv that ran, its CSV and exit code, and the attribution (its points feed
the report's plots). A pair whose key and fingerprint match and whose CSV is still there is not
compared again: its CSV is read back (so `--rtol` still applies). A failed pair is never stored.

Per compare, `{out}/rlpatch_compare.json` (SUMMARY_NAME): the command's JSON answer, the report's
facts and, per entry, its result file: what `dumps report OUT` renders from.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import asdict
from typing import Any

from rlpatch.dumps.command import CompareCommand
from rlpatch.dumps.compare import RESULT_NAME, PairResult
from rlpatch.dumps.divergence import Attribution
from rlpatch.errors import InputError
from rlpatch.output.api import atomic_write

SUMMARY_NAME = "rlpatch_compare.json"
FORMAT = 1  # bumped when what is stored changes meaning: an older file is then simply not current


def _folders(result: PairResult) -> list[str]:
    """The dump folders msprobe reads for this pair (dump.json, stack.json, construct.json, tensors)."""
    pair = result.pair
    folders = [os.path.dirname(pair.train.path), os.path.dirname(pair.infer.path)]
    if pair.rows is not None:
        folders += [os.path.dirname(side.path) for side in pair.rows.shards]
    return list(dict.fromkeys(folders))


def _folder_print(folder: str) -> str:
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def fingerprint(result: PairResult, seen: dict[str, str] | None = None) -> str:
    """Size and mtime of every file under the pair's dump folders: a changed or re-collected dump differs.
    `seen` keeps each folder's print for the run (pairs cut from one step share its folders)."""
    seen = {} if seen is None else seen
    for folder in _folders(result):
        if folder not in seen:
            seen[folder] = _folder_print(folder)
    prints = [seen[folder] for folder in _folders(result)]
    return hashlib.sha256("\n".join(prints).encode("ascii")).hexdigest()


def key(result: PairResult, msprobe: str) -> dict[str, Any]:
    """Everything besides the inputs that decides msprobe's CSV."""
    import rlpatch

    pair = result.pair
    return {"format": FORMAT, "argv": result.argv, "msprobe": msprobe, "rlpatch": rlpatch.__version__,
            "rows": None if pair.rows is None else pair.rows.as_json()}


def result_path(result: PairResult) -> str:
    return os.path.join(result.out, RESULT_NAME)


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None


def _stat(path: str) -> list[int] | None:
    """A regular file's size and mtime (None: not one)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns] if stat.S_ISREG(info.st_mode) else None


def restore(result: PairResult, wanted: dict[str, Any], inputs: str) -> bool:
    """Fill `result` from its stored run when that run is current (same key and inputs, its CSV
    still there); False, `result` untouched, otherwise."""
    stored = _read_json(result_path(result))
    if not isinstance(stored, dict) or stored.get("key") != wanted or stored.get("inputs") != inputs:
        return False
    csv_name = stored.get("csv")
    if not isinstance(csv_name, str) or os.sep in csv_name or stored.get("csv_stat") != _stat(
            os.path.join(result.out, csv_name)):
        return False  # the CSV is gone, or is not the one this run wrote
    ran = CompareCommand.from_argv(stored.get("ran") or [])
    if ran is None:
        return False  # not an argv this rlpatch builds
    result.command = ran
    result.csv_path = os.path.join(result.out, csv_name)
    result.exit_code = stored.get("exit_code")
    result.unsliced = list(stored.get("unsliced", []))
    result.not_compared = list(stored.get("not_compared", []))
    result.reused = True
    return True


def store(result: PairResult, wanted: dict[str, Any], inputs: str) -> None:
    """Keep a successful run for the next one (atomically, replacing a link rather than writing through it)."""
    if result.error is not None or result.csv_path is None or result.attribution is None:
        return
    record = {"version": FORMAT, "key": wanted, "inputs": inputs, "ran": result.argv, "csv": os.path.basename(result.csv_path),
              "csv_stat": _stat(result.csv_path),
              "exit_code": result.exit_code, "unsliced": result.unsliced, "not_compared": result.not_compared,
              "attribution": result.attribution.as_json()}
    atomic_write(result_path(result), json.dumps(record).encode("utf-8"), follow_link=False, make_parents=False)


def write_summary(out: str, data: dict[str, Any], facts: Any, results: list[PairResult]) -> None:
    """`{out}/rlpatch_compare.json`: what `dumps report OUT` renders from."""
    files = [os.path.relpath(result_path(r), out) if r.attribution is not None and r.error is None else None
             for r in results]
    record = {"version": FORMAT, "data": data, "facts": asdict(facts), "results": files}
    atomic_write(os.path.join(out, SUMMARY_NAME), json.dumps(record).encode("utf-8"), follow_link=False,
                 make_parents=False)


def read_summary(out: str) -> tuple[dict[str, Any], dict[str, Any], list[Attribution | None]]:
    """The stored compare of `out`: its JSON answer, the facts, and each entry's attribution (None: failed)."""
    path = os.path.join(out, SUMMARY_NAME)
    if not os.path.isdir(out):
        raise InputError(f"{out}: no such directory (the -o of a `rlpatch dumps compare`)")
    if not os.path.isfile(path):
        raise InputError(f"{out}: no {SUMMARY_NAME}: run `rlpatch dumps compare -o {out}` first")
    record = _read_json(path)
    if not isinstance(record, dict) or record.get("version") != FORMAT or not isinstance(record.get("data"), dict):
        raise InputError(f"{path}: not a compare summary this rlpatch reads (version {FORMAT}): run compare again")
    data, files = record["data"], record.get("results") or []
    if len(files) != len(data.get("results", [])):
        raise InputError(f"{path}: its results and their files disagree: run compare again")
    attributions: list[Attribution | None] = []
    for entry, name in zip(data["results"], files, strict=True):
        if name is None:
            attributions.append(None)
            continue
        stored = _read_json(os.path.join(out, name))
        if not isinstance(stored, dict) or not isinstance(stored.get("attribution"), dict):
            raise InputError(f"{os.path.join(out, name)}: missing or unreadable (request {entry['request_id']}): "
                             "run compare again")
        attributions.append(Attribution.from_json(stored["attribution"]))
    return data, record["facts"], attributions
