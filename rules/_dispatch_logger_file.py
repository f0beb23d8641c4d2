"""The whole text of `vllm_ascend/worker/dispatch_logger.py`, the file the rule
`vllm-ascend-dispatch-logger` adds to a vLLM-Ascend tree (and `revert` deletes).

It is run by the inference server, not by rlpatch: it is kept apart from the rule that decides
where the runner calls it. The fixtures and the runtime tests execute this text as the server would.
"""

DISPATCH_LOGGER_SOURCE = '''\
"""Which requests each dumped model step ran: `{dump_path}/{pid}/dispatch_log.jsonl`.

Added by rlpatch (rule vllm-ascend-dispatch-logger); `rlpatch revert` deletes this file. The
runner calls it right before msprobe closes a dump step, so record N describes msprobe's step N.

A step packs the tokens of its requests along dim 0 (`[num_tokens, ...]`) in the order of the
runner's persistent input batch (`runner.input_batch.req_ids`, already reordered for the step:
Ascend attention puts decodes first), which is not the order of
`scheduler_output.num_scheduled_tokens`. "rows" records that real order with each request's first
row, token count and tokens computed before the step (a prefill chunk covers prompt positions
[computed, computed + tokens)); "scheduler_order" keeps the dict order (what msprobe's
request-scoped dumping cuts by). The runner reorders its batch in `_update_states`, before the
forward, and nothing reorders it before the stop sites, so the order read here is the order the
model ran. Logging never stops the server: a runner without an input batch gives a record without
rows, and an unexpected shape gives "rows_error" instead of rows.

msprobe writes `{dump_path}/step{N}/rank{R}/` (its service reads `config.dump_path` at every
start), so every vLLM process of a node (one per rollout replica) would write into the same
folders. When the logger starts it moves this process's dump path into `{dump_path}/{pid}`, as
msprobe's own consistency guide does: dumps and log then sit side by side in
`{dump_path}/{pid}/step{N}/rank{R}/` and `{dump_path}/{pid}/dispatch_log.jsonl`.
"""

import json
import os
import time


class DispatchLogger:
    """Appends one JSON record per dumped model step to {dump_path}/{pid}/dispatch_log.jsonl."""

    def __init__(self, dump_path, pid, rank):
        if not dump_path:
            raise ValueError("DispatchLogger: msprobe config has no dump_path")
        self.dump_path = str(dump_path)
        self.pid = int(pid)
        self.rank = int(rank)
        self.folder = os.path.join(self.dump_path, str(self.pid))
        self.path = os.path.join(self.folder, "dispatch_log.jsonl")
        self._steps = 0

    @classmethod
    def for_debugger(cls, debugger):
        """The logger of this process for a msprobe PrecisionDebugger; moves its dumps into {dump_path}/{pid}."""
        config = getattr(debugger, "config", None)
        dump_path = getattr(config, "dump_path", None)
        if not dump_path:
            raise RuntimeError(
                "rlpatch dispatch logger: the msprobe debugger has no dump_path; "
                "set dump_path in the dump config"
            )
        dump_path = os.path.normpath(str(dump_path))
        if os.path.basename(dump_path) == str(os.getpid()):  # moved already (a second logger for this debugger)
            dump_path = os.path.dirname(dump_path)
        logger = cls(dump_path, os.getpid(), _current_rank())
        logger.move_dump_path(debugger)
        return logger

    def move_dump_path(self, debugger):
        """Point msprobe's dump folder at {dump_path}/{pid} (its service keeps its own copy of the config)."""
        service_config = getattr(getattr(debugger, "service", None), "config", None)
        if getattr(service_config, "dump_path", None) is None:
            raise RuntimeError(
                "rlpatch dispatch logger: this msprobe keeps no service.config.dump_path, so each process's "
                "dumps cannot be moved into {dump_path}/{pid}; rollout replicas would overwrite each other's "
                "step folders (use mindstudio-probe 26.x)"
            )
        for holder in (service_config, getattr(debugger, "config", None)):
            if holder is not None and os.path.normpath(str(holder.dump_path)) != self.folder:
                holder.dump_path = self.folder

    def log_debugger_step(self, debugger, scheduler_output, attn_state=None, runner=None):
        """Log the step the debugger is about to close, unless msprobe does not dump it."""
        service = getattr(debugger, "service", None)
        if service is not None and getattr(service, "should_stop_service", False):
            return None
        step = getattr(service, "current_iter", None)
        rank = getattr(service, "current_rank", None)
        service_config = getattr(service, "config", None)
        steps = getattr(service_config, "step", None) or []
        ranks = getattr(service_config, "rank", None) or []
        if (steps and step not in steps) or (ranks and rank not in ranks):
            return None  # outside the config's step or rank list: msprobe writes no folder for it
        return self.log_step(scheduler_output, attn_state, self._steps if step is None else step, rank, runner)

    def log_step(self, scheduler_output, attn_state=None, step=None, rank=None, runner=None):
        """Append the record of one model step and return it."""
        requests = _requests(scheduler_output)
        record = {
            "source": "dispatch_logger",
            "timestamp": time.time(),
            "pid": self.pid,
            "rank": self.rank if rank is None else int(rank),
            "step": self._steps if step is None else int(step),
            "phase": _phase(attn_state, requests),
            "total_num_scheduled_tokens": int(getattr(scheduler_output, "total_num_scheduled_tokens", 0) or 0),
            "requests": requests,
            "scheduler_order": [str(request_id) for request_id in _scheduled_tokens(scheduler_output)],
        }
        record.update(_rows_fields(runner, scheduler_output))
        record.update(_tp_fields(runner))
        os.makedirs(self.folder, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\\n")
        self._steps += 1
        return record


def _current_rank():
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except ImportError:
        pass
    return int(os.environ.get("RANK", "0") or 0)


def _scheduled_tokens(scheduler_output):
    return getattr(scheduler_output, "num_scheduled_tokens", None) or {}


def _computed_before_step(scheduler_output):
    """request id -> tokens computed before this step, as the scheduler sent them (the runner's
    `_update_states` copies them into `input_batch.num_computed_tokens_cpu`, which positions come from)."""
    computed = {}
    for request in getattr(scheduler_output, "scheduled_new_reqs", None) or []:
        if getattr(request, "num_computed_tokens", None) is not None:
            computed[request.req_id] = int(request.num_computed_tokens)
    cached = getattr(scheduler_output, "scheduled_cached_reqs", None)
    counts = getattr(cached, "num_computed_tokens", None)
    if counts is not None:
        computed.update(zip(_cached_request_ids(cached), (int(count) for count in counts)))
    return computed


def _rows_fields(runner, scheduler_output):
    """{"rows": [...], "rows_source": "input_batch"}, {} without an input batch, {"rows_error"} on a surprise."""
    input_batch = getattr(runner, "input_batch", None)
    req_ids = getattr(input_batch, "req_ids", None)
    if req_ids is None:
        return {}
    try:
        return {"rows": _rows(input_batch, list(req_ids), scheduler_output), "rows_source": "input_batch"}
    except Exception as error:  # never stop the server for a log line
        return {"rows_error": f"{type(error).__name__}: {error}"}


def _rows(input_batch, req_ids, scheduler_output):
    """The step's requests in the input batch's row order (what the runner packs along dim 0)."""
    tokens = _scheduled_tokens(scheduler_output)
    new = {request.req_id for request in (getattr(scheduler_output, "scheduled_new_reqs", None) or [])}
    computed = _computed_before_step(scheduler_output)
    computed_cpu = getattr(input_batch, "num_computed_tokens_cpu", None)
    num_reqs = getattr(input_batch, "num_reqs", None)
    rows = []
    offset = 0
    for index, request_id in enumerate(req_ids[:num_reqs] if num_reqs is not None else req_ids):
        if request_id is None or request_id not in tokens:
            continue  # an empty slot, or a request this step does not run
        count = int(tokens[request_id])
        before = computed.get(request_id)
        if before is None and computed_cpu is not None:
            before = int(computed_cpu[index])
        rows.append({"request_id": str(request_id), "type": "new" if request_id in new else "cached",
                     "offset": offset, "tokens": count, "computed": before})
        offset += count
    total = int(getattr(scheduler_output, "total_num_scheduled_tokens", offset) or 0)
    if offset != total or len(rows) != len(tokens):
        raise ValueError(f"input batch rows cover {len(rows)} request(s), {offset} token(s); the scheduler "
                         f"sent {len(tokens)} request(s), {total} token(s)")
    return rows


def _tp_fields(runner):
    """This process's tensor-parallel group: vLLM's parallel_state, else torch.distributed and the TP size."""
    try:
        from vllm.distributed import parallel_state

        group = parallel_state.get_tp_group()
        return {"tp_rank": int(group.rank_in_group), "tp_size": int(group.world_size),
                "tp_ranks": [int(rank) for rank in group.ranks]}
    except Exception:  # no vLLM, or its groups are not built: the runner's TP size and the global rank
        pass
    size = getattr(getattr(runner, "parallel_config", None), "tensor_parallel_size", None)
    try:
        import torch.distributed as dist

        if not size or not (dist.is_available() and dist.is_initialized()):
            return {}
        rank, size = dist.get_rank(), int(size)
    except Exception:
        return {}
    first = rank - rank % size  # vLLM's rank layout: TP is the innermost dimension
    return {"tp_rank": rank % size, "tp_size": size, "tp_ranks": list(range(first, first + size))}


def _cached_request_ids(cached):
    """vLLM >= 0.10: an object with .req_ids; older vLLM: a list of objects with .req_id."""
    if cached is None:
        return []
    req_ids = getattr(cached, "req_ids", None)
    if req_ids is not None:
        return list(req_ids)
    return [request.req_id for request in cached]


def _requests(scheduler_output):
    tokens = _scheduled_tokens(scheduler_output)
    new = [request.req_id for request in (getattr(scheduler_output, "scheduled_new_reqs", None) or [])]
    cached = _cached_request_ids(getattr(scheduler_output, "scheduled_cached_reqs", None))
    return [
        {"request_id": request_id, "type": kind, "tokens": int(tokens.get(request_id, 0))}
        for kind, request_ids in (("new", new), ("cached", cached))
        for request_id in request_ids
    ]


def _phase(attn_state, requests):
    """decode when the runner's attention state is DecodeOnly; prefill otherwise."""
    if attn_state is not None:
        return "decode" if getattr(attn_state, "name", str(attn_state)).split(".")[-1] == "DecodeOnly" else "prefill"
    # No attention state (a runner that does not keep one): one token per cached request is decode.
    decode = bool(requests) and all(r["type"] == "cached" and r["tokens"] == 1 for r in requests)
    return "decode" if decode else "prefill"
'''
