"""Pair training and inference dumps through request ids.

An inference record is usable when it is a prefill that ran exactly one request, new in that step;
its id, normalised (vLLM >= 0.14's `-{8 hex}` suffix and PD disaggregation's `_P` stripped), is
looked up in the training records that hold exactly one request. The two step counters are
independent: the pair is `{train}/step{T}/rank{Rt}` with `{infer}/{pid}/step{I}/rank{Ri}`, and both
`dump.json` files must exist. Everything that cannot be paired is listed with the reason.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, TYPE_CHECKING

from rlpatch.dumps.layout import DUMP_JSON, Tree

if TYPE_CHECKING:
    from rlpatch.dumps.rows import RowPlan

VLLM_SUFFIX = re.compile(r"-[0-9a-f]{8}$")
PD_SUFFIX = re.compile(r"_([PD])$")


@dataclass(frozen=True)
class Record:
    """One line of a dispatch_log.jsonl or update_actor_log.jsonl, with the folder it came from."""

    data: dict
    pid: int  # the `{pid}` folder holding the log
    line: int
    timestamp: float | None

    def get(self, key: str, default=None):
        return self.data.get(key, default)


@dataclass
class Side:
    """Where one side of a pair is: its step counter, rank, and dump.json."""

    step: int
    rank: int
    path: str
    pid: int | None = None

    def as_json(self, with_pid: bool) -> dict:
        found = {"pid": self.pid} if with_pid else {}
        return {**found, "step": self.step, "rank": self.rank, "path": self.path}


@dataclass
class Pair:
    request_id: str
    train: Side
    infer: Side
    rows: RowPlan | None = None  # the request's rows in both dumps (rlpatch.dumps.rows); None: whole dumps

    @property
    def label(self) -> str:
        """The pair's name among the pairs: its request id, and which step and positions when cut by rows."""
        if self.rows is None:
            return self.request_id
        return f"{self.request_id}.step{self.infer.step}.pos{self.rows.infer.computed}"


@dataclass
class Correlation:
    pairs: list[Pair] = field(default_factory=list)
    unpaired: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # facts worth saying that are not problems

    def unpair(self, request_id: str, side: str, why: str) -> None:
        self.unpaired.append({"request_id": request_id, "side": side, "why": why})


def parse_timestamp(value) -> float | None:
    """Epoch seconds from an epoch number or an ISO 8601 string (both occur in these logs)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text)
        except ValueError:
            pass
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


# A log line longer than this is no record of ours: it is skipped (and said), never held in memory.
MAX_LINE = 1024 * 1024
MAX_NUMBER = 10**9  # steps and ranks beyond this are damage, not a run


def _lines(handle: IO[str]) -> Iterator[tuple[int, str | None]]:
    """(line number, text) of each line; None for a line over MAX_LINE, read past in bounded pieces."""
    number = 0
    while True:
        line = handle.readline(MAX_LINE + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE:
            while line and not line.endswith("\n"):
                line = handle.readline(MAX_LINE)
            yield number, None
        else:
            yield number, line


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_NUMBER


def record_problem(data: dict) -> str | None:
    """What is wrong with the types of a log record's fields, or None (missing fields are judged later)."""
    for key in ("step", "rank", "num_requests", "pid"):
        if key in data and not _is_count(data[key]):
            return f"{key} is not a whole number from 0 to {MAX_NUMBER}"
    if "phase" in data and not isinstance(data["phase"], str):
        return "phase is not a string"
    ids = data.get("request_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in ids):
        return "request_ids is not a list of ids"
    requests = data.get("requests", [])
    if not isinstance(requests, list) or not all(
            isinstance(r, dict) and isinstance(r.get("request_id"), (str, int)) for r in requests):
        return "requests is not a list of objects with a request_id"
    return None


def stream_records(path: str, pid: int, problems: list[str],
                   bad_line: Callable[[str], None] | None = None) -> Iterator[Record]:
    """The valid records of one log in file order, one at a time (memory bounded by the longest line,
    never by the file). Each bad line is said through `bad_line` (default: added to `problems`); an
    unreadable log is added to `problems`."""
    say = problems.append if bad_line is None else bad_line
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in _lines(handle):
                if line is None:
                    say(f"{path}:{number}: a line over {MAX_LINE} characters: not a record")
                    continue
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except (ValueError, RecursionError):
                    say(f"{path}:{number}: not a JSON record")
                    continue
                if not isinstance(data, dict):
                    say(f"{path}:{number}: not a JSON object")
                elif (wrong := record_problem(data)) is not None:
                    say(f"{path}:{number}: {wrong}")
                else:
                    yield Record(data, pid, number, parse_timestamp(data.get("timestamp")))
    except OSError as err:
        problems.append(f"{path}: unreadable ({err.strerror})")


def read_log(path: str, pid: int, problems: list[str], skip: Callable[[dict], bool] | None = None) -> list[Record]:
    """The JSON records of one log, oldest first; bad lines become problems, not errors. A record
    `skip` says another reader handles is dropped as it is read (memory follows what is kept)."""
    records = [record for record in stream_records(path, pid, problems) if skip is None or not skip(record.data)]
    return sorted(records, key=lambda r: (r.timestamp is None, r.timestamp or 0.0, r.line))


# The records that pair whole (without rows), one predicate each, shared with `dumps check` (processes.py).
def single_prefill(data: dict) -> tuple[str, str | None] | None:
    """(normalised id, PD role) of a dispatch record that is a prefill of exactly one request, new in
    that step; None for any other record."""
    requests = [r for r in data.get("requests") or [] if isinstance(r, dict)]
    if data.get("phase") != "prefill" or len(requests) != 1 or requests[0].get("type") != "new":
        return None
    return normalise_request_id(str(requests[0].get("request_id")))


def single_training_request(data: dict) -> str | None:
    """The id of an update_actor record whose micro-batch held exactly one request; None otherwise."""
    ids = data.get("request_ids") or []
    return str(ids[0]) if data.get("num_requests") == 1 and len(ids) == 1 else None


def is_log_prob(data: dict) -> bool:
    """A log-prob pass (the prompts-only forward that matches the inference prefill); records of
    patches that wrote no `phase` count as one."""
    return data.get("phase", "log_prob") == "log_prob"


def normalise_request_id(request_id: str) -> tuple[str, str | None]:
    """The id verl gave the request, and the PD role (`P`/`D`) if the id carried one."""
    text = VLLM_SUFFIX.sub("", request_id)
    role = PD_SUFFIX.search(text)
    if role is not None:
        text = VLLM_SUFFIX.sub("", text[: role.start()])
    return text, role.group(1) if role else None


def _as_int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def training_side(tree: Tree, record: Record) -> tuple[Side | None, str]:
    """The training dump a single-request record names (`rank{R}`, or `proc{pid}` without a rank)."""
    step, rank = _as_int(record.get("step")), _as_int(record.get("rank"))
    if step is None or rank is None:
        return None, f"update_actor_log record (pid {record.pid}, line {record.line}) has no step or rank"
    folder = os.path.join(tree.root, f"step{step}")
    path = os.path.join(folder, f"rank{rank}", DUMP_JSON)
    proc = os.path.join(folder, f"proc{_as_int(record.get('pid')) or record.pid}", DUMP_JSON)
    if not os.path.isfile(path) and os.path.isfile(proc):
        path = proc
    return Side(step, rank, path), ""


def inference_side(tree: Tree, record: Record) -> Side | None:
    """The inference dump a dispatch record names; None when several processes shared its step folders."""
    step, rank = record.get("step"), record.get("rank")  # both checked to be ints in _prefills
    base = tree.inference_base(record.pid)
    if base is None:
        return None
    folder = os.path.join(base, f"step{step}")
    path = os.path.join(folder, f"rank{rank}", DUMP_JSON)
    proc = os.path.join(folder, f"proc{record.pid}", DUMP_JSON)  # msprobe knew no distributed rank
    if not os.path.isfile(path) and os.path.isfile(proc):
        path = proc
    return Side(step, rank, path, record.pid)


def layout_notes(infer: Tree) -> tuple[list[str], list[str]]:
    """(notes, problems) about an inference folder written by an earlier dispatch logger."""
    legacy = infer.legacy_dispatch_pids()
    if not legacy:
        return [], []
    moved = (f"{infer.root}: the step folders sit at {infer.root}/step{{N}}, beside {{pid}}/dispatch_log.jsonl "
             "with no steps under {pid}: written by a dispatch logger older than this rlpatch, which left msprobe's "
             "dump path at dump_path (the current patch moves each process's dumps into {dump_path}/{pid})")
    if len(legacy) == 1:
        return [f"{moved}; one process wrote here (pid {legacy[0]}), so its steps are read from the root"], []
    return [], [f"{moved}; {len(legacy)} processes (pids {', '.join(map(str, legacy))}) wrote into the same "
                "step folders and overwrote each other's dumps: re-apply the patch (rlpatch apply) and collect again"]


def _training_index(train: Tree, result: Correlation) -> tuple[dict[str, list[Record]], dict[str, int]]:
    """id -> single-request training records; id -> size of a multi-request micro-batch holding it.

    A log-prob pass (`is_log_prob`) is preferred to a training pass of the same request."""
    single: dict[str, list[Record]] = {}
    batched: dict[str, int] = {}
    for pid, path in sorted(train.update_actor_logs.items()):
        for record in read_log(path, pid, result.problems):
            alone = single_training_request(record.data)
            if alone is not None:
                single.setdefault(alone, []).append(record)
            else:
                ids = [str(i) for i in record.get("request_ids") or []]
                for request_id in ids:
                    batched[request_id] = len(ids)
    for request_id, records in single.items():
        log_prob = [r for r in records if is_log_prob(r.data)]
        single[request_id] = log_prob or records
        _report_repeats(request_id, "training", single[request_id], result)
    return single, batched


def _report_repeats(request_id: str, side: str, records: list[Record], result: Correlation) -> None:
    """A request logged in several steps of one rank: a second pass dumped it again (pair keeps the first)."""
    steps_of_rank: dict[object, list[object]] = {}
    for record in records:
        steps_of_rank.setdefault(record.get("rank"), []).append(record.get("step"))
    for rank, steps in sorted(steps_of_rank.items(), key=lambda item: str(item[0])):
        if len(steps) > 1:
            result.problems.append(
                f"request {request_id} is logged in {len(steps)} {side} steps of rank {rank} "
                f"({', '.join(f'step{s}' for s in steps)}): a second pass dumped it again; paired with the first")


def _prefills(infer: Tree, result: Correlation) -> dict[str, list[Record]]:
    """id -> the usable inference records; every other record is listed as unpaired with why."""
    usable: dict[str, list[Record]] = {}
    for pid, path in sorted(infer.dispatch_logs.items()):
        for record in read_log(path, pid, result.problems, skip=_has_rows):  # those pair row by row (rows.py)
            found = single_prefill(record.data)
            if found is None or _as_int(record.get("step")) is None or _as_int(record.get("rank")) is None:
                _unusable(record, pid, result)
                continue
            request_id, role = found
            if role == "D":
                where = f"inference step {record.get('step')} (pid {pid}, rank {record.get('rank')})"
                result.unpair(request_id, "infer", f"{where} is the decode instance of a PD run (_D)")
            else:
                usable.setdefault(request_id, []).append(record)
    for request_id, records in usable.items():
        _report_repeats(request_id, "inference", records, result)
    return usable


def _unusable(record: Record, pid: int, result: Correlation) -> None:
    """List the requests of a dispatch record that is no single-request prefill with a step and rank, with why."""
    requests = [r for r in record.get("requests") or [] if isinstance(r, dict)]
    where = f"inference step {record.get('step')} (pid {pid}, rank {record.get('rank')})"
    ids = [normalise_request_id(str(r.get("request_id")))[0] for r in requests]
    if record.get("phase") != "prefill":
        for request_id in ids:
            result.unpair(request_id, "infer", f"{where} is a {record.get('phase')} step")
    elif len(requests) != 1:
        for request_id in ids:
            result.unpair(request_id, "infer", f"{where} ran {len(requests)} requests")
    elif _as_int(record.get("step")) is None or _as_int(record.get("rank")) is None:
        result.unpair(ids[0], "infer", f"dispatch_log record (pid {pid}, line {record.line}) has no step or rank")
    else:  # a prefill of one request that is not new in this step
        result.unpair(ids[0], "infer", f"{where}: the request is {requests[0].get('type')}, not new")


def _has_rows(data: dict) -> bool:
    """A dispatch record the row pairing reads (rows from the runner's input batch, or why there are none)."""
    return bool(data.get("rows_error")) or (isinstance(data.get("rows"), list) and data.get("rows_source") == "input_batch")


def correlate(train: Tree, infer: Tree, backend: str) -> Correlation:
    from rlpatch.dumps.rows import pair_rows

    result = _correlate_single(train, infer, backend)
    spoken = pair_rows(train, infer, backend, result)
    # A request the row pairing spoke for is not also "not in any single-request prefill".
    legacy = ("not in any single-request", "its training micro-batch")
    result.unpaired = [u for u in result.unpaired
                       if not (u["side"] == "train" and u["request_id"] in spoken and u["why"].startswith(legacy))]
    return result


def _correlate_single(train: Tree, infer: Tree, backend: str) -> Correlation:
    result = Correlation()
    if not infer.dispatch_logs:
        result.problems.append(f"{infer.root}: no dispatch_log.jsonl: no request-id correlation possible "
                               "(SGLang and vLLM-Ascend without rlpatch's dispatch logger write none)")
    if not train.update_actor_logs:
        result.problems.append(f"{train.root}: no update_actor_log.jsonl: no request-id correlation possible")
    notes, problems = layout_notes(infer)
    result.notes.extend(notes)
    result.problems.extend(problems)
    single, batched = _training_index(train, result)
    prefills = _prefills(infer, result)
    for request_id, infer_records in prefills.items():
        train_records = single.get(request_id)
        if not train_records:
            why = (f"the training micro-batch holding it ran {batched[request_id]} requests" if request_id in batched
                   else "not in any single-request update_actor_log.jsonl record")
            result.unpair(request_id, "infer", why)
            continue
        _pair_request(train, infer, request_id, train_records, infer_records, backend, result)
    for request_id in single:
        if request_id not in prefills:
            result.unpair(request_id, "train", "not in any single-request prefill of a dispatch_log.jsonl")
    for request_id, size in batched.items():
        if request_id not in prefills and request_id not in single:
            result.unpair(request_id, "train", f"its training micro-batch ran {size} requests")
    return result


def _first_per_rank(records: list[Record]) -> list[Record]:
    """The first record of each rank, in rank order."""
    first: dict[int, Record] = {}
    for record in records:
        first.setdefault(_as_int(record.get("rank")) or 0, record)
    return [first[rank] for rank in sorted(first)]


def _pair_request(train: Tree, infer: Tree, request_id: str, train_records: list[Record],
                  infer_records: list[Record], backend: str, result: Correlation) -> None:
    """Pair one request's records. Rollout TP > 1 gives one record per inference rank. Megatron shards
    both sides alike: a rollout replica numbers its ranks 0..TP-1 in its own world, and a training TP
    group is TP consecutive ranks, so training rank r pairs with inference rank r mod TP (the same TP
    position, whichever data-parallel group ran the request). FSDP holds full tensors, so a TP > 1
    rollout is shard against full tensor: a problem."""
    infer_ranks = _first_per_rank(infer_records)
    matches: list[tuple[Record, Record]] = []
    if len(infer_ranks) == 1 or backend != "megatron":
        infer_record = infer_ranks[0]
        same_rank = [t for t in train_records if t.get("rank") == infer_record.get("rank")]
        matches.append(((same_rank or train_records)[0], infer_record))
        if len(infer_ranks) > 1:
            numbers = [r.get("rank") for r in infer_ranks]
            result.problems.append(
                f"request {request_id}: the rollout shards it over inference ranks {numbers} (TP > 1) while "
                f"{backend} training holds full tensors: rank {numbers[0]} is compared shard against full tensor "
                "(its logs have no rows, so no shard is rebuilt: the engine patch and dispatch logger of "
                "verl >= 0.9.0 log them, or roll out with tensor_model_parallel_size=1)")
    else:
        tp = len(infer_ranks)
        by_position: dict[int, Record] = {}
        for record in _first_per_rank(train_records):
            by_position.setdefault((_as_int(record.get("rank")) or 0) % tp, record)
        for infer_record in infer_ranks:
            rank = _as_int(infer_record.get("rank")) or 0
            train_record = by_position.get(rank % tp)
            if train_record is None:
                result.unpair(request_id, "infer", f"inference rank {rank} has no training rank holding the request "
                              f"at the same TP position (training rank r pairs with inference rank r mod {tp})")
            else:
                matches.append((train_record, infer_record))
    for train_record, infer_record in matches:
        train_side, why = training_side(train, train_record)
        if train_side is None:
            result.unpair(request_id, "train", why)
            continue
        infer_side = inference_side(infer, infer_record)
        if infer_side is None:
            result.unpair(request_id, "infer", f"pid {infer_record.pid}'s steps were written into the step folders "
                          "several processes shared (an earlier dispatch logger): which dump is its own is unknown")
            continue
        for side, name in ((train_side, "train"), (infer_side, "infer")):
            if not os.path.isfile(side.path):
                result.unpair(request_id, name, f"missing file {side.path} (the config's step list may skip it)")
                break
        else:
            result.pairs.append(Pair(request_id, train_side, infer_side))
