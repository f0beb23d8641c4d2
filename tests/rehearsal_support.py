"""The rehearsal (real upstream code on CPU, end to end), shared by its test files and `make demo`.

Training side (rehearsal.training): the released verl 0.9.1 wheel patched by `rlpatch apply --mode
consistency`, its FSDP engine behind the v1 `compute_log_prob`, for the requests of each scenario.
Inference side (rehearsal.inference): the released vLLM-Ascend 0.23.0 wheel patched the same way, its
runner's own dump code driving msprobe 26.2.0 in two worker processes of the same rank at once (two
TP=1 rollout replicas of one node), on a vLLM-named twin of the same weights. Each replica prefills
one request of the scenario alone (the pair), decodes it, and runs a step the pairing must refuse:
a request the training side never logged, alone or two prefilled together.

The packing rehearsal (issue 27; `packing_dumps`, the session fixture `rehearsal_packing`): the same
runner code and twin run four requests packed in the runner's row order (with a chunked prefill and
a decode-first step), one per step, on two TP ranks, and with a batch-dependent or a TP-shard fault;
the training side runs them at log-prob micro-batch 2 and 1. `step_outputs`, `within_floor` and the
record readers below let tests cut and compare those dumps with torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import REPO, run_cli

REHEARSAL = REPO / "tests" / "rehearsal"
VLLM_ASCEND_VERSION = "0.23.0"
PROMPTS = [[3, 4, 5, 6], [7, 8, 9], [10, 11, 12, 13, 14]]
VLLM_SUFFIX = "-0a1b2c3d"  # vLLM >= 0.14 appends -{8 hex} to the request id it is given


def request_ids(count: int) -> list[str]:
    return [uuid.uuid4().hex for _ in range(count)]  # as verl's LLMServerClient makes them


# The packing rehearsal's requests A, B, C, D (D is prefilled in two chunks on the inference side).
PACK_PROMPTS = [[3, 4, 5, 6], [7, 8, 9], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19, 20]]
PACK_SCENARIOS = ("pack-mb2", "pack-mb1", "padded-mb2")


def training_scenarios() -> list[Any]:
    """FSDP2 (as verl ships it) with msprobe steps [1, 2] of three micro-batches; FSDP1 (verl's default
    strategy) on two ranks; LoRA, whose reference pass runs through the same compute_log_prob. For the
    packing rehearsal, the same four requests on two FSDP2 ranks at log-prob micro-batch 2 (two requests
    packed per rank), on one rank at micro-batch 1 (one rank: a second worker would only add its start),
    and the first two at micro-batch 2 without remove-padding (padded rows)."""
    from rehearsal.training import Scenario

    packed = request_ids(4)
    return [
        Scenario("fsdp2-ws1-steps", request_ids(3), PROMPTS, world_size=1, strategy="fsdp2", msprobe_steps=[1, 2]),
        Scenario("fsdp1-ws2", request_ids(2), PROMPTS[:2], world_size=2, strategy="fsdp"),
        Scenario("lora-ws1", request_ids(2), PROMPTS[:2], world_size=1, strategy="fsdp2", lora=True),
        Scenario("pack-mb2", packed, PACK_PROMPTS, world_size=2, strategy="fsdp2", micro_batch=2),
        Scenario("pack-mb1", packed, PACK_PROMPTS, world_size=1, strategy="fsdp2", micro_batch=1),
        Scenario("padded-mb2", packed[:2], PACK_PROMPTS[:2], world_size=1, strategy="fsdp2", micro_batch=2,
                 remove_padding=False),
    ]


def patched_vllm_ascend(folder: Path) -> Path:
    """The released vLLM-Ascend wheel, unpacked and patched with `rlpatch apply --mode consistency`."""
    from rlpatch.upstream.wheelcache import fresh_copy

    tree = fresh_copy("vllm-ascend", VLLM_ASCEND_VERSION, folder / f"vllm-ascend-{VLLM_ASCEND_VERSION}")
    result = run_cli("apply", "--mode", "consistency", "--vllm-ascend-root", str(tree))
    assert result.exit_code == 0, result.stdout + result.stderr
    return tree


def _msprobe_config(path: Path, dump_path: Path) -> Path:
    """What gen writes for the inference side of a consistency run (task tensor, level L0, every step)."""
    path.write_text(json.dumps({"task": "tensor", "dump_path": str(dump_path), "rank": [], "step": [], "level": "L0",
                                "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}))
    return path


def _request(request_id: str, prompt: list[int], kind: str) -> dict[str, Any]:
    return {"request_id": request_id, "type": kind, "prompt": prompt}


@dataclass
class InferenceSide:
    dump_path: Path
    pids: list[int]
    paired: list[str]  # the requests each replica prefilled alone
    refused: dict[str, str]  # request id -> what the pairing must say (a substring of its reason)


def replica_steps(paired: list[tuple[str, list[int]]], unlogged: tuple[str, list[int]] | None
                  ) -> tuple[list[list[dict[str, Any]]], dict[str, str]]:
    """Two replicas: each prefills one request alone (with vLLM's id suffix on the first), then decodes
    it; the first then prefills `unlogged` (a request the training side did not log; by default a new
    one) alone, the second two new requests together."""
    steps: list[list[dict[str, Any]]] = []
    refused: dict[str, str] = {}
    unlogged = unlogged or (request_ids(1)[0], PROMPTS[0])  # every request was logged: one it never saw
    for n, (request_id, prompt) in enumerate(paired):
        sent = request_id + (VLLM_SUFFIX if n == 0 else "")
        replica = [{"phase": "prefill", "requests": [_request(sent, prompt, "new")]},
                   {"phase": "decode", "requests": [_request(sent, prompt, "cached")]}]
        if n == 0:
            replica.append({"phase": "prefill", "requests": [_request(unlogged[0], unlogged[1], "new")]})
            refused[unlogged[0]] = "in no update_actor_log.jsonl record"
        elif n == 1:
            together = request_ids(2)
            replica.append({"phase": "prefill", "requests": [_request(r, PROMPTS[0], "new") for r in together]})
            refused.update(dict.fromkeys(together, "in no update_actor_log.jsonl record"))
        steps.append(replica)
    return steps, refused


def _start_worker(tree: Path, dump_config: Path, plan: dict[str, Any], plan_path: Path,
                  model_dir: Path) -> subprocess.Popen[str]:
    plan_path.write_text(json.dumps(plan))
    argv = [sys.executable, str(REHEARSAL / "inference.py"), str(tree), str(dump_config), str(plan_path), str(model_dir)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def _worker_pids(processes: list[subprocess.Popen[str]]) -> list[int]:
    pids = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        result = json.loads(out.splitlines()[-1])
        assert result["logger"] is True
        pids.append(result["pid"])
    return pids


def inference_side(tree: Path, folder: Path, model_dir: Path, paired: list[tuple[str, list[int]]],
                   unlogged: tuple[str, list[int]] | None = None) -> InferenceSide:
    """Run the replicas at once (same rank) into one dump_path."""
    folder.mkdir(parents=True, exist_ok=True)
    dump_path = folder / "infer"
    dump_config = _msprobe_config(folder / "msprobe-infer.json", dump_path)
    barrier = folder / "barrier"
    barrier.mkdir(exist_ok=True)
    replicas, refused = replica_steps(paired, unlogged)
    processes = [
        _start_worker(tree, dump_config, {"init_file": str(folder / f"dist_init_{n}"),
                                          "barrier": [str(barrier), len(replicas)], "steps": steps},
                      folder / f"plan_{n}.json", model_dir)
        for n, steps in enumerate(replicas)]
    return InferenceSide(dump_path, _worker_pids(processes), [request_id for request_id, _ in paired], refused)


# ---------------------------------------------------------------------------------------------
# The packing rehearsal (issue 27): packed steps, one request per step, TP 2, and two faults.
# ---------------------------------------------------------------------------------------------


def _row(request_id: str, prompt: list[int], kind: str, **counts: int) -> dict[str, Any]:
    return {"request_id": request_id, "type": kind, "prompt": prompt, **counts}


def packed_steps(requests: list[tuple[str, list[int]]]) -> list[dict[str, Any]]:
    """A, B, C, D packed as a vLLM-Ascend runner packs them (rows in its input-batch order).

    step 0: D's first prefill chunk (4 of 6 tokens) and A's prefill; step 1: A's decode, D's second
    chunk and B's prefill: the scheduler lists its running requests D, A, then B, and Ascend attention
    swaps the decode to the front (rows A, D, B); step 2: B's decode and C's prefill."""
    (a, pa), (b, pb), (c, pc), (d, pd) = requests
    return [
        {"requests": [_row(d, pd, "new", tokens=4), _row(a, pa, "new")], "scheduler_order": [d, a]},
        {"requests": [_row(a, pa, "cached"), _row(d, pd, "cached", tokens=2, computed=4), _row(b, pb, "new")],
         "scheduler_order": [d, a, b]},
        {"requests": [_row(b, pb, "cached"), _row(c, pc, "new")], "scheduler_order": [b, c]},
    ]


def single_steps(requests: list[tuple[str, list[int]]]) -> list[dict[str, Any]]:
    """The same requests one per step: A, A's decode, D (whole), B, B's decode, C."""
    (a, pa), (b, pb), (c, pc), (d, pd) = requests
    return [{"requests": [row]} for row in (_row(a, pa, "new"), _row(a, pa, "cached"), _row(d, pd, "new"),
                                            _row(b, pb, "new"), _row(b, pb, "cached"), _row(c, pc, "new"))]


# variant -> (steps, TP size, fault)
PACKING_VARIANTS: dict[str, tuple[Any, int, str | None]] = {
    "packed": (packed_steps, 1, None),
    "single": (single_steps, 1, None),
    "tp2": (packed_steps, 2, None),
    "batch-fault": (packed_steps, 1, "batch"),
    "batch-fault-single": (single_steps, 1, "batch"),
    "tp-shard-fault": (packed_steps, 2, "tp_shard"),
}


@dataclass(frozen=True)
class PackingDumps:
    """Every dump of the packing rehearsal: inference variants (PACKING_VARIANTS) and training scenarios.

    `infer[variant]` is a dump_path holding one `{pid}/` folder per process (TP ranks: one each, with
    `dispatch_log.jsonl` and `step{N}/rank{R}/`); `train[name]` is a training dump_path
    (`step{N}/rank{R}/` and `{pid}/update_actor_log.jsonl`) for PACK_SCENARIOS."""

    infer: dict[str, Path]
    train: dict[str, Path]
    requests: list[tuple[str, list[int]]]  # A, B, C, D
    seconds: float  # the inference variants' wall time (all processes at once)


def packing_dumps(tree: Path, folder: Path, model_dir: Path, requests: list[tuple[str, list[int]]],
                  train: dict[str, Path]) -> PackingDumps:
    """Run every inference variant at once (each TP rank its own process), into folder/<variant>/infer."""
    import time

    started = time.monotonic()
    processes = []
    infer = {}
    for variant, (steps, tp_size, fault) in PACKING_VARIANTS.items():
        where = folder / variant
        where.mkdir(parents=True, exist_ok=True)
        infer[variant] = where / "infer"
        dump_config = _msprobe_config(where / "msprobe-infer.json", infer[variant])
        for rank in range(tp_size):
            plan = {"init_file": str(where / "dist_init"), "barrier": None, "rank": rank, "world_size": tp_size,
                    "fault": fault, "steps": steps(requests)}
            processes.append(_start_worker(tree, dump_config, plan, where / f"plan_{rank}.json", model_dir))
    _worker_pids(processes)
    seconds = time.monotonic() - started
    (folder / "seconds.json").write_text(json.dumps({"inference_variants": seconds}))  # for the time budget
    return PackingDumps(infer, train, requests, seconds)


# ---------------------------------------------------------------------------------------------
# Reading the packing rehearsal's dumps with torch (the tests compare tensors directly).
# ---------------------------------------------------------------------------------------------

# bf16 keeps 8 significant bits: two units in the last place of a tensor's largest value.
BF16_FLOOR = 2.0 ** -6


def step_outputs(rank_dir: Path) -> dict[str, Any]:
    """Every module output tensor msprobe saved for one step and rank, by file stem, in call order."""
    import torch

    data = json.loads((rank_dir / "dump.json").read_text(encoding="utf-8"))["data"]
    outputs = {}
    for entry in data.values():
        for item in entry.get("output") or []:
            name = item.get("data_name") if isinstance(item, dict) else None
            if name:
                outputs[name[: -len(".pt")]] = torch.load(rank_dir / "dump_tensor_data" / name, weights_only=True)
    return outputs


def within_floor(got: Any, want: Any) -> bool:
    """Same shape and no element further from `want` than the bf16 floor of `want`'s largest value."""
    if got.shape != want.shape:
        return False
    scale = float(want.float().abs().max()) or 1.0
    return float((got.float() - want.float()).abs().max()) <= BF16_FLOOR * scale


def dispatch_records(dump_path: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(the process's {pid} folder, record) for every dispatch_log.jsonl record under an inference dump_path."""
    return [(log.parent, json.loads(line)) for log in sorted(dump_path.glob("*/dispatch_log.jsonl"))
            for line in log.read_text(encoding="utf-8").splitlines()]


def engine_records(dump_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for log in sorted(dump_path.glob("*/update_actor_log.jsonl"))
            for line in log.read_text(encoding="utf-8").splitlines()]
