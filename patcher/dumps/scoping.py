"""`dumps check`: steps msprobe 26.2's request-scoped dumping cut wrong.

With `"request_id"` in the task section of the msprobe config (`tensor` / `statistics`), msprobe
26.2.0 (`DebuggerConfig.update_slice_info`) cuts each step's dim-0 rows `[begin, end)` where `begin`
sums the tokens of the requests *before it in the dict order of `scheduled_tokens`*
(`scheduler_output.num_scheduled_tokens`), and matches the id exactly (`req_id == request_id`); a step
whose scheduled tokens do not hold the id is not dumped at all. The runner lays the rows out in
`input_batch.req_ids` order (decodes first under Ascend attention), which the dispatch log records
as "rows" beside "scheduler_order". So a step where the configured request's rows are not where
msprobe cut is a problem (the dump holds another request's rows); an id that only matches once
vLLM's `-{8 hex}` suffix is stripped is a problem too (msprobe dumps nothing).
"""

from __future__ import annotations

import json
from typing import Any

from rlpatch.dumps.correlate import normalise_request_id, read_log
from rlpatch.dumps.layout import Tree


def scoped_request(config_path: str) -> str | None:
    """The msprobe config's request_id (in its task's section), or None."""
    try:
        with open(config_path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(config, dict):
        return None
    section = config.get(str(config.get("task", "statistics")))
    found = section.get("request_id") if isinstance(section, dict) else None
    return found if isinstance(found, str) and found else None


def _msprobe_cut(record: dict[str, Any], request_id: str) -> tuple[int, int] | None:
    """The rows msprobe 26.2.0 cuts for request_id in this step (scheduler dict order), or None."""
    tokens = {str(row.get("request_id")): row.get("tokens") for row in record.get("rows") or []
              if isinstance(row, dict)}
    begin = 0
    for scheduled in record.get("scheduler_order") or []:
        count = tokens.get(str(scheduled))
        if not isinstance(count, int):
            return None
        if str(scheduled) == request_id:
            return begin, begin + count
        begin += count
    return None


def scoping_problems(tree: Tree, request_id: str) -> list[str]:
    """Each logged step whose request-scoped cut is not the configured request's rows."""
    problems: list[str] = []
    ignored: list[str] = []
    for pid, path in sorted(tree.dispatch_logs.items()):
        for record in read_log(path, pid, ignored):
            rows = [r for r in record.get("rows") or [] if isinstance(r, dict)]
            where = f"inference step {record.get('step')} (pid {pid}, rank {record.get('rank')})"
            mine = next((r for r in rows if str(r.get("request_id")) == request_id), None)
            if mine is None:
                alike = [str(r.get("request_id")) for r in rows
                         if normalise_request_id(str(r.get("request_id")))[0] == normalise_request_id(request_id)[0]]
                if alike:
                    problems.append(f"{where}: msprobe's request_id {request_id!r} matches no scheduled id exactly "
                                    f"(the runner's is {alike[0]!r}, vLLM's -{{8 hex}} suffix): msprobe dumped "
                                    "nothing of it")
                continue
            cut = _msprobe_cut(record.data, request_id)
            if cut is None:
                continue
            rows_at = (mine.get("offset"), (mine.get("offset") or 0) + (mine.get("tokens") or 0))
            if cut != rows_at:
                order = [str(r.get("request_id")) for r in rows]
                problems.append(
                    f"{where}: msprobe's request-scoped dump cut rows [{cut[0]}, {cut[1]}) for {request_id} in the "
                    f"scheduler's order {record.get('scheduler_order')}, but the runner put it at rows "
                    f"[{rows_at[0]}, {rows_at[1]}) (input batch order {order}): the dump holds other requests' rows; "
                    "use task tensor without request_id and `rlpatch dumps compare`, which cuts by the logged rows")
    return problems


def rows_summary(tree: Tree) -> tuple[dict[str, Any], str | None]:
    """Per batch size (requests in a logged step), how many steps with rows; and a note saying it."""
    sizes: dict[int, int] = {}
    requests: set[str] = set()
    ignored: list[str] = []
    for pid, path in sorted(tree.dispatch_logs.items()):
        for record in read_log(path, pid, ignored):
            rows = record.get("rows")
            if not isinstance(rows, list) or not rows or (record.get("tp_rank") or 0) != 0:
                continue  # one TP rank per replica: the others hold the same rows
            sizes[len(rows)] = sizes.get(len(rows), 0) + 1
            requests.update(normalise_request_id(str(r.get("request_id")))[0] for r in rows if isinstance(r, dict))
    if not sizes:
        return {}, None
    found = {"steps_by_batch_size": {str(size): sizes[size] for size in sorted(sizes)}, "requests": len(requests)}
    spread = ", ".join(f"{sizes[size]} of {size} request(s)" for size in sorted(sizes))
    return found, (f"{sum(sizes.values())} logged step(s) say where each request's rows are ({spread}), "
                   f"{len(requests)} request(s) in all: `dumps pair` pairs them request by request")
