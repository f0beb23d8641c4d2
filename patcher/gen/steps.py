"""The commands gen prints after writing: before and during the run (apply, doctor, bash) and after it
(`rlpatch dumps check|pair|compare`), each runnable as printed."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from rlpatch.gen.build import Generated
from rlpatch.gen.plan import ApplyStep
from rlpatch.upstream.api import probe

_ROOT_OPTION = {"verl": "--verl-root", "vllm_ascend": "--vllm-ascend-root", "sglang": "--sglang-root"}
_PLACEHOLDER = {"verl": "VERL_ROOT", "vllm_ascend": "VLLM_ASCEND_ROOT", "sglang": "SGLANG_ROOT"}
_PROJECT = {"verl": "verl", "vllm_ascend": "vllm-ascend", "sglang": "sglang"}


@dataclass(frozen=True)
class NextSteps:
    before: list[str]  # before and during the run
    after: list[str]  # after it


def _command(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def apply_step(step: ApplyStep, roots: dict[str, str | None], python: str | None) -> tuple[str, list[str]]:
    """The apply command with every tree it patches, and what the user must fill in.

    `rlpatch apply` patches the given roots only, or (no root) every tree the `--python` interpreter
    imports; so a root gen does not know is taken from that interpreter, else left as a placeholder
    that the printed text says must be filled."""
    argv = ["rlpatch", "apply", "--mode", step.mode]
    given = {package: roots.get(package) for package in step.packages}
    if python and not any(given.values()):
        return _command(argv + ["--python", python]), []
    found = probe(python, tuple(_PROJECT[p] for p in step.packages)) if python else {}
    missing = []
    for package in step.packages:
        root = given[package]
        installed = found.get(_PROJECT[package])
        location = installed.location if installed is not None else None
        if root is None and location is not None:
            root = str(location.parent)
        if root is None:
            root = _PLACEHOLDER[package]
            missing.append(package)
        argv += [_ROOT_OPTION[package], root]
    fill = [f"fill in {_PLACEHOLDER[p]}: the folder holding {p}/ in the environment that runs verl (e.g. its "
            f"site-packages), or give gen {_ROOT_OPTION[p]} / --python" for p in missing]
    return _command(argv), fill


def next_steps(result: Generated, mode: str, new_path: str, roots: dict[str, str | None],
               python: str | None) -> NextSteps:
    steps = []
    if result.plan.apply is not None:
        line, fill = apply_step(result.plan.apply, roots, python)
        steps.append(line + "".join(f"\n     {text}" for text in fill))
        # verify checks every tree the apply patched (exit 1 when a rule is not in place, or none applies)
        steps.append(line.replace("rlpatch apply ", "rlpatch verify ", 1))
    doctor = ["rlpatch", "doctor", "--script", new_path, "--mode", mode]
    steps.append(_command(doctor + (["--python", python] if python else [])))
    steps.append(_command(["bash", new_path]))
    after = [_command(["rlpatch", "dumps", "check", where, "--mode", mode, "--script", new_path])
             for where in result.plan.dump_dirs.values()]
    dirs = result.plan.dump_dirs
    if mode == "consistency" and "train" in dirs and "infer" in dirs:
        backend = "megatron" if result.run.megatron else "fsdp"
        pair = ["--train", dirs["train"], "--infer", dirs["infer"], "--backend", backend]
        after.append(_command(["rlpatch", "dumps", "pair", *pair]))
        after.append(_command(["rlpatch", "dumps", "compare", *pair] + (["--python", python] if python else [])))
    return NextSteps(steps, after)
