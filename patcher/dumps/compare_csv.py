"""The CSV `msprobe compare` writes (mindstudio-probe 26.2.0 columns): its column names, and the one
reader of it that `compare` (counts, first difference) and `divergence` (the culprit) share.

One row per tensor, in the training dump's forward order. `NPU Name` is the training side (`-tp`),
`Bench Name` the inference side (`-gp`); a side msprobe did not match is `N/A` (NOT_MATCHED).
`Result` is `pass`/`warning`/`error`. A tensor-mode compare has a `Cosine` column, a
statistics-mode one has none. The file is read once per pair; each row keeps its cells as written.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Mapping
from dataclasses import dataclass

NOT_MATCHED = "N/A"
RESULTS = ("pass", "warning", "error")
NPU_NAME, BENCH_NAME = "NPU Name", "Bench Name"
RESULT, MESSAGE = "Result", "Err_message"
NPU_DTYPE, BENCH_DTYPE = "NPU Dtype", "Bench Dtype"
NPU_SHAPE, BENCH_SHAPE = "NPU Tensor Shape", "Bench Tensor Shape"
COSINE, EUC_DIST = "Cosine", "EucDist"  # tensor-mode columns: Cosine's presence says which mode wrote the CSV
# Each side's statistics and their differences, in the order (l2norm, max, min, mean).
NPU_STATISTICS = ("NPU l2norm", "NPU max", "NPU min", "NPU mean")
BENCH_STATISTICS = ("Bench l2norm", "Bench max", "Bench min", "Bench mean")
STATISTIC_DIFFS = ("L2norm diff", "Max diff", "Min diff", "Mean diff")
# The metrics a tensor-mode compare writes, and the statistics-mode ones.
TENSOR_METRICS = (COSINE, EUC_DIST, "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                  "Five Thousandths Err Ratio")
STATISTICS_METRICS = ("Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr",
                      "MeanRelativeErr", "NormRelativeErr")
# What rlpatch reads of a row; the rest (stack information, data names) is not kept.
READ_COLUMNS = frozenset((NPU_NAME, BENCH_NAME, RESULT, MESSAGE, NPU_DTYPE, BENCH_DTYPE, NPU_SHAPE, BENCH_SHAPE,
                          *NPU_STATISTICS, *BENCH_STATISTICS, *STATISTIC_DIFFS, *TENSOR_METRICS, *STATISTICS_METRICS))
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # stack-info cells are long


@dataclass(frozen=True)
class CsvRow:
    """One row of a compare CSV: its cells as msprobe wrote them, and what rlpatch reads of them."""

    cells: Mapping[str, str]

    def get(self, column: str) -> str | None:
        return self.cells.get(column)

    @property
    def tensor_mode(self) -> bool:
        return COSINE in self.cells

    @property
    def name(self) -> str:
        """The training side's tensor name as written (`N/A` when msprobe matched none)."""
        return self.cells.get(NPU_NAME) or NOT_MATCHED

    @property
    def bench_name(self) -> str:
        """The inference side's tensor name as written (`N/A` when msprobe matched none)."""
        return self.cells.get(BENCH_NAME) or NOT_MATCHED

    @property
    def backward(self) -> bool:
        return ".backward." in self.name or ".backward." in self.bench_name

    @property
    def result(self) -> str:
        """msprobe's own `pass`/`warning`/`error`, lower case ("" when empty)."""
        return (self.cells.get(RESULT) or "").strip().lower()

    @property
    def message(self) -> str:
        return (self.cells.get(MESSAGE) or "").strip()

    @property
    def metrics(self) -> dict[str, str]:
        """The metric cells msprobe filled (tensor-mode ones first)."""
        return {key: self.cells[key] for key in TENSOR_METRICS + STATISTICS_METRICS
                if self.cells.get(key) not in (None, "", NOT_MATCHED)}

    @property
    def module(self) -> str:
        """`Module.model.layers.1.mlp.Mlp` of `Module.model.layers.1.mlp.Mlp.forward.0.output.0`."""
        return self.name.split(".forward.", 1)[0]


def read_compare_csv(path: str) -> list[CsvRow]:
    """Every row of one compare CSV, in its order (OSError, csv.Error, UnicodeDecodeError: unreadable)."""
    with open(path, encoding="utf-8", newline="") as handle:
        return [CsvRow({column: cell for column, cell in cells.items() if column in READ_COLUMNS})
                for cells in csv.DictReader(handle)]


def forward_rows(rows: list[CsvRow]) -> tuple[list[CsvRow], int]:
    """The matched forward rows, in order, and how many forward rows of either side were not matched."""
    matched, unmatched = [], 0
    for row in rows:
        if row.backward:
            continue
        if NOT_MATCHED in (row.name, row.bench_name):
            unmatched += 1
            continue
        matched.append(row)
    return matched, unmatched
