"""Benchmark: `rlpatch dumps check` and `pair` over synthetic trees of 10,000 rank folders per side.

Run with `python tests/bench_dumps.py [--ranks N] [--steps S]` (part of `make bench`; never a timed
test). It writes a consistency run's two sides: training `step{T}/rank{R}` folders with one
update_actor_log.jsonl per rank, inference `{pid}/step{I}/rank{R}` folders with a dispatch log per
pid, each rank folder holding a small msprobe-shaped dump.json and a dump_tensor_data/ folder with
a large placeholder tensor file (check and pair must never read it). It prints the wall time of
`check` on each side and of `pair`, the time per rank folder, and the ratio of the time to read the
tree against a bare `os.walk` of it (how much the validation costs over listing the folders).

`--check-ranks N...` (default 1000 10000 100000) times `check` alone on bare trees of that many rank
folders (time per folder and peak memory: it must stay linear), and `--log-mb M...` (default 10 100;
`--log-mb 10 100 1000` for the 1 GB case, slow) on one update_actor log of that size (time per record
and peak memory: the log is streamed).

`--map-mb M...` (default 20 200) times the FSDP name mapping `compare --backend fsdp` writes of a
training dump.json of that size, with its peak memory (the dump is streamed entry by entry).

`--pair-log-mb M...` (default 20 200) times `pair` on a rows pair whose inference dispatch log is that
large (64 requests prefilled together, then decoded step after step): time per record, peak memory.

`--compare-pairs N` (default 8; 0 skips it) then times `compare` on real msprobe dumps of the twin
models of tests/divergence_twins.py (one training and one faulty inference dump, compared N times):
pairs per minute with 1 job and with `--jobs` jobs, and rlpatch's own time per pair (reading the
CSV, the attribution) on top of msprobe's subprocess. Then, in the same run, the per-request cut (issue
27): the same twin pair packed with a second request and cut back out by the logged rows through
`dumps pair`/`compare`; slicing and pairing time per pair against msprobe's compare time per pair
(budget 10%), and torch's start-up, paid once per run when msprobe runs in rlpatch's interpreter (with
`--python`, once per pair in that interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DUMP = {"task": "tensor", "level": "L0", "framework": "pytorch", "dump_data_dir": "dump_tensor_data",
        "data": {f"Module.model.layers.{i}.mlp.down_proj.Linear.forward.0": {"input_args": []} for i in range(4)}}
TENSOR_BYTES = 1024 * 1024  # sparse: costs no disk, but reading it would show in the time


def _rank_folder(folder: Path) -> None:
    (folder / "dump_tensor_data").mkdir(parents=True)
    (folder / "dump.json").write_text(json.dumps(DUMP))
    with open(folder / "dump_tensor_data" / "Module.model.forward.0.output.0.pt", "wb") as handle:
        handle.truncate(TENSOR_BYTES)


def generate(root: Path, ranks: int, steps: int) -> tuple[Path, Path]:
    """`ranks` x `steps` rank folders on each side; every step of every rank is one request."""
    train, infer = root / "train", root / "infer"
    for rank in range(ranks):
        records_train, records_infer = [], []
        for step in range(steps):
            request_id = f"{rank:016x}{step:016x}"
            _rank_folder(train / f"step{step}" / f"rank{rank}")
            _rank_folder(infer / str(10000 + rank) / f"step{step}" / f"rank{rank}")
            records_train.append({"source": "update_actor", "timestamp": time.time(), "pid": 20000 + rank,
                                  "rank": rank, "step": step, "request_ids": [request_id], "num_requests": 1})
            records_infer.append({"source": "dispatch_logger", "timestamp": time.time(), "pid": 10000 + rank,
                                  "rank": rank, "step": step, "phase": "prefill", "total_num_scheduled_tokens": 8,
                                  "requests": [{"request_id": f"{request_id}-0a1b2c3d", "type": "new", "tokens": 8}]})
        for path, records in ((train / str(20000 + rank) / "update_actor_log.jsonl", records_train),
                              (infer / str(10000 + rank) / "dispatch_log.jsonl", records_infer)):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return train, infer


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "rlpatch.cli", *argv], capture_output=True, text=True)
    return time.perf_counter() - start, result


def walk_time(root: Path) -> float:
    start = time.perf_counter()
    for _ in os.walk(root):
        pass
    return time.perf_counter() - start


def bench_compare(pairs: int, jobs: int) -> None:
    """Real `msprobe compare` runs through rlpatch's runner: pairs per minute, and rlpatch's share."""
    sys.path.insert(0, str(Path(__file__).parent))
    from divergence_twins import CULPRITS

    from rlpatch.dumps.compare import PairResult, run_all

    with tempfile.TemporaryDirectory(prefix="rlpatch-bench-compare-") as directory:
        twins = Path(__file__).with_name("divergence_twins.py")
        root = Path(directory)
        for name, naming, fault in (("train", "megatron", []), ("infer", "vllm", ["dtype"])):
            subprocess.run([sys.executable, str(twins), str(root / name), naming, "tensor", *fault], check=True,
                           capture_output=True)
        train, infer = (str(root / name / "step0" / "rank0" / "dump.json") for name in ("train", "infer"))
        from rlpatch.dumps.command import CompareCommand

        for workers in sorted({1, jobs}):
            results = [PairResult(None, CompareCommand((sys.executable,), train, infer, "megatron",  # type: ignore[arg-type]
                                                       str(root / f"o{workers}_{i}")), str(root / f"o{workers}_{i}"))
                       for i in range(pairs)]
            start = time.perf_counter()
            run_all(results, workers)
            wall = time.perf_counter() - start
            bad = [r.error for r in results if r.error or r.attribution is None]
            if bad:
                sys.exit(f"compare failed: {bad[0]}")
            culprit = results[0].attribution.divergence.module  # type: ignore[union-attr]
            assert culprit == CULPRITS["megatron"]["dtype"], culprit
            msprobe = sum(r.msprobe_seconds for r in results)
            print(f"compare --jobs {workers}: {pairs} pairs in {wall:.1f} s = {60 * pairs / wall:.1f} pairs/min; "
                  f"msprobe {msprobe / pairs:.2f} s per pair, rlpatch on top "
                  f"{1000 * (wall * workers - msprobe) / pairs:.0f} ms per pair (wall x jobs - msprobe)")


# Runs one rlpatch command in a child and reports its own peak resident memory: VmHWM of
# /proc/self/status (kB), the high-water mark of this process's own memory. Not ru_maxrss: Linux
# keeps that across fork and exec, so a child would report the benchmark's own size.
PEAK_REPORT = ("import atexit, sys\n"
               "def _peak():\n"
               "    for line in open('/proc/self/status'):\n"
               "        if line.startswith('VmHWM:'):\n"
               "            sys.stderr.write('\\npeak-rss-kib ' + line.split()[1] + '\\n')\n"
               "atexit.register(_peak)\n")
PEAK_CHILD = PEAK_REPORT + "from rlpatch.cli import main\nmain(sys.argv[1:])\n"


def timed_peak(argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds and peak memory (MiB) of `rlpatch ARGV` in its own process."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", PEAK_CHILD, *argv], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    peak = [line for line in result.stderr.splitlines() if line.startswith("peak-rss-kib ")]
    return seconds, (int(peak[-1].split()[1]) / 1024 if peak else float("nan")), result


def _bare_training_tree(root: Path, ranks: int) -> Path:
    """`step0/rank{R}` folders, each with a small dump.json only: the folder count is what is measured."""
    text = json.dumps(DUMP)
    for rank in range(ranks):
        folder = root / "step0" / f"rank{rank}"
        folder.mkdir(parents=True)
        (folder / "dump.json").write_text(text)
    return root


def start_up() -> float:
    """The seconds a `dumps check` of one rank folder takes (interpreter and imports), subtracted below."""
    with tempfile.TemporaryDirectory(prefix="rlpatch-bench-check-") as directory:
        tree = str(_bare_training_tree(Path(directory), 1))
        return min(timed_peak(["dumps", "check", tree])[0] for _ in range(3))


def bench_check_scaling(rank_counts: list[int], base: float) -> None:
    """`dumps check` on 10^3..10^5 rank folders: it must stay linear (time per folder flat)."""
    for ranks in rank_counts:
        with tempfile.TemporaryDirectory(prefix="rlpatch-bench-check-") as directory:
            tree = _bare_training_tree(Path(directory), ranks)
            seconds, peak, result = timed_peak(["dumps", "check", str(tree), "--format", "json"])
            if result.returncode not in (0, 1):
                sys.exit(f"check failed: {result.stderr[-500:]}")
            print(f"check {ranks:>7} rank folders: {seconds:7.2f} s = {1e6 * (seconds - base) / ranks:6.1f} us per folder "
                  "(start-up subtracted), "
                  f"peak {peak:7.1f} MiB")


def _log_tree(root: Path, megabytes: int, ids_per_record: int = 64) -> tuple[Path, int]:
    """A training folder whose one update_actor_log.jsonl is about `megabytes` MB of micro-batch records
    (a 1024-rank, 10,000-step run writes logs of this size), with the rank folders its steps name."""
    log = root / "20000" / "update_actor_log.jsonl"
    log.parent.mkdir(parents=True)
    ranks, records, written = 8, 0, 0
    for rank in range(ranks):
        folder = root / "step0" / f"rank{rank}"
        folder.mkdir(parents=True)
        (folder / "dump.json").write_text(json.dumps(DUMP))
    with open(log, "w") as handle:
        while written < megabytes * 1_000_000:
            rank = records % ranks
            line = json.dumps({"source": "update_actor", "timestamp": 1.0 + records, "pid": 20000, "rank": rank,
                               "step": 0, "request_ids": [f"{records:016x}{i:08x}" for i in range(ids_per_record)],
                               "num_requests": ids_per_record}) + "\n"
            handle.write(line)
            written += len(line)
            records += 1
    return root, records


def bench_check_logs(sizes_mb: list[int], base: float) -> None:
    """`dumps check` on one big update_actor log: time per record, and a peak memory that stays flat
    (the log is streamed, only numbers are kept)."""
    for size in sizes_mb:
        with tempfile.TemporaryDirectory(prefix="rlpatch-bench-log-") as directory:
            tree, records = _log_tree(Path(directory), size)
            seconds, peak, result = timed_peak(["dumps", "check", str(tree), "--format", "json"])
            if result.returncode not in (0, 1):
                sys.exit(f"check failed: {result.stderr[-500:]}")
            print(f"check, {size:>5} MB update log ({records} records): {seconds:7.2f} s = "
                  f"{1e6 * (seconds - base) / records:6.1f} us per record, peak {peak:7.1f} MiB")


def _decode_log_tree(root: Path, megabytes: int, requests: int = 64) -> tuple[Path, Path, int]:
    """A rows pair whose inference side's one dispatch_log.jsonl is about `megabytes` MB: `requests`
    requests prefilled together in step 0, then decoded together step after step (as a long rollout's
    log grows), against one training micro-batch of the same requests."""
    train, infer = root / "train", root / "infer"
    ids = [f"{i:032x}" for i in range(requests)]
    for folder in (train / "step0" / "rank0", infer / "10000" / "step0" / "rank0"):
        folder.mkdir(parents=True)
        (folder / "dump.json").write_text(json.dumps(DUMP))
    (train / "20000").mkdir()
    (train / "20000" / "update_actor_log.jsonl").write_text(json.dumps(
        {"source": "verl_engine", "phase": "log_prob", "pid": 20000, "rank": 0, "step": 0, "request_ids": ids,
         "num_requests": requests, "layout": "packed",
         "rows": [{"request_id": r, "batch_index": 0, "offset": 8 * i, "tokens": 8} for i, r in enumerate(ids)]}) + "\n")
    records, written = 0, 0
    with open(infer / "10000" / "dispatch_log.jsonl", "w") as handle:
        while written < megabytes * 1_000_000:
            prefill = records == 0
            line = json.dumps({
                "source": "dispatch_logger", "pid": 10000, "rank": 0, "step": records,
                "phase": "prefill" if prefill else "decode", "rows_source": "input_batch", "tp_size": 1,
                "total_num_scheduled_tokens": requests * (8 if prefill else 1), "scheduler_order": ids,
                "rows": [{"request_id": r, "type": "new" if prefill else "cached", "offset": i * (8 if prefill else 1),
                          "tokens": 8 if prefill else 1, "computed": 0 if prefill else 7 + records}
                         for i, r in enumerate(ids)]}) + "\n"
            handle.write(line)
            written += len(line)
            records += 1
    return train, infer, records


def bench_pair_logs(sizes_mb: list[int], base: float) -> None:
    """`dumps pair` on one big dispatch log (a long rollout's decode steps): time per record, and a peak
    memory that stays flat (the logs are read line by line, a few numbers kept per row)."""
    for size in sizes_mb:
        with tempfile.TemporaryDirectory(prefix="rlpatch-bench-pairlog-") as directory:
            train, infer, records = _decode_log_tree(Path(directory), size)
            seconds, peak, result = timed_peak(["dumps", "pair", "--train", str(train), "--infer", str(infer),
                                                "--format", "json"])
            if result.returncode not in (0, 1):
                sys.exit(f"pair failed: {result.stderr[-500:]}")
            pairs = len(json.loads(result.stdout)["pairs"])
            print(f"pair,  {size:>5} MB dispatch log ({records} records, {pairs} pairs): {seconds:7.2f} s = "
                  f"{1e6 * (seconds - base) / records:6.1f} us per record, peak {peak:7.1f} MiB")


MAP_CHILD = PEAK_REPORT + "from rlpatch.dumps.mapping import map_training_dump\nprint(map_training_dump(sys.argv[1], sys.argv[2]))\n"


def bench_mapping(sizes_mb: list[int]) -> None:
    """`compare --backend fsdp`'s FSDP name mapping of an FSDP2 training dump.json of that size: the
    dump is streamed entry by entry, so the peak memory stays flat."""
    entry = {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1, 6, 32],
                             "Max": 1.0, "Min": -1.0, "Mean": 0.0, "Norm": 5.0, "requires_grad": False}] * 4}
    for size in sizes_mb:
        with tempfile.TemporaryDirectory(prefix="rlpatch-bench-map-") as directory:
            path = Path(directory) / "dump.json"
            text = json.dumps(entry)
            count = size * 1_000_000 // (len(text) + 60)
            with open(path, "w") as handle:
                handle.write('{"task": "statistics", "level": "L0", "framework": "pytorch", "dump_data_dir": null, '
                             '"data": {')
                for i in range(count):
                    handle.write(f'{", " if i else ""}"Module.model.layers.{i % 64}.mlp.down_proj.Linear.forward.{i}": {text}')
                handle.write("}}")
            start = time.perf_counter()
            result = subprocess.run([sys.executable, "-c", MAP_CHILD, str(path), directory], capture_output=True,
                                    text=True)
            seconds = time.perf_counter() - start
            peak = [line for line in result.stderr.splitlines() if line.startswith("peak-rss-kib ")]
            if result.returncode != 0 or not peak or "train_fsdp_names" not in result.stdout:
                sys.exit(f"mapping failed: {result.stderr[-500:]}")
            print(f"fsdp name mapping, {size:>4} MB dump.json ({count} entries): {seconds:6.2f} s, "
                  f"peak {int(peak[-1].split()[1]) / 1024:7.1f} MiB")


def _packed_copy(dump_json: Path, out: Path, token_dim: int | None) -> None:
    """A copy of a real msprobe dump as if a second request of the same length were packed with it: every
    tensor with the twin's 6 tokens on `token_dim` gets 6 more rows (the request itself, reversed) first
    (inference, dim 0) or after it (training, dim 1); statistics as msprobe writes them."""
    import torch

    sys.path.insert(0, str(Path(__file__).parents[1] / "patcher" / "dumps"))
    from slicing import _leaves, _stats  # type: ignore[import-not-found]

    document = json.loads(dump_json.read_text())
    (out / "dump_tensor_data").mkdir(parents=True)
    for _, _, leaf, _ in _leaves(document["data"], ""):
        tensor = torch.load(dump_json.parent / "dump_tensor_data" / leaf["data_name"], weights_only=True)
        dim = 0 if token_dim is None else token_dim
        if tensor.dim() > dim and tensor.shape[dim] == 6 and (token_dim is None or tensor.shape[0] == 1):
            other = tensor.flip(dim)
            tensor = torch.cat([other, tensor] if token_dim is None else [tensor, other], dim=dim)
            leaf.update(_stats(tensor), shape=list(tensor.shape))
        torch.save(tensor, out / "dump_tensor_data" / leaf["data_name"])
    document["dump_data_dir"] = str(out / "dump_tensor_data")
    (out / "dump.json").write_text(json.dumps(document))


def bench_slicing(pairs: int) -> None:
    """Per pair, in the same run: msprobe's compare of a twin pair of whole dumps, and of the same pair
    packed with a second request and cut back out by the logged rows (slicing and pairing on top)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from divergence_twins import CULPRITS

    from rlpatch.dumps.api import CompareOptions, PairOptions, compare_dumps, pair_dumps
    from rlpatch.dumps.command import CompareCommand
    from rlpatch.dumps.compare import PairResult, run_all

    with tempfile.TemporaryDirectory(prefix="rlpatch-bench-slicing-") as directory:
        root = Path(directory)
        twins = Path(__file__).with_name("divergence_twins.py")
        for name, naming, fault in (("train", "fsdp", []), ("infer", "vllm", ["dtype"])):
            subprocess.run([sys.executable, str(twins), str(root / name), naming, "tensor", *fault], check=True,
                           capture_output=True)
        train, infer = (root / name / "step0" / "rank0" / "dump.json" for name in ("train", "infer"))
        packed_train, packed_infer = root / "ptrain", root / "pinfer"
        for step in range(pairs):  # one packed step per pair, each holding request r{step} and another
            _packed_copy(train, packed_train / f"step{step}" / "rank0", 1)
            _packed_copy(infer, packed_infer / "100" / f"step{step}" / "rank0", None)
        train_log = [{"pid": 200, "rank": 0, "step": s, "phase": "log_prob", "request_ids": [f"r{s}", f"o{s}"],
                      "num_requests": 2, "layout": "packed",
                      "rows": [{"request_id": f"r{s}", "batch_index": 0, "offset": 0, "tokens": 6},
                               {"request_id": f"o{s}", "batch_index": 0, "offset": 6, "tokens": 6}]}
                     for s in range(pairs)]
        infer_log = [{"pid": 100, "rank": 0, "step": s, "phase": "prefill", "total_num_scheduled_tokens": 12,
                      "scheduler_order": [f"r{s}", f"o{s}"], "rows_source": "input_batch", "tp_size": 1,
                      "rows": [{"request_id": f"o{s}", "type": "new", "offset": 0, "tokens": 6, "computed": 0},
                               {"request_id": f"r{s}", "type": "new", "offset": 6, "tokens": 6, "computed": 0}]}
                     for s in range(pairs)]
        for path, records in ((packed_train / "200" / "update_actor_log.jsonl", train_log),
                              (packed_infer / "100" / "dispatch_log.jsonl", infer_log)):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
        whole = [PairResult(None, CompareCommand((sys.executable,), str(train), str(infer), "fsdp",  # type: ignore[arg-type]
                                                 str(root / f"w{i}")), str(root / f"w{i}")) for i in range(pairs)]
        run_all(whole, 1)
        start = time.perf_counter()
        pair_dumps(PairOptions(str(packed_train), str(packed_infer)))
        pairing = time.perf_counter() - start
        data = compare_dumps(CompareOptions(str(packed_train), str(packed_infer), out=str(root / "cut"), jobs=1)).data
        cut = data["results"]
        assert len(cut) == 2 * pairs and all(r["error"] is None for r in cut), [r["error"] for r in cut][:1]
        mine = [r for r in cut if r["request_id"].startswith("r")]
        assert {r["divergence"]["module"] for r in mine} == {CULPRITS["fsdp"]["dtype"]}, mine[0]["divergence"]
        msprobe_whole = sum(r.msprobe_seconds for r in whole) / pairs
        slicing = sum(r["seconds"]["slicing"] for r in cut) / len(cut)
        msprobe_cut = sum(r["seconds"]["msprobe"] for r in cut) / len(cut)
        added = slicing + pairing / len(cut)
        # compare_dumps imports torch on its first cut (this bench had it already): once per run, shown apart.
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        torch_start = time.perf_counter() - start
        print(f"slicing: {len(cut)} cut pairs; msprobe compare {msprobe_whole:.2f} s per whole pair, "
              f"{msprobe_cut:.2f} s per cut pair; slicing {1000 * slicing:.0f} ms + pairing "
              f"{1000 * pairing / len(cut):.1f} ms per pair = {100 * added / msprobe_cut:.1f}% of msprobe's time "
              f"per cut pair (budget 10%); plus torch's start-up once per run: {torch_start:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=10000, help="rank folders per step and side (default 10,000)")
    parser.add_argument("--steps", type=int, default=1, help="steps per side (default 1)")
    parser.add_argument("--compare-pairs", type=int, default=8, help="real compares to time (0: skip)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="jobs for the parallel compare run")
    parser.add_argument("--check-ranks", type=int, nargs="*", default=[1000, 10000, 100000],
                        help="rank-folder counts for the check scaling run (default 10^3 10^4 10^5; none: skip)")
    parser.add_argument("--log-mb", type=int, nargs="*", default=[10, 100],
                        help="update-log sizes in MB for the check streaming run (default 10 100; add 1000 for 1 GB)")
    parser.add_argument("--pair-log-mb", type=int, nargs="*", default=[20, 200],
                        help="dispatch-log sizes in MB for the pair streaming run (default 20 200)")
    parser.add_argument("--map-mb", type=int, nargs="*", default=[20, 200],
                        help="training dump.json sizes in MB for the FSDP name mapping run (default 20 200)")
    args = parser.parse_args()
    bench_mapping(args.map_mb)
    base = start_up()
    print(f"start-up of one `dumps check` (subtracted from the per-folder and per-record figures): {base:.2f} s")
    bench_check_scaling(args.check_ranks, base)
    bench_check_logs(args.log_mb, base)
    bench_pair_logs(args.pair_log_mb, base)
    if args.compare_pairs:
        bench_compare(args.compare_pairs, args.jobs)
        bench_slicing(max(1, args.compare_pairs // 2))
    with tempfile.TemporaryDirectory(prefix="rlpatch-bench-dumps-") as directory:
        start = time.perf_counter()
        train, infer = generate(Path(directory), args.ranks, args.steps)
        folders = 2 * args.ranks * args.steps
        print(f"generated {folders} rank folders in {time.perf_counter() - start:.1f} s")
        walk = walk_time(Path(directory))
        total = 0.0
        for label, argv in (
            ("check train", ["dumps", "check", str(train), "--format", "json"]),
            ("check infer", ["dumps", "check", str(infer), "--format", "json"]),
            ("pair", ["dumps", "pair", "--train", str(train), "--infer", str(infer), "--format", "json"]),
        ):
            seconds, result = timed(argv)
            total += seconds
            if result.returncode not in (0, 1):
                sys.exit(f"{label} failed: {result.stderr}")
            extra = ""
            if label == "pair":
                extra = f", {len(json.loads(result.stdout)['pairs'])} pairs"
            print(f"{label:12s} {seconds:7.2f} s  ({1e6 * seconds / (folders / 2):.0f} us per rank folder{extra})")
        print(f"os.walk of the whole tree: {walk:.2f} s; check+check+pair / walk = {total / walk:.1f}x")
        print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
