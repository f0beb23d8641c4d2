"""Support for the rehearsal (real upstream code on CPU, end to end): the tiny model, both sides' runs.

The model is a random Qwen2 built from a config with a fixed seed (no download); its Hugging Face
state dict is saved so that both sides load the same weights: verl's FSDP engine on the training side,
the vLLM-named twin (tests/rehearsal/vllm_twin.py) on the inference side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, run_cli

REHEARSAL = REPO / "tests" / "rehearsal"
VLLM_ASCEND_VERSION = "0.23.0"
# verl's request ids are uuid4().hex; vLLM >= 0.14 appends -{8 hex} to the id it is given.
REQUESTS = ["1f" * 16, "2e" * 16, "3d" * 16, "4c" * 16]
PROMPTS = {request_id: [(7 * n + 3 * i) % 120 + 4 for i in range(5 + n)] for n, request_id in enumerate(REQUESTS)}
TINY_QWEN2 = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 128, "hidden_size": 32,
    "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 64, "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
SEED = 20261201


def tiny_qwen2(folder: Path) -> tuple[Path, Path]:
    """(config.json, weights.pt) of the rehearsal's model, written once into `folder`."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    config, weights = folder / "config.json", folder / "weights.pt"
    if not weights.is_file():
        torch.manual_seed(SEED)
        torch.save(Qwen2ForCausalLM(Qwen2Config(**TINY_QWEN2)).state_dict(), weights)
        config.write_text(json.dumps(TINY_QWEN2, indent=2))
    return config, weights


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


def _request(request_id: str, kind: str, suffix: str = "") -> dict:
    return {"request_id": request_id + suffix, "type": kind, "prompt": PROMPTS[request_id]}


def replica_plans(folder: Path) -> list[dict]:
    """Two replicas of one node: the first prefills request 0 alone, decodes it, then prefills 2 and 3
    together (unpairable: two requests); the second prefills request 1 alone and decodes it."""
    a, b, c, d = REQUESTS
    barrier = folder / "barrier"
    barrier.mkdir(exist_ok=True)
    first = [{"phase": "prefill", "requests": [_request(a, "new", "-0a1b2c3d")]},
             {"phase": "decode", "requests": [_request(a, "cached", "-0a1b2c3d")]},
             {"phase": "prefill", "requests": [_request(c, "new"), _request(d, "new")]}]
    second = [{"phase": "prefill", "requests": [_request(b, "new")]},
              {"phase": "decode", "requests": [_request(b, "cached")]}]
    return [{"init_file": str(folder / f"dist_init_{n}"), "barrier": [str(barrier), 2], "steps": steps}
            for n, steps in enumerate((first, second))]


def inference_dumps(tree: Path, folder: Path) -> tuple[Path, list[int]]:
    """Run two replicas (same rank) at once into one dump_path; (dump_path, [pid of each replica])."""
    config, weights = tiny_qwen2(folder / "model")
    dump_path = folder / "infer"
    dump_config = _msprobe_config(folder / "msprobe-infer.json", dump_path)
    processes = []
    for n, plan in enumerate(replica_plans(folder)):
        plan_path = folder / f"plan_{n}.json"
        plan_path.write_text(json.dumps(plan))
        argv = [sys.executable, str(REHEARSAL / "inference.py"), str(tree), str(dump_config), str(plan_path),
                str(weights), str(config)]
        processes.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          env={**os.environ, "PYTHONPATH": str(REPO)}))
    pids = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        result = json.loads(out.splitlines()[-1])
        assert result["logger"] is True
        pids.append(result["pid"])
    return dump_path, pids
