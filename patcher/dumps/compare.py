"""Run `msprobe compare` for every pair in the target interpreter and read back its CSV results.

msprobe is never imported here: it runs as `<python> -m msprobe.msprobe compare` (one process per
pair, up to the CPU count at once: each compare is CPU-bound in its own interpreter, so threads
that wait on subprocesses are enough). Its CSV (`compare_result_{timestamp}.csv`, read once by
`rlpatch.dumps.compare_csv`) has one row per tensor in the training dump's forward order; rows whose
other side is `N/A` were not matched and are left out of the counts. The same rows give the counts,
the first difference and the attribution (`rlpatch.dumps.divergence`). A compare in which no
forward row matched compared nothing: it is a failure, never a clean result.

With `--backend fsdp` the training dump goes through rlpatch's FSDP name mapping first
(`rlpatch.dumps.mapping`: FSDP2 names, FSDP1's wrapped root), and msprobe reads the mapped copy.
"""

from __future__ import annotations

import csv
import glob
import os
import re
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from rlpatch.dumps.command import CompareCommand, planned_commands
from rlpatch.dumps.compare_csv import RESULTS, CsvRow, forward_rows, read_compare_csv
from rlpatch.dumps.correlate import Pair
from rlpatch.dumps.divergence import Attribution, Divergence, Outcome, attribute
from rlpatch.dumps.mapping import FOLDER as MAPPED_FOLDER
from rlpatch.dumps.mapping import TENSOR_DIR as MAPPED_TENSORS
from rlpatch.dumps.mapping import map_training_dump
from rlpatch.output.api import open_new_log

LOG_NAME = "msprobe_compare.log"
RESULT_NAME = "rlpatch_result.json"  # what rlpatch.dumps.stored keeps of a pair's run


@dataclass
class PairResult:
    """One pair's compare, from its plan to its attribution."""

    pair: Pair
    command: CompareCommand  # what runs: the planned one, then the cut pair's or the FSDP-named copy's
    out: str
    exit_code: int | None = None
    csv_path: str | None = None
    rows: list[CsvRow] = field(default_factory=list)  # the matched forward rows, in forward order
    unmatched: int = 0
    error: str | None = None
    rtol: float | None = None  # the user's noise floor (`--rtol`), else one from each row's dtype
    attribution: Attribution | None = None  # where the two sides start to differ (rlpatch.dumps.divergence)
    msprobe_seconds: float = 0.0  # the compare subprocess alone, for the benchmark
    slicing_seconds: float = 0.0  # cutting the request's rows out of both dumps (rows pairs only)
    unsliced: list[str] = field(default_factory=list)  # tensors without a token dim of the step's size
    not_compared: list[str] = field(default_factory=list)  # TP shards that could not be rebuilt, with why
    reused: bool = False  # its stored run is current (rlpatch.dumps.stored): its CSV is read, msprobe not run

    @property
    def argv(self) -> list[str]:
        return self.command.argv

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(RESULTS, 0)
        for row in self.rows:
            if row.result in counts:
                counts[row.result] += 1
        return counts

    @property
    def first_difference(self) -> CsvRow | None:
        return next((row for row in self.rows if row.result != "pass"), None)

    @property
    def metric_name(self) -> str:
        """Cosine for tensor dumps, the maximum relative error for statistics dumps."""
        if any(_number(row.metrics.get("Cosine")) is not None for row in self.rows):
            return "Cosine"
        return "MaxRelativeErr"

    def series(self) -> list[tuple[str, float | None, str]]:
        name = self.metric_name
        return [(row.name, _number(row.metrics.get(name)), row.result) for row in self.rows]

    @property
    def divergence(self) -> Divergence | None:
        """The module that introduces the divergence (the culprit), when one does."""
        return None if self.attribution is None else self.attribution.divergence

    @property
    def outcome(self) -> Outcome:
        rows = self.pair.rows
        return Outcome(self.pair.request_id, self.pair.train.rank, self.verdict, self.divergence,
                       1 if rows is None else rows.requests_in_step)

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def verdict(self) -> str:
        return "failed" if self.error is not None or self.attribution is None else self.attribution.verdict

    def as_json(self) -> dict:
        first = self.first_difference
        found = self.attribution
        rows: dict[str, int] = {**self.counts, "unmatched": self.unmatched}
        if found is not None:
            rows.update(no_data=found.counts["no_data"], unreadable=found.counts.get("unreadable", 0),
                        roots=found.counts["roots"])
        return {
            "request_id": self.pair.request_id,
            "train": self.pair.train.as_json(False),
            "infer": self.pair.infer.as_json(True),
            **({} if self.pair.rows is None else {"slices": self.pair.rows.as_json(), "unsliced": self.unsliced,
                                                   "seconds": {"slicing": round(self.slicing_seconds, 4),
                                                               "msprobe": round(self.msprobe_seconds, 4)},
                                                   "not_compared": self.not_compared}),
            "command": self.argv,
            "exit_code": self.exit_code,
            "csv": self.csv_path,
            "rows": rows,  # `rows.unmatched`: the forward rows msprobe matched on one side only (N/A)
            "verdict": self.verdict,
            "why": self.error if found is None else found.why,
            "divergence": None if self.divergence is None else self.divergence.as_json(),
            "first_difference": None if first is None else {
                "name": first.name, "module": first.module, "result": first.result,
                "metrics": first.metrics, "message": first.message},
            "error": self.error,
        }


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text.strip().rstrip("%"))
    except ValueError:
        return None


def plan(pairs: list[Pair], backend: str, out: str, python: list[str]) -> list[PairResult]:
    """One compare per pair, each writing into its own folder under `out`."""
    return [PairResult(pair, command, folder) for pair, folder, command in planned_commands(pairs, backend, out, python)]


def written_paths(results: list[PairResult]) -> list[str]:
    """Every file and folder a compare writes under its pair's folder (msprobe's CSV aside, a new
    name): checked for links out of `-o` before anything runs."""
    paths = []
    for result in results:
        mapped = os.path.join(result.out, MAPPED_FOLDER)
        paths += [result.out, os.path.join(result.out, LOG_NAME), os.path.join(result.out, RESULT_NAME), mapped, os.path.join(mapped, "dump.json"),
                  os.path.join(mapped, "stack.json"), os.path.join(mapped, MAPPED_TENSORS)]
    return paths


def run_one(result: PairResult) -> PairResult:
    """Run one compare; its output goes to `{out}/msprobe_compare.log`, the newest new CSV is read and
    the older ones removed (one CSV per pair folder). A reused pair only has its CSV read back."""
    if result.reused:
        return read_back(result)
    try:
        os.makedirs(result.out, exist_ok=True)
    except OSError as err:
        result.error = f"{result.out}: cannot create the pair's output folder ({err.strerror}): not compared"
        return result
    if getattr(result.pair, "rows", None) is not None and not _cut_rows(result):  # the bench passes no pair
        return result
    if not _map_training_side(result):
        return result
    before = set(glob.glob(os.path.join(result.out, "compare_result_*.csv")))
    log_path = os.path.join(result.out, LOG_NAME)
    started = time.perf_counter()
    try:
        with open(open_new_log(log_path), "w", encoding="utf-8") as log:
            completed = subprocess.run(result.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       check=False)
    except OSError as err:
        result.error = f"cannot run {result.argv[0]}: {err.strerror}"
        return result
    result.msprobe_seconds = time.perf_counter() - started
    result.exit_code = completed.returncode
    new = sorted(set(glob.glob(os.path.join(result.out, "compare_result_*.csv"))) - before, key=os.path.getmtime)
    if completed.returncode != 0 or not new:
        result.error = (f"msprobe compare exited {completed.returncode} without a result ({_last_line(log_path)})"
                        + _level_hint(result.pair))
        return result
    result.csv_path = new[-1]
    _remove_older(result.out, result.csv_path)
    return read_back(result)


def _remove_older(folder: str, kept: str) -> None:
    """msprobe names each CSV by its time: a second run would leave two side by side."""
    for path in glob.glob(os.path.join(folder, "compare_result_*.csv")):
        if path != kept:
            try:
                os.unlink(path)  # a link is removed, never followed
            except OSError:
                pass


def read_back(result: PairResult) -> PairResult:
    """Read the pair's CSV: its rows, and the module where the sides start to differ."""
    assert result.csv_path is not None
    try:
        table = read_compare_csv(result.csv_path)
    except (OSError, csv.Error, UnicodeDecodeError) as err:
        result.error = f"{result.csv_path}: unreadable ({err})"
        return result
    result.rows, result.unmatched = forward_rows(table)
    if not result.rows:
        result.error = (f"no forward row matched ({result.unmatched} unmatched, every Bench Name N/A): msprobe "
                        "paired no training module with an inference module, nothing was compared")
        return result
    result.attribution = attribute(table, result.rtol)
    return result


def _cut_rows(result: PairResult) -> bool:
    """Cut the pair's request rows out of both dumps (slicing.py in the compare's interpreter) and
    point the compare at the cut pair; False (with the error set) when they cannot be cut."""
    from rlpatch.dumps.cutting import cut_pair

    started = time.perf_counter()
    found = cut_pair(result.pair, result.out, list(result.command.python))
    result.slicing_seconds = time.perf_counter() - started
    if isinstance(found, str):
        result.error = found
        return False
    result.unsliced, result.not_compared = found.unsliced, found.not_compared
    result.command = result.command.on(found.train, found.infer)
    return True


def _map_training_side(result: PairResult) -> bool:
    """With `--backend fsdp`, point `-tp` at rlpatch's FSDP-named copy of the training dump when
    it needs one; False (with the error set) when the training dump cannot be read."""
    command = result.command
    if command.backend != "fsdp":
        return True
    try:
        mapped = map_training_dump(command.train_json, result.out)
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as err:
        result.error = f"{command.train_json}: cannot map its FSDP names ({type(err).__name__}: {err})"
        return False
    if mapped is not None:
        result.command = command.on(mapped, command.infer_json)
    return True


def _level_hint(pair: Pair) -> str:
    """Why a compare of dumps not made at level L0 fails (msprobe's message does not say)."""
    found = (_dump_level(pair.train.path), _dump_level(pair.infer.path))
    levels = {level for level in found if level is not None and level != "L0"}
    if not levels:
        return ""
    return (f"; the dumps are at level {'/'.join(sorted(levels))}: msprobe --consistent_check compares only "
            "level L0 dumps (a mix dump fails with 'Conflicting comparison data'); collect with \"level\": \"L0\"")


_LEVEL = re.compile(rb'"level"\s*:\s*"([A-Za-z0-9]+)"')


def _dump_level(path: str) -> str | None:
    """The `level` msprobe wrote near the top of a dump.json (read from its head: the file can be huge)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64 * 1024)
    except OSError:
        return None
    found = _LEVEL.search(head)
    return found.group(1).decode("ascii") if found else None


def _last_line(log_path: str) -> str:
    """The last error line msprobe logged (it logs a harmless CANN error on CPU, so errors are
    looked for from the end), or its last line."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            lines = [line.strip() for line in handle if line.strip()]
    except OSError:
        return f"see {log_path}"
    errors = [line for line in lines if "ERROR" in line and "CANN" not in line]
    return (errors or lines or [f"no output, see {log_path}"])[-1]


def run_all(results: list[PairResult], jobs: int, progress: Callable[[int], None] | None = None) -> list[PairResult]:
    """Run the compares, `jobs` at a time; `progress(1)` after each one."""
    if not results:
        return results
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(results)))) as pool:
        futures = {pool.submit(run_one, result): result for result in results}
        for future in as_completed(futures):
            error = future.exception()
            if error is not None:  # a pair that did not run is a failure, never a silent empty result
                futures[future].error = f"not compared: {type(error).__name__}: {error}"
            if progress is not None:
                progress(1)
    return results
