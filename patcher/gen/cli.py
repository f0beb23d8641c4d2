"""`rlpatch gen {training|inference|consistency} SCRIPT`: write the collection script and its configs.

Nothing is written before everything is known: the plan, the placement (proved by evaluating the
result with the front end) and the refusal checks. Then the new script and its msprobe configs
are written together (each through a temporary file and a rename), the new script is linted with
the same versions, and the next steps are printed. Exit 0 when the result lints without errors, 1
when an error remains (printed), 2 for bad input with nothing written.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import tempfile

import click

from rlpatch.errors import InputError
from rlpatch.gen.build import Generated, generate
from rlpatch.gen.modes import Request
from rlpatch.gen.plan import ApplyStep, Targets
from rlpatch.lint import api as linter
from rlpatch.shell.api import NEWEST_VERL, env_assignments, file_kind
from rlpatch.upstream.api import Version, probe, probe_root

MODES = ("training", "inference", "consistency")
# Findings that only say the target is not patched yet: the next steps fix them (`rlpatch apply`).
_BEFORE_APPLY = ("RL605", "RL607")  # not patched, and the trainer the run selects not covered


def _version(text: str | None, option: str) -> Version | None:
    if text is None:
        return None
    version = Version.maybe(text)
    if version is None:
        raise InputError(f"{option}: not a version number: {text!r}")
    return version


def _numbers(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    items = [item.strip() for item in text.strip("[]").split(",") if item.strip()]
    if not items or not all(item.isdigit() for item in items):
        raise InputError(f"{option}: expected numbers separated by commas, got {text!r}")
    return [int(item) for item in items]


def _env(pairs: tuple[str, ...]) -> dict[str, str]:
    return env_assignments(pairs)


def _root_version(project: str, root: str | None, option: str) -> Version | None:
    """The version of the tree given with --sglang-root / --vllm-ascend-root (bad input when it holds none)."""
    if root is None:
        return None
    if not os.path.isdir(root):
        raise InputError(f"{option} {root}: no such folder")
    found = probe_root(project, root)
    if not found.found:
        raise InputError(f"{option} {root}: no {project.replace('-', '_')}/ package found there")
    return found.version


def _targets(verl_version, verl_root, python, sglang_version, vllm_ascend_version, roots: dict[str, str | None],
             lint_options) -> Targets:
    sglang = _version(sglang_version, "--sglang-version") or _root_version("sglang", roots["sglang"], "--sglang-root")
    vllm_ascend = _version(vllm_ascend_version, "--vllm-ascend-version") or _root_version(
        "vllm-ascend", roots["vllm_ascend"], "--vllm-ascend-root")
    verl = linter.verl_version_of(lint_options)
    assumed = not (verl_version or verl_root)
    if python:
        found = probe(python, ("verl", "sglang", "vllm-ascend"))
        if found["verl"].version is not None:
            verl, assumed = found["verl"].version, False
        sglang = sglang or found["sglang"].version
        vllm_ascend = vllm_ascend or found["vllm-ascend"].version
    return Targets(verl, sglang, vllm_ascend, assumed)


def _outputs(script: str, mode: str, out: str | None, config_dir: str | None) -> tuple[str, dict[str, str]]:
    stem = os.path.basename(script)
    stem = stem[:-3] if stem.endswith(".sh") else stem
    new = out or os.path.join(os.path.dirname(script) or ".", f"{stem}.{mode}-dump.sh")
    folder = os.path.dirname(os.path.abspath(new))
    configs = os.path.abspath(config_dir) if config_dir else folder
    # Named after the new script, so that the scripts of two modes never share (and overwrite) a config.
    out_stem = os.path.basename(new)
    out_stem = out_stem[:-3] if out_stem.endswith(".sh") else out_stem
    names = {}
    for role in ("train", "infer", "infer-prefill", "infer-decode"):
        names[role] = os.path.relpath(os.path.join(configs, f"{out_stem}.msprobe-{role}.json"), folder)
    return new, names


# `-- extra overrides` are kept aside exactly as `rlpatch lint` does (its command class, from the linter's api).
@click.command("gen", cls=linter.ExtraArgsCommand)
@click.argument("mode", type=click.Choice(MODES))
@click.argument("script", type=click.Path())
@click.option("-o", "--output", "out", type=click.Path(), help="The new script (default: <stem>.<mode>-dump.sh beside SCRIPT).")
@click.option("--config-dir", type=click.Path(), help="Where the msprobe configs go (default: beside the new script).")
@click.option("--dump-root", type=click.Path(), help="Where the dumps land (default: <stem>.<mode>-dumps beside it).")
@click.option("--verl-version", metavar="X.Y.Z", help="The released verl that will run (its wheel is cached).")
@click.option("--verl-root", type=click.Path(), help="The verl tree that will run.")
@click.option("--python", metavar="PATH", help="The interpreter that will run verl (versions probed, nothing imported).")
@click.option("--sglang-version", metavar="X.Y.Z", help="The SGLang that will run (default: >= 0.5.11).")
@click.option("--vllm-ascend-version", metavar="X.Y.Z", help="The vLLM-Ascend that will run (default: >= 0.13).")
@click.option("--vllm-ascend-root", type=click.Path(), help="The vLLM-Ascend tree the run imports (its version; "
              "lint and the printed apply step use it).")
@click.option("--sglang-root", type=click.Path(), help="The SGLang tree the run imports (its version; lint and the "
              "printed apply step use it).")
@click.option("--stages", help="training: stages to dump; consistency: the DUMP_PHASE.")
@click.option("--steps", help="Steps to dump, e.g. 1,2 (training: global steps; others: the config's step list).")
@click.option("--level", type=click.Choice(["mix", "L0", "L1"]),
              help="msprobe level (default: L0 in consistency mode, both configs: msprobe compare --consistent_check "
                   "fails on mix; mix otherwise).")
@click.option("--task", type=click.Choice(["statistics", "tensor"]),
              help="msprobe task (default: tensor in consistency mode, statistics otherwise).")
@click.option("--env", "env", multiple=True, metavar="K=V", help="A value the script cannot know statically.")
@click.option("--force", is_flag=True, help="Overwrite existing files (and allow Megatron training mode on 0.8.0).")
@click.option("--dry-run", is_flag=True, help="Print the diff and the configs; write nothing.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def gen_cmd(ctx: click.Context, mode: str, script: str, out, config_dir, dump_root, verl_version, verl_root, python,
            sglang_version, vllm_ascend_version, vllm_ascend_root, sglang_root, stages, steps, level, task, env, force,
            dry_run, fmt) -> int:
    """Write a collection script for MODE from the training script SCRIPT (never edited).

    Extra Hydra overrides after `--` are appended after gen's own.
    """
    extra = list(ctx.meta.get("rlpatch.extra", []))
    if sum(bool(x) for x in (verl_version, verl_root, python)) > 1:
        raise InputError("give at most one of --verl-version, --verl-root, --python")
    if not os.path.isfile(script):
        raise InputError(f"{script}: no such file" if not os.path.exists(script) else f"{script}: not a file")
    given_env = _env(env)
    released = _released_verl(verl_version, bool(verl_root or python))
    roots = {"verl": verl_root, "vllm_ascend": vllm_ascend_root, "sglang": sglang_root}
    lint_options = linter.make_options(verl_version=released, verl_root=verl_root, python=python, env=given_env,
                                       sglang_root=sglang_root, vllm_ascend_root=vllm_ascend_root)
    targets = _targets(verl_version, verl_root, python, sglang_version, vllm_ascend_version, roots, lint_options)
    new_path, names = _outputs(script, mode, out, config_dir)
    folder = os.path.dirname(os.path.abspath(new_path))
    stem = os.path.basename(new_path).rsplit(".", 1)[0]
    root = os.path.abspath(dump_root) if dump_root else os.path.join(folder, stem.replace("-dump", "-dumps"))
    request = Request(mode, root, names, _split(stages), _numbers(steps, "--steps"), level, task, targets.verl,
                      targets.sglang, targets.vllm_ascend, force)
    result = generate(script, new_path, request, targets, given_env, extra, lint_options)
    files = {new_path: result.text} | {os.path.join(folder, c.name): _json(c.content) for c in result.plan.configs}
    _refuse_bad_outputs(files, script)
    if not force and not dry_run:
        existing = [path for path in files if os.path.exists(path)]
        if existing:
            raise InputError(f"{existing[0]} exists: give --force to overwrite it (nothing written)")
    try:
        findings = _write_and_lint(files, new_path, script, lint_options, dry_run)
    except _LintFailed as err:  # written, but the linter could not run: say so, never pretend it is clean
        click.echo(f"rlpatch gen: wrote {new_path}, but rlpatch lint did not run: {err}", err=True)
        return 1
    failing = [f for f in findings if f.severity == "error" and f.code not in _BEFORE_APPLY]
    if failing:  # say plainly which errors gen inherited from the original rather than made
        inherited = {(f.code, f.message) for f in linter.lint_file(script, lint_options)}
        result.notes.extend(f"{f.code} at line {f.span.line} is in the original script too: gen cannot fix it for you"
                            for f in failing if (f.code, f.message) in inherited)
    if fmt == "json":
        steps, after = _next_steps(result, request, new_path, roots, python)
        summary = _summary(result, request, targets, new_path, files, findings)
        summary.update({"next_steps": steps, "dumps": result.plan.dumps, "after_run": after})
        click.echo(json.dumps(summary, indent=2))
    else:
        _print_text(result, request, targets, new_path, script, files, findings, dry_run, roots, python)
    return 1 if failing else 0


def _output_problem(path: str, script: str) -> str | None:
    """Why gen must not write `path`, or None: an output replaces only a regular file that is not
    the input script (compared by device and inode: a symlink or hard link to it is it too)."""
    try:
        info = os.stat(path)  # follows symlinks: what a write would reach
    except FileNotFoundError:
        return None  # new (or a dangling symlink, which the rename replaces)
    except OSError as err:
        return f"cannot check it ({err.strerror or err})"
    kind = file_kind(info.st_mode)
    if kind is not None:
        return f"is {kind}; gen writes only regular files"
    if os.path.samestat(info, os.stat(script)):
        return f"is the input script {script}; gen never replaces its input"
    return None


def _refuse_bad_outputs(files: dict[str, str], script: str) -> None:
    """InputError (nothing written) when any output path is the input or not a regular file."""
    for path in files:
        problem = _output_problem(path, script)
        if problem:
            raise InputError(f"{path}: {problem} (nothing written)")


def _released_verl(verl_version: str | None, other_target: bool) -> str | None:
    """The released verl whose wheel gives the config: the one asked for (its download failing is bad
    input: nothing is written), else the newest release when no target is named at all (when it
    cannot be downloaded, gen goes on without a config to compose and says so)."""
    from rlpatch.upstream.api import unpacked_tree

    if verl_version is not None:
        _version(verl_version, "--verl-version")
        unpacked_tree("verl", verl_version)
        return verl_version
    if other_target:
        return None
    try:
        unpacked_tree("verl", str(NEWEST_VERL))
    except InputError:
        return None
    return str(NEWEST_VERL)


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [item.strip() for item in text.strip("[]").split(",") if item.strip()]


def _json(content: dict) -> str:
    return json.dumps(content, indent=2) + "\n"


class _LintFailed(Exception):
    """The files are written but the linter could not read them back."""


def _lint(linter, path: str, lint_options) -> list:
    try:
        return linter.lint_file(path, lint_options)
    except InputError as err:
        raise _LintFailed(err.message) from None


def _write_and_lint(files: dict[str, str], new_path: str, script: str, lint_options, dry_run: bool) -> list:
    """Write the files (into a scratch folder for --dry-run) and lint the new script."""
    if dry_run:
        with tempfile.TemporaryDirectory(prefix="rlpatch-gen-") as scratch:
            folder = os.path.dirname(os.path.abspath(new_path))
            # The configs beside the new script go beside its scratch copy (paths relative to the new
            # script's folder, not to the current directory); the lint must find them there.
            moved = {os.path.join(scratch, os.path.relpath(path, folder)): text
                     for path, text in files.items() if not os.path.relpath(path, folder).startswith("..")}
            moved[os.path.join(scratch, os.path.basename(new_path))] = files[new_path]
            _write_all(moved, script)
            findings = _lint(linter, os.path.join(scratch, os.path.basename(new_path)), lint_options)
            return [_moved_back(f, scratch, os.path.dirname(os.path.abspath(new_path))) for f in findings]
    _write_all(files, script)
    return _lint(linter, new_path, lint_options)


def _moved_back(finding, scratch: str, folder: str):
    """A finding of the scratch copy, pointing at the file the real run would write."""
    def back(span):
        if not span.file.startswith(scratch):
            return span
        return span._replace(file=os.path.join(folder, os.path.relpath(span.file, scratch)))

    return finding._replace(span=back(finding.span), related=tuple(back(r) for r in finding.related))


def _write_all(files: dict[str, str], script: str) -> None:
    """Each file through a temporary file and a rename; the new script gets the original's mode bits."""
    staged = []
    try:
        for path, text in files.items():
            directory = os.path.dirname(os.path.abspath(path))
            os.makedirs(directory, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=directory, prefix=".rlpatch-gen-")
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            staged.append((temporary, path))
        os.chmod(staged[0][0], os.stat(script).st_mode & 0o777)
    except OSError as err:
        for temporary, _ in staged:
            os.unlink(temporary)
        raise InputError(f"cannot write {err.filename or ''}: {err.strerror or err} (nothing written)") from None
    for temporary, path in staged:
        os.replace(temporary, path)


_ROOT_OPTION = {"verl": "--verl-root", "vllm_ascend": "--vllm-ascend-root", "sglang": "--sglang-root"}
_PLACEHOLDER = {"verl": "VERL_ROOT", "vllm_ascend": "VLLM_ASCEND_ROOT", "sglang": "SGLANG_ROOT"}
_PROJECT = {"verl": "verl", "vllm_ascend": "vllm-ascend", "sglang": "sglang"}


def _command(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def _apply_step(step: ApplyStep, roots: dict[str, str | None], python: str | None) -> tuple[str, list[str]]:
    """The apply command with every tree it patches, and what the user must fill in.

    `rlpatch apply` patches the given roots only, or (no root) every tree the `--python` interpreter
    imports; so a root gen does not know is taken from that interpreter, else left as a placeholder
    that the printed text says must be filled."""
    argv = ["rlpatch", "apply", "--mode", step.mode]
    given = {package: roots.get(package) for package in step.packages}
    if python and not any(given.values()):
        return _command(argv + ["--python", python]), []
    found = probe(python, tuple(_PROJECT[p] for p in step.packages)) if python else {}
    missing = []
    for package in step.packages:
        root = given[package]
        installed = found.get(_PROJECT[package])
        location = installed.location if installed is not None else None
        if root is None and location is not None:
            root = str(location.parent)
        if root is None:
            root = _PLACEHOLDER[package]
            missing.append(package)
        argv += [_ROOT_OPTION[package], root]
    fill = [f"fill in {_PLACEHOLDER[p]}: the folder holding {p}/ in the environment that runs verl (e.g. its "
            f"site-packages), or give gen {_ROOT_OPTION[p]} / --python" for p in missing]
    return _command(argv), fill


def _next_steps(result: Generated, request: Request, new_path: str, roots: dict[str, str | None],
                python: str | None) -> tuple[list[str], list[str]]:
    """(the steps before and during the run, the commands after it)."""
    steps = []
    if result.plan.apply is not None:
        line, fill = _apply_step(result.plan.apply, roots, python)
        steps.append(line + "".join(f"\n     {text}" for text in fill))
    doctor = ["rlpatch", "doctor", "--script", new_path, "--mode", request.mode]
    steps.append(_command(doctor + (["--python", python] if python else [])))
    steps.append(_command(["bash", new_path]))
    after = [_command(["rlpatch", "dumps", "check", where, "--mode", request.mode, "--script", new_path])
             for where in result.plan.dump_dirs.values()]
    dirs = result.plan.dump_dirs
    if request.mode == "consistency" and "train" in dirs and "infer" in dirs:
        backend = "megatron" if result.run.megatron else "fsdp"
        pair = ["--train", dirs["train"], "--infer", dirs["infer"], "--backend", backend]
        after.append(_command(["rlpatch", "dumps", "pair", *pair]))
        after.append(_command(["rlpatch", "dumps", "compare", *pair] + (["--python", python] if python else [])))
    return steps, after


def _print_text(result: Generated, request: Request, targets: Targets, new_path: str, script: str,
                files: dict[str, str], findings: list, dry_run: bool, roots: dict[str, str | None],
                python: str | None) -> None:
    run = result.run
    verb = "would write" if dry_run else "wrote"
    click.echo(f"rlpatch gen: {verb} {new_path} ({request.mode} mode, verl {targets.verl}"
               f"{' assumed' if targets.verl_assumed else ''}, {run.train_backend_why()[0]} + "
               f"{run.rollout_backend or 'no rollout name'})")
    if dry_run:
        with open(script, encoding="utf-8") as handle:
            original = handle.read()
        diff = difflib.unified_diff(original.splitlines(True), result.text.splitlines(True), script, new_path)
        click.echo("".join(diff), nl=False)
    for path, text in files.items():
        if path != new_path:
            click.echo(f"{verb} {path}")
            if dry_run:
                click.echo(text, nl=False)
    for note in result.notes:
        click.echo(f"note: {note}")
    for finding in findings:
        expected = " (expected until the apply step below)" if finding.code in _BEFORE_APPLY else ""
        click.echo(f"{finding.span}: {finding.code} {finding.message}{expected}")
    if not any(f.severity == "error" and f.code not in _BEFORE_APPLY for f in findings):
        click.echo("rlpatch lint: no error in the new script")
    steps, after = _next_steps(result, request, new_path, roots, python)
    click.echo("next steps:")
    for index, step in enumerate(steps, 1):
        click.echo(f"  {index}. {step}")
    click.echo("dumps:")
    for where in result.plan.dumps:
        click.echo(f"  {where}")
    click.echo("after the run:")
    for index, step in enumerate(after, len(steps) + 1):
        click.echo(f"  {index}. {step}")


def _summary(result: Generated, request: Request, targets: Targets, new_path: str, files: dict[str, str],
             findings: list) -> dict:
    run = result.run
    return {
        "script": new_path,
        "configs": [path for path in files if path != new_path],
        "mode": request.mode,
        "backends": {"rollout": run.rollout_backend, "training": run.train_backend_why()[0]},
        "versions": {"verl": str(targets.verl), "verl_assumed": targets.verl_assumed,
                     "sglang": str(targets.sglang) if targets.sglang else None,
                     "vllm_ascend": str(targets.vllm_ascend) if targets.vllm_ascend else None},
        "overrides": [{"key": f"{o.prefix}{o.key}", "value": o.value, "why": o.why, "replaces": o.replaces}
                      for o in result.plan.overrides],
        "env": [{"name": e.name, "value": e.value, "why": e.why} for e in result.plan.env],
        "findings": [{"code": f.code, "severity": f.severity, "message": f.message, "file": f.span.file,
                      "line": f.span.line, "column": f.span.column} for f in findings],
    }
