"""`dumps compare` per request and per batch size: what the pairs cut by rows say together.

A request can give several pairs (one per prefill chunk); `per_request` folds them: its verdicts and
culprits. `by_batch_size` groups the pairs by how many requests the inference step packed (the batch
the kernels saw): a culprit found at 2 requests and never at 1 is a batch-dependent divergence. Pairs
of whole dumps (records without rows) count as batch size 1, the only one they can have.
"""

from __future__ import annotations

from typing import Any

from rlpatch.dumps.divergence import Outcome


def per_request(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Each request: its pairs' labels, verdicts and culprits (in the order first seen)."""
    found: dict[str, dict[str, Any]] = {}
    for outcome in outcomes:
        item = found.setdefault(outcome.request_id, {"request_id": outcome.request_id, "pairs": 0, "verdicts": {},
                                                     "culprits": [], "batch_sizes": []})
        item["pairs"] += 1
        item["verdicts"][outcome.verdict] = item["verdicts"].get(outcome.verdict, 0) + 1
        culprit, size = outcome.culprit, outcome.requests_in_step
        if culprit is not None and culprit not in item["culprits"]:
            item["culprits"].append(culprit)
        if size not in item["batch_sizes"]:
            item["batch_sizes"].append(size)
    return list(found.values())


def by_batch_size(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Per inference batch size (requests in the step), smallest first: pairs, verdicts, culprits with counts."""
    found: dict[int, dict[str, Any]] = {}
    for outcome in outcomes:
        size = outcome.requests_in_step
        item = found.setdefault(size, {"requests_in_step": size, "pairs": 0, "verdicts": {}, "culprits": {}})
        item["pairs"] += 1
        item["verdicts"][outcome.verdict] = item["verdicts"].get(outcome.verdict, 0) + 1
        if outcome.culprit is not None:
            item["culprits"][outcome.culprit] = item["culprits"].get(outcome.culprit, 0) + 1
    return [found[size] for size in sorted(found)]


def batch_lines(data: dict[str, Any]) -> list[str]:
    """The text of the per-request and per-batch-size views (the batch sizes only when there are several)."""
    lines = []
    for item in data.get("requests", []):
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(item["verdicts"].items()))
        culprits = f"; culprit {', '.join(item['culprits'])}" if item["culprits"] else ""
        lines.append(f"  request {item['request_id']}: {item['pairs']} pair(s) ({verdicts}){culprits}")
    sizes = data.get("by_batch_size", [])
    if len(sizes) > 1:
        lines.append("divergence against the batch size (requests in the inference step):")
        for item in sizes:
            verdicts = ", ".join(f"{n} {v}" for v, n in sorted(item["verdicts"].items()))
            culprits = ", ".join(f"{module} ({n})" for module, n in item["culprits"].items()) or "none"
            lines.append(f"  {item['requests_in_step']} request(s): {item['pairs']} pair(s) ({verdicts}); "
                         f"culprits: {culprits}")
    return lines


def batch_html(data: dict[str, Any]) -> str:
    """The report's per-batch-size table (empty when the pairs were not cut by rows)."""
    import html

    sizes = data.get("by_batch_size", [])
    if not any(entry.get("slices") for entry in data.get("results", [])):
        return ""
    rows = "".join(
        f"<tr><td>{item['requests_in_step']}</td><td>{item['pairs']}</td>"
        f"<td>{html.escape(', '.join(f'{n} {v}' for v, n in sorted(item['verdicts'].items())))}</td>"
        f"<td>{html.escape(', '.join(f'{m} ({n})' for m, n in item['culprits'].items()) or 'none')}</td></tr>"
        for item in sizes)
    return ("<h2>Divergence against the batch size</h2><table><tr><th>requests in the inference step</th>"
            f"<th>pairs</th><th>verdicts</th><th>culprits</th></tr>{rows}</table>")
