"""Benchmark of the RL3xx schema cache (run by `make bench`; not a test).

Lints one script against a real verl release as a whole `rlpatch lint` process: first with an
empty cache (Hydra composes verl's config and parses every override), then with the warm cache
(the snapshot and the parsed overrides are read from disk; Hydra is not imported). Figures are
wall-clock medians on this machine. Target (issue #6): the warm lint at least 5x faster than the
cold one (reported, not asserted). Bytecode caching is on and warmed up first, as on a user's
machine.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VERL = os.environ.get("BENCH_VERL", "0.9.1")
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
SCRIPT = """#!/bin/bash
set -x
NGPUS=8
python3 -m verl.trainer.main_ppo \\
    model_engine=megatron \\
    actor_rollout_ref.rollout.name=vllm \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 \\
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 \\
    actor_rollout_ref.actor.megatron.grad_offload=True \\
    +actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16 \\
    actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=triton \\
    data.train_files=~/data/gsm8k/train.parquet \\
    data.train_batch_size=256 \\
    trainer.logger=console,wandb \\
    trainer.n_gpus_per_node=$NGPUS \\
    trainer.nnodes=1 \\
    trainer.total_epochs=1 "$@"
"""


def lint_seconds(script: Path, root: Path, cache: Path) -> float:
    # Bytecode caching on, as on a user's machine (some CI shells export PYTHONDONTWRITEBYTECODE):
    # otherwise every process recompiles rlpatch and the figures measure the compiler.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["RLPATCH_CACHE"] = str(cache)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rlpatch.cli", "lint", "--exit-zero", "--select", "RL3",
                    "--verl-root", str(root), str(script)], check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> int:
    from rlpatch.upstream.wheelcache import unpacked_tree

    root = unpacked_tree("verl", VERL)  # downloaded outside the measurement
    with tempfile.TemporaryDirectory(prefix="rlpatch-bench-schema-") as tmp:
        script = Path(tmp) / "run.sh"
        script.write_text(SCRIPT)
        lint_seconds(script, root, Path(tmp) / "warm-up")  # writes the .pyc files once
        cold, warm = [], []
        for run in range(RUNS):
            cache = Path(tmp) / f"cache{run}"  # a fresh, empty cache each time
            cold.append(lint_seconds(script, root, cache))
            warm.append(lint_seconds(script, root, cache))
    cold_s, warm_s = statistics.median(cold), statistics.median(warm)
    print(f"rlpatch lint --select RL3 on verl {VERL} ({platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} cpus, median of {RUNS})")
    print(f"  first lint, empty schema cache : {cold_s:.3f} s")
    print(f"  second lint, warm schema cache : {warm_s:.3f} s")
    print(f"  speed-up                       : {cold_s / warm_s:.1f}x (target >= 5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
