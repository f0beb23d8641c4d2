"""`rlpatch doctor`: check the Python that really runs verl, before a collection run.

Owns the target-interpreter resolution (`--python`, a launcher prefix, the launcher of the verl
command in `--script`, verl's `runtime_env.py_executable`), the two-stage probe that runs inside
that interpreter (stdlib metadata first, then the real `from msprobe.pytorch import
PrecisionDebugger` in its own subprocess with a timeout), the verdicts (`verdicts`) and `--install`
(`examine`; `cli` only turns the options into a `DoctorOptions` and prints the report). The patch
state comes from the patch wing's door (`rlpatch.patch.api`), the script's lint verdicts from the
linter's (`rlpatch.lint.api.run_lint`, as `rlpatch lint` would give them), both in-process; it reads
scripts through the front end's (`rlpatch.shell.api`).
`--ray ADDRESS` hands over to the cluster wing (its options, and its driver imported only with
`--ray`), which runs `rlpatch doctor` on every node through the CLI and never imports this wing.
"""

MAY_IMPORT: tuple[str, ...] = ("errors", "output", "upstream", "shell", "cluster", "patch", "lint")
