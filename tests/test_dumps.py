"""`rlpatch dumps check|pair|compare` on small hand-written trees (layouts msprobe cannot be made to
produce here, and each correlation edge case); the real msprobe dumps are in test_runtime_dumps.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_cli, snapshot

from rlpatch.dumps import command, layout
from rlpatch.dumps.correlate import normalise_request_id, parse_timestamp

A, B, C, D = ("a" * 32, "b" * 32, "c" * 32, "d" * 32)
DUMP = {"task": "tensor", "level": "L0", "framework": "pytorch", "dump_data_dir": None,
        "data": {"Module.model.layers.0.mlp.down_proj.Linear.forward.0": {}}}


def dump(folder: Path, content: dict | str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "dump.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content or DUMP))
    return path


def log(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


def train_record(step: int, ids: list[str], rank: int = 0, pid: int = 100, timestamp=1.0) -> dict:
    return {"source": "update_actor", "timestamp": timestamp, "pid": pid, "rank": rank, "step": step,
            "request_ids": ids, "num_requests": len(ids)}


def infer_record(step: int, requests: list[tuple[str, str]], phase: str = "prefill", rank: int = 0,
                 pid: int = 200, timestamp=2.0) -> dict:
    return {"source": "dispatch_logger", "timestamp": timestamp, "pid": pid, "rank": rank, "step": step,
            "phase": phase, "total_num_scheduled_tokens": 4,
            "requests": [{"request_id": i, "type": t, "tokens": 2} for i, t in requests]}


def train_tree(root: Path, records: list[dict], pid: int = 100) -> Path:
    for record in records:
        dump(root / f"step{record['step']}" / f"rank{record['rank']}")
    log(root / str(pid) / "update_actor_log.jsonl", records)
    return root


def infer_tree(root: Path, records: list[dict], pid: int = 200, dumps: bool = True) -> Path:
    for record in records:
        if dumps:
            dump(root / str(pid) / f"step{record['step']}" / f"rank{record['rank']}")
    log(root / str(pid) / "dispatch_log.jsonl", records)
    return root


def pair_json(train: Path, infer: Path, *extra: str) -> tuple[int, dict]:
    result = run_cli("dumps", "pair", "--train", str(train), "--infer", str(infer), "--format", "json", *extra)
    assert result.stderr == "", result.stderr
    return result.exit_code, json.loads(result.stdout)


def check_json(root: Path, *extra: str) -> tuple[int, dict]:
    result = run_cli("dumps", "check", str(root), "--format", "json", *extra)
    assert result.stderr == "", result.stderr
    return result.exit_code, json.loads(result.stdout)


# ---- correlation -----------------------------------------------------------------------------------
def test_pairs_through_the_request_id_with_vllm_suffix(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A]), train_record(1, [B])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(f"{B}-0123abcd", "new")]), infer_record(1, [(f"{A}-89abcdef", "new")])])
    code, data = pair_json(train, infer)
    assert code == 0
    assert [(p["request_id"], p["train"]["step"], p["infer"]["step"]) for p in data["pairs"]] == [(B, 1, 0), (A, 0, 1)]
    pair = data["pairs"][0]
    assert set(pair) == {"request_id", "train", "infer", "command"}
    assert set(pair["train"]) == {"step", "rank", "path"} and set(pair["infer"]) == {"pid", "step", "rank", "path"}
    assert pair["train"]["path"] == str(train / "step1" / "rank0" / "dump.json")
    assert pair["infer"] == {"pid": 200, "step": 0, "rank": 0, "path": str(infer / "200" / "step0" / "rank0" / "dump.json")}
    assert data["unpaired"] == [] and data["problems"] == []


def test_pairs_without_a_suffix(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(3, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(7, [(A, "new")])])
    code, data = pair_json(train, infer)
    assert code == 0 and [(p["train"]["step"], p["infer"]["step"]) for p in data["pairs"]] == [(3, 7)]


def test_record_with_two_requests_is_unpaired(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A]), train_record(1, [B])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new"), (B, "new")])])
    code, data = pair_json(train, infer)
    assert code == 1 and data["pairs"] == []
    whys = {(u["request_id"], u["side"]): u["why"] for u in data["unpaired"]}
    assert "ran 2 requests" in whys[(A, "infer")] and "ran 2 requests" in whys[(B, "infer")]
    assert "not in any single-request prefill" in whys[(A, "train")]


def test_training_micro_batch_with_two_requests_is_unpaired(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A, B])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")])])
    code, data = pair_json(train, infer)
    assert code == 1 and data["pairs"] == []
    whys = {(u["request_id"], u["side"]): u["why"] for u in data["unpaired"]}
    assert "micro-batch holding it ran 2 requests" in whys[(A, "infer")]
    assert "micro-batch ran 2 requests" in whys[(B, "train")]


def test_decode_step_is_unpaired(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")]),
                                        infer_record(1, [(A, "cached")], phase="decode")])
    code, data = pair_json(train, infer)
    assert code == 0 and len(data["pairs"]) == 1 and data["pairs"][0]["infer"]["step"] == 0
    assert data["unpaired"] == [{"request_id": A, "side": "infer",
                                 "why": "inference step 1 (pid 200, rank 0) is a decode step"}]


def test_cached_request_in_a_prefill_is_unpaired(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "cached")])])
    code, data = pair_json(train, infer)
    assert code == 1 and "not new" in data["unpaired"][0]["why"]


@pytest.mark.parametrize("side", ["train", "infer"])
def test_id_on_one_side_only(tmp_path, side):
    train = train_tree(tmp_path / "t", [train_record(0, [A] if side == "train" else [B])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A if side == "infer" else B, "new")])])
    code, data = pair_json(train, infer)
    assert code == 1 and data["pairs"] == []
    assert {(u["request_id"], u["side"]) for u in data["unpaired"]} == {(A, side), (B, "infer" if side == "train" else "train")}


@pytest.mark.parametrize("missing", ["train", "infer"])
def test_missing_dump_file_is_unpaired(tmp_path, missing):
    train = train_tree(tmp_path / "t", [train_record(0, [A]), train_record(1, [B])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")]), infer_record(1, [(B, "new")])])
    gone = train / "step0" / "rank0" / "dump.json" if missing == "train" else infer / "200" / "step0" / "rank0" / "dump.json"
    gone.unlink()
    code, data = pair_json(train, infer)
    assert code == 0 and [p["request_id"] for p in data["pairs"]] == [B]
    assert data["unpaired"] == [{"request_id": A, "side": missing,
                                 "why": f"missing file {gone} (the config's step list may skip it)"}]


def test_iso_and_epoch_timestamps_both_order_the_records(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A], timestamp="2026-01-02T10:00:05Z"),
                                        train_record(1, [B], timestamp=1767348000.0)])
    infer = infer_tree(tmp_path / "i", [infer_record(1, [(A, "new")], timestamp="2026-01-02T10:00:09+00:00"),
                                        infer_record(0, [(B, "new")], timestamp="1767348001.5")])
    code, data = pair_json(train, infer)
    assert code == 0 and [p["request_id"] for p in data["pairs"]] == [B, A]
    assert parse_timestamp("2026-01-02T10:00:00Z") == 1767348000.0 == parse_timestamp(1767348000)
    assert parse_timestamp("yesterday") is None and parse_timestamp(True) is None


def test_pd_disaggregation_pairs_the_prefill_instance(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(f"{A}_P-0123abcd", "new")])], pid=300)
    infer_tree(infer, [infer_record(0, [(f"{A}_D", "new")], pid=301)], pid=301)
    code, data = pair_json(train, infer)
    assert code == 0 and [(p["request_id"], p["infer"]["pid"]) for p in data["pairs"]] == [(A, 300)]
    assert data["unpaired"][0]["side"] == "infer" and "decode instance of a PD run (_D)" in data["unpaired"][0]["why"]
    assert normalise_request_id(f"{A}_P-0123abcd") == (A, "P") and normalise_request_id(f"{A}-0123abcd_D") == (A, "D")
    assert normalise_request_id(A) == (A, None)


def _tp2_inference(root: Path) -> Path:
    infer_tree(root, [infer_record(0, [(f"{A}-0123abcd", "new")], rank=0, pid=400)], pid=400)
    infer_tree(root, [infer_record(0, [(f"{A}-0123abcd", "new")], rank=1, pid=401)], pid=401)
    return root


def test_tp2_megatron_pairs_rank_with_rank(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A], rank=0), train_record(0, [A], rank=1)])
    infer = _tp2_inference(tmp_path / "i")
    code, data = pair_json(train, infer, "--backend", "megatron")
    assert code == 0
    assert [(p["train"]["rank"], p["infer"]["rank"], p["infer"]["pid"]) for p in data["pairs"]] == [(0, 0, 400), (1, 1, 401)]
    outs = [p["command"][p["command"].index("-o") + 1] for p in data["pairs"]]
    assert len(set(outs)) == 2 and "--backend" in data["pairs"][0]["command"]


def test_tp2_megatron_rank_without_training_partner_is_unpaired(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A], rank=0)])
    code, data = pair_json(train, _tp2_inference(tmp_path / "i"), "--backend", "megatron")
    assert code == 0 and [p["infer"]["rank"] for p in data["pairs"]] == [0]
    assert "inference rank 1 has no training rank" in data["unpaired"][0]["why"]


def test_tp2_fsdp_is_shard_against_full_tensor(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A], rank=0)])
    code, data = pair_json(train, _tp2_inference(tmp_path / "i"))
    assert code == 1 and [p["infer"]["rank"] for p in data["pairs"]] == [0]
    assert "shard against full tensor" in data["problems"][0]


def test_proc_folder_on_the_training_side_pairs_through_the_pid(tmp_path):
    train = tmp_path / "t"
    dump(train / "step0" / "proc100")
    log(train / "100" / "update_actor_log.jsonl", [train_record(0, [A], pid=100)])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")])])
    code, data = pair_json(train, infer)
    assert code == 0 and data["pairs"][0]["train"]["path"] == str(train / "step0" / "proc100" / "dump.json")


def test_no_dispatch_log_means_no_correlation(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = tmp_path / "i"
    dump(infer / "step0" / "rank0")  # SGLang / vLLM-Ascend native: no dispatch log
    code, data = pair_json(train, infer)
    assert code == 1 and data["pairs"] == [] and "no dispatch_log.jsonl" in data["problems"][0]


def test_text_output_prints_each_pair_and_its_command(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(5, [(A, "new")])])
    result = run_cli("dumps", "pair", "--train", str(train), "--infer", str(infer))
    assert result.exit_code == 0
    assert f"{A}: train step0 rank0 <-> infer pid 200 step5 rank0" in result.stdout
    assert "-m msprobe.msprobe compare -tp" in result.stdout and "1 pair(s), 0 unpaired" in result.stdout


# ---- the compare command ---------------------------------------------------------------------------
def test_compare_argv_token_by_token():
    argv = command.compare_argv("T/dump.json", "I/dump.json", "megatron", "OUT", ["/opt/py", "-X", "utf8"])
    assert argv == ["/opt/py", "-X", "utf8", "-m", "msprobe.msprobe", "compare", "-tp", "T/dump.json", "-gp",
                    "I/dump.json", "--consistent_check", "--backend", "megatron", "-o", "OUT"]
    with pytest.raises(ValueError):
        command.compare_argv("T", "I", "deepspeed", "OUT")


def test_one_compare_command_from_the_plan_to_the_stored_run():
    planned = command.CompareCommand(("/opt/py", "-X", "utf8"), "T/dump.json", "I/dump.json", "fsdp", "OUT")
    cut = planned.on("OUT/cut/train/dump.json", "OUT/cut/infer/dump.json")  # what a rows pair or the FSDP map runs
    assert cut.argv == command.compare_argv("OUT/cut/train/dump.json", "OUT/cut/infer/dump.json", "fsdp", "OUT",
                                            ["/opt/py", "-X", "utf8"])
    assert command.CompareCommand.from_argv(cut.argv) == cut  # a stored run's argv reads back as its command
    for foreign in (["python", "-m", "msprobe.msprobe", "compare"], [*cut.argv, "--extra"], ["x", "-tp"]):
        assert command.CompareCommand.from_argv(foreign) is None, foreign


def test_each_compare_csv_is_read_once(tmp_path, monkeypatch):
    from rlpatch.dumps import compare

    reads = []
    original = compare.read_compare_csv
    monkeypatch.setattr(compare, "read_compare_csv", lambda path: reads.append(path) or original(path))
    train = train_tree(tmp_path / "t", [train_record(0, [A]), train_record(1, [B])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")]), infer_record(1, [(B, "new")])])
    result = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(tmp_path / "out"),
                     "--python", str(_fake_msprobe(tmp_path)), "--format", "json")
    csvs = [entry["csv"] for entry in json.loads(result.stdout)["results"]]
    assert len(csvs) == 2 and sorted(reads) == sorted(csvs)  # counts, first difference and culprit from one read


def test_no_backend_equals_form_is_ever_produced(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")])])
    for backend in command.BACKENDS:
        _, data = pair_json(train, infer, "--backend", backend)
        argv = data["pairs"][0]["command"]
        assert not any(token.startswith("--backend=") for token in argv)
        assert argv[argv.index("--backend") + 1] == backend
        # msprobe's allow-list (core/compare/compare_cli.py, auto mode): every dash token is on it
        flags = [token for token in argv[argv.index("compare") + 1:] if token.startswith("-")]
        assert flags == ["-tp", "-gp", "--consistent_check", "--backend", "-o"]


def test_compare_with_no_pair_runs_nothing(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(B, "new")])])
    out = tmp_path / "out"
    result = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(out),
                     "--python", sys.executable)
    assert result.exit_code == 1 and "no pair to compare" in result.stdout and not out.exists()


def test_compare_reports_a_failing_msprobe_run(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")])])
    fake = tmp_path / "fake_python"
    fake.write_text("#!/bin/sh\necho 'ERROR no module msprobe' >&2\nexit 3\n")
    fake.chmod(0o755)
    result = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(tmp_path / "out"),
                     "--python", str(fake), "--format", "json")
    assert result.exit_code == 1
    entry = json.loads(result.stdout)["results"][0]
    assert entry["exit_code"] == 3 and "ERROR no module msprobe" in entry["error"]


# ---- layouts and check -----------------------------------------------------------------------------
def test_check_native_layout_clean(tmp_path):
    for step in range(2):
        for rank in range(2):
            dump(tmp_path / f"step{step}" / f"rank{rank}")
    code, data = check_json(tmp_path, "--mode", "inference")
    assert code == 0 and data["mode"] == "inference" and data["root"] == str(tmp_path) and data["problems"] == []
    assert data["steps"] == [{"step": s, "stage": None, "ranks": [0, 1], "expected_ranks": [0, 1], "problems": []}
                             for s in range(2)]


def test_check_finds_gaps_and_bad_dump_json(tmp_path):
    dump(tmp_path / "step0" / "rank0")
    dump(tmp_path / "step0" / "rank2", "")
    dump(tmp_path / "step1" / "rank0", '{"task": "tensor", "da')
    dump(tmp_path / "step1" / "rank1", {"task": "tensor", "data": {}})
    (tmp_path / "step1" / "rank2").mkdir()
    code, data = check_json(tmp_path)
    assert code == 1
    step0, step1 = data["steps"]
    assert step0["ranks"] == [0, 2] and "missing rank folders: rank1" in step0["problems"]
    assert any("dump.json is empty" in p for p in step0["problems"])
    assert any("unreadable" in p for p in step1["problems"]) and any("holds no entries" in p for p in step1["problems"])
    assert any("no dump.json" in p for p in step1["problems"])


def test_check_large_dump_json_is_never_parsed(tmp_path, monkeypatch):
    path = dump(tmp_path / "step0" / "rank0")
    monkeypatch.setattr(layout, "PARSE_LIMIT", 10)
    monkeypatch.setattr(layout.json, "load", lambda *a, **k: pytest.fail("parsed a large dump.json"))
    assert layout.dump_json_problem(str(path)) is None
    path.write_text(json.dumps(DUMP)[:-5])
    assert layout.dump_json_problem(str(path)) == "dump.json is truncated or not JSON"


def test_check_verl_training_tool_layout_and_step_unknown(tmp_path):
    for global_step in ("step_1", "step_2", "step_unknown"):
        for rank in range(2):
            dump(tmp_path / global_step / "actor_update" / "step0" / f"rank{rank}")
    dump(tmp_path / "step_1" / "ref_compute_log_prob" / "step0" / "rank0")
    code, data = check_json(tmp_path)
    assert data["mode"] == "training" and code == 1
    got = [(s["step"], s["stage"], s["ranks"]) for s in data["steps"]]
    assert got == [(1, "actor_update", [0, 1]), (1, "ref_compute_log_prob", [0]), (2, "actor_update", [0, 1]),
                   ("unknown", "actor_update", [0, 1])]
    assert data["steps"][-1]["problems"] == [
        "step_unknown: verl did not know the global step (dump taken outside a training step)"]
    assert data["steps"][0]["problems"] == []


def test_check_proc_folders(tmp_path):
    dump(tmp_path / "step0" / "proc4242")
    log(tmp_path / "4242" / "update_actor_log.jsonl", [train_record(0, [A], pid=4242)])
    code, data = check_json(tmp_path)
    assert code == 1 and data["mode"] == "consistency" and data["steps"][0]["ranks"] == ["proc4242"]
    assert "no distributed rank known" in data["steps"][0]["problems"][0]


def test_check_several_pids_after_a_restart(tmp_path):
    """Two processes for one rank, one after the other: a restarted worker (its steps restart at 0)."""
    infer_tree(tmp_path, [infer_record(0, [(A, "new")], pid=500, timestamp=1.0),
                          infer_record(1, [(B, "new")], pid=500, timestamp=2.0)], pid=500)
    infer_tree(tmp_path, [infer_record(0, [(C, "new")], pid=501, timestamp=9.0)], pid=501)
    code, data = check_json(tmp_path)
    assert code == 1
    assert data["problems"] == ["rank0 was written by processes that ran one after another (pids 500; 501): "
                                "a restarted worker; each process counts its steps from 0"]
    assert [s["step"] for s in data["steps"]] == [0, 1]


def test_check_rollout_replicas_are_no_problem(tmp_path):
    """Two processes for one rank at the same time: two rollout replicas of a node, each in its pid folder."""
    infer_tree(tmp_path, [infer_record(0, [(A, "new")], pid=500, timestamp=1.0),
                          infer_record(1, [(B, "new")], pid=500, timestamp=5.0)], pid=500)
    infer_tree(tmp_path, [infer_record(0, [(C, "new")], pid=501, timestamp=3.0)], pid=501)
    code, data = check_json(tmp_path)
    assert code == 0 and data["problems"] == []
    assert data["notes"] == ["rank0 was written by 2 processes at the same time (pids 500, 501): rollout replicas, "
                             "each in its own {pid} folder"]


def test_check_dispatch_log_against_its_step_folders(tmp_path):
    """A logged step whose folder is missing, and a step folder no record describes, are both problems."""
    infer_tree(tmp_path, [infer_record(0, [(A, "new")], pid=500), infer_record(1, [(B, "new")], pid=500)], pid=500)
    (tmp_path / "500" / "step1" / "rank0" / "dump.json").unlink()
    (tmp_path / "500" / "step1" / "rank0").rmdir()
    dump(tmp_path / "500" / "step2" / "rank0")
    code, data = check_json(tmp_path)
    assert code == 1
    assert data["problems"] == [
        f"{tmp_path / '500' / 'dispatch_log.jsonl'}: logs step1/rank0 but {tmp_path / '500'} has no such dump folder "
        "(skipped by the config's step or rank list, or lost)",
        f"{tmp_path / '500'}: step2/rank0 has no record in {tmp_path / '500' / 'dispatch_log.jsonl'}: which requests "
        "it ran is unknown",
    ]


def _legacy_inference(root: Path, pids: list[int]) -> Path:
    """The layout of a dispatch logger that left msprobe's dump path alone: steps at the root."""
    for n, pid in enumerate(pids):
        records = [infer_record(0, [(f"{A if n == 0 else B}-0123abcd", "new")], pid=pid)]
        infer_tree(root, records, pid=pid, dumps=False)
        dump(root / "step0" / "rank0")
    return root


def test_pair_reads_the_earlier_layout_of_one_process_and_says_what_moved(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = _legacy_inference(tmp_path / "i", [300])
    code, data = pair_json(train, infer)
    assert code == 0 and data["problems"] == []
    assert data["pairs"][0]["infer"]["path"] == str(infer / "step0" / "rank0" / "dump.json")
    assert "older than this rlpatch" in data["notes"][0] and "one process wrote here (pid 300)" in data["notes"][0]
    assert "FSDP-named copy" in data["notes"][1]
    code, report = check_json(infer)
    assert code == 0 and report["notes"] == data["notes"][:1]


def test_pair_refuses_the_earlier_layout_shared_by_several_processes(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A]), train_record(1, [B])])
    infer = _legacy_inference(tmp_path / "i", [300, 301])
    code, data = pair_json(train, infer)
    assert code == 1 and data["pairs"] == []
    assert "2 processes (pids 300, 301) wrote into the same step folders" in data["problems"][0]
    assert {u["why"] for u in data["unpaired"] if u["side"] == "infer"} == {
        f"pid {pid}'s steps were written into the step folders several processes shared (an earlier dispatch "
        "logger): which dump is its own is unknown" for pid in (300, 301)}
    code, report = check_json(infer)
    assert code == 1 and "overwrote each other's dumps" in report["problems"][0]


def test_a_request_logged_in_two_training_steps_is_reported(tmp_path):
    """E.g. a reference pass dumped under the same request id: pair keeps the first and says so; check too."""
    train = train_tree(tmp_path / "t", [train_record(0, [A]), train_record(1, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")])])
    code, data = pair_json(train, infer)
    assert code == 1 and [p["train"]["step"] for p in data["pairs"]] == [0]
    message = f"request {A} is logged in 2 training steps of rank 0 (step0, step1): a second pass dumped it again"
    assert data["problems"] == [f"{message}; paired with the first"]
    code, report = check_json(train)
    assert code == 1 and report["problems"] == [message]


def test_the_log_prob_pass_pairs_before_a_training_pass(tmp_path):
    """DUMP_PHASE=all logs both passes of a request; the log-prob (prefill-shaped) one is paired."""
    records = [dict(train_record(0, [A]), phase="update_actor"), dict(train_record(1, [A]), phase="log_prob")]
    train = train_tree(tmp_path / "t", records)
    code, data = pair_json(train, infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")])]))
    assert code == 0 and data["problems"] == [] and [p["train"]["step"] for p in data["pairs"]] == [1]


def test_megatron_pairs_by_tp_position_across_data_parallel_groups(tmp_path):
    """Training TP group {2, 3} ran the request; the rollout replica numbers its ranks 0 and 1."""
    train = train_tree(tmp_path / "t", [train_record(0, [A], rank=2), train_record(0, [A], rank=3)])
    code, data = pair_json(train, _tp2_inference(tmp_path / "i"), "--backend", "megatron")
    assert code == 0 and [(p["train"]["rank"], p["infer"]["rank"]) for p in data["pairs"]] == [(2, 0), (3, 1)]


def test_check_pid_folder_without_dispatch_log(tmp_path):
    dump(tmp_path / "600" / "step0" / "rank0")
    code, data = check_json(tmp_path)
    assert code == 1 and "no dispatch_log.jsonl" in data["problems"][0]


SCRIPT = """\
#!/usr/bin/env bash
python3 -m verl.trainer.main_ppo \\
    trainer.n_gpus_per_node=4 trainer.nnodes=1 \\
    actor_rollout_ref.rollout.name=vllm \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 \\
    global_profiler.tool=precision_debugger \\
    global_profiler.global_tool_config.precision_debugger.config_path=./msprobe.json
"""


def test_check_with_script_expects_world_size_and_config_filters(tmp_path):
    (tmp_path / "run.sh").write_text(SCRIPT)
    (tmp_path / "msprobe.json").write_text(json.dumps({"task": "statistics", "level": "mix", "rank": [0, 1, 3],
                                                       "step": [1]}))
    root = tmp_path / "dump"
    for rank in (0, 1):
        dump(root / "step_1" / "actor_update" / "step0" / f"rank{rank}")
    code, data = check_json(root, "--script", str(tmp_path / "run.sh"))
    assert code == 1 and data["mode"] == "training"
    assert data["steps"][0]["expected_ranks"] == [0, 1, 3]
    assert data["steps"][0]["problems"] == ["missing rank folders: rank3"]
    assert "training mode with a non-empty step list" in data["problems"][0]


def test_check_with_script_inference_side_uses_rollout_tp(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.replace("global_profiler.tool=precision_debugger", "global_profiler.tool=null")
                      .replace("global_profiler.global_tool_config.precision_debugger.config_path=./msprobe.json",
                               "+actor_rollout_ref.rollout.engine_kwargs.vllm.additional_config.dump_config_path=./i.json"))
    (tmp_path / "i.json").write_text(json.dumps({"task": "tensor", "dump_path": "/x", "step": [0, 1]}))
    root = tmp_path / "dump"
    dump(root / "step0" / "rank0")
    code, data = check_json(root, "--script", str(script))
    assert code == 1 and data["mode"] == "inference"
    assert data["steps"][0]["expected_ranks"] == [0, 1] and data["steps"][0]["problems"] == ["missing rank folders: rank1"]
    assert data["problems"] == ["steps named in the config but not dumped: step1"]


def test_check_text_output(tmp_path):
    dump(tmp_path / "step0" / "rank0")
    result = run_cli("dumps", "check", str(tmp_path))
    assert result.exit_code == 0 and "step 0: ranks 0 (expected 0)" in result.stdout and "no problem found" in result.stdout


# ---- bad input: one line naming the path, exit 2, nothing written ----------------------------------
@pytest.mark.parametrize("make", ["missing", "empty", "file"])
@pytest.mark.parametrize("argv", [["check", "{bad}"], ["pair", "--train", "{bad}", "--infer", "{good}"],
                                  ["pair", "--train", "{good}", "--infer", "{bad}"],
                                  ["compare", "--train", "{bad}", "--infer", "{good}", "-o", "{out}"]])
def test_bad_directories(tmp_path, make, argv):
    good = infer_tree(tmp_path / "good", [infer_record(0, [(A, "new")])])
    train_tree(good, [train_record(0, [A])])
    bad = tmp_path / "bad"
    if make == "empty":
        (bad / "step_x").mkdir(parents=True)
    elif make == "file":
        bad.write_text("not a folder")
    before = snapshot(tmp_path)
    args = [a.format(bad=bad, good=good, out=tmp_path / "out") for a in argv]
    result = run_cli("dumps", *args)
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlpatch: error: ") and str(bad) in lines[0]
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("extra, message", [
    (["--python", "/nonexistent/python3"], "--python /nonexistent/python3: no such interpreter"),
    (["--report", "/nonexistent/dir/report.html"], "/nonexistent/dir/report.html: its directory does not exist"),
])
def test_compare_bad_options(tmp_path, extra, message):
    good = infer_tree(tmp_path / "good", [infer_record(0, [(A, "new")])])
    train_tree(good, [train_record(0, [A])])
    before = snapshot(tmp_path)
    result = run_cli("dumps", "compare", "--train", str(good), "--infer", str(good), "-o", str(tmp_path / "out"), *extra)
    assert result.exit_code == 2 and result.stderr.strip() == f"rlpatch: error: {message}"
    assert snapshot(tmp_path) == before


def test_check_script_missing(tmp_path):
    dump(tmp_path / "step0" / "rank0")
    result = run_cli("dumps", "check", str(tmp_path), "--script", str(tmp_path / "run.sh"))
    assert result.exit_code == 2 and result.stderr.strip() == f"rlpatch: error: {tmp_path / 'run.sh'}: no such file"


def test_check_and_pair_never_import_msprobe_or_plotly(tmp_path):
    import subprocess

    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")])])
    code = (
        "import sys\nfrom rlpatch.cli import main\n"
        "for argv in ([\"dumps\", \"check\", sys.argv[1]], [\"dumps\", \"pair\", \"--train\", sys.argv[1], \"--infer\", sys.argv[2]]):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print([m for m in ('msprobe', 'plotly', 'torch') if m in sys.modules])\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(train), str(infer)], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "tests")})
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stderr


FAKE_MSPROBE = """\
#!{python}
# Stands for `python -m msprobe.msprobe compare ...`: writes a compare CSV into -o, as msprobe does.
import csv, os, sys
out = sys.argv[sys.argv.index("-o") + 1]
os.makedirs(out, exist_ok=True)
print("[ERROR] Please verify that the CANN environment is set")  # msprobe says so on CPU
rows = [  # name, bench, EucDist (against a bench l2norm of 10), Result
    ("Module.model.layers.0.mlp.Linear.forward.0.input.0", "Module.model.layers.0.mlp.Linear.forward.0.input.0", "0", "pass"),
    ("Module.model.layers.0.mlp.Linear.forward.0.output.0", "Module.model.layers.0.mlp.Linear.forward.0.output.0", "0", "pass"),
    ("Module.model.layers.0.in_proj.Linear.forward.0.output.0", "N/A", "unsupported", "pass"),
    ("Module.model.layers.1.mlp.Linear.forward.0.input.0", "Module.model.layers.1.mlp.Linear.forward.0.input.0", "0", "pass"),
    ("Module.model.layers.1.mlp.Linear.forward.0.output.0", "Module.model.layers.1.mlp.Linear.forward.0.output.0", "0.5", "warning"),
    ("Module.model.layers.2.mlp.Linear.forward.0.input.0", "Module.model.layers.2.mlp.Linear.forward.0.input.0", "0.5", "pass"),
    ("Module.model.layers.2.mlp.Linear.forward.0.output.0", "Module.model.layers.2.mlp.Linear.forward.0.output.0", "0.6", "error"),
]
with open(os.path.join(out, "compare_result_20260101000000.csv"), "w", newline="") as handle:
    writer = csv.writer(handle)
    writer.writerow(["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
                     "Cosine", "EucDist", "MaxAbsErr", "Bench l2norm", "Result", "Err_message"])
    for name, bench, distance, result in rows:
        writer.writerow([name, bench, "torch.float32", "torch.float32", "[2, 8]", "[2, 8]", "1.0", distance, "0.1",
                         "10", result, "" if result == "pass" else "too far"])
"""


def _fake_msprobe(tmp_path: Path) -> Path:
    fake = tmp_path / "fake_python"
    fake.write_text(FAKE_MSPROBE.format(python=sys.executable))
    fake.chmod(0o755)
    return fake


def test_compare_names_the_module_that_introduces_the_divergence(tmp_path):
    train = train_tree(tmp_path / "t", [train_record(0, [A]), train_record(1, [B])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")]), infer_record(1, [(B, "new")])])
    result = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(tmp_path / "out"),
                     "--python", str(_fake_msprobe(tmp_path)), "--format", "json")
    assert result.exit_code == 1, result.stdout + result.stderr
    data = json.loads(result.stdout)
    entries = data["results"]
    assert [e["request_id"] for e in entries] == [A, B]
    for entry in entries:
        # msprobe's counts of the matched rows, and the unmatched one counted, not dropped
        assert entry["rows"] == {"pass": 4, "warning": 1, "error": 1, "unmatched": 1, "no_data": 0, "unreadable": 0,
                                "roots": 0}
        assert entry["verdict"] == "diverges"
        assert entry["divergence"] == {
            "module": "model.layers.1.mlp", "name": "Module.model.layers.1.mlp.Linear.forward.0",
            "infer_name": "Module.model.layers.1.mlp.Linear.forward.0", "layer": 1, "metric": "norm_relative",
            "output_error": 0.05, "input_error": 0.0, "floor": 2.0**-24 * 8}
        assert entry["csv"] == str(tmp_path / "out" / entry["request_id"] / "compare_result_20260101000000.csv")
    assert data["culprits"] == [{"module": "model.layers.1.mlp", "layer": 1, "pairs": [A, B], "ranks": [0]}]
    text = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(tmp_path / "out2"),
                   "--python", str(_fake_msprobe(tmp_path)), "--only", B)
    assert text.exit_code == 1
    assert text.stdout.splitlines()[0] == ("verdict: 1 pair(s) compared (1 diverges), 0 unpaired; "
                                           "culprit model.layers.1.mlp in 1 pair(s)")
    assert A not in text.stdout and "model.layers.1.mlp introduces it: output error 0.05" in text.stdout
    # a floor above the error: no culprit, exit 0
    loose = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(tmp_path / "out3"),
                    "--python", str(_fake_msprobe(tmp_path)), "--rtol", "0.1", "--jobs", "1", "--format", "json")
    assert loose.exit_code == 0 and json.loads(loose.stdout)["culprits"] == []
    missing = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "--only", "nope")
    assert missing.exit_code == 2 and "no pair matches --only nope" in missing.stderr


def test_compare_progress_bar_only_on_a_terminal(tmp_path):
    import pty
    import subprocess

    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")])])
    argv = [sys.executable, "-m", "rlpatch.cli", "dumps", "compare", "--train", str(train), "--infer", str(infer),
            "--python", str(_fake_msprobe(tmp_path))]
    piped = subprocess.run(argv + ["-o", str(tmp_path / "o1")], capture_output=True, text=True)
    assert piped.returncode == 1 and "msprobe compare" not in piped.stderr
    leader, follower = pty.openpty()
    try:
        on_tty = subprocess.run(argv + ["-o", str(tmp_path / "o2")], stdout=subprocess.PIPE, stderr=follower, text=True)
        os.close(follower)
        follower = -1
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert on_tty.returncode == 1 and b"msprobe compare" in seen
    assert on_tty.stdout == piped.stdout.replace(str(tmp_path / "o1"), str(tmp_path / "o2"))


def test_compare_report_has_the_verdict_facts_and_a_plot_per_request(tmp_path):
    pytest.importorskip("plotly")
    train = train_tree(tmp_path / "t", [train_record(0, [A]), train_record(1, [B])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")]), infer_record(1, [(B, "new")])])
    report = tmp_path / "report.html"
    result = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(tmp_path / "out"),
                     "--python", str(_fake_msprobe(tmp_path)), "--report", str(report))
    assert result.exit_code == 1 and f"report written to {report}" in result.stdout
    page = report.read_text()
    assert page.index('class="verdict') < page.index("<h2>Summary</h2>") < page.index('id="overview"') \
        < page.index("<h2>Run</h2>") < page.index("<h2>Unpaired")
    assert "Culprit <code>model.layers.1.mlp</code>: 2 pair(s)" in page and "rlpatch dumps compare" in page
    # one collapsed section per request, its plot drawn from the data embedded once; plotly.js once
    assert page.count('<details class="request"') == 2 and page.count('id="rlpatch-data"') == 1
    assert page.count("Plotly") > 0 and "cdn.plot.ly" not in page.split("</script>", 2)[2]
    assert page.count('<a href="out/') == 2 and '<a href="#r-1">' in page and 'type: "log"' in page
    assert not list(tmp_path.glob(".rlpatch-report-*"))  # written atomically, no temporary left


def test_compare_without_plotly_fails_before_any_compare(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_plotly(name, *args, **kwargs):
        if name == "plotly" or name.startswith("plotly."):
            raise ImportError("No module named 'plotly'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_plotly)
    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")])])
    result = run_cli("dumps", "compare", "--train", str(train), "--infer", str(infer), "-o", str(tmp_path / "out"),
                     "--python", str(_fake_msprobe(tmp_path)), "--report", str(tmp_path / "r.html"))
    assert result.exit_code == 2 and "pip install 'rlpatch[report]'" in result.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "r.html").exists()


def test_check_and_pair_never_open_tensor_files(tmp_path, monkeypatch):
    import builtins
    import io

    train = train_tree(tmp_path / "t", [train_record(0, [A])])
    infer = infer_tree(tmp_path / "i", [infer_record(0, [(A, "new")])])
    for rank_dir in (train / "step0" / "rank0", infer / "200" / "step0" / "rank0"):
        (rank_dir / "dump_tensor_data").mkdir()
        (rank_dir / "dump_tensor_data" / "Module.model.forward.0.output.0.pt").write_bytes(b"\0" * 64)
    opened: list[str] = []
    real_open, real_io_open = builtins.open, io.open

    def spy(real):
        def wrapped(file, *args, **kwargs):
            opened.append(str(file))
            return real(file, *args, **kwargs)
        return wrapped

    monkeypatch.setattr(builtins, "open", spy(real_open))
    monkeypatch.setattr(io, "open", spy(real_io_open))
    assert run_cli("dumps", "check", str(train)).exit_code == 0
    assert run_cli("dumps", "pair", "--train", str(train), "--infer", str(infer)).exit_code == 0
    assert opened and not [path for path in opened if path.endswith(".pt") or "dump_tensor_data" in path]
    assert not [path for path in opened if path.endswith("dump.json") and "/i/" in path]  # pair: existence only
