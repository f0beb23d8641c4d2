"""`rlpatch dumps check|pair|compare|report`: the command line of `rlpatch.dumps.api`.

Each callback turns its options into the command's frozen options, calls the api, prints the
answer (text lines or JSON) and returns its exit code.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from rlpatch.cluster.api import ray_options
from rlpatch.dumps.api import (
    CheckOptions,
    CompareOptions,
    PairOptions,
    ReportOptions,
    Summary,
    check_dumps,
    compare_dumps,
    pair_dumps,
    report_dumps,
)
from rlpatch.dumps.command import BACKENDS, DEFAULT_OUT
from rlpatch.dumps.options import RAY_TIMEOUT_S
from rlpatch.output.api import Note, log_progress, progress_wanted, shown_lines, versioned
from rlpatch.upstream.api import TARGET_OPTIONS

FORMATS = click.Choice(["text", "json"])
RAY_HELP = ("Compare each pair on the node of this Ray cluster whose disk holds both its files; only summaries "
            "travel (`auto`: the cluster this machine belongs to).")


QUIET_HELP = "Print no progress and no notes (`note:` lines, reused pairs, links followed): results and errors stay."
def _emit(summary: Summary, fmt: str, quiet: bool = False) -> int:
    """Print the answer as asked; its exit code."""
    if fmt == "json":
        sys.stdout.write(json.dumps(versioned(summary.data), indent=2) + "\n")
    else:
        # Request ids, module names and paths come from the dumps: escaped, they cannot forge a line.
        # -q leaves out the lines that only inform (the JSON keeps its `notes`).
        lines = [line for line in summary.lines if not (quiet and isinstance(line, Note))]
        sys.stdout.write("".join(line + "\n" for line in shown_lines(lines)))
    return summary.exit_code


@click.group("dumps")
def dumps_group() -> None:
    """After the run: check the msprobe output, pair training with inference dumps, compare them."""


@dumps_group.command("check")
@click.argument("directory")
@click.option("--mode", type=click.Choice(["training", "inference", "consistency"]),
              help="The collection mode (default: from --script, else from the folders).")
@click.option("--script", type=str, help="The launch script: world size, rollout TP, the config's rank/step.")
@click.option("--msprobe-config", "msprobe_config", type=str, default=None,
              help="The inference msprobe config, when --script does not name it: with a request_id (msprobe 26.2 "
                   "request-scoped dumping), flag steps it cut in the scheduler's order instead of the runner's rows.")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
def check_cmd(fmt: str, quiet: bool, **given: Any) -> int:
    """Check what DIRECTORY holds against what the mode should have produced."""
    return _emit(check_dumps(CheckOptions(**given)), fmt, quiet)


@dumps_group.command("pair")
@click.option("--train", "train", required=True, help="The training side's dump_path.")
@click.option("--infer", "infer", required=True, help="The inference side's dump_path.")
@click.option("--backend", type=click.Choice(BACKENDS), default="fsdp", show_default=True,
              help="The training backend (decides the TP > 1 pairing and the compare's module map).")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
def pair_cmd(fmt: str, quiet: bool, **given: Any) -> int:
    """Pair training and inference dumps through request ids; print the compare command of each."""
    return _emit(pair_dumps(PairOptions(**given)), fmt, quiet)


@contextmanager
def _progress_bar(length: int) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on a terminal's stderr (nothing when it is not one, or nothing is compared)."""
    if not (sys.stderr.isatty() and length):
        yield None
        return
    with click.progressbar(length=length, label="msprobe compare", file=sys.stderr) as bar:
        yield bar.update


def _progress(quiet: bool) -> Any:
    """The compare's progress: a bar on a terminal, `done/total` lines in a batch log, none with -q."""
    @contextmanager
    def shown(length: int) -> Iterator[Callable[[int], None] | None]:
        if quiet or not length:
            yield None
        elif not progress_wanted(False):
            with _progress_bar(length) as bar:
                yield bar
        else:
            with log_progress("rlpatch dumps compare", length, "pair(s) compared") as lines:
                yield None if lines is None else lines.advance

    return shown


@dumps_group.command("compare")
@click.option("--train", "train", required=True, help="The training side's dump_path.")
@click.option("--infer", "infer", required=True, help="The inference side's dump_path.")
@click.option("--backend", type=click.Choice(BACKENDS), default="fsdp", show_default=True)
@click.option("-o", "--output", "out", default=DEFAULT_OUT, show_default=True,
              help="Where msprobe writes its results (one folder per pair).")
@TARGET_OPTIONS["python"].click_option("this one", use="the one that has msprobe")
@click.option("--report", "report", default=None, metavar="FILE.html",
              help="Write an HTML report: verdict, facts, one zoomable plot per request (needs rlpatch[report]).")
@click.option("--rtol", type=click.FloatRange(min=0, min_open=True), default=None,
              help="The noise floor, a relative error (default: the compared dtype's rounding x 8).")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Compares at once (default: CPU count).")
@click.option("--only", "only", default=None, metavar="REQUEST", help="Compare only this request id's pair(s).")
@click.option("--rank", "rank", type=click.IntRange(min=0), default=None, help="Compare only pairs of this training rank.")
@click.option("--force", is_flag=True, default=False,
              help="Compare every pair again, even those whose results in -o are current (same dumps, same msprobe).")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
@ray_options(ray_help=RAY_HELP, timeout_help="Seconds to wait for every node's answer, per round (read, compare).",
             timeout=RAY_TIMEOUT_S)
def compare_cmd(fmt: str, quiet: bool, **given: Any) -> int:
    """Run msprobe compare on every pair (in parallel); name the module where the two sides start to differ.

    Each pair's results are kept in -o: a pair whose dumps and msprobe have not changed since is not
    compared again (--force compares it again), and `rlpatch dumps report` renders the report from them."""
    options = CompareOptions(**given, quiet=quiet)
    comparison = compare_dumps(options, _progress(quiet))
    code = _emit(comparison, fmt, quiet)  # always printed, even when the report then fails
    if options.report is None:
        return code
    problem = comparison.write_report(options.report)
    if problem is not None:
        sys.stderr.write(f"rlpatch dumps compare: error: report not written: {problem}\n")
        return max(code, 1)
    if fmt == "text" or not quiet:
        (sys.stdout if fmt == "text" else sys.stderr).write(f"report written to {options.report}\n")
    return code


@dumps_group.command("report")
@click.argument("out")
@click.option("-o", "--output", "report", default=None, metavar="FILE.html",
              help="The page to write, inside OUT (default: OUT/report.html).")
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
def report_cmd(quiet: bool, **given: Any) -> int:
    """Write the HTML report of the compare whose results OUT holds (its -o), without running msprobe again."""
    return _emit(report_dumps(ReportOptions(**given)), "text", quiet)
