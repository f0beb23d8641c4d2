"""The code the verl consistency rules insert, run for real on small CPU tensors.

Each test applies the whole set to a copy of a fixture tree with verl's structure
(`fixtures/verl_aux`), imports the patched modules and drives them: what runs is exactly the rules'
output, not a re-typed copy of it.
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
pytestmark = pytest.mark.runtime

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "verl_aux"
PROMPT, RESPONSE, BATCH = 3, 4, 2


class Batch:
    """The parts of verl's DataProto the inserted code touches."""

    def __init__(self, tensors: dict[str, Any]) -> None:
        self.batch = dict(tensors)
        self.meta_info: dict[str, Any] = {}


@pytest.fixture(params=["v07", "v09"])
def layout(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def patched(tmp_path: Path, layout: str) -> Iterator[Any]:
    """An importer of the patched fixture tree of one layout (verl.* modules, unloaded afterwards)."""
    with patched_fixture(FIXTURES / layout, tmp_path / layout) as load:
        yield load


def _rollout(position_dims: int, with_log_probs: bool, with_mask: bool) -> Batch:
    seq = PROMPT + RESPONSE
    positions = torch.arange(seq).expand(BATCH, seq)
    if position_dims == 3:  # mrope: (batch, 3, seq)
        positions = torch.arange(seq).expand(BATCH, 3, seq)
    tensors = {
        "input_ids": torch.arange(BATCH * seq).reshape(BATCH, seq),
        "attention_mask": torch.ones(BATCH, seq, dtype=torch.long),
        "position_ids": positions.clone(),
        "responses": torch.arange(BATCH * RESPONSE).reshape(BATCH, RESPONSE),
    }
    if with_log_probs:
        tensors["rollout_log_probs"] = -torch.rand(BATCH, RESPONSE)
    if with_mask:
        tensors["response_mask"] = torch.ones(BATCH, RESPONSE, dtype=torch.long)
    return Batch(tensors)


def _expect_prompts_only(before: Batch, after: Batch, position_dims: int) -> None:
    assert after.batch["input_ids"].shape == (BATCH, PROMPT)
    assert torch.equal(after.batch["input_ids"], before.batch["input_ids"][:, :PROMPT])
    assert after.batch["attention_mask"].shape == (BATCH, PROMPT)
    expected_positions = (BATCH, PROMPT) if position_dims == 2 else (BATCH, 3, PROMPT)
    assert after.batch["position_ids"].shape == expected_positions
    assert torch.equal(after.batch["position_ids"], before.batch["position_ids"][..., :PROMPT])
    assert after.batch["responses"].shape == (BATCH, 0)
    for key in ("rollout_log_probs", "response_mask"):
        if key in before.batch:
            assert after.batch[key].shape == (BATCH, 0)
        else:
            assert key not in after.batch


def _copy(batch: Batch) -> Batch:
    return Batch({key: value.clone() for key, value in batch.batch.items()})


SHAPES = [
    pytest.param(dims, logp, mask, id=f"{dims}d-{'logp' if logp else 'nologp'}-{'mask' if mask else 'nomask'}")
    for dims in (2, 3) for logp in (True, False) for mask in (True, False)
]


# ------------------------------------------------------------------------------------------------
# prompts-only: RayPPOTrainer.fit (hybrid) and FullyAsyncTrainer._fit_generate
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["v09"], indirect=True)
@pytest.mark.parametrize("dims,logp,mask", SHAPES)
def test_prompts_only_trims_the_hybrid_batch(patched, monkeypatch, dims: int, logp: bool, mask: bool) -> None:
    monkeypatch.setenv("PROMPTS_ONLY", "1")
    batch = _rollout(dims, logp, mask)
    before = _copy(batch)
    trainer = patched("verl.trainer.ppo.ray_trainer").RayPPOTrainer(batch)
    trainer.fit()
    _expect_prompts_only(before, trainer.recomputed_on, dims)


@pytest.mark.parametrize("layout", ["v09"], indirect=True)
@pytest.mark.parametrize("switch", [None, "", "0", "false", "off"])
def test_prompts_only_off_leaves_the_batch_alone(patched, monkeypatch, switch: str | None) -> None:
    if switch is None:
        monkeypatch.delenv("PROMPTS_ONLY", raising=False)
    else:
        monkeypatch.setenv("PROMPTS_ONLY", switch)
    batch = _rollout(2, True, True)
    before = _copy(batch)
    patched("verl.trainer.ppo.ray_trainer").RayPPOTrainer(batch).fit()
    assert {key: value.shape for key, value in batch.batch.items()} == {
        key: value.shape for key, value in before.batch.items()
    }


@pytest.mark.parametrize("layout", ["v09"], indirect=True)
@pytest.mark.parametrize("dims,logp,mask", SHAPES)
def test_prompts_only_trims_the_fully_async_batch(patched, monkeypatch, dims: int, logp: bool, mask: bool) -> None:
    monkeypatch.setenv("PROMPTS_ONLY", "1")
    batch = _rollout(dims, logp, mask)
    before = _copy(batch)
    trainer = patched("verl.experimental.fully_async_policy.fully_async_trainer").FullyAsyncTrainer([batch], 0.7)
    result = asyncio.run(trainer._fit_generate())
    _expect_prompts_only(before, result, dims)
    assert result.meta_info["temperature"] == 0.7


@pytest.mark.parametrize("layout", ["v09"], indirect=True)
def test_fully_async_batch_without_responses_is_left_alone(patched, monkeypatch) -> None:
    monkeypatch.setenv("PROMPTS_ONLY", "1")
    batch = _rollout(2, False, False)
    del batch.batch["responses"]
    trainer = patched("verl.experimental.fully_async_policy.fully_async_trainer").FullyAsyncTrainer([batch])
    result = asyncio.run(trainer._fit_generate())
    assert result.batch["input_ids"].shape == (BATCH, PROMPT + RESPONSE)


# ------------------------------------------------------------------------------------------------
# Early returns: debug metrics and rollout correction
# ------------------------------------------------------------------------------------------------

ZERO_METRICS = {
    "training/rollout_probs_diff_valid": 0,
    "training/rollout_probs_diff_max": 0.0,
    "training/rollout_probs_diff_mean": 0.0,
    "training/rollout_probs_diff_std": 0.0,
    "training/rollout_actor_probs_pearson_corr": 0.0,
}


def _scored(response: int = RESPONSE) -> Batch:
    return Batch({
        "responses": torch.zeros(BATCH, response, dtype=torch.long),
        "rollout_log_probs": -torch.rand(BATCH, response),
        "old_log_probs": -torch.rand(BATCH, response),
        "response_mask": torch.ones(BATCH, response, dtype=torch.long),
    })


@pytest.mark.parametrize("layout", ["v09"], indirect=True)
@pytest.mark.parametrize(
    "case",
    ["prompts-only", "no-rollout-log-probs", "no-old-log-probs", "no-responses", "zero-length-responses"],
)
def test_debug_metrics_skip_when_there_is_nothing_to_compare(patched, monkeypatch, caplog, case: str) -> None:
    monkeypatch.delenv("PROMPTS_ONLY", raising=False)
    data = _scored(0 if case == "zero-length-responses" else RESPONSE)
    if case == "prompts-only":
        monkeypatch.setenv("PROMPTS_ONLY", "1")
    missing = {"no-rollout-log-probs": "rollout_log_probs", "no-old-log-probs": "old_log_probs",
               "no-responses": "responses"}.get(case)
    if missing:
        del data.batch[missing]
    with caplog.at_level(logging.WARNING):
        metrics = patched("verl.utils.debug.metrics").calculate_debug_metrics(data)
    assert metrics == ZERO_METRICS
    assert "skipping debug metrics" in caplog.text


@pytest.mark.parametrize("layout", ["v09"], indirect=True)
def test_debug_metrics_run_normally_otherwise(patched, monkeypatch, caplog) -> None:
    monkeypatch.setenv("PROMPTS_ONLY", "0")
    with caplog.at_level(logging.WARNING):
        metrics = patched("verl.utils.debug.metrics").calculate_debug_metrics(_scored())
    assert metrics["training/rollout_probs_diff_valid"] == 1
    assert "skipping debug metrics" not in caplog.text


@pytest.mark.parametrize("layout", ["v09"], indirect=True)
def test_rollout_correction_returns_the_batch_untouched_with_prompts_only(patched, monkeypatch) -> None:
    monkeypatch.setenv("PROMPTS_ONLY", "1")
    data = _scored(0)
    result, metrics = patched("verl.trainer.ppo.rollout_corr_helper").compute_rollout_correction_and_add_to_batch(
        data, {"rollout_is": "token"}
    )
    assert result is data and metrics == {}
    assert "rollout_is_weights" not in data.batch


@pytest.mark.parametrize("layout", ["v09"], indirect=True)
def test_rollout_correction_runs_otherwise(patched, monkeypatch) -> None:
    monkeypatch.delenv("PROMPTS_ONLY", raising=False)
    data = _scored()
    result, metrics = patched("verl.trainer.ppo.rollout_corr_helper").compute_rollout_correction_and_add_to_batch(
        data, {"rollout_is": "token"}
    )
    assert "rollout_is_weights" in result.batch and metrics


# ------------------------------------------------------------------------------------------------
# Request ids: what the server receives is what extra_fields["request_id"] holds
# ------------------------------------------------------------------------------------------------


class StubServer:
    """A Ray-actor-like handle: `await server.generate.remote(**kwargs)` records the request id."""

    def __init__(self, token_output: type, aborts: int = 0) -> None:
        self.sent: list[str] = []
        self._make = token_output
        self._aborts = aborts
        self.generate = self

    async def remote(self, **kwargs: Any) -> Any:
        self.sent.append(kwargs["request_id"])
        aborted = len(self.sent) <= self._aborts
        return self._make(token_ids=[len(self.sent)], extra_fields={
            "global_steps": 5, **({"stop_reason": "aborted"} if aborted else {})
        })


CLIENTS = {
    # layout -> (module, client class, fully-async module, fully-async class)
    "v07": ("verl.experimental.agent_loop.agent_loop", "AsyncLLMServerManager",
            "verl.experimental.fully_async_policy.fully_async_rollouter", "FullyAsyncLLMServerClient"),
    "v09": ("verl.workers.rollout.llm_server", "LLMServerClient",
            "verl.workers.rollout.llm_server", "FullyAsyncLLMServerClient"),
}


def _generate(client: Any) -> Any:
    return asyncio.run(client.generate("sticky-session-1", prompt_ids=[1, 2], sampling_params={}))


def test_request_id_sent_is_the_one_recorded(patched, layout: str) -> None:
    module = patched(CLIENTS[layout][0])
    server = StubServer(module.TokenOutput)
    output = _generate(getattr(module, CLIENTS[layout][1])(server))
    assert len(server.sent) == 1
    assert output.extra_fields["request_id"] == server.sent[0]
    assert len(server.sent[0]) == 32 and server.sent[0] != "sticky-session-1"  # a fresh uuid4 hex per turn


@pytest.mark.parametrize("layout", ["v09"], indirect=True)
def test_request_id_follows_vllm_request_id_under_full_determinism(patched) -> None:
    module = patched("verl.workers.rollout.llm_server")
    server = StubServer(module.TokenOutput)
    output = _generate(module.LLMServerClient(server, full_determinism=True))
    assert server.sent == ["sticky-session-1"]
    assert output.extra_fields["request_id"] == "sticky-session-1"


def test_fully_async_output_keeps_the_last_request_id(patched, layout: str) -> None:
    _, _, module_name, class_name = CLIENTS[layout]
    module = patched(module_name)
    aborts = 1 if layout == "v09" else 0  # the v09 fixture resumes aborted generations
    server = StubServer(patched(CLIENTS[layout][0]).TokenOutput, aborts=aborts)
    output = _generate(getattr(module, class_name)(server))
    assert len(server.sent) == aborts + 1
    assert output.extra_fields["request_id"] == server.sent[-1]
    assert output.extra_fields["global_steps"] == 5
