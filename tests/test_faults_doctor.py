"""`rlpatch doctor` against hostile targets: memory stays bounded, `--timeout` bounds the whole probe,
a malformed answer is a one-line error, and `--isolated` runs nothing the script chooses.

Each target is a small executable the test writes in its own temp folder, standing in for an
interpreter (or a launcher) that floods its output, hangs, or answers in a wrong shape.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from conftest import run_cli

RLPATCH = [sys.executable, "-m", "rlpatch"]
MEASURE = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"code": done.returncode, "stderr": done.stderr[-2000:],
                  "max_rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def _executable(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _measured(*args: str) -> dict:
    """Run `rlpatch ARGS` as a child of a fresh measuring process: its exit code and peak memory."""
    done = subprocess.run([sys.executable, "-c", MEASURE, *RLPATCH, *args], capture_output=True, text=True,
                          timeout=300)
    return json.loads(done.stdout)


def test_a_target_that_prints_100_mb_costs_no_memory(tmp_path: Path) -> None:
    """Promise: doctor keeps only the tail of a target's output (the answer is its last line). The target
    is the base Python, which has no msprobe: no torch import (hundreds of MB) blurs the measure."""
    base = os.path.join(sys.base_prefix, "bin", "python3")
    chatty = _executable(tmp_path, "chatty-python", f"""#!/bin/sh
head -c 100000000 /dev/zero | tr '\\0' 'x'
echo
exec {base} "$@"
""")
    result = _measured("doctor", "--python", chatty, "--format", "json")
    assert result["code"] in (0, 1), result["stderr"]
    # rlpatch alone, a Python with click, is well under this; holding the output would be over 200 MB.
    assert result["max_rss_kb"] < 150 * 1024, result


def test_timeout_bounds_the_whole_probe(tmp_path: Path) -> None:
    """Promise: `--timeout 3` on a hanging target ends with a one-line error, exit 2, and leaves no process."""
    marker = tmp_path / "still-running"
    hanging = _executable(tmp_path, "hanging-python", f"""#!/bin/sh
sleep 60 && touch {marker}
""")
    done = subprocess.run([*RLPATCH, "doctor", "--python", hanging, "--timeout", "3"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "timed out after 3 s" in done.stderr, done.stderr
    # The whole process group was ended: `sleep` never finishes to create the marker.
    subprocess.run(["sleep", "0.5"], check=True)
    assert not marker.exists()


def test_a_malformed_answer_is_a_one_line_error(tmp_path: Path) -> None:
    """Promise: a target whose probe line is not the probe's JSON shape gets a one-line error, exit 2."""
    for n, answer in enumerate(['[]', '{"packages": 5}', '{"packages": {"torch": 1}}', '{' * 100000]):
        liar = _executable(tmp_path, f"liar-{n}", f"""#!/bin/sh
printf 'RLPATCH-PROBE %s\\n' '{answer}'
""")
        result = run_cli("doctor", "--python", liar)
        assert result.exit_code == 2, (answer[:20], result.stdout, result.stderr)
        assert result.stderr.count("\n") == 1 and "internal error" not in result.stderr, result.stderr


def test_isolated_runs_nothing_the_script_chooses(tmp_path: Path) -> None:
    """Promise: without --isolated doctor runs the script's PYTHONPATH sitecustomize (that is how it sees the
    real interpreter, and --help says so); with --isolated it runs nothing of the script's."""
    site = tmp_path / "site"
    site.mkdir()
    touched = tmp_path / "sitecustomize-ran"
    (site / "sitecustomize.py").write_text(f"open({str(touched)!r}, 'a').write('x')\n")
    script = tmp_path / "run.sh"
    script.write_text(f"export PYTHONPATH={site}\npython3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=1\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    isolated = subprocess.run([*RLPATCH, "doctor", "--script", str(script), "--isolated", "--format", "json"],
                              capture_output=True, text=True, timeout=300, env=env)
    assert isolated.returncode in (0, 1), isolated.stderr
    assert not touched.exists()
    normal = subprocess.run([*RLPATCH, "doctor", "--script", str(script), "--format", "json"],
                            capture_output=True, text=True, timeout=300, env=env)
    assert normal.returncode in (0, 1), normal.stderr
    assert touched.exists()
    assert "RUNS code the script chooses" in " ".join(run_cli("doctor", "--help").stdout.split())
