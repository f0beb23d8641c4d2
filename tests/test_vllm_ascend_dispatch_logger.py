"""vllm-ascend-dispatch-logger: shapes, gates, the created file, and vllm-ascend 0.11.0 .. 0.23.0."""

from __future__ import annotations

import re
from pathlib import Path

import libcst as cst
import pytest
from conftest import VLLM_ASCEND_STOP_SITES
from rulecheck import assert_patch_cycle

from rlpatch.patch import edits
from rlpatch.patch.rule import AnchorError, Target
from rlpatch.rules.vllm_ascend_dispatch_logger import LOGGER_FILE, MODEL_RUNNER, VllmAscendDispatchLogger
from rlpatch.upstream.versions import Version

RULE = VllmAscendDispatchLogger()
PATCHED_RELEASES = VLLM_ASCEND_STOP_SITES  # spec 6: 4 in 0.13, 3 in 0.18; 0.23: four _finalize_dump_data()
HOOK = "self._finish_msprobe_step(scheduler_output)"


def _target(root: Path | str, version: str | None) -> Target:
    return Target("vllm_ascend", str(root), Version.maybe(version))


INLINE_STOPS, FINALIZE_CALLS = (case.source for case in RULE.VALID)


@pytest.mark.parametrize("index", range(len(RULE.VALID)))
def test_valid_cases_patch_and_strip_exactly_with_names_bound(index: int) -> None:
    patched = assert_patch_cycle(RULE, MODEL_RUNNER, RULE.VALID[index].source, f"valid {index}").patched
    assert patched.count(HOOK) == 2


def test_dummy_run_finalize_is_not_hooked() -> None:
    patched = assert_patch_cycle(RULE, MODEL_RUNNER, FINALIZE_CALLS, "x").patched
    dummy = patched[patched.index("def _dummy_run") :]
    dummy = dummy[: dummy.index("def _finalize_dump_data")]
    assert HOOK not in dummy


@pytest.mark.parametrize("index", range(len(RULE.INVALID)))
def test_invalid_cases_are_refused_naming_file_and_class(index: int) -> None:
    with pytest.raises(AnchorError) as refused:
        RULE.insertions(MODEL_RUNNER, cst.parse_module(RULE.INVALID[index].source))
    assert MODEL_RUNNER in str(refused.value) and "NPUModelRunner" in str(refused.value)


def _states(source: str) -> list[str]:
    module = cst.parse_module(source)
    return [edits.locate(module, edit).state for edit in RULE.insertions(MODEL_RUNNER, module)]


def test_a_stop_site_without_its_hook_is_partial() -> None:
    """verify counts hooks against stop sites: a new unhooked stop site leaves one edit absent."""
    patched = assert_patch_cycle(RULE, MODEL_RUNNER, INLINE_STOPS, "x").patched
    extra = patched + (
        "\n    def execute_dummy(self, scheduler_output):\n"
        "        if self.debugger is not None:\n"
        "            self.debugger.stop()\n"
    )
    states = _states(extra)
    assert states.count("absent") == 1 and states.count("applied") == len(states) - 1
    removed = re.sub(r"^ *" + re.escape(HOOK) + r"\n", "", patched, count=1, flags=re.M)
    assert _states(removed).count("absent") == 1


def test_gate(tmp_path: Path) -> None:
    runner = tmp_path / MODEL_RUNNER
    runner.parent.mkdir(parents=True)
    runner.write_text("from msprobe.pytorch import PrecisionDebugger\n")
    assert RULE.gate(_target(tmp_path, "0.13.0")).status == "ok"
    assert RULE.gate(_target(tmp_path, None)).status == "ok"
    old = RULE.gate(_target(tmp_path, "0.11.0"))
    assert old.status == "not-applicable" and "0.11.0" in old.message and "0.12.0rc1" in old.message
    runner.write_text("class NPUModelRunner:\n    pass\n")
    assert RULE.gate(_target(tmp_path, None)).status == "not-applicable"


def test_new_file_is_the_dispatch_logger() -> None:
    (new,) = RULE.new_files(_target("/nowhere", "0.13.0"))
    assert new.path == LOGGER_FILE == "vllm_ascend/worker/dispatch_logger.py"
    assert "class DispatchLogger" in new.text and "dispatch_log.jsonl" in new.text
    compile(new.text, LOGGER_FILE, "exec")


def _vllm_ascend_tree(version: str) -> Path:
    from rlpatch.upstream.wheelcache import LINUX_X86_64, unpacked_tree

    return unpacked_tree("vllm-ascend", version, platform=LINUX_X86_64, python_version="3.11")


@pytest.mark.upstream
@pytest.mark.parametrize("version", sorted(PATCHED_RELEASES))
def test_release_is_patched_verified_and_stripped_exactly(version: str) -> None:
    root = _vllm_ascend_tree(version)
    assert RULE.gate(_target(root, version)).status == "ok"
    source = (root / MODEL_RUNNER).read_text(encoding="utf-8")
    patched = assert_patch_cycle(RULE, MODEL_RUNNER, source, f"vllm-ascend {version}").patched
    for marker in ("DispatchLogger", "_dispatch_logger", "_finish_msprobe_step"):
        assert marker in patched
    assert patched.count(HOOK) == PATCHED_RELEASES[version]
    lines = patched.splitlines()
    for index, line in enumerate(lines):
        if line.strip() == HOOK:
            assert lines[index + 1].strip() in ("self.debugger.stop()", "self._finalize_dump_data()", "")
    # The logger is created right after the runner's own PrecisionDebugger.
    created = next(i for i, line in enumerate(lines) if "self.debugger = PrecisionDebugger(" in line)
    assert "DispatchLogger" in lines[created + 1] and "DispatchLogger.for_debugger" in lines[created + 2]


@pytest.mark.upstream
def test_release_without_native_dump_is_not_applicable() -> None:
    root = _vllm_ascend_tree("0.11.0")
    for version in ("0.11.0", None):
        gate = RULE.gate(_target(root, version))
        assert gate.status == "not-applicable" and "no msprobe dump hooks" in gate.message
