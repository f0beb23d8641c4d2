"""What `rlpatch doctor` does, apart from its command line: probe the target, turn what it says into verdicts.

`examine(DoctorOptions, script)` returns the report (`--format json` prints it as it is; `render_text`
is the text form); `install` runs the target's own pip when msprobe is missing, saying what it runs
through `say`, then examines again.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any, Callable

from rlpatch.doctor import probe
from rlpatch.doctor.target import ScriptFacts, absent_launcher, current_interpreter, env_option, python_option
from rlpatch.doctor.verdicts import (
    RunFacts,
    Verdict,
    companion_verdicts,
    import_verdicts,
    lint_verdicts,
    msprobe_verdicts,
    patch_verdicts,
    version_verdicts,
)
from rlpatch.errors import EXIT_OK, EXIT_REFUSED
from rlpatch.output.api import shown_lines

STAGE2_TIMEOUT_S = 120.0  # seconds the whole probe of the target may take, unless --timeout says


@dataclass(frozen=True)
class DoctorOptions:
    """What `rlpatch doctor` was told (each field is the option of the same name)."""

    python: str | None = None  # an interpreter or a launcher prefix; None: the script's launcher, else this one
    script: str | None = None
    mode: str | None = None
    env: tuple[str, ...] = ()  # K=V words, as given
    install: bool = False
    timeout: float = STAGE2_TIMEOUT_S
    isolated: bool = False
    output_format: str = "text"

    def env_values(self) -> dict[str, str]:
        """`--env` as the environment the script starts with."""
        return env_option(self.env)


def target_of(options: DoctorOptions, script: ScriptFacts | None) -> probe.Interpreter:
    if options.isolated:  # the named interpreter only: no launcher, working directory or env of the script
        return python_option(options.python, None, {}) if options.python else current_interpreter()
    if options.python:
        cwd = script.driver.cwd if script else None
        return python_option(options.python, cwd, dict(script.driver.env) if script else {})
    if script is not None:
        return script.workers or script.driver
    return current_interpreter()


def run_facts(options: DoctorOptions, script: ScriptFacts | None) -> RunFacts:
    if script is None:
        return RunFacts(mode=options.mode)
    run = script.run
    legacy = run.setting("trainer.use_legacy_worker_impl")
    detected = run.mode if run.mode != "none" else None
    device = run.setting("trainer.device")
    return RunFacts(mode=options.mode or detected, megatron=run.megatron,
                    legacy_worker=legacy.value if legacy.is_set else None, rollout=run.rollout_backend, script=script.path,
                    device=((device.value or "").strip().lower() or None) if device.is_set else None)


def examine(options: DoctorOptions, script: ScriptFacts | None) -> dict[str, Any]:
    """Probe the target (two stages) and turn what it says into verdicts."""
    target = target_of(options, script)
    # The script's own launcher is the target (no --python, not --isolated).
    from_script = script if script is not None and not options.python and not options.isolated else None
    if from_script is not None and (absent := absent_launcher(target)):
        return unreachable(options, from_script, target, absent)
    deadline = probe.Deadline(options.timeout)
    found = probe.environment(target, deadline)
    packages = found["packages"]
    if (packages.get("mindstudio-probe") or {}).get("location"):
        imported = probe.msprobe_import(target, deadline)
    else:
        imported = {"ok": False, "cause": "msprobe", "error": "No module named 'msprobe'", "missing": "msprobe"}
    facts = run_facts(options, script)
    verdicts: list[Verdict] = msprobe_verdicts(packages, imported, target.display)
    verdicts += import_verdicts(packages, facts, target.display)
    verdicts += version_verdicts(packages, facts)
    verdicts += companion_verdicts(packages, facts, target.display)
    verdicts += shadow_verdicts(packages)
    if from_script is not None:
        verdicts += driver_verdicts(from_script, found, deadline)
    patched, trees = patch_verdicts(packages, facts.mode)
    verdicts += patched
    findings: list[dict[str, Any]] = []
    if script is not None:
        linted, findings = lint_verdicts(script.path, options.mode, packages, options.env_values())
        verdicts += linted
    failed = any(verdict.level == "FAIL" for verdict in verdicts)
    return {
        "interpreter": {"argv": list(target.argv), "chosen_by": target.chosen_by, "executable": found["executable"],
                        "python": found["python"], "prefix": found["prefix"], "cwd": found["cwd"]},
        "mode": facts.mode,
        "script": facts.script,
        "packages": packages,
        "msprobe_import": imported,
        "verdicts": [verdict.as_json() for verdict in verdicts],
        "trees": trees,
        "lint": findings,
        "exit_code": EXIT_REFUSED if failed else EXIT_OK,
    }


def shadow_verdicts(packages: dict[str, Any]) -> list[Verdict]:
    """A source tree first on sys.path (e.g. a `verl/` folder in the working directory) hides the installed one."""
    found = []
    for name, package in packages.items():
        installed, version = package.get("installed_version"), package.get("version")
        if package.get("location") and installed and package.get("version_from") != "metadata" and installed != version:
            found.append(Verdict("WARN", "shadowed", f"{name} {version or '?'} is imported from {package['location']}, "
                                 f"not the installed {name} {installed}: a tree first on sys.path wins (check PYTHONPATH "
                                 "and the working directory)"))
    return found


def unreachable(options: DoctorOptions, script: ScriptFacts, target: probe.Interpreter, absent: str) -> dict[str, Any]:
    """The script's launcher is not on this machine (`uv` on the path the script takes): a FAIL, with
    how to check another path of the script; the lint verdicts still come."""
    verdicts = [Verdict("FAIL", "launcher", f"{target.chosen_by} starts `{target.display}`, but this machine has no "
                        f"{absent}: the script cannot run here on this path; choose the path that runs here with "
                        "--env NAME=VALUE (the variables its `if` tests), or name the interpreter with --python")]
    linted, findings = lint_verdicts(script.path, options.mode, {}, options.env_values())
    verdicts += linted
    facts = run_facts(options, script)
    return {
        "interpreter": {"argv": list(target.argv), "chosen_by": target.chosen_by, "executable": None, "python": None,
                        "prefix": None, "cwd": target.cwd},
        "mode": facts.mode, "script": facts.script, "packages": {}, "verdicts": [verdict.as_json() for verdict in verdicts], "trees": [],
        "msprobe_import": {"ok": False, "cause": "launcher", "error": f"{absent}: not found", "missing": None},
        "lint": findings, "exit_code": EXIT_REFUSED,
    }


def driver_verdicts(script: ScriptFacts, workers_found: dict[str, Any], deadline: probe.Deadline) -> list[Verdict]:
    """verl >= 0.9.1 starts its Ray workers with `py_executable`: say when it is not the driver's Python."""
    if script.workers is None:
        if script.workers_null_at is None:
            return []
        return [Verdict("OK", "workers-python", f"{script.workers_null_at}: py_executable=null, so the Ray workers run "
                        f"Ray's default, the driver's Python {workers_found['executable']}")]
    chosen_by = script.workers.chosen_by
    if absent := absent_launcher(script.driver):
        return [Verdict("FAIL", "launcher", f"{script.driver.chosen_by} starts `{script.driver.display}`, but this machine "
                        f"has no {absent}: choose the path that runs here with --env NAME=VALUE, or use --python")]
    driver = probe.environment(script.driver, deadline)
    # A venv's python is a symlink to its base interpreter: its sys.prefix, not the file, tells them apart.
    if (driver["prefix"], driver["executable"]) == (workers_found["prefix"], workers_found["executable"]):
        return [Verdict("OK", "workers-python", f"the Ray workers ({chosen_by}) run the driver's Python {driver['executable']}")]
    return [Verdict("WARN", "workers-python", f"the Ray workers run {workers_found['executable']} ({chosen_by}), the "
                    f"driver runs {driver['executable']}: doctor checked the workers' Python, where msprobe dumps")]


def install(options: DoctorOptions, script: ScriptFacts | None, report: dict[str, Any],
            say: Callable[[str], None], warn: Callable[[str], None]) -> dict[str, Any]:
    """`<target> -m pip install mindstudio-probe` when msprobe is missing, said first; then check again.
    `say` tells what is done (what runs, pip's last lines); `warn` that pip failed."""
    target = target_of(options, script)
    if report["msprobe_import"].get("cause") != "msprobe":
        say(f"--install: mindstudio-probe is already installed for {target.display}; nothing installed")
        return report
    command = [*target.argv, "-m", "pip", "install", "mindstudio-probe"]
    say(f"installing: {' '.join(command)}")
    done = subprocess.run(command, cwd=target.cwd, env=dict(target.env) or None, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace", check=False)
    for line in done.stdout.splitlines()[-5:]:
        say(f"  pip: {line}")
    if done.returncode != 0:
        warn(f"--install: pip exited {done.returncode}")
    return examine(options, script)


def render_text(report: dict[str, Any]) -> str:
    interpreter = report["interpreter"]
    where = (f"  Python {interpreter['python']} at {interpreter['executable']}" if interpreter["executable"]
             else "  not started: its launcher is not on this machine")
    lines = [f"target: {' '.join(interpreter['argv'])} ({interpreter['chosen_by']})",
             f"{where}; working directory {interpreter['cwd']}",
             f"  mode: {report['mode'] or _no_mode(report.get('script'))}", "packages:"]
    for name, package in report["packages"].items():
        version = package.get("version") or ("absent" if not package.get("location") else "unknown version")
        where = package.get("location") or ""
        lines.append(f"  {name:<17} {version:<16} {where}".rstrip())
    imported = report["msprobe_import"]
    if imported.get("cause") == "launcher":
        lines.append("msprobe import: not tried (the launcher is missing)")
    elif imported.get("ok"):
        lines.append("msprobe import: OK (from msprobe.pytorch import PrecisionDebugger)")
    else:
        module = imported.get("missing")
        lines.append(f"msprobe import: FAILED: {imported.get('error')}" + (f" (failing module: {module})" if module else ""))
    lines.append("verdicts:")
    lines += [f"  {v['level']:<4} {v['check']}: {v['message']}" for v in report["verdicts"]]
    levels = [v["level"] for v in report["verdicts"]]
    lines.append(f"{levels.count('FAIL')} FAIL, {levels.count('WARN')} WARN, {levels.count('OK')} OK")
    # The target's paths, versions and import errors come from outside: escaped, one line each.
    return "\n".join(shown_lines(lines)) + "\n"


def _no_mode(script: str | None) -> str:
    """Why doctor has no mode: none given, or (issue 28) a script that configures no msprobe dump."""
    if script:
        return f"none: {script} configures no msprobe dump (pass --mode for its checks)"
    return "not given (pass --mode or --script for its checks)"
