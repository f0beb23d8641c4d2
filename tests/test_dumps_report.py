"""`dumps compare` keeps its results in -o: a second run reuses the current ones, `dumps report OUT`
renders the page again without msprobe, and the page stays readable (and offline) at a thousand pairs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_cli
from test_dumps import FAKE_MSPROBE, A, B, infer_record, infer_tree, train_record, train_tree

COUNTING = FAKE_MSPROBE.replace("import csv, os, sys\n", "import csv, os, sys, time\n"
                                "open(os.environ['RLPATCH_TEST_CALLS'], 'a').write(sys.argv[1] + '\\n')\n"
                                "stamp = time.strftime('%Y%m%d%H%M%S') + str(time.time_ns() % 1000000)\n"
                                ).replace("compare_result_20260101000000.csv", "compare_result_{{stamp}}.csv")
COUNTING = COUNTING.replace('"compare_result_{{stamp}}.csv"', 'f"compare_result_{{stamp}}.csv"')


def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    """Two pairs, a fake msprobe that counts its compares (its `-c` version query is counted too)."""
    train = train_tree(tmp_path / "t", [train_record(0, [A]), train_record(1, [B])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")]), infer_record(1, [(B, "new")])])
    fake = tmp_path / "fake_python"
    fake.write_text(COUNTING.format(python=sys.executable))
    fake.chmod(0o755)
    calls = tmp_path / "calls.txt"
    calls.write_text("")
    monkeypatch.setenv("RLPATCH_TEST_CALLS", str(calls))
    return ["dumps", "compare", "--train", str(train), "--infer", str(infer), "--python", str(fake), "--jobs", "1"], calls


def _compares(calls: Path) -> int:
    return sum(1 for line in calls.read_text().splitlines() if line == "-m")


def test_a_second_compare_reuses_current_results_and_force_runs_again(tmp_path, monkeypatch):
    argv, calls = _setup(tmp_path, monkeypatch)
    out = tmp_path / "out"
    first = run_cli(*argv, "-o", str(out), "--format", "json")
    assert first.exit_code == 1 and _compares(calls) == 2, first.stderr
    assert json.loads(first.stdout)["reused"] == 0
    second = run_cli(*argv, "-o", str(out))
    assert second.exit_code == 1 and _compares(calls) == 2  # nothing changed: msprobe not run again
    assert "reused 2 of 2 pair(s): their stored results are current" in second.stdout
    assert second.stdout.startswith("verdict: 2 pair(s) compared (2 diverges)")
    forced = run_cli(*argv, "-o", str(out), "--force", "--format", "json")
    assert forced.exit_code == 1 and _compares(calls) == 4 and json.loads(forced.stdout)["reused"] == 0
    for request in (A, B):  # one CSV per pair folder, the newest: never a second beside the first
        assert len(list((out / request).glob("compare_result_*.csv"))) == 1
    # a changed dump (its size or mtime) is compared again, the other pair reused
    dump_json = next((tmp_path / "t").rglob("dump.json"))
    os.utime(dump_json, ns=(time.time_ns(), time.time_ns() + 10**9))
    changed = run_cli(*argv, "-o", str(out), "--format", "json")
    assert changed.exit_code == 1 and _compares(calls) == 5 and json.loads(changed.stdout)["reused"] == 1
    # a CSV that is not the one the run wrote (edited, replaced) is not trusted: compared again
    csv_file = next((out / A).glob("compare_result_*.csv"))
    csv_file.write_text(csv_file.read_text() + "\n")
    edited = run_cli(*argv, "-o", str(out), "--format", "json")
    assert edited.exit_code == 1 and _compares(calls) == 6 and json.loads(edited.stdout)["reused"] == 1
    # --rtol is applied to the reused CSV (no msprobe needed): the floor above the error clears the culprit
    loose = run_cli(*argv, "-o", str(out), "--rtol", "0.1", "--format", "json")
    assert loose.exit_code == 0 and _compares(calls) == 6 and json.loads(loose.stdout)["culprits"] == []


def _without_date(page: str) -> str:
    return re.sub(r"<th>date</th><td><code>[^<]*</code>", "", page)


def test_dumps_report_rebuilds_the_page_compare_wrote_without_msprobe(tmp_path, monkeypatch):
    pytest.importorskip("plotly")
    argv, calls = _setup(tmp_path, monkeypatch)
    out = tmp_path / "out"
    written = out / "report.html"  # inside -o, which the compare makes
    first = run_cli(*argv, "-o", str(out), "--report", str(written))
    assert first.exit_code == 1 and f"report written to {written}" in first.stdout
    page = written.read_text()
    written.unlink()
    before = calls.read_text()
    rebuilt = run_cli("dumps", "report", str(out))
    assert rebuilt.exit_code == 0, rebuilt.stderr
    assert rebuilt.stdout == f"report written to {written} (2 pair(s), from the results stored in {out})\n"
    assert calls.read_text() == before  # msprobe not run, not even asked its version
    assert _without_date(written.read_text()) == _without_date(page)
    other = run_cli("dumps", "report", str(out), "-o", "again.html")
    assert other.exit_code == 0 and (out / "again.html").read_text() == written.read_text()


def test_dumps_report_bad_input_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    pytest.importorskip("plotly")
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, message in (
            ([str(tmp_path / "missing")], "no such directory"),
            ([str(empty)], f"{empty}: no rlpatch_compare.json: run `rlpatch dumps compare -o {empty}` first"),
            ([str(empty), "-o", "../outside.html"], "not inside"),
            ([str(empty), "-o", str(tmp_path / "abs.html")], "not inside")):
        result = run_cli("dumps", "report", *args)
        assert result.exit_code == 2 and message in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    (empty / "rlpatch_compare.json").write_text("{not json")
    broken = run_cli("dumps", "report", str(empty))
    assert broken.exit_code == 2 and "not a compare summary this rlpatch reads" in broken.stderr
    assert sorted(p.name for p in empty.iterdir()) == ["rlpatch_compare.json"]
    # a link at the report's place is replaced, never written through
    argv, _ = _setup(tmp_path, monkeypatch)
    out = tmp_path / "out"
    assert run_cli(*argv, "-o", str(out)).exit_code == 1
    victim = tmp_path / "victim.html"
    victim.write_text("keep")
    (out / "report.html").symlink_to(victim)
    linked = run_cli("dumps", "report", str(out))
    assert linked.exit_code == 2 and "symbolic link out of the output folder" in linked.stderr
    assert victim.read_text() == "keep"


# ---- at scale, in a real browser ---------------------------------------------------------------


def synthetic(pairs: int, layers: int = 28, per_layer: int = 8) -> tuple[dict, list]:
    """A compare's answer and attributions for `pairs` pairs of a `layers`-layer model (no msprobe)."""
    from rlpatch.dumps.batches import by_batch_size, per_request
    from rlpatch.dumps.divergence import Attribution, Divergence, Outcome, Point, culprits

    modules = ["model.embed_tokens"] + [f"model.layers.{layer}.{part}" for layer in range(layers)
                                        for part in ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                                                     "self_attn.v_proj", "self_attn.o_proj", "self_attn",
                                                     "mlp.gate_up_proj", "mlp")[:per_layer]] + ["model.norm", "lm_head"]
    entries, attributions, outcomes = [], [], []
    for n in range(pairs):
        culprit = 1 + (n * 7919) % (len(modules) - 3) if n % 3 else None
        points, error = [], 1e-9
        for i, module in enumerate(modules):
            layer = int(module.split(".")[2]) if ".layers." in module else None
            introduces = i == culprit
            error = 0.05 if introduces else (error * 1.1 if culprit is not None and i > culprit else 1e-9 * (1 + i % 5))
            role = "introduces" if introduces else ("inherits" if error > 2**-21 else "below")
            points.append(Point(module, layer, error, error / 10 if introduces else error, 2**-21, role))
        divergence = None
        if culprit is not None:
            point = points[culprit]
            divergence = Divergence(point.module, f"Module.{point.module}.X.forward.0",
                                    f"Module.{point.module}.X.forward.0", point.layer, "norm_relative",
                                    point.output_error, point.input_error, point.floor)
        verdict = "diverges" if divergence else "within-floor"
        why = (f"{divergence.module} introduces it: output error 0.05" if divergence
               else "differences up to 4.5e-09 stay under the floor")
        attribution = Attribution(verdict, why, divergence, {"no_data": 0, "unreadable": 0, "roots": 2}, points)
        request = f"req-{n // 2:05d}"
        entries.append({"request_id": request, "train": {"step": n % 4, "rank": n % 2, "path": "t"},
                        "infer": {"pid": 200, "step": n % 4, "rank": 0, "path": "i"}, "command": [], "exit_code": 0,
                        "csv": f"/nonexistent/{request}/compare_result.csv",
                        "rows": {"pass": 400, "warning": 3, "error": 2, "unmatched": 5, "no_data": 0,
                                 "unreadable": 0, "roots": 2},
                        "verdict": verdict, "why": why,
                        "divergence": None if divergence is None else divergence.as_json(),
                        "first_difference": None, "error": None})
        attributions.append(attribution)
        outcomes.append(Outcome(request, n % 2, verdict, divergence))
    data = {"results": entries, "culprits": culprits(outcomes), "unpaired": [], "problems": [], "reused": 0}
    data.update(requests=per_request(outcomes), by_batch_size=by_batch_size(outcomes))
    return data, attributions


def write_synthetic(path: Path, pairs: int) -> None:
    from rlpatch.dumps.report import Facts, write_report

    data, attributions = synthetic(pairs)
    write_report(str(path), attributions, data, Facts("2026-01-01T00:00:00+00:00", "0", "26.2.0", "rlpatch dumps "
                                                      "compare", "/t", "/i", "fsdp", "8 x roundoff"))


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def load(page: Path, browser: str, net_log: Path | None = None, fragment: str = "") -> tuple[float, str]:
    """Open the page in headless chromium until its script has run: seconds, and the DOM it dumped."""
    argv = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
            "--disable-background-networking", "--virtual-time-budget=60000", "--dump-dom", page.as_uri() + fragment]
    if net_log is not None:
        argv.insert(1, f"--log-net-log={net_log}")
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    return time.perf_counter() - started, done.stdout


def page_requests(net_log: Path) -> list[tuple[str, str]]:
    """(traffic annotation, url) of every network request in a chromium net log."""
    text = net_log.read_text(errors="replace")
    return re.findall(r'"traffic_annotation":(\d+),"url":"([^"]+)"', text)


def page_annotation(tmp_path: Path, browser: str) -> set[str]:
    """The traffic annotation chromium gives a page's own loads (its background requests have others),
    learnt from a page that asks a closed local port for an image."""
    probe = tmp_path / "probe.html"
    probe.write_text('<html><body><img src="http://127.0.0.1:9/probe.png"></body></html>')
    load(probe, browser, tmp_path / "probe.json")
    found = {annotation for annotation, url in page_requests(tmp_path / "probe.json") if "127.0.0.1:9" in url}
    assert found, "chromium's net log format changed: cannot tell the page's requests from its own"
    return found


@pytest.mark.skipif(chromium() is None, reason="no chromium installed (apt-get install chromium): the report's "
                                              "browser test needs a real headless browser")
def test_a_thousand_pair_report_loads_offline_summary_first(tmp_path):
    """Promise: a 1000-pair report opens in a real browser, draws its summary and overview, draws a
    request's plot when asked (#r-3), and fetches nothing from the network."""
    pytest.importorskip("plotly")
    browser = chromium()
    assert browser is not None
    page = tmp_path / "report.html"
    write_synthetic(page, 1000)
    net_log = tmp_path / "net.json"
    _, dom = load(page, browser, net_log, "#r-3")
    assert re.search(r'<body[^>]*data-ready="(\d+)"', dom), dom[:2000]  # its script ran to the end
    assert "data-blocked" not in dom  # nothing was even tried (the page's policy would block it)
    head = dom.index('<details class="request" id="r-3"')
    assert dom.count('class="main-svg"') >= 2 and 'data-drawn="1"' in dom[head:head + 2000]  # overview + r-3
    assert dom.count('<details class="request"') == 500 and dom.count('<tr id="p-') == 1000
    assert dom.index('class="verdict') < dom.index("<h2>Summary</h2>") < dom.index('id="overview"') \
        < dom.index('<table id="pairs"') < dom.index('<details class="request"')
    _, filtered = load(page, browser, fragment="#q=req-00007%20rank1")  # the filter, as a link gives it
    assert "1 of 1000 pair(s) shown" in filtered and filtered.count('style="display: none;"') == 999
    own = page_annotation(tmp_path, browser)
    assert [url for annotation, url in page_requests(net_log) if annotation in own] == []


def test_a_damaged_or_planted_result_file_is_never_trusted_nor_written_through(tmp_path, monkeypatch):
    """Promise: a stored result that does not parse is compared again (no crash); one that is a link out
    of -o stops the compare before anything runs (exit 2), its target untouched."""
    argv, calls = _setup(tmp_path, monkeypatch)
    out = tmp_path / "out"
    assert run_cli(*argv, "-o", str(out)).exit_code == 1 and _compares(calls) == 2
    (out / A / "rlpatch_result.json").write_text('{"key": [')
    damaged = run_cli(*argv, "-o", str(out), "--format", "json")
    assert damaged.exit_code == 1 and _compares(calls) == 3 and json.loads(damaged.stdout)["reused"] == 1
    victim = tmp_path / "victim.json"
    victim.write_text("keep")
    (out / B / "rlpatch_result.json").unlink()
    (out / B / "rlpatch_result.json").symlink_to(victim)
    planted = run_cli(*argv, "-o", str(out))
    assert planted.exit_code == 2 and "symbolic link out of the output folder" in planted.stderr
    assert victim.read_text() == "keep" and _compares(calls) == 3
