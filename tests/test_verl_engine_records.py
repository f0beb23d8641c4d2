"""The engine patches' log records and their reference-pass mark, without Ray or a model (fast).

The inserted methods are executed on a stand-in engine with a stand-in msprobe service; the real
thing (verl 0.9.1, msprobe 26.2.0, LoRA) runs in tests/test_rehearsal_training.py.
"""

from __future__ import annotations

import json
import textwrap
import types
from pathlib import Path
from typing import Any

import libcst as cst
import pytest

from rlpatch.patch import edits
from rlpatch.rules import _engine_dump as common
from rlpatch.rules import verl_engine_fsdp, verl_engine_megatron, verl_prompts_only_v1


def _patched(rule: Any, source: str) -> str:
    module = cst.parse_module(textwrap.dedent(source).lstrip("\n"))
    return edits.insert(module, rule.insertions(rule.files[0], module)).code


def test_fsdp_disable_adapter_is_marked_exactly() -> None:
    patched = _patched(verl_engine_fsdp.VerlEngineFsdp(), verl_engine_fsdp.VALID[2].source)
    assert verl_engine_fsdp.PATCHED_DISABLE_ADAPTER.strip("\n") in patched


def test_megatron_disable_adapter_is_marked() -> None:
    patched = _patched(verl_engine_megatron.VerlEngineMegatron(), verl_engine_megatron.VALID[2].source)
    assert (f"        {common.MARK_REFERENCE_PASS}\n"
            "        return self.peft_cls.disable_adapter(self.module)\n") in patched


def test_releases_without_disable_adapter_get_no_mark() -> None:
    for rule, source in ((verl_engine_fsdp.VerlEngineFsdp(), verl_engine_fsdp.VALID[0].source),
                         (verl_engine_megatron.VerlEngineMegatron(), verl_engine_megatron.VALID[0].source)):
        assert "_dump_reference_pass = True" not in _patched(rule, source)


def test_prompts_only_v1_leaves_the_reference_pass_whole() -> None:
    patched = _patched(verl_prompts_only_v1.VerlPromptsOnlyV1(), verl_prompts_only_v1.VALID[0].source)
    assert ('        reference_pass = data.get("no_lora_adapter") if "no_lora_adapter" in keys else False\n'
            '        if getattr(reference_pass, "data", reference_pass):\n'
            "            return None\n") in patched


class _Service:
    def __init__(self, steps: list[int], ranks: list[int]) -> None:
        self.config = types.SimpleNamespace(step=steps, rank=ranks)
        self.current_iter = 0
        self.current_rank = 0
        self.should_stop_service = False


class _Debugger:
    def __init__(self, service: _Service) -> None:
        self.service = service


def _engine(tmp_path: Path, service: _Service) -> Any:
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(common.ENSURE_DEBUGGER) + textwrap.dedent(common.LOG_UPDATE_ACTOR_STEP), namespace)
    engine = types.SimpleNamespace(_debugger=_Debugger(service), engine_config=types.SimpleNamespace(forward_only=False))
    engine._update_actor_log = (tmp_path / "update_actor_log.jsonl").open("a", encoding="utf-8")
    engine.ensure = types.MethodType(namespace["_ensure_debugger"], engine)
    engine.log = types.MethodType(namespace["_log_update_actor_step"], engine)
    return engine


def _records(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "update_actor_log.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def dumping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUMP_ON", "1")
    monkeypatch.setenv("DUMP_PHASE", "all")


def test_record_shape_and_phase(tmp_path: Path, dumping: None) -> None:
    engine = _engine(tmp_path, _Service([], []))
    for forward_only, request_id in ((True, "a" * 32), (False, "b" * 32)):
        assert engine.ensure(forward_only)
        engine.log({"request_id": [request_id]})
        engine._debugger.service.current_iter += 1
    engine._update_actor_log.close()
    records = _records(tmp_path)
    assert [(r["source"], r["phase"], r["step"], r["request_ids"]) for r in records] == [
        ("verl_engine", "log_prob", 0, ["a" * 32]), ("verl_engine", "update_actor", 1, ["b" * 32])]
    assert set(records[0]) == {"source", "phase", "timestamp", "pid", "rank", "step", "request_ids", "num_requests"}


def test_steps_and_ranks_msprobe_does_not_dump_are_not_logged(tmp_path: Path, dumping: None) -> None:
    service = _Service([1, 2], [])
    engine = _engine(tmp_path, service)
    for step in range(3):
        service.current_iter = step
        assert engine.ensure(True)
        engine.log({"request_id": [f"{step:032d}"]})
    service.config.rank, service.current_rank = [1], 0
    engine.log({"request_id": ["c" * 32]})
    engine._update_actor_log.close()
    assert [r["step"] for r in _records(tmp_path)] == [1, 2]


def test_reference_pass_is_skipped_once(tmp_path: Path, dumping: None) -> None:
    engine = _engine(tmp_path, _Service([], []))
    engine._dump_reference_pass = True  # what the patched disable_adapter() sets
    assert not engine.ensure(True)
    assert engine.ensure(True)  # the next pass is a log-prob pass again


def test_the_engine_rules_share_a_base_the_registry_does_not_count() -> None:
    from rlpatch import registry

    engine_rules = [rule for rule in registry.patch_rules() if isinstance(rule, common.EngineDumpRule)]
    assert [(rule.id, type(rule).__module__) for rule in engine_rules] == [
        ("verl-engine-fsdp", verl_engine_fsdp.__name__), ("verl-engine-megatron", verl_engine_megatron.__name__)]
    assert [rule.backend for rule in engine_rules] == ["fsdp", "megatron"]
