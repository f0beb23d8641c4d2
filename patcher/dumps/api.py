"""`rlpatch dumps check|pair|compare` apart from their command line.

Each function takes the command's frozen options and returns a `Summary`: the JSON the command
prints with `--format json`, the text lines it prints otherwise, and its exit code. `compare_dumps`
returns a `Comparison`, which also writes the HTML report (after the summary is printed, so that a
report that fails never hides the summary). Bad input raises InputError before any compare runs.
msprobe, the plotting library and ray are imported only on the paths that need them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlpatch.dumps.command import DEFAULT_OUT, planned_commands
from rlpatch.dumps.correlate import Correlation, correlate
from rlpatch.dumps.layout import scan
from rlpatch.dumps.options import CheckOptions, CompareOptions, PairOptions, ReportOptions
from rlpatch.dumps.text import check_lines, compare_lines, pair_lines
from rlpatch.errors import InputError
from rlpatch.output.api import Note, refuse_links

if TYPE_CHECKING:
    from rlpatch.dumps.compare import PairResult

__all__ = ["CheckOptions", "CompareOptions", "Comparison", "PairOptions", "Progress", "ReportOptions", "Summary",
           "check_dumps", "compare_dumps", "pair_dumps", "report_dumps"]

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
              "command": command.argv} for pair, _, command in planned_commands(result.pairs, backend, out, python)]
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
    from rlpatch.upstream.api import require_interpreter

    return list(require_interpreter(python))


@contextmanager
def no_progress(length: int) -> Iterator[Callable[[int], None] | None]:
    yield None


def _check_report_path(report: str | None, out: str) -> None:
    """Before any compare runs: a bad report path or a missing plotting library must not cost a whole run.
    The report may go into `-o` before the compare makes it."""
    if report is None:
        return
    folder = os.path.dirname(os.path.abspath(report))
    if not os.path.isdir(folder) and folder != os.path.abspath(out):
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
    _check_report_path(options.report, options.out)
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
    from rlpatch.dumps.stored import SUMMARY_NAME

    followed = refuse_links(options.out, [*written_paths(results), os.path.join(options.out, SUMMARY_NAME)],
                            what="the output folder")
    for result in results:
        result.rtol = options.rtol
    from rlpatch.dumps.report import Facts, msprobe_version

    facts = Facts.collect(options.train, options.infer, options.backend, msprobe_version(interpreter), options.rtol)
    keys = _reuse(results, facts.msprobe, options.force)
    workers = options.jobs or os.cpu_count() or 1
    with progress(sum(not r.reused for r in results)) as update:
        run_all(results, workers, update)
    entries = [r.as_json() for r in results]
    reused = sum(r.reused for r in results)
    outcomes = [r.outcome for r in results]
    found = culprits(outcomes)
    data: dict[str, Any] = {"results": entries, "culprits": found, "unpaired": correlation.unpaired,
                            "problems": correlation.problems, "reused": reused}
    from rlpatch.dumps.batches import by_batch_size, per_request

    data.update(requests=per_request(outcomes), by_batch_size=by_batch_size(outcomes))
    problem = _keep(results, keys, options.out, data, facts)
    from rlpatch.dumps.report import write_report

    def writer(path: str) -> None:
        write_report(path, [r.attribution for r in results], data, facts)

    lines = [link.note() for link in followed] + compare_lines(data) + _reuse_lines(reused, len(results))
    return Comparison(data, lines + ([problem] if problem else []), _exit_code(data), writer)


def _reuse(results: list[PairResult], msprobe: str, force: bool) -> list[tuple[dict[str, Any], str]]:
    """Each pair's key and inputs' fingerprint; a pair whose stored run is current is marked reused
    (unless `force`)."""
    from rlpatch.dumps.stored import fingerprint, key, restore

    keys: list[tuple[dict[str, Any], str]] = []
    seen: dict[str, str] = {}
    for result in results:
        wanted, inputs = key(result, msprobe), fingerprint(result, seen)
        if not force:
            restore(result, wanted, inputs)
        keys.append((wanted, inputs))
    return keys


def _keep(results: list[PairResult], keys: list[tuple[dict[str, Any], str]], out: str, data: dict[str, Any],
          facts: Any) -> str | None:
    """Store each fresh run and the compare's summary in `out`; a line saying why not when they cannot be."""
    from rlpatch.dumps.stored import store, write_summary

    try:
        for result, (wanted, inputs) in zip(results, keys, strict=True):
            if not result.reused:
                store(result, wanted, inputs)
        if os.path.isdir(out):
            write_summary(out, data, facts, results)
    except OSError as err:
        return f"warning: results not kept in {out} ({err.strerror}: {err.filename}): the next compare runs again"
    return None


def _reuse_lines(reused: int, total: int) -> list[str]:
    if not reused:
        return []
    return [Note(f"reused {reused} of {total} pair(s): their stored results are current (same dumps, same msprobe); "
                 "--force compares them again")]


def _compare_on_cluster(options: CompareOptions, address: str) -> Comparison:
    """`compare --ray`: the same report, each pair compared on the node whose disk holds it."""
    from rlpatch.dumps.remote import cluster_lines, compare_on_cluster, report_facts
    from rlpatch.dumps.report import write_report

    data, attributions = compare_on_cluster(options, address, options.ray_runtime_env, options.ray_timeout)

    def writer(path: str) -> None:
        write_report(path, attributions, data, report_facts(options, data))

    return Comparison(data, compare_lines(data) + cluster_lines(data), _exit_code(data), writer)


REPORT_NAME = "report.html"


def report_dumps(options: ReportOptions) -> Summary:
    """The HTML report of the compare whose results `options.out` holds, rendered again without msprobe;
    written only inside `out`, never through a link."""
    from rlpatch.dumps.report import Facts, check_plotting, write_report
    from rlpatch.dumps.stored import read_summary

    out = options.out
    target = os.path.join(out, options.report or REPORT_NAME)
    inside = os.path.normpath(os.path.abspath(out)) + os.sep
    if not os.path.normpath(os.path.abspath(target)).startswith(inside):  # links: refuse_links below
        raise InputError(f"{options.report}: not inside {out} (`dumps report` writes only inside OUT)")
    data, facts, attributions = read_summary(out)
    if os.path.lexists(target) and not os.path.islink(target) and not os.path.isfile(target):
        raise InputError(f"{target}: not a regular file")
    followed = refuse_links(out, [target], what="the output folder")
    check_plotting()
    try:
        write_report(target, attributions, data, Facts(**facts))
    except TypeError:
        raise InputError(f"{out}: its stored facts are not this rlpatch's: run compare again") from None
    except OSError as err:
        raise InputError(f"{target}: cannot write the report ({err.strerror})") from None
    lines = [link.note() for link in followed] + [
        f"report written to {target} ({len(data['results'])} pair(s), from the results stored in {out})"]
    return Summary({"report": target, "pairs": len(data["results"])}, lines, 0)
