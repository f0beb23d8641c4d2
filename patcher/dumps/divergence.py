"""Where training and inference start to differ: the module that *introduces* a divergence.

msprobe marks each compare row `pass`/`warning`/`error` with fixed thresholds, which do not answer
the user's question (a bfloat16 module with max relative error 0.8 is `pass`; the first row that is
not `pass` is often a model root whose two sides have different shapes). This module reads the
compare CSV (msprobe 26.2.0 columns) and names the first module, in forward order, whose output
error rises above a noise floor while its inputs' errors do not. Rows come from the one reader of
the CSV (`rlpatch.dumps.compare_csv`), which `compare` shares; the culprit is a typed `Divergence`.

Rows. Only forward rows matched on both sides decide. Unmatched rows (`N/A` on either side),
backward rows and roots (the model given to the debugger and the containers of the decoder
layers: `model`, `decoder`, FSDP's wrapped root; they cannot localise anything) are counted,
never used. A row whose two sides hold a different number of elements (a `positions` argument
matched to `hidden_states`; the merged q/k/v and gate/up rows of a tensor dump), or whose metrics
are `Diff`, `unsupported` or empty, is *no data*: it cannot be compared by construction, is
counted, and never fails a pair. In a statistics dump msprobe 26.2.0 merges the training q/k/v
(gate/up) rows into one row against vLLM's `qkv_proj` (`gate_up_proj`), marks it `error` ("shape
of NPU and Bench are inconsistent") and leaves its mean and norm columns `Diff`; the merged
statistics follow exactly from the parts' (max of maxima, min of minima, the size-weighted mean,
the root of the summed squared norms) and are compared. A row whose name does not parse (a
newline or a `;` in a module name) is *unreadable*: counted and named, and a pair with one is
never `agrees` or `within-floor` (it is `undecided`): a row rlpatch did not read says nothing.

Error of a tensor, a relative error in both tasks so that it compares with a dtype's rounding:
- `task: tensor`: `EucDist / Bench l2norm`, the norm-relative error ||t - i|| / ||i|| (`1 - Cosine`
  is second order in it and is used, as sqrt(2 (1 - Cosine)), only where the norm is missing).
- `task: statistics`: the largest of |ΔL2norm| / L2norm, and |Δmax|, |Δmin|, |Δmean| each divided by
  max(|the inference value|, the tensor's RMS = L2norm / sqrt(elements)). msprobe's own percent
  columns are not used: a mean or minimum near zero makes them meaningless (rounding alone gives
  hundreds of percent).

Noise floor of a row: the unit roundoff of the finer of its two dtypes (bfloat16 2^-8, float16 2^-11,
float32 2^-24, float64 2^-53; integers 0) times FLOOR_FACTOR (8: a few roundings compound within one
module), or `--rtol`. The finer dtype: a side computing in a coarser dtype than the other is itself
a divergence.

A module's output error is the largest of its outputs'; its input error the largest of its inputs'
(parameters are the module's own, never inputs). When none of its inputs compares (they differ in
shape, e.g. vLLM passes `positions` first), the input error of its first descendant in forward
order stands for it (the same tensor enters both), else the output error of the module that
finished just before that descendant started. A module without descendants whose inputs do not
compare (SiLU against vLLM's SiluAndMul) is not judged: its output is another function. A module **introduces** a divergence when its
output error is above the floor and its input error is not, or is more than GROWTH_FACTOR (8)
times the input error (a module that only carries an inherited error changes it by a small
factor). msprobe writes a module's rows when its forward returns, so children come before their
parent, and the first module that introduces is the innermost one.

Verdict per pair: `diverges` (a culprit), `undecided` (a tensor above the floor that no compared
module introduces: the difference starts in rows msprobe did not match or could not compare; the
first such tensor is named), `within-floor` (differences, all under the floor: too small to tell
from rounding, no culprit is guessed), `agrees` (every compared tensor identical).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlpatch.dumps.compare_csv import (
    BENCH_DTYPE,
    BENCH_SHAPE,
    BENCH_STATISTICS,
    COSINE,
    EUC_DIST,
    NOT_MATCHED,
    NPU_DTYPE,
    NPU_NAME,
    NPU_SHAPE,
    NPU_STATISTICS,
    STATISTIC_DIFFS,
    CsvRow,
    read_compare_csv,
)

FLOOR_FACTOR = 8.0
GROWTH_FACTOR = 8.0
UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "half": 2.0**-11, "float32": 2.0**-24,
                 "float": 2.0**-24, "float64": 2.0**-53, "double": 2.0**-53}
FSDP_WRAPPER = "_fsdp_wrapped_module."
VERDICTS = ("diverges", "undecided", "within-floor", "agrees")
_ROW = re.compile(r"^(?P<module>.+?)\.forward\.(?P<call>\d+)\.(?P<kind>[^.]+)(?:\.(?P<rest>.*))?$")
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)(?:\.|$)")


@dataclass
class Tensor:
    name: str
    bench: str
    kind: str  # input | output | parameter
    error: float | None  # None: no data
    floor: float


@dataclass
class Module:
    key: str  # the training row name up to `.forward.N`
    infer_key: str
    path: str  # the training module path: no `Module.`, no class, no FSDP wrapper
    infer_path: str
    inputs: list[Tensor] = field(default_factory=list)
    outputs: list[Tensor] = field(default_factory=list)
    parameters: list[Tensor] = field(default_factory=list)

    @property
    def layer(self) -> int | None:
        found = _LAYER.search(self.path) or _LAYER.search(self.infer_path)
        return int(found.group(1)) if found else None


@dataclass
class Point:
    """One judged module, for the plot: its output error against the floor."""

    module: str
    layer: int | None
    output_error: float
    input_error: float
    floor: float
    role: str  # introduces | contains | inherits | below

    def as_json(self) -> dict[str, Any]:
        return {"module": self.module, "layer": self.layer, "output_error": self.output_error,
                "input_error": self.input_error, "floor": self.floor, "role": self.role}


@dataclass(frozen=True)
class Divergence:
    """The module that introduces a pair's divergence (the culprit), and its errors against the floor."""

    module: str  # the training module path
    name: str  # its training row name up to `.forward.N`
    infer_name: str
    layer: int | None
    metric: str  # norm_relative (tensor dumps), statistics, or none
    output_error: float
    input_error: float
    floor: float

    def as_json(self) -> dict[str, Any]:
        return {"module": self.module, "name": self.name, "infer_name": self.infer_name, "layer": self.layer,
                "metric": self.metric, "output_error": self.output_error, "input_error": self.input_error,
                "floor": self.floor}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Divergence | None:
        return None if data is None else cls(**data)


@dataclass
class Attribution:
    verdict: str
    why: str
    divergence: Divergence | None
    counts: dict[str, int]
    points: list[Point]

    def as_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "why": self.why,
                "divergence": None if self.divergence is None else self.divergence.as_json(),
                "counts": self.counts, "points": [point.as_json() for point in self.points]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attribution:
        points = [Point(**point) for point in data.get("points", [])]
        return cls(data["verdict"], data["why"], Divergence.from_json(data["divergence"]), data["counts"], points)


def module_path(name: str) -> str:
    """`model.layers.1.mlp.down_proj` of `Module._fsdp_wrapped_module.model.layers.1._fsdp_wrapped_module.
    mlp.down_proj.Linear` (the class, the last part, dropped; FSDP1's wrappers dropped)."""
    head = name.removeprefix("Module.").replace(FSDP_WRAPPER, "")
    return head.rpartition(".")[0]


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _numel(shapes: str) -> int | None:
    """Elements of `[1, 6, 32]` or of msprobe's aggregated `[1, 6, 32];[1, 6, 16]`."""
    total = 0
    for shape in shapes.split(";"):
        dims = re.findall(r"-?\d+", shape)
        if not shape.strip().startswith("["):
            return None
        total += math.prod(int(d) for d in dims) if dims else 1
    return total


def _floor(record: CsvRow, rtol: float | None) -> float:
    if rtol is not None:
        return rtol
    found = []
    for cell in (record.get(NPU_DTYPE) or "", record.get(BENCH_DTYPE) or ""):
        for dtype in cell.split(";"):
            name = dtype.strip().removeprefix("torch.")
            if name in UNIT_ROUNDOFF:
                found.append(UNIT_ROUNDOFF[name])
            elif name.startswith(("int", "uint", "bool", "long")):
                found.append(0.0)
    return (min(found) if found else UNIT_ROUNDOFF["float32"]) * FLOOR_FACTOR


def tensor_error(record: CsvRow) -> float | None:
    """The relative error of one matched row (see the module docstring), None when it has no data."""
    npu_shapes = record.get(NPU_SHAPE) or ""
    npu, bench = _numel(npu_shapes), _numel(record.get(BENCH_SHAPE) or "")
    if npu is None or bench is None:
        return None
    if record.tensor_mode:
        if npu != bench:
            return None
        distance, norm = _number(record.get(EUC_DIST)), _number(record.get(BENCH_STATISTICS[0]))
        if distance is not None and norm is not None:
            return distance / norm if norm > 0 else (0.0 if distance == 0 else None)
        cosine = _number(record.get(COSINE))
        return None if cosine is None else math.sqrt(max(0.0, 2 * (1 - cosine)))
    if ";" in npu_shapes:
        return _merged_statistics_error(record, [_numel(shape) for shape in npu_shapes.split(";")], bench)
    if npu != bench:
        return None
    return _statistics_error(record, bench)


def _statistics_error(record: CsvRow, numel: int) -> float | None:
    diffs = [_number(record.get(column)) for column in STATISTIC_DIFFS]
    values = [_number(record.get(column)) for column in BENCH_STATISTICS]
    if any(value is None for value in diffs + values):
        return None
    return _relative_statistics([d for d in diffs if d is not None], [v for v in values if v is not None], numel)


def _relative_statistics(diffs: list[float], values: list[float], numel: int) -> float:
    """diffs and the inference side's values of (l2norm, max, min, mean): the largest relative error."""
    norm_diff, *others = [abs(d) for d in diffs]
    norm, *stats = [abs(v) for v in values]
    rms = norm / math.sqrt(max(numel, 1))
    errors = [norm_diff / norm if norm > 0 else (0.0 if norm_diff == 0 else math.inf)]
    for diff, value in zip(others, stats, strict=True):
        scale = max(value, rms)
        errors.append(diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf))
    return max(errors)


def _cells(text: str | None, parts: int) -> list[float] | None:
    """The per-part values of a merged statistics cell (`a;b;c`, or one value msprobe already merged)."""
    values = [_number(cell) for cell in (text or "").split(";")]
    if any(value is None for value in values) or len(values) not in (1, parts):
        return None
    return [value for value in values if value is not None]


def _merged_statistics_error(record: CsvRow, parts: list[int | None], bench_numel: int) -> float | None:
    """A training row msprobe merged from several modules (q/k/v against vLLM's `qkv_proj`, gate/up
    against `gate_up_proj`: `NPU Name` and every NPU cell `;`-separated). Where the inference tensor is
    the parts concatenated (outputs, weights: the element counts add up), its statistics follow exactly
    from the parts': max of the maxima, min of the minima, the size-weighted mean, the root of the
    summed squared L2 norms. Where each part is the whole inference tensor (the one input every
    projection reads), each part compares with it. Otherwise the row cannot be compared: None."""
    sizes = [size for size in parts if size is not None]
    if len(sizes) != len(parts) or not sizes:
        return None
    npu = {column: _cells(record.get(column), len(sizes)) for column in NPU_STATISTICS}
    bench = [_number(record.get(column)) for column in BENCH_STATISTICS]
    if any(cells is None for cells in npu.values()) or any(value is None for value in bench):
        return None
    values = [value for value in bench if value is not None]
    l2, high, low, mean = (cells or [] for cells in npu.values())
    if sum(sizes) == bench_numel and len(mean) == len(l2) == len(sizes):
        merged = [math.sqrt(sum(v * v for v in l2)), max(high), min(low),
                  sum(n * m for n, m in zip(sizes, mean, strict=True)) / bench_numel]
        return _relative_statistics([m - b for m, b in zip(merged, values, strict=True)], values, bench_numel)
    if all(size == bench_numel for size in sizes):
        def part(cells: list[float], index: int) -> float:
            return cells[index] if len(cells) > 1 else cells[0]

        return max(_relative_statistics([part(cells, i) - b for cells, b in zip((l2, high, low, mean), values, strict=True)],
                                        values, bench_numel) for i in range(len(sizes)))
    return None


def _is_root(path: str, all_paths: set[str]) -> bool:
    """The model itself or a container of its decoder layers (`model`, `module.module.decoder`)."""
    if not path or _LAYER.search(path):
        return not path
    return any(other.startswith(path + ".") and _LAYER.search(other[len(path):]) for other in all_paths)


def group(records: Iterable[CsvRow], rtol: float | None = None,
          unreadable: list[CsvRow] | None = None) -> tuple[list[Module], dict[str, int]]:
    """The matched forward modules of a compare CSV in its order, and the counts of the rest; the rows
    whose names rlpatch cannot parse (a newline, a `;` inside a module name) go to `unreadable`."""
    counts = {"compared": 0, "no_data": 0, "unreadable": 0, "unmatched": 0, "backward": 0, "roots": 0}
    modules: dict[str, Module] = {}
    for record in records:
        name, bench = record.name.strip(), record.bench_name.strip()
        if record.backward:
            counts["backward"] += 1
            continue
        if NOT_MATCHED in (name, bench):
            counts["unmatched"] += 1
            continue
        first, first_bench = name.split(";")[0].strip(), bench.split(";")[0].strip()
        parsed, parsed_bench = _ROW.match(first), _ROW.match(first_bench)
        if parsed is None or parsed_bench is None:
            counts["unreadable"] += 1
            if unreadable is not None:
                unreadable.append(record)
            continue
        key = f"{parsed['module']}.forward.{parsed['call']}"
        module = modules.setdefault(key, Module(key, f"{parsed_bench['module']}.forward.{parsed_bench['call']}",
                                                module_path(parsed["module"]), module_path(parsed_bench["module"])))
        kind = {"input": "input", "output": "output", "parameters": "parameter"}.get(parsed["kind"], "input")
        tensor = Tensor(name, bench, kind, tensor_error(record), _floor(record, rtol))
        counts["compared" if tensor.error is not None else "no_data"] += 1
        {"input": module.inputs, "output": module.outputs, "parameter": module.parameters}[kind].append(tensor)
    train_paths = {m.path for m in modules.values()}
    infer_paths = {m.infer_path for m in modules.values()}
    kept = []
    for module in modules.values():
        if _is_root(module.path, train_paths) or _is_root(module.infer_path, infer_paths):
            counts["roots"] += len(module.inputs) + len(module.outputs) + len(module.parameters)
        else:
            kept.append(module)
    return kept, counts


def _worst(tensors: list[Tensor]) -> Tensor | None:
    measured = [t for t in tensors if t.error is not None]
    return max(measured, key=lambda t: t.error or 0.0) if measured else None


def _input_error(index: int, modules: list[Module], judged: dict[int, float]) -> float | None:
    """The error of what enters module `index`: its inputs', else (none compares) what enters its
    first descendant, else what the module finished just before that one put out."""
    module = modules[index]
    worst = _worst(module.inputs)
    if worst is not None:
        return worst.error
    descendants = [i for i in range(index) if modules[i].path.startswith(module.path + ".")]
    if descendants:
        found = _worst(modules[descendants[0]].inputs)
        if found is not None:
            return found.error
    elif module.inputs:  # inputs of another form (SiLU against SiluAndMul): its output is another function
        return None
    start = descendants[0] if descendants else index
    before = [i for i in judged if i < start]
    return judged[max(before)] if before else None


def attribute(records: Sequence[CsvRow], rtol: float | None = None) -> Attribution:
    """Where the two sides of one compare CSV's rows start to differ; the culprit's `metric` says
    `norm_relative` (a tensor dump) or `statistics`."""
    unreadable: list[CsvRow] = []
    modules, counts = group(records, rtol, unreadable)
    statistics = bool(records) and not records[0].tensor_mode
    found = _attribute(modules, counts, statistics)
    if unreadable and found.verdict in ("agrees", "within-floor"):
        # A row that was not read says nothing either way: the pair cannot be called clean.
        errors = sum(1 for row in unreadable if row.result == "error")
        first = (unreadable[0].get(NPU_NAME) or "").strip()
        found.verdict = "undecided"
        found.why = (f"{len(unreadable)} row(s) rlpatch cannot read ({errors} marked error by msprobe), first "
                     f"{first[:200]!r}: their names do not parse as module rows; nothing is said about them")
    return found


def _attribute(modules: list[Module], counts: dict[str, int], statistics: bool) -> Attribution:
    points: list[Point] = []
    culprit: tuple[Module, Point] | None = None
    first_above: Tensor | None = None
    largest: tuple[float, str] = (0.0, "")
    judged: dict[int, float] = {}
    for index, module in enumerate(modules):
        out, in_error = _worst(module.outputs), _input_error(index, modules, judged)
        if out is None or out.error is None or in_error is None:
            continue  # not judged: its measured tensors say nothing about this pair either
        for tensor in module.inputs + module.outputs:
            if tensor.error is not None and tensor.error > tensor.floor and first_above is None:
                first_above = tensor
            if tensor.error is not None and tensor.error > largest[0]:
                largest = (tensor.error, module.path)
        floor = out.floor
        judged[index] = out.error
        introduces = out.error > floor and (in_error <= floor or out.error > GROWTH_FACTOR * in_error)
        role = "introduces" if introduces else ("inherits" if out.error > floor else "below")
        point = Point(module.path, module.layer, out.error, in_error, floor, role)
        points.append(point)
        if introduces and culprit is None:
            culprit = (module, point)
    if culprit is not None:
        module, point = culprit
        for other in points:  # its parents only carry it out: they contain the culprit
            if other.role == "introduces" and module.path.startswith(other.module + ".") or (
                    other is not point and other.role == "introduces" and not other.module):
                other.role = "contains"
        divergence = Divergence(module.path, module.key, module.infer_key, module.layer,
                                "statistics" if statistics else _metric_name(module), point.output_error,
                                point.input_error, point.floor)
        why = (f"{module.path} introduces it: output error {point.output_error:.3g} against input error "
               f"{point.input_error:.3g}, floor {point.floor:.3g}")
        return Attribution("diverges", why, divergence, counts, points)
    if first_above is not None:
        why = (f"{first_above.name} is above the floor ({first_above.error:.3g} > {first_above.floor:.3g}) and "
               "no compared module introduces it: it starts in rows msprobe did not match or could not compare")
        return Attribution("undecided", why, None, counts, points)
    if largest[0] > 0:
        why = (f"differences up to {largest[0]:.3g} (at {largest[1]}) stay under the floor: too small to tell "
               "from rounding, no culprit named")
        return Attribution("within-floor", why, None, counts, points)
    return Attribution("agrees", "every compared tensor is identical on both sides", None, counts, points)


def _metric_name(module: Module) -> str:
    return "norm_relative" if any(t.error is not None for t in module.outputs) else "none"


def attribute_csv(path: str, rtol: float | None = None) -> Attribution:
    """The attribution of one compare CSV (read by `compare_csv`, the reader `compare` uses)."""
    return attribute(read_compare_csv(path), rtol)


@dataclass(frozen=True)
class Outcome:
    """What one compared pair says, for the views across pairs: the culprits (`culprits`), and each
    request and inference batch size (`rlpatch.dumps.batches`)."""

    request_id: str
    train_rank: int | None
    verdict: str  # one of VERDICTS, or failed
    divergence: Divergence | None = None
    requests_in_step: int = 1  # requests packed in the inference step (1: a whole-dump pair)

    @property
    def culprit(self) -> str | None:
        return None if self.divergence is None else self.divergence.module


def culprits(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """Across pairs, each culprit with its pairs (request ids) and training ranks, the most frequent first."""
    found: dict[str, dict[str, Any]] = {}
    for outcome in outcomes:
        request_id, rank, divergence = outcome.request_id, outcome.train_rank, outcome.divergence
        if divergence is None:
            continue
        entry = found.setdefault(divergence.module, {"module": divergence.module, "layer": divergence.layer,
                                                     "pairs": [], "ranks": []})
        if request_id not in entry["pairs"]:
            entry["pairs"].append(request_id)
        if rank is not None and rank not in entry["ranks"]:
            entry["ranks"].append(rank)
    return sorted(found.values(), key=lambda e: (-len(e["pairs"]), e["layer"] if e["layer"] is not None else -1,
                                                 e["module"]))
