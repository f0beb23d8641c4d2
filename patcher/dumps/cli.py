"""`rlpatch dumps check|pair|compare`: the commands over a finished collection's folders."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys

import click

from rlpatch.dumps.command import BACKENDS, DEFAULT_OUT, planned_commands
from rlpatch.dumps.correlate import Correlation, correlate
from rlpatch.dumps.layout import scan
from rlpatch.errors import InputError

FORMATS = click.Choice(["text", "json"])


def _emit(data: dict, fmt: str, text_lines: list[str]) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in text_lines))


@click.group("dumps")
def dumps_group() -> None:
    """After the run: check the msprobe output, pair training with inference dumps, compare them."""


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
        ranks = ", ".join(map(str, step["ranks"])) or "none"
        expected = f" (expected {len(step['expected_ranks'])})" if step["expected_ranks"] else ""
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
    argv = shlex.split(python)
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
@click.option("--report", "report", default=None, metavar="FILE.html", help="Write an HTML report with a plot per pair.")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
def compare_cmd(train: str, infer: str, backend: str, out: str, python: str | None, report: str | None,
                fmt: str) -> int:
    """Run msprobe compare on every pair (in parallel) and summarise the results."""
    from rlpatch.dumps.compare import plan, run_all

    interpreter = _python(python) if python else [sys.executable]
    if report is not None and not os.path.isdir(os.path.dirname(os.path.abspath(report))):
        raise InputError(f"{report}: its directory does not exist")
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError(f"{out}: not a directory (-o)")
    correlation = _correlation(train, infer, backend)
    results = plan(correlation.pairs, backend, out, interpreter)
    if sys.stderr.isatty() and results:
        with click.progressbar(length=len(results), label="msprobe compare", file=sys.stderr) as bar:
            run_all(results, os.cpu_count() or 1, bar.update)
    else:
        run_all(results, os.cpu_count() or 1)
    if report is not None:
        from rlpatch.dumps.report import write_report

        write_report(report, results)
    data = {"results": [r.as_json() for r in results], "unpaired": correlation.unpaired,
            "problems": correlation.problems}
    _emit(data, fmt, _compare_lines(data, report))
    clean = results and not correlation.problems and all(
        r.error is None and r.counts["warning"] == 0 and r.counts["error"] == 0 for r in results)
    return 0 if clean else 1


def _compare_lines(data: dict, report: str | None) -> list[str]:
    lines = []
    for result in data["results"]:
        head = (f"{result['request_id']} (train step{result['train']['step']} rank{result['train']['rank']}, "
                f"infer pid {result['infer']['pid']} step{result['infer']['step']} rank{result['infer']['rank']})")
        if result["error"]:
            lines.append(f"{head}: failed: {result['error']}")
            continue
        rows = result["rows"]
        lines.append(f"{head}: {rows['pass']} pass, {rows['warning']} warning, {rows['error']} error  [{result['csv']}]")
        first = result["first_difference"]
        if first is not None:
            metrics = ", ".join(f"{k} {v}" for k, v in first["metrics"].items())
            lines.append(f"  first not pass: {first['name']} ({first['result']}): {metrics}")
    lines.extend(f"unpaired ({u['side']}) {u['request_id']}: {u['why']}" for u in data["unpaired"])
    lines.extend(f"problem: {problem}" for problem in data["problems"])
    if not data["results"]:
        lines.append("no pair to compare")
    if report:
        lines.append(f"report written to {report}")
    return lines
