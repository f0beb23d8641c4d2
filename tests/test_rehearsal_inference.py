"""The rehearsal's inference side on the real vLLM-Ascend 0.23.0 runner, patched by `rlpatch apply`.

The released 0.23.0 wheel is patched with `--mode consistency`; two worker processes with the same
rank (two TP=1 rollout replicas of one node) then run the patched runner's own dump code
(tests/rehearsal/inference.py) with the real msprobe 26.2.0 at the same time, into one `dump_path`.
What this proves: the dumps land in `{dump_path}/{pid}/step{N}/rank0/` beside each process's
`dispatch_log.jsonl`, one record per dumped step, nothing at `{dump_path}/step{N}` where replicas
would collide, and `dumps check` reads the folder as two replicas with no problem.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from conftest import run_cli
from rehearsal_support import REQUESTS, inference_dumps, patched_vllm_ascend

pytestmark = [pytest.mark.runtime, pytest.mark.upstream]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return patched_vllm_ascend(tmp_path_factory.mktemp("vllm_ascend"))


@pytest.fixture(scope="module")
def infer(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    return inference_dumps(tree, tmp_path_factory.mktemp("infer_side"))


def test_every_dump_stop_site_of_the_real_runner_logs_first(tree: Path) -> None:
    """The driver runs `_finish_msprobe_step` right before `_finalize_dump_data`: so does every real site."""
    source = (tree / "vllm_ascend/worker/model_runner_v1.py").read_text(encoding="utf-8")
    sites = 0
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for before, statement in zip([None, *body], body, strict=False):
            text = ast.unparse(statement) if isinstance(statement, ast.Expr) else ""
            if text == "self._finalize_dump_data()":
                sites += 1
                assert before is not None and ast.unparse(before) == "self._finish_msprobe_step(scheduler_output)"
    assert sites == 4


def test_replicas_write_their_own_pid_folders(infer: tuple[Path, list[int]]) -> None:
    root, pids = infer
    assert not list(root.glob("step*")), "nothing at {dump_path}/step{N}: msprobe's path was moved"
    for pid, steps in zip(pids, (3, 2), strict=True):
        folder = root / str(pid)
        assert sorted(p.name for p in folder.glob("step*")) == [f"step{n}" for n in range(steps)]
        assert all((folder / f"step{n}" / "rank0" / "dump.json").is_file() for n in range(steps))
        records = [json.loads(line) for line in (folder / "dispatch_log.jsonl").read_text().splitlines()]
        assert [(r["step"], r["rank"], r["pid"]) for r in records] == [(n, 0, pid) for n in range(steps)]
    first = [json.loads(line) for line in (root / str(pids[0]) / "dispatch_log.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in first] == ["prefill", "decode", "prefill"]
    assert [[q["request_id"] for q in r["requests"]] for r in first] == [
        [f"{REQUESTS[0]}-0a1b2c3d"], [f"{REQUESTS[0]}-0a1b2c3d"], [REQUESTS[2], REQUESTS[3]]]


def test_dumps_check_sees_two_replicas_and_no_problem(infer: tuple[Path, list[int]]) -> None:
    root, pids = infer
    result = run_cli("dumps", "check", str(root), "--format", "json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0, report
    assert report["problems"] == [] and [(s["step"], s["ranks"]) for s in report["steps"]] == [
        (0, [0]), (1, [0]), (2, [0])]
    pid_list = ", ".join(map(str, sorted(pids)))
    assert report["notes"] == [f"rank0 was written by 2 processes at the same time (pids {pid_list}): rollout "
                               "replicas, each in its own {pid} folder"]
