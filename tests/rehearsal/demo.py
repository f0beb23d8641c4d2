"""`make demo`'s rehearsal: both sides of a consistency run on real upstream code, on CPU, into OUT.

Usage: python tests/rehearsal/demo.py OUT

The released verl 0.9.1 wheel, patched by `rlpatch apply --mode consistency`, computes log-probs for
three requests on two FSDP1 ranks (its real engine behind the v1 `compute_log_prob`); the released
vLLM-Ascend 0.23.0 wheel, patched the same way, dumps two rollout replicas of rank 0 at once with
msprobe 26.2.0 (rehearsal_support). Prints the two dump paths, `TRAIN=...` and `INFER=...`, last.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from rehearsal_support import PROMPTS, inference_side, patched_vllm_ascend, request_ids  # noqa: E402

from rehearsal.training import Scenario, run_training_sides  # noqa: E402


def main(out: Path) -> None:
    scenario = Scenario("fsdp1-ws2", request_ids(2), PROMPTS[:2], world_size=2, strategy="fsdp")
    print(f"training side: verl 0.9.1 patched, FSDP1 on 2 CPU ranks, requests {', '.join(scenario.request_ids)}",
          flush=True)
    side = run_training_sides(out / "train", [scenario])[scenario.name]
    print("inference side: vLLM-Ascend 0.23.0 patched, 2 rollout replicas of rank 0 at once", flush=True)
    tree = patched_vllm_ascend(out)
    infer = inference_side(tree, out / "inference", side.model_dir,
                           list(zip(scenario.request_ids, map(list, scenario.prompts), strict=True)))
    print(f"TRAIN={side.dump_path}")
    print(f"INFER={infer.dump_path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
