"""sglang-model-runner: shapes, gates, and every SGLang release from 0.4.3.post4 to 0.5.10.post1."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from conftest import SGLANG_NATIVE_VERSIONS, SGLANG_PATCHED_VERSIONS
from rulecheck import assert_names_resolve, assert_patch_cycle

from rlpatch.patch.rule import AnchorError, Target
from rlpatch.rules import sglang_model_runner as rule_module
from rlpatch.rules.sglang_model_runner import MODEL_RUNNER, NATIVE_OVERRIDE, SglangModelRunner
from rlpatch.upstream.versions import Version

RULE = SglangModelRunner()
PATCHED_RELEASES = SGLANG_PATCHED_VERSIONS
NATIVE_RELEASES = SGLANG_NATIVE_VERSIONS


ONE_FINAL_RETURN, DISPATCHER = (case.source for case in RULE.VALID)


@pytest.mark.parametrize("index", range(len(RULE.VALID)))
def test_valid_cases_patch_and_strip_exactly_with_names_bound(index: int) -> None:
    assert_patch_cycle(RULE, MODEL_RUNNER, RULE.VALID[index].source, f"valid {index}")


@pytest.mark.parametrize("index", range(len(RULE.INVALID)))
def test_invalid_cases_are_refused_naming_file_and_class(index: int) -> None:
    with pytest.raises(AnchorError) as refused:
        RULE.insertions(MODEL_RUNNER, cst.parse_module(RULE.INVALID[index].source))
    assert MODEL_RUNNER in str(refused.value) and "ModelRunner" in str(refused.value)


def test_dispatcher_shape_is_wrapped_in_try_finally() -> None:
    patched = assert_patch_cycle(RULE, MODEL_RUNNER, DISPATCHER, "0.4.3")
    forward = patched.patched[patched.patched.index("def forward") :]
    assert forward.index("msprobe_debugger.start") < forward.index("try:") < forward.index("finally:")
    assert forward.index("finally:") < forward.index("msprobe_debugger.stop()")


def _target(root: Path | str, version: str | None) -> Target:
    return Target("sglang", str(root), Version.maybe(version))


@pytest.mark.parametrize("version", ["0.5.11", "0.5.12.post1", "0.5.23"])
def test_native_versions_are_not_applicable_with_the_override(tmp_path: Path, version: str) -> None:
    gate = RULE.gate(_target(tmp_path, version))
    assert gate.status == "not-applicable"
    assert NATIVE_OVERRIDE in gate.message
    assert NATIVE_OVERRIDE == "++actor_rollout_ref.rollout.engine_kwargs.sglang.msprobe_dump_config=PATH"


def test_native_support_is_seen_without_a_version(tmp_path: Path) -> None:
    server_args = tmp_path / rule_module.SERVER_ARGS
    server_args.parent.mkdir(parents=True)
    server_args.write_text("class ServerArgs:\n    msprobe_dump_config: str = None\n")
    assert RULE.gate(_target(tmp_path, None)).status == "not-applicable"
    server_args.write_text("class ServerArgs:\n    pass\n")
    assert RULE.gate(_target(tmp_path, None)).status == "ok"


def test_supported_and_older_versions(tmp_path: Path) -> None:
    assert RULE.gate(_target(tmp_path, "0.5.10.post1")).status == "ok"
    assert RULE.gate(_target(tmp_path, "0.4.3.post4")).status == "ok"
    assert RULE.gate(_target(tmp_path, "0.4.2")).status == "warn"


def test_name_check_catches_a_shadowing_import() -> None:
    original = "import os\ndef f():\n    a = os.sep\n    return a\n"
    patched = "import os\ndef f():\n    a = os.sep\n    import os\n    return a\n"
    with pytest.raises(AssertionError, match="local to f"):
        assert_names_resolve(original, patched, "shadow")
    with pytest.raises(AssertionError, match="unbound"):
        assert_names_resolve(original, original + "def g():\n    return undefined_name\n", "unbound")


def _sglang_tree(version: str) -> Path:
    from rlpatch.upstream.wheelcache import unpacked_tree

    return unpacked_tree("sglang", version)


@pytest.mark.upstream
@pytest.mark.parametrize("version", PATCHED_RELEASES)
def test_release_is_patched_verified_and_stripped_exactly(version: str) -> None:
    root = _sglang_tree(version)
    assert RULE.gate(_target(root, version)).status == "ok"
    source = (root / MODEL_RUNNER).read_text(encoding="utf-8")
    patched = assert_patch_cycle(RULE, MODEL_RUNNER, source, f"sglang {version}").patched
    forward = patched[patched.index("    def forward(") :]
    forward = forward[: forward.index("\n    def ", 10)]
    if version.startswith("0.4.3"):
        assert "try:" in forward and "finally:" in forward
    else:
        assert forward.index("self.forward_pass_id += 1") < forward.index("msprobe_debugger.start(")
        assert forward.rstrip().endswith("self.msprobe_debugger.step()\n\n        return output".rstrip())


@pytest.mark.upstream
@pytest.mark.parametrize("version", NATIVE_RELEASES)
def test_native_release_is_not_applicable(version: str) -> None:
    root = _sglang_tree(version)
    assert rule_module.native_support(str(root))
    assert RULE.gate(_target(root, version)).status == "not-applicable"
    # Even a tree that hides its version is recognised by the native server argument.
    assert RULE.gate(_target(root, None)).status == "not-applicable"


def test_a_tree_patched_by_us_is_not_taken_for_native_support(tmp_path: Path) -> None:
    patched = assert_patch_cycle(RULE, MODEL_RUNNER, ONE_FINAL_RETURN, "x")
    runner = tmp_path / MODEL_RUNNER
    runner.parent.mkdir(parents=True)
    runner.write_text(patched.patched)
    assert not rule_module.native_support(str(tmp_path))
    assert RULE.gate(_target(tmp_path, None)).status == "ok"
