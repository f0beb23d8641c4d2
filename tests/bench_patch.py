"""Benchmark of the patch commands on a real verl release (run by `make bench`; not a test).

Figures are wall-clock medians of whole `rlpatch` processes, as a user sees them, on this machine.
Targets (issue #2): apply of both engine rules on verl 0.9.1 under 2 s, verify under 0.5 s,
`rlpatch --help` under 0.3 s.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VERL = os.environ.get("BENCH_VERL", "0.9.1")
RUNS = int(os.environ.get("BENCH_RUNS", "7"))


def rlpatch(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rlpatch.cli", *args], check=True, capture_output=True)
    return time.perf_counter() - start


def median_of(action, before=None) -> float:
    samples = []
    for _ in range(RUNS):
        if before:
            before()
        samples.append(action())
    return statistics.median(samples)


def main() -> int:
    from rlpatch.upstream.wheelcache import fresh_copy

    workdir = Path(tempfile.mkdtemp(prefix="rlpatch-bench-"))
    try:
        tree = fresh_copy("verl", VERL, workdir / f"verl-{VERL}")
        root = ["--verl-root", str(tree), "--rules", "verl-engine-fsdp,verl-engine-megatron"]
        revert = lambda: subprocess.run([sys.executable, "-m", "rlpatch.cli", "revert", *root], check=True, capture_output=True)  # noqa: E731
        apply_s = median_of(lambda: rlpatch("apply", *root), before=revert)
        verify_s = median_of(lambda: rlpatch("verify", *root))
        status_cold_s = median_of(lambda: rlpatch("status", *root))
        revert()
        whole = ["--verl-root", str(tree), "--mode", "consistency"]
        revert_whole = lambda: subprocess.run([sys.executable, "-m", "rlpatch.cli", "revert", *whole], check=True, capture_output=True)  # noqa: E731
        apply_set_s = median_of(lambda: rlpatch("apply", *whole), before=revert_whole)
        verify_set_s = median_of(lambda: rlpatch("verify", *whole))
        help_s = median_of(lambda: rlpatch("--help"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; verl {VERL}; median of {RUNS} runs")
    rows = [
        ("apply (verl-engine-fsdp + verl-engine-megatron)", apply_s, 2.0),
        ("verify (applied tree)", verify_s, 0.5),
        ("status (applied tree)", status_cold_s, None),
        ("apply --mode consistency (engine rules + 6 auxiliaries)", apply_set_s, None),
        ("verify --mode consistency (applied tree)", verify_set_s, None),
        ("rlpatch --help", help_s, 0.3),
    ]
    for name, seconds, target in rows:
        verdict = "" if target is None else (f"  target < {target:.2f} s: " + ("met" if seconds < target else "MISSED"))
        print(f"  {name:<50} {seconds:7.3f} s{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
