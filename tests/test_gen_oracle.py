"""The gen oracle (issue 28's proof): for every gen fixture x mode x released verl, what the generated
script really hands verl satisfies the alignment rules, or gen refused in one line that names the way out.

Nothing here asks gen's own model of the run. The generated script runs under bash with a sealed
PATH (recording stand-ins for python3/python/uv/ray/torchrun, a few plain shell tools, nothing that
can start a job), HOME a fresh folder; the argv the stand-in records is composed by Hydra itself on
the released wheel's config tree, from the `@hydra.main` of the module the script runs; the checks
read the composed config and the environment the launch really had. When gen asks for a value it
cannot know (`give --env NAME=VALUE`) the test answers as a user on one 8-card Ascend node would.

A fixture whose *original* does not compose on a release is not that release's shape (e.g. 0.5.0
has no `model_engine` key): gen must not call that a clean script (exit != 0), and nothing more is
asked of it there.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, Result, run_cli
from gen_harness import Received, compose_real, run_with_stand_ins

pytestmark = pytest.mark.upstream

VERSIONS = ("0.5.0", "0.8.0", "0.9.1")  # releases the upstream tests already cache
MODES = ("training", "inference", "consistency")
FIXTURE_FOLDERS = ("gen", "gen_shapes")
# Fixtures that are not a launch shape (bad inputs, tested for their message in test_gen*.py).
NOT_SHAPES = {"no_launch": "runs no verl entry at all"}
# What a user on one node of 8 Ascend cards answers when gen asks `give --env NAME=VALUE`.
ENV_ANSWERS = {"DEVICE": "npu", "NGPUS": "8", "NGPUS_PER_NODE": "8", "NPUS_PER_NODE": "8", "NNODES": "1"}
# A refusal names its way out: an override or option to give, a value to drop or set, a version or
# mode to use instead (gen's own words for it).
NEXT_STEP = re.compile(r"\bgive\b|\buse\b|\bdrop\b|\bset\b|\bremove\b|\bpass\b|--[a-z]|\bneeds verl >=|"
                       r"\broll out with\b|\binference mode\b|\btraining mode\b")
ASKED_ENV = re.compile(r"give --env ([A-Za-z_][A-Za-z0-9_]*)=VALUE")
# Only the prefill is compared in consistency mode (gen consistency bounds the response to one token).
MAX_RESPONSE_TOKENS = 1
AR = "actor_rollout_ref"
ROLLOUT, ACTOR, REF = f"{AR}.rollout", f"{AR}.actor", f"{AR}.ref"
VLLM_DUMP_KEYS = (f"{ROLLOUT}.engine_kwargs.vllm.additional_config.dump_config_path",
                  f"{ROLLOUT}.engine_kwargs.vllm.additional_config.dump_config")
SGLANG_DUMP_KEY = f"{ROLLOUT}.engine_kwargs.sglang.msprobe_dump_config"
RUNTIME_ENV = "ray_kwargs.ray_init.runtime_env.env_vars"


def _fixtures() -> list[tuple[str, str]]:
    found = []
    for folder in FIXTURE_FOLDERS:
        found += [(folder, path.stem) for path in sorted((FIXTURES / folder).glob("*.sh")) if path.stem not in NOT_SHAPES]
    return found


CASES = [(folder, stem, mode, verl) for folder, stem in _fixtures() for mode in MODES for verl in VERSIONS]
# Real gen bugs this oracle found on main, each strict (fixed in gen => the xfail fails, drop it here).
# (nproc_cards consistency, `NGPUS=$(nproc)` recomputed after gen's export, was one: gen now writes
# trainer.n_gpus_per_node itself.)
KNOWN_BUGS: dict[tuple[str, str, str], str] = {}


def _params() -> list[Any]:
    params = []
    for folder, stem, mode, verl in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[(stem, mode, verl)])] \
            if (stem, mode, verl) in KNOWN_BUGS else []
        params.append(pytest.param(folder, stem, mode, verl, marks=marks, id=f"{stem}-{mode}-{verl}"))
    return params


@dataclass
class Generated:
    result: Result
    answers: dict[str, str]  # the --env values given because gen asked for them


def _gen(script: Path, mode: str, verl: str) -> Generated:
    """`rlpatch gen`, answering each `give --env NAME=VALUE` it asks for (as its message says to)."""
    answers: dict[str, str] = {}
    while True:
        options = [item for name, value in answers.items() for item in ("--env", f"{name}={value}")]
        result = run_cli("gen", mode, str(script), "--verl-version", verl, *options)
        asked = ASKED_ENV.search(result.stderr) if result.exit_code == 2 else None
        if asked is None or asked.group(1) in answers:
            return Generated(result, answers)
        name = asked.group(1)
        assert name in ENV_ANSWERS, f"gen asks for --env {name}: add the answer to ENV_ANSWERS"
        answers[name] = ENV_ANSWERS[name]


@pytest.mark.parametrize("folder,stem,mode,verl", _params())
def test_generated_script_composes_and_keeps_the_alignment(tmp_path: Path, folder: str, stem: str, mode: str,
                                                            verl: str) -> None:
    scripts = tmp_path / "scripts"
    shutil.copytree(FIXTURES / folder, scripts)  # siblings too: a launch may run `bash other.sh`
    before = sorted(p.name for p in scripts.iterdir())
    generated = _gen(scripts / f"{stem}.sh", mode, verl)
    result = generated.result
    if result.exit_code == 2:
        _assert_refusal_names_the_fix(result)
        assert sorted(p.name for p in scripts.iterdir()) == before, "a refusal wrote files"
        return
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    new = scripts / f"{stem}.{mode}-dump.sh"
    assert new.is_file(), result.stdout
    calls = run_with_stand_ins(new, tmp_path / "run", sealed=True)
    assert calls, "the generated script started no verl entry"
    originals = run_with_stand_ins(scripts / f"{stem}.sh", tmp_path / "run", sealed=True,
                                   env=generated.answers)
    composed = [_compose_or_none(verl, call) for call in calls]
    if any(config is None for config in composed) and not _original_composes(verl, originals):
        # not this release's shape: gen must not call the script clean, and nothing more is asked here
        assert result.exit_code != 0, f"the original does not compose on verl {verl}, yet gen reports no error"
        return
    problems: list[str] = []
    for call, config in zip(calls, composed, strict=True):
        if config is None:
            problems.append(_compose_error(verl, call))
            continue
        problems += _answers_hold(call, config, generated.answers, new.read_text())
        problems += _check(mode, config, call, originals, (scripts / f"{stem}.{mode}-dumps").resolve())
    assert problems == [], "\n".join(problems)


# ---- refusals -------------------------------------------------------------------------------------------
def _assert_refusal_names_the_fix(result: Result) -> None:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlpatch: error: "), result.stderr
    assert "Traceback" not in result.stderr
    assert NEXT_STEP.search(lines[0]), f"the refusal names no next step: {lines[0]}"


# ---- composing what verl receives -----------------------------------------------------------------------
def _compose_or_none(verl: str, call: Received):
    try:
        return compose_real(verl, call.hydra_args, call.entry)
    except Exception:  # noqa: BLE001 - a missing entry module, or any Hydra/OmegaConf error: verl would not start
        return None


def _compose_error(verl: str, call: Received) -> str:
    try:
        compose_real(verl, call.hydra_args, call.entry)
    except Exception as error:  # noqa: BLE001 - the message is the finding
        return f"does not compose on verl {verl} ({call.entry}): {type(error).__name__}: {error}"
    return "composes on a second try (flaky Hydra state?)"


def _original_composes(verl: str, originals: list[Received]) -> bool:
    return bool(originals) and all(_compose_or_none(verl, call) is not None for call in originals)


# ---- the checks, on the composed config -----------------------------------------------------------------
def _select(config, key: str) -> Any:
    from omegaconf import OmegaConf

    try:
        return OmegaConf.select(config, key, default=None, throw_on_missing=False)
    except Exception:  # noqa: BLE001 - an interpolation verl resolves at run time: unknown here
        return None


def _check(mode: str, config, call: Received, originals: list[Received], dump_root: Path) -> list[str]:
    problems = _bounded(config)
    problems += _env_reaches_workers(config, call, originals)
    if mode == "training":
        problems += _training_dump(config, dump_root)
    else:
        problems += _inference_dump(config, call, dump_root)
        if _select(config, f"{ROLLOUT}.enforce_eager") is not True:
            problems.append(f"{ROLLOUT}.enforce_eager is {_select(config, f'{ROLLOUT}.enforce_eager')!r}, not True")
    if mode == "consistency":
        problems += _training_side(config, call, dump_root) + _alignment(config)
    return problems


# gen's override for a key whose --env value the script would recompute (`NGPUS=$(nproc)` after the export)
PINNED = re.compile(r"^\s*([\w.]+)=(\S+)\s+# the script sets (\w+)=", re.M)


def _answers_hold(call: Received, config, answers: dict[str, str], new_text: str) -> list[str]:
    """What gen checked is what runs: each `--env` value its arithmetic used is the one the launch sees,
    or, for a variable the script computes itself, gen wrote the keys it gives and the composed config
    has gen's values."""
    problems, pinned = [], set()
    for key, value, name in PINNED.findall(new_text):
        pinned.add(name)
        if str(_select(config, key)) != value:
            problems.append(f"gen pinned {key}={value} for --env {name}; the composed config has {_select(config, key)!r}")
    problems += [f"gen relied on --env {name}={value}; the launch sees {name}={call.env.get(name)!r}"
                 for name, value in answers.items() if name not in pinned and call.env.get(name) != value]
    return problems


def _bounded(config) -> list[str]:
    steps = _select(config, "trainer.total_training_steps")
    if not isinstance(steps, int) or steps < 1:
        return [f"trainer.total_training_steps is {steps!r}: the job is not bounded"]
    return []


def _config_file(path: Any, what: str, dump_root: Path, *, has_dump_path: bool = True) -> list[str]:
    if not isinstance(path, str) or not Path(path).is_absolute() or not Path(path).is_file():
        return [f"{what}: {path!r} is not an existing absolute file"]
    content = json.loads(Path(path).read_text())
    if not has_dump_path:
        return []
    return _inside(content.get("dump_path"), f"{what} dump_path", dump_root)


def _inside(path: Any, what: str, dump_root: Path) -> list[str]:
    if not isinstance(path, str) or not Path(path).resolve().is_relative_to(dump_root):
        return [f"{what} {path!r} is not inside the dump folder {dump_root}"]
    return []


def _training_dump(config, dump_root: Path) -> list[str]:
    problems = []
    tool = _select(config, "global_profiler.tool")
    if tool != "precision_debugger":
        problems.append(f"global_profiler.tool is {tool!r}")
    problems += _config_file(_select(config, "global_profiler.global_tool_config.precision_debugger.config_path"),
                             "precision_debugger config_path", dump_root, has_dump_path=False)
    problems += _inside(_select(config, "global_profiler.save_path"), "global_profiler.save_path", dump_root)
    steps = _select(config, "global_profiler.steps")
    if not steps:
        problems.append(f"global_profiler.steps is {steps!r}: nothing is dumped")
    elif max(steps) > (_select(config, "trainer.total_training_steps") or 0):
        problems.append(f"global_profiler.steps {list(steps)} outlast trainer.total_training_steps")
    if _select(config, f"{ACTOR}.profiler.enable") is not True:
        problems.append(f"{ACTOR}.profiler.enable is not True: the actor's stages dump nothing")
    return problems


def _inference_dump(config, call: Received, dump_root: Path) -> list[str]:
    name = _select(config, f"{ROLLOUT}.name")
    if name == "sglang":
        found = {SGLANG_DUMP_KEY: _select(config, SGLANG_DUMP_KEY)}
        found.update({k: v for k, v in call.env.items() if k.startswith("MSPROBE_SGLANG_CONFIG")})
    else:
        found = {key: _select(config, key) for key in VLLM_DUMP_KEYS}
    given = {key: value for key, value in found.items() if value is not None}
    if len(given) != 1:
        return [f"the {name} rollout gets {len(given)} msprobe configs ({sorted(given)}), not one"]
    [(key, path)] = given.items()
    return _config_file(path, key, dump_root)


def _training_side(config, call: Received, dump_root: Path) -> list[str]:
    problems = _config_file(call.env.get("MSPROBE_ACTOR_CONFIG"), "env MSPROBE_ACTOR_CONFIG", dump_root)
    if call.env.get("DUMP_ON") != "1":
        problems.append(f"env DUMP_ON is {call.env.get('DUMP_ON')!r}: the engine patch dumps nothing")
    return problems


def _env_reaches_workers(config, call: Received, originals: list[Received]) -> list[str]:
    """On more than one node the exported switches reach the workers only through Ray's runtime env."""
    nodes = _select(config, "trainer.nnodes")
    if not isinstance(nodes, int) or nodes < 2:
        return []
    before = originals[0].env if originals else {}
    added = {name for name, value in call.env.items() if before.get(name) != value and name not in ("_", "OLDPWD")}
    carried = _select(config, RUNTIME_ENV) or {}
    missing = sorted(name for name in added if name not in carried)
    return [f"{nodes} nodes: {missing} exported but not in {RUNTIME_ENV}"] if missing else []


def _alignment(config) -> list[str]:
    """What the consistency pairing needs of the layout, on the values the run really has."""
    world = (_select(config, "trainer.n_gpus_per_node") or 0) * (_select(config, "trainer.nnodes") or 0)
    rollout_tp = _select(config, f"{ROLLOUT}.tensor_model_parallel_size") or 1
    problems = []
    if world < 1 or world % rollout_tp:
        problems.append(f"rollout TP {rollout_tp} does not divide the world size {world}")
    if _select(config, f"{ACTOR}.strategy") == "megatron":
        problems += _megatron_alignment(config, world, rollout_tp)
        megatron = f"{ACTOR}.megatron"
        model_parallel = (_select(config, f"{megatron}.tensor_model_parallel_size") or 1) * \
            (_select(config, f"{megatron}.pipeline_model_parallel_size") or 1) * \
            (_select(config, f"{megatron}.context_parallel_size") or 1)
        dp = world // model_parallel if world % model_parallel == 0 else 0
        minimal = dp * (_select(config, f"{ACTOR}.ppo_micro_batch_size_per_gpu") or 1)
    else:
        for role in (ACTOR, REF):
            for key in (f"{role}.ulysses_sequence_parallel_size", f"{role}.fsdp_config.ulysses_sequence_parallel_size"):
                if _select(config, key) not in (None, 1):
                    problems.append(f"{key} is {_select(config, key)}: Ulysses SP splits the prompt")
        dp = minimal = world
    problems += _batch(config, dp, minimal)
    for key in ("data.max_response_length", f"{ROLLOUT}.response_length"):
        value = _select(config, key)
        if value is not None and (not isinstance(value, int) or value > MAX_RESPONSE_TOKENS):
            problems.append(f"{key} is {value!r}: more than the prefill is generated (and dumped)")
    if (_select(config, f"{ROLLOUT}.pipeline_model_parallel_size") or 1) != 1:
        problems.append(f"{ROLLOUT}.pipeline_model_parallel_size is not 1 (verl: NotImplementedError)")
    return problems


def _megatron_alignment(config, world: int, rollout_tp: int) -> list[str]:
    problems = []
    for role in (ACTOR, REF):
        megatron = f"{role}.megatron"
        tp = _select(config, f"{megatron}.tensor_model_parallel_size")
        pp = _select(config, f"{megatron}.pipeline_model_parallel_size")
        cp = _select(config, f"{megatron}.context_parallel_size") or 1
        vpp = _select(config, f"{megatron}.virtual_pipeline_model_parallel_size")
        if tp != rollout_tp:
            problems.append(f"{megatron}.tensor_model_parallel_size {tp} != rollout TP {rollout_tp}")
        if pp != 1 or cp != 1 or vpp is not None:
            problems.append(f"{megatron}: PP {pp}, CP {cp}, VPP {vpp}; the pairing needs PP 1, CP 1, no VPP")
        if isinstance(tp, int) and isinstance(pp, int) and world % (tp * pp * cp):
            problems.append(f"{megatron}: world {world} not divisible by TP*PP*CP = {tp}*{pp}*{cp}")
    return problems


def _batch(config, dp: int, minimal: int) -> list[str]:
    """verl's validate_config batch arithmetic (without dynamic batch size) and the workers' mini-batch split."""
    if dp < 1:  # the layout does not divide the world: reported already
        return []
    batch = _select(config, "data.train_batch_size") or 0
    n = _select(config, f"{ROLLOUT}.n") or 1
    mini = _select(config, f"{ACTOR}.ppo_mini_batch_size") or 0
    problems = []
    if not _select(config, f"{ACTOR}.use_dynamic_bsz") and (batch * n) % minimal:
        problems.append(f"train_batch_size*rollout.n = {batch}*{n} not divisible by the minimal batch {minimal}")
    if batch < mini:
        problems.append(f"data.train_batch_size {batch} < actor.ppo_mini_batch_size {mini}")
    if mini * n < dp:
        problems.append(f"ppo_mini_batch_size*rollout.n = {mini}*{n} leaves a DP rank ({dp} ranks) without a sample")
    return problems


# ---- the oracle has teeth -------------------------------------------------------------------------------
# (fixture folder, stem, edits of gen's script: old -> new, the problems the oracle must then report)
BROKEN = [
    ("gen_shapes", "megatron_lora_cp", {
        f"{ACTOR}.megatron.context_parallel_size=1": f"{ACTOR}.megatron.context_parallel_size=2",
        f"{ROLLOUT}.enforce_eager=True": f"{ROLLOUT}.enforce_eager=False",
        "trainer.total_training_steps=1": "trainer.total_epochs=1",
        "export MSPROBE_ACTOR_CONFIG=": "MSPROBE_ACTOR_CONFIG=",
        "data.max_response_length=1 ": "data.max_response_length=64 ",
    }, ["PP 1, CP 2", "enforce_eager is False", "total_training_steps is None", "env MSPROBE_ACTOR_CONFIG: None",
        "data.max_response_length is 64"]),
    ("gen_shapes", "fsdp_tp8_big_batch", {
        f"{ACTOR}.ulysses_sequence_parallel_size=1": f"{ACTOR}.ulysses_sequence_parallel_size=8",
        "-dumps/infer": "-elsewhere/infer",
    }, [f"{ACTOR}.ulysses_sequence_parallel_size is 8", "is not inside the dump folder"]),
]


@pytest.mark.parametrize("folder,stem,edits,reported", BROKEN, ids=[case[1] for case in BROKEN])
def test_a_script_that_breaks_the_alignment_is_reported(tmp_path: Path, folder: str, stem: str,
                                                       edits: dict[str, str], reported: list[str]) -> None:
    scripts = tmp_path / "scripts"
    shutil.copytree(FIXTURES / folder, scripts)
    assert run_cli("gen", "consistency", str(scripts / f"{stem}.sh"), "--verl-version", "0.9.1").exit_code in (0, 1)
    new = scripts / f"{stem}.consistency-dump.sh"
    written = [new, *scripts.glob(f"{stem}.consistency-dump.msprobe-*.json")]  # the script and its configs
    texts = {path: path.read_text() for path in written}
    for old, replacement in edits.items():
        assert any(old in text for text in texts.values()), old
        texts = {path: text.replace(old, replacement) for path, text in texts.items()}
    for path, text in texts.items():
        path.write_text(text)
    [call] = run_with_stand_ins(new, tmp_path / "run", sealed=True)
    problems = "\n".join(_check("consistency", compose_real("0.9.1", call.hydra_args, call.entry), call, [],
                                (scripts / f"{stem}.consistency-dumps").resolve()))
    for expected in reported:
        assert expected in problems, problems


def test_a_refusal_without_a_next_step_is_reported() -> None:
    with pytest.raises(AssertionError, match="names no next step"):
        _assert_refusal_names_the_fix(Result(2, "", "rlpatch: error: the world size is 6\n"))
    with pytest.raises(AssertionError):
        _assert_refusal_names_the_fix(Result(2, "", "rlpatch: error: give x=1\nTraceback (most recent call last)\n"))
    _assert_refusal_names_the_fix(Result(2, "", "rlpatch: error: world 6 not divisible by TP 4: give x=2\n"))
