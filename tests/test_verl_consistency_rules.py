"""The verl consistency rules (issue 3): anchors, gates, and the whole set on real verl wheels."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import libcst as cst
import pytest
from consistency_set import RULE_IDS, RULES, applicable, apply_set, site_states, strip_set
from scopecheck import scope_problems

from rlpatch import registry
from rlpatch.patch import edits
from rlpatch.patch.rule import AnchorError
from rlpatch.rules.verl_request_id import VerlRequestId

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "verl_aux"
RELEASES = ("0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1")

# Spec 0.9: identifiers marker checkers look for, per file, when the rule touching it applies.
COMPATIBILITY = {
    "verl/trainer/ppo/ray_trainer.py": ("PROMPTS_ONLY", "compute_prompts_only", "responses_len"),
    "verl/utils/debug/metrics.py": ("PROMPTS_ONLY", "skipping debug metrics"),
    "verl/trainer/ppo/rollout_corr_helper.py": ("PROMPTS_ONLY",),
    "verl/workers/rollout/llm_server.py": ("vllm_request_id", 'extra_fields["request_id"]'),
    "verl/experimental/agent_loop/agent_loop.py": ("vllm_request_id", 'extra_fields["request_id"]'),
    "verl/workers/engine_workers.py": ("PROMPTS_ONLY", "compute_prompts_only", "_prompts_only_inputs"),
}
V1_RULES = ("verl-prompts-only-v1", "verl-request-id-v1")

# Expected state of each rule per release.
EXPECTED = {
    "0.6.0": dict.fromkeys(RULE_IDS, "not-applicable"),
    "0.6.1": dict.fromkeys(RULE_IDS, "not-applicable"),
    "0.7.0": {"verl-prompts-only": "applied", "verl-prompts-only-async": "not-applicable",
              "verl-debug-metrics": "applied", "verl-rollout-corr": "applied",
              "verl-request-id": "not-applicable", "verl-request-id-async": "not-applicable",
              **dict.fromkeys(V1_RULES, "not-applicable")},
    "0.7.1": {"verl-prompts-only": "applied", "verl-prompts-only-async": "not-applicable",
              "verl-debug-metrics": "applied", "verl-rollout-corr": "applied",
              "verl-request-id": "applied", "verl-request-id-async": "not-applicable",
              **dict.fromkeys(V1_RULES, "not-applicable")},
    "0.8.0": {**dict.fromkeys(RULE_IDS, "applied"), **dict.fromkeys(V1_RULES, "not-applicable")},
    **{version: dict.fromkeys(RULE_IDS, "applied") for version in ("0.9.0", "0.9.1")},
}


# ------------------------------------------------------------------------------------------------
# Registry and rule metadata
# ------------------------------------------------------------------------------------------------


def test_rules_are_registered_in_mode_consistency() -> None:
    registered = {rule.id: rule for rule in registry.patch_rules()}
    for rule in RULES:
        assert isinstance(registered[rule.id], rule)
        assert rule.modes == frozenset({"consistency"}) and rule.package == "verl"
        assert rule.summary() and rule.versions


# ------------------------------------------------------------------------------------------------
# Anchors (each rule's VALID / INVALID cases run in tests/test_patch_rule_cases.py)
# ------------------------------------------------------------------------------------------------


def test_duplicated_anchor_is_ambiguous() -> None:
    from rlpatch.rules import verl_prompts_only

    doubled = verl_prompts_only.VerlPromptsOnly.VALID[0].source.replace(
        "            if bypass_recomputing_logprobs:\n                pass\n",
        "            if bypass_recomputing_logprobs:\n                pass\n" * 2,
    )
    with pytest.raises(AnchorError, match="found 2"):
        verl_prompts_only.VerlPromptsOnly().insertions("verl/trainer/ppo/ray_trainer.py", cst.parse_module(doubled))


# ------------------------------------------------------------------------------------------------
# The hoist edit (request id): insert, locate, strip
# ------------------------------------------------------------------------------------------------


def _request_id_case() -> tuple[str, str]:
    from rlpatch.rules import verl_request_id

    case = next(case for case in verl_request_id.VerlRequestId.VALID if case.path == verl_request_id.LLM_SERVER)
    return case.path, case.source


def _patched_request_id_case() -> tuple[str, str, str]:
    path, source = _request_id_case()
    module = cst.parse_module(source)
    return path, source, edits.insert(module, VerlRequestId().insertions(path, module)).code


def test_hoist_binds_the_id_passes_it_and_strips_back_byte_for_byte() -> None:
    _, source, patched = _patched_request_id_case()
    assert "vllm_request_id = self._vllm_request_id(request_id)\n" in patched
    assert "request_id=vllm_request_id,  # use new request_id for each turn\n" in patched
    assert 'output.extra_fields["request_id"] = vllm_request_id\n' in patched
    assert "request_id=self._vllm_request_id(request_id)," not in patched
    assert source != patched


@pytest.mark.parametrize(
    "mutation",
    [
        ("            vllm_request_id = self._vllm_request_id(request_id)\n", ""),  # binding removed by hand
        ("request_id=vllm_request_id,", "request_id=self._vllm_request_id(request_id),"),  # argument restored
    ],
    ids=["binding-removed", "argument-restored"],
)
def test_half_undone_hoist_is_drifted(mutation: tuple[str, str]) -> None:
    path, _, patched = _patched_request_id_case()
    edited = patched.replace(*mutation)
    assert edited != patched
    module = cst.parse_module(edited)
    states = [edits.locate(module, site).state for site in VerlRequestId().insertions(path, module)]
    assert states[0] == "drifted"


def test_multi_line_request_id_value_is_refused() -> None:
    path, source = _request_id_case()
    wrapped = "self._vllm_request_id(\n                    request_id\n                ),"
    multi = source.replace("self._vllm_request_id(request_id),", wrapped)
    with pytest.raises(AnchorError, match="several lines"):
        VerlRequestId().insertions(path, cst.parse_module(multi))


def test_hoist_must_go_before_its_anchor() -> None:
    path, source = _request_id_case()
    module = cst.parse_module(source)
    hoisting = VerlRequestId().insertions(path, module)[0]
    with pytest.raises(ValueError, match="before its anchor"):
        edits.insert(module, [replace(hoisting, where="after")])


# ------------------------------------------------------------------------------------------------
# Real releases
# ------------------------------------------------------------------------------------------------


def _fresh(version: str, tmp_path: Path) -> Path:
    from rlpatch.upstream.wheelcache import fresh_copy

    return fresh_copy("verl", version, tmp_path / f"verl-{version}")


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.py"))}


@pytest.mark.upstream
@pytest.mark.parametrize("version", RELEASES)
def test_whole_set_on_a_release(version: str, tmp_path: Path) -> None:
    root = _fresh(version, tmp_path)
    pristine = _tree_bytes(root)

    outcome = apply_set(root, version)
    states = {rule_id: state.split(":")[0] for rule_id, state in outcome.states.items()}
    assert states == EXPECTED[version]
    assert outcome.files, "the set changed no file"

    for path, (original, patched) in outcome.files.items():
        compile(patched, path, "exec")  # every touched file compiles
        assert scope_problems(original, patched, path) == []  # every inserted name is bound
        for identifier in COMPATIBILITY.get(path, ()):
            assert identifier in patched, f"{identifier} missing from {path}"
        if path in COMPATIBILITY:
            assert re.search(r"\bPROMPTS_ONLY\b|\bvllm_request_id\b", patched)

    located = site_states(root, version)
    assert located and all(state == "applied" for states_ in located.values() for state in states_)

    before_second = _tree_bytes(root)
    second = apply_set(root, version)
    assert second.files == {} and _tree_bytes(root) == before_second  # idempotent

    strip_set(root, version)
    assert _tree_bytes(root) == pristine  # byte-identical revert


@pytest.mark.upstream
@pytest.mark.parametrize("version", ("0.6.0", "0.6.1"))
def test_every_rule_is_not_applicable_before_0_7(version: str) -> None:
    from rlpatch.upstream.wheelcache import unpacked_tree

    rules, skipped = applicable(unpacked_tree("verl", version), version)
    assert rules == []
    assert set(skipped) == set(RULE_IDS)
    assert all(f"verl {version}" in reason for reason in skipped.values())


@pytest.mark.upstream
def test_unknown_version_goes_by_structure(tmp_path: Path) -> None:
    # A checkout whose version cannot be read: the files and anchors decide, as on 0.9.1.
    root = _fresh("0.9.1", tmp_path)
    outcome = apply_set(root, None)
    assert set(outcome.states.values()) == {"applied"}


def test_fixture_trees_take_the_whole_set(tmp_path: Path) -> None:
    for layout in ("v07", "v09"):
        root = tmp_path / layout
        shutil.copytree(FIXTURES / layout, root)
        pristine = _tree_bytes(root)
        outcome = apply_set(root, None)
        for path, (original, patched) in outcome.files.items():
            compile(patched, path, "exec")
            assert scope_problems(original, patched, path) == []
        strip_set(root, None)
        assert _tree_bytes(root) == pristine


@pytest.mark.upstream
@pytest.mark.parametrize("version", RELEASES)
def test_anchor_text_never_hides_an_anchor(version: str) -> None:
    # The engine skips parsing a file without the rule's anchor text: that must only ever skip
    # files where the rule finds nothing anyway.
    from rlpatch.upstream.wheelcache import unpacked_tree

    root = unpacked_tree("verl", version)
    for rule in (rule_class() for rule_class in RULES):
        for path in rule.files:
            needle = rule.anchor_text(path)
            if needle is None or not (root / path).is_file():
                continue
            text = (root / path).read_text()
            if needle not in text:
                assert rule.insertions(path, cst.parse_module(text)) == [], (rule.id, path)
