"""Issue 27's proof on the dumps themselves: packed steps, TP 2 and two faults, compared with torch.

Training side: the released verl 0.9.1 wheel patched by `rlpatch apply --mode consistency`, its FSDP2
engine computing log-probs for requests A, B, C, D at log-prob micro-batch 2 on two CPU ranks (two
requests packed per rank, `[1, total_tokens, ...]`) and 1, and A, B at micro-batch 2 without
remove-padding (padded rows); the records' `rows` cut the packed dumps. Inference side: the patched
vLLM-Ascend 0.23.0 runner's dump statements and logger driving msprobe 26.2.0 around a vLLM-named twin
(rehearsal_support.PACKING_VARIANTS): A..D packed in the runner's decode-first row order with a chunked
prefill, the same requests one per step, the packed plan on two TP ranks (vLLM's weight sharding, gloo
all-reduce), a batch-dependent fault and a fault in TP rank 1's shard. The dispatch log's `rows` cut
the packed dumps. `dumps pair/compare` on these dumps is the consumer's (the `rehearsal_packing`
fixture gives every dump path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import REHEARSAL_MODULES
from rehearsal_support import (
    BF16_FLOOR,
    PackingDumps,
    dispatch_records,
    engine_records,
    step_outputs,
    within_floor,
)

for _module in REHEARSAL_MODULES:
    pytest.importorskip(_module)

from rehearsal.training import QWEN2_CONFIG  # noqa: E402

pytestmark = [pytest.mark.runtime, pytest.mark.upstream, pytest.mark.slow]

LAST_LAYER = QWEN2_CONFIG["num_hidden_layers"] - 1
BATCH_CULPRIT = f"Module.model.layers.{LAST_LAYER}.post_attention_layernorm.RMSNorm.forward.0.output.0"
SHARD_CULPRIT = f"Module.model.layers.{LAST_LAYER}.mlp.gate_up_proj.MergedColumnParallelLinear.forward.0.output.0"


@pytest.fixture(scope="module")
def dumps(rehearsal_packing: PackingDumps) -> PackingDumps:
    return rehearsal_packing


# --- inference: cutting packed steps with the dispatch log's rows ---------------------------------


def _inference_steps(dump_path: Path, tp_rank: int = 0) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(record, module outputs) per logged step of one TP rank, in step order."""
    steps = []
    for folder, record in dispatch_records(dump_path):
        if record.get("tp_rank", 0) == tp_rank:
            steps.append((record, step_outputs(folder / f"step{record['step']}" / f"rank{record['rank']}")))
    return sorted(steps, key=lambda step: step[0]["step"])


def _token_rows(outputs: dict[str, Any], total: int) -> dict[str, Any]:
    """The outputs with one row per token of the step along dim 0 (the logits, one per request, are not)."""
    return {name: t for name, t in outputs.items() if t.dim() >= 1 and t.shape[0] == total
            and not name.startswith("Module.logits_processor.")}


def _request_slices(steps: list[tuple[dict[str, Any], dict[str, Any]]], rows_of=lambda record: record["rows"]):
    """Per (request, first prompt position, tokens): its rows of every token-row output of its step."""
    slices = {}
    for record, outputs in steps:
        tensors = _token_rows(outputs, record["total_num_scheduled_tokens"])
        for row in rows_of(record):
            cut = slice(row["offset"], row["offset"] + row["tokens"])
            slices[(row["request_id"], row["computed"], row["tokens"])] = {n: t[cut] for n, t in tensors.items()}
    return slices


def _single_rows(single: dict[tuple[str, int, int], dict[str, Any]], request_id: str, computed: int, tokens: int):
    """The single-request rows covering prompt positions [computed, computed + tokens) of this request."""
    for (rid, start, count), tensors in single.items():
        if rid == request_id and start <= computed and computed + tokens <= start + count:
            return {n: t[computed - start: computed - start + tokens] for n, t in tensors.items()}
    raise AssertionError(f"{request_id} [{computed}, {computed + tokens}) ran in no single-request step")


def _mismatches(packed, single) -> list[str]:
    """Per packed request slice, the outputs that differ from the single-request run beyond the floor."""
    found = []
    for (request_id, computed, tokens), tensors in packed.items():
        alone = _single_rows(single, request_id, computed, tokens)
        assert set(tensors) == set(alone), set(tensors) ^ set(alone)
        found += [f"{request_id}@{computed}: {name}" for name, t in tensors.items() if not within_floor(t, alone[name])]
    return found


def test_the_log_records_the_runners_row_order_not_the_schedulers(dumps: PackingDumps) -> None:
    (a, _), (b, _), (c, _), (d, _) = dumps.requests
    records = [record for _, record in dispatch_records(dumps.infer["packed"])]
    assert [[(r["request_id"], r["offset"], r["tokens"], r["computed"]) for r in record["rows"]] for record in records] == [
        [(d, 0, 4, 0), (a, 4, 4, 0)],
        [(a, 0, 1, 4), (d, 1, 2, 4), (b, 3, 3, 0)],  # decode first; D's second chunk covers positions 4, 5
        [(b, 0, 1, 3), (c, 1, 5, 0)],
    ]
    assert [record["scheduler_order"] for record in records] == [[d, a], [d, a, b], [b, c]]
    assert all(record["rows_source"] == "input_batch" and record["tp_size"] == 1 for record in records)
    tp2 = [record for _, record in dispatch_records(dumps.infer["tp2"])]
    assert sorted((r["tp_rank"], r["tp_ranks"], r["rank"]) for r in tp2 if r["step"] == 0) == [(0, [0, 1], 0), (1, [0, 1], 1)]


def test_inference_packed_slices_equal_the_single_request_steps(dumps: PackingDumps) -> None:
    packed = _request_slices(_inference_steps(dumps.infer["packed"]))
    single = _request_slices(_inference_steps(dumps.infer["single"]))
    assert len(packed) == 7  # every row of every packed step: 4 prefills or chunks, 2 decodes, 1 more chunk
    assert min(len(tensors) for tensors in packed.values()) >= 20  # embeddings, norms, projections, attention
    assert _mismatches(packed, single) == []


def test_a_wrong_slice_order_is_caught(dumps: PackingDumps) -> None:
    """Cutting step 1 in the scheduler's order (D, A, B) instead of the runner's (A, D, B) gives other rows."""

    def scheduler_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
        by_id = {row["request_id"]: row for row in record["rows"]}
        rows, offset = [], 0
        for request_id in record["scheduler_order"]:
            rows.append({**by_id[request_id], "offset": offset})
            offset += by_id[request_id]["tokens"]
        return rows

    steps = _inference_steps(dumps.infer["packed"])
    misordered = _request_slices(steps[1:2], scheduler_rows)
    single = _request_slices(_inference_steps(dumps.infer["single"]))
    wrong = _mismatches(misordered, single)
    (a, _), _, _, (d, _) = dumps.requests
    assert any(entry.startswith(f"{a}@4") for entry in wrong) and any(entry.startswith(f"{d}@4") for entry in wrong)


# --- training: cutting micro-batches with update_actor_log.jsonl's rows ----------------------------


def _training_slices(dump_path: Path) -> dict[str, dict[str, Any]]:
    """Per request: its tokens of every output with the micro-batch's [batch, tokens] leading dims."""
    slices: dict[str, dict[str, Any]] = {}
    for record in engine_records(dump_path):
        outputs = step_outputs(dump_path / f"step{record['step']}" / f"rank{record['rank']}")
        rows = record["rows"]
        batch = 1 if record["layout"] == "packed" else len(rows)
        length = (sum(row["tokens"] for row in rows) if record["layout"] == "packed"
                  else max(row["tokens"] for row in rows))
        # Eager attention's second output is its weights, [batch, heads, tokens, tokens]: no token rows
        # (with 4 heads and 4 tokens its leading dims look like [batch, tokens]).
        tensors = {n: t for n, t in outputs.items() if t.dim() >= 2 and tuple(t.shape[:2]) == (batch, length)
                   and not n.endswith("Attention.forward.0.output.1")}
        for row in rows:
            slices[row["request_id"]] = {
                n: t[row["batch_index"], row["offset"]: row["offset"] + row["tokens"]] for n, t in tensors.items()}
    return slices


@pytest.mark.parametrize("name", ["pack-mb2", "padded-mb2"])
def test_training_micro_batch_slices_equal_micro_batch_one(dumps: PackingDumps, name: str) -> None:
    records = engine_records(dumps.train[name])
    assert {record["layout"] for record in records} == {"packed" if name == "pack-mb2" else "padded"}
    assert all(record["num_requests"] == 2 and [r["request_id"] for r in record["rows"]] == record["request_ids"]
               for record in records)
    packed, alone = _training_slices(dumps.train[name]), _training_slices(dumps.train["pack-mb1"])
    expected = [request_id for request_id, _ in dumps.requests][: 4 if name == "pack-mb2" else 2]
    assert sorted(packed) == sorted(expected)
    for request_id, tensors in packed.items():
        assert len(tensors) >= 28 and set(tensors) == set(alone[request_id]), request_id
        assert [n for n, t in tensors.items() if not within_floor(t, alone[request_id][n])] == [], request_id


def test_training_rows_in_the_wrong_order_are_caught(dumps: PackingDumps) -> None:
    """The micro-batch's second request cut at the first one's offset does not match its own run."""
    record = engine_records(dumps.train["pack-mb2"])[0]
    first, second = record["rows"]
    outputs = step_outputs(dumps.train["pack-mb2"] / f"step{record['step']}" / f"rank{record['rank']}")
    alone = _training_slices(dumps.train["pack-mb1"])[second["request_id"]]
    total = first["tokens"] + second["tokens"]
    tokens = min(first["tokens"], second["tokens"])
    wrong = [n for n, want in alone.items() if n in outputs and outputs[n].shape[:2] == (1, total)
             and not within_floor(outputs[n][0, :tokens], want[:tokens])]
    assert len(wrong) >= 10


# --- TP 2: full outputs on both ranks, shards rebuilt in their layout -------------------------------

HEAD_DIM = QWEN2_CONFIG["hidden_size"] // QWEN2_CONFIG["num_attention_heads"]
Q_SIZE = QWEN2_CONFIG["num_attention_heads"] * HEAD_DIM
KV_SIZE = QWEN2_CONFIG["num_key_value_heads"] * HEAD_DIM
# Column-parallel outputs: each TP rank holds a shard (everything else is all-reduced or replicated).
SHARDED = (".qkv_proj.", ".gate_up_proj.", ".act_fn.", ".attn.", ".rotary_emb.")


def _rebuild(name: str, shards: list[Any]) -> Any:
    """The TP=1 tensor from the TP ranks' shards, in vLLM's per-rank layouts."""
    import torch

    size = len(shards)
    if ".qkv_proj." in name:  # per rank [q_r | k_r | v_r]
        parts = [shard.split([Q_SIZE // size, KV_SIZE // size, KV_SIZE // size], dim=-1) for shard in shards]
        return torch.cat([part[kind] for kind in range(3) for part in parts], dim=-1)
    if ".gate_up_proj." in name:  # per rank [gate_r | up_r]
        halves = [shard.chunk(2, dim=-1) for shard in shards]
        return torch.cat([half[kind] for kind in range(2) for half in halves], dim=-1)
    if ".rotary_emb." in name:  # [tokens, heads_r, head_dim]
        return torch.cat(shards, dim=1)
    return torch.cat(shards, dim=-1)  # attn, act_fn: this rank's heads / intermediate units


def _tp_steps(dump_path: Path) -> list[list[dict[str, Any]]]:
    """Per step, each TP rank's outputs (rank 0 first)."""
    ranks = [_inference_steps(dump_path, tp_rank) for tp_rank in (0, 1)]
    assert [r["step"] for r, _ in ranks[0]] == [r["step"] for r, _ in ranks[1]]
    return [[outputs for _, outputs in pair] for pair in zip(*ranks, strict=True)]


def test_tp2_full_outputs_agree_and_rebuilt_shards_equal_tp1(dumps: PackingDumps) -> None:
    tp1 = [outputs for _, outputs in _inference_steps(dumps.infer["packed"])]
    rebuilt = full = 0
    for step, (rank0, rank1) in enumerate(_tp_steps(dumps.infer["tp2"])):
        assert list(rank0) == list(rank1) == list(tp1[step])  # the same modules, in the same order
        for name, want in tp1[step].items():
            if any(part in name for part in SHARDED):
                assert rank0[name].shape != want.shape, name
                assert within_floor(_rebuild(name, [rank0[name], rank1[name]]), want), name
                rebuilt += 1
            else:
                assert rank0[name].equal(rank1[name]), f"step {step}: {name} differs between the TP ranks"
                assert within_floor(rank0[name], want), f"step {step}: {name}"
                full += 1
    assert rebuilt >= 3 * 2 * 5 and full >= 3 * 2 * 8  # per step and layer: 5 sharded, 8 full outputs


# --- faults: each shows where it should, and only there --------------------------------------------


def _first_difference(clean: dict[str, Any], faulty: dict[str, Any]) -> str | None:
    """The first module output (in call order) that differs beyond the floor."""
    assert list(clean) == list(faulty)
    return next((name for name, want in clean.items() if not within_floor(faulty[name], want)), None)


def test_the_batch_fault_shows_at_two_requests_and_not_at_one(dumps: PackingDumps) -> None:
    clean = _inference_steps(dumps.infer["packed"])
    faulty = _inference_steps(dumps.infer["batch-fault"])
    assert all(len(record["rows"]) > 1 for record, _ in clean)
    assert [_first_difference(c, f) for (_, c), (_, f) in zip(clean, faulty, strict=True)] == [BATCH_CULPRIT] * 3
    single = _inference_steps(dumps.infer["single"])
    faulty_single = _inference_steps(dumps.infer["batch-fault-single"])
    assert len(single) == 6
    assert [_first_difference(c, f) for (_, c), (_, f) in zip(single, faulty_single, strict=True)] == [None] * 6


def test_the_tp_shard_fault_is_named_on_its_rank(dumps: PackingDumps) -> None:
    for clean, faulty in zip(_tp_steps(dumps.infer["tp2"]), _tp_steps(dumps.infer["tp-shard-fault"]), strict=True):
        first = [_first_difference(clean[rank], faulty[rank]) for rank in (0, 1)]
        order = list(clean[0])
        culprit = min(filter(None, first), key=order.index)
        assert culprit == SHARD_CULPRIT and first[1] == SHARD_CULPRIT
        assert first[0] == f"Module.model.layers.{LAST_LAYER}.mlp.down_proj.RowParallelLinear.forward.0.output.0"
        # Rebuilt, the fault sits in rank 1's halves of gate and up only.
        rebuilt = _rebuild(SHARD_CULPRIT, [faulty[0][SHARD_CULPRIT], faulty[1][SHARD_CULPRIT]])
        want = _rebuild(SHARD_CULPRIT, [clean[0][SHARD_CULPRIT], clean[1][SHARD_CULPRIT]])
        shifted = ((rebuilt.float() - want.float()).abs() > BF16_FLOOR).any(dim=0).nonzero().flatten().tolist()
        inner = QWEN2_CONFIG["intermediate_size"]
        assert shifted == [*range(inner // 2, inner), *range(inner + inner // 2, 2 * inner)]


def test_every_variant_is_a_dump_path(dumps: PackingDumps) -> None:
    """What the chain test through `dumps pair/compare` starts from: every variant's dump_path."""
    assert set(dumps.infer) == {"packed", "single", "tp2", "batch-fault", "batch-fault-single", "tp-shard-fault"}
    assert set(dumps.train) == {"pack-mb2", "pack-mb1", "padded-mb2"}
    for dump_path in [*dumps.infer.values(), *dumps.train.values()]:
        assert list(dump_path.glob("*/step0/rank*/dump.json")) or list(dump_path.glob("step0/rank*/dump.json"))
