"""`rlpatch dumps` on real msprobe 26.2.0 dumps made on CPU, both sides, then the real `msprobe compare`.

Training side: the tiny model through the fixture engines patched by `rlpatch apply` (DUMP_ON=1,
MSPROBE_ACTOR_CONFIG; it writes `step{N}/proc{pid}` and `{pid}/update_actor_log.jsonl`). Inference
side: fixtures/dumps/infer_dump.py, a real msprobe dump of the same model per step with the
dispatch logger rlpatch inserts into vLLM-Ascend writing `{pid}/dispatch_log.jsonl`; its layer 1
is perturbed, so the compare has a first divergence to find.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, run_cli

pytestmark = pytest.mark.runtime

A, B, C, D, E = ("a" * 32, "b" * 32, "c" * 32, "d" * 32, "e" * 32)
MICRO_BATCHES = [[A], [B], [C, D]]
INFER_PLAN = {
    "perturb_layer": 1, "scale": 1.5, "task": "tensor",
    "steps": [
        {"phase": "prefill", "requests": [{"request_id": f"{A}-1a2b3c4d", "type": "new", "tokens": 2}], "inputs": [A]},
        {"phase": "decode", "requests": [{"request_id": f"{A}-1a2b3c4d", "type": "cached", "tokens": 1}], "inputs": [A]},
        {"phase": "prefill", "requests": [{"request_id": B, "type": "new", "tokens": 2}], "inputs": [B]},
        {"phase": "prefill", "requests": [{"request_id": E, "type": "new", "tokens": 2}], "inputs": [E]},
    ],
}


def _python_env(extra: dict[str, str]) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("DUMP_ON", "DUMP_PHASE", "MSPROBE_ACTOR_CONFIG")}
    return {**clean, **extra}


def _train(tree: Path, root: Path, backend: str) -> Path:
    dump_path = root / f"train_{backend}"
    config = root / f"actor_{backend}.json"
    config.write_text(json.dumps({"task": "tensor", "dump_path": str(dump_path), "rank": [], "step": [], "level": "L0"}))
    plan = root / "micro_batches.json"
    plan.write_text(json.dumps(MICRO_BATCHES))
    result = subprocess.run(
        [sys.executable, str(FIXTURES / "dumps" / "train_dump.py"), backend, str(plan)], capture_output=True,
        text=True, timeout=600, env=_python_env({"PYTHONPATH": str(tree), "DUMP_ON": "1",
                                                  "MSPROBE_ACTOR_CONFIG": str(config)}))
    assert result.returncode == 0, result.stderr[-3000:]
    return dump_path


def _infer(root: Path, name: str, plan: dict) -> tuple[Path, int]:
    path = root / f"{name}.json"
    path.write_text(json.dumps(plan))
    result = subprocess.run([sys.executable, str(FIXTURES / "dumps" / "infer_dump.py"), str(root / name), str(path)],
                            capture_output=True, text=True, timeout=600,
                            env=_python_env({"PYTHONPATH": str(REPO)}))
    assert result.returncode == 0, result.stderr[-3000:]
    return root / name, json.loads(result.stdout.splitlines()[-1])["pid"]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("msprobe.pytorch")
    root = tmp_path_factory.mktemp("dumps")
    tree = root / "verl_engine"
    shutil.copytree(FIXTURES / "verl_engine", tree)
    assert run_cli("apply", "--verl-root", str(tree)).exit_code == 0
    infer, pid = _infer(root, "infer", INFER_PLAN)
    return {"root": root, "tree": tree, "infer": infer, "pid": pid,
            "train": {backend: _train(tree, root, backend) for backend in ("fsdp", "megatron")}}


def test_check_both_sides(dumps):
    code = run_cli("dumps", "check", str(dumps["train"]["fsdp"]), "--format", "json")
    train = json.loads(code.stdout)
    # no torch.distributed in the fixture: msprobe names the folders proc{pid}, which check reports
    assert code.exit_code == 1 and train["mode"] == "consistency"
    assert [s["step"] for s in train["steps"]] == [0, 1, 2]
    assert all(len(s["ranks"]) == 1 and s["ranks"][0].startswith("proc") for s in train["steps"])
    assert all("no distributed rank known" in s["problems"][0] for s in train["steps"])

    result = run_cli("dumps", "check", str(dumps["infer"]), "--format", "json")
    infer = json.loads(result.stdout)
    assert result.exit_code == 0, infer
    assert infer["problems"] == [] and [(s["step"], s["ranks"]) for s in infer["steps"]] == [(n, [0]) for n in range(4)]


def test_pair(dumps):
    train, infer, pid = dumps["train"]["fsdp"], dumps["infer"], dumps["pid"]
    result = run_cli("dumps", "pair", "--train", str(train), "--infer", str(infer), "--format", "json")
    assert result.exit_code == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert [(p["request_id"], p["train"]["step"], p["infer"]["step"], p["infer"]["pid"]) for p in data["pairs"]] == [
        (A, 0, 0, pid), (B, 1, 2, pid)]
    assert re.fullmatch(r".*/step0/proc\d+/dump\.json", data["pairs"][0]["train"]["path"])
    unpaired = {(u["request_id"], u["side"]): u["why"] for u in data["unpaired"]}
    assert set(unpaired) == {(A, "infer"), (E, "infer"), (C, "train"), (D, "train")}
    assert "decode step" in unpaired[(A, "infer")] and "not in any single-request" in unpaired[(E, "infer")]


@pytest.mark.parametrize("backend", ["fsdp", "megatron"])
def test_compare_finds_the_first_divergence_and_writes_the_report(dumps, backend, tmp_path):
    out, report = tmp_path / "out", tmp_path / "report.html"
    result = run_cli("dumps", "compare", "--train", str(dumps["train"][backend]), "--infer", str(dumps["infer"]),
                     "--backend", backend, "-o", str(out), "--python", sys.executable, "--report", str(report),
                     "--format", "json")
    assert result.exit_code == 1, result.stdout + result.stderr  # the perturbed layer gives error rows
    data = json.loads(result.stdout)
    assert [r["request_id"] for r in data["results"]] == [A, B]
    for entry in data["results"]:
        assert entry["exit_code"] == 0 and entry["error"] is None and os.path.isfile(entry["csv"])
        assert entry["command"][1:4] == ["-m", "msprobe.msprobe", "compare"]
        assert entry["command"][entry["command"].index("--backend") + 1] == backend
        # layer 1's down_proj weight is scaled on the inference side: that module introduces the divergence
        assert entry["verdict"] == "diverges", entry["why"]
        assert entry["divergence"]["module"].endswith("layers.1.mlp.down_proj"), entry["divergence"]
        assert entry["divergence"]["layer"] == 1 and entry["divergence"]["input_error"] <= entry["divergence"]["floor"]
        assert entry["rows"]["pass"] > 0 and "unmatched" in entry["rows"]
    assert [c["pairs"] for c in data["culprits"]] == [[A, B]]
    page = report.read_text()
    assert page.count('<details class="request"') == 2 and A in page and B in page
    assert "Culprit <code>" in page and "layers.1.mlp.down_proj" in page and "msprobe</th><td><code>26." in page
    # the same compare again: real msprobe's results are current, reused; the report rebuilt from -o alone
    again = run_cli("dumps", "compare", "--train", str(dumps["train"][backend]), "--infer", str(dumps["infer"]),
                    "--backend", backend, "-o", str(out), "--python", sys.executable, "--format", "json")
    reused = json.loads(again.stdout)
    assert again.exit_code == 1 and reused["reused"] == 2 and reused["results"] == data["results"]
    rebuilt = run_cli("dumps", "report", str(out))
    assert rebuilt.exit_code == 0 and (out / "report.html").read_text().count('<details class="request"') == 2


def test_compare_of_identical_models_passes(dumps, tmp_path):
    plan = {"perturb_layer": None, "task": "tensor", "steps": INFER_PLAN["steps"][:1]}
    infer, _ = _infer(tmp_path, "clean", plan)
    result = run_cli("dumps", "compare", "--train", str(dumps["train"]["fsdp"]), "--infer", str(infer),
                     "-o", str(tmp_path / "out"), "--python", sys.executable)
    assert result.exit_code == 0, result.stdout  # unpaired requests (B, C, D) do not fail a compare
    assert result.stdout.splitlines()[0].startswith("verdict: 1 pair(s) compared (1 agrees)")
    assert result.stdout.splitlines()[0].endswith("; no culprit")
