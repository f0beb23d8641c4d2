"""`rlpatch gen {training|inference|consistency} SCRIPT`: the command line of `rlpatch.gen.api`.

The callback turns its options into one `GenOptions`, calls `generate_collection`, prints the
result and returns its exit code: 0 when the result lints without errors, 1 when an error remains
(printed) or the lint could not run, 2 for bad input with nothing written.
"""

from __future__ import annotations

import json
from typing import Any

import click

from rlpatch.gen.api import MODES, GenOptions, generate_collection
from rlpatch.lint import api as linter
from rlpatch.output.api import versioned
from rlpatch.upstream.api import TARGET_OPTIONS


# `-- extra overrides` are kept aside exactly as `rlpatch lint` does (its command class, from the linter's api).
@click.command("gen", cls=linter.ExtraArgsCommand)
@click.argument("mode", type=click.Choice(MODES))
@click.argument("script", type=click.Path())
@click.option("-o", "--output", "output", type=click.Path(), help="The new script (default: <stem>.<mode>-dump.sh beside SCRIPT).")
@click.option("--config-dir", type=click.Path(), help="Where the msprobe configs go (default: beside the new script).")
@click.option("--dump-root", type=click.Path(), help="Where the dumps land (default: <stem>.<mode>-dumps beside it).")
@click.option("--verl-version", metavar="X.Y.Z", help="The released verl that will run (its wheel is cached).")
@TARGET_OPTIONS["verl_root"].click_option()
@TARGET_OPTIONS["python"].click_option(use="the one that will run verl: versions probed, nothing imported")
@click.option("--sglang-version", metavar="X.Y.Z", help="The SGLang that will run (default: >= 0.5.11).")
@click.option("--vllm-ascend-version", metavar="X.Y.Z", help="The vLLM-Ascend that will run (default: >= 0.13).")
@TARGET_OPTIONS["vllm_ascend_root"].click_option(use="its version; lint and the printed apply step use it")
@TARGET_OPTIONS["sglang_root"].click_option(use="its version; lint and the printed apply step use it")
@click.option("--stages", help="training: stages to dump; consistency: the DUMP_PHASE.")
@click.option("--steps", help="Steps to dump, e.g. 1,2 (training: global steps; others: the config's step list).")
@click.option("--level", type=click.Choice(["mix", "L0", "L1"]),
              help="msprobe level (default: L0 in consistency mode, both configs: msprobe compare --consistent_check "
                   "fails on mix; mix otherwise).")
@click.option("--task", type=click.Choice(["statistics", "tensor"]),
              help="msprobe task (default: tensor in consistency mode, statistics otherwise).")
@click.option("--env", "env", multiple=True, metavar="K=V", help="A value the script cannot know statically.")
@click.option("--minimal", is_flag=True, help="consistency: the smoke configuration (rollout TP 1, one request per "
              "prefill, batch 1) instead of the script's own rollout TP and batch.")
@click.option("--force", is_flag=True, help="Overwrite existing files (and allow Megatron training mode on 0.8.0).")
@click.option("--dry-run", is_flag=True, help="Print the diff and the configs; write nothing.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--quiet", "-q", is_flag=True, help="Leave the notes out of the text report (sizes, what was kept, "
              "why a stage is left out); its warnings, findings and next steps stay. JSON keeps them.")
@click.pass_context
def gen_cmd(ctx: click.Context, fmt: str, quiet: bool, **given: Any) -> int:
    """Write a collection script for MODE from the training script SCRIPT (never edited).

    Extra Hydra overrides after `--` are appended after gen's own.
    """
    result = generate_collection(GenOptions(**given, extra=tuple(ctx.meta.get("rlpatch.extra", []))))
    if result.lint_error is not None:
        click.echo(f"rlpatch gen: wrote {result.new_path}, but rlpatch lint did not run: {result.lint_error}", err=True)
    elif fmt == "json":
        click.echo(json.dumps(versioned(result.as_json()), indent=2))
    else:
        click.echo(result.text(notes=not quiet), nl=False)
    return result.exit_code

