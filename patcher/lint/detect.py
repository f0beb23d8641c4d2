"""`rlpatch detect`: the run model of each script, as text or as a stable JSON contract."""

from __future__ import annotations

import click

from rlpatch.errors import InputError
from rlpatch.lint.engine import lint_path
from rlpatch.lint.rule import LintOptions
from rlpatch.output.api import shown
from rlpatch.shell.api import OWN_TRAINER
from rlpatch.upstream.api import TRAINERS


def describe_file(path: str, options: LintOptions, stdin: bytes | None) -> dict | None:
    """One object per file: the first launch's summary (other distinct ones under `other_launches`); None on
    input error."""
    result = lint_path(path, options, [], stdin)
    if result.error:
        click.echo(f"rlpatch: error: {shown(result.error)}", err=True)
        return None
    if not result.runs:
        unknown = [{"what": u.what, "file": u.span.file, "line": u.span.line, "column": u.span.column}
                   for u in (result.evaluation.unknowns if result.evaluation else [])]
        return {"file": result.path, "entry": None, "mode": "none", "rollout_backend": None, "train_backend": None, "trainer": None,
                "world_size": None, "overrides": [], "env": {}, "unknown": unknown}
    # Paths of a script that differ only in the launcher (`torchrun` or `python3` in an `if`) give the
    # same run: each distinct one is shown once.
    distinct: dict[str, dict] = {}
    for run in result.runs:
        summary = run.summary()
        distinct.setdefault(render_text(summary), summary)
    summaries = list(distinct.values())
    first = summaries[0]
    if len(summaries) > 1:
        first["other_launches"] = summaries[1:]
    return first


def _trainer_label(trainer: str | None, entry_exists: bool | None) -> str:
    if entry_exists is False:
        return "none"
    if trainer == OWN_TRAINER:
        return f"the entry module's own trainer [{trainer}]"
    return f"{TRAINERS[trainer].label} [{trainer}]" if trainer in TRAINERS else "unknown"


def render_text(obj: dict) -> str:
    lines = [f"{obj['file']}: {obj['entry'] or 'no verl entry point found'}"]
    if obj["entry"] is None:
        return "\n".join(lines) + "\n"
    lines += [
        f"  mode:            {obj['mode']} ({obj['mode_reason']})",
        f"  rollout backend: {obj['rollout_backend'] or 'not set'}",
        f"  train backend:   {obj['train_backend']} ({obj['train_backend_reason']})",
        f"  trainer:         {_trainer_label(obj.get('trainer'), obj.get('entry_exists'))} ({obj.get('trainer_reason', '')})",
        f"  world size:      {obj['world_size'] if obj['world_size'] is not None else 'unknown'}",
        f"  verl version:    {obj['verl_version']}",
        "  sizes:",
    ]
    for key, size in obj["sizes"].items():
        where = f"line {size['line']}" if size["line"] else size["source"]
        lines.append(f"    {key} = {size['value'] if size['value'] is not None else '<unknown>'}  ({where})")
    reach = {True: "exported env reaches the Ray workers (one node)",
             False: "exported env does NOT reach Ray workers on other nodes: use the Ray runtime env",
             None: "unknown whether exported env reaches the Ray workers (node count unknown)"}
    lines.append("  env:" if obj["env"] else "  env: (none exported)")
    carried = obj.get("runtime_env_vars") or []
    if obj["env"] and carried and obj["env_reaches_ray_workers"] is not True:
        lines.append(f"    (exported env does not reach Ray workers on other nodes; the Ray runtime env carries "
                     f"{', '.join(carried)})")
    elif obj["env"]:
        lines.append(f"    ({reach[obj['env_reaches_ray_workers']]})")
    for name, value in obj["env"].items():
        source = obj["env_sources"][name]
        lines.append(f"    {name}={value if value is not None else '<unknown>'}  ({source['how']}, "
                     f"{source['file']}:{source['line']})")
    if obj["unknown"]:
        lines.append("  unknown:")
        lines += [f"    {u['what']}  ({u['file']}:{u['line']}:{u['column']})" for u in obj["unknown"]]
    for other in obj.get("other_launches", []):
        lines.append("  another launch:")
        lines += ["  " + line for line in render_text(other).splitlines()]
    return "\n".join(lines) + "\n"


__all__ = ["InputError", "describe_file", "render_text"]
