"""Divergence attribution on real msprobe 26.2.0 dumps (CPU) of twin models with faults at known modules.

tests/divergence_twins.py builds the twins: the training side under Hugging Face names with FSDP1's
wrappers or under Megatron-Core names, the inference side under vLLM names, same weights. One fault
per inference dump (a bfloat16 matmul, a norm epsilon, an attention scale, a perturbed weight, a
perturbation of a few fp32 ulps) and a control with none. Each dump set is made once per module;
the compares are the real `msprobe compare` with the argv rlpatch builds, and the culprit named must
be the module the fault was injected into (training-side name), the control must have none, and the
fault under the floor must be reported as such rather than guessed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlpatch.dumps.command import compare_argv
from rlpatch.dumps.divergence import Divergence, Outcome, attribute_csv, culprits

pytestmark = [pytest.mark.runtime, pytest.mark.slow]

TWINS = Path(__file__).with_name("divergence_twins.py")
sys.path.insert(0, str(TWINS.parent))
from divergence_twins import CULPRITS  # noqa: E402

TENSOR_FAULTS = (None, "dtype", "eps", "scale", "weight", "tiny")
STATISTICS_FAULTS = (None, "dtype", "weight")


def _dump(root: Path, naming: str, task: str, fault: str | None) -> str:
    argv = [sys.executable, str(TWINS), str(root), naming, task] + ([fault] if fault else [])
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return str(root / "step0" / "rank0" / "dump.json")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("msprobe.pytorch")
    root = tmp_path_factory.mktemp("twins")
    made: dict[tuple[str, str, str | None], str] = {}
    for task, faults in (("tensor", TENSOR_FAULTS), ("statistics", STATISTICS_FAULTS)):
        for naming in ("fsdp", "megatron"):
            made[(naming, task, None)] = _dump(root / f"{naming}_{task}", naming, task, None)
        for fault in faults:
            made[("vllm", task, fault)] = _dump(root / f"vllm_{task}_{fault}", "vllm", task, fault)
    return root, made, {}


def _compare(dumps, backend: str, task: str, fault: str | None) -> str:
    root, made, done = dumps
    if (backend, task, fault) in done:
        return done[(backend, task, fault)]
    out = root / f"out_{backend}_{task}_{fault}"
    argv = compare_argv(made[(backend, task, None)], made[("vllm", task, fault)], backend, str(out), [sys.executable])
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    done[(backend, task, fault)] = str(next(out.glob("compare_result_*.csv")))
    return done[(backend, task, fault)]


CASES = [(backend, "tensor", fault) for backend in ("fsdp", "megatron") for fault in TENSOR_FAULTS if fault] + [
    (backend, "statistics", fault) for backend in ("fsdp", "megatron") for fault in STATISTICS_FAULTS if fault]


@pytest.mark.parametrize(("backend", "task", "fault"), [c for c in CASES if c[2] != "tiny"])
def test_the_culprit_is_the_injected_module(dumps, backend, task, fault):
    attribution = attribute_csv(_compare(dumps, backend, task, fault))
    divergence = attribution.divergence
    assert attribution.verdict == "diverges", attribution.why
    assert divergence is not None and divergence.module == CULPRITS[backend][fault], attribution.why
    assert divergence.output_error > divergence.floor >= divergence.input_error
    assert divergence.layer == int(CULPRITS[backend][fault].split("layers.")[1].split(".")[0])
    assert divergence.metric == ("norm_relative" if task == "tensor" else "statistics")
    assert divergence.name.startswith("Module.") and divergence.infer_name.startswith("Module.model.layers.")
    # the modules after it only inherit; roots and unmatched rows are counted, never judged
    assert attribution.counts["unmatched"] > 0 and attribution.counts["roots"] > 0
    if task == "tensor":  # statistics are a proxy of the error: later growth can pass the factor there
        assert all(p.role != "introduces" for p in attribution.points if p.module != divergence.module)


@pytest.mark.parametrize("backend", ["fsdp", "megatron"])
@pytest.mark.parametrize("task", ["tensor", "statistics"])
def test_the_control_has_no_culprit(dumps, backend, task):
    attribution = attribute_csv(_compare(dumps, backend, task, None))
    assert attribution.divergence is None and attribution.verdict in ("agrees", "within-floor"), attribution.why
    assert attribution.points and all(p.role == "below" for p in attribution.points)


@pytest.mark.parametrize("backend", ["fsdp", "megatron"])
def test_a_fault_under_the_floor_is_not_guessed(dumps, backend):
    attribution = attribute_csv(_compare(dumps, backend, "tensor", "tiny"))
    assert attribution.divergence is None
    assert attribution.verdict == "within-floor" and "under the floor" in attribution.why, attribution.why


def test_a_floor_from_rtol_hides_the_bf16_matmul(dumps):
    csv_path = _compare(dumps, "fsdp", "tensor", "dtype")
    assert attribute_csv(csv_path, rtol=0.05).verdict in ("within-floor", "agrees")
    assert attribute_csv(csv_path, rtol=1e-4).divergence.module == CULPRITS["fsdp"]["dtype"]


def test_culprits_across_pairs_most_frequent_first():
    down = Divergence("model.layers.1.mlp.down_proj", "d", "d", 1, "norm_relative", 0.1, 0.0, 0.01)
    norm = Divergence("model.layers.2.input_layernorm", "n", "n", 2, "norm_relative", 0.1, 0.0, 0.01)
    found = culprits(Outcome(request_id, rank, "diverges" if divergence else "agrees", divergence) for
                     request_id, rank, divergence in [("a", 0, norm), ("b", 0, down), ("b", 1, down), ("c", 1, down),
                                                      ("d", 0, None)])
    assert found == [{"module": down.module, "layer": 1, "pairs": ["b", "c"], "ranks": [0, 1]},
                     {"module": norm.module, "layer": 2, "pairs": ["a"], "ranks": [0]}]
