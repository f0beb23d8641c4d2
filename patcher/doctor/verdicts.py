"""Doctor's verdicts: one line each, OK / WARN / FAIL, and what to do about it.

The facts come from the probe (versions and locations in the target, the msprobe import), the
script's run model, the patch wing's `verify` (patch state of the trees the target imports, asked
through `rlpatch.patch.api`) and `rlpatch lint` (the script's findings, asked through the CLI as a
command: its JSON comes from the lint command's own configuration, environment and report handling).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from rlpatch.errors import RlpatchError, error_line
from rlpatch.upstream.api import Version

Level = str  # "OK" | "WARN" | "FAIL"
# The packages the patch commands act on (distribution -> package folder), and their root options.
PATCHED = {"verl": "verl", "sglang": "sglang", "vllm-ascend": "vllm_ascend"}
ROOT_OPTION = {"verl": "--verl-root", "sglang": "--sglang-root", "vllm_ascend": "--vllm-ascend-root"}


@dataclass
class RunFacts:
    """What the launch script says about the run (all None without --script)."""

    mode: str | None = None
    megatron: bool | None = None
    legacy_worker: str | None = None  # trainer.use_legacy_worker_impl
    rollout: str | None = None
    script: str | None = None
    device: str | None = None  # trainer.device, when the script sets it to a known value


@dataclass
class Verdict:
    level: Level
    check: str
    message: str

    def as_json(self) -> dict[str, str]:
        return asdict(self)


def version_of(packages: dict[str, Any], name: str) -> Version | None:
    return Version.maybe((packages.get(name) or {}).get("version"))


def msprobe_verdicts(packages: dict[str, Any], imported: dict[str, Any], python: str) -> list[Verdict]:
    """Whether `from msprobe.pytorch import PrecisionDebugger` works in the target, and why not."""
    install = f"{python} -m pip install mindstudio-probe (or rlpatch doctor --install)"
    cause = imported.get("cause")
    located = (packages.get("mindstudio-probe") or {}).get("location")
    if cause is None:
        return [Verdict("OK", "msprobe-import", f"from msprobe.pytorch import PrecisionDebugger works "
                        f"(mindstudio-probe {version_of(packages, 'mindstudio-probe') or '?'} at {located})")]
    error = imported.get("error") or imported.get("type") or "failed"
    if cause == "msprobe" or not located:
        return [Verdict("FAIL", "msprobe-import", f"msprobe is not installed for {python}: {install}")]
    if cause == "torch":
        return [Verdict("FAIL", "msprobe-import", f"msprobe is installed but msprobe.pytorch needs torch, missing "
                        f"({error}; failing module: torch): install torch in {python} (CPU build is enough to import)")]
    if cause == "cann":
        return [Verdict("FAIL", "msprobe-import", f"msprobe is installed, but `import torch` auto-loads torch_npu, which "
                        f"fails ({error}): the CANN environment is missing; source the CANN set_env.sh (ascend-toolkit) "
                        "in the shell or script, or set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to check on CPU")]
    missing = imported.get("missing")
    if cause == "module":
        return [Verdict("FAIL", "msprobe-import", f"msprobe is installed but its import fails: {error} "
                        f"(failing module: {missing}): install it in {python}")]
    return [Verdict("FAIL", "msprobe-import", f"msprobe is installed but its import fails: {imported.get('type')}: {error}")]


def version_verdicts(packages: dict[str, Any], run: RunFacts) -> list[Verdict]:
    """The version gates of msprobe and verl for the mode, and vLLM without vLLM-Ascend."""
    found: list[Verdict] = []
    mode, megatron, legacy = run.mode, run.megatron, run.legacy_worker
    msprobe, sglang, verl = (version_of(packages, name) for name in ("mindstudio-probe", "sglang", "verl"))
    serious = "FAIL" if mode in ("inference", "consistency") else "WARN"
    if msprobe is not None and msprobe < Version.parse("26.0"):
        found.append(Verdict("WARN", "msprobe-version", f"mindstudio-probe {msprobe} < 26.0 has no `msprobe compare "
                             "--consistent_check`: install mindstudio-probe >= 26.0 to compare consistency dumps"))
        if sglang is not None and sglang >= Version.parse("0.5.11"):
            found.append(Verdict(serious, "msprobe-version", f"SGLang {sglang} (>= 0.5.11) dumps natively with msprobe's "
                                 f"26.x API, which mindstudio-probe {msprobe} lacks (it raises): install mindstudio-probe >= 26.0"))
    if msprobe is not None and msprobe < Version.parse("26.2"):
        level = "FAIL" if mode == "consistency" else "WARN"
        found.append(Verdict(level, "msprobe-version", f"mindstudio-probe {msprobe} < 26.2 has no config `request_id`: "
                             "consistency dumps cannot be paired by request; install mindstudio-probe >= 26.2"))
    if verl is not None and mode == "training" and verl < Version.parse("0.8.0"):
        found.append(Verdict("FAIL", "verl-version", f"verl {verl} < 0.8.0: training mode (global_profiler.tool="
                             "precision_debugger) does nothing; upgrade verl or use the consistency patch"))
    if verl is not None and mode == "training" and megatron and verl.release[:3] == (0, 8, 0):
        found.append(Verdict("FAIL", "verl-version", "verl 0.8.0 with Megatron: training mode finds no model to dump; "
                             "use verl 0.8.1+ or FSDP"))
    if verl is not None and mode == "consistency" and verl.release[:2] == (0, 7) and legacy != "disable":
        where = "the script does not set it" if legacy is None else f"the script sets {legacy}"
        found.append(Verdict("FAIL" if run.script else "WARN", "verl-version",
                             f"verl {verl}: consistency needs trainer.use_legacy_worker_impl=disable ({where})"))
    if (packages.get("vllm") or {}).get("location") and not (packages.get("vllm-ascend") or {}).get("location"):
        level = "FAIL" if mode in ("inference", "consistency") and run.rollout == "vllm" else "WARN"
        found.append(Verdict(level, "vllm-ascend", "vLLM is installed but vLLM-Ascend is not: the vLLM dump key "
                             "(additional_config.dump_config_path) does nothing on community vLLM"))
    return found


def companion_verdicts(packages: dict[str, Any], run: RunFacts, python: str) -> list[Verdict]:
    """The packages the ones found need beside them: torch_npu for a `trainer.device=npu` script (torch
    reaches the NPU only through it), vLLM beside vLLM-Ascend (a plugin that vLLM loads)."""
    found: list[Verdict] = []

    def located(name: str) -> bool:
        return bool((packages.get(name) or {}).get("location"))

    if run.device == "npu" and not located("torch_npu"):
        torch = version_of(packages, "torch")
        fix = (f"install the torch_npu built for torch {torch} ({python} -m pip install "
               f"'torch_npu=={_release(torch)}.*')" if torch is not None and located("torch")
               else f"install torch and the torch_npu built for it in {python}")
        found.append(Verdict("WARN", "torch-npu", f"torch_npu is not installed for {python}, but the script sets "
                             f"trainer.device=npu: torch cannot reach the NPU without it and verl fails at start; {fix}"))
    if located("vllm-ascend") and not located("vllm"):
        ascend = version_of(packages, "vllm-ascend")
        pin = f"=={_release(ascend)}" if ascend is not None else ""
        found.append(Verdict("WARN", "vllm", f"vLLM-Ascend {ascend or '?'} is installed for {python} but vLLM is not: "
                             "vllm_ascend is a plugin that vLLM loads, so no vLLM rollout starts; install the vLLM "
                             f"release it is built for ({python} -m pip install vllm{pin}: vLLM-Ascend's version "
                             "numbers follow vLLM's)"))
    return found


def _release(version: Version) -> str:
    """`2.5.1` of `2.5.1+cpu` or `0.11.0rc1`: the release the companion package is built for."""
    return ".".join(str(part) for part in version.release)


def patch_verdicts(packages: dict[str, Any], mode: str | None) -> tuple[list[Verdict], list[dict[str, Any]]]:
    """`rlpatch verify` of the mode's rule set on the trees this interpreter imports."""
    if mode == "training":
        return [Verdict("OK", "patches", "training mode dumps through verl's own msprobe tool: no patch needed")], []
    if not tree_roots(packages):
        return [Verdict("OK", "patches", "no verl, SGLang or vLLM-Ascend tree imported: nothing to patch")], []
    selected = mode or "consistency"
    try:
        targets = verified_trees(selected, packages)
    except Exception as err:  # noqa: BLE001 - any failure is the verdict's one line (_failure_line re-raises when debugging)
        last = (_failure_line(err).strip().splitlines() or ["no answer"])[-1]
        return [Verdict("WARN", "patches", f"rlpatch verify could not tell the patch state: {last}")], []
    found = []
    for target in targets:
        where = f"{target['package']} {target.get('version') or '?'} at {target['root']}"
        if target["state"] in ("applied", "not-applicable"):
            found.append(Verdict("OK", "patches", f"{where}: the {selected} patches are in place ({target['state']})"))
        else:
            level = "FAIL" if mode else "WARN"
            fix = f"rlpatch apply --mode {selected} {ROOT_OPTION[target['package']]} {target['root']}"
            found.append(Verdict(level, "patches", f"{where}: the {selected} patches are {target['state']}"
                                 + (f" ({', '.join(target.get('not_applied') or [])})" if target.get("not_applied") else "")
                                 + f": {fix}" + ("" if mode else " (if you collect in this mode)")))
    return found, targets


def verified_trees(mode: str, packages: dict[str, Any]) -> list[dict[str, Any]]:
    """`rlpatch verify --mode MODE --format json`'s targets for the trees the target imports (recovering
    an interrupted command in them first, as verify does)."""
    from rlpatch.patch import api as patch  # brings libcst: only when a tree is there to verify

    roots = tree_roots(packages)
    selection = patch.select(patch.TargetOptions(mode=mode, verl_root=roots.get("verl"), sglang_root=roots.get("sglang"),
                                                 vllm_ascend_root=roots.get("vllm_ascend")))
    targets: list[dict[str, Any]] = patch.verify(selection.targets, selection.rules).payload()["targets"]
    return targets


def _failure_line(err: Exception) -> str:
    """The line the command doctor ran in-process would have ended with (`RLPATCH_DEBUG=1`: the
    traceback of anything but rlpatch's own errors, as the command line gives it)."""
    if os.environ.get("RLPATCH_DEBUG") and not isinstance(err, RlpatchError):
        raise err
    return error_line(err)


def tree_roots(packages: dict[str, Any]) -> dict[str, str]:
    """Package folder -> the root holding it, for the trees the target imports."""
    found = {}
    for name, module in PATCHED.items():
        location = ((packages.get(name) or {}).get("location") or "").rstrip("/")
        if location.endswith("/" + module):
            found[module] = location[: -len(module) - 1]
    return found


def lint_verdicts(script: str, mode: str | None, packages: dict[str, Any],
                  env: dict[str, str] | None = None) -> tuple[list[Verdict], list[dict[str, Any]]]:
    """The script's findings as `rlpatch lint` gives them on the path doctor checked (`--env`), with the
    trees the target imports: its verl, else the released verl (never the verl of rlpatch's own
    Python, which is not the one that will run)."""
    from rlpatch.lint import api as lint

    roots = tree_roots(packages)
    # the shell environment doctor read the script with (`--use-env`), and `--env` over it: the same path
    how = lint.ScriptOptions(mode=mode, env=tuple(f"{name}={value}" for name, value in (env or {}).items()), use_env=True,
                             verl_root=roots.get("verl"), sglang_root=roots.get("sglang"),
                             vllm_ascend_root=roots.get("vllm_ascend"), verl_default="release")
    try:
        outcome = lint.run_lint(lint.LintCommand(files=(script,), script=how, output_format="json"))
        findings = lint.findings_json(outcome)
    except Exception as err:  # noqa: BLE001 - the line `rlpatch lint` would have ended with, as a verdict
        return [Verdict("FAIL", "lint", f"rlpatch lint {script}: {_failure_line(err)}")], []
    # which verl RL3xx checked against when the target has none, or why it did not run (a WARN: unchecked)
    checked = [note for note in outcome.notes if " not run: " not in note]
    unchecked = [Verdict("WARN", "lint", f"rlpatch lint {script}: {note}") for note in outcome.notes if note not in checked]
    if not findings:
        said = "".join(f" ({note})" for note in checked)
        return [Verdict("OK", "lint", f"rlpatch lint {script}: no findings{said}"), *unchecked], []
    against = [Verdict("OK", "lint", f"rlpatch lint {script}: {note}") for note in checked] + unchecked
    level = {"error": "FAIL", "warning": "WARN", "info": "WARN"}
    return [Verdict(level.get(f["severity"], "WARN"), f"lint {f['code']}", f"{f['file']}:{f['line']}: {f['message']}")
            for f in findings] + against, findings


# The rollout engine of each `rollout.name` as the target must import it (distribution names).
ROLLOUT_ENGINES = {"vllm": "vllm-ascend", "sglang": "sglang"}
MODULE_OF = {"verl": "verl", "vllm-ascend": "vllm_ascend", "sglang": "sglang"}


def import_verdicts(packages: dict[str, Any], run: RunFacts, python: str) -> list[Verdict]:
    """In a dump mode the target must import verl, and for inference/consistency the rollout engine the
    script chooses (vLLM-Ascend for `rollout.name=vllm`, SGLang; either one without a script)."""
    if run.mode not in ("training", "inference", "consistency"):
        return []

    def located(name: str) -> bool:
        return bool((packages.get(name) or {}).get("location"))

    found = []
    if located("verl"):
        found.append(Verdict("OK", "imports", f"verl {version_of(packages, 'verl') or '?'} at {packages['verl']['location']}"))
    else:
        found.append(Verdict("FAIL", "imports", f"{python} cannot import verl: {_article(run.mode)} {run.mode} run needs it (install verl "
                             "there, or put its tree on the script's PYTHONPATH)"))
    if run.mode == "training":
        return found
    wanted = [ROLLOUT_ENGINES[run.rollout]] if run.rollout in ROLLOUT_ENGINES else list(ROLLOUT_ENGINES.values())
    present = [name for name in wanted if located(name)]
    if present:
        found += [Verdict("OK", "imports", f"{name} {version_of(packages, name) or '?'} at {packages[name]['location']}")
                  for name in present]
    elif not (run.rollout == "vllm" and located("vllm")):  # vLLM without vLLM-Ascend: the "vllm-ascend" verdict says it
        engines = " or ".join(MODULE_OF[name] for name in wanted)
        chosen = f"the script's rollout.name={run.rollout}" if run.rollout in ROLLOUT_ENGINES else "no script names the rollout"
        found.append(Verdict("FAIL", "imports", f"{python} cannot import {engines} ({chosen}): {_article(run.mode)} {run.mode} run dumps "
                             "the rollout there; install it in that interpreter"))
    return found


def _article(word: str) -> str:
    """"an inference run", "a training run"."""
    return "an" if word[:1] in "aeiou" else "a"
