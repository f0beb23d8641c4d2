"""How often lint's Hydra verdicts are Hydra's own, on a verl checkout's real scripts (issue 29's measure).

    .venv/bin/python tests/corpus_lint_oracle.py VERL_CHECKOUT [--verl-version X.Y.Z] [--without-verl]
                                                              [--everywhere] [--list]

Every `*.sh` under the checkout's examples/ and recipe/ runs under bash from the checkout's root (as verl's
docs run them) with recording stand-ins for python3/python/uv/ray/torchrun, a sealed PATH of plain text
tools, every other command a no-op (bash's `command_not_found_handle`), HOME a fresh folder: nothing can
start a job, install a package or download. Each launch it makes is composed by Hydra itself against the
config of the entry module it runs, read from that module's `@hydra.main` in the checkout
(tests/hydra_oracle.py: `--config-path`/`--config-name` as Hydra takes them, `hydra.searchpath` honoured, a
`pkg://` package the checkout does not hold makes the verdict "unknown"). Then `rlpatch lint --format json
--verl-root CHECKOUT` (and, with --without-verl, with no verl flag) runs on the same scripts, and the table
says how many of lint's Hydra-refusal errors (RL103, RL301-RL304) Hydra confirms.

A script's verdict: "fails" if Hydra refuses one of its launches, else "unknown" if one is unknown, else
"composes". Not collected by pytest (no test_ prefix): a measuring tool, run by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_harness import _STAND_IN, INERT_TOOLS, STAND_INS, Received, _parse
from hydra_oracle import COMPOSE_CODES, COMPOSES, FAILS, RUNTIME_CODES, UNKNOWN, Verdict, compose_launch

from rlpatch.upstream.wheelcache import unpacked_tree

SCRIPT_FOLDERS = ("examples", "recipe")
# Real programs on the sealed PATH: text plumbing that cannot start a job, install or download anything.
PLAIN_TOOLS = ("bash", "sh", "basename", "cat", "cut", "date", "dirname", "echo", "expr", "grep", "head", "mkdir",
               "printf", "readlink", "realpath", "sed", "awk", "seq", "sort", "tail", "tee", "tr", "uniq", "wc",
               "env", "true", "false", "test", "id", "whoami", "uname", "hostname", "ls")
MORE_INERT = {"sleep": "", "nvidia-smi": "", "npu-smi": ""}
# Unknown commands (pip, wget, huggingface-cli, git, ...) do nothing and succeed; so does `ulimit`, which
# an unprivileged sandbox may refuse.
BASH_ENV_TEXT = "command_not_found_handle() { return 0; }\nulimit() { return 0; }\n"
SCRIPT_SECONDS = 30
MAX_TRIES = 6
UNSET = re.compile(r"line \d+: ([A-Za-z_][A-Za-z0-9_]*): (?:unbound variable|.*\b(?:set|must)\b)")


@dataclass
class ScriptResult:
    path: str  # relative to the checkout
    launches: int = 0
    no_launch: str = ""  # why the script launched nothing (its last stderr line)
    verdict: Verdict = field(default_factory=lambda: Verdict(UNKNOWN, "no launch"))
    lint: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # run name -> error code -> messages


def scripts_of(root: Path, everywhere: bool = False) -> list[str]:
    """The *.sh under examples/ and recipe/; everywhere: every *.sh of the checkout outside hidden folders
    (what `rlpatch lint CHECKOUT` reads)."""
    folders = [root] if everywhere else [root / folder for folder in SCRIPT_FOLDERS]
    found = []
    for folder in folders:
        found += [p.relative_to(root).as_posix() for p in sorted(folder.rglob("*.sh"))
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)]
    return found


def _sandbox(tmp: Path) -> dict[str, str]:
    bin_dir, home = tmp / "bin", tmp / "home"
    bin_dir.mkdir(parents=True)
    home.mkdir()
    for name in STAND_INS:
        (bin_dir / name).write_text(_STAND_IN)
        (bin_dir / name).chmod(0o755)
    for name, output in {**INERT_TOOLS, **MORE_INERT}.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + (f"echo {output}\n" if output else "") + "exit 0\n")
        (bin_dir / name).chmod(0o755)
    for name in PLAIN_TOOLS:
        real = shutil.which(name)
        if real is not None and not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(real)
    (tmp / "bash_env").write_text(BASH_ENV_TEXT)
    return {"PATH": str(bin_dir), "HOME": str(home), "BASH_ENV": str(tmp / "bash_env")}


def record_launches(root: Path, script: str, env: dict[str, str], tmp: Path) -> tuple[list[Received], str]:
    """Run `bash SCRIPT` from the checkout's root: the stand-in calls that run a module (`-m`), and why
    there is none. A script that stops before launching is run again as its user would run it: with the
    variable it says is unset (`NAME: unbound variable`, `${NAME:?...}`) set to a path, and with the two
    arguments verl's SFT scripts ask for (`<nproc_per_node> <save_path>`)."""
    given: dict[str, str] = {}
    args: list[str] = []
    why = ""
    for _ in range(MAX_TRIES):
        calls, stderr = _run_once(root, script, {**env, **given}, args, tmp / "records")
        if calls:
            return calls, ""
        why = stderr.strip().splitlines()[-1] if stderr.strip() else "no module launched"
        unset = UNSET.search(stderr)
        if unset and unset.group(1) not in given:
            given[unset.group(1)] = str(tmp / "given" / unset.group(1).lower())
        elif not args:
            args = ["8", str(tmp / "save")]
        else:
            break
    return [], why


def _run_once(root: Path, script: str, env: dict[str, str], args: list[str], records: Path) -> tuple[list[Received], str]:
    records.mkdir(exist_ok=True)
    for old in records.iterdir():
        old.unlink()
    bash = shutil.which("bash") or "/bin/bash"
    try:
        done = subprocess.run([bash, script, *args], cwd=root, env={**env, "RLPATCH_RECORD_DIR": str(records)},
                              capture_output=True, text=True, timeout=SCRIPT_SECONDS, check=False)
        stderr = done.stderr
    except subprocess.TimeoutExpired:
        stderr = f"timed out after {SCRIPT_SECONDS} s"  # whatever it launched before is recorded
    calls = [_parse(path.read_bytes()) for path in sorted(records.iterdir())]
    return [call for call in calls if "-m" in call.argv[:-1]], stderr


def script_verdict(root: Path, calls: list[Received]) -> Verdict:
    verdicts = [compose_launch(root, call.argv) for call in calls]
    if not verdicts:
        return Verdict(UNKNOWN, "no launch")
    for outcome in (FAILS, UNKNOWN):
        for verdict in verdicts:
            if verdict.outcome == outcome:
                return verdict
    return Verdict(COMPOSES, entry=verdicts[0].entry, facts=set().union(*(v.facts for v in verdicts)))


def lint_errors(root: Path, scripts: list[str], verl_args: list[str]) -> dict[str, dict[str, list[str]]]:
    """script -> error code -> messages, from one `rlpatch lint --format json` run over all the scripts."""
    command = [sys.executable, "-m", "rlpatch.cli", "lint", "--format", "json", "--exit-zero", *verl_args, *scripts]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"corpus_lint_oracle: rlpatch lint exited {done.returncode}: {done.stderr.strip()[-500:]}")
    errors: dict[str, dict[str, list[str]]] = {}
    for finding in json.loads(done.stdout)["findings"]:
        if finding["severity"] == "error":
            where = f"{finding['line']}:{finding['column']} {finding['message']}"
            errors.setdefault(finding["file"], {}).setdefault(finding["code"], []).append(where)
    return errors


def measure(root: Path, release: str | None, without_verl: bool, everywhere: bool) -> tuple[list[ScriptResult], list[str]]:
    """Run, compose and lint every script of the checkout `root`: composed in `root` and linted with
    `--verl-root root`, or, for a `release`, composed in that released wheel's tree and linted with
    `--verl-version release` (the scripts still run from the checkout's root)."""
    scripts = scripts_of(root, everywhere)
    tree = unpacked_tree("verl", release) if release else root
    results = [ScriptResult(path) for path in scripts]
    with tempfile.TemporaryDirectory(prefix="corpus-oracle-") as tmp:
        env = _sandbox(Path(tmp))
        for result in results:
            calls, result.no_launch = record_launches(root, result.path, env, Path(tmp))
            result.launches = len(calls)
            result.verdict = script_verdict(tree, calls)
    runs = {f"--verl-version {release}": ["--verl-version", release]} if release else \
        {"--verl-root": ["--verl-root", str(root)]}
    if without_verl:
        runs["no verl flag"] = []
    for name, verl_args in runs.items():
        found = lint_errors(root, scripts, verl_args)
        for result in results:
            result.lint[name] = found.get(result.path, {})
    return results, list(runs)


def refusals(errors: dict[str, list[str]]) -> dict[str, list[str]]:
    return {code: errors[code] for code in COMPOSE_CODES if code in errors}


def table(results: list[ScriptResult], runs: list[str]) -> list[str]:
    launching = [r for r in results if r.launches]
    decided = [r for r in launching if r.verdict.outcome != UNKNOWN]
    failing = [r for r in decided if r.verdict.outcome == FAILS]
    unknown = Counter(_reason(r.verdict.detail) for r in launching if r.verdict.outcome == UNKNOWN)
    lines = [f"scripts                                      {len(results):5}",
             f"  that launch a module                         {len(launching):5}",
             f"  Hydra composes to a verdict                  {len(decided):5}",
             f"  real compose failures (Hydra refuses)        {len(failing):5}"]
    lines += [f"  unknown: {reason:<36}{count:5}" for reason, count in unknown.most_common()]
    for run in runs:
        claimed = [r for r in launching if refusals(r.lint[run])]
        true = [r for r in claimed if r.verdict.outcome == FAILS]
        false = [r for r in claimed if r.verdict.outcome == COMPOSES]
        missed = [r for r in failing if not refusals(r.lint[run])]
        runtime = [r for r in launching if any(c in r.lint[run] for c in RUNTIME_CODES)]
        confirmed = [r for r in runtime if r.verdict.outcome == COMPOSES
                     and {c for c in RUNTIME_CODES if c in r.lint[run]} <= r.verdict.facts]
        lines += [f"lint {run}:",
                  f"  scripts with a Hydra-refusal error ({'/'.join(COMPOSE_CODES)}) {len(claimed):5}",
                  f"    Hydra confirms (true)                      {len(true):5}",
                  f"    Hydra composes (false)                     {len(false):5}",
                  f"    Hydra's verdict unknown                    {len(claimed) - len(true) - len(false):5}",
                  f"  misses (Hydra refuses, lint silent)          {len(missed):5}",
                  f"  scripts with RL305/RL306 errors              {len(runtime):5}  (composed config confirms {len(confirmed)})"]
    return lines


def _reason(detail: str) -> str:
    if detail.startswith("entry module"):
        return "entry module not in the tree"
    if detail.startswith("hydra.searchpath"):
        return "search path outside the tree"
    return detail[:36]


def disagreements(results: list[ScriptResult], runs: list[str]) -> list[str]:
    """Each launching script where a lint run's Hydra-refusal verdict is not Hydra's, and each real
    compose failure (with what lint said of it)."""
    lines = []
    for result in (r for r in results if r.launches):
        verdict = result.verdict
        said = []
        for run in runs:
            claimed = refusals(result.lint[run])
            agrees = bool(claimed) == (verdict.outcome == FAILS) and not (claimed and verdict.outcome == UNKNOWN)
            if not agrees or verdict.outcome == FAILS:
                said.append(f"    lint {run}: {_first(claimed)}")
        if said:
            hydra = {COMPOSES: "composes", FAILS: f"refuses: {verdict.detail}",
                     UNKNOWN: f"unknown: {verdict.detail}"}[verdict.outcome]
            lines += [f"{result.path} [{verdict.entry or '-'}]", f"    Hydra: {hydra}", *said]
    return lines


def _first(claimed: dict[str, list[str]]) -> str:
    if not claimed:
        return "silent"
    code, messages = next(iter(claimed.items()))
    more = sum(map(len, claimed.values())) - 1
    return f"{code} {messages[0]}" + (f" (+{more} more)" if more else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a verl checkout (read only)")
    parser.add_argument("--verl-version", metavar="X.Y.Z",
                        help="compose in this released verl wheel's tree and lint with --verl-version "
                             "(the checkout gives only the scripts)")
    parser.add_argument("--without-verl", action="store_true", help="also lint with no verl flag")
    parser.add_argument("--everywhere", action="store_true",
                        help=f"every *.sh of the checkout, not only {' and '.join(SCRIPT_FOLDERS)}/")
    parser.add_argument("--list", action="store_true",
                        help="print each script where lint and Hydra disagree, and those that launch nothing")
    options = parser.parse_args()
    root = options.checkout.resolve()
    if not (root / "verl").is_dir():
        parser.error(f"{root} is not a verl checkout (no verl/ folder)")
    os.environ.setdefault("NO_COLOR", "1")
    results, runs = measure(root, options.verl_version, options.without_verl, options.everywhere)
    version = (root / "verl" / "version" / "version")
    print(f"scripts of the verl checkout {root} (version {version.read_text().strip() if version.is_file() else '?'}), "
          f"composed in {'the ' + options.verl_version + ' wheel' if options.verl_version else 'the checkout'}")
    print("\n".join(table(results, runs)))
    if options.list:
        print("\ndisagreements, and the real compose failures:")
        print("\n".join(disagreements(results, runs)) or "none")
        print("\nlaunch nothing:")
        print("\n".join(f"{r.path}: {r.no_launch}" for r in results if not r.launches) or "none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
