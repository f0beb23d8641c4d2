"""The training side of the rehearsal: real verl 0.9.1, patched by `rlpatch apply --mode consistency`.

`run_training_side(workdir, request_ids, prompts, ...)` unpacks the released verl wheel, patches it
with this checkout's rlpatch, builds a tiny random Qwen2 (from `QWEN2_CONFIG` and `SEED`, no
download) and runs, in a child process (`rehearsal.training_driver`), the real FSDP engine behind the
real v1 `ActorRolloutRefWorker.compute_log_prob`, reached through real TransferQueue and verl's own
`PPOTrainer._compute_old_log_prob` (and `_compute_ref_log_prob`, with LoRA), with
`PROMPTS_ONLY=1 DUMP_ON=1 DUMP_PHASE=log_prob` and an msprobe config (task tensor, level L0).

Output under `workdir`: `model/` (config.json, model.safetensors, tokenizer: the weights the
inference twin must load) and per scenario `<name>/dump/step{N}/rank{R}/dump.json` (msprobe),
`<name>/dump/{pid}/update_actor_log.jsonl` (the patch's request-id log) and `<name>/trained.json`
(what the trainer stored in TransferQueue). `run_training_sides` runs several scenarios on one Ray
cluster (Ray's start is most of one scenario's time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

VERL_VERSION = "0.9.1"
SEED = 20260518
# A Qwen2 small enough for two CPU ranks in seconds; tied embeddings (as Qwen2-0.5B) also make verl
# load real weights on every rank (no meta-tensor init), which FSDP1 on CPU needs.
QWEN2_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "vocab_size": 128,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
REHEARSAL_DIR = Path(__file__).resolve().parent
TIMEOUT_S = 240


@dataclass(frozen=True)
class Scenario:
    """One training-side run: these requests through a worker group of `world_size` ranks."""

    name: str
    request_ids: Sequence[str]
    prompts: Sequence[Sequence[int]]
    world_size: int = 1
    strategy: str = "fsdp2"  # verl's actor strategy: "fsdp" (FSDP1, verl's default) or "fsdp2"
    lora: bool = False  # LoRA (rank 4): the trainer also runs the reference pass through the actor
    responses: Sequence[Sequence[int]] | None = None  # the rollout's answers (default: 3 tokens each)
    msprobe_steps: Sequence[int] = ()  # msprobe's `step` list (empty: every step)
    micro_batch: int = 1  # log_prob_micro_batch_size_per_gpu: requests per micro-batch on each rank
    remove_padding: bool = True  # use_remove_padding: packed [1, total_tokens] (else padded rows)


@dataclass(frozen=True)
class TrainingSide:
    """Where one scenario wrote its output."""

    dump_path: Path  # msprobe's dump_path: step{N}/rank{R}/dump.json and {pid}/update_actor_log.jsonl
    model_dir: Path  # the tiny Qwen2 (HF layout) both sides load
    stored: dict[str, list[list[float]]]  # per field the trainer stored (old_log_probs, ref_log_prob) per sample
    seconds: float  # the scenario alone (worker start, model load, passes), without Ray's start


def build_tiny_qwen2(model_dir: Path) -> Path:
    """The tiny random Qwen2 of QWEN2_CONFIG with weights drawn from SEED, plus a word-level tokenizer."""
    import torch
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    model_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    model = Qwen2ForCausalLM(Qwen2Config(**QWEN2_CONFIG)).to(torch.float32)
    model.save_pretrained(model_dir, safe_serialization=True)
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, **{f"t{i}": i for i in range(3, QWEN2_CONFIG["vocab_size"])}}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="<pad>"))
    tokenizer.pre_tokenizer = WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                            unk_token="<pad>").save_pretrained(model_dir)
    return model_dir


def patched_verl(dest: Path) -> Path:
    """A fresh copy of the released verl wheel, patched by this checkout's `rlpatch apply --mode consistency`."""
    from rlpatch.upstream.wheelcache import fresh_copy

    root = fresh_copy("verl", VERL_VERSION, dest)
    completed = subprocess.run(
        [sys.executable, "-c", "from rlpatch.cli import main; main()", "apply", "--mode", "consistency",
         "--verl-root", str(root)],
        capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"rlpatch apply --mode consistency failed on {root}:\n{completed.stdout}{completed.stderr}")
    return root


def msprobe_config(path: Path, dump_path: Path, steps: Sequence[int] = ()) -> Path:
    """msprobe's config.json for the training dump: task tensor, level L0 (whole modules), every rank."""
    config = {
        "task": "tensor", "dump_path": str(dump_path), "rank": [], "step": list(steps), "level": "L0",
        "tensor": {"scope": [], "list": [], "data_mode": ["all"]},
    }
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def run_training_side(
    workdir: Path,
    request_ids: Sequence[str],
    prompts: Sequence[Sequence[int]],
    world_size: int = 1,
    strategy: str = "fsdp2",
    **options: Any,
) -> Path:
    """Run the patched real verl's log-prob pass for these requests; returns msprobe's dump_path.

    `options`: the other fields of Scenario (lora, responses, msprobe_steps) and `verl_root` (an
    already patched copy). With PROMPTS_ONLY=1 the forward (and the dump) sees the prompts only.
    """
    verl_root = options.pop("verl_root", None)
    scenario = Scenario("rehearsal", request_ids, prompts, world_size, strategy, **options)
    return run_training_sides(workdir, [scenario], verl_root=verl_root)[scenario.name].dump_path


def run_training_sides(workdir: Path, scenarios: Sequence[Scenario], verl_root: Path | None = None) -> dict[str, TrainingSide]:
    """Run the scenarios one after the other in one child process (one Ray cluster, one TransferQueue).

    Each scenario writes under `workdir/<name>/`: `dump/` (its msprobe dump_path) and `msprobe_config.json`.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    root = verl_root or patched_verl(workdir / f"verl-{VERL_VERSION}")
    model_dir = build_tiny_qwen2(workdir / "model")
    specs = []
    for scenario in scenarios:
        folder = workdir / scenario.name
        folder.mkdir(parents=True, exist_ok=True)
        responses = scenario.responses or [[5 + (i % 7), 9, 11] for i in range(len(scenario.prompts))]
        specs.append({
            "name": scenario.name, "request_ids": list(scenario.request_ids),
            "prompts": [list(p) for p in scenario.prompts], "responses": [list(r) for r in responses],
            "world_size": scenario.world_size, "strategy": scenario.strategy, "lora": scenario.lora,
            "micro_batch": scenario.micro_batch, "remove_padding": scenario.remove_padding,
            "msprobe_config": str(msprobe_config(folder / "msprobe_config.json", folder / "dump", scenario.msprobe_steps)),
            "result": str(folder / "trained.json"),
        })
    env = _environment(root)
    spec = {"verl_root": str(root), "model_dir": str(model_dir), "scenarios": specs,
            "worker_env": sorted(key for key in env if env[key] != os.environ.get(key))}
    spec_path = workdir / "training_spec.json"
    spec_path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    _run_driver(spec_path, env, workdir)
    sides = {}
    for scenario, scenario_spec in zip(scenarios, specs, strict=True):
        stored = json.loads(Path(scenario_spec["result"]).read_text(encoding="utf-8"))
        seconds = stored.pop("seconds")
        sides[scenario.name] = TrainingSide(workdir / scenario.name / "dump", model_dir, stored, seconds)
    return sides


def _run_driver(spec_path: Path, env: dict[str, str], workdir: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "rehearsal.training_driver", str(spec_path)],
        env=env, cwd=workdir, capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    (workdir / "training_driver.log").write_text(completed.stdout + completed.stderr, encoding="utf-8")
    if completed.returncode != 0:
        raise RuntimeError(f"the training side failed (exit {completed.returncode}):\n{completed.stderr[-6000:]}")


def _environment(root: Path) -> dict[str, str]:
    """The driver's (and, through Ray's runtime_env, every worker's) environment."""
    env = dict(os.environ)
    paths = [str(root), str(REHEARSAL_DIR.parent), env.get("PYTHONPATH", "")]
    env.update({
        "PYTHONPATH": os.pathsep.join(path for path in paths if path),
        "VERL_USE_EXTERNAL_MODULES": "rehearsal.verl_cpu_platform",
        "VERL_PLATFORM": "cpu",
        # verl registers its FSDP engines for cuda and npu only; its own override picks them here.
        "VERL_ENGINE_DEVICE": "cuda",
        "VERL_USE_EXTERNAL_PLUGINS": "none",
        "PROMPTS_ONLY": "1",
        "DUMP_ON": "1",
        "DUMP_PHASE": "log_prob",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "RAY_DEDUP_LOGS": "0",
        "WANDB_MODE": "disabled",
    })
    return env
