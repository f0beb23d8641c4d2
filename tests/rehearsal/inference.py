"""The rehearsal's inference side: one vLLM-Ascend worker process, driven as the patched runner drives msprobe.

Usage: python inference.py PATCHED_TREE DUMP_CONFIG PLAN.json MODEL_DIR

MODEL_DIR is the Hugging Face folder the training side loads (`config.json`, `model.safetensors`); the
twin runs it in bfloat16, the dtype verl's rollout and its FSDP mixed precision compute in.

vLLM-Ascend needs an NPU, so its runner cannot be built here. What decides where the dumps land and
what the log says is the runner's dump code, and that is taken from the *patched* real file
`PATCHED_TREE/vllm_ascend/worker/model_runner_v1.py` (0.23.0): the statements of
`NPUModelRunner.__init__` from `dump_cfg = ...` through its `if dump_cfg is not None:` block (the
runner's own `PrecisionDebugger(dump_cfg)` and the logger rlpatch inserted after it), and the methods
`_start_dump_data`, `_finalize_dump_data` and rlpatch's `_finish_msprobe_step`, compiled into a small
runner class. `DispatchLogger` is imported from the file `rlpatch apply` created in that tree. Each
step then runs as a stop site of the patched file runs it: `_start_dump_data()`, the model, then
`self._finish_msprobe_step(scheduler_output)` right before `self._finalize_dump_data()`.

torch.distributed is initialised (gloo) with the plan's `world_size` (default 1, a TP=1 rollout replica:
msprobe names the folder `rank0` in every replica, which is what makes replicas of one node collide
without the pid move); with 2, the plan's `rank` is this process's TP rank and the twin holds its
shards (vllm_twin). The runner's `input_batch` (req_ids in row order, num_computed_tokens_cpu) and
`parallel_config.tensor_parallel_size` are set as vLLM's `_update_states` leaves them, so the patched
`_finish_msprobe_step` logs the rows the twin ran.
PLAN: {"init_file": path, "barrier": [folder, processes] or null, "rank": int, "world_size": int,
"fault": null|"batch"|"tp_shard", "steps": [{"requests": [{"request_id", "type": "new"|"cached",
"prompt": [token ids], "tokens": n, "computed": c}] in the runner's row order, "scheduler_order":
[request ids] (the scheduler's dict order; default the row order)}]}. `tokens` and `computed` default
to a whole prefill (new) or one decode token after the prompt (cached); a prefill chunk gives both.
With a barrier, each process waits until that many processes reached it, so replicas really dump at
the same time.
"""

from __future__ import annotations

import ast
import enum
import json
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vllm_twin import NO_TP, StepRows, TensorParallel, forward_context, from_hf_state_dict, inject_fault

RUNNER_FILE = "vllm_ascend/worker/model_runner_v1.py"
RUNNER_METHODS = ("_start_dump_data", "_finalize_dump_data", "_finish_msprobe_step")


class CUDAGraphMode(enum.Enum):
    """vllm.config.CUDAGraphMode's eager member (the consistency run is enforce_eager)."""

    NONE = 0


class AscendAttentionState(enum.Enum):
    """The members of vllm_ascend.attention's state the dispatch logger reads."""

    PrefillNoCache = 0
    DecodeOnly = 2
    ChunkedPrefill = 3


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _dump_block(init: ast.FunctionDef) -> list[ast.stmt]:
    """`dump_cfg = ...` through `if dump_cfg is not None: ...` in the runner's __init__."""
    body = init.body
    start = next(i for i, s in enumerate(body) if isinstance(s, ast.Assign) and _is_name(s.targets[0], "dump_cfg"))
    end = next(i for i, s in enumerate(body) if i > start and isinstance(s, ast.If) and isinstance(s.test, ast.Compare)
               and _is_name(s.test.left, "dump_cfg"))
    return body[start:end + 1]


def runner_class(tree: Path) -> type:
    """A class whose `init_dump` and dump methods are the patched runner's own statements."""
    source = (tree / RUNNER_FILE).read_text(encoding="utf-8")
    module = ast.parse(source)
    runner = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == "NPUModelRunner")
    methods = {n.name: n for n in runner.body if isinstance(n, ast.FunctionDef)}
    klass = ast.parse("class PatchedRunnerDumpCode:\n    def init_dump(self):\n        pass\n").body[0]
    assert isinstance(klass, ast.ClassDef) and isinstance(klass.body[0], ast.FunctionDef)
    klass.body[0].body = _dump_block(methods["__init__"])
    klass.body.extend(methods[name] for name in RUNNER_METHODS)
    compiled = compile(ast.Module(body=[klass], type_ignores=[]), str(tree / RUNNER_FILE), "exec")
    namespace: dict[str, Any] = {"CUDAGraphMode": CUDAGraphMode}
    exec(compiled, namespace)
    return namespace["PatchedRunnerDumpCode"]


def _import_created_logger_package(tree: Path) -> None:
    """Make `vllm_ascend.worker.dispatch_logger` the file apply created, without vllm_ascend's __init__
    (which imports vLLM and torch_npu)."""
    for name, folder in (("vllm_ascend", tree / "vllm_ascend"), ("vllm_ascend.worker", tree / "vllm_ascend/worker")):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules[name] = package


def _rows(step: dict[str, Any]) -> list[tuple[dict[str, Any], int, int]]:
    """(request, tokens, computed) in row order: a whole prefill, a chunk, or one decode token."""
    rows = []
    for request in step["requests"]:
        new = request["type"] == "new"
        tokens = int(request.get("tokens", len(request["prompt"]) if new else 1))
        computed = int(request.get("computed", 0 if new else len(request["prompt"])))
        rows.append((request, tokens, computed))
    return rows


def _scheduler_output(step: dict[str, Any]) -> types.SimpleNamespace:
    """vllm.v1.core.sched.output.SchedulerOutput's fields the logger reads, num_scheduled_tokens in the
    scheduler's order (not the runner's)."""
    rows = {request["request_id"]: (request, tokens, computed) for request, tokens, computed in _rows(step)}
    order = step.get("scheduler_order") or list(rows)
    new = [rows[r] for r in order if rows[r][0]["type"] == "new"]
    cached = [rows[r] for r in order if rows[r][0]["type"] == "cached"]
    return types.SimpleNamespace(
        scheduled_new_reqs=[types.SimpleNamespace(req_id=r["request_id"], num_computed_tokens=c) for r, _, c in new],
        scheduled_cached_reqs=types.SimpleNamespace(req_ids=[r["request_id"] for r, _, _ in cached],
                                                    num_computed_tokens=[c for _, _, c in cached]),
        num_scheduled_tokens={r: rows[r][1] for r in order}, total_num_scheduled_tokens=sum(t for _, t, _ in rows.values()))


def _input_batch(step: dict[str, Any]) -> types.SimpleNamespace:
    """vLLM's persistent InputBatch as _update_states leaves it for the step: its rows in the runner's order."""
    rows = _rows(step)
    return types.SimpleNamespace(req_ids=[r["request_id"] for r, _, _ in rows], num_reqs=len(rows),
                                 num_computed_tokens_cpu=np.array([c for _, _, c in rows]))


def _attn_state(step: dict[str, Any]) -> AscendAttentionState:
    rows = _rows(step)
    if all(r["type"] == "cached" and tokens == 1 for r, tokens, _ in rows):
        return AscendAttentionState.DecodeOnly
    if all(computed == 0 for _, _, computed in rows):
        return AscendAttentionState.PrefillNoCache
    return AscendAttentionState.ChunkedPrefill


def _step_inputs(step: dict[str, Any], kv_cache: dict[Any, Any]) -> tuple[torch.Tensor, torch.Tensor, list[int], StepRows]:
    """Token ids and positions packed in row order (vLLM's layout), each request's last row, the step's rows."""
    ids: list[int] = []
    positions: list[int] = []
    last: list[int] = []
    rows: list[tuple[str, int, int, int]] = []
    for request, tokens, computed in _rows(step):
        prompt = request["prompt"]
        rows.append((request["request_id"], len(ids), tokens, computed))
        if computed + tokens <= len(prompt):  # a prefill or a prefill chunk
            ids.extend(prompt[computed:computed + tokens])
        else:  # decode: the twin feeds the prompt's last token again (the same in every variant)
            ids.extend([prompt[-1]] * tokens)
        positions.extend(range(computed, computed + tokens))
        last.append(len(ids) - 1)
    return torch.tensor(ids), torch.tensor(positions), last, StepRows(rows, kv_cache)


def _wait_for_replicas(barrier: list[Any] | None) -> None:
    if not barrier:
        return
    folder, count = Path(barrier[0]), int(barrier[1])
    (folder / str(os.getpid())).touch()
    deadline = time.monotonic() + 120
    while len(list(folder.iterdir())) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"barrier {folder}: the other replicas never arrived")
        time.sleep(0.05)


def load_twin(model_dir: Path, tp: TensorParallel = NO_TP) -> torch.nn.Module:
    from safetensors.torch import load_file

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    return from_hf_state_dict(config, load_file(str(model_dir / "model.safetensors")), tp).to(torch.bfloat16).eval()


def main(tree: str, dump_config: str, plan_path: str, model_dir: str) -> None:
    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    tp = TensorParallel(int(plan.get("rank", 0)), int(plan.get("world_size", 1)))
    torch.distributed.init_process_group("gloo", init_method=f"file://{plan['init_file']}", rank=tp.rank,
                                         world_size=tp.size)
    _import_created_logger_package(Path(tree))
    model = load_twin(Path(model_dir), tp)
    inject_fault(model, plan.get("fault"), tp)
    runner = runner_class(Path(tree))()
    runner.ascend_config = types.SimpleNamespace(dump_config_path=dump_config)
    runner.compilation_config = types.SimpleNamespace(cudagraph_mode=CUDAGraphMode.NONE)
    runner.parallel_config = types.SimpleNamespace(tensor_parallel_size=tp.size)
    runner.model = model
    runner.init_dump()
    _wait_for_replicas(plan.get("barrier"))
    kv_cache: dict[Any, Any] = {}
    for step in plan["steps"]:
        ids, positions, last, rows = _step_inputs(step, kv_cache)
        runner.input_batch = _input_batch(step)  # _update_states: the step's rows, decodes first
        runner._start_dump_data()
        with torch.no_grad(), forward_context(rows):
            model.compute_logits(model(ids, positions)[last])
        runner.attn_state = _attn_state(step)
        runner._finish_msprobe_step(_scheduler_output(step))
        runner._finalize_dump_data()
    torch.distributed.destroy_process_group()
    print(json.dumps({"pid": os.getpid(), "logger": runner._dispatch_logger is not None}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
