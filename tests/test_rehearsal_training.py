"""The rehearsal's training side: real verl 0.9.1, patched by `rlpatch apply --mode consistency`, on CPU.

Not fixture copies: the released wheel, its FSDP engine (FSDP1 on two ranks, FSDP2 on one), the real
v1 `ActorRolloutRefWorker.compute_log_prob` reached through real TransferQueue and the v1 trainer's own
`_compute_old_log_prob` / `_compute_ref_log_prob`, msprobe 26.2.0 dumping a tiny random Qwen2
(rehearsal.training). What the patches must give the consistency pairing:

- every log record names request ids the rollout rows carried, and points at a real msprobe dump
  (`step{N}/rank{R}/dump.json`) whose forward saw that request's prompt only (PROMPTS_ONLY=1);
- a step outside msprobe's `step` list is neither dumped nor logged;
- with LoRA, the reference pass (the actor with its adapter off) is neither cut nor dumped.

The Megatron engine is not run: verl 0.9.1's Megatron engine cannot be built without CUDA (see
rehearsal/__init__.py); its patch is proved structurally (tests/test_upstream_verl_engine.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REHEARSAL_MODULES

for _module in REHEARSAL_MODULES:
    pytest.importorskip(_module)

from rehearsal.training import QWEN2_CONFIG, Scenario, TrainingSide  # noqa: E402

pytestmark = [pytest.mark.runtime, pytest.mark.slow]

RECORD_KEYS = {"source", "phase", "timestamp", "pid", "rank", "step", "request_ids", "num_requests", "layout", "rows"}
FIRST_MODULE = "model.embed_tokens.Embedding.forward.0"


# The scenarios (rehearsal_support.training_scenarios): FSDP2 with msprobe steps [1, 2] of three
# micro-batches, FSDP1 on two ranks, LoRA. One run per session, shared with the chain (test_rehearsal.py).
NAMES = ["fsdp2-ws1-steps", "fsdp1-ws2", "lora-ws1"]


@pytest.fixture(scope="module")
def scenarios(rehearsal_training) -> dict[str, Scenario]:
    return rehearsal_training[0]


@pytest.fixture(scope="module")
def sides(rehearsal_training) -> dict[str, TrainingSide]:
    return rehearsal_training[1]


def _records(dump_path: Path) -> list[dict[str, Any]]:
    logs = sorted(dump_path.glob("*/update_actor_log.jsonl"))
    assert logs, f"no update_actor_log.jsonl under {dump_path}"
    return [json.loads(line) for log in logs for line in log.read_text(encoding="utf-8").splitlines()]


def _dump(dump_path: Path, record: dict[str, Any]) -> dict[str, Any]:
    dump = dump_path / f"step{record['step']}" / f"rank{record['rank']}" / "dump.json"
    assert dump.is_file(), f"record {record} points at no dump ({dump})"
    return json.loads(dump.read_text(encoding="utf-8"))


def _first_input_shape(dump: dict[str, Any]) -> list[int]:
    name = next(key for key in dump["data"] if key.endswith(FIRST_MODULE))
    return dump["data"][name]["input_args"][0]["shape"]


def _dumped_steps(dump_path: Path) -> set[int]:
    return {int(path.name[len("step"):]) for path in dump_path.glob("step*") if path.is_dir()}


@pytest.mark.parametrize("name", NAMES)
def test_each_record_names_a_request_and_a_prompt_only_dump(sides, scenarios, name: str) -> None:
    scenario, side = scenarios[name], sides[name]
    records = _records(side.dump_path)
    prompt_of = dict(zip(scenario.request_ids, scenario.prompts, strict=True))
    for record in records:
        assert set(record) == RECORD_KEYS and record["source"] == "verl_engine" and record["phase"] == "log_prob"
        assert record["num_requests"] == 1 and record["request_ids"][0] in prompt_of
        dump = _dump(side.dump_path, record)
        assert (dump["task"], dump["level"]) == ("tensor", "L0")
        # PROMPTS_ONLY=1: the engine's forward saw this request's prompt, nothing of its response.
        assert _first_input_shape(dump) == [1, len(prompt_of[record["request_ids"][0]])]
        assert record["layout"] == "packed" and record["rows"] == [
            {"batch_index": 0, "offset": 0, "tokens": len(prompt_of[record["request_ids"][0]]),
             "request_id": record["request_ids"][0]}]
    assert {rank for record in records for rank in [record["rank"]]} == set(range(scenario.world_size))
    # What the trainer stored for the response tokens: zeros (the response was not run).
    assert side.stored["old_log_probs"] == [[0.0] * 3] * len(scenario.request_ids)


def test_every_request_once_when_every_step_is_dumped(sides, scenarios) -> None:
    for scenario in (scenarios[name] for name in NAMES[1:]):
        records = _records(sides[scenario.name].dump_path)
        assert sorted(rid for record in records for rid in record["request_ids"]) == sorted(scenario.request_ids)


def test_a_step_msprobe_does_not_dump_is_not_logged(sides, scenarios) -> None:
    scenario = scenarios[NAMES[0]]
    side = sides[scenario.name]
    records = _records(side.dump_path)
    assert [record["step"] for record in records] == [1, 2]
    assert _dumped_steps(side.dump_path) == {1, 2}
    assert [record["request_ids"] for record in records] == [[rid] for rid in scenario.request_ids[1:]]


def test_lora_reference_pass_is_neither_cut_nor_dumped(sides, scenarios) -> None:
    scenario = scenarios[NAMES[2]]
    side = sides[scenario.name]
    records = _records(side.dump_path)
    # Two requests, two dumped steps: the reference pass added none, under no request id.
    assert [record["request_ids"] for record in records] == [[rid] for rid in scenario.request_ids]
    assert _dumped_steps(side.dump_path) == {0, 1}
    # The reference log-probs were computed on the whole sequence (nonzero on every response token).
    assert all(value < 0 for row in side.stored["ref_log_prob"] for value in row)


def test_the_model_both_sides_load_is_in_the_workdir(sides) -> None:
    model_dir = sides[NAMES[0]].model_dir
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    assert config["model_type"] == "qwen2" and config["hidden_size"] == QWEN2_CONFIG["hidden_size"]
    assert (model_dir / "model.safetensors").is_file()
