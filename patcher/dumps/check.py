"""`dumps check`: what a collection left on disk against what its mode should have produced.

Per step (and verl stage) the rank folders found against the ranks expected: the run's world size
(training) or rollout TP (inference), narrowed by the msprobe config's `rank` list, when `--script`
gives the launch script (read through the front end and the run model, as `lint` reads it);
otherwise the ranks 0..max found, so a gap still shows. Plus these problems: bad
`dump.json`, `proc{pid}` folders, `step_unknown`, a training-tool config whose `step` is not `[]`, a
missing dispatch log, and what the pid folders' logs say (`processes`): logged steps without their
folders and the reverse, a restart (several pids for one rank, one after another) as opposed to
rollout replicas (at the same time: a note, not a problem), a request id logged in several steps,
and a folder written by an earlier dispatch logger (step folders at the root).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from rlpatch.dumps.correlate import layout_notes
from rlpatch.dumps.layout import StepDir, Tree, scan
from rlpatch.dumps.processes import process_findings
from rlpatch.dumps.scoping import rows_summary, scoped_request, scoping_problems
from rlpatch.errors import InputError
from rlpatch.msprobe_config.api import references
from rlpatch.shell.api import NEWEST_VERL, ROLLOUT, Run, script_runs

MODES = ("training", "inference", "consistency")


@dataclass
class Expectation:
    """What the launch script says the folder should hold (None: not known)."""

    mode: str | None = None
    ranks: list[int] | None = None
    steps: list[int] | None = None  # the config's step list when it names steps
    config_step_set: bool = False  # a training-tool config whose step is not []
    config_path: str | None = None


@dataclass
class StepReport:
    step: int | str
    stage: str | None
    ranks: list = field(default_factory=list)
    expected_ranks: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"step": self.step, "stage": self.stage, "ranks": self.ranks, "expected_ranks": self.expected_ranks,
                "problems": self.problems}


# ---- the launch script -----------------------------------------------------------------------------
def expectation_from_script(path: str, mode: str | None, side: str) -> Expectation:
    """Read `path` with the front end; `side` is "training" or "inference" (which config applies)."""
    runs = script_runs(path, NEWEST_VERL, mode=mode).runs
    if not runs:
        raise InputError(f"{path}: no verl launch found in the script")
    run = runs[0]
    found = Expectation(mode=mode or (run.mode if run.mode != "none" else None))
    if side == "training":
        found.ranks = _range(run.world_size())
    else:
        found.ranks = _range(run.setting(f"{ROLLOUT}.tensor_model_parallel_size").as_int())
    config = _config_reference(run, side)
    if config is not None:
        _apply_config(found, _resolve(config, path), side == "training" and run.training_tool)
    return found


def _range(size: int | None) -> list[int] | None:
    return None if size is None or size <= 0 else list(range(size))


def _config_reference(run: Run, side: str) -> str | None:
    """The msprobe config the run names for `side`: verl's precision_debugger config_path, else
    MSPROBE_ACTOR_CONFIG (training); the first inference dump override (inference)."""
    for reference in references(run):
        if side == "training" and reference.role in ("training", "actor"):
            return reference.text
        if side != "training" and reference.role == "inference" and not reference.from_env:
            return reference.text
    return None


def _resolve(config: str, script: str) -> str:
    return config if os.path.isabs(config) else os.path.join(os.path.dirname(os.path.abspath(script)), config)


def _apply_config(found: Expectation, path: str, training_tool: bool) -> None:
    """The config's rank and step filters (a config not on this machine adds nothing)."""
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return
    if not isinstance(config, dict):
        return
    found.config_path = path
    ranks, steps = _int_list(config.get("rank")), _int_list(config.get("step"))
    if ranks and found.ranks is not None:
        wanted = set(ranks)
        found.ranks = [rank for rank in found.ranks if rank in wanted]
    elif ranks:
        found.ranks = ranks
    if training_tool:
        found.config_step_set = bool(config.get("step"))
    elif steps:
        found.steps = steps


def _int_list(value) -> list[int]:
    """msprobe's list form: ints and "N" / "A-B" strings."""
    if not isinstance(value, list):
        return []
    result: list[int] = []
    for item in value:
        if isinstance(item, int) and not isinstance(item, bool):
            result.append(item)
        elif isinstance(item, str):
            low, _, high = item.partition("-")
            if low.strip().isdigit() and (not high or high.strip().isdigit()):
                result.extend(range(int(low), int(high or low) + 1))
    return sorted(set(result))


# ---- the folder ------------------------------------------------------------------------------------
def side_of(tree: Tree) -> str:
    return "training" if tree.layout in ("verl-training-tool", "engine-training") else "inference"


def detected_mode(tree: Tree) -> str:
    if tree.layout == "verl-training-tool":
        return "training"
    if tree.update_actor_logs or tree.dispatch_logs:
        return "consistency"
    return "inference"


def check(root: str, mode: str | None = None, script: str | None = None, msprobe_config: str | None = None) -> dict:
    tree = scan(root)
    expected = expectation_from_script(script, mode, side_of(tree)) if script else Expectation(mode=mode)
    mode = expected.mode or detected_mode(tree)
    problems: list[str] = []
    steps = [_step_report(key, group, expected) for key, group in _grouped(tree.steps).items()]
    problems.extend(_folder_problems(tree, mode, expected, {s.step for s in steps if s.stage is None}))
    notes, layout_problems = layout_notes(tree)
    processes = process_findings(tree)
    problems.extend(layout_problems + processes.problems)
    scoping_config = msprobe_config or (expected.config_path if side_of(tree) == "inference" else None)
    request_id = scoped_request(scoping_config) if scoping_config else None
    if request_id is not None:
        problems.extend(scoping_problems(tree, request_id))
    rows, rows_note = rows_summary(tree)
    return {"mode": mode, "root": root, "steps": [s.as_json() for s in steps], "problems": problems,
            "notes": notes + processes.notes + ([rows_note] if rows_note else []),
            **({"rows": rows} if rows else {})}


def _grouped(steps: list[StepDir]) -> dict[tuple, list[StepDir]]:
    """Steps merged across pid folders (each worker of a TP group writes its own pid folder)."""
    groups: dict[tuple, list[StepDir]] = {}
    for step in steps:
        key = (step.global_step, step.stage, step.step)
        groups.setdefault(key, []).append(step)
    return groups


def _step_report(key: tuple, group: list[StepDir], expected: Expectation) -> StepReport:
    global_step, stage, step = key
    report = StepReport(step if global_step is None else global_step, stage)
    if global_step is not None:
        report.stage = stage if step == 0 else f"{stage}/step{step}"
    ranks: set[int] = set()
    procs: list[str] = []
    for folder in group:
        for rank in folder.ranks:
            if rank.rank is None:
                procs.append(rank.name)
                report.problems.append(f"{rank.name}: no distributed rank known (msprobe ran without "
                                       "torch.distributed): pair it through the logs' pid")
            else:
                ranks.add(rank.rank)
            if rank.problem:
                report.problems.append(f"{rank.path}: {rank.problem}")
        if not folder.ranks:
            report.problems.append(f"{folder.path}: no rank or proc folder")
    report.ranks = sorted(ranks) + sorted(procs)
    if global_step == "unknown":
        report.problems.append("step_unknown: verl did not know the global step (dump taken outside a training step)")
    report.expected_ranks = expected.ranks if expected.ranks is not None else list(range(max(ranks) + 1 if ranks else 0))
    if procs and expected.ranks is not None and len(procs) >= len(expected.ranks):
        return report  # proc folders stand for the ranks: nothing more to count
    expected_set = set(report.expected_ranks)  # sets: 10^5 rank folders must not cost 10^10 comparisons
    missing = [rank for rank in report.expected_ranks if rank not in ranks]
    extra = sorted(rank for rank in ranks if rank not in expected_set)
    if missing and not (procs and not ranks):
        report.problems.append(f"missing rank folders: {_rank_names(missing)}")
    if extra:
        report.problems.append(f"rank folders outside the run: {_rank_names(extra)}")
    return report


def _rank_names(ranks: list[int]) -> str:
    """`rank1, rank5`, runs of three or more folded (`rank8-rank1023`): 10^5 missing ranks stay one short line."""
    parts, start = [], 0
    while start < len(ranks):
        end = start
        while end + 1 < len(ranks) and ranks[end + 1] == ranks[end] + 1:
            end += 1
        if end - start >= 2:
            parts.append(f"rank{ranks[start]}-rank{ranks[end]}")
        else:
            parts.extend(f"rank{rank}" for rank in ranks[start:end + 1])
        start = end + 1
    return ", ".join(parts)


def _folder_problems(tree: Tree, mode: str, expected: Expectation, steps_seen: set) -> list[str]:
    problems: list[str] = []
    if expected.config_step_set:
        problems.append(f"{expected.config_path}: training mode with a non-empty step list: verl's "
                        "global_profiler.steps chooses the steps, msprobe then dumps nothing")
    if mode == "training" and tree.layout != "verl-training-tool" and not tree.update_actor_logs:
        problems.append(f"{tree.root}: training mode, but no step_{{G}}/{{stage}}/step0/rank{{R}} folders of verl's tool")
    if mode == "consistency" and not tree.update_actor_logs and not tree.dispatch_logs:
        problems.append(f"{tree.root}: no dispatch_log.jsonl or update_actor_log.jsonl: no correlation possible")
    if expected.steps:
        absent = [s for s in expected.steps if s not in steps_seen]
        if absent:
            problems.append(f"steps named in the config but not dumped: {', '.join(f'step{s}' for s in absent)}")
    return problems


def has_problems(report: dict) -> bool:
    return bool(report["problems"]) or any(step["problems"] for step in report["steps"])
