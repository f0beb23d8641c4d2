"""The text form of each `rlpatch dumps` command's JSON answer: the lines printed without `--format json`."""

from __future__ import annotations

import shlex
from typing import Any

from rlpatch.output.api import Note


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


def check_lines(directory: str, report: dict[str, Any], failed: bool) -> list[str]:
    lines = [f"{directory}: mode {report['mode']}"]
    for step in report["steps"]:
        where = f"step {step['step']}" + (f" {step['stage']}" if step["stage"] else "")
        ranks = rank_list(step["ranks"]) or "none"
        expected = f" (expected {rank_list(step['expected_ranks'])})" if step["expected_ranks"] else ""
        lines.append(f"  {where}: ranks {ranks}{expected}")
        lines.extend(f"    problem: {problem}" for problem in step["problems"])
    lines.extend(f"  problem: {problem}" for problem in report["problems"])
    lines.extend(Note(f"  note: {note}") for note in report["notes"])
    lines.append("no problem found" if not failed else "problems found")
    return lines


def pair_lines(data: dict[str, Any]) -> list[str]:
    lines = []
    for pair in data["pairs"]:
        lines.append(f"{pair['request_id']}: train step{pair['train']['step']} rank{pair['train']['rank']} "
                     f"<-> infer pid {pair['infer']['pid']} step{pair['infer']['step']} rank{pair['infer']['rank']}")
        if "slices" in pair:
            lines.append(f"  {slice_line(pair['slices'])}")
        lines.append(f"  {shlex.join(pair['command'])}")
    lines.extend(f"unpaired ({u['side']}) {u['request_id']}: {u['why']}" for u in data["unpaired"])
    lines.extend(f"problem: {problem}" for problem in data["problems"])
    lines.extend(Note(f"note: {note}") for note in data["notes"])
    lines.append(f"{len(data['pairs'])} pair(s), {len(data['unpaired'])} unpaired")
    return lines


def slice_line(slices: dict[str, Any]) -> str:
    """Where a rows pair's request sits on each side (the rows `dumps compare` cuts)."""
    train, infer = slices["train"], slices["infer"]
    shards = f", TP ranks {len(infer['tp_shards'])} rebuilt" if infer["tp_shards"] else ""
    return (f"rows: train {train['layout']} batch {train['batch_index']} tokens [{train['slice'][0]}, "
            f"{train['slice'][1]}) of {train['requests_in_micro_batch']} request(s); infer rows [{infer['slice'][0]}, "
            f"{infer['slice'][1]}) of {infer['step_tokens']} ({infer['requests_in_step']} request(s) in the step), "
            f"prompt positions [{infer['computed']}, {infer['computed'] + infer['tokens']}){shards}")


def verdict_line(data: dict[str, Any]) -> str:
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


def compare_lines(data: dict[str, Any]) -> list[str]:
    lines = [verdict_line(data)]
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
        if "slices" in result:
            lines.append(f"  {slice_line(result['slices'])}")
            lines.extend(f"  {what}: {len(result[what])} tensor(s) ({result[what][0]}{' ...' if len(result[what]) > 1 else ''})"
                         for what in ("unsliced", "not_compared") if result.get(what))
        rows = result["rows"]
        lines.append(f"  rows: {rows['pass']} pass, {rows['warning']} warning, {rows['error']} error (msprobe), "
                     f"{rows['unmatched']} unmatched, {rows.get('no_data', 0)} no data, "
                     + (f"{rows['unreadable']} unreadable, " if rows.get("unreadable") else "")
                     + f"{rows.get('roots', 0)} root "
                     f"[{result['csv']}]")
    from rlpatch.dumps.batches import batch_lines

    lines.extend(batch_lines(data))
    lines.extend(f"unpaired ({u['side']}) {u['request_id']}: {u['why']}" for u in data["unpaired"])
    lines.extend(f"problem: {problem}" for problem in data["problems"])
    return lines
