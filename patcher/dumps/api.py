"""`rlpatch dumps check|pair|compare` apart from their command line.

Each function takes the command's frozen options and returns a `Summary`: the JSON the command
prints with `--format json`, the text lines it prints otherwise, and its exit code. `compare_dumps`
returns a `Comparison`, which also writes the HTML report (after the summary is printed, so that a
report that fails never hides the summary). Bad input raises InputError before any compare runs.
msprobe, the plotting library and ray are imported only on the paths that need them.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from rlpatch.dumps.command import DEFAULT_OUT, planned_commands
from rlpatch.dumps.correlate import Correlation, correlate
from rlpatch.dumps.layout import scan
from rlpatch.dumps.options import CheckOptions, CompareOptions, PairOptions
from rlpatch.dumps.text import check_lines, compare_lines, pair_lines
from rlpatch.errors import InputError
from rlpatch.output.api import refuse_links

__all__ = ["CheckOptions", "CompareOptions", "Comparison", "PairOptions", "Progress", "Summary", "check_dumps",
           "compare_dumps", "pair_dumps"]

# Given the number of compares, a context that yields what to call after each one (None: no progress shown).
Progress = Callable[[int], AbstractContextManager[Callable[[int], None] | None]]


@dataclass(frozen=True)
class Summary:
    """One command's answer: its JSON, its text lines, and its exit code."""

    data: dict[str, Any]
    lines: list[str]
    exit_code: int


@dataclass(frozen=True)
class Comparison(Summary):
    """`dumps compare`'s answer; `write_report` writes the HTML report of it."""

    report_writer: Callable[[str], None]

    def write_report(self, path: str) -> str | None:
        """Write the report to `path`: None when written, else why not."""
        try:
            self.report_writer(path)
        except (OSError, InputError) as err:
            return str(err)
        return None


def check_dumps(options: CheckOptions) -> Summary:
    """What the directory holds against what the mode should have produced; 1 when a problem is found."""
    from rlpatch.dumps.check import check, has_problems

    if options.script is not None and not os.path.isfile(options.script):
        raise InputError(f"{options.script}: no such file")
    if options.msprobe_config is not None and not os.path.isfile(options.msprobe_config):
        raise InputError(f"{options.msprobe_config}: no such file (--msprobe-config)")
    report = check(options.directory, options.mode, options.script, options.msprobe_config)
    failed = has_problems(report)
    return Summary(report, check_lines(options.directory, report, failed), 1 if failed else 0)


def _correlation(train: str, infer: str, backend: str) -> Correlation:
    return correlate(scan(train, validate=False), scan(infer, validate=False), backend)


def _pair_json(result: Correlation, backend: str, out: str, python: list[str]) -> dict[str, Any]:
    pairs = [{"request_id": pair.request_id, "train": pair.train.as_json(False), "infer": pair.infer.as_json(True),
              **({} if pair.rows is None else {"slices": pair.rows.as_json()}),
              "command": argv} for pair, _, argv in planned_commands(result.pairs, backend, out, python)]
    return {"pairs": pairs, "unpaired": result.unpaired, "problems": result.problems, "notes": result.notes}


def pair_dumps(options: PairOptions) -> Summary:
    """The pairs through request ids, each with msprobe's compare command; 1 when none pairs or a problem is found."""
    result = _correlation(options.train, options.infer, options.backend)
    if options.backend == "fsdp" and result.pairs:
        result.notes.append("with --backend fsdp, `rlpatch dumps compare` gives msprobe its FSDP-named copy of each "
                            "training dump (FSDP2 names match none of msprobe's rows otherwise); the commands below "
                            "are msprobe's on the raw dumps")
    rows_pair = next((pair for pair in result.pairs if pair.rows is not None), None)
    if rows_pair is not None:
        from rlpatch.dumps.cutting import STATISTICS_LINE, dump_task

        if "statistics" in (dump_task(rows_pair.train.path), dump_task(rows_pair.infer.path)):
            result.notes.append(f"`dumps compare` cannot cut these pairs: {STATISTICS_LINE}")
    data = _pair_json(result, options.backend, DEFAULT_OUT, ["python"])
    return Summary(data, pair_lines(data), 0 if data["pairs"] and not data["problems"] else 1)


def _python(python: str) -> list[str]:
    try:
        argv = shlex.split(python)
    except ValueError as err:
        raise InputError(f"--python {python!r}: {err}") from None
    if not argv:
        raise InputError("--python: empty")
    if shutil.which(argv[0]) is None:
        raise InputError(f"{argv[0]}: no such interpreter (--python)")
    return argv


@contextmanager
def no_progress(length: int) -> Iterator[Callable[[int], None] | None]:
    yield None


def _check_report_path(report: str | None) -> None:
    """Before any compare runs: a bad report path or a missing plotting library must not cost a whole run."""
    if report is None:
        return
    if not os.path.isdir(os.path.dirname(os.path.abspath(report))):
        raise InputError(f"{report}: its directory does not exist")
    if os.path.lexists(report) and not os.path.isfile(report):
        raise InputError(f"{report}: not a regular file (--report names the HTML file to write)")
    from rlpatch.dumps.report import check_plotting

    check_plotting()


def _exit_code(data: dict[str, Any]) -> int:
    """0 when every pair compared agrees or stays within the floor and nothing is a problem."""
    clean = data["results"] and not data["problems"] and all(
        r["verdict"] in ("agrees", "within-floor") for r in data["results"])
    return 0 if clean else 1


def compare_dumps(options: CompareOptions, progress: Progress = no_progress) -> Comparison:
    """msprobe compare on every pair (in parallel), each attributed to the module where the sides start
    to differ; with `options.ray`, each pair on the node of that cluster whose disk holds it."""
    _check_report_path(options.report)
    if options.ray is not None:
        return _compare_on_cluster(options, options.ray)
    return _compare_here(options, progress)


def _compare_here(options: CompareOptions, progress: Progress) -> Comparison:
    from rlpatch.dumps.compare import plan, run_all, written_paths
    from rlpatch.dumps.divergence import culprits

    interpreter = _python(options.python) if options.python else [sys.executable]
    if os.path.exists(options.out) and not os.path.isdir(options.out):
        raise InputError(f"{options.out}: not a directory (-o)")
    correlation = _correlation(options.train, options.infer, options.backend)
    only, rank = options.only, options.rank
    pairs = [p for p in correlation.pairs if (only is None or p.request_id == only) and (rank is None or p.train.rank == rank)]
    if (only is not None or rank is not None) and not pairs:
        raise InputError(f"no pair matches{f' --only {only}' if only else ''}{f' --rank {rank}' if rank is not None else ''}")
    results = plan(pairs, options.backend, options.out, interpreter)
    followed = refuse_links(options.out, written_paths(results), what="the output folder")
    for result in results:
        result.rtol = options.rtol
    workers = options.jobs or os.cpu_count() or 1
    with progress(len(results)) as update:
        run_all(results, workers, update)
    entries = [r.as_json() for r in results]
    data = {"results": entries, "culprits": culprits((e["request_id"], e["train"]["rank"], e["divergence"])
                                                     for e in entries),
            "unpaired": correlation.unpaired, "problems": correlation.problems}
    from rlpatch.dumps.batches import by_batch_size, per_request

    data.update(requests=per_request(entries), by_batch_size=by_batch_size(entries))
    from rlpatch.dumps.report import Facts, write_report

    def writer(path: str) -> None:
        write_report(path, results, data, Facts.collect(options.train, options.infer, options.backend, interpreter,
                                                        options.rtol))

    return Comparison(data, [link.note() for link in followed] + compare_lines(data), _exit_code(data), writer)


def _compare_on_cluster(options: CompareOptions, address: str) -> Comparison:
    """`compare --ray`: the same report, each pair compared on the node whose disk holds it."""
    from rlpatch.dumps.remote import cluster_lines, compare_on_cluster, report_facts
    from rlpatch.dumps.report import write_report

    data, results = compare_on_cluster(options, address, options.ray_runtime_env, options.ray_timeout)

    def writer(path: str) -> None:
        write_report(path, results, data, report_facts(options, data))

    return Comparison(data, compare_lines(data) + cluster_lines(data), _exit_code(data), writer)
