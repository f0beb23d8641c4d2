"""`rlpatch gen` apart from its command line: `generate_collection(GenOptions) -> GenResult`.

Nothing is written before everything is known: the targets, the plan, the placement (proved by
evaluating the result with the front end) and the refusal checks. Then the new script and its
msprobe configs are written together, the new script is linted with the same versions, and the
next steps are worked out. The result renders itself as gen prints it (`text()`, `as_json()`);
its exit code is 0 when the new script lints without errors, 1 when an error remains or the lint
could not run. Bad input raises InputError with nothing written.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, replace
from typing import Any

from rlpatch.errors import InputError
from rlpatch.gen.build import Generated, generate
from rlpatch.gen.modes import Request
from rlpatch.gen.outputs import (
    LintFailed,
    config_text,
    dump_root,
    output_paths,
    refuse_bad_outputs,
    write_and_lint,
)
from rlpatch.gen.plan import Targets
from rlpatch.gen.steps import NextSteps, next_steps
from rlpatch.gen.targets import item_list, number_list, released_verl, resolve_targets
from rlpatch.lint import api as linter
from rlpatch.shell.api import env_assignments, read_regular

__all__ = ["BEFORE_APPLY", "MODES", "GenOptions", "GenResult", "generate_collection"]

MODES = ("training", "inference", "consistency")
# Findings that only say the target is not patched yet: the next steps fix them (`rlpatch apply`).
BEFORE_APPLY = ("RL605", "RL607")  # not patched, and the trainer the run selects not covered


@dataclass(frozen=True)
class GenOptions:
    """What `rlpatch gen` was asked, as given on its command line (text until checked)."""

    mode: str
    script: str
    output: str | None = None
    config_dir: str | None = None
    dump_root: str | None = None
    verl_version: str | None = None
    verl_root: str | None = None
    python: str | None = None
    sglang_version: str | None = None
    vllm_ascend_version: str | None = None
    vllm_ascend_root: str | None = None
    sglang_root: str | None = None
    stages: str | None = None
    steps: str | None = None
    level: str | None = None
    task: str | None = None
    env: tuple[str, ...] = ()
    force: bool = False
    minimal: bool = False
    dry_run: bool = False
    extra: tuple[str, ...] = ()  # Hydra overrides given after `--`

    @property
    def roots(self) -> dict[str, str | None]:
        return {"verl": self.verl_root, "vllm_ascend": self.vllm_ascend_root, "sglang": self.sglang_root}


@dataclass(frozen=True)
class GenResult:
    """What gen wrote (or would write), what the lint of it found, and what to run next.

    `lint_error` is set when the files are written but the linter could not read them back: then
    there are no findings and no next steps."""

    options: GenOptions
    new_path: str
    request: Request
    targets: Targets
    generated: Generated
    files: dict[str, str]  # path -> text, the new script first
    findings: list[linter.Finding]
    next: NextSteps | None = None
    lint_error: str | None = None

    @property
    def failing(self) -> list[linter.Finding]:
        """The errors left in the new script, beyond those the apply step fixes."""
        return [f for f in self.findings if f.severity == "error" and f.code not in BEFORE_APPLY]

    @property
    def exit_code(self) -> int:
        return 1 if self.lint_error is not None or self.failing else 0

    def as_json(self) -> dict[str, Any]:
        run, targets, next_ = self.generated.run, self.targets, self._next()
        return {
            "script": self.new_path,
            "configs": [path for path in self.files if path != self.new_path],
            "mode": self.request.mode,
            "backends": {"rollout": run.rollout_backend, "training": run.train_backend_why()[0]},
            "versions": {"verl": str(targets.verl), "verl_assumed": targets.verl_assumed,
                         "sglang": str(targets.sglang) if targets.sglang else None,
                         "vllm_ascend": str(targets.vllm_ascend) if targets.vllm_ascend else None},
            "overrides": [{"key": f"{o.prefix}{o.key}", "value": o.value, "why": o.why, "replaces": o.replaces}
                          for o in self.generated.plan.overrides],
            "env": [{"name": e.name, "value": e.value, "why": e.why} for e in self.generated.plan.env],
            "findings": [{"code": f.code, "severity": f.severity, "message": f.message, "file": f.span.file,
                          "line": f.span.line, "column": f.span.column} for f in self.findings],
            "next_steps": next_.before,
            "dumps": self.generated.plan.dumps,
            "after_run": next_.after,
        }

    def text(self, notes: bool = True) -> str:
        """The text report: what was written, the diff and configs for --dry-run, notes, findings, next
        steps; without `notes` (-q), the notes that are not warnings are left out."""
        return "".join(self._text_parts(notes))

    def _text_parts(self, notes: bool = True) -> list[str]:
        run, dry_run, new_path = self.generated.run, self.options.dry_run, self.new_path
        verb = "would write" if dry_run else "wrote"
        parts = [f"rlpatch gen: {verb} {new_path} ({self.request.mode} mode, verl {self.targets.verl}"
                 f"{' assumed' if self.targets.verl_assumed else ''}, {run.train_backend_why()[0]} + "
                 f"{run.rollout_backend or 'no rollout name'})\n"]
        if dry_run:
            parts.append(self._diff())
        for path, text in self.files.items():
            if path != new_path:
                parts.append(f"{verb} {path}\n")
                if dry_run:
                    parts.append(text)
        parts.extend(f"note: {note}\n" for note in self.generated.notes if notes or note.startswith("warning:"))
        for finding in self.findings:
            expected = " (expected until the apply step below)" if finding.code in BEFORE_APPLY else ""
            parts.append(f"{finding.span}: {finding.code} {finding.message}{expected}\n")
        if not self.failing:
            parts.append("rlpatch lint: no error in the new script\n")
        next_ = self._next()
        parts.append("next steps:\n")
        parts.extend(f"  {index}. {step}\n" for index, step in enumerate(next_.before, 1))
        parts.append("dumps:\n")
        parts.extend(f"  {where}\n" for where in self.generated.plan.dumps)
        parts.append("after the run:\n")
        parts.extend(f"  {index}. {step}\n" for index, step in enumerate(next_.after, len(next_.before) + 1))
        return parts

    def _diff(self) -> str:
        script = self.options.script
        with open(script, encoding="utf-8") as handle:
            original = handle.read()
        return "".join(difflib.unified_diff(original.splitlines(True), self.generated.text.splitlines(True), script,
                                            self.new_path))

    def _next(self) -> NextSteps:
        if self.next is None:
            raise ValueError("no next steps: the lint of the new script did not run")
        return self.next


def _check_input(options: GenOptions) -> None:
    if options.minimal and options.mode != "consistency":
        raise InputError("--minimal is for consistency mode (the smoke configuration: rollout TP 1, batch 1)")
    if sum(bool(x) for x in (options.verl_version, options.verl_root, options.python)) > 1:
        raise InputError("give at most one of --verl-version, --verl-root, --python")
    script = options.script
    if not os.path.isfile(script):
        raise InputError(f"{script}: no such file" if not os.path.exists(script) else f"{script}: not a file")
    _check_line_lengths(script)


# gen parses the script, plans on it, rewrites it and lints the result: each pass costs time and
# memory in the script's expansions (a 1.9 MB line of `$x` took 34 s and 1.1 GB; 1.9 MB in 64 KB lines
# 28 s and 1.8 GB). lint bounds one value at 64 KiB; gen also bounds its input before any pass: a line
# of at most 64 KiB, a script of at most 256 KiB (measured: 2.8 s and 270 MB at worst; verl's
# launch scripts are a few KB).
MAX_GEN_LINE = 64 * 1024
MAX_GEN_SCRIPT = 256 * 1024


def _check_line_lengths(script: str) -> None:
    # One-line InputError for a FIFO, a device, a file over the limit (nothing written).
    data = read_regular(script, MAX_GEN_SCRIPT, "a script gen rewrites")
    for number, line in enumerate(data.split(b"\n"), 1):
        if len(line) > MAX_GEN_LINE:
            raise InputError(f"{script}:{number}: a line of {len(line)} bytes, over gen's limit of {MAX_GEN_LINE // 1024} "
                             "KiB per line (nothing written): split it, or lint the script (lint reads it, values over "
                             "64 KiB are unknown)")


def generate_collection(options: GenOptions) -> GenResult:
    """Plan, check, write and lint the collection script and its configs (InputError: nothing written)."""
    _check_input(options)
    script, extra = options.script, list(options.extra)
    given_env = env_assignments(options.env)
    released = released_verl(options.verl_version, bool(options.verl_root or options.python))
    lint_options = linter.make_options(verl_version=released, verl_root=options.verl_root, python=options.python,
                                       env=given_env, sglang_root=options.sglang_root,
                                       vllm_ascend_root=options.vllm_ascend_root, sglang_version=options.sglang_version,
                                       vllm_ascend_version=options.vllm_ascend_version)
    targets = resolve_targets(verl_version=options.verl_version, verl_root=options.verl_root, python=options.python,
                              sglang_version=options.sglang_version, vllm_ascend_version=options.vllm_ascend_version,
                              sglang_root=options.sglang_root, vllm_ascend_root=options.vllm_ascend_root,
                              lint_options=lint_options)
    new_path, names = output_paths(script, options.mode, options.output, options.config_dir)
    folder = os.path.dirname(os.path.abspath(new_path))
    request = Request(options.mode, dump_root(new_path, options.dump_root), names, item_list(options.stages),
                      number_list(options.steps, "--steps"), options.level, options.task, targets.verl,
                      targets.sglang, targets.vllm_ascend, options.force,
                      options.minimal)
    generated = generate(script, new_path, request, targets, given_env, extra, lint_options)
    files = {new_path: generated.text} | {os.path.join(folder, c.name): config_text(c.content)
                                          for c in generated.plan.configs}
    refuse_bad_outputs(files, script, overwrite=options.force or options.dry_run)
    result = GenResult(options, new_path, request, targets, generated, files, [])
    try:
        findings = write_and_lint(files, new_path, script, lint_options, options.dry_run)
    except LintFailed as err:  # written, but the linter could not run: say so, never pretend it is clean
        return replace(result, lint_error=str(err))
    result = replace(result, findings=findings)
    if result.failing:  # say plainly which errors gen inherited from the original rather than made
        inherited = {(f.code, f.message) for f in linter.lint_file(script, lint_options)}
        generated.notes.extend(f"{f.code} at line {f.span.line} is in the original script too: gen cannot fix it "
                               f"for you" for f in result.failing if (f.code, f.message) in inherited)
    return replace(result, next=next_steps(generated, request.mode, new_path, options.roots, options.python))

