"""`rlpatch doctor`: check the Python that really runs verl, before a collection run.

Exit 0 when no verdict FAILs, 1 when one does, 2 for bad input (interpreter not found, not a
Python, a probe that timed out). Nothing is ever changed, except by `--install`, which says what it
runs (`<target> -m pip install mindstudio-probe`, never the `pip` on PATH) and then checks again.
"""

from __future__ import annotations

import json
from typing import Any

import click

from rlpatch.cluster.api import ray_options
from rlpatch.doctor.examine import STAGE2_TIMEOUT_S, DoctorOptions, examine, install, render_text
from rlpatch.doctor.target import read_script
from rlpatch.errors import InputError
from rlpatch.output.api import shown, versioned
from rlpatch.upstream.api import TARGET_OPTIONS


def _on_stderr(message: str) -> None:
    click.echo(shown(message), err=True)


def _silent(message: str) -> None:
    pass


@click.command("doctor")
@TARGET_OPTIONS["python"].click_option("the script's launcher, else this one", use="the one that runs verl")
@click.option("--script", type=str, metavar="RUN.SH", help="The launch script: its launcher, working directory, env and lint findings.")
@click.option("--mode", type=click.Choice(["training", "inference", "consistency"]), help="The dump mode (default: the script's).")
@click.option("--env", "env", multiple=True, metavar="K=V",
              help="A variable the script starts with (repeatable): it chooses the script's path, as `K=V bash run.sh` would.")
@click.option("--install", is_flag=True, help="Install mindstudio-probe with the target's own pip when it is missing, then check again.")
@click.option("--timeout", type=click.FloatRange(min=1), default=STAGE2_TIMEOUT_S, show_default=True, metavar="S",
              help="Seconds the whole probe of the target may take (metadata, then the real msprobe import).")
@click.option("--isolated", is_flag=True,
              help="Probe only the named interpreter (--python, else this one) in this environment: run nothing the "
                   "script chooses (no launcher, no working directory, no PYTHONPATH or sitecustomize of the script).")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--quiet", "-q", is_flag=True, help="Print no progress on stderr (what --install runs): the report and "
                                                "errors stay.")
@ray_options
def doctor_cmd(**options: Any) -> int:
    """Check msprobe, versions and patches in the Python that really runs verl.

    To see the interpreter that really runs, doctor RUNS code the script chooses: the launcher of its verl
    command with that launcher's arguments (`uv run --with ./pkg python3` installs and runs ./pkg), in the
    script's working directory with its exported PYTHONPATH (a sitecustomize.py there runs too). Use
    --isolated to probe only the named interpreter without any of that.
    """
    if options.get("ray"):
        from rlpatch.cluster.api import run_on_cluster  # imports ray when called: only with --ray

        return run_on_cluster(click.get_current_context())
    told = DoctorOptions(python=options["python"], script=options["script"], mode=options["mode"],
                         env=tuple(options["env"] or ()), install=options["install"], timeout=options["timeout"],
                         isolated=options["isolated"], output_format=options["output_format"])
    given_env = told.env_values()
    if given_env and not told.script:
        raise InputError("--env: give --script too (it sets the environment the script starts with)")
    script = read_script(told.script, given_env) if told.script else None
    report = examine(told, script)
    if told.install:
        # What --install does goes to stderr, unless -q; that pip failed always does.
        report = install(told, script, report, _silent if options["quiet"] else _on_stderr, _on_stderr)
    if told.output_format == "json":
        click.echo(json.dumps(versioned(report), indent=2))
    else:
        click.echo(render_text(report), nl=False)
    return int(report["exit_code"])
