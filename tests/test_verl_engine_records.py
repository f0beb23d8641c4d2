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
    patched = _patched(verl_engine_fsdp.VerlEngineFsdp(), verl_engine_fsdp.VerlEngineFsdp.VALID[2].source)
    assert verl_engine_fsdp.PATCHED_DISABLE_ADAPTER.strip("\n") in patched


def test_megatron_disable_adapter_is_marked() -> None:
    patched = _patched(verl_engine_megatron.VerlEngineMegatron(), verl_engine_megatron.VerlEngineMegatron.VALID[2].source)
    assert (f"        {common.MARK_REFERENCE_PASS}\n"
            "        return self.peft_cls.disable_adapter(self.module)\n") in patched


def test_releases_without_disable_adapter_get_no_mark() -> None:
    for rule, source in ((verl_engine_fsdp.VerlEngineFsdp(), verl_engine_fsdp.VerlEngineFsdp.VALID[0].source),
                         (verl_engine_megatron.VerlEngineMegatron(), verl_engine_megatron.VerlEngineMegatron.VALID[0].source)):
        assert "_dump_reference_pass = True" not in _patched(rule, source)


def test_prompts_only_v1_leaves_the_reference_pass_whole() -> None:
    patched = _patched(verl_prompts_only_v1.VerlPromptsOnlyV1(), verl_prompts_only_v1.VerlPromptsOnlyV1.VALID[0].source)
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


def _engine(tmp_path: Path, service: _Service, layout: str = common.FSDP_DUMP_LAYOUT, **attributes: Any) -> Any:
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(common.ENSURE_DEBUGGER) + textwrap.dedent(common.LOG_UPDATE_ACTOR_STEP)
         + textwrap.dedent(layout), namespace)
    engine = types.SimpleNamespace(_debugger=_Debugger(service), **{
        "engine_config": types.SimpleNamespace(forward_only=False), **attributes})
    engine._update_actor_log = (tmp_path / "update_actor_log.jsonl").open("a", encoding="utf-8")
    engine.ensure = types.MethodType(namespace["_ensure_debugger"], engine)
    engine.log = types.MethodType(namespace["_log_update_actor_step"], engine)
    engine._dump_layout = types.MethodType(namespace["_dump_layout"], engine)
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


def _micro_batch(lengths: list[int], remove_padding: bool | None = None) -> Any:
    """A verl 0.9 micro-batch: request ids and nested (jagged) input_ids, as prepare_micro_batches gives them."""
    import torch
    from tensordict import NonTensorData, NonTensorStack, TensorDict

    input_ids = torch.nested.nested_tensor([torch.arange(3, 3 + n) for n in lengths], layout=torch.jagged)
    batch = TensorDict({"input_ids": input_ids}, batch_size=[len(lengths)])
    batch["request_id"] = NonTensorStack.from_list([f"r{n}" for n in range(len(lengths))])
    if remove_padding is not None:
        batch["use_remove_padding"] = NonTensorData(remove_padding)
    return batch


def _one_record(engine: Any, micro_batch: Any, tmp_path: Path) -> dict[str, Any]:
    engine.ensure(True)
    engine.log(micro_batch)
    engine._update_actor_log.close()
    (record,) = _records(tmp_path)
    return record


@pytest.mark.parametrize("remove_padding", [None, True])
def test_fsdp_packed_micro_batch_rows_are_back_to_back(tmp_path: Path, dumping: None, remove_padding) -> None:
    pytest.importorskip("tensordict")
    record = _one_record(_engine(tmp_path, _Service([], [])), _micro_batch([4, 3, 5], remove_padding), tmp_path)
    assert record["layout"] == "packed" and record["request_ids"] == ["r0", "r1", "r2"]
    assert record["rows"] == [{"batch_index": 0, "offset": 0, "tokens": 4, "request_id": "r0"},
                              {"batch_index": 0, "offset": 4, "tokens": 3, "request_id": "r1"},
                              {"batch_index": 0, "offset": 7, "tokens": 5, "request_id": "r2"}]


def test_fsdp_padded_micro_batch_rows_start_at_zero(tmp_path: Path, dumping: None) -> None:
    pytest.importorskip("tensordict")
    record = _one_record(_engine(tmp_path, _Service([], [])), _micro_batch([4, 3], False), tmp_path)
    assert record["layout"] == "padded"
    assert [(r["request_id"], r["batch_index"], r["offset"], r["tokens"]) for r in record["rows"]] == [
        ("r0", 0, 0, 4), ("r1", 1, 0, 3)]


def test_fsdp_ulysses_gives_no_rows(tmp_path: Path, dumping: None) -> None:
    pytest.importorskip("tensordict")
    engine = _engine(tmp_path, _Service([], []), ulysses_sequence_parallel_size=2)
    record = _one_record(engine, _micro_batch([4, 3], True), tmp_path)
    assert (record["layout"], record["sp_size"]) == ("packed", 2) and "rows" not in record


@pytest.mark.parametrize(("remove_padding", "expected"), [
    (True, ("packed", [(0, 0, 5), (0, 6, 3), (0, 10, 2)])),  # each request padded to a multiple of TP=2
    (False, ("padded", [(0, 0, 5), (1, 0, 3), (2, 0, 2)]))])
def test_megatron_rows_follow_the_tp_aligned_packing(tmp_path: Path, dumping: None, monkeypatch: pytest.MonkeyPatch,
                                                     remove_padding: bool, expected) -> None:
    pytest.importorskip("tensordict")
    state = types.ModuleType("megatron.core.parallel_state")
    state.get_tensor_model_parallel_world_size = lambda: 2  # type: ignore[attr-defined]
    state.get_context_parallel_world_size = lambda: 1  # type: ignore[attr-defined]
    core = types.ModuleType("megatron.core")
    core.parallel_state = state  # type: ignore[attr-defined]
    for name, module in (("megatron", types.ModuleType("megatron")), ("megatron.core", core),
                         ("megatron.core.parallel_state", state)):
        monkeypatch.setitem(__import__("sys").modules, name, module)
    engine = _engine(tmp_path, _Service([], []), common.MEGATRON_DUMP_LAYOUT,
                     engine_config=types.SimpleNamespace(forward_only=False, use_remove_padding=remove_padding),
                     tf_config=types.SimpleNamespace(sequence_parallel=True))
    record = _one_record(engine, _micro_batch([5, 3, 2]), tmp_path)
    assert (record["layout"], record["token_dim"], record["tp_size"], record["sequence_parallel"]) == (
        expected[0], 0, 2, True)
    assert [(r["batch_index"], r["offset"], r["tokens"]) for r in record["rows"]] == expected[1]


def test_a_surprising_micro_batch_gives_rows_error_not_a_crash(tmp_path: Path, dumping: None) -> None:
    pytest.importorskip("tensordict")
    batch = _micro_batch([4, 3], True)
    del batch["request_id"]  # a micro-batch without request ids: rows that name nothing
    record = _one_record(_engine(tmp_path, _Service([], [])), batch, tmp_path)
    assert record["rows_error"] == "ValueError: 2 rows for 0 request ids" and "rows" not in record


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
