"""No false "agrees", no false failure (issue 30, item 2).

A row rlpatch cannot read (a newline or `;` inside a module name) is counted and named, and a pair
holding one is never `agrees`/`within-floor`. The reverse: the training q/k/v (gate/up) rows that
msprobe 26.2.0 merges against vLLM's `qkv_proj` (`gate_up_proj`) in a statistics dump, marked
`error` ("shape ... inconsistent") with their mean and norm columns `Diff`, are compared on the
statistics that follow exactly from the parts; the oracle is msprobe's own compare of twin models
(tests/msprobe_twins.py) whose inference side computes the concatenated tensor.
"""

from __future__ import annotations

import csv
import json
import math
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from test_dumps import infer_record, infer_tree, train_record, train_tree

from rlpatch.dumps.compare_csv import CsvRow, read_compare_csv
from rlpatch.dumps.divergence import attribute, tensor_error

HEADER = ("NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,Cosine,EucDist,MaxAbsErr,"
          "MaxRelativeErr,NPU l2norm,Bench l2norm,Result,Err_message")
ROW = ("{npu},{bench},torch.float32,torch.float32,[4],[4],1.0,0.0,0.0,0.0,1.0,1.0,{result},")
GOOD = ("Module.model.layers.0.mlp.down_proj.Linear.forward.0.output.0",
        "Module.model.layers.0.mlp.down_proj.RowParallelLinear.forward.0.output.0")
HOSTILE = ('"Module.model.layers.0.mlp.evil\nname.Linear.forward.0.output.0"', "Module.model.layers.0.x.X.forward.0.output.0")


def _fake_msprobe(folder: Path, rows: list[str]) -> str:
    script = folder / "fake-python"
    body = "\n".join([HEADER, *rows]) + "\n"
    script.write_text(f"#!{sys.executable}\nimport os, sys\nout = sys.argv[sys.argv.index('-o') + 1]\n"
                      "os.makedirs(out, exist_ok=True)\n"
                      f"open(os.path.join(out, 'compare_result_1.csv'), 'w').write({body!r})\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def _compare(tmp_path: Path, rows: list[str]) -> tuple[int, dict, str]:
    train = train_tree(tmp_path / "t", [train_record(0, ["r1"])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [("r1", "new")])])
    argv = ["dumps", "compare", "--train", str(train), "--infer", str(infer), "--python", _fake_msprobe(tmp_path, rows)]
    text = run_cli(*argv, "-o", str(tmp_path / "out-text"))
    data = json.loads(run_cli(*argv, "-o", str(tmp_path / "out-json"), "--format", "json").stdout)
    return text.exit_code, data, text.stdout


def test_a_row_rlpatch_cannot_read_never_lets_a_pair_agree(tmp_path: Path) -> None:
    rows = [ROW.format(npu=GOOD[0], bench=GOOD[1], result="pass")]
    rows += [ROW.format(npu=HOSTILE[0].replace("evil", f"evil{i}"), bench=HOSTILE[1], result="error") for i in range(3)]
    code, data, text = _compare(tmp_path, rows)
    result = data["results"][0]
    assert code == 1 and result["verdict"] == "undecided", result
    assert result["rows"]["unreadable"] == 3 and "3 marked error by msprobe" in result["why"]
    assert "agrees" not in text and "3 unreadable" in text


def test_a_semicolon_inside_a_module_name_is_unreadable_not_no_data() -> None:
    npu = "Module.model.a;b.Linear.forward.0.output.0"
    records = [CsvRow(cells) for cells in csv.DictReader([HEADER, ROW.format(npu=npu, bench=GOOD[1], result="error"),
                                                          ROW.format(npu=GOOD[0], bench=GOOD[1], result="pass")])]
    found = attribute(records)
    assert found.counts["unreadable"] == 1 and found.verdict == "undecided", found.why


def test_a_clean_pair_still_agrees(tmp_path: Path) -> None:
    code, data, _ = _compare(tmp_path, [ROW.format(npu=GOOD[0], bench=GOOD[1], result="pass")])
    assert code == 0 and data["results"][0]["verdict"] == "agrees"


# --- merged statistics ------------------------------------------------------------------------

STAT_KEYS = ("NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
             "Max diff", "Min diff", "Mean diff", "L2norm diff", "NPU max", "NPU min", "NPU mean", "NPU l2norm",
             "Bench max", "Bench min", "Bench mean", "Bench l2norm", "Result")


def _merged(parts: list[list[float]], bench: list[float], shapes: str, bench_shape: str) -> CsvRow:
    def stats(values: list[float]) -> tuple[float, float, float, float]:
        return max(values), min(values), sum(values) / len(values), math.sqrt(sum(v * v for v in values))

    npu = [stats(part) for part in parts]
    whole = stats(bench)
    return CsvRow(dict(zip(STAT_KEYS, [
        "Module.m.layers.0.q_proj.Linear.forward.0.output.0;  Module.m.layers.0.k_proj.Linear.forward.0.output.0",
        "Module.m.layers.0.qkv_proj.Linear.forward.0.output.0", "torch.float32;torch.float32", "torch.float32",
        shapes, bench_shape, "0", "0", "Diff", "Diff", str(max(s[0] for s in npu)), str(min(s[1] for s in npu)),
        ";".join(str(s[2]) for s in npu), ";".join(str(s[3]) for s in npu), *map(str, whole), "error"], strict=True)))


def test_merged_statistics_follow_exactly_from_the_parts() -> None:
    q, k = [1.0, -2.0, 3.0, 0.5], [0.25, 4.0]
    assert tensor_error(_merged([q, k], q + k, "[1, 4];[1, 2]", "[1, 6]")) < 1e-12
    assert tensor_error(_merged([q, k], q + [0.25, 4.5], "[1, 4];[1, 2]", "[1, 6]")) > 0.05  # k differs
    same = [1.0, 2.0]
    assert tensor_error(_merged([same, same], same, "[2];[2]", "[2]")) < 1e-12  # one input read by each part
    assert tensor_error(_merged([q, k], q + k + [1.0], "[1, 4];[1, 2]", "[1, 7]")) is None  # no exact relation


def _twin_dump(root: Path, side: str) -> str:
    twins = Path(__file__).with_name("msprobe_twins.py")
    result = subprocess.run([sys.executable, str(twins), side, "statistics", "L0", str(root / side)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return str(root / side / "step0" / "rank0" / "dump.json")


@pytest.mark.runtime
def test_a_clean_fsdp_statistics_control_against_vllm_fused_projections(tmp_path: Path) -> None:
    """The oracle: msprobe's own compare of twins (q/k/v and gate/up against qkv_proj/gate_up_proj).
    Its merged rows are `error` with `Diff` means; rlpatch compares their derived statistics, finds
    them within rounding of msprobe's Bench values, and the pair does not fail."""
    pytest.importorskip("msprobe.pytorch")
    from rlpatch.dumps.command import compare_argv

    train, infer = _twin_dump(tmp_path, "fsdp1"), _twin_dump(tmp_path, "vllm")
    out = tmp_path / "out"
    result = subprocess.run(compare_argv(train, infer, "fsdp", str(out), [sys.executable]), capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:]
    records = read_compare_csv(str(next(out.glob("compare_result_*.csv"))))
    merged = [r for r in records if ";" in r.name and ".backward." not in r.name]
    assert merged and all(r.get("Result") == "error" and r.get("Mean diff") == "Diff" for r in merged)
    assert all(error is not None and error < 4.8e-7 for error in map(tensor_error, merged))
    found = attribute(records)
    assert found.verdict in ("agrees", "within-floor") and found.divergence is None, found.why
    assert any(".q_proj" in point.module for point in found.points)  # the merged modules are judged
