"""`rlpatch dumps check|pair|compare`: the commands over a finished collection's folders."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable

import click

from rlpatch.cluster.api import ray_options
from rlpatch.dumps.command import BACKENDS, DEFAULT_OUT, planned_commands
from rlpatch.dumps.correlate import Correlation, correlate
from rlpatch.dumps.layout import scan
from rlpatch.errors import InputError

FORMATS = click.Choice(["text", "json"])
RAY_HELP = ("Compare each pair on the node of this Ray cluster whose disk holds both its files; only summaries "
            "travel (`auto`: the cluster this machine belongs to).")
RAY_TIMEOUT_S = 3600.0


def _emit(data: dict, fmt: str, text_lines: list[str]) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in text_lines))


@click.group("dumps")
def dumps_group() -> None:
    """After the run: check the msprobe output, pair training with inference dumps, compare them."""


def rank_list(ranks: list[int]) -> str:
    """Ranks as `dumps check` prints them, runs of three or more folded: `0-7, 9`."""
    parts: list[str] = []
    values = sorted(set(ranks))
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and values[end + 1] == values[end] + 1:
            end += 1
        run = values[start:end + 1]
        parts.append(f"{run[0]}-{run[-1]}" if len(run) >= 3 else ", ".join(map(str, run)))
        start = end + 1
    return ", ".join(parts)


@dumps_group.command("check")
@click.argument("directory")
@click.option("--mode", type=click.Choice(["training", "inference", "consistency"]),
              help="The collection mode (default: from --script, else from the folders).")
@click.option("--script", type=str, help="The launch script: world size, rollout TP, the config's rank/step.")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
def check_cmd(directory: str, mode: str | None, script: str | None, fmt: str) -> int:
    """Check what DIRECTORY holds against what the mode should have produced."""
    from rlpatch.dumps.check import check, has_problems

    if script is not None and not os.path.isfile(script):
        raise InputError(f"{script}: no such file")
    report = check(directory, mode, script)
    lines = [f"{directory}: mode {report['mode']}"]
    for step in report["steps"]:
        where = f"step {step['step']}" + (f" {step['stage']}" if step["stage"] else "")
        ranks = rank_list(step["ranks"]) or "none"
        expected = f" (expected {rank_list(step['expected_ranks'])})" if step["expected_ranks"] else ""
        lines.append(f"  {where}: ranks {ranks}{expected}")
        lines.extend(f"    problem: {problem}" for problem in step["problems"])
    lines.extend(f"  problem: {problem}" for problem in report["problems"])
    lines.extend(f"  note: {note}" for note in report["notes"])
    failed = has_problems(report)
    lines.append("no problem found" if not failed else "problems found")
    _emit(report, fmt, lines)
    return 1 if failed else 0


def _correlation(train: str, infer: str, backend: str) -> Correlation:
    return correlate(scan(train, validate=False), scan(infer, validate=False), backend)


def _pair_json(result: Correlation, backend: str, out: str, python: list[str]) -> dict:
    pairs = [{"request_id": pair.request_id, "train": pair.train.as_json(False), "infer": pair.infer.as_json(True),
              "command": argv} for pair, _, argv in planned_commands(result.pairs, backend, out, python)]
    return {"pairs": pairs, "unpaired": result.unpaired, "problems": result.problems, "notes": result.notes}


@dumps_group.command("pair")
@click.option("--train", "train", required=True, help="The training side's dump_path.")
@click.option("--infer", "infer", required=True, help="The inference side's dump_path.")
@click.option("--backend", type=click.Choice(BACKENDS), default="fsdp", show_default=True,
              help="The training backend (decides the TP > 1 pairing and the compare's module map).")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
def pair_cmd(train: str, infer: str, backend: str, fmt: str) -> int:
    """Pair training and inference dumps through request ids; print the compare command of each."""
    result = _correlation(train, infer, backend)
    if backend == "fsdp" and result.pairs:
        result.notes.append("with --backend fsdp, `rlpatch dumps compare` gives msprobe its FSDP-named copy of each "
                            "training dump (FSDP2 names match none of msprobe's rows otherwise); the commands below "
                            "are msprobe's on the raw dumps")
    data = _pair_json(result, backend, DEFAULT_OUT, ["python"])
    lines = []
    for pair in data["pairs"]:
        lines.append(f"{pair['request_id']}: train step{pair['train']['step']} rank{pair['train']['rank']} "
                     f"<-> infer pid {pair['infer']['pid']} step{pair['infer']['step']} rank{pair['infer']['rank']}")
        lines.append(f"  {shlex.join(pair['command'])}")
    lines.extend(f"unpaired ({u['side']}) {u['request_id']}: {u['why']}" for u in data["unpaired"])
    lines.extend(f"problem: {problem}" for problem in data["problems"])
    lines.extend(f"note: {note}" for note in data["notes"])
    lines.append(f"{len(data['pairs'])} pair(s), {len(data['unpaired'])} unpaired")
    _emit(data, fmt, lines)
    return 0 if data["pairs"] and not data["problems"] else 1


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


@dumps_group.command("compare")
@click.option("--train", "train", required=True, help="The training side's dump_path.")
@click.option("--infer", "infer", required=True, help="The inference side's dump_path.")
@click.option("--backend", type=click.Choice(BACKENDS), default="fsdp", show_default=True)
@click.option("-o", "--output", "out", default=DEFAULT_OUT, show_default=True,
              help="Where msprobe writes its results (one folder per pair).")
@click.option("--python", "python", default=None,
              help="The interpreter that has msprobe (shlex-split; default: this one).")
@click.option("--report", "report", default=None, metavar="FILE.html",
              help="Write an HTML report: verdict, facts, one zoomable plot per request (needs rlpatch[report]).")
@click.option("--rtol", type=click.FloatRange(min=0, min_open=True), default=None,
              help="The noise floor, a relative error (default: the compared dtype's rounding x 8).")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Compares at once (default: CPU count).")
@click.option("--only", "only", default=None, metavar="REQUEST", help="Compare only this request id's pair(s).")
@click.option("--rank", "rank", type=click.IntRange(min=0), default=None, help="Compare only pairs of this training rank.")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@ray_options(ray_help=RAY_HELP, timeout_help="Seconds to wait for every node's answer, per round (read, compare).",
             timeout=RAY_TIMEOUT_S)
def compare_cmd(train: str, infer: str, backend: str, out: str, python: str | None, report: str | None,
                rtol: float | None, jobs: int | None, only: str | None, rank: int | None, fmt: str,
                ray: str | None, ray_runtime_env: str | None, ray_timeout: float) -> int:
    """Run msprobe compare on every pair (in parallel); name the module where the two sides start to differ."""
    from rlpatch.dumps.compare import plan, run_all
    from rlpatch.dumps.divergence import culprits

    if report is not None:
        if not os.path.isdir(os.path.dirname(os.path.abspath(report))):
            raise InputError(f"{report}: its directory does not exist")
        if os.path.lexists(report) and not os.path.isfile(report):  # checked before any compare runs
            raise InputError(f"{report}: not a regular file (--report names the HTML file to write)")
        from rlpatch.dumps.report import check_plotting

        check_plotting()  # before any compare runs: a missing library must not cost a whole run
    if ray is not None:
        from rlpatch.dumps.remote import Options

        options = Options(train, infer, backend, out, python, rtol, jobs, only, rank)
        return _compare_on_cluster(options, ray, ray_runtime_env, ray_timeout, report, fmt)
    interpreter = _python(python) if python else [sys.executable]
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError(f"{out}: not a directory (-o)")
    correlation = _correlation(train, infer, backend)
    pairs = [p for p in correlation.pairs if (only is None or p.request_id == only) and (rank is None or p.train.rank == rank)]
    if (only is not None or rank is not None) and not pairs:
        raise InputError(f"no pair matches{f' --only {only}' if only else ''}{f' --rank {rank}' if rank is not None else ''}")
    results = plan(pairs, backend, out, interpreter)
    for result in results:
        result.rtol = rtol
    workers = jobs or os.cpu_count() or 1
    if sys.stderr.isatty() and results:
        with click.progressbar(length=len(results), label="msprobe compare", file=sys.stderr) as bar:
            run_all(results, workers, bar.update)
    else:
        run_all(results, workers)
    entries = [r.as_json() for r in results]
    data = {"results": entries, "culprits": culprits((e["request_id"], e["train"]["rank"], e["divergence"])
                                                     for e in entries),
            "unpaired": correlation.unpaired, "problems": correlation.problems}
    from rlpatch.dumps.report import Facts, write_report

    return _finish(data, _compare_lines(data), fmt, report,
                   lambda path: write_report(path, results, data, Facts.collect(train, infer, backend, interpreter, rtol)))


def _compare_on_cluster(options, address: str, runtime_env: str | None, timeout: float, report: str | None,
                        fmt: str) -> int:
    """`compare --ray`: the same report, each pair compared on the node whose disk holds it."""
    from rlpatch.dumps.remote import cluster_lines, compare_on_cluster, report_facts
    from rlpatch.dumps.report import write_report

    data, results = compare_on_cluster(options, address, runtime_env, timeout)
    return _finish(data, _compare_lines(data) + cluster_lines(data), fmt, report,
                   lambda path: write_report(path, results, data, report_facts(options, data)))


def _finish(data: dict, lines: list[str], fmt: str, report: str | None, write_report: Callable[[str], None]) -> int:
    """Print the summary (always, even when the report then fails), write the report, and the exit code:
    0 when every pair compared agrees or stays within the floor and nothing is a problem."""
    _emit(data, fmt, lines)
    clean = data["results"] and not data["problems"] and all(
        r["verdict"] in ("agrees", "within-floor") for r in data["results"])
    code = 0 if clean else 1
    if report is None:
        return code
    try:
        write_report(report)
    except (OSError, InputError) as err:
        sys.stderr.write(f"rlpatch dumps compare: error: report not written: {err}\n")
        return max(code, 1)
    (sys.stdout if fmt == "text" else sys.stderr).write(f"report written to {report}\n")
    return code


def _verdict_line(data: dict) -> str:
    results = data["results"]
    if not results:
        return "verdict: no pair to compare"
    counts: dict[str, int] = {}
    for result in results:
        counts[result["verdict"]] = counts.get(result["verdict"], 0) + 1
    parts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))
    head = f"verdict: {len(results)} pair(s) compared ({parts}), {len(data['unpaired'])} unpaired"
    if not data["culprits"]:
        return head + "; no culprit"
    top = data["culprits"][0]
    return (head + f"; culprit {top['module']} in {len(top['pairs'])} pair(s)"
            + (f" (+{len(data['culprits']) - 1} other)" if len(data["culprits"]) > 1 else ""))


def _compare_lines(data: dict) -> list[str]:
    lines = [_verdict_line(data)]
    for culprit in data["culprits"]:
        ranks = ", ".join(map(str, culprit["ranks"])) or "?"
        lines.append(f"  culprit {culprit['module']}: {len(culprit['pairs'])} pair(s), training rank(s) {ranks}: "
                     + ", ".join(culprit["pairs"][:5]) + (" ..." if len(culprit["pairs"]) > 5 else ""))
    for result in data["results"]:
        head = (f"{result['request_id']} (train step{result['train']['step']} rank{result['train']['rank']}, "
                f"infer pid {result['infer']['pid']} step{result['infer']['step']} rank{result['infer']['rank']})")
        if result.get("node"):  # compare --ray: the node it ran on
            head += f" on node {result['node']['node_id'][:12]} ({result['node']['hostname'] or '?'})"
        if result["error"]:
            lines.append(f"{head}: failed: {result['error']}")
            continue
        lines.append(f"{head}: {result['verdict']}: {result['why']}")
        rows = result["rows"]
        lines.append(f"  rows: {rows['pass']} pass, {rows['warning']} warning, {rows['error']} error (msprobe), "
                     f"{rows['unmatched']} unmatched, {rows.get('no_data', 0)} no data, {rows.get('roots', 0)} root "
                     f"[{result['csv']}]")
    lines.extend(f"unpaired ({u['side']}) {u['request_id']}: {u['why']}" for u in data["unpaired"])
    lines.extend(f"problem: {problem}" for problem in data["problems"])
    return lines
