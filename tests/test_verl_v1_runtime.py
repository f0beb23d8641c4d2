"""The consistency set on the v1 trainer's code path (issue 9), run for real on CPU.

The whole set is applied to a copy of `fixtures/verl_aux/v09` (small files with the shapes of verl
0.9's v1 trainer, agent loop and engine worker) and the patched modules are driven:

- the engine worker alone, with TransferQueue-layout rows (jagged tensors), `PROMPTS_ONLY=1` and
  unset: the shapes the log-prob forward receives and the shapes written back;
- the whole v1 chain on the real TransferQueue package (a local Ray cluster): agent-loop rows put by
  `AgentLoopWorkerTQ`, `PPOTrainer._compute_old_log_prob` -> the worker's TransferQueue bridge -> the
  engine's micro-batches, then the debug metrics and the rollout correction called by the trainer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consistency_set import patched_fixture

torch = pytest.importorskip("torch")
tensordict = pytest.importorskip("tensordict")
pytestmark = pytest.mark.runtime

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "verl_aux" / "v09"
PROMPTS, RESPONSES = [3, 5], [4, 2]  # per-sample lengths
FULL = [p + r for p, r in zip(PROMPTS, RESPONSES, strict=True)]


def _jagged(rows: list[Any]) -> Any:
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


def _lengths(value: Any) -> list[int]:
    return value.offsets().diff().tolist()


class Engine:
    """Stands in for the training engine: records what each micro-batch carries, returns per-token outputs."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def infer_batch(self, data: Any) -> Any:
        for micro_batch in data.split(1):  # one sample per micro-batch
            request_ids = micro_batch.get("request_id") if "request_id" in micro_batch.keys() else None
            self.seen.append({
                "input_ids": _lengths(micro_batch["input_ids"]),
                "position_ids": tuple(micro_batch["position_ids"].unbind()[0].shape),
                "request_ids": request_ids.tolist() if request_ids is not None else [],
            })
        input_ids = data["input_ids"]
        values = -(input_ids.values().float() + 1.0) / 100.0  # a nonzero log-prob per token
        log_probs = torch.nested.nested_tensor_from_jagged(values, input_ids.offsets())
        return tensordict.TensorDict({"log_probs": log_probs, "entropy": log_probs.abs()},
                                     batch_size=[len(_lengths(input_ids))])


@pytest.fixture
def patched(tmp_path: Path) -> Iterator[Any]:
    with patched_fixture(FIXTURE, tmp_path / "v09") as load:
        yield load


def _rows(mrope: bool = False) -> Any:
    def positions(n: int) -> Any:
        return torch.arange(n).expand(4, n).clone() if mrope else torch.arange(n)

    return tensordict.TensorDict({
        "prompts": _jagged([torch.arange(n) + 10 for n in PROMPTS]),
        "responses": _jagged([torch.arange(n) + 50 for n in RESPONSES]),
        "response_mask": _jagged([torch.ones(n, dtype=torch.int64) for n in RESPONSES]),
        "input_ids": _jagged([torch.arange(n) for n in FULL]),
        "position_ids": _jagged([positions(n) for n in FULL]),
        "routed_experts": _jagged([torch.zeros(n, 2, dtype=torch.int16) for n in FULL]),
    }, batch_size=[2])


# ------------------------------------------------------------------------------------------------
# The engine worker alone
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mrope", [False, True], ids=["positions-1d", "mrope-4xseq"])
def test_prompts_only_cuts_what_the_forward_sees_and_restores_the_output_shapes(patched, monkeypatch, mrope) -> None:
    monkeypatch.setenv("PROMPTS_ONLY", "1")
    engine = Engine()
    worker = patched("verl.workers.engine_workers").ActorRolloutRefWorker(engine)
    output = worker.compute_log_prob(_rows(mrope))

    assert [seen["input_ids"] for seen in engine.seen] == [[n] for n in PROMPTS]
    expected_positions = [(4, n) if mrope else (n,) for n in PROMPTS]
    assert [seen["position_ids"] for seen in engine.seen] == expected_positions
    # What goes back to TransferQueue keeps the full per-sample length the trainer slices with.
    assert _lengths(output["log_probs"]) == FULL and _lengths(output["entropy"]) == FULL
    for row, prompt in zip(output["log_probs"].unbind(), PROMPTS, strict=True):
        assert torch.all(row[: prompt - 1] < 0) and torch.all(row[prompt - 1:] == 0)


@pytest.mark.parametrize("switch", [None, "0", "off"])
def test_prompts_only_off_leaves_the_worker_alone(patched, monkeypatch, switch) -> None:
    if switch is None:
        monkeypatch.delenv("PROMPTS_ONLY", raising=False)
    else:
        monkeypatch.setenv("PROMPTS_ONLY", switch)
    engine = Engine()
    output = patched("verl.workers.engine_workers").ActorRolloutRefWorker(engine).compute_log_prob(_rows())
    assert [seen["input_ids"] for seen in engine.seen] == [[n] for n in FULL]
    assert torch.all(output["log_probs"].values() < 0)


def test_dataproto_layout_of_the_v0_trainer_is_left_to_verl_prompts_only(patched, monkeypatch) -> None:
    # trainer.use_v1=False: padded `prompts` (RayPPOTrainer.fit has trimmed the batch already).
    monkeypatch.setenv("PROMPTS_ONLY", "1")
    rows = _rows()
    rows["prompts"] = torch.zeros(2, max(PROMPTS), dtype=torch.int64)
    engine = Engine()
    patched("verl.workers.engine_workers").ActorRolloutRefWorker(engine).compute_log_prob(rows)
    assert [seen["input_ids"] for seen in engine.seen] == [[n] for n in FULL]


def test_padding_rows_answer_no_request(patched) -> None:
    rows = [{"uid": "u0", "request_id": "abc"}, {"uid": "u1", "request_id": "def"}, {"uid": "u2", "request_id": "0a"}]
    padded = patched("verl.trainer.ppo.padding_utils").upsample_batch_to_divisible_size(rows, 4)
    assert [row["request_id"] for row in padded] == ["abc", "def", "0a", ""]


# ------------------------------------------------------------------------------------------------
# The v1 chain on the real TransferQueue
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def transfer_queue() -> Iterator[Any]:
    """A local Ray cluster (started and ended by this test) with TransferQueue's controller and storage."""
    ray = pytest.importorskip("ray")
    tq = pytest.importorskip("transfer_queue")
    from omegaconf import OmegaConf
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        yield tq
        tq.close()
    finally:
        ray.shutdown()
        cluster.shutdown()


class StubServer:
    """A Ray-actor-like inference server handle: `await server.generate.remote(**kwargs)`."""

    def __init__(self, token_output: type) -> None:
        self.sent: list[str] = []
        self._make = token_output
        self.generate = self

    async def remote(self, **kwargs: Any) -> Any:
        self.sent.append(kwargs["request_id"])
        return self._make(token_ids=[7] * RESPONSES[len(self.sent) - 1], extra_fields={})


def _rollout(load: Any, tq: Any, partition_keys: str) -> tuple[Any, list[str]]:
    """Generate through the patched LLMServerClient, put the rows through AgentLoopWorkerTQ."""
    server_module = load("verl.workers.rollout.llm_server")
    agent_loop = load("verl.trainer.ppo.v1.agent_loop_tq")
    server = StubServer(server_module.TokenOutput)
    client = server_module.LLMServerClient(server)
    keys, tags = [], []
    for index, prompt_len in enumerate(PROMPTS):
        prompt_ids = list(range(10, 10 + prompt_len))
        token_output = asyncio.run(client.generate(f"{partition_keys}-{index}", prompt_ids=prompt_ids, sampling_params={}))
        output = agent_loop.AgentLoopOutput(prompt_ids, token_output.token_ids, [-0.5] * len(token_output.token_ids),
                                            extra_fields=token_output.extra_fields)  # as the agent loops copy them
        put_keys, put_tags = asyncio.run(agent_loop.AgentLoopWorkerTQ()._agent_loop_postprocess(
            output, False, uid=f"{partition_keys}-{index}", session_id=0))
        keys += put_keys
        tags += put_tags
    return tq.KVBatchMeta(partition_id="train", keys=keys, tags=tags), server.sent


@pytest.mark.parametrize("prompts_only", [True, False], ids=["PROMPTS_ONLY=1", "unset"])
def test_v1_trainer_chain_on_transfer_queue(patched, transfer_queue, monkeypatch, caplog, prompts_only) -> None:
    tq = transfer_queue
    if prompts_only:
        monkeypatch.setenv("PROMPTS_ONLY", "1")
    else:
        monkeypatch.delenv("PROMPTS_ONLY", raising=False)
    batch, sent = _rollout(patched, tq, "on" if prompts_only else "off")
    engine = Engine()
    worker = patched("verl.workers.engine_workers").ActorRolloutRefWorker(engine)
    trainer = patched("verl.trainer.ppo.v1.trainer_base").PPOTrainer(worker, rollout_correction={"rollout_is": "token"})

    metrics: dict[str, Any] = {}
    with caplog.at_level(logging.WARNING):
        trainer._compute_old_log_prob(batch, metrics)
        corrected = trainer._compute_advantage(batch, metrics)

    # The log-prob recompute: prompts only, or the whole sequence.
    assert [seen["input_ids"] for seen in engine.seen] == [[n] for n in (PROMPTS if prompts_only else FULL)]
    # The request id each server call got reaches the engine's micro-batch, on both settings.
    assert [seen["request_ids"] for seen in engine.seen] == [[request_id] for request_id in sent]
    assert all(len(request_id) == 32 for request_id in sent)
    # The trainer reads old_log_probs of the response shape either way.
    stored = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["old_log_probs"])
    assert _lengths(stored["old_log_probs"]) == RESPONSES
    if prompts_only:
        assert torch.all(stored["old_log_probs"].values() == 0)
        assert metrics["training/rollout_probs_diff_valid"] == 0 and "skipping debug metrics" in caplog.text
        assert "rollout_is_weights" not in corrected.batch.keys()  # rollout correction skipped
    else:
        assert torch.all(stored["old_log_probs"].values() < 0)
        assert metrics["training/rollout_probs_diff_valid"] == 1 and "skipping debug metrics" not in caplog.text
        assert "rollout_is_weights" in corrected.batch.keys() and "rollout_corr/weights_mean" in metrics
