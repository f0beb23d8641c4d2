"""RL6xx glue: the versions of the target environment and the patch state of its verl tree.

Versions come from what the caller was told (gen passes its --sglang-version / --vllm-ascend-version),
else from `rlpatch.upstream.envprobe` (metadata and version files, nothing imported): an explicit
root (`--verl-root`, `--sglang-root`, `--vllm-ascend-root`) first, then the interpreter that will
run verl (`--python`, default: this one). mindstudio-probe is looked up beside SGLang or
vLLM-Ascend when their root is a site-packages directory (one environment holds both). RL605
asks the patch wing's api (`rlpatch verify --format json`, in-process: `rlpatch.patch.api`), imported
only when a consistency or SGLang-dump run has a tree to check: the plain lint path never imports libcst.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from rlpatch.lint.rule import Fact, LintContext, LintOptions, Skipped
from rlpatch.shell.api import Run, Setting
from rlpatch.upstream.api import Version

if TYPE_CHECKING:  # imported when a version is really asked for: most runs never ask (cold start)
    from rlpatch.upstream.api import Installed

# What one verify of the target tree says: its rules' reports, the error that stopped it, and the
# coverage of each trainer.
VerifyAnswer = tuple[list[dict[str, Any]], str | None, list[dict[str, Any]]]

SGLANG_PATCH_RULE = "sglang-model-runner"  # the patch that reads MSPROBE_SGLANG_CONFIG (SGLang < 0.5.11)
SGLANG_DUMP_KEY = "actor_rollout_ref.rollout.engine_kwargs.sglang.msprobe_dump_config"
VLLM_DUMP_CONFIG = "actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config"
VLLM_DUMP_CONFIG_PATH = "actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path"
ROOT_OPTION = {"verl": "verl_root", "sglang": "sglang_root", "vllm-ascend": "vllm_ascend_root"}

# The target environment's answers, kept for one lint invocation (`LintOptions.target_facts`).
INSTALLED: Fact[Installed] = Fact("installed")  # about: the project
PATCH_STATES: Fact[VerifyAnswer] = Fact("patch states")  # about: ("verify", what was verified)


def installed(options: LintOptions, project: str) -> Installed:
    """Where `project` is in the target environment and its version (once per lint invocation)."""
    return options.target_facts.get_or_compute(INSTALLED, lambda: _find(options, project, _roots(options)), project)


def _roots(options: LintOptions) -> dict[str, str | None]:
    return {name: _root(options, name) for name in ROOT_OPTION}


def _root(options: LintOptions, project: str) -> str | None:
    return {"verl": options.verl_root, "sglang": options.sglang_root, "vllm-ascend": options.vllm_ascend_root}.get(project)


def _find(options: LintOptions, project: str, roots: dict[str, str | None]) -> Installed:
    from rlpatch.upstream.api import probe, probe_root

    root = roots.get(project)
    if root:
        return probe_root(project, root)
    if project == "mindstudio-probe":
        for neighbour in ("sglang", "vllm-ascend"):
            neighbour_root = roots.get(neighbour)
            if neighbour_root:
                found = probe_root(project, neighbour_root)
                if found.found:
                    return found
    return probe(options.python, (project,))[project]


def target_given(options: LintOptions) -> bool:
    """Did the user name the target environment (a root or --python)? Only then is an unknown
    version worth a note: without a target, RL6xx checks what it can find and stays quiet."""
    return bool(options.verl_root or options.python or options.sglang_root or options.vllm_ascend_root)


def known_version(options: LintOptions, project: str) -> Version | None:
    """The version the caller was told (gen's --sglang-version / --vllm-ascend-version), else the
    target tree's. A told version names no tree: `installed` (what RL605 verifies) ignores it."""
    given = {"sglang": options.sglang_version, "vllm-ascend": options.vllm_ascend_version}.get(project)
    return given if given is not None else installed(options, project).version


def version(ctx: LintContext, project: str, needed_for: Setting) -> Version | None:
    """The project's version; when unknown for a named target, noted as skipped (RL002) at `needed_for`."""
    found = known_version(ctx.options, project)
    if found is None and target_given(ctx.options):
        ctx.skipped.append(Skipped(ctx.rule.code, f"the {project} version (give --{ROOT_OPTION.get(project, 'python').replace('_', '-')} "
                                   "or --python)", needed_for.span))
    return found


def dump_setting(run: Run, key: str) -> Setting | None:
    """The override that sets `key` to a known, non-null value, if any."""
    setting = run.setting(key)
    if setting.source == "override" and setting.known and not setting.is_null():
        return setting
    return None


# ---- RL605: the patch state, from the patch wing's api (`rlpatch verify --format json`, in-process)

VLLM_ASCEND_PATCH_RULE = "vllm-ascend-dispatch-logger"  # logs the request ids a consistency pair needs


def verify_states(ctx: LintContext, backend: str) -> tuple[list[dict[str, Any]], str | None]:
    """(rule reports, error) of `rlpatch verify --mode consistency --backend B` for the target verl."""
    rules, error, _ = _verl_verify(ctx.options, backend)
    return rules, error


def verify_sglang_states(ctx: LintContext) -> tuple[list[dict[str, Any]], str | None]:
    """(rule reports, error) of `rlpatch verify --rules sglang-model-runner` for the target SGLang (the
    ModelRunner patch that reads MSPROBE_SGLANG_CONFIG)."""
    root = ctx.options.sglang_root
    where = {"sglang_root": os.path.realpath(root)} if root else {"python": ctx.options.python}
    return _cached_verify(ctx.options, ("verify", "sglang"), "sglang", rule_ids=SGLANG_PATCH_RULE, **where)


def verify_vllm_ascend_states(ctx: LintContext) -> tuple[list[dict[str, Any]], str | None]:
    """(rule reports, error) of `rlpatch verify --rules vllm-ascend-dispatch-logger` for the target
    vLLM-Ascend (`--vllm-ascend-root`, else the tree `--python` or this interpreter imports)."""
    root = ctx.options.vllm_ascend_root
    where = {"vllm_ascend_root": os.path.realpath(root)} if root else {"python": ctx.options.python}
    return _cached_verify(ctx.options, ("verify", "vllm-ascend"), "vllm_ascend", rule_ids=VLLM_ASCEND_PATCH_RULE, **where)


def verify_trainers(ctx: LintContext, backend: str) -> tuple[list[dict[str, Any]], str | None]:
    """(per-trainer coverage, error) from the same verify as verify_states (run once)."""
    _, error, trainers = _verl_verify(ctx.options, backend)
    return trainers, error


def _verl_verify(options: LintOptions, backend: str) -> VerifyAnswer:
    where = {"verl_root": os.path.realpath(options.verl_root)} if options.verl_root else {"python": options.python}
    return _verify_answer(options, ("verify", backend), "verl", dict(mode="consistency", backend=backend, **where))


def _cached_verify(options: LintOptions, key: tuple[str, str], package: str, **arguments: Any) -> tuple[list[dict[str, Any]], str | None]:
    rules, error, _ = _verify_answer(options, key, package, arguments)
    return rules, error


def _verify_answer(options: LintOptions, key: tuple[str, str], package: str, arguments: dict[str, Any]) -> VerifyAnswer:
    """The verify named by `key`, run on the first ask only (a later ask with the same key reuses it)."""
    return options.target_facts.get_or_compute(PATCH_STATES, lambda: _run_verify(package, arguments), key)


def _run_verify(package: str, arguments: dict[str, Any]) -> VerifyAnswer:
    """The patch wing answers in-process; it is imported only here (it brings libcst), so a lint that
    never asks for a patch state never loads it."""
    from rlpatch.errors import RlpatchError
    from rlpatch.patch.api import verify_payload

    try:
        payload = verify_payload(**arguments)
    except RlpatchError as err:
        return [], err.message, []
    targets = [target for target in payload["targets"] if target["package"] == package]
    if not targets:
        return [], f"no {package} tree to check", []
    return ([rule for target in targets for rule in target.get("rules", [])], None,
            [entry for target in targets for entry in target.get("trainers", [])])
