"""Issue 27, consumer side, on small files: pairing by rows, cutting, TP rebuild, scoping, batch sizes.

The chain on the rehearsal's real dumps (verl, vLLM-Ascend runner, msprobe 26.2.0) is
tests/test_dumps_rows_chain.py; these pin the rules on hand-written logs and tensors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rlpatch.dumps.api import PairOptions, pair_dumps
from rlpatch.dumps.batches import batch_lines, by_batch_size, per_request
from rlpatch.dumps.divergence import Divergence, Outcome
from rlpatch.dumps.layout import scan
from rlpatch.dumps.scoping import scoping_problems

torch = pytest.importorskip("torch")


def _write_log(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _dump(folder: Path, tensors: dict[str, Any], task: str = "tensor") -> Path:
    """A msprobe-shaped tensor dump: one module per tensor, its output.0 saved as msprobe saves it."""
    (folder / "dump_tensor_data").mkdir(parents=True, exist_ok=True)
    data = {}
    for name, tensor in tensors.items():
        data_name = f"{name}.output.0.pt"
        torch.save(tensor, folder / "dump_tensor_data" / data_name)
        data[name] = {"output": [{"type": "torch.Tensor", "dtype": str(tensor.dtype), "shape": list(tensor.shape),
                                  "data_name": data_name}]}
    path = folder / "dump.json"
    path.write_text(json.dumps({"task": task, "level": "L0", "framework": "pytorch", "dump_data_dir": None,
                                "data": data}), encoding="utf-8")
    return path


ROWS_STEP0 = [{"request_id": "d", "type": "new", "offset": 0, "tokens": 4, "computed": 0},
              {"request_id": "a", "type": "new", "offset": 4, "tokens": 3, "computed": 0}]
ROWS_STEP1 = [{"request_id": "a", "type": "cached", "offset": 0, "tokens": 1, "computed": 3},
              {"request_id": "d", "type": "cached", "offset": 1, "tokens": 2, "computed": 4}]


def _run(tmp_path: Path, tp: int = 1) -> tuple[Path, Path]:
    train, infer = tmp_path / "train", tmp_path / "infer"
    _write_log(train / "11" / "update_actor_log.jsonl", [
        {"pid": 11, "rank": 0, "step": 0, "phase": "log_prob", "request_ids": ["a", "d"], "num_requests": 2,
         "layout": "packed", "rows": [{"request_id": "a", "batch_index": 0, "offset": 0, "tokens": 3},
                                      {"request_id": "d", "batch_index": 0, "offset": 3, "tokens": 6}]}])
    _dump(train / "step0" / "rank0", {"Module.h": torch.arange(9 * 2, dtype=torch.float32).reshape(1, 9, 2)})
    for rank in range(tp):
        pid = 20 + rank
        tp_fields = {"tp_rank": rank, "tp_size": tp, "tp_ranks": list(range(tp))}
        _write_log(infer / str(pid) / "dispatch_log.jsonl", [
            {"pid": pid, "rank": rank, "step": step, "phase": "prefill" if step == 0 else "mixed",
             "total_num_scheduled_tokens": sum(r["tokens"] for r in rows), "rows": rows, "rows_source": "input_batch",
             "scheduler_order": [r["request_id"] for r in rows][::-1], **tp_fields}
            for step, rows in enumerate((ROWS_STEP0, ROWS_STEP1))])
        for step, total in ((0, 7), (1, 3)):
            _dump(infer / str(pid) / f"step{step}" / f"rank{rank}", {"Module.h": torch.zeros(total, 2)})
    return train, infer


def test_pair_pairs_every_request_row_and_chunks_by_computed(tmp_path: Path) -> None:
    train, infer = _run(tmp_path)
    data = pair_dumps(PairOptions(str(train), str(infer))).data
    slices = {(p["request_id"], p["infer"]["step"]): p["slices"] for p in data["pairs"]}
    assert set(slices) == {("d", 0), ("a", 0), ("d", 1)}
    assert slices[("d", 0)]["train"]["slice"] == [3, 7] and slices[("d", 0)]["infer"]["slice"] == [0, 4]
    assert slices[("d", 1)]["train"]["slice"] == [7, 9] and slices[("d", 1)]["infer"]["slice"] == [1, 3]
    assert slices[("a", 0)]["infer"]["requests_in_step"] == 2
    assert [(u["request_id"], u["side"]) for u in data["unpaired"]] == [("a", "infer")]
    assert "(a decode)" in data["unpaired"][0]["why"]


def test_a_long_decode_is_one_unpaired_line_per_request_and_is_not_kept(tmp_path: Path) -> None:
    """Issue 30: a rollout that decodes for thousands of steps says so once per request (with the count),
    and its decode rows are noted as they are read, never kept: `pair`'s answer and memory follow the
    requests, not the log (bench: a 200 MB dispatch log, 22 MiB peak)."""
    train, infer = _run(tmp_path)
    log = infer / "20" / "dispatch_log.jsonl"
    decodes = [{"pid": 20, "rank": 0, "step": step, "phase": "decode", "total_num_scheduled_tokens": 2,
                "rows_source": "input_batch", "scheduler_order": ["a", "d"],
                "rows": [{"request_id": "a", "type": "cached", "offset": 0, "tokens": 1, "computed": 2 + step},
                         {"request_id": "d", "type": "cached", "offset": 1, "tokens": 1, "computed": 5 + step}]}
               for step in range(2, 1002)]
    with open(log, "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in decodes))
    data = pair_dumps(PairOptions(str(train), str(infer))).data
    assert {(p["request_id"], p["infer"]["step"]) for p in data["pairs"]} == {("d", 0), ("a", 0), ("d", 1)}
    why = {(u["request_id"], u["side"]): u["why"] for u in data["unpaired"]}
    assert sorted(why) == [("a", "infer"), ("d", "infer")], why
    assert why[("a", "infer")].startswith("inference step 1 (pid 20, rank 0): positions [3, 4) go past")
    assert why[("a", "infer")].endswith("(a decode); and 1000 more of its rows in later steps")
    assert why[("d", "infer")].endswith("(a decode); and 999 more of its rows in later steps")


def test_a_training_record_that_could_not_read_its_rows_says_why(tmp_path: Path) -> None:
    train, infer = _run(tmp_path)
    _write_log(train / "11" / "update_actor_log.jsonl", [
        {"pid": 11, "rank": 0, "step": 0, "request_ids": ["a", "d"], "num_requests": 2, "rows_error": "ValueError: x"}])
    data = pair_dumps(PairOptions(str(train), str(infer))).data
    assert data["pairs"] == []
    assert any(u["side"] == "train" and "could not read its rows" in u["why"] for u in data["unpaired"])


def test_cut_takes_the_rows_and_recomputes_msprobe_statistics(tmp_path: Path) -> None:
    from rlpatch.dumps.slicing import cut

    train = _dump(tmp_path / "t", {"Module.h": torch.arange(9 * 2, dtype=torch.bfloat16).reshape(1, 9, 2),
                                   "Module.mask": torch.ones(1, 1, 9, 9)})
    infer = _dump(tmp_path / "i", {"Module.h": torch.arange(3 * 2, dtype=torch.bfloat16).reshape(3, 2)})
    answer = cut({"train": str(train), "infer": str(infer), "out": str(tmp_path / "cut"),
                  "train_rows": {"batch_index": 0, "start": 7, "tokens": 2, "token_dim": 1, "batch": 1, "length": 9},
                  "infer_rows": {"offset": 1, "tokens": 2, "step_tokens": 3}, "shards": []})
    document = json.loads(Path(answer["train"]).read_text())
    leaf = document["data"]["Module.h"]["output"][0]
    piece = torch.load(Path(answer["train"]).parent / "dump_tensor_data" / leaf["data_name"])
    assert piece.equal(torch.arange(14, 18, dtype=torch.bfloat16).reshape(2, 2)) and leaf["shape"] == [2, 2]
    assert (leaf["Max"], leaf["Min"], leaf["Mean"]) == (17.0, 14.0, 15.5)
    assert leaf["Norm"] == pytest.approx(torch.norm(piece).item())
    assert document["data"]["Module.mask"]["output"][0] is None  # no token rows of the step: not cut, reported
    assert answer["unsliced"] == ["train Module.mask.output.0 [1, 1, 9, 9]"]


def test_tp_rebuilds_qkv_and_gate_up_in_their_layout(tmp_path: Path) -> None:
    from rlpatch.dumps.tp import Rebuilder, layout_of

    q, k, v = torch.randn(3, 8), torch.randn(3, 4), torch.randn(3, 4)
    gate, up = torch.randn(3, 6), torch.randn(3, 6)
    shards = []
    for rank in range(2):
        qkv = torch.cat([q.chunk(2, -1)[rank], k.chunk(2, -1)[rank], v.chunk(2, -1)[rank]], -1)
        gate_up = torch.cat([gate.chunk(2, -1)[rank], up.chunk(2, -1)[rank]], -1)
        shards.append(_dump(tmp_path / f"r{rank}", {"Module.model.layers.0.self_attn.qkv_proj.QKVParallelLinear.forward.0": qkv,
                                                   "Module.model.layers.0.mlp.gate_up_proj.M.forward.0": gate_up}))
    train = _dump(tmp_path / "t", {f"Module.model.layers.0.self_attn.{n}.Linear.forward.0": t
                                   for n, t in (("q_proj", q), ("k_proj", k), ("v_proj", v))})
    rebuilder = Rebuilder([str(s) for s in shards], str(train))
    label = "Module.model.layers.0.self_attn.qkv_proj.QKVParallelLinear.forward.0.output.0"
    first = torch.load(shards[0].parent / "dump_tensor_data" / f"{label}.pt")
    full, why = rebuilder.rebuild(label, f"{label}.pt", first)
    assert why == "" and full.equal(torch.cat([q, k, v], -1))
    label = "Module.model.layers.0.mlp.gate_up_proj.M.forward.0.output.0"
    first = torch.load(shards[0].parent / "dump_tensor_data" / f"{label}.pt")
    full, why = rebuilder.rebuild(label, f"{label}.pt", first)
    assert why == "" and full.equal(torch.cat([gate, up], -1))
    assert layout_of("Module.model.layers.0.mlp.down_proj.R.forward.0.output.0") == "full"
    assert layout_of("Module.model.layers.0.mlp.down_proj.R.forward.0.input.0") == "concat"


def test_qkv_without_training_widths_is_not_compared_never_a_divergence(tmp_path: Path) -> None:
    from rlpatch.dumps.tp import Rebuilder

    label = "Module.model.layers.0.self_attn.qkv_proj.Q.forward.0"
    shards = [_dump(tmp_path / f"r{rank}", {label: torch.randn(3, 8)}) for rank in range(2)]
    train = _dump(tmp_path / "t", {"Module.other.forward.0": torch.randn(1)})
    full, why = Rebuilder([str(s) for s in shards], str(train)).rebuild(
        f"{label}.output.0", f"{label}.output.0.pt", torch.load(shards[0].parent / "dump_tensor_data" / f"{label}.output.0.pt"))
    assert full is None and why.startswith("sharded: not compared")


def test_check_flags_a_request_scoped_cut_in_the_schedulers_order(tmp_path: Path) -> None:
    _, infer = _run(tmp_path)
    problems = scoping_problems(scan(str(infer), validate=False), "d")
    # Step 0: scheduler order (a, d) puts d at [3, 7), the runner at [0, 4); step 1: [1, 3) vs [0, 2)... both wrong.
    assert len(problems) == 2 and "cut rows [3, 7) for d" in problems[0] and "rows [0, 4)" in problems[0]
    assert scoping_problems(scan(str(infer), validate=False), "d-0a1b2c3d")[0].find("matches no scheduled id") > 0


def _divergence(module: str) -> Divergence:
    return Divergence(module, f"{module}.forward.0", f"{module}.forward.0", None, "norm_relative", 0.1, 0.0, 0.01)


def test_divergence_against_the_batch_size() -> None:
    entries = [Outcome(r, 0, v, _divergence(m) if m else None, n)
               for r, v, m, n in (("a", "diverges", "norm", 2), ("b", "diverges", "norm", 2),
                                  ("a", "within-floor", None, 1))]
    sizes = by_batch_size(entries)
    assert [(s["requests_in_step"], s["culprits"]) for s in sizes] == [(1, {}), (2, {"norm": 2})]
    requests = per_request(entries)
    assert requests[0] == {"request_id": "a", "pairs": 2, "verdicts": {"diverges": 1, "within-floor": 1},
                           "culprits": ["norm"], "batch_sizes": [2, 1]}
    lines = batch_lines({"requests": requests, "by_batch_size": sizes})
    assert "  2 request(s): 2 pair(s) (2 diverges); culprits: norm (2)" in lines


def test_a_statistics_dump_cannot_be_cut_and_says_what_works(tmp_path: Path) -> None:
    from rlpatch.dumps.api import CompareOptions, compare_dumps

    train, infer = _run(tmp_path)
    for dump in [*train.glob("step*/rank*/dump.json"), *infer.glob("*/step*/rank*/dump.json")]:
        dump.write_text(dump.read_text().replace('"task": "tensor"', '"task": "statistics"'))
    note = pair_dumps(PairOptions(str(train), str(infer))).data["notes"]
    assert any("task statistics" in n and "request-scoped dumping" in n for n in note)
    data = compare_dumps(CompareOptions(str(train), str(infer), out=str(tmp_path / "out"))).data
    assert {r["error"].split(":")[0] for r in data["results"]} == {"task statistics"}


def test_check_says_how_many_steps_of_each_batch_size_log_rows(tmp_path: Path) -> None:
    from rlpatch.dumps.api import CheckOptions, check_dumps

    _, infer = _run(tmp_path)
    summary = check_dumps(CheckOptions(str(infer)))
    assert summary.data["rows"] == {"steps_by_batch_size": {"2": 2}, "requests": 2}
    assert any("2 logged step(s) say where each request's rows are (2 of 2 request(s))" in n for n in summary.data["notes"])


def test_the_report_shows_the_divergence_against_the_batch_size() -> None:
    from rlpatch.dumps.batches import batch_html

    entries = [{"request_id": "a", "verdict": "diverges", "divergence": {"module": "m<1>"},
                "slices": {"infer": {"requests_in_step": 2}}}]
    sizes = by_batch_size([Outcome("a", 0, "diverges", _divergence("m<1>"), 2)])
    page = batch_html({"results": entries, "by_batch_size": sizes})
    assert "<td>2</td><td>1</td><td>1 diverges</td><td>m&lt;1&gt; (1)</td>" in page
    assert batch_html({"results": [{"request_id": "a"}], "by_batch_size": []}) == ""


def test_with_another_interpreter_the_cut_runs_as_a_script_there(tmp_path: Path) -> None:
    import sys

    from rlpatch.dumps.correlate import correlate
    from rlpatch.dumps.cutting import Cut, cut_pair

    train, infer = _run(tmp_path, tp=2)
    pairs = correlate(scan(str(train), validate=False), scan(str(infer), validate=False), "fsdp").pairs
    pair = next(p for p in pairs if p.request_id == "d" and p.infer.step == 0)
    assert pair.rows is not None and len(pair.rows.shards) == 2
    found = cut_pair(pair, str(tmp_path / "out"), [sys.executable, "-X", "utf8"])
    assert isinstance(found, Cut), found
    assert (tmp_path / "out" / "cut_spec.json").is_file()  # the script's spec: it ran in its own process
    leaf = json.loads(Path(found.train).read_text())["data"]["Module.h"]["output"][0]
    assert leaf["shape"] == [4, 2] and leaf["Min"] == 6.0  # training rows 3..6 of [1, 9, 2]
