"""Pair every request of every step through the logs' "rows" (issue 27; /work contract for the fields).

An inference record with "rows" (dispatch_log.jsonl, `rows_source: input_batch`) says where each
request's tokens sit in the step's packed `[step_tokens, ...]` activations and which prompt
positions they cover ([computed, computed + tokens)); a training record with "rows"
(update_actor_log.jsonl) says where each request's tokens sit in its micro-batch (`batch_index`,
`offset`, `tokens`, `layout`, `token_dim`). A request's inference rows pair with the training rows of
the same positions when the training forward saw them (`computed + tokens <= tokens` of the training
row); a decode step goes past the prompt the training forward saw and stays unpaired with why.
Rollout TP > 1: the records of one step whose `tp_ranks` name the same group are one replica; against
FSDP they make one pair whose inference side is rebuilt from every rank (`tp.py`), against Megatron
each TP rank pairs with the training rank of the same TP position (shard against shard).
The logs are read line by line: what is kept is a few numbers per row, never a record's text.
Records without "rows" keep their earlier meaning (`correlate`: single-request prefills only).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rlpatch.dumps.correlate import (
    MAX_LINE,
    Correlation,
    Pair,
    Record,
    Side,
    _lines,
    inference_side,
    normalise_request_id,
    record_problem,
    training_side,
)
from rlpatch.dumps.layout import Tree


@dataclass(frozen=True)
class TrainRows:
    """Where one request's tokens sit in a training micro-batch's activations."""

    batch_index: int
    offset: int
    tokens: int
    token_dim: int  # 1: [batch, tokens, ...] (FSDP); 0: [tokens, batch, ...] (Megatron)
    batch: int  # the activations' batch size (1 when packed)
    length: int  # the activations' token-dim size
    layout: str


@dataclass(frozen=True)
class InferRows:
    """Where one request's tokens sit in an inference step's packed activations."""

    offset: int
    tokens: int
    computed: int
    step_tokens: int
    kind: str  # "new" or "cached"


@dataclass
class RowPlan:
    """How to cut one pair's rows out of both dumps (`slicing.py`)."""

    train: TrainRows
    infer: InferRows
    requests_in_step: int  # requests packed in the inference step (the batch size the divergence is shown against)
    requests_in_micro_batch: int
    shards: list[Side] = field(default_factory=list)  # rollout TP > 1 against FSDP: every TP rank, rank 0 first

    @property
    def train_start(self) -> int:
        return self.train.offset + self.infer.computed

    def as_json(self) -> dict[str, Any]:
        return {
            "train": {"layout": self.train.layout, "batch_index": self.train.batch_index,
                      "offset": self.train.offset, "tokens": self.train.tokens, "token_dim": self.train.token_dim,
                      "slice": [self.train_start, self.train_start + self.infer.tokens],
                      "requests_in_micro_batch": self.requests_in_micro_batch},
            "infer": {"offset": self.infer.offset, "tokens": self.infer.tokens, "computed": self.infer.computed,
                      "type": self.infer.kind, "step_tokens": self.infer.step_tokens,
                      "slice": [self.infer.offset, self.infer.offset + self.infer.tokens],
                      "requests_in_step": self.requests_in_step,
                      "tp_shards": [side.path for side in self.shards]},
        }

    def spec(self, train_json: str, infer_json: str, out: str) -> dict[str, Any]:
        """What `slicing.py` reads."""
        return {"train": train_json, "infer": infer_json, "out": out,
                "train_rows": {"batch_index": self.train.batch_index, "start": self.train_start,
                               "tokens": self.infer.tokens, "token_dim": self.train.token_dim,
                               "batch": self.train.batch, "length": self.train.length},
                "infer_rows": {"offset": self.infer.offset, "tokens": self.infer.tokens,
                               "step_tokens": self.infer.step_tokens},
                "shards": [side.path for side in self.shards]}


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _records(path: str, pid: int, problems: list[str]) -> Iterator[Record]:
    """The records of one log, one line at a time (bad lines become problems)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in _lines(handle):
                if line is None:
                    problems.append(f"{path}:{number}: a line over {MAX_LINE} characters: not a record")
                    continue
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except (ValueError, RecursionError):
                    continue  # said once by correlate's own reading of the same log
                if isinstance(data, dict) and record_problem(data) is None:
                    yield Record(data, pid, number, None)
    except OSError:
        return  # said by correlate's own reading


def _row_list(value: object, keys: tuple[str, ...]) -> list[dict[str, Any]] | None:
    """The rows when every one has a request_id and whole numbers for `keys`; else None."""
    if not isinstance(value, list) or not value:
        return None
    for row in value:
        if not isinstance(row, dict) or not isinstance(row.get("request_id"), (str, int)):
            return None
        if any(_count(row.get(key)) is None for key in keys):
            return None
    return value


TRAIN_KEYS = ("batch_index", "offset", "tokens")
INFER_KEYS = ("offset", "tokens", "computed")


@dataclass(frozen=True)
class TrainEntry:
    record: Record  # its data is dropped: only step, rank, pid, phase are kept (see _slim)
    rows: TrainRows
    requests: int


def _slim(record: Record, *keys: str) -> Record:
    return Record({key: record.data[key] for key in keys if key in record.data}, record.pid, record.line, None)


def _train_rows(record: Record, rows: list[dict[str, Any]]) -> list[TrainRows]:
    token_dim = 0 if record.get("token_dim") == 0 else 1
    layout = "padded" if record.get("layout") == "padded" else "packed"
    pad = _count(record.get("tp_size")) or 1 if token_dim == 0 else 1  # Megatron pads each request to the TP size
    length = max(row["offset"] + -(-row["tokens"] // pad) * pad for row in rows)
    batch = len(rows) if layout == "padded" else 1
    return [TrainRows(row["batch_index"], row["offset"], row["tokens"], token_dim, batch, length, layout)
            for row in rows]


def training_rows(train: Tree, result: Correlation) -> tuple[dict[str, list[TrainEntry]], set[str]]:
    """id -> the training rows holding it (log-prob passes first); the ids of records that have none, with why."""
    found: dict[str, list[TrainEntry]] = {}
    reasoned: set[str] = set()
    for pid, path in sorted(train.update_actor_logs.items()):
        for record in _records(path, pid, result.problems):
            ids = [str(i) for i in record.get("request_ids") or []]
            where = f"training step {record.get('step')} (rank {record.get('rank')})"
            rows = _row_list(record.get("rows"), TRAIN_KEYS)
            why = None
            if record.get("rows_error"):
                why = f"{where}: the engine patch could not read its rows ({record.get('rows_error')})"
            elif record.get("sp_size") or record.get("cp_size"):
                why = f"{where}: each rank holds a slice of every request (Ulysses/context parallel): no rows"
            elif record.get("sequence_parallel") and (_count(record.get("tp_size")) or 1) > 1:
                why = f"{where}: Megatron sequence parallelism splits the tokens over the TP ranks: no rows"
            elif rows is None:
                continue  # an earlier engine patch: correlate's single-request pairing reads it
            if why is not None:
                for request_id in ids:
                    result.unpair(request_id, "train", why)
                    reasoned.add(request_id)
                continue
            slim = _slim(record, "step", "rank", "pid", "phase")
            assert rows is not None
            for row, parsed in zip(rows, _train_rows(record, rows), strict=True):
                request_id = normalise_request_id(str(row["request_id"]))[0]
                found.setdefault(request_id, []).append(TrainEntry(slim, parsed, len(rows)))
    for entries in found.values():
        entries.sort(key=lambda e: (e.record.get("phase", "log_prob") != "log_prob", e.record.get("rank") or 0))
    return found, reasoned


@dataclass
class StepGroup:
    """The records of one replica's step: one per TP rank; the rows that may pair (see `_settled`)."""

    records: list[Record]
    rows: list[dict[str, Any]]
    step_tokens: int
    requests: int  # every request of the step, paired or not (the batch size a verdict is shown against)


class RowReasons:
    """Why inference rows stay unpaired, once per request: a long rollout decodes each request for
    thousands of steps, and one line per step would make the answer as large as the log."""

    def __init__(self) -> None:
        self._first: dict[str, list[Any]] = {}  # request id -> [the first step's why, rows unpaired]

    def note(self, request_id: str, why: str) -> None:
        found = self._first.setdefault(request_id, [why, 0])
        found[1] += 1

    def requests(self) -> list[str]:
        return list(self._first)

    def flush(self, result: Correlation) -> None:
        for request_id, (why, count) in self._first.items():
            more = f"; and {count - 1} more of its rows in later steps" if count > 1 else ""
            result.unpair(request_id, "infer", why + more)


def _settled(row: dict[str, Any], where: str, entries: list[TrainEntry] | None) -> str | None:
    """Why a row of a single-rank step can never pair (no training row, or positions the training
    forward did not see), decided while reading, so that such rows are not kept; None: it may pair."""
    if not entries:
        return f"{where}: in no update_actor_log.jsonl record with rows"
    seen = entries[0].rows.tokens
    end = row["computed"] + row["tokens"]
    if end <= seen:
        return None
    kind = "a decode" if row["computed"] >= seen else "positions past the training forward's"
    return f"{where}: positions [{row['computed']}, {end}) go past the {seen} token(s) the training forward saw ({kind})"


def inference_groups(infer: Tree, result: Correlation, train_index: dict[str, list[TrainEntry]] | None = None,
                     reasons: RowReasons | None = None) -> tuple[list[StepGroup], set[str]]:
    """Every inference step with rows, its TP ranks together; ids of steps whose rows could not be read.

    With `train_index` and `reasons`, a row of a single-rank step that can never pair is noted in
    `reasons` as it is read and not kept: memory follows the rows that pair, not the log."""
    groups: dict[tuple[Any, ...], StepGroup] = {}
    reasoned: set[str] = set()
    for pid, path in sorted(infer.dispatch_logs.items()):
        for record in _records(path, pid, result.problems):
            where = f"inference step {record.get('step')} (pid {pid}, rank {record.get('rank')})"
            ids = [normalise_request_id(str(r))[0] for r in record.get("scheduler_order") or []]
            if record.get("rows_error"):
                for request_id in ids:
                    result.unpair(request_id, "infer", f"{where}: the logger could not read the runner's rows "
                                  f"({record.get('rows_error')})")
                    reasoned.add(request_id)
                continue
            rows = _row_list(record.get("rows"), INFER_KEYS)
            if rows is None or record.get("rows_source") != "input_batch":
                continue  # an earlier logger, or no input batch: correlate's single-request pairing reads it
            if _count(record.get("step")) is None or _count(record.get("rank")) is None:
                continue
            tp_ranks = record.get("tp_ranks") if isinstance(record.get("tp_ranks"), list) else []
            key = (record.get("step"), tuple(map(str, tp_ranks)), tuple(str(r["request_id"]) for r in rows), pid
                   if (_count(record.get("tp_size")) or 1) == 1 else None)
            total = _count(record.get("total_num_scheduled_tokens")) or sum(row["tokens"] for row in rows)
            slim = _slim(record, "step", "rank", "tp_rank", "tp_size", "phase")
            group = groups.get(key)
            if group is None:
                kept = rows
                if reasons is not None and train_index is not None and (_count(record.get("tp_size")) or 1) == 1:
                    kept = []
                    for row in rows:
                        request_id, role = normalise_request_id(str(row["request_id"]))
                        why = None if role == "D" else _settled(row, where, train_index.get(request_id))
                        if why is None:
                            kept.append(row)
                        else:
                            reasons.note(request_id, why)
                    if not kept:  # nothing of this step can pair: no group to keep (a decode step, mostly)
                        continue
                group = groups[key] = StepGroup([], [{k: row[k] for k in (*INFER_KEYS, "request_id", "type")
                                                      if k in row} for row in kept], total, len(rows))
            group.records.append(slim)
    for group in groups.values():
        group.records.sort(key=lambda r: _count(r.get("tp_rank")) or 0)
    return list(groups.values()), reasoned


def pair_rows(train: Tree, infer: Tree, backend: str, result: Correlation) -> set[str]:
    """Pair every request row of every step with rows; the request ids this pairing spoke for."""
    train_index, spoken = training_rows(train, result)
    reasons = RowReasons()
    groups, reasoned = inference_groups(infer, result, train_index, reasons)
    spoken |= reasoned
    covered: set[str] = set()
    for group in groups:
        for row in group.rows:
            request_id, role = normalise_request_id(str(row["request_id"]))
            spoken.add(request_id)
            _pair_row(train, infer, backend, group, row, request_id, role, train_index.get(request_id, []),
                      result, covered, reasons)
    spoken.update(reasons.requests())
    reasons.flush(result)
    paired = {pair.request_id for pair in result.pairs}  # by rows, or whole by an earlier logger's record
    for request_id in train_index:
        spoken.add(request_id)
        if request_id not in covered and request_id not in paired:
            result.unpair(request_id, "train", "no inference step with rows computed its prompt positions")
    return spoken


def _pair_row(train: Tree, infer: Tree, backend: str, group: StepGroup, row: dict[str, Any], request_id: str,
              role: str | None, entries: list[TrainEntry], result: Correlation, covered: set[str],
              reasons: RowReasons) -> None:
    first = group.records[0]
    where = f"inference step {first.get('step')} (pid {first.pid}, rank {first.get('rank')})"
    size = _count(first.get("tp_size")) or 1
    if role == "D":
        reasons.note(request_id, f"{where} is the decode instance of a PD run (_D)")
        return
    if len(group.records) != size:
        reasons.note(request_id, f"{where}: {len(group.records)} of its {size} TP ranks logged the step")
        return
    why = _settled(row, where, entries)
    if why is not None:
        reasons.note(request_id, why)
        return
    infer_rows = InferRows(row["offset"], row["tokens"], row["computed"], group.step_tokens, str(row.get("type")))
    if size > 1 and backend == "megatron":
        for record in group.records:
            position = _count(record.get("tp_rank")) or 0
            match = next((e for e in entries if (_count(e.record.get("rank")) or 0) % size == position), None)
            if match is None:
                result.unpair(request_id, "infer", f"{where}: no training rank at TP position {position} holds it")
                continue
            _add(train, infer, request_id, match, record, [], infer_rows, group.requests, result, covered)
        return
    shards = [] if size == 1 else group.records
    _add(train, infer, request_id, entries[0], group.records[0], shards, infer_rows, group.requests, result, covered)


def _add(train: Tree, infer: Tree, request_id: str, entry: TrainEntry, record: Record, shards: list[Record],
         infer_rows: InferRows, requests: int, result: Correlation, covered: set[str]) -> None:
    train_side, why = training_side(train, entry.record)
    if train_side is None:
        result.unpair(request_id, "train", why)
        return
    sides = [inference_side(infer, r) for r in (shards or [record])]
    if any(side is None for side in sides):
        result.unpair(request_id, "infer", f"pid {record.pid}'s steps were written into step folders several "
                      "processes shared (an earlier dispatch logger): which dump is its own is unknown")
        return
    for side in [train_side, *sides]:
        assert side is not None
        if not os.path.isfile(side.path):
            result.unpair(request_id, "train" if side is train_side else "infer",
                          f"missing file {side.path} (the config's step list may skip it)")
            return
    infer_side = sides[0]
    assert infer_side is not None
    plan = RowPlan(entry.rows, infer_rows, requests, entry.requests, [s for s in sides if s is not None] if shards else [])
    covered.add(request_id)
    result.pairs.append(Pair(request_id, train_side, infer_side, plan))
