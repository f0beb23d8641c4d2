"""rlpatch's verdict on a config.json equals mindstudio-probe's own, for every generated config.

msprobe is the truth (see tests/msprobe_judge.py for what "msprobe's verdict" means). Runs only
where torch and mindstudio-probe are installed (CPU is enough), marked `runtime`.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rlpatch.msprobe_config.api import CheckOptions, Problem, check_file, is_valid

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from msprobe_cases import write_cases  # noqa: E402 - a sibling helper module of the tests

pytestmark = [pytest.mark.runtime, pytest.mark.slow]
if importlib.util.find_spec("torch") is None or importlib.util.find_spec("msprobe") is None:
    pytest.skip("torch and mindstudio-probe are needed for the differential test", allow_module_level=True)

MARKER = "RLPATCH-VERDICT "
FRESH_SAMPLE = 8  # configs judged once more, each in its own fresh process


def ask_msprobe(paths: list[Path], cwd: Path) -> dict[str, dict[str, object]]:
    """msprobe's verdicts, from one judge process for all `paths`."""
    result = subprocess.run(
        [sys.executable, str(HERE / "msprobe_judge.py"), *map(str, paths)],
        capture_output=True, text=True, cwd=cwd, timeout=900, check=False,
    )
    verdicts = {}
    for line in result.stdout.splitlines():
        if line.startswith(MARKER):
            record = json.loads(line[len(MARKER):])
            verdicts[record.pop("path")] = record
    assert len(verdicts) == len(paths), result.stderr[-2000:]
    return verdicts


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[tuple[str, Path]], dict[str, dict[str, object]], Path]:
    root = tmp_path_factory.mktemp("msprobe_diff")
    (root / "load").mkdir()
    cases = write_cases(root / "configs", root / "dump", root / "load")
    paths = [path for _, path in cases]
    half = len(paths) // 2  # two judge processes: the machine has two cores
    with ThreadPoolExecutor(2) as pool:
        parts = list(pool.map(lambda chunk: ask_msprobe(chunk, root), [paths[:half], paths[half:]]))
    return cases, {**parts[0], **parts[1]}, root


def test_at_least_300_configs(judged: tuple) -> None:
    cases, verdicts, _ = judged
    assert len(cases) >= 300
    valid = sum(1 for v in verdicts.values() if v["valid"])
    assert 50 < valid < len(cases) - 50, "the generated set must hold plenty of both verdicts"


def test_rlpatch_verdict_equals_msprobe(judged: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    cases, verdicts, root = judged
    monkeypatch.chdir(root)  # relative dump paths resolve where the judge ran
    disagreements = []
    for name, path in cases:
        findings = check_file(path, CheckOptions(npu=False))
        # Alone, a config without dump_path is an info (verl's precision_debugger tool passes its own
        # dump_path); the finding says msprobe refuses it anywhere else, which is what the judge does here.
        no_dump_path = any(f.problem is Problem.NO_DUMP_PATH for f in findings)
        ours = is_valid(findings) and not no_dump_path
        truth = verdicts[str(path)]
        if ours != truth["valid"]:
            errors = [f"{f.problem.value} {f.message}" for f in findings if f.severity == "error"]
            disagreements.append(f"{name}: msprobe {truth['valid']} ({truth['error']}) rlpatch {ours} {errors}")
    assert not disagreements, "\n".join(disagreements)


def test_singleton_reset_matches_fresh_processes(judged: tuple) -> None:
    """The batched judge resets msprobe's singleton; fresh processes must agree on a sample."""
    cases, verdicts, root = judged
    # Late configs of each batch (the most state accumulated before them), both verdicts.
    late = [path for _, path in reversed(cases)]
    sample = [p for p in late if verdicts[str(p)]["valid"]][: FRESH_SAMPLE // 2]
    sample += [p for p in late if not verdicts[str(p)]["valid"]][: FRESH_SAMPLE // 2]
    with ThreadPoolExecutor(2) as pool:
        fresh = list(pool.map(lambda path: ask_msprobe([path], root), sample))
    for path, verdict in zip(sample, fresh, strict=False):
        assert verdict[str(path)]["valid"] == verdicts[str(path)]["valid"], path.name
