"""The front end: read a launch script without running it, and model the verl run it starts.

Other wings use it only through `rlpatch.shell.api`. `api.script_runs(path, version)` reads a script
(bounded, regular files only: `source`), parses it with tree-sitter-bash (`parse`), expands its
words (`words`, built from `pieces`, with `quoting`, `params` and `arith`), walks it statement by
statement (`statements`, `control`) over all its plausible paths (`evaluator`) and collects the
verl launches it makes (`launch`, `results`), with every argument's text and the source positions
it came from. Nothing is ever executed: command substitutions are unknowns. `run_reading` turns one
launch into a `model.Run`, the run verl will see (Hydra overrides (`overrides`; a dict value read as its keys by
`hydra_dict`), the user's config file (`config_file`), dump mode, backends, sizes, environment) with
verl's defaults (`defaults`); `run_summary` presents it as `rlpatch detect` shows it. The linter,
`gen`, `dumps check` and `doctor` all read scripts through this one front end. It may import the
upstream facts and `rlpatch.errors`, never a command wing.
"""

from __future__ import annotations

MAY_IMPORT: tuple[str, ...] = ("errors", "upstream")
