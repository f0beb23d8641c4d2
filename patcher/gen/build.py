"""From the original script and the plan to the new script's text (and back, to check it).

`generate` evaluates the original with the front end, plans each launch (every path of the script
must agree on what gen adds), chooses plain or `++` per key against that verl version's composed
config, writes the block and the launch word (`place`), and evaluates the *result* to prove that
every launch now ends with gen's overrides and sees gen's environment.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field

from rlpatch import __version__
from rlpatch.errors import InputError
from rlpatch.gen import place
from rlpatch.gen.consistency import plan_consistency
from rlpatch.gen.modes import RUNTIME_ENV_VARS, Request, plan_inference, plan_training
from rlpatch.gen.plan import Facts, NeedValue, Plan, Planned, Targets, branch_choosers
from rlpatch.lint import api as linter
from rlpatch.shell.api import (
    OWN_TRAINER,
    Arg,
    Options,
    Piece,
    Run,
    ScriptRuns,
    SourceFile,
    Span,
    evaluate_source,
    parse_override,
    script_runs,
    word_text,
)

DIR_LINE = 'RLPATCH_GEN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"'


@dataclass
class Generated:
    text: str
    plan: Plan
    run: Run  # one launch of the original (for backends and the summary)
    notes: list[str] = field(default_factory=list)


def _plan_for(run: Run, request: Request, env: dict[str, str], folder: str, extra: dict[str, str]) -> Plan:
    facts = Facts(run, env)
    if request.mode == "training":
        plan = plan_training(facts, request, folder)
    elif request.mode == "inference":
        plan = plan_inference(facts, request, folder)
    else:
        plan = plan_consistency(facts, request, folder, extra)
    _pin_recomputed(plan, facts)
    return plan


def _pin_recomputed(plan: Plan, facts: Facts) -> None:
    """What gen checks is what runs: a value gen took from `--env NAME=V` for a variable the script
    computes itself (`NGPUS=$(nproc)`) would be recomputed after the new script's `export NAME=V`,
    so the key is written as an override with that value."""
    written = {o.key for o in plan.overrides}
    for key, (value, name, desc) in facts.recomputed.items():
        if key not in written:
            plan.add(key, value, f"the script sets {name}={desc} at run time, after the export of --env {name}: "
                     "the value gen's checks used, written so that the run has it")


def _need_message(need: NeedValue, env: dict[str, str]) -> str:
    names = need.names or ["VAR"]
    choosers = branch_choosers(need.span.file, need.names, env)
    if choosers:  # a variable set in a branch: ask for the one that chooses the branch (DEVICE), not the derived one
        asks = " ".join(f"--env {name}=VALUE" for name in choosers)
        return (f"{need.key} is not known statically ({need.desc} at {need.span}): it is set in a branch chosen by "
                f"{', '.join(choosers)}, which the script computes at run time: give {asks}")
    return (f"{need.key} is not known statically ({need.desc} at {need.span}) and gen needs it: give "
            f"--env {names[0]}=VALUE" + (f" (it comes from {', '.join(names[1:])})" if len(names) > 1 else ""))


def plan_script(script: ScriptRuns, request: Request, env: dict[str, str], folder: str,
                extra: dict[str, str]) -> tuple[Plan, Run]:
    source, runs = script.source, script.runs
    if not runs:
        raise InputError(f"{source.path}: no verl entry point found (python3 -m verl.trainer.main_ppo ...)")
    plans = []
    for run in runs:
        try:
            plans.append(_plan_for(run, request, env, folder, extra))
        except NeedValue as need:
            raise InputError(_need_message(need, env)) from None
    merged = plans[0]
    choosers = branch_choosers(source.path, None, env)
    for plan, run in zip(plans[1:], runs[1:], strict=False):
        _merge(merged, plan, runs[0], run, choosers)
    merged.assumptions.extend(f"{name}={value} (--env): the values below hold where the script's {name} is "
                              f"{value}" for name, value in env.items())
    return merged, runs[0]


def _choose_hint(choosers: list[str]) -> str:
    if not choosers:
        return "give the variables that choose the path with --env"
    return (f"the branch is chosen by {', '.join(choosers)}: give " + " ".join(f"--env {n}=VALUE" for n in choosers))


def _merge(into: Plan, other: Plan, run_a: Run, run_b: Run, choosers: list[str]) -> None:
    """One script serves every path: a key neutralised on one path only is written for all (harmless:
    null or the same value); the same key with two different values cannot be, and is an error."""
    mine = {o.key: o for o in into.overrides}
    for override in other.overrides:
        known = mine.get(override.key)
        if known is None:
            into.overrides.append(override)
        elif known.value != override.value:
            raise InputError(f"the script's paths disagree on {override.key} ({known.value} vs {override.value}, "
                             f"launches at {run_a.launch.command_span} and {run_b.launch.command_span}): "
                             + _choose_hint(choosers))
    names = {e.name: e for e in into.env}
    for switch in other.env:
        if switch.name not in names:
            into.env.append(switch)
        elif names[switch.name].value != switch.value:
            raise InputError(f"the script's paths need {switch.name}={names[switch.name].value} and "
                             f"{switch.name}={switch.value}: " + _choose_hint(choosers))
    into.notes.extend(note for note in other.notes if note not in into.notes)
    into.assumptions.extend(a for a in other.assumptions if a not in into.assumptions)
    into.dumps.extend(where for where in other.dumps if where not in into.dumps)
    into.dump_dirs = {**other.dump_dirs, **into.dump_dirs}
    into.configs.extend(c for c in other.configs if c.name not in {k.name for k in into.configs})


# ---- prefixes and the Ray runtime env --------------------------------------------------------------------
def choose_prefixes(plan: Plan, run: Run, lint_options, notes: list[str]) -> None:
    """Plain for keys the composed schema has, `++` for free-form dicts; a key this verl version
    does not have is left out (said so) rather than created with `++`."""
    groups = [o.text for o in run.overrides if o.key == "model_engine" and o.value_known and o.prefix == ""]
    schema, why = linter.schema_of(lint_options, run.config_name, groups, run.config_dir,
                                   os.path.dirname(os.path.abspath(run.file)), run.launch.entry)
    if schema is None:
        notes.append(f"no verl config to compose ({why}): plain overrides written without a schema check")
    kept = []
    for override in plan.overrides:
        if override.free_form or override.key.startswith("ray_kwargs."):
            override.prefix = "++"
        elif schema is not None and not schema.has(override.key):
            notes.append(f"{override.key}: not in verl {schema.version or ''} config, not written")
            continue
        kept.append(override)
    plan.overrides = kept


def add_runtime_env(plan: Plan, run: Run) -> None:
    """Env switches also go into Ray's runtime env when exports cannot reach every worker."""
    pre_started = run.has("ray_kwargs.ray_init.address") or "RAY_ADDRESS" in run.env
    if run.env_reaches_workers() is not False and not pre_started:
        return
    for switch in plan.env:
        shell = None if switch.shell_value is None else '"\\"' + switch.shell_value.strip('"') + '\\""'
        plan.overrides.append(Planned(f"{RUNTIME_ENV_VARS}.{switch.name}", json.dumps(switch.value),
                                      "exports do not reach Ray workers on other nodes / a submitted job",
                                      prefix="++", free_form=True, shell_value=shell))


# ---- the text ----------------------------------------------------------------------------------------------
def _word(override: Planned) -> str:
    head = f"{override.prefix}{override.key}="
    if override.shell_value is not None:
        return head + override.shell_value
    return head + shlex.quote(override.value)


def block_text(plan: Plan, request: Request, original: str, targets: Targets, extra: list[str],
               given_env: dict[str, str] | None = None) -> str:
    assumed = " (assumed: the newest release; give --verl-version, --verl-root or --python)" if targets.verl_assumed else ""
    lines = [
        f"# ---- rlpatch gen ({__version__}): {request.mode}-mode msprobe collection script ----",
        f"# original: {original} (unchanged; diff the two files to see every change gen made)",
        f"# versions: verl {targets.verl}{assumed}; {_backend_versions(targets)}",
        *(f"# assumed: {assumption}" for assumption in plan.assumptions),
        f"{DIR_LINE}  # the configs live beside this script",
    ]
    for name, given in (given_env or {}).items():  # what gen checked is what runs: `${NAME:-default}` reads it
        lines.append(f"export {name}={shlex.quote(given)}  # --env {name}: the value gen's checks used")
    for switch in plan.env:
        value = switch.shell_value if switch.shell_value is not None else shlex.quote(switch.value)
        lines.append(f"export {switch.name}={value}  # {switch.why}")
    lines.append("# appended as the last arguments of the verl command below (the last value of a key wins)")
    lines.append(f"{place.ARRAY}=(")
    for override in plan.overrides:
        replaced = f" (was {override.replaces})" if override.replaces is not None else ""
        lines.append(f"    {_word(override)}  # {override.why}{replaced}")
    for text in extra:
        lines.append(f"    {shlex.quote(text)}  # given to rlpatch gen after --")
    lines.append(")")
    lines.append("# ---- end of rlpatch gen ----")
    return "\n".join(lines) + "\n"


def _backend_versions(targets: Targets) -> str:
    sglang = f"SGLang {targets.sglang}" if targets.sglang else "SGLang >= 0.5.11 (assumed)"
    vllm = f"vLLM-Ascend {targets.vllm_ascend}" if targets.vllm_ascend else "vLLM-Ascend >= 0.13 (assumed)"
    return f"{vllm}; {sglang}"


def generate(script: str, new_path: str, request: Request, targets: Targets, env: dict[str, str],
             extra: list[str], lint_options) -> Generated:
    original = script_runs(script, request.verl, env=env, verl_root=lint_options.verl_root)
    source, evaluation, parsed = original.source, original.evaluation, original.evaluation.parsed
    if place.written_by_gen(parsed):
        raise InputError(f"{script} was written by rlpatch gen: run gen on the original training script")
    if not targets.verl_assumed:
        refuse_entry(script, original.runs, request.mode)
    options = Options(env=dict(env))  # the same start, for evaluating the edited text
    folder = os.path.dirname(os.path.abspath(new_path))
    extra_values = {o.key: o.value for o in (_extra_override(text) for text in extra) if o is not None}
    plan, run = plan_script(original, request, env, folder, extra_values)
    notes = list(plan.notes)
    choose_prefixes(plan, run, lint_options, notes)
    add_runtime_env(plan, run)
    insertions = place.launch_insertions(source, parsed, evaluation, options)
    insertions += _env_prefixes(source, evaluation, plan, notes)
    block = block_text(plan, request, os.path.basename(script), targets, extra, env)
    insertions.append(place.Insertion(place.block_offset(source, parsed), block))
    text = place.apply(source.text, insertions)
    _prove(new_path, text, plan, extra, options)
    return Generated(text, plan, run, notes)


def refuse_entry(script: str, runs: list[Run], mode: str) -> None:
    """What the named verl's entry module rules out, gen refuses (nothing written): a module it does
    not have fails at start-up (lint's RL004); in consistency mode, a trainer class the module defines
    itself is one no rlpatch rule patches (lint's RL607), and `rlpatch apply` cannot change that."""
    for run in runs:
        entry, where = run.entry_check(), f"{script}:{run.entry_span.line}"
        if entry.exists is False:
            raise InputError(f"{where}: entry module {entry.missing_text()} (nothing written)")
        if mode == "consistency" and run.trainer()[0] == OWN_TRAINER:
            raise InputError(f"{where}: {entry.module} starts its own {entry.own_trainer} ({entry.file}, read from "
                             f"{entry.against}), which no rlpatch rule patches, so no consistency dump can pair: "
                             "launch verl.trainer.main_ppo instead, or use gen training or gen inference "
                             "(nothing written)")


def _env_prefixes(source: SourceFile, evaluation, plan: Plan, notes: list[str]) -> list[place.Insertion]:
    """A variable the script itself sets (after gen's exports) would win: for those, the switch also
    goes in front of the launch command as a `NAME=value` prefix, which wins over both."""
    prefixes: dict[int, list[str]] = {}
    for launch in evaluation.launches:
        start = place.command_start(source, launch)
        for switch in plan.env:
            value = launch.env.get(switch.name)
            if start is None or value is None or value.span is None or value.span.file != source.path:
                continue
            if word_text(value.first()) == switch.value:
                continue  # the script already sets what gen needs
            words = prefixes.setdefault(start, [])
            word = f"{switch.name}={switch.shell_value or shlex.quote(switch.value)}"
            if word not in words:
                words.append(word)
                notes.append(f"{switch.name} is set by the script itself (line {value.span.line}): also given as a "
                             f"prefix of the verl command")
    return [place.Insertion(offset, " ".join(words) + " ") for offset, words in prefixes.items()]


def _extra_override(text: str):
    origin = Span("<command line>", 1, 1, 1, 1)
    return parse_override(Arg((Piece(text, origin),), origin))


def _prove(new_path: str, text: str, plan: Plan, extra: list[str], options: Options) -> None:
    """Evaluate the new text: every launch must end with gen's overrides, and see gen's exports."""
    probe = SourceFile(os.path.abspath(new_path), text)
    evaluation = evaluate_source(probe, options)
    expected = [o.text for o in plan.overrides] + extra
    for launch in evaluation.launches:
        tail = [arg.text for arg in launch.args[-len(expected):]] if expected else []
        if expected and [_unquoted(t) for t in tail] != [_unquoted(t) for t in _expanded(expected, new_path)]:
            raise InputError(f"gen could not place its overrides at the end of the verl launch at "
                             f"{launch.command_span} (the launch cannot be located statically): nothing written")
        for switch in plan.env:
            value = launch.env.get(switch.name)
            value_text = None if value is None else word_text(value.first())
            if value is None or (value_text is not None and value_text != switch.value):
                raise InputError(f"{switch.name}={switch.value} does not reach the verl launch at {launch.command_span} "
                                 f"(the script sets {value_text!r}): nothing written")


def _expanded(texts: list[str], new_path: str) -> list[str]:
    folder = os.path.dirname(os.path.abspath(new_path))
    return [t.replace("${RLPATCH_GEN_DIR}", folder) for t in texts]


def _unquoted(text: str | None) -> str | None:
    return None if text is None else text.replace('"', "").replace("'", "")
