"""`compare --report FILE.html`: one self-contained page an engineer reads top to bottom.

Verdict first (pairs compared, their verdicts, the culprits with their requests and ranks), then the
run's facts (date, rlpatch and msprobe versions, the command, the two roots, the backend, the
floor), the unpaired requests, and per request one plot aggregated over its ranks: each judged
module's output error (log scale; the largest and smallest over the ranks) against the forward
order, decoder-layer boundaries as ticks, the noise floor drawn, the culprit marked, every point
named on hover. Plots are plotly (`rlpatch[report]`), with plotly.js embedded once, so the page
works offline, fills the window's width (a 36-layer model's ~600 modules fit without horizontal
scrolling) and zooms. Each pair's CSV is linked. plotly is imported only here; `check_plotting`
runs before any compare starts.
"""

from __future__ import annotations

import datetime
import html
import os
import shlex
import subprocess
import sys
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from rlpatch.dumps.compare import PairResult
from rlpatch.errors import InputError
from rlpatch.output.api import write_output

INSTALL_HINT = "pip install 'rlpatch[report]'"
STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 100%; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; font-size: 0.9em; vertical-align: top; }
th { background: #f0f0f0; }
.diverges, .failed, .undecided { color: #c62828; font-weight: bold; } .agrees, .within-floor { color: #2e7d32; }
.verdict { font-size: 1.2em; padding: 0.6em; border-left: 6px solid #c62828; background: #fff5f5; }
.verdict.clean { border-color: #2e7d32; background: #f4fbf4; }
section.request { margin-bottom: 2.5em; }
code { font-size: 0.85em; }
"""


def check_plotting() -> None:
    """The plotting library is there, or a one-line error before anything runs."""
    try:
        import plotly  # noqa: F401
    except ImportError as err:
        raise InputError(f"--report needs plotly, which this interpreter lacks ({err}): {INSTALL_HINT}") from None


@dataclass
class Facts:
    date: str
    rlpatch: str
    msprobe: str
    command: str
    train: str
    infer: str
    backend: str
    floor: str

    @classmethod
    def collect(cls, train: str, infer: str, backend: str, python: list[str], rtol: float | None) -> Facts:
        import rlpatch

        return cls(datetime.datetime.now().astimezone().isoformat(timespec="seconds"), rlpatch.__version__,
                   _msprobe_version(python), shlex.join(["rlpatch", *sys.argv[1:]]), os.path.abspath(train),
                   os.path.abspath(infer), backend,
                   f"--rtol {rtol:g}" if rtol is not None else "the compared dtype's unit roundoff x 8")


def _msprobe_version(python: list[str]) -> str:
    code = "import importlib.metadata as m; print(m.version('mindstudio-probe'))"
    try:
        done = subprocess.run([*python, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() or "unknown"


def by_request(results: list[PairResult]) -> OrderedDict[str, list[PairResult]]:
    grouped: OrderedDict[str, list[PairResult]] = OrderedDict()
    for result in results:
        grouped.setdefault(result.pair.request_id, []).append(result)
    return grouped


def _series(results: list[PairResult]) -> list[dict[str, Any]]:
    """Per module in forward order (the first rank's), its errors over the ranks."""
    order: OrderedDict[str, dict[str, Any]] = OrderedDict()
    for result in results:
        if result.attribution is None:
            continue
        for point in result.attribution.points:
            entry = order.setdefault(point.module, {"module": point.module, "layer": point.layer, "errors": [],
                                                   "floor": point.floor, "roles": set()})
            entry["errors"].append(point.output_error)
            entry["floor"] = max(entry["floor"], point.floor)
            entry["roles"].add(point.role)
    return list(order.values())


def figure_html(request_id: str, results: list[PairResult]) -> str:
    import plotly.graph_objects as go

    series = _series(results)
    if not series:
        return "<p>no judged module: msprobe compared nothing usable for this request.</p>"
    positives = [e for s in series for e in s["errors"] if e > 0] + [s["floor"] for s in series if s["floor"] > 0]
    bottom = min(positives) / 1e3 if positives else 1e-12  # log scale: an exact 0 is drawn here
    x = list(range(len(series)))
    top = [max(max(s["errors"]), bottom) for s in series]
    low = [max(min(s["errors"]), bottom) for s in series]
    names = [s["module"] for s in series]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=top, mode="lines+markers", name="output error (max over ranks)",
                             marker={"size": 4}, line={"width": 1, "color": "#37474f"}, customdata=names,
                             hovertemplate="%{customdata}<br>error %{y:.3g}<extra></extra>"))
    if len(results) > 1:
        fig.add_trace(go.Scatter(x=x, y=low, mode="lines", name="min over ranks", customdata=names,
                                 line={"width": 1, "color": "#90a4ae", "dash": "dot"},
                                 hovertemplate="%{customdata}<br>min %{y:.3g}<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=[max(s["floor"], bottom) for s in series], mode="lines", name="noise floor",
                             line={"width": 1, "color": "#2e7d32", "dash": "dash", "shape": "hv"}, hoverinfo="skip"))
    culprit = [i for i, s in enumerate(series) if "introduces" in s["roles"]]
    if culprit:
        first = culprit[0]
        fig.add_trace(go.Scatter(x=[first], y=[top[first]], mode="markers", name=f"culprit: {names[first]}",
                                 marker={"size": 14, "color": "#c62828", "symbol": "x"}, customdata=[names[first]],
                                 hovertemplate="culprit %{customdata}<br>error %{y:.3g}<extra></extra>"))
        fig.add_vline(x=first, line={"color": "#c62828", "width": 1, "dash": "dot"})
    ticks, labels, previous = [], [], object()
    for i, s in enumerate(series):
        if s["layer"] != previous:
            ticks.append(i)
            labels.append(f"L{s['layer']}" if s["layer"] is not None else names[i].rsplit(".", 1)[-1])
            previous = s["layer"]
    step = max(1, len(ticks) // 40)  # at most ~40 labels, whatever the depth
    fig.update_layout(title=f"request {request_id}: output error per module ({len(results)} rank(s))",
                      height=420, margin={"l": 60, "r": 20, "t": 50, "b": 60}, autosize=True,
                      legend={"orientation": "h", "y": -0.2}, hovermode="closest",
                      xaxis={"title": "module in forward order (ticks: decoder layers)", "tickvals": ticks[::step],
                             "ticktext": labels[::step], "showgrid": True},
                      yaxis={"title": "relative error", "type": "log", "exponentformat": "power"})
    return str(fig.to_html(full_html=False, include_plotlyjs=False, config={"responsive": True}))


def _link(path: str | None, base: str) -> str:
    if not path:
        return ""
    target = os.path.relpath(os.path.abspath(path), base)
    return f'<a href="{html.escape(target)}">CSV</a>'


def _verdict_block(data: dict[str, Any]) -> str:
    results = data["results"]
    bad = [r for r in results if r["verdict"] not in ("agrees", "within-floor")]
    lines = [f"{len(results)} pair(s) compared, {len(bad)} not clean, {len(data['unpaired'])} unpaired."]
    for culprit in data["culprits"]:
        lines.append(f"Culprit <code>{html.escape(culprit['module'])}</code>: {len(culprit['pairs'])} pair(s), "
                     f"training rank(s) {', '.join(map(str, culprit['ranks']))}.")
    if not data["culprits"]:
        lines.append("No module introduces a divergence above the floor.")
    return f'<div class="verdict{"" if bad else " clean"}">' + "<br>".join(lines) + "</div>"


def render(results: list[PairResult], data: dict[str, Any], facts: Facts, base: str) -> str:
    from plotly.offline import get_plotlyjs

    parts = [f"<h1>rlpatch dumps compare</h1>{_verdict_block(data)}", "<h2>Run</h2><table>"]
    for key, value in (("date", facts.date), ("rlpatch", facts.rlpatch), ("msprobe", facts.msprobe),
                       ("command", facts.command), ("training root", facts.train), ("inference root", facts.infer),
                       ("backend", facts.backend), ("noise floor", facts.floor)):
        parts.append(f"<tr><th>{key}</th><td><code>{html.escape(value)}</code></td></tr>")
    parts.append("</table><h2>Pairs</h2><table><tr><th>request</th><th>training</th><th>inference</th>"
                 "<th>verdict</th><th>module</th><th>why</th><th>rows</th><th></th></tr>")
    for entry in data["results"]:
        rows = entry["rows"]
        module = (entry["divergence"] or {}).get("module", "")
        parts.append(
            f"<tr><td><code>{html.escape(entry['request_id'])}</code></td>"
            f"<td>step{entry['train']['step']} rank{entry['train']['rank']}</td>"
            f"<td>pid {entry['infer']['pid']} step{entry['infer']['step']} rank{entry['infer']['rank']}</td>"
            f"<td class=\"{entry['verdict']}\">{entry['verdict']}</td><td><code>{html.escape(module)}</code></td>"
            f"<td>{html.escape(entry['why'] or '')}</td>"
            f"<td>{rows['pass']}/{rows['warning']}/{rows['error']} pass/warning/error, {rows['unmatched']} unmatched,"
            f" {rows.get('no_data', 0)} no data" + (f", {rows['unreadable']} unreadable" if rows.get("unreadable") else "")
            + f"</td><td>{_link(entry['csv'], base)}</td></tr>")
    parts.append("</table>")
    from rlpatch.dumps.batches import batch_html

    parts.append(batch_html(data))
    parts.append(f"<h2>Unpaired ({len(data['unpaired'])})</h2>")
    if data["unpaired"]:
        parts.append("<table><tr><th>request</th><th>side</th><th>why</th></tr>" + "".join(
            f"<tr><td><code>{html.escape(u['request_id'])}</code></td><td>{u['side']}</td>"
            f"<td>{html.escape(u['why'])}</td></tr>" for u in data["unpaired"]) + "</table>")
    parts.extend(f"<p class=\"failed\">problem: {html.escape(p)}</p>" for p in data["problems"])
    for request_id, group in by_request(results).items():
        parts.append(f'<section class="request"><h2>request <code>{html.escape(request_id)}</code></h2>')
        parts.extend(f'<p class="failed">rank {r.pair.train.rank}: {html.escape(r.error)}</p>' for r in group
                     if r.error)
        parts.append(figure_html(request_id, group) + "</section>")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>rlpatch dumps compare</title>"
            f"<style>{STYLE}</style><script type=\"text/javascript\">{get_plotlyjs()}</script></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def write_report(path: str, results: list[PairResult], data: dict[str, Any], facts: Facts) -> None:
    """Write the page atomically: a failure leaves no half-written file behind."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise InputError(f"{path}: its directory does not exist")
    text = render(results, data, facts, directory)
    write_output(path, text)  # a link at `path` is replaced, never written through
