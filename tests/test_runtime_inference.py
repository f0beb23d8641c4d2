"""Run the code the inference-side rules insert, exactly as inserted, with torch (CPU) and msprobe.

- sglang-model-runner: fixture ModelRunners with SGLang's structure (0.4.6+ and 0.4.3 layouts) are
  patched by `rlpatch apply`; each scenario runs forward passes of a tiny model in a fresh process
  (msprobe's PrecisionDebugger is a per-process singleton) and the dump is read back.
- vllm-ascend-dispatch-logger: the `DispatchLogger` file the rule creates is driven with scheduler
  outputs built from vLLM's shapes, directly and through a patched fixture NPUModelRunner.
"""

from __future__ import annotations

import enum
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest
from conftest import FIXTURES, run_cli

from rlpatch.rules.vllm_ascend_dispatch_logger import DISPATCH_LOGGER_SOURCE

pytestmark = pytest.mark.runtime

CONFIG_VARIABLES = ("MSPROBE_SGLANG_CONFIG", "MSPROBE_SGLANG_CONFIG_PREFILL", "MSPROBE_SGLANG_CONFIG_DECODE")

SGLANG_DRIVER = textwrap.dedent(
    """
    import json, sys
    import torch
    from sglang.srt.model_executor.model_runner import ForwardBatch, ModelRunner, ServerArgs

    dp_size, gpu_id, mode, draft = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Linear(8, 16))
    server_args = ServerArgs(dp_size=dp_size, disaggregation_mode=mode)
    runner = ModelRunner(model, server_args, gpu_id=gpu_id, is_draft_worker=draft)
    outputs = [
        runner.forward(ForwardBatch(torch.tensor([1, 2, 3]), "extend")),
        runner.forward(ForwardBatch(torch.tensor([4]), "decode")),
        runner.forward(ForwardBatch(torch.tensor([5]), "decode")),
    ]
    shapes = [list(o.shape) for o in outputs]
    eager = server_args.disable_cuda_graph
    print(json.dumps({"msprobe_imported": "msprobe" in sys.modules, "shapes": shapes, "eager": eager}))
    """
)


def _msprobe() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("msprobe.pytorch")


def _patched(tree: Path, option: str) -> Path:
    result = run_cli("apply", option, str(tree))
    assert result.exit_code == 0, result.stderr
    return tree


def _copy(tmp_path_factory: pytest.TempPathFactory, fixture: str) -> Path:
    _msprobe()
    tree = tmp_path_factory.mktemp("runtime") / fixture
    shutil.copytree(FIXTURES / fixture, tree)
    return tree


@pytest.fixture(scope="module", params=["0.5.10.post1", "0.4.3.post4"])
def sglang_tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = _copy(tmp_path_factory, "sglang_runner")
    if request.param == "0.4.3.post4":  # the four-return dispatcher layout
        shutil.copyfile(FIXTURES / "sglang_model_runner_043.py", tree / "sglang/srt/model_executor/model_runner.py")
        (tree / "sglang/version.py").write_text('__version__ = "0.4.3.post4"\n')
    return _patched(tree, "--sglang-root")


def _config(folder: Path, name: str = "config.json") -> tuple[Path, Path]:
    dump_path = folder / f"dump-{name[:-5]}"
    path = folder / name
    path.write_text(
        json.dumps({"task": "statistics", "dump_path": str(dump_path), "rank": [], "step": [], "level": "mix"})
    )
    return path, dump_path


def _run_sglang(
    tree: Path, env: dict[str, str], dp_size: int = 1, gpu_id: int = 0, mode: str = "null", draft: bool = False
):
    clean = {key: value for key, value in os.environ.items() if key not in CONFIG_VARIABLES}
    return subprocess.run(
        [sys.executable, "-c", SGLANG_DRIVER, str(dp_size), str(gpu_id), mode, "1" if draft else "0"],
        capture_output=True,
        text=True,
        env={**clean, "PYTHONPATH": str(tree), **env},
        timeout=600,
    )


def _dumps(dump_path: Path) -> list[str]:
    return sorted(path.relative_to(dump_path).as_posix() for path in dump_path.glob("step*/*/dump.json"))


def test_sglang_unset_config_imports_nothing(sglang_tree: Path) -> None:
    result = _run_sglang(sglang_tree, {})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {
        "msprobe_imported": False,
        "shapes": [[3, 16], [1, 16], [1, 16]],
        "eager": False,
    }


def test_sglang_dump_per_forward_without_rank_id(sglang_tree: Path, tmp_path: Path) -> None:
    config, dump_path = _config(tmp_path)
    result = _run_sglang(sglang_tree, {"MSPROBE_SGLANG_CONFIG": str(config)}, dp_size=1, gpu_id=3)
    assert result.returncode == 0, result.stderr
    dumps = _dumps(dump_path)
    assert [d.split("/")[0] for d in dumps] == ["step0", "step1", "step2"]
    # No data parallelism: no rank_id, and without torch.distributed msprobe names the folder proc{pid}.
    assert all(d.split("/")[1].startswith("proc") for d in dumps), dumps
    # As SGLang 0.5.11 does, dumping switches graphs off (msprobe sees eager execution only).
    assert json.loads(result.stdout.splitlines()[-1])["eager"] is True
    assert json.loads((dump_path / dumps[0]).read_text())["data"], "empty dump"


def test_sglang_rank_id_is_gpu_id_under_data_parallelism(sglang_tree: Path, tmp_path: Path) -> None:
    config, dump_path = _config(tmp_path)
    result = _run_sglang(sglang_tree, {"MSPROBE_SGLANG_CONFIG": str(config)}, dp_size=2, gpu_id=3)
    assert result.returncode == 0, result.stderr
    assert _dumps(dump_path) == [f"step{n}/rank3/dump.json" for n in range(3)]


def test_sglang_pd_disaggregation_reads_its_own_config(sglang_tree: Path, tmp_path: Path) -> None:
    prefill, prefill_dump = _config(tmp_path, "prefill.json")
    shared, shared_dump = _config(tmp_path, "shared.json")
    env = {"MSPROBE_SGLANG_CONFIG_PREFILL": str(prefill), "MSPROBE_SGLANG_CONFIG": str(shared)}
    result = _run_sglang(sglang_tree, env, mode="prefill")
    assert result.returncode == 0, result.stderr
    assert len(_dumps(prefill_dump)) == 3 and not shared_dump.exists()
    # A decode server with only the shared variable is misconfigured: fail loudly.
    result = _run_sglang(sglang_tree, {"MSPROBE_SGLANG_CONFIG": str(shared)}, mode="decode")
    assert result.returncode != 0 and "MSPROBE_SGLANG_CONFIG_DECODE" in result.stderr


def test_sglang_draft_worker_is_not_dumped(sglang_tree: Path, tmp_path: Path) -> None:
    config, dump_path = _config(tmp_path)
    result = _run_sglang(sglang_tree, {"MSPROBE_SGLANG_CONFIG": str(config)}, draft=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["msprobe_imported"] is False
    assert not dump_path.exists()


def test_sglang_missing_config_file_fails_loudly(sglang_tree: Path, tmp_path: Path) -> None:
    result = _run_sglang(sglang_tree, {"MSPROBE_SGLANG_CONFIG": str(tmp_path / "missing.json")})
    assert (
        result.returncode != 0 and "MSPROBE_SGLANG_CONFIG=" in result.stderr and "no such config file" in result.stderr
    )


# ---------------------------------------------------------------------------------------------
# vLLM-Ascend dispatch logger
# ---------------------------------------------------------------------------------------------


class AttentionState(enum.Enum):
    """The members of vllm-ascend's AscendAttentionState that matter here."""

    ChunkedPrefill = 3
    DecodeOnly = 2


def _new_request(req_id: str, prompt: int) -> SimpleNamespace:
    # vllm.v1.core.sched.output.NewRequestData
    return SimpleNamespace(req_id=req_id, prompt_token_ids=list(range(prompt)), num_computed_tokens=0)


def _scheduler_output(new: list[SimpleNamespace], cached: object, tokens: dict[str, int]) -> SimpleNamespace:
    # vllm.v1.core.sched.output.SchedulerOutput
    return SimpleNamespace(
        scheduled_new_reqs=new,
        scheduled_cached_reqs=cached,
        num_scheduled_tokens=tokens,
        total_num_scheduled_tokens=sum(tokens.values()),
    )


def _cached(req_ids: list[str]) -> SimpleNamespace:
    # vllm >= 0.10: CachedRequestData holds parallel lists, req_ids among them.
    return SimpleNamespace(
        req_ids=req_ids, resumed_from_preemption=[False] * len(req_ids), new_token_ids=[[] for _ in req_ids]
    )


def _old_cached(req_ids: list[str]) -> list[SimpleNamespace]:
    # older vLLM: a list of CachedRequestData objects, one per request.
    return [SimpleNamespace(req_id=req_id, resumed_from_preemption=False) for req_id in req_ids]


def _logger_module(tmp_path: Path) -> ModuleType:
    path = tmp_path / "dispatch_logger.py"
    path.write_text(DISPATCH_LOGGER_SOURCE)
    spec = importlib.util.spec_from_file_location("rlpatch_test_dispatch_logger", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("cached_form", [_cached, _old_cached], ids=["req_ids-object", "old-list"])
def test_dispatch_logger_records_prefill_and_decode(tmp_path: Path, cached_form) -> None:
    logger = _logger_module(tmp_path).DispatchLogger(str(tmp_path / "dump"), 4242, 1)
    prefill = _scheduler_output([_new_request("a", 5), _new_request("b", 3)], cached_form([]), {"a": 5, "b": 3})
    mixed = _scheduler_output([_new_request("c", 4)], cached_form(["a", "b"]), {"a": 1, "b": 1, "c": 4})
    decode = _scheduler_output([], cached_form(["a", "b", "c"]), {"a": 1, "b": 1, "c": 1})
    logger.log_step(prefill, AttentionState.ChunkedPrefill, 0)
    logger.log_step(mixed, AttentionState.ChunkedPrefill, 1)
    logger.log_step(decode, AttentionState.DecodeOnly, 2)
    records = _records(tmp_path / "dump" / "4242" / "dispatch_log.jsonl")
    assert [set(record) for record in records] == [
        {"source", "timestamp", "pid", "rank", "step", "phase", "total_num_scheduled_tokens", "requests",
         "scheduler_order"}
    ] * 3  # no runner: no rows, no TP group
    assert records[1]["scheduler_order"] == ["a", "b", "c"]
    assert all(r["source"] == "dispatch_logger" and r["pid"] == 4242 and r["rank"] == 1 for r in records)
    assert [(r["step"], r["phase"], r["total_num_scheduled_tokens"]) for r in records] == [
        (0, "prefill", 8),
        (1, "prefill", 6),
        (2, "decode", 3),
    ]
    assert records[1]["requests"] == [
        {"request_id": "c", "type": "new", "tokens": 4},
        {"request_id": "a", "type": "cached", "tokens": 1},
        {"request_id": "b", "type": "cached", "tokens": 1},
    ]
    assert isinstance(records[0]["timestamp"], float)


def _input_batch(req_ids: list[str], computed: list[int]) -> SimpleNamespace:
    # vllm.v1.worker.gpu_input_batch.InputBatch: the persistent batch, rows in the order the runner packs them
    return SimpleNamespace(req_ids=req_ids, num_reqs=len(req_ids), num_computed_tokens_cpu=np.array(computed))


def _cached_with_computed(req_ids: list[str], computed: list[int]) -> SimpleNamespace:
    return SimpleNamespace(req_ids=req_ids, num_computed_tokens=computed, new_token_ids=[[] for _ in req_ids])


def test_dispatch_logger_rows_follow_the_input_batch_not_the_scheduler(tmp_path: Path) -> None:
    """A chunked prefill `a` (8 of 12 prompt tokens done) scheduled before decode `b`: the scheduler's dict lists
    a, b, c; Ascend attention swapped the decode to the front of the input batch, so the rows are b, a, c."""
    logger = _logger_module(tmp_path).DispatchLogger(str(tmp_path / "dump"), 4242, 0)
    output = _scheduler_output([_new_request("c", 3)], _cached_with_computed(["a", "b"], [8, 5]),
                               {"a": 4, "b": 1, "c": 3})
    runner = SimpleNamespace(input_batch=_input_batch(["b", "a", "c"], [5, 8, 0]))
    record = logger.log_step(output, AttentionState.ChunkedPrefill, 0, runner=runner)
    assert record["scheduler_order"] == ["a", "b", "c"] and record["rows_source"] == "input_batch"
    assert record["rows"] == [
        {"request_id": "b", "type": "cached", "offset": 0, "tokens": 1, "computed": 5},
        {"request_id": "a", "type": "cached", "offset": 1, "tokens": 4, "computed": 8},
        {"request_id": "c", "type": "new", "offset": 5, "tokens": 3, "computed": 0},
    ]


def test_dispatch_logger_reads_computed_from_the_input_batch_when_the_scheduler_has_none(tmp_path: Path) -> None:
    logger = _logger_module(tmp_path).DispatchLogger(str(tmp_path / "dump"), 4242, 0)
    output = _scheduler_output([], _cached(["a", "b"]), {"a": 1, "b": 1})
    record = logger.log_step(output, AttentionState.DecodeOnly, 0,
                             runner=SimpleNamespace(input_batch=_input_batch(["b", "a"], [6, 4])))
    assert [(r["request_id"], r["offset"], r["computed"]) for r in record["rows"]] == [("b", 0, 6), ("a", 1, 4)]


def test_dispatch_logger_never_stops_the_server_for_its_rows(tmp_path: Path) -> None:
    """No input batch: a record without rows. An input batch that does not cover the step: rows_error, no rows."""
    logger = _logger_module(tmp_path).DispatchLogger(str(tmp_path / "dump"), 4242, 0)
    output = _scheduler_output([], _cached(["a", "b"]), {"a": 1, "b": 1})
    bare = logger.log_step(output, AttentionState.DecodeOnly, 0, runner=SimpleNamespace())
    assert "rows" not in bare and "rows_source" not in bare and "rows_error" not in bare
    short = logger.log_step(output, AttentionState.DecodeOnly, 1, runner=SimpleNamespace(input_batch=_input_batch(["a"], [3])))
    assert "rows" not in short and "1 request(s), 1 token(s); the scheduler sent 2 request(s), 2 token(s)" in short["rows_error"]
    broken = logger.log_step(output, AttentionState.DecodeOnly, 2, runner=SimpleNamespace(input_batch=SimpleNamespace(req_ids=7)))
    assert "rows" not in broken and broken["rows_error"].startswith("TypeError")


def test_dispatch_logger_tp_group_from_vllm_parallel_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    group = SimpleNamespace(rank_in_group=1, world_size=2, ranks=[2, 3])
    state = ModuleType("vllm.distributed.parallel_state")
    state.get_tp_group = lambda: group  # type: ignore[attr-defined]
    distributed = ModuleType("vllm.distributed")
    distributed.parallel_state = state  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.distributed", distributed)
    monkeypatch.setitem(sys.modules, "vllm.distributed.parallel_state", state)
    logger = _logger_module(tmp_path).DispatchLogger(str(tmp_path / "dump"), 4242, 3)
    record = logger.log_step(_scheduler_output([], _cached(["a"]), {"a": 1}), AttentionState.DecodeOnly, 0)
    assert (record["tp_rank"], record["tp_size"], record["tp_ranks"]) == (1, 2, [2, 3])


def test_dispatch_logger_needs_a_dump_path(tmp_path: Path) -> None:
    module = _logger_module(tmp_path)
    debugger = SimpleNamespace(config=SimpleNamespace(dump_path=None))
    with pytest.raises(RuntimeError, match="dump_path"):
        module.DispatchLogger.for_debugger(debugger)


def _debugger(dump_path: Path, **service: object) -> SimpleNamespace:
    """The attributes of msprobe 26.2.0's PrecisionDebugger the logger reads: its config, and its service
    with a config of its own (a separate object: msprobe's service copies the config)."""
    service_config = SimpleNamespace(dump_path=str(dump_path), step=service.pop("step", []), rank=service.pop("rank", []))
    return SimpleNamespace(
        config=SimpleNamespace(dump_path=str(dump_path)),
        service=SimpleNamespace(config=service_config, **{"should_stop_service": False, "current_iter": 0,
                                                          "current_rank": 0, **service}),
    )


def test_dispatch_logger_skips_a_stopped_service(tmp_path: Path) -> None:
    module = _logger_module(tmp_path)
    debugger = _debugger(tmp_path / "dump", should_stop_service=True, current_iter=7)
    logger = module.DispatchLogger.for_debugger(debugger)
    assert logger.log_debugger_step(debugger, _scheduler_output([], _cached(["a"]), {"a": 1})) is None
    debugger.service.should_stop_service = False
    record = logger.log_debugger_step(
        debugger, _scheduler_output([], _cached(["a"]), {"a": 1}), AttentionState.DecodeOnly
    )
    assert record["step"] == 7 and record["pid"] == os.getpid() and record["phase"] == "decode"


def test_dispatch_logger_moves_msprobe_dump_path_into_the_pid_folder(tmp_path: Path) -> None:
    """msprobe writes {dump_path}/step{N}/rank{R}: the logger moves this process's dumps into {dump_path}/{pid}."""
    module = _logger_module(tmp_path)
    debugger = _debugger(tmp_path / "dump")
    logger = module.DispatchLogger.for_debugger(debugger)
    folder = str(tmp_path / "dump" / str(os.getpid()))
    assert debugger.service.config.dump_path == debugger.config.dump_path == folder
    assert logger.path == os.path.join(folder, "dispatch_log.jsonl")
    module.DispatchLogger.for_debugger(debugger)  # a second logger does not nest {pid}/{pid}
    assert debugger.service.config.dump_path == folder


def test_dispatch_logger_refuses_an_msprobe_whose_dump_path_it_cannot_move(tmp_path: Path) -> None:
    module = _logger_module(tmp_path)
    debugger = SimpleNamespace(config=SimpleNamespace(dump_path=str(tmp_path)), service=SimpleNamespace())
    with pytest.raises(RuntimeError, match="rollout replicas would overwrite"):
        module.DispatchLogger.for_debugger(debugger)


def test_dispatch_logger_logs_only_the_steps_and_ranks_msprobe_dumps(tmp_path: Path) -> None:
    """With a config step list [1, 2] msprobe writes no step0 folder: the log has no step0 record either."""
    module = _logger_module(tmp_path)
    debugger = _debugger(tmp_path / "dump", step=[1, 2], rank=[0])
    logger = module.DispatchLogger.for_debugger(debugger)
    output = _scheduler_output([_new_request("a", 3)], _cached([]), {"a": 3})
    logged = []
    for step in range(4):
        debugger.service.current_iter = step
        logged.append(logger.log_debugger_step(debugger, output) is not None)
    assert logged == [False, True, True, False]
    debugger.service.current_iter, debugger.service.current_rank = 1, 3
    assert logger.log_debugger_step(debugger, output) is None


VLLM_DRIVER = textwrap.dedent(
    """
    import json, sys
    from types import SimpleNamespace as NS
    import torch
    from vllm_ascend.worker.model_runner_v1 import NPUModelRunner

    def output(new, cached, tokens):
        return NS(scheduled_new_reqs=[NS(req_id=r) for r in new], scheduled_cached_reqs=NS(req_ids=cached),
                  num_scheduled_tokens=tokens, total_num_scheduled_tokens=sum(tokens.values()))

    torch.manual_seed(0)
    runner = NPUModelRunner(torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Linear(8, 16)), sys.argv[1] or None)
    # vLLM's persistent input batch, rows in the runner's order (b before a), as _update_states leaves it
    runner.input_batch = NS(req_ids=["b", "a"], num_reqs=2, num_computed_tokens_cpu=[0, 0])
    runner.execute_model(output(["a", "b"], [], {"a": 3, "b": 2}), torch.tensor([1, 2, 3, 4, 5]))
    runner.sample_tokens()
    if hasattr(runner, "_dummy_run"):  # 0.20.2rc1+: a dummy run ends with _finalize_dump_data(dump=False)
        runner._dummy_run(torch.tensor([0]))
    runner.execute_model(output([], ["a", "b"], {"a": 1, "b": 1}), torch.tensor([6, 7]))
    runner.sample_tokens()
    runner.execute_model(output([], ["a"], {"a": 1}), torch.tensor([8]), pooling=True)
    print(json.dumps({"msprobe_imported": "msprobe" in sys.modules, "logger": runner._dispatch_logger is not None}))
    """
)


@pytest.fixture(scope="module", params=["0.13.0", "0.23.0"])
def vllm_ascend_tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = _copy(tmp_path_factory, "vllm_ascend_runner")
    if request.param == "0.23.0":  # the _start_dump_data / _finalize_dump_data layout
        runner = tree / "vllm_ascend/worker/model_runner_v1.py"
        shutil.copyfile(FIXTURES / "vllm_ascend_model_runner_v1_023.py", runner)
        (tree / "vllm_ascend/_version.py").write_text('__version__ = version = "0.23.0"\n')
    return _patched(tree, "--vllm-ascend-root")


def _run_vllm(tree: Path, config: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", VLLM_DRIVER, config],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
        timeout=600,
    )


def test_patched_runner_logs_every_dumped_step(vllm_ascend_tree: Path, tmp_path: Path) -> None:
    config, dump_path = _config(tmp_path)
    result = _run_vllm(vllm_ascend_tree, str(config))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"msprobe_imported": True, "logger": True}
    (log,) = dump_path.glob("*/dispatch_log.jsonl")
    records = _records(log)
    # One record per msprobe step, numbered as msprobe numbers its step folders, which sit beside the
    # log in the process's own {pid} folder (none at the root, where replicas would collide).
    assert [(r["step"], r["phase"]) for r in records] == [(0, "prefill"), (1, "decode"), (2, "decode")]
    assert sorted({p.parts[-3] for p in log.parent.glob("step*/*/dump.json")}) == ["step0", "step1", "step2"]
    assert not list(dump_path.glob("step*"))
    assert [[q["request_id"] for q in r["requests"]] for r in records] == [["a", "b"], ["a", "b"], ["a"]]
    assert records[0]["requests"][0] == {"request_id": "a", "type": "new", "tokens": 3}
    # The patched stop sites hand the runner to the logger: rows follow its input batch, not the scheduler.
    assert [(r["request_id"], r["offset"], r["tokens"]) for r in records[0]["rows"]] == [("b", 0, 2), ("a", 2, 3)]
    assert records[0]["scheduler_order"] == ["a", "b"] and records[0]["rows_source"] == "input_batch"


def test_patched_runner_without_dump_config_has_no_logger(vllm_ascend_tree: Path) -> None:
    result = _run_vllm(vllm_ascend_tree, "")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"msprobe_imported": False, "logger": False}
