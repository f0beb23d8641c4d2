"""`compare --report FILE.html` and `dumps report OUT`: one self-contained page that stays readable
at a thousand pairs.

Summary first (the verdict; the verdicts counted; the culprits by module, by training rank and by
step; the first culprit in forward order), then one overview plot of every request (its largest
output error in each decoder layer against the noise floor, a heatmap), the run's facts (date,
rlpatch and msprobe versions, the command, the two roots, the backend, the floor), the pairs table
(filtered as one types; each row links to its request's plot and CSV), the unpaired requests, and
per request a collapsed `<details>` whose plot is drawn only when it is opened: each judged module's
output error (log scale; the largest and smallest over the ranks) against the forward order,
decoder-layer boundaries as ticks, the noise floor drawn, the culprit marked. The plots' data is
embedded once as JSON, plotly.js once (`rlpatch[report]`), so the page works offline; a
Content-Security-Policy forbids it any fetch. plotly is imported only here; `check_plotting` runs
before any compare starts. The page is rendered from the compare's JSON answer and each pair's
attribution, which `dumps compare` keeps in `-o` (rlpatch.dumps.stored): `dumps report OUT`
renders it again without msprobe.
"""

from __future__ import annotations

import datetime
import html
import json
import math
import os
import shlex
import subprocess
import sys
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any

from rlpatch.dumps.divergence import Attribution
from rlpatch.dumps.report_page import SCRIPT, STYLE, WATCH
from rlpatch.errors import InputError
from rlpatch.output.api import write_output

INSTALL_HINT = "pip install 'rlpatch[report]'"


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
    def collect(cls, train: str, infer: str, backend: str, msprobe: str, rtol: float | None) -> Facts:
        import rlpatch

        return cls(datetime.datetime.now().astimezone().isoformat(timespec="seconds"), rlpatch.__version__,
                   msprobe, shlex.join(["rlpatch", *sys.argv[1:]]), os.path.abspath(train),
                   os.path.abspath(infer), backend,
                   f"--rtol {rtol:g}" if rtol is not None else "the compared dtype's unit roundoff x 8")


def msprobe_version(python: list[str]) -> str:
    """The mindstudio-probe version in the compare's interpreter (part of what makes a stored run current)."""
    code = "import importlib.metadata as m; print(m.version('mindstudio-probe'))"
    try:
        done = subprocess.run([*python, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() or "unknown"



def _log(value: float) -> int:
    """log10 of a positive error in thousandths (the page's size: 5 characters, 0.2 % off at most);
    the page's script takes 10^(n / 1000). An infinite error is drawn at 10^300."""
    return 300_000 if math.isinf(value) else round(math.log10(value) * 1000)


def _series(attributions: list[Attribution]) -> list[dict[str, Any]]:
    """Per module in forward order (the first rank's), its errors over the ranks."""
    order: OrderedDict[str, dict[str, Any]] = OrderedDict()
    for attribution in attributions:
        for point in attribution.points:
            entry = order.setdefault(point.module, {"module": point.module, "layer": point.layer, "errors": [],
                                                   "floor": point.floor, "roles": set()})
            entry["errors"].append(point.output_error)
            entry["floor"] = max(entry["floor"], point.floor)
            entry["roles"].add(point.role)
    return list(order.values())


class _Shared:
    """What every request of a model shares, each once for the whole page: the module names, and the
    sequences of modules in forward order with their layer ticks."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.sequences: dict[tuple[int, ...], int] = {}
        self.ticks: list[list[list[Any]]] = []

    def sequence(self, series: list[dict[str, Any]]) -> int:
        found = tuple(self.names.setdefault(s["module"], len(self.names)) for s in series)
        if found not in self.sequences:
            self.sequences[found] = len(self.sequences)
            ticks, previous = [], object()
            for i, s in enumerate(series):
                if s["layer"] != previous:
                    ticks.append([i, f"L{s['layer']}" if s["layer"] is not None else s["module"].rsplit(".", 1)[-1]])
                    previous = s["layer"]
            self.ticks.append(ticks)
        return self.sequences[found]

    def as_json(self) -> dict[str, Any]:
        return {"modules": list(self.names), "sequences": [list(seq) for seq in self.sequences], "ticks": self.ticks}


def _request_plot(request_id: str, ranks: int, series: list[dict[str, Any]], shared: _Shared) -> dict[str, Any]:
    """What the page's script draws for one request (see drawRequest in report_page.SCRIPT): its module
    sequence, errors as `_log`, the floor only where it changes (it is drawn as steps)."""
    positives = [e for s in series for e in s["errors"] if e > 0] + [s["floor"] for s in series if s["floor"] > 0]
    bottom = min(positives) / 1e3 if positives else 1e-12  # log scale: an exact 0 is drawn here
    floors: list[list[int]] = []
    for i, s in enumerate(series):
        level = _log(max(s["floor"], bottom))
        if not floors or floors[-1][1] != level:
            floors.append([i, level])
    culprit = next((i for i, s in enumerate(series) if "introduces" in s["roles"]), -1)
    return {"id": request_id, "ranks": ranks, "s": shared.sequence(series) if series else -1,
            "hi": [_log(max(max(s["errors"]), bottom)) for s in series],
            "lo": [_log(max(min(s["errors"]), bottom)) for s in series] if ranks > 1 else None,
            "floor": floors, "culprit": culprit}


def _layer_columns(series: list[dict[str, Any]]) -> dict[str, float]:
    """A request's largest output error over the floor in each layer (`embed` before the first, `head` after)."""
    found: dict[str, float] = {}
    seen_layer = False
    for s in series:
        if s["layer"] is not None:
            seen_layer, column = True, f"L{s['layer']}"
        else:
            column = "head" if seen_layer else "embed"
        worst, floor = max(s["errors"]), s["floor"]
        ratio = worst / floor if floor > 0 else (math.inf if worst > 0 else 1e-3)
        found[column] = max(found.get(column, -math.inf), math.log10(ratio) if ratio > 0 else -3.0)
    return found


def _column_order(column: str) -> tuple[int, int]:
    if column == "embed":
        return (0, 0)
    if column == "head":
        return (2, 0)
    return (1, int(column[1:]))


def payload(data: dict[str, Any], attributions: list[Attribution | None]) -> dict[str, Any]:
    """Everything the page's script needs, embedded once: per request its plot, and the overview."""
    grouped: OrderedDict[str, list[Attribution | None]] = OrderedDict()
    for entry, attribution in zip(data["results"], attributions, strict=True):
        grouped.setdefault(entry["request_id"], []).append(attribution)
    shared, requests, layers = _Shared(), [], []
    for request_id, found in grouped.items():
        series = _series([a for a in found if a is not None])
        requests.append(_request_plot(request_id, len(found), series, shared))
        layers.append(_layer_columns(series))
    columns = sorted({c for row in layers for c in row}, key=_column_order)
    z = [[None if c not in row else max(-3.0, min(3.0, round(row[c], 2))) for c in columns] for row in layers]
    return {**shared.as_json(), "requests": requests,
            "overview": {"columns": columns, "rows": list(grouped), "z": z if columns else []}}


def _embedded(value: Any) -> str:
    """JSON inside a <script> element: no `</script>` or `<!--` can end or change it."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _link(path: str | None, base: str) -> str:
    if not path:
        return ""
    target = os.path.relpath(os.path.abspath(path), base)
    return f'<a href="{html.escape(target)}">CSV</a>'


def _verdict_block(data: dict[str, Any]) -> str:
    results = data["results"]
    bad = [r for r in results if r["verdict"] not in ("agrees", "within-floor")]
    lines = [f"{len(results)} pair(s) compared, {len(bad)} not clean, {len(data['unpaired'])} unpaired."]
    for culprit in data["culprits"][:5]:
        lines.append(f"Culprit <code>{html.escape(culprit['module'])}</code>: {len(culprit['pairs'])} pair(s), "
                     f"training rank(s) {', '.join(map(str, culprit['ranks']))}.")
    if len(data["culprits"]) > 5:
        lines.append(f"... and {len(data['culprits']) - 5} more culprit(s), below.")
    if not data["culprits"]:
        lines.append("No module introduces a divergence above the floor.")
    return f'<div class="verdict{"" if bad else " clean"}">' + "<br>".join(lines) + "</div>"


def _small_table(title: str, head: list[str], rows: list[list[str]], limit: int = 20) -> str:
    """One of the summary's tables (already escaped cells), its first `limit` rows."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows[:limit])
    more = f"<tr><td colspan=\"{len(head)}\">... {len(rows) - limit} more</td></tr>" if len(rows) > limit else ""
    return (f"<table><caption>{title}</caption><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
            + (body + more or f"<tr><td colspan=\"{len(head)}\">none</td></tr>") + "</table>")


def _by(entries: list[dict[str, Any]], side: str, field: str) -> list[list[str]]:
    """Per training rank or step: pairs, pairs that diverge, their most frequent culprit."""
    pairs: Counter[Any] = Counter()
    diverging: Counter[Any] = Counter()
    culprits: dict[Any, Counter[str]] = {}
    for entry in entries:
        value = entry[side][field]
        pairs[value] += 1
        module = (entry.get("divergence") or {}).get("module")
        if module is not None:
            diverging[value] += 1
            culprits.setdefault(value, Counter())[module] += 1
    order = sorted(pairs, key=lambda v: (-diverging[v], str(v)))
    return [[html.escape(str(v)), str(pairs[v]), str(diverging[v]),
             f"<code>{html.escape(culprits[v].most_common(1)[0][0])}</code>" if v in culprits else ""] for v in order]


def _summary(data: dict[str, Any], modules: list[str]) -> str:
    entries = data["results"]
    verdicts = Counter(e["verdict"] for e in entries)
    parts = [_small_table("verdicts", ["verdict", "pairs"],
                          [[f'<span class="{v}">{v}</span>', str(n)] for v, n in verdicts.most_common()])]
    parts.append(_small_table("culprits by module", ["module", "layer", "requests", "ranks"], [
        [f"<code>{html.escape(c['module'])}</code>", "" if c["layer"] is None else str(c["layer"]),
         str(len(c["pairs"])), html.escape(", ".join(map(str, c["ranks"])))] for c in data["culprits"]]))
    parts.append(_small_table("by training rank", ["rank", "pairs", "diverge", "culprit (most often)"],
                              _by(entries, "train", "rank")))
    parts.append(_small_table("by training step", ["step", "pairs", "diverge", "culprit (most often)"],
                              _by(entries, "train", "step")))
    position = {name: i for i, name in enumerate(modules)}
    found = [c for c in data["culprits"] if c["module"] in position]
    first = min(found, key=lambda c: position[c["module"]]) if found else None
    line = ("<p>First culprit in forward order: " + (f"<code>{html.escape(first['module'])}</code> in "
            f"{len(first['pairs'])} request(s)." if first else "none.") + "</p>")
    return "<h2>Summary</h2>" + line + '<div class="summary">' + "".join(parts) + "</div>"


def _rows_text(rows: dict[str, int]) -> str:
    return (f"{rows['pass']}/{rows['warning']}/{rows['error']} pass/warning/error, {rows['unmatched']} unmatched,"
            f" {rows.get('no_data', 0)} no data" + (f", {rows['unreadable']} unreadable" if rows.get("unreadable") else ""))


def _pairs_table(data: dict[str, Any], request_index: dict[str, int], base: str) -> str:
    verdicts = sorted({e["verdict"] for e in data["results"]})
    parts = ["<h2>Pairs</h2>",
             '<input id="pairs-filter" type="search" placeholder="filter: request, module, rank, step, words of why">',
             ' <select id="pairs-verdict"><option value="">every verdict</option>'
             + "".join(f'<option value="{v}">{v}</option>' for v in verdicts) + "</select>",
             f' <span id="pairs-shown">{len(data["results"])} of {len(data["results"])} pair(s) shown</span>',
             '<table id="pairs"><thead><tr><th>request</th><th>training</th><th>inference</th><th>verdict</th>'
             "<th>module</th><th>why</th><th>rows</th><th></th></tr></thead><tbody>"]
    for n, entry in enumerate(data["results"]):
        module = (entry["divergence"] or {}).get("module", "")
        k = request_index[entry["request_id"]]
        parts.append(
            f'<tr id="p-{n}" data-verdict="{entry["verdict"]}"><td><a href="#r-{k}"><code>'
            f"{html.escape(entry['request_id'])}</code></a></td>"
            f"<td>step{entry['train']['step']} rank{entry['train']['rank']}</td>"
            f"<td>pid {entry['infer']['pid']} step{entry['infer']['step']} rank{entry['infer']['rank']}</td>"
            f"<td class=\"{entry['verdict']}\">{entry['verdict']}</td><td><code>{html.escape(module)}</code></td>"
            f"<td>{html.escape(entry['why'] or '')}</td><td>{_rows_text(entry['rows'])}</td>"
            f"<td>{_link(entry['csv'], base)}</td></tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def _details(data: dict[str, Any], requests: list[dict[str, Any]]) -> str:
    """Per request, collapsed: its verdicts, its failures, and the plot drawn when opened."""
    grouped: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
    for entry in data["results"]:
        grouped.setdefault(entry["request_id"], []).append(entry)
    parts = [f"<h2>Requests ({len(requests)})</h2>"]
    for k, (request_id, entries) in enumerate(grouped.items()):
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(Counter(e["verdict"] for e in entries).items()))
        culprits = sorted({(e["divergence"] or {}).get("module", "") for e in entries} - {""})
        errors = "".join(f'<p class="failed">rank {e["train"]["rank"]}: {html.escape(e["error"])}</p>'
                         for e in entries if e["error"])
        parts.append(f'<details class="request" id="r-{k}" data-k="{k}"><summary>request <code>'
                     f"{html.escape(request_id)}</code>: {verdicts}"
                     + (f"; culprit <code>{html.escape(', '.join(culprits))}</code>" if culprits else "")
                     + f'</summary>{errors}<div class="plot"></div></details>')
    return "\n".join(parts)


CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:")


def render(attributions: list[Attribution | None], data: dict[str, Any], facts: Facts, base: str) -> str:
    from plotly.offline import get_plotlyjs

    embedded = payload(data, attributions)
    request_index = {r["id"]: k for k, r in enumerate(embedded["requests"])}
    parts = [f"<h1>rlpatch dumps compare</h1>{_verdict_block(data)}", _summary(data, embedded["modules"]),
             '<h2>Overview</h2><div id="overview"></div>', "<h2>Run</h2><table>"]
    for key, value in (("date", facts.date), ("rlpatch", facts.rlpatch), ("msprobe", facts.msprobe),
                       ("command", facts.command), ("training root", facts.train), ("inference root", facts.infer),
                       ("backend", facts.backend), ("noise floor", facts.floor)):
        parts.append(f"<tr><th>{key}</th><td><code>{html.escape(value)}</code></td></tr>")
    parts.append("</table>")
    parts.append(_pairs_table(data, request_index, base))
    from rlpatch.dumps.batches import batch_html

    parts.append(batch_html(data))
    parts.append(f"<h2>Unpaired ({len(data['unpaired'])})</h2>")
    if data["unpaired"]:
        parts.append("<table><tr><th>request</th><th>side</th><th>why</th></tr>" + "".join(
            f"<tr><td><code>{html.escape(u['request_id'])}</code></td><td>{u['side']}</td>"
            f"<td>{html.escape(u['why'])}</td></tr>" for u in data["unpaired"]) + "</table>")
    parts.extend(f"<p class=\"failed\">problem: {html.escape(p)}</p>" for p in data["problems"])
    parts.append(_details(data, embedded["requests"]))
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\"><title>rlpatch dumps compare</title>"
            f"<style>{STYLE}</style><script>{WATCH}</script>"
            f"<script type=\"text/javascript\">{get_plotlyjs()}</script></head><body>\n"
            + "\n".join(parts)
            + f'\n<script type="application/json" id="rlpatch-data">{_embedded(embedded)}</script>'
            + f"\n<script>{SCRIPT}</script>\n</body></html>\n")


def write_report(path: str, attributions: list[Attribution | None], data: dict[str, Any], facts: Facts) -> None:
    """Write the page atomically: a failure leaves no half-written file behind."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise InputError(f"{path}: its directory does not exist")
    text = render(attributions, data, facts, directory)
    write_output(path, text)  # a link at `path` is replaced, never written through
