"""Which processes wrote a collection folder, and whether their logs and step folders agree.

`dumps check` asks three questions of the `{pid}` folders:
- Does each log name the step folders that exist, and each step folder have a log record? A dispatch
  log names `{pid}/step{N}/rank{R}` for each dumped step; an update_actor log names `step{N}/rank{R}`
  at the root. A record without its folder is a dump the config skipped or lost; a folder without a
  record is a dump whose requests nobody knows.
- Several pid folders with the same ranks: rollout replicas of one node run at the same time (their
  logs overlap in time: no problem), a restarted worker runs after the first one ended (its step
  counter restarted too: a problem). Training ranks are unique per process, so a second pid there is
  always a restart.
- Is a request id logged in more than one step of one rank (a second pass dumped it again)?
Logs are streamed line by line (`stream_log`, through correlate's reader); only the few numbers each
check needs are kept. Which records pair whole is correlate's own predicate (`single_prefill`,
`single_training_request`, `is_log_prob`), never restated here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from rlpatch.dumps.correlate import Record, is_log_prob, single_prefill, single_training_request, stream_records
from rlpatch.dumps.layout import DUMP_JSON, Tree


@dataclass
class ProcessLog:
    """What one pid's log says: the (step, rank) pairs it logged, when, and its single-request ids."""

    pid: int
    path: str
    steps: set[tuple[int, int]] = field(default_factory=set)
    first: float | None = None
    last: float | None = None
    ids: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # (request id, rank) -> steps

    def overlaps(self, other: ProcessLog) -> bool:
        if self.first is None or self.last is None or other.first is None or other.last is None:
            return False
        return self.first <= other.last and other.first <= self.last


@dataclass
class Findings:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# Bad lines said per log before the rest are only counted: a damaged 1 GB log is one screen, not a million lines.
MAX_LINE_PROBLEMS = 20


def stream_log(path: str, pid: int, problems: list[str]) -> Iterator[Record]:
    """The valid records of one log in file order (`correlate.stream_records`, the reader pairing uses);
    bad lines become problems (the first MAX_LINE_PROBLEMS, then a count)."""
    bad = 0

    def say(problem: str) -> None:
        nonlocal bad
        bad += 1
        if bad <= MAX_LINE_PROBLEMS:
            problems.append(problem)

    yield from stream_records(path, pid, problems, say)
    if bad > MAX_LINE_PROBLEMS:
        problems.append(f"{path}: {bad - MAX_LINE_PROBLEMS} more bad line(s) not listed")


def read_process_log(pid: int, path: str, problems: list[str], inference: bool) -> ProcessLog:
    """What check needs of one log, read in one streaming pass: only the numbers are kept."""
    found = ProcessLog(pid, path)
    for record in stream_log(path, pid, problems):
        step, rank = _int(record.get("step")), _int(record.get("rank"))
        if step is None or rank is None:
            continue
        found.steps.add((step, rank))
        if record.timestamp is not None:
            found.first = record.timestamp if found.first is None else min(found.first, record.timestamp)
            found.last = record.timestamp if found.last is None else max(found.last, record.timestamp)
        for request_id in _single_request(record.data, inference):
            found.ids.setdefault((request_id, rank), []).append(step)
    return found


def _single_request(data: dict, inference: bool) -> list[str]:
    """The id of a record that ran exactly one request in the pass that pairs (prefill / log-prob)."""
    if inference:
        found = single_prefill(data)
        return [] if found is None else [found[0]]
    request_id = single_training_request(data)
    return [request_id] if request_id is not None and is_log_prob(data) else []


def _folders_by_pid(tree: Tree) -> dict[int | None, set[tuple[int, int]]]:
    """(step, rank) of the step folders of each pid folder (None: the root's), in one pass."""
    found: dict[int | None, set[tuple[int, int]]] = {}
    for step in tree.steps:
        if step.global_step is None:
            found.setdefault(step.pid, set()).update((step.step, r.rank) for r in step.ranks if r.rank is not None)
    return found


def _steps_text(pairs: set[tuple[int, int]]) -> str:
    listed = sorted(pairs)
    shown = ", ".join(f"step{s}/rank{r}" for s, r in listed[:5])
    return shown + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")


def _logs_against_folders(tree: Tree, logs: list[ProcessLog], inference: bool, found: Findings) -> None:
    legacy = set(tree.legacy_dispatch_pids()) if inference else set()
    folders_of = _folders_by_pid(tree)
    for log in logs:
        base = tree.inference_base(log.pid) if inference else tree.root
        if base is None or log.pid in legacy and len(legacy) > 1:
            continue  # shared root folders: correlate's layout problem says it once
        folders = folders_of.get(log.pid if base != tree.root else None, set())
        where = base if inference else f"{tree.root} (logged by pid {log.pid})"
        missing = {pair for pair in log.steps if pair not in folders and not _proc_folder(base, pair[0], log.pid)}
        if missing:
            found.problems.append(f"{log.path}: logs {_steps_text(missing)} but {where} has no such dump folder "
                                  "(skipped by the config's step or rank list, or lost)")
        if inference:
            unlogged = folders - log.steps
            if unlogged:
                found.problems.append(f"{base}: {_steps_text(unlogged)} has no record in {log.path}: "
                                      "which requests it ran is unknown")
    if inference:
        for pid in sorted(tree.step_pids - set(tree.dispatch_logs)):
            found.problems.append(f"{os.path.join(tree.root, str(pid))}: no dispatch_log.jsonl: its steps cannot "
                                  "be correlated with training")


def _proc_folder(base: str, step: int, pid: int) -> bool:
    return os.path.isfile(os.path.join(base, f"step{step}", f"proc{pid}", DUMP_JSON))


def _generations(logs: list[ProcessLog]) -> list[list[ProcessLog]]:
    """Processes grouped by overlap in time: one group runs together, the next started after it ended."""
    ordered = sorted(logs, key=lambda log: (log.first is None, log.first or 0.0))
    groups: list[list[ProcessLog]] = []
    for log in ordered:
        if groups and any(log.overlaps(other) for other in groups[-1]):
            groups[-1].append(log)
        else:
            groups.append([log])
    return groups


def _replicas_and_restarts(logs: list[ProcessLog], inference: bool, found: Findings) -> None:
    by_rank: dict[int, list[ProcessLog]] = {}
    for log in logs:
        for rank in sorted({rank for _, rank in log.steps}):
            by_rank.setdefault(rank, []).append(log)
    for rank, writers in sorted(by_rank.items()):
        if len(writers) < 2:
            continue
        pids = ", ".join(str(log.pid) for log in sorted(writers, key=lambda log: log.pid))
        groups = _generations(writers)
        if not inference:
            found.problems.append(f"rank{rank} was written by {len(writers)} processes (pids {pids}): a restart? "
                                  "each process counts its steps from 0")
        elif len(groups) > 1:
            runs = "; ".join(", ".join(str(log.pid) for log in group) for group in groups)
            found.problems.append(f"rank{rank} was written by processes that ran one after another (pids {runs}): "
                                  "a restarted worker; each process counts its steps from 0")
        else:
            found.notes.append(f"rank{rank} was written by {len(writers)} processes at the same time (pids {pids}): "
                               "rollout replicas, each in its own {pid} folder")


def _repeated_ids(logs: list[ProcessLog], side: str, found: Findings) -> None:
    seen: dict[tuple[str, int], list[int]] = {}
    for log in logs:
        for key, steps in log.ids.items():
            seen.setdefault(key, []).extend(steps)
    for (request_id, rank), steps in sorted(seen.items()):
        if len(steps) > 1:
            found.problems.append(f"request {request_id} is logged in {len(steps)} {side} steps of rank {rank} "
                                  f"({', '.join(f'step{s}' for s in steps)}): a second pass dumped it again")


def process_findings(tree: Tree) -> Findings:
    """Everything the pid folders' logs say about the folder, as problems and notes."""
    found = Findings()
    for logs_of, inference, side in ((tree.dispatch_logs, True, "inference"),
                                     (tree.update_actor_logs, False, "training")):
        logs = [read_process_log(pid, path, found.problems, inference) for pid, path in sorted(logs_of.items())]
        _logs_against_folders(tree, logs, inference, found)
        _replicas_and_restarts(logs, inference, found)
        _repeated_ids(logs, side, found)
    return found
