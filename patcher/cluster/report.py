"""The `--ray` report: each node's answer, then a summary naming every node that fails or differs."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import click

from rlpatch.errors import EXIT_OK, EXIT_REFUSED

# How each command's JSON says a node was changed.
CHANGED_MESSAGES = {"apply": "applied now", "revert": "reverted"}


@dataclass
class Outcome:
    """Every node's answer to one command, and what they add up to."""

    command: str
    address: str
    nodes: list[dict[str, Any]]
    dead: list[dict[str, Any]]
    rehearsal: bool = False  # the dry run `apply --ray` makes before writing anywhere
    differs: dict[str, dict[str, list[str]]] = field(init=False)

    def __post_init__(self) -> None:
        self.differs = differences({node["node_id"]: facts(self.command, node) for node in self.answered()})

    def answered(self) -> list[dict[str, Any]]:
        return [node for node in self.nodes if node.get("result") is not None]

    def with_status(self, *statuses: str) -> list[str]:
        return [node["node_id"] for node in self.nodes if node["status"] in statuses]

    def changed(self) -> list[str]:
        message = CHANGED_MESSAGES.get(self.command)
        if message is None or self.rehearsal:
            return []
        return [node["node_id"] for node in self.answered()
                if any(rule.get("message") == message for target in _targets(node) for rule in target.get("rules", []))]

    @property
    def exit_code(self) -> int:
        if self.dead or self.rehearsal or self.with_status("error", "timeout"):
            return EXIT_REFUSED
        if self.command == "status":  # status reports; it fails only when a node could not answer
            return EXIT_OK
        return EXIT_REFUSED if self.with_status("failed") or self.differs else EXIT_OK

    def as_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "address": self.address,
            "rehearsal": self.rehearsal,
            "nodes": self.nodes,
            "dead": [_dead_json(node) for node in self.dead],
            "summary": {
                "alive": len(self.nodes),
                "dead": [node["NodeID"] for node in self.dead],
                "failed": self.with_status("failed"),
                "errors": self.with_status("error"),
                "timed_out": self.with_status("timeout"),
                "differs": self.differs,
                "changed": self.changed(),
            },
            "exit_code": self.exit_code,
        }


def _targets(node: dict[str, Any]) -> list[dict[str, Any]]:
    result = node.get("result")
    return result.get("targets", []) if isinstance(result, dict) else []


def _dead_json(node: dict[str, Any]) -> dict[str, Any]:
    return {"node_id": node["NodeID"], "hostname": node.get("NodeManagerHostname"), "ip": node.get("NodeManagerAddress")}


def facts(command: str, node: dict[str, Any]) -> dict[str, str]:
    """What should be the same on every node: versions, tree versions, rule states, doctor's verdicts."""
    found = {"python": node.get("python", "?"), "ray": node.get("ray", "?"), "rlpatch": node.get("rlpatch", "?")}
    result = node.get("result") or {}
    if command == "doctor":
        for name, package in (result.get("packages") or {}).items():
            found[f"{name} version"] = package.get("version") or "absent"
        for verdict in result.get("verdicts") or []:
            found[f"{verdict['check']}"] = verdict["level"]
        return found
    for target in _targets(node):
        package = target["package"]
        found[f"{package} version"] = target.get("version") or "unknown"
        for rule in target.get("rules", []):
            found[f"{package} {rule['id']}"] = rule["state"]
    return found


def differences(by_node: dict[str, dict[str, str]]) -> dict[str, dict[str, list[str]]]:
    """node id -> {fact: [its value, the value most nodes have]} for every node that differs."""
    if len(by_node) < 2:
        return {}
    keys = sorted({key for values in by_node.values() for key in values})
    differs: dict[str, dict[str, list[str]]] = {}
    for key in keys:
        counts = Counter(values.get(key, "absent") for values in by_node.values())
        if len(counts) < 2:
            continue
        usual = counts.most_common(1)[0][0]
        for node_id, values in by_node.items():
            value = values.get(key, "absent")
            if value != usual:
                differs.setdefault(node_id, {})[key] = [value, usual]
    return differs


def label(node: dict[str, Any]) -> str:
    return f"{node['node_id'][:12]} ({node.get('hostname') or '?'}, {node.get('ip') or '?'})"


def show(outcome: Outcome, output_format: str) -> None:
    if output_format == "json":
        from rlpatch.output.api import versioned

        click.echo(json.dumps(versioned(outcome.as_json()), indent=2))
        return
    verb = f"{outcome.command} --dry-run" if outcome.rehearsal else outcome.command
    click.echo(f"rlpatch {verb} on the Ray cluster at {outcome.address}: {len(outcome.nodes)} alive node(s), "
               f"{len(outcome.dead)} dead")
    for node in outcome.nodes:
        click.echo("\n".join(node_lines(outcome.command, node)))
    for node in outcome.dead:
        click.echo(f"node {node['NodeID'][:12]} ({node.get('NodeManagerHostname')}, {node.get('NodeManagerAddress')}): "
                   "DEAD (listed by the cluster, not alive: nothing ran there)")
    click.echo("\n".join(summary_lines(outcome)))


def node_lines(command: str, node: dict[str, Any]) -> list[str]:
    head = f"node {label(node)}: {node['status'].upper()}"
    if node.get("exit_code") not in (None, 0):
        head += f" (exit {node['exit_code']})"
    lines = [head]
    if "executable" in node:  # the node answered (a task that never ran has no identity)
        lines.append(f"  {node['executable']}  Python {node['python']}  ray {node['ray']}  rlpatch {node['rlpatch']}")
    if node.get("error"):
        return lines + [f"  {node['error']}"]
    result = node.get("result")
    if result is None:
        detail = (node.get("stderr") or node.get("stdout") or "").strip().splitlines()
        return lines + [f"  {detail[-1] if detail else 'no output'}"]
    if command == "doctor":
        for name, package in (result.get("packages") or {}).items():
            lines.append(f"  {name:<17} {package.get('version') or 'absent':<12} {package.get('location') or ''}".rstrip())
        lines += [f"  {v['level']:<4} {v['check']}: {v['message']}" for v in result.get("verdicts") or []]
        return lines
    for target in _targets(node):
        lines.append(f"  {target['package']} {target.get('version') or 'unknown version'} at {target['root']}")
        lines += [f"    {rule['id']:<28} {rule['state']}" for rule in target.get("rules", [])]
        lines.append(f"    set: {target.get('state')}")
    for line in (node.get("stderr") or "").strip().splitlines():
        if line.startswith("rlpatch: "):
            lines.append(f"  {line}")
    return lines


def summary_lines(outcome: Outcome) -> list[str]:
    by_id = {node["node_id"]: node for node in outcome.nodes}
    lines = []
    failed = outcome.with_status("failed")
    if failed:
        lines.append(f"failed on {len(failed)} node(s): " + "; ".join(_failure(outcome.command, by_id[n]) for n in failed))
    for status, what in (("error", "error on"), ("timeout", "timed out on")):
        ids = outcome.with_status(status)
        if ids:
            lines.append(f"{what} {len(ids)} node(s): " + "; ".join(f"{label(by_id[n])}: {by_id[n].get('error')}" for n in ids))
    if outcome.dead:
        lines.append(f"dead: {len(outcome.dead)} node(s): " + ", ".join(n["NodeID"][:12] for n in outcome.dead))
    for node_id, keys in outcome.differs.items():
        parts = ", ".join(f"{key}={value} (most nodes: {usual})" for key, (value, usual) in keys.items())
        lines.append(f"differs: node {label(by_id[node_id])}: {parts}")
    if outcome.command in CHANGED_MESSAGES and not outcome.rehearsal:
        changed = outcome.changed()
        names = ", ".join(label(by_id[n]) for n in changed) or "none"
        lines.append(f"changed: {len(changed)} node(s): {names}")
    if outcome.rehearsal:
        lines.append("nothing was written on any node (the dry run did not pass everywhere)")
    verdict = "OK" if outcome.exit_code == 0 else "FAILED"
    lines.append(f"summary: {verdict}: {len(outcome.nodes)} node(s) answered the {outcome.command} of "
                 f"{len(outcome.nodes) + len(outcome.dead)} listed")
    return lines


def _failure(command: str, node: dict[str, Any]) -> str:
    """One failing node and the trees whose rules are not in place there."""
    not_in_place = [f"{t['package']} at {t['root']}: {t.get('state')}" for t in _targets(node)
                    if t.get("state") not in ("applied", "not-applicable")]
    if command == "doctor":
        result = node.get("result") or {}
        not_in_place = [f"{v['check']}: {v['message']}" for v in result.get("verdicts") or [] if v["level"] == "FAIL"]
    detail = "; ".join(not_in_place)
    return label(node) + (f" ({detail})" if detail else "")
