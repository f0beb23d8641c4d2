"""Issue 27's chain on the rehearsal's real dumps: `rlpatch dumps pair/compare` cut by the logs' rows.

The dumps are the packing rehearsal's (conftest `rehearsal_packing`: verl 0.9.1's FSDP engine at
log-prob micro-batch 2 and 1; the patched vLLM-Ascend 0.23.0 runner statements around a vLLM-named
twin, packed, one request per step, TP 2, a batch-dependent and a TP-shard fault; msprobe 26.2.0
tensor dumps). Every verdict comes from the real `msprobe compare` run on the cut pairs; the oracle
for the cut is msprobe's own compare of the uncut single-request dumps.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REHEARSAL_MODULES
from rehearsal_support import PackingDumps

for _module in REHEARSAL_MODULES:
    pytest.importorskip(_module)

from rlpatch.dumps.api import CompareOptions, PairOptions, compare_dumps, pair_dumps  # noqa: E402
from rlpatch.dumps.command import compare_argv  # noqa: E402
from rlpatch.dumps.compare_csv import forward_rows, read_compare_csv  # noqa: E402
from rlpatch.dumps.mapping import map_training_dump  # noqa: E402

pytestmark = [pytest.mark.runtime, pytest.mark.upstream, pytest.mark.slow]

LAST_LAYER = 1  # rehearsal.training.QWEN2_CONFIG's two layers
BATCH_CULPRIT = f"model.layers.{LAST_LAYER}.post_attention_layernorm"
SHARD_CULPRIT = f"model.layers.{LAST_LAYER}.mlp"  # the module around gate_up_proj (its rows match HF's up_proj)


def _compare(train: Path, infer: Path, out: Path, **given: Any) -> dict[str, Any]:
    options = CompareOptions(train=str(train), infer=str(infer), out=str(out), jobs=2, **given)
    return compare_dumps(options).data


def _label(entry: dict[str, Any]) -> tuple[str, int]:
    return entry["request_id"], entry["slices"]["infer"]["computed"]


@pytest.fixture(scope="module")
def dumps(rehearsal_packing: PackingDumps) -> PackingDumps:
    return rehearsal_packing


@pytest.fixture(scope="module")
def packed(dumps: PackingDumps, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _compare(dumps.train["pack-mb2"], dumps.infer["packed"], tmp_path_factory.mktemp("packed"))


def test_pair_pairs_every_request_row_and_says_why_not(dumps: PackingDumps) -> None:
    summary = pair_dumps(PairOptions(train=str(dumps.train["pack-mb2"]), infer=str(dumps.infer["packed"])))
    data = summary.data
    assert summary.exit_code == 0 and not data["problems"]
    # 7 request rows in 3 packed steps: 4 prefills or first chunks, D's second chunk, 2 decodes.
    assert len(data["pairs"]) == 5 and len(data["unpaired"]) == 2
    assert {p["request_id"] for p in data["pairs"]} == {request_id for request_id, _ in dumps.requests}
    assert all("(a decode)" in u["why"] and u["side"] == "infer" for u in data["unpaired"])
    chunk = next(p for p in data["pairs"] if p["slices"]["infer"]["computed"] > 0)
    assert chunk["slices"]["train"]["slice"][0] == chunk["slices"]["train"]["offset"] + chunk["slices"]["infer"]["computed"]
    assert all(p["slices"]["infer"]["requests_in_step"] >= 2 for p in data["pairs"])
    assert any(line.startswith("  rows: train packed") for line in summary.lines)


def test_packed_slices_compare_clean_and_as_the_single_request_dumps(dumps: PackingDumps, packed: dict[str, Any],
                                                                     tmp_path: Path) -> None:
    assert [r["verdict"] for r in packed["results"]] == ["within-floor"] * 5 and packed["culprits"] == []
    for entry in packed["results"]:  # weights are kept; only eager attention's masks and weights have no token rows
        assert all(".parameters." not in name for name in entry["unsliced"])
        assert all("attention_mask" in name or "Attention.forward.0.output.1" in name or "logits_processor" in name
                   for name in entry["unsliced"]), entry["unsliced"]
    # The oracle: msprobe's own compare of request A's uncut dumps, training micro-batch 1 against its
    # single-request prefill (both whole: one request, nothing to cut).
    single = _compare(dumps.train["pack-mb1"], dumps.infer["single"], tmp_path / "single")
    request_id = dumps.requests[0][0]
    alone = next(r for r in single["results"] if _label(r) == (request_id, 0))
    out = tmp_path / "oracle"
    out.mkdir()
    mapped = map_training_dump(alone["train"]["path"], str(out))
    argv = compare_argv(mapped or alone["train"]["path"], alone["infer"]["path"], "fsdp", str(out), [sys.executable])
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    oracle_rows, _ = forward_rows(read_compare_csv(str(next(out.glob("compare_result_*.csv")))))
    cut = next(r for r in packed["results"] if _label(r) == (request_id, 0))
    cut_rows, _ = forward_rows(read_compare_csv(cut["csv"]))
    oracle = {row.name: row for row in oracle_rows if ".parameters." not in row.name}
    sliced = {row.name: row for row in cut_rows if ".parameters." not in row.name}
    assert set(sliced) == set(oracle) - {n for n in oracle if "attention_mask" in n or "output.1" in n}
    for name, row in sliced.items():
        assert row.result == oracle[name].result, name
        cosine, want = row.metrics.get("Cosine"), oracle[name].metrics.get("Cosine")
        if cosine and want and cosine[0].isdigit() and want[0].isdigit():
            assert abs(float(cosine) - float(want)) < 1e-3, name


def test_a_wrong_slice_order_is_caught(dumps: PackingDumps, tmp_path: Path) -> None:
    """Step 1's rows logged in the scheduler's order (D, A, B) instead of the runner's (A, D, B)."""
    infer = tmp_path / "infer"
    shutil.copytree(dumps.infer["packed"], infer)
    log = next(infer.glob("*/dispatch_log.jsonl"))
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    step = records[1]
    by_id, offset = {row["request_id"]: row for row in step["rows"]}, 0
    step["rows"] = []
    for request_id in step["scheduler_order"]:
        step["rows"].append({**by_id[request_id], "offset": offset})
        offset += by_id[request_id]["tokens"]
    log.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    data = _compare(dumps.train["pack-mb2"], infer, tmp_path / "out")
    verdicts = {(_label(r), r["infer"]["step"]): r["verdict"] for r in data["results"]}
    (a, _), _, _, (d, _) = dumps.requests
    # D's second chunk cut at A's decode row: different tokens from the embedding's input on, never clean.
    assert verdicts[((d, 4), 1)] not in ("agrees", "within-floor")
    assert {v for (_, s), v in verdicts.items() if s != 1} == {"within-floor"}


def test_tp2_against_fsdp_is_rebuilt_and_compares_clean(dumps: PackingDumps, tmp_path: Path) -> None:
    data = _compare(dumps.train["pack-mb2"], dumps.infer["tp2"], tmp_path)
    assert [r["verdict"] for r in data["results"]] == ["within-floor"] * 5 and data["culprits"] == []
    for entry in data["results"]:
        assert len(entry["slices"]["infer"]["tp_shards"]) == 2
        # Only weights split over the ranks are not compared (their activations are), never a divergence.
        assert entry["not_compared"] and all(".parameters.weight: sharded: not compared" in n
                                             for n in entry["not_compared"])


def test_a_fault_in_one_tp_ranks_shard_is_named(dumps: PackingDumps, tmp_path: Path) -> None:
    data = _compare(dumps.train["pack-mb2"], dumps.infer["tp-shard-fault"], tmp_path)
    assert {r["verdict"] for r in data["results"]} == {"diverges"}
    assert [c["module"] for c in data["culprits"]] == [SHARD_CULPRIT]
    # Inside it, msprobe's row for the rebuilt gate_up_proj output is where the cosine falls (its input agrees).
    rows, _ = forward_rows(read_compare_csv(data["results"][0]["csv"]))
    gate_up = {row.name.rsplit(".forward.0.", 1)[1]: float(row.metrics["Cosine"]) for row in rows
               if f"layers.{LAST_LAYER}." in row.name and "up_proj" in row.name and ".parameters." not in row.name}
    assert gate_up["input.0"] > 0.999 and gate_up["output.0"] < 0.9, gate_up


def test_the_batch_fault_is_named_at_two_requests_and_absent_at_one(dumps: PackingDumps, tmp_path: Path) -> None:
    """One inference folder holding the faulty runner's packed steps and its one-request steps: the
    divergence against the batch size shows the culprit only where the step packed several requests."""
    infer = tmp_path / "infer"
    for variant in ("batch-fault", "batch-fault-single"):
        for pid in dumps.infer[variant].iterdir():
            shutil.copytree(pid, infer / pid.name)
    data = _compare(dumps.train["pack-mb2"], infer, tmp_path / "out")
    sizes = {item["requests_in_step"]: item for item in data["by_batch_size"]}
    assert sizes[1]["culprits"] == {} and set(sizes[1]["verdicts"]) == {"within-floor"}
    assert all(set(sizes[n]["culprits"]) == {BATCH_CULPRIT} for n in sizes if n > 1)
    assert [c["module"] for c in data["culprits"]] == [BATCH_CULPRIT]
    assert {item["request_id"] for item in data["requests"]} == {request_id for request_id, _ in dumps.requests}
