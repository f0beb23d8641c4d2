"""What msprobe 26.2.0 `compare --consistent_check` can compare, on real dumps of twin models made on CPU.

tests/msprobe_twins.py dumps the same weights under the names each engine gives them: FSDP1
(torch FullyShardedDataParallel, `_fsdp_wrapped_module.` in the paths), FSDP2 (`fully_shard`,
plain HF paths), Megatron-core and vLLM. Every compare runs through rlpatch's own command building
and result reading (`rlpatch.dumps.compare`), msprobe in a subprocess as `dumps compare` runs it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlpatch.dumps import compare
from rlpatch.dumps.correlate import Pair, Side
from rlpatch.dumps.mapping import fsdp1_name, is_wrapped_root, mapped_names

TWINS = Path(__file__).resolve().parent / "msprobe_twins.py"
TRAINING = {"fsdp1": "fsdp", "fsdp2": "fsdp", "megatron": "megatron"}
# The training modules msprobe pairs with a vLLM module (module paths without FSDP's wrappers and
# the `Module.` prefix). Left unmatched by msprobe's own rules: the model body (`model.HfBody`,
# `decoder`), lm_head/output_layer (vLLM applies lm_head's weight outside a module call), and
# Megatron's embedding, pre_mlp_layernorm and final_layernorm (not in its Megatron name map).
_LAYER_MODULES = ["input_layernorm", "post_attention_layernorm", "self_attn", "self_attn.q_proj", "self_attn.k_proj",
                  "self_attn.v_proj", "self_attn.o_proj", "mlp", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", ""]
_MEGATRON_LAYER_MODULES = ["input_layernorm", "self_attention", "self_attention.linear_qkv",
                           "self_attention.linear_proj", "mlp", "mlp.linear_fc1", "mlp.linear_fc2", ""]
MATCHED = {
    "fsdp": {"model.embed_tokens", "model.norm"} | {f"model.layers.{n}.{m}".rstrip(".") for n in (0, 1)
                                                   for m in _LAYER_MODULES},
    "megatron": {f"decoder.layers.{n}.{m}".rstrip(".") for n in (0, 1) for m in _MEGATRON_LAYER_MODULES},
}


def _dump(root: Path, side: str, task: str, level: str) -> str:
    dump_path = root / f"{side}.{task}.{level}"
    result = subprocess.run([sys.executable, str(TWINS), side, task, level, str(dump_path)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return str(dump_path / "step0" / "rank0" / "dump.json")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("msprobe.pytorch")
    root = tmp_path_factory.mktemp("twins")
    made = {}
    for level in ("L0", "mix"):
        for side in ("vllm", *TRAINING):
            made[side, "tensor", level] = _dump(root, side, "tensor", level)
    for side in ("vllm", "fsdp1", "megatron"):
        made[side, "statistics", "L0"] = _dump(root, side, "statistics", "L0")
    return made


def _compare(dumps, tmp_path: Path, side: str, task: str = "tensor", level: str = "L0") -> compare.PairResult:
    pair = Pair("req", Side(0, 0, dumps[side, task, level]), Side(0, 0, dumps["vllm", task, level], pid=1))
    [result] = compare.plan([pair], TRAINING[side], str(tmp_path / "out"), [sys.executable])
    return compare.run_one(result)


def _training_modules(name: str) -> set[str]:
    """The module paths of one row's training names (joined rows name several, `;`-separated)."""
    paths = (part.strip().split(".forward.")[0].rsplit(".", 1)[0] for part in name.split(";"))
    return {path.replace("_fsdp_wrapped_module", "").replace("..", ".").removeprefix("Module").strip(".") for path in paths}


@pytest.mark.runtime
@pytest.mark.slow
@pytest.mark.parametrize("side", list(TRAINING))
def test_level_mix_cannot_be_compared(dumps, tmp_path, side):
    result = _compare(dumps, tmp_path, side, level="mix")
    assert result.exit_code == 1 and result.csv_path is None and result.failed
    assert "Conflicting comparison data" in result.error
    assert "level mix" in result.error and '"level": "L0"' in result.error


@pytest.mark.runtime
@pytest.mark.slow
@pytest.mark.parametrize("side", list(TRAINING))
def test_level_l0_tensor_matches_every_module_with_a_counterpart(dumps, tmp_path, side):
    result = _compare(dumps, tmp_path, side)
    assert result.exit_code == 0 and result.error is None, result.error
    assert result.counts == {"pass": len(result.rows), "warning": 0, "error": 0}
    modules = set().union(*(_training_modules(row.name) for row in result.rows))
    assert modules == MATCHED[TRAINING[side]]
    if TRAINING[side] == "fsdp":  # q/k/v joined against qkv_proj, gate/up against gate_up_proj
        joined = [row for row in result.rows if ";" in row.name]
        assert len(joined) == 2 * 2 * 3 and all(float(row.metrics["Cosine"]) > 0.9999 for row in joined)


@pytest.mark.runtime
@pytest.mark.slow
def test_fsdp2_matches_only_through_rlpatch_mapping(dumps, tmp_path, monkeypatch):
    mapped = _compare(dumps, tmp_path / "mapped", "fsdp2")
    assert mapped.error is None and mapped.argv[mapped.argv.index("-tp") + 1].endswith("train_fsdp_names/dump.json")
    monkeypatch.setattr(compare, "map_training_dump", lambda path, out: None)
    raw = _compare(dumps, tmp_path / "raw", "fsdp2")
    # msprobe itself exits 0 with every training row unmatched: rlpatch calls that a failure
    assert raw.exit_code == 0 and raw.csv_path is not None and raw.rows == [] and raw.unmatched > 0
    assert raw.failed and raw.error.startswith("no forward row matched")


@pytest.mark.runtime
@pytest.mark.slow
def test_fsdp1_wrapped_root_is_left_out(dumps, tmp_path, monkeypatch):
    monkeypatch.setattr(compare, "map_training_dump", lambda path, out: None)
    raw = _compare(dumps, tmp_path, "fsdp1")
    # msprobe keys FSDP1's wrapped root like vLLM's model body: logits against hidden states
    [root] = [row for row in raw.rows if row.result != "pass"]
    assert root.name.startswith("Module._fsdp_wrapped_module.HfCausalLm.forward.0.output")
    assert "shape of NPU and Bench are inconsistent" in root.message


@pytest.mark.runtime
@pytest.mark.slow
def test_statistics_cannot_compare_fsdp_joined_projections(dumps, tmp_path):
    fsdp = _compare(dumps, tmp_path / "fsdp", "fsdp1", task="statistics")
    errors = [row for row in fsdp.rows if row.result == "error"]
    assert errors and all(".q_proj." in row.name or ".gate_proj." in row.name for row in errors)
    assert all("shape of NPU and Bench are inconsistent" in row.message for row in errors)
    megatron = _compare(dumps, tmp_path / "megatron", "megatron", task="statistics")
    assert megatron.error is None and megatron.counts["error"] == 0 and megatron.counts["pass"] > 0


@pytest.mark.parametrize(("name", "mapped"), [
    ("Module.model.layers.0.self_attn.q_proj.Linear.forward.0",
     "Module._fsdp_wrapped_module.model.layers.0._fsdp_wrapped_module.self_attn.q_proj.Linear.forward.0"),
    ("Module.model.layers.11.FSDPQwen2DecoderLayer.forward.0",
     "Module._fsdp_wrapped_module.model.layers.11._fsdp_wrapped_module.FSDPQwen2DecoderLayer.forward.0"),
    ("Module.model.embed_tokens.Embedding.forward.0", "Module._fsdp_wrapped_module.model.embed_tokens.Embedding.forward.0"),
    ("Module._fsdp_wrapped_module.model.layers.0._fsdp_wrapped_module.mlp.up_proj.Linear.forward.0", None),
    ("Torch.matmul.0.forward", None),
])
def test_fsdp1_name(name, mapped):
    assert fsdp1_name(name) == (mapped or name)


def test_mapped_names_leave_out_the_wrapped_root_only():
    names = ["Module._fsdp_wrapped_module.Qwen2ForCausalLM.forward.0", "Module._fsdp_wrapped_module.model.Qwen2Model.forward.0",
             "Module.model.norm.Qwen2RMSNorm.forward.0"]
    assert [is_wrapped_root(name) for name in names] == [True, False, False]
    assert mapped_names(names) == {names[0]: None,
                                   names[2]: "Module._fsdp_wrapped_module.model.norm.Qwen2RMSNorm.forward.0"}
