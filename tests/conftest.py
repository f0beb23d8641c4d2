"""Shared test helpers: running the CLI in-process, real upstream trees, tree snapshots."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"

# The engine-worker rules (the engine tests look at these among every rule the CLI reports).
ENGINE_RULES = ("verl-engine-fsdp", "verl-engine-megatron")

# Every verl release that has the engine-worker files, and the newest, for the upstream tests.
VERL_ENGINE_VERSIONS = ["0.6.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1"]
# Every SGLang release line the sglang-model-runner rule patches (no 0.5.0 was released), and releases
# with native msprobe support (0.5.23: the newest release when this was written).
SGLANG_PATCHED_VERSIONS = [
    "0.4.3.post4",
    "0.4.6.post5",
    "0.4.10.post2",
    "0.5.1",
    "0.5.3",
    "0.5.5",
    "0.5.8",
    "0.5.9",
    "0.5.10.post1",
]
SGLANG_NATIVE_VERSIONS = ["0.5.11", "0.5.23"]
# vllm-ascend releases with x86_64 wheels and msprobe dump hooks -> their dump stop sites.
VLLM_ASCEND_STOP_SITES = {"0.13.0": 4, "0.18.0": 3, "0.23.0": 4}


# --- parallel runs: `make test` runs `-n auto --dist loadfile`: a file's tests stay on one worker, so a
# module-scoped fixture (dumps, a cluster) is built once; `make test-slow` runs in one process, so the
# rehearsals' session fixtures are built once.


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> Result:
    """Run `rlpatch ARGS` in this process and capture its exit code and output."""
    from rlpatch.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return Result(code, out.getvalue(), err.getvalue())


def run_rlpatch(*args: str, env: dict[str, str] | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    """Run `rlpatch ARGS` as a separate process (as users do)."""
    return subprocess.run(
        [sys.executable, "-m", "rlpatch.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def snapshot(root: Path, *, skip_state: bool = False) -> dict[str, tuple[str, int]]:
    """Every file under root: relative path -> (sha256, mode). `.git` is skipped."""
    result = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(".git/") or relative == ".git":
            continue
        if skip_state and relative.startswith(".rlpatch"):
            continue
        if path.is_file() and not path.is_symlink():
            result[relative] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mode)
        elif path.is_dir():
            result[relative + "/"] = ("dir", 0)
    return result


@pytest.fixture(autouse=True)
def no_default_verl_download(request, monkeypatch):
    """Without the `upstream` marker a test never downloads: `rlpatch lint` with no verl named checks
    Hydra overrides against no default verl (RLPATCH_DEFAULT_VERL=none), as it did before the default
    existed. An upstream test gets the real default: the newest release's config, from the cache."""
    if request.node.get_closest_marker("upstream") is None:
        monkeypatch.setenv("RLPATCH_DEFAULT_VERL", "none")
    else:
        monkeypatch.delenv("RLPATCH_DEFAULT_VERL", raising=False)
    # Captured stderr is no terminal: a test's expected stderr never depends on how slow the machine is (the
    # progress lines every 10 s); the tests of those lines set the interval they want.
    monkeypatch.setenv("RLPATCH_PROGRESS_INTERVAL", "1e9")


@pytest.fixture
def verl_tree(tmp_path):
    """A factory: a writable copy of a released verl wheel's tree (downloaded once, cached)."""

    def make(version: str, name: str = "tree") -> Path:
        from rlpatch.upstream.wheelcache import fresh_copy

        return fresh_copy("verl", version, tmp_path / f"{name}-{version}")

    return make


@pytest.fixture
def fixture_tree(tmp_path):
    """A factory: a writable copy of a fixture tree under fixtures/."""

    def make(name: str) -> Path:
        destination = tmp_path / name
        shutil.copytree(FIXTURES / name, destination)
        return destination

    return make


REHEARSAL_MODULES = ("torch", "transformers", "peft", "ray", "transfer_queue", "msprobe", "tensordict", "codetiming")


@pytest.fixture(scope="session")
def rehearsal_training(tmp_path_factory: pytest.TempPathFactory):
    """The rehearsal's training side, run once per session: ({name: scenario}, {name: TrainingSide})."""
    for module in REHEARSAL_MODULES:
        pytest.importorskip(module)
    from rehearsal.training import run_training_sides
    from rehearsal_support import training_scenarios

    scenarios = training_scenarios()
    sides = run_training_sides(tmp_path_factory.mktemp("rehearsal"), scenarios)
    return {scenario.name: scenario for scenario in scenarios}, sides


@pytest.fixture(scope="session")
def rehearsal_vllm_ascend(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The released vLLM-Ascend 0.23.0 wheel patched by `rlpatch apply --mode consistency` (once per session)."""
    from rehearsal_support import patched_vllm_ascend

    return patched_vllm_ascend(tmp_path_factory.mktemp("vllm_ascend"))


@pytest.fixture(scope="session")
def rehearsal_packing(rehearsal_training, rehearsal_vllm_ascend: Path, tmp_path_factory: pytest.TempPathFactory):
    """The packing rehearsal's dumps (rehearsal_support.PackingDumps): inference `infer[variant]` for packed
    TP1, single, tp2, batch-fault (packed and single) and tp-shard-fault; training `train[name]` for
    pack-mb2, pack-mb1 and padded-mb2, on the same four requests."""
    from rehearsal_support import PACK_SCENARIOS, packing_dumps

    scenarios, sides = rehearsal_training
    packed = scenarios["pack-mb2"]
    requests = list(zip(packed.request_ids, map(list, packed.prompts), strict=True))
    train = {name: sides[name].dump_path for name in PACK_SCENARIOS}
    return packing_dumps(rehearsal_vllm_ascend, tmp_path_factory.mktemp("packing"), sides[packed.name].model_dir,
                         requests, train)
