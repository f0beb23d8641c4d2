"""Read a folder of msprobe output without loading a tensor: which steps, ranks, pids and logs it holds.

The layouts, all found by folder names only:
- `{root}/step{N}/rank{R}/` (vLLM-Ascend native, SGLang, the training side of our engine patch)
- `{root}/{pid}/step{N}/rank{R}/` and `{root}/{pid}/dispatch_log.jsonl` (vLLM-Ascend + dispatch logger:
  msprobe itself writes `{dump_path}/step{N}/rank{R}/`; the logger moves each process's dump path into
  `{dump_path}/{pid}` when it starts, so the rollout replicas of a node do not share step folders)
- `{root}/step{N}/rank{R}/` beside `{root}/{pid}/dispatch_log.jsonl` with no steps under `{pid}`: an
  earlier dispatch logger that did not move msprobe's dump path (readable while one process wrote there)
- `{root}/{pid}/update_actor_log.jsonl` (training side of a consistency run)
- `{root}/step_{G}/{stage}/step{N}/rank{R}/` (verl's training tool; `step_unknown` when G is unknown)
- `proc{pid}` instead of `rank{R}` when msprobe knew no distributed rank.
Folders are listed with `os.scandir` (one system call per folder: a 10,000-rank tree stays fast) and
`dump.json` is only size-checked and, below a size limit, parsed once to validate it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from rlpatch.errors import InputError

# At most 9 digits: a longer number is no step, rank or pid of a run (and would exceed int parsing limits).
STEP = re.compile(r"step(\d{1,9})")
VERL_STEP = re.compile(r"step_(\d{1,9}|unknown)")
RANK = re.compile(r"rank(\d{1,9})")
PROC = re.compile(r"proc(\d{1,9})")
PID = re.compile(r"\d{1,9}")
DISPATCH_LOG = "dispatch_log.jsonl"
UPDATE_ACTOR_LOG = "update_actor_log.jsonl"
DUMP_JSON = "dump.json"
DUMP_KEYS = ("task", "level", "framework", "dump_data_dir", "data")
# Above this size dump.json is not parsed: its head and tail are checked instead (a tensor-mode dump
# of a real model holds one entry per tensor and can reach gigabytes; parsing takes about 15 times the
# file's size in memory, so the limit keeps `check` within tens of megabytes).
PARSE_LIMIT = 4 * 1024 * 1024
_PROBE = 64 * 1024


@dataclass
class RankDir:
    """One `rank{R}` or `proc{pid}` folder."""

    path: str
    rank: int | None  # None for proc{pid}
    proc: int | None = None
    problem: str | None = None  # what is wrong with its dump.json, if anything

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass
class StepDir:
    """One `step{N}` folder: its ranks, and where it sits (pid folder, verl step and stage)."""

    path: str
    step: int
    ranks: list[RankDir] = field(default_factory=list)
    pid: int | None = None  # the `{pid}` folder it is in (dispatch logger layout)
    global_step: int | str | None = None  # verl's outer step_{G} ("unknown" for step_unknown)
    stage: str | None = None  # verl's stage folder (actor_update, ref_compute_log_prob, ...)


@dataclass
class Tree:
    """Everything under one root that msprobe or rlpatch's loggers wrote."""

    root: str
    steps: list[StepDir] = field(default_factory=list)
    dispatch_logs: dict[int, str] = field(default_factory=dict)  # pid -> path
    update_actor_logs: dict[int, str] = field(default_factory=dict)  # pid -> path
    step_pids: set[int] = field(default_factory=set)  # pid folders holding step folders
    _legacy: list[int] | None = field(default=None, repr=False, compare=False)

    def legacy_dispatch_pids(self) -> list[int]:
        """Pids whose dispatch log has no step folders beside it while step folders sit at the root:
        written by an earlier dispatch logger, which left msprobe's dump path at `{dump_path}`. Computed
        once, when asked first (after the scan), since pairing asks it for every record."""
        if self._legacy is None:
            has_root_steps = any(step.pid is None and step.global_step is None for step in self.steps)
            self._legacy = sorted(pid for pid in self.dispatch_logs if pid not in self.step_pids) if has_root_steps else []
        return self._legacy

    def inference_base(self, pid: int) -> str | None:
        """The folder holding the `step{N}` folders that pid's dispatch log describes; None when several
        processes shared the root's step folders (each overwrote the others' dumps)."""
        legacy = self.legacy_dispatch_pids()
        if pid in self.step_pids or pid not in legacy:
            return os.path.join(self.root, str(pid))
        return self.root if len(legacy) == 1 else None

    @property
    def layout(self) -> str:
        if any(step.global_step is not None for step in self.steps):
            return "verl-training-tool"
        if self.dispatch_logs or self.step_pids:
            return "dispatch-logger"
        if self.update_actor_logs:
            return "engine-training"
        return "native"

    def empty(self) -> bool:
        return not self.steps and not self.dispatch_logs and not self.update_actor_logs


def _entries(path: str) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as iterator:
            return list(iterator)
    except OSError:
        return []


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _rank_dirs(step_path: str, validate: bool) -> list[RankDir]:
    ranks = []
    for entry in _entries(step_path):
        if not _is_dir(entry):
            continue
        rank, proc = RANK.fullmatch(entry.name), PROC.fullmatch(entry.name)
        if rank is None and proc is None:
            continue
        found = RankDir(entry.path, int(rank.group(1)) if rank else None, int(proc.group(1)) if proc else None)
        if validate:
            found.problem = dump_json_problem(os.path.join(entry.path, DUMP_JSON))
        ranks.append(found)
    ranks.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else r.proc or 0))
    return ranks


def _steps_in(path: str, validate: bool, **where) -> list[StepDir]:
    steps = []
    for entry in _entries(path):
        match = STEP.fullmatch(entry.name)
        if match and _is_dir(entry):
            steps.append(StepDir(entry.path, int(match.group(1)), _rank_dirs(entry.path, validate), **where))
    return steps


def scan(root: str, validate: bool = True) -> Tree:
    """The tree under `root` (raises InputError when it is not a folder or holds no msprobe output)."""
    if not os.path.isdir(root):
        raise InputError(f"{root}: no such directory")
    tree = Tree(root)
    tree.steps.extend(_steps_in(root, validate))
    for entry in _entries(root):
        if not _is_dir(entry):
            continue
        if PID.fullmatch(entry.name):
            _scan_pid_folder(tree, entry, validate)
        elif (verl := VERL_STEP.fullmatch(entry.name)) is not None:
            global_step: int | str = "unknown" if verl.group(1) == "unknown" else int(verl.group(1))
            for stage in _entries(entry.path):
                if _is_dir(stage):
                    tree.steps.extend(_steps_in(stage.path, validate, global_step=global_step, stage=stage.name))
    if tree.empty():
        raise InputError(f"{root}: no msprobe output here (no step*/rank* folders, no dispatch or update_actor log)")
    tree.steps.sort(key=_step_order)
    return tree


def _scan_pid_folder(tree: Tree, entry: os.DirEntry, validate: bool) -> None:
    pid = int(entry.name)
    steps = _steps_in(entry.path, validate, pid=pid)
    if steps:
        tree.steps.extend(steps)
        tree.step_pids.add(pid)
    for log_name, logs in ((DISPATCH_LOG, tree.dispatch_logs), (UPDATE_ACTOR_LOG, tree.update_actor_logs)):
        log = os.path.join(entry.path, log_name)
        if os.path.isfile(log):
            logs[pid] = log


def _step_order(step: StepDir) -> tuple:
    global_step = step.global_step
    return (step.pid or 0, -1 if global_step is None else (10**12 if global_step == "unknown" else global_step),
            step.stage or "", step.step)


def dump_json_problem(path: str) -> str | None:
    """Why `path` is not a usable msprobe dump.json, or None. Never keeps the parsed data."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return "no dump.json"
    if size == 0:
        return "dump.json is empty"
    try:
        if size > PARSE_LIMIT:
            return _large_dump_problem(path, size)
        with open(path, "rb") as handle:
            data = json.load(handle)
    except (OSError, ValueError, RecursionError) as err:
        return f"dump.json is unreadable ({type(err).__name__})"
    if not isinstance(data, dict):
        return "dump.json is not a JSON object"
    missing = [key for key in ("task", "data") if key not in data]
    if missing:
        return f"dump.json has no {', '.join(missing)} (not msprobe output)"
    if not data["data"]:
        return "dump.json holds no entries (nothing was dumped)"
    return None


def _large_dump_problem(path: str, size: int) -> str | None:
    """A big dump.json: its head must open an object with msprobe's keys and its tail must close it."""
    with open(path, "rb") as handle:
        head = handle.read(_PROBE)
        handle.seek(max(0, size - 256))
        tail = handle.read()
    if not head.lstrip().startswith(b"{") or not tail.rstrip().endswith(b"}"):
        return "dump.json is truncated or not JSON"
    if b'"task"' not in head:
        return "dump.json has no task (not msprobe output)"
    return None
