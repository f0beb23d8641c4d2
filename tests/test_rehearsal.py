"""The rehearsal: the consistency chain closes on real upstream code, from `apply` to `dumps compare`.

Training side: the released verl 0.9.1 wheel patched by `rlpatch apply --mode consistency`, its real
FSDP engine behind the v1 `compute_log_prob` on CPU (rehearsal.training; one run per session, shared
with test_rehearsal_training.py). Inference side: the released vLLM-Ascend 0.23.0 wheel patched the
same way; the patched runner's own dump code and the `dispatch_logger.py` apply created there drive the
real msprobe 26.2.0 in two worker processes of the same rank at once, two TP=1 rollout replicas of one
node (rehearsal.inference). Then `dumps check` on both sides, `dumps pair` and `dumps compare` with the
real `msprobe compare`, for FSDP2 (one rank, msprobe steps [1, 2]) and FSDP1 (two ranks).
"""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REHEARSAL_MODULES, run_cli
from rehearsal_support import VLLM_SUFFIX, InferenceSide, inference_side

for _module in REHEARSAL_MODULES:
    pytest.importorskip(_module)

pytestmark = [pytest.mark.runtime, pytest.mark.upstream, pytest.mark.slow]
CHAINS = ["fsdp2-ws1-steps", "fsdp1-ws2"]


@pytest.fixture(scope="module")
def vllm_ascend(rehearsal_vllm_ascend: Path) -> Path:
    return rehearsal_vllm_ascend


@pytest.fixture(scope="module")
def chains(rehearsal_training, vllm_ascend: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Per training scenario: (training dump_path, the inference side run for its requests)."""
    scenarios, sides = rehearsal_training
    result = {}
    for name in CHAINS:
        scenario, side = scenarios[name], sides[name]
        prompts = dict(zip(scenario.request_ids, map(list, scenario.prompts), strict=True))
        logged = [r for record in _records(side.dump_path) for r in record["request_ids"]]
        unlogged = [r for r in scenario.request_ids if r not in logged]
        infer = inference_side(vllm_ascend, tmp_path_factory.mktemp(f"infer-{name}"), side.model_dir,
                               [(r, prompts[r]) for r in logged[:2]],
                               (unlogged[0], prompts[unlogged[0]]) if unlogged else None)
        result[name] = (side.dump_path, infer)
    return result


def _records(dump_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for log in sorted(dump_path.glob("*/update_actor_log.jsonl"))
            for line in log.read_text(encoding="utf-8").splitlines()]


def _json(*args: str) -> tuple[int, dict[str, Any]]:
    result = run_cli(*args, "--format", "json")
    assert result.stderr == "", result.stderr
    return result.exit_code, json.loads(result.stdout)


def test_every_dump_stop_site_of_the_real_runner_logs_first(vllm_ascend: Path) -> None:
    """The driver runs `_finish_msprobe_step` right before `_finalize_dump_data`: so does every real site."""
    source = (vllm_ascend / "vllm_ascend/worker/model_runner_v1.py").read_text(encoding="utf-8")
    sites = 0
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for before, statement in zip([None, *body], body, strict=False):
            if isinstance(statement, ast.Expr) and ast.unparse(statement) == "self._finalize_dump_data()":
                sites += 1
                assert before is not None and ast.unparse(before) == "self._finish_msprobe_step(scheduler_output)"
    assert sites == 4


@pytest.mark.parametrize("name", CHAINS)
def test_replicas_write_their_own_pid_folders(chains, name: str) -> None:
    infer: InferenceSide = chains[name][1]
    assert not list(infer.dump_path.glob("step*")), "nothing at {dump_path}/step{N}: msprobe's path was moved"
    for pid in infer.pids:
        folder = infer.dump_path / str(pid)
        records = [json.loads(line) for line in (folder / "dispatch_log.jsonl").read_text().splitlines()]
        assert [(r["step"], r["rank"], r["pid"]) for r in records] == [(n, 0, pid) for n in range(3)]
        assert [r["phase"] for r in records] == ["prefill", "decode", "prefill"]
        assert sorted(p.name for p in folder.glob("step*")) == ["step0", "step1", "step2"]
        assert all((folder / f"step{n}" / "rank0" / "dump.json").is_file() for n in range(3))


@pytest.mark.parametrize("name", CHAINS)
def test_dumps_check_finds_no_problem_on_either_side(chains, name: str) -> None:
    train, infer = chains[name]
    code, report = _json("dumps", "check", str(train))
    assert code == 0 and report["problems"] == [] and report["mode"] == "consistency", report
    code, report = _json("dumps", "check", str(infer.dump_path))
    assert code == 0 and report["problems"] == [], report
    pids = ", ".join(map(str, sorted(infer.pids)))
    assert report["notes"][0] == (f"rank0 was written by 2 processes at the same time (pids {pids}): rollout "
                                  "replicas, each in its own {pid} folder")
    # each replica logs a prefill and a decode of its pair, then replica 0 one unlogged request alone and
    # replica 1 two new requests together: 5 steps of 1 request, 1 of 2, 5 distinct requests
    assert report["notes"][1:] == ["6 logged step(s) say where each request's rows are (5 of 1 request(s), 1 of 2 "
                                   "request(s)), 5 request(s) in all: `dumps pair` pairs them request by request"]


@pytest.mark.parametrize("name", CHAINS)
def test_dumps_pair_pairs_each_single_request_prefill(chains, name: str) -> None:
    train, infer = chains[name]
    code, data = _json("dumps", "pair", "--train", str(train), "--infer", str(infer.dump_path))
    assert code == 0 and data["problems"] == [], data
    assert sorted(p["request_id"] for p in data["pairs"]) == sorted(infer.paired)
    assert {p["infer"]["pid"] for p in data["pairs"]} == set(infer.pids)
    why = {(u["request_id"], u["side"]): u["why"] for u in data["unpaired"]}
    for request_id in infer.paired:  # its decode step
        assert "(a decode)" in why.pop((request_id, "infer"))
    for request_id, reason in infer.refused.items():
        assert reason in why.pop((request_id, "infer"))
    assert why == {}, why
    assert any(VLLM_SUFFIX[1:] not in p["request_id"] for p in data["pairs"])


# Rows msprobe matches by name whose modules compute different things in the two engines, so they
# differ in shape whatever the numbers: Hugging Face's `mlp.act_fn` is SiLU of the gate projection
# ([tokens, intermediate]) where vLLM's SiluAndMul takes gate and up fused ([tokens, 2 x intermediate])
# and multiplies them; the decoder layer's first input is the hidden states in Hugging Face and the
# positions in vLLM (`forward(positions, hidden_states, residual)`).
DIFFERENT_BY_DESIGN = (".mlp.act_fn.", "DecoderLayer.forward.0.input.0")


@pytest.mark.parametrize("name", CHAINS)
def test_dumps_compare_compares_every_pair_with_the_real_msprobe(chains, name: str, tmp_path: Path) -> None:
    train, infer = chains[name]
    out = tmp_path / "out"
    result = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer.dump_path), "--backend", "fsdp",
                     "-o", str(out), "--format", "json")
    data = json.loads(result.stdout)
    assert sorted(r["request_id"] for r in data["results"]) == sorted(infer.paired)
    for entry in data["results"]:
        assert entry["error"] is None and entry["exit_code"] == 0, entry
        assert entry["rows"]["pass"] >= 30, entry  # every decoder-layer projection, norm and the embedding
        with open(entry["csv"], encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        not_pass = [r["NPU Name"] for r in rows if r["Result"].strip().lower() != "pass"]
        assert not_pass and all(any(part in n for part in DIFFERENT_BY_DESIGN) for n in not_pass), not_pass
        projections = [r for r in rows if ".q_proj." in r["NPU Name"] or ".v_proj." in r["NPU Name"]]
        assert projections and all(float(r["Cosine"]) > 0.9999 for r in projections if r["Bench Name"] != "N/A")
