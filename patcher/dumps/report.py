"""`compare --report FILE.html`: one self-contained page, a summary table and a plot per pair.

Each plot draws the pair's main metric (cosine similarity for tensor dumps, the maximum relative
error for statistics dumps) along the modules in forward order, colours every point by its
`Result`, and marks the first module that is not `pass`: where training and inference start to
diverge. The plots are made with matplotlib (imported only here, with the non-interactive Agg
backend) and embedded as base64 PNG, so the page opens anywhere without its neighbours.
"""

from __future__ import annotations

import base64
import html
import io
import os
import tempfile

from rlpatch.dumps.compare import PairResult
from rlpatch.errors import InputError

COLOURS = {"pass": "#2e7d32", "warning": "#f9a825", "error": "#c62828"}
STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 2em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; font-size: 0.9em; }
th { background: #f0f0f0; }
.error { color: #c62828; } .warning { color: #a67c00; } .pass { color: #2e7d32; }
section.pair { margin-bottom: 3em; }
code { font-size: 0.85em; }
"""


def plot_png(result: PairResult) -> bytes:
    """The pair's metric along the module order, as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    series = result.series()
    positions = list(range(len(series)))
    figure, axes = pyplot.subplots(figsize=(max(6.0, min(24.0, 0.25 * len(series))), 3.6), dpi=100)
    try:
        values = [value if value is not None else float("nan") for _, value, _ in series]
        axes.plot(positions, values, color="#607d8b", linewidth=1, zorder=1)
        axes.scatter(positions, values, c=[COLOURS.get(result_, "#9e9e9e") for _, _, result_ in series], s=14,
                     zorder=2)
        first = result.first_difference
        if first is not None:
            index = next(i for i, (name, _, _) in enumerate(series) if name == first.name)
            axes.axvline(index, color="#c62828", linestyle="--", linewidth=1)
            axes.annotate(f"first {first.result}: {_short(first.name)}", (index, 1), xycoords=("data", "axes fraction"),
                          xytext=(4, -12), textcoords="offset points", color="#c62828", fontsize=8)
        axes.set_xlabel("tensor in forward order")
        axes.set_ylabel(result.metric_name)
        axes.set_title(f"request {result.pair.request_id}", fontsize=10)
        step = max(1, len(series) // 30)
        axes.set_xticks(positions[::step], [_short(name) for name, _, _ in series][::step], rotation=90, fontsize=6)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        return buffer.getvalue()
    finally:
        pyplot.close(figure)


def _short(name: str) -> str:
    """`layers.1.mlp.Mlp.output.0` of `Module.model.layers.1.mlp.Mlp.forward.0.output.0`."""
    module, _, rest = name.partition(".forward.")
    module = module.replace("_fsdp_wrapped_module.", "").removeprefix("Module.").removeprefix("model.")
    return f"{module}.{rest.split('.', 1)[-1]}" if rest else module


def _summary_row(result: PairResult) -> str:
    counts = result.counts
    first = result.first_difference
    if result.failed:
        status = f'<td class="error" colspan="3">failed: {html.escape(result.error or "")}</td>'
    else:
        status = (f'<td class="pass">{counts["pass"]}</td><td class="warning">{counts["warning"]}</td>'
                  f'<td class="error">{counts["error"]}</td>')
    first_cell = "" if first is None else f"{html.escape(first.name)} ({first.result})"
    pair = result.pair
    return (f"<tr><td><code>{html.escape(pair.request_id)}</code></td>"
            f"<td>step{pair.train.step}/rank{pair.train.rank}</td>"
            f"<td>pid {pair.infer.pid} step{pair.infer.step}/rank{pair.infer.rank}</td>{status}"
            f"<td>{first_cell}</td></tr>")


def _pair_section(result: PairResult) -> str:
    pair = result.pair
    parts = [f'<section class="pair"><h2>request <code>{html.escape(pair.request_id)}</code></h2>',
             f"<p>training <code>{html.escape(pair.train.path)}</code><br>"
             f"inference <code>{html.escape(pair.infer.path)}</code></p>"]
    if result.failed:
        parts.append(f'<p class="error">{html.escape(result.error or "")}</p>')
    elif not result.rows:
        parts.append("<p>msprobe matched no module of the two dumps.</p>")
    else:
        image = base64.b64encode(plot_png(result)).decode("ascii")
        parts.append(f'<img class="plot" alt="{html.escape(result.metric_name)} along the module order" '
                     f'src="data:image/png;base64,{image}">')
        first = result.first_difference
        if first is not None:
            metrics = ", ".join(f"{key} {html.escape(value)}" for key, value in first.metrics.items())
            parts.append(f'<p>first module that is not pass: <code>{html.escape(first.name)}</code> '
                         f'<span class="{first.result}">{first.result}</span>: {metrics}'
                         f"{'<br>' + html.escape(first.message) if first.message else ''}</p>")
    parts.append("</section>")
    return "\n".join(parts)


def render(results: list[PairResult], title: str = "rlpatch dumps compare") -> str:
    rows = "\n".join(_summary_row(result) for result in results)
    sections = "\n".join(_pair_section(result) for result in results)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>\n<h1>{html.escape(title)}</h1>\n"
            "<table><tr><th>request</th><th>training</th><th>inference</th><th>pass</th><th>warning</th>"
            f"<th>error</th><th>first not pass</th></tr>\n{rows}\n</table>\n{sections}\n</body></html>\n")


def write_report(path: str, results: list[PairResult]) -> None:
    """Write the page atomically: a failure leaves no half-written file behind."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise InputError(f"{path}: its directory does not exist")
    text = render(results)
    handle, temporary = tempfile.mkstemp(prefix=".rlpatch-report-", suffix=".html", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as output:
            output.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes it private; a report is an ordinary file
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
