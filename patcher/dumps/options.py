"""What each `rlpatch dumps` command was asked, as one frozen value (built by the command line,
read by `rlpatch.dumps.api` and, for `compare --ray`, by the cluster driver in `remote`)."""

from __future__ import annotations

from dataclasses import dataclass

from rlpatch.dumps.command import DEFAULT_OUT

# Seconds to wait for every node's answer, per round (read, compare), unless --ray-timeout says otherwise.
RAY_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class CheckOptions:
    directory: str
    mode: str | None = None  # None: from the script, else from the folders
    script: str | None = None
    msprobe_config: str | None = None  # the inference msprobe config (its request_id), else the one --script names


@dataclass(frozen=True)
class PairOptions:
    train: str
    infer: str
    backend: str = "fsdp"


@dataclass(frozen=True)
class CompareOptions:
    train: str
    infer: str
    backend: str = "fsdp"
    out: str = DEFAULT_OUT
    python: str | None = None  # shlex-split; None: this interpreter
    report: str | None = None  # the HTML report to write
    rtol: float | None = None
    jobs: int | None = None
    only: str | None = None  # a request id
    rank: int | None = None  # a training rank
    force: bool = False  # compare again even the pairs whose stored results are current
    ray: str | None = None  # a cluster address: each pair compared on the node that holds it
    ray_runtime_env: str | None = None
    ray_timeout: float = RAY_TIMEOUT_S
    quiet: bool = False  # -q: no progress lines while the cluster's nodes are waited for


@dataclass(frozen=True)
class ReportOptions:
    out: str  # a compare's -o
    report: str | None = None  # the page to write, inside `out` (default: `out`/report.html)
