"""Benchmark of the patch commands on real SGLang and vLLM-Ascend releases (`make bench`; not a test).

Figures are wall-clock medians of whole `rlpatch` processes on this machine: apply (after a revert),
verify and revert, for the largest files the inference rules patch (SGLang 0.5.10.post1's
model_runner.py, about 2800 lines; vLLM-Ascend 0.23.0's model_runner_v1.py, about 3900 lines).
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_patch import rlpatch  # one whole `rlpatch` process, timed

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
SGLANG = os.environ.get("BENCH_SGLANG", "0.5.10.post1")
VLLM_ASCEND = os.environ.get("BENCH_VLLM_ASCEND", "0.23.0")


def medians(root: list[str]) -> dict[str, float]:
    applies, verifies, reverts = [], [], []
    for _ in range(RUNS):
        applies.append(rlpatch("apply", *root))
        verifies.append(rlpatch("verify", *root))
        reverts.append(rlpatch("revert", *root))
    return {name: statistics.median(xs) for name, xs in (("apply", applies), ("verify", verifies), ("revert", reverts))}


def main() -> int:
    from rlpatch.upstream.wheelcache import LINUX_X86_64, fresh_copy

    workdir = Path(tempfile.mkdtemp(prefix="rlpatch-bench-inference-"))
    try:
        sglang = fresh_copy("sglang", SGLANG, workdir / "sglang")
        vllm_ascend = fresh_copy(
            "vllm-ascend", VLLM_ASCEND, workdir / "vllm-ascend", platform=LINUX_X86_64, python_version="3.11"
        )
        rows = [
            (f"sglang {SGLANG} (sglang-model-runner)", medians(["--sglang-root", str(sglang)])),
            (
                f"vllm-ascend {VLLM_ASCEND} (vllm-ascend-dispatch-logger)",
                medians(["--vllm-ascend-root", str(vllm_ascend)]),
            ),
        ]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; median of {RUNS} runs")
    for name, figures in rows:
        print(f"  {name:<52} " + "  ".join(f"{step} {seconds:6.3f} s" for step, seconds in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
