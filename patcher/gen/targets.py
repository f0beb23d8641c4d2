"""The versions gen writes for, from what the user named: a released verl, a tree, an interpreter.

A version given as text that is not one, a root that holds no package, or a release whose wheel
cannot be had is bad input (nothing written). A version nobody named is assumed (the newest verl
release, the backends' current lines) and the new script says so.
"""

from __future__ import annotations

import os

from rlpatch.errors import InputError
from rlpatch.gen.plan import Targets
from rlpatch.lint.api import LintOptions, verl_version_of
from rlpatch.shell.api import NEWEST_VERL
from rlpatch.upstream.api import Version, probe, probe_root


def parse_version(text: str | None, option: str) -> Version | None:
    if text is None:
        return None
    version = Version.maybe(text)
    if version is None:
        raise InputError(f"{option}: not a version number: {text!r}")
    return version


def number_list(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    items = [item.strip() for item in text.strip("[]").split(",") if item.strip()]
    if not items or not all(item.isdigit() for item in items):
        raise InputError(f"{option}: expected numbers separated by commas, got {text!r}")
    return [int(item) for item in items]


def item_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [item.strip() for item in text.strip("[]").split(",") if item.strip()]


def root_version(project: str, root: str | None, option: str) -> Version | None:
    """The version of the tree given with --sglang-root / --vllm-ascend-root (bad input when it holds none)."""
    if root is None:
        return None
    if not os.path.isdir(root):
        raise InputError(f"{option} {root}: no such folder")
    found = probe_root(project, root)
    if not found.found:
        raise InputError(f"{option} {root}: no {project.replace('-', '_')}/ package found there")
    return found.version


def resolve_targets(*, verl_version: str | None, verl_root: str | None, python: str | None,
                    sglang_version: str | None, vllm_ascend_version: str | None, sglang_root: str | None,
                    vllm_ascend_root: str | None, lint_options: LintOptions) -> Targets:
    """A version given as text first, then the tree's, then the interpreter's (verl: the one lint uses)."""
    sglang = parse_version(sglang_version, "--sglang-version") or root_version("sglang", sglang_root, "--sglang-root")
    vllm_ascend = parse_version(vllm_ascend_version, "--vllm-ascend-version") or root_version(
        "vllm-ascend", vllm_ascend_root, "--vllm-ascend-root")
    verl = verl_version_of(lint_options)
    assumed = not (verl_version or verl_root)
    if python:
        found = probe(python, ("verl", "sglang", "vllm-ascend"))
        if found["verl"].version is not None:
            verl, assumed = found["verl"].version, False
        sglang = sglang or found["sglang"].version
        vllm_ascend = vllm_ascend or found["vllm-ascend"].version
    return Targets(verl, sglang, vllm_ascend, assumed)


def released_verl(verl_version: str | None, other_target: bool) -> str | None:
    """The released verl whose wheel gives the config: the one asked for (its download failing is bad
    input: nothing is written), else the newest release when no target is named at all (when it
    cannot be downloaded, gen goes on without a config to compose and says so)."""
    from rlpatch.upstream.api import unpacked_tree

    if verl_version is not None:
        parse_version(verl_version, "--verl-version")
        unpacked_tree("verl", verl_version)
        return verl_version
    if other_target:
        return None
    try:
        unpacked_tree("verl", str(NEWEST_VERL))
    except InputError:
        return None
    return str(NEWEST_VERL)
