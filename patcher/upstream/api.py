"""The upstream wing's one door for the other wings: facts about upstream trees, never their code.

- versions: `Version` (PEP 440 ordering, the edge versions `packaging` accepts);
- what is installed where, read from metadata and version files with nothing imported: `probe`
  (an interpreter, or this one; `probe_here`), `probe_root` (a tree), `find_package_dir`, each an `Installed`;
- the released-wheel cache (tests, `--verl-version`, lint's default verl): `unpacked_tree`, `cached_tree`,
  `fresh_copy`, `cache_dir`;
- the trees a patch command acts on: `Target`, `Package`, `OPTION_OF`, `target_for_root`,
  `imported_target`;
- whether a launch's entry module exists in the target verl and which trainer it starts, read from
  the tree (else a table of the released wheels): `EntryCheck`, `check_entry`; the file an entry runs
  (`entry_file`) and its `@hydra.main(config_path=..., config_name=...)` (`read_hydra_main`, `HydraMain`);
- verl's trainers and which of them a set of patch rules covers: `TRAINERS`, `ALL_TRAINERS`,
  `TrainerCoverage`, `trainer_coverage`, `describe_coverage`;
- the run-time switches the inserted code reads (and the linter checks): `TRUTHY`, `DUMP_PHASES`,
  `is_on`, `env_is_on`, `py_tuple`;
- the one probe script run inside a target interpreter, bounded in time and output:
  `PROBE_SOURCE`, `with_probe_marker`, `read_probe_answer`, `run_bounded`, `last_words`;
- `--python`, read the one way every command reads it (an interpreter, a launcher prefix such as
  `uv run python3` or `/venv/bin/python -I`, or a venv folder): `interpreter_argv`,
  `require_interpreter`, `absent_program`, and `ask_interpreter` (the probe run in it); the target
  options every command declares the same way (`TARGET_OPTIONS`: `--python`, `--verl-root`,
  `--sglang-root`, `--vllm-ascend-root`).

Everything here is plain data about upstream trees and costs only the standard library to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlpatch import lazy_getattr
from rlpatch.upstream.switches import DUMP_PHASES, TRUTHY, env_is_on, is_on, py_tuple
from rlpatch.upstream.versions import Version

if TYPE_CHECKING:  # the type checker sees every name; at run time the heavier ones load on first use
    from rlpatch.upstream.entries import EntryCheck, HydraMain, check_entry, entry_file, read_hydra_main
    from rlpatch.upstream.envprobe import Installed, find_package_dir, probe, probe_here, probe_root
    from rlpatch.upstream.interpreter import (
        TARGET_OPTIONS,
        TargetOption,
        absent_program,
        ask_interpreter,
        interpreter_argv,
        require_interpreter,
    )
    from rlpatch.upstream.target_probe import PROBE_SOURCE, last_words, run_bounded
    from rlpatch.upstream.target_probe import read_answer as read_probe_answer
    from rlpatch.upstream.target_probe import with_marker as with_probe_marker
    from rlpatch.upstream.targets import OPTION_OF, Package, Target, imported_target, target_for_root
    from rlpatch.upstream.trainers import ALL_TRAINERS, TRAINERS
    from rlpatch.upstream.trainers import Coverage as TrainerCoverage
    from rlpatch.upstream.trainers import coverage as trainer_coverage
    from rlpatch.upstream.trainers import describe as describe_coverage
    from rlpatch.upstream.wheelcache import cache_dir, cached_tree, fresh_copy, unpacked_tree

# Where each name that loads on first use lives, and its name there. `rlpatch lint` starts with
# `Version` alone: the probes, the wheel cache and the targets bring subprocess, zipfile, tempfile,
# json and dataclasses, about 15 ms of a pre-commit hook's cold start that most scripts never need.
_LAZY: dict[str, tuple[str, str]] = {
    **{name: ("entries", name) for name in ("EntryCheck", "HydraMain", "check_entry", "entry_file",
                                                   "read_hydra_main")},
    **{name: ("envprobe", name) for name in ("Installed", "find_package_dir", "probe", "probe_here", "probe_root")},
    **{name: ("target_probe", name) for name in ("PROBE_SOURCE", "last_words", "run_bounded")},
    **{name: ("interpreter", name) for name in ("TARGET_OPTIONS", "TargetOption", "absent_program", "ask_interpreter",
                                                "interpreter_argv", "require_interpreter")},
    "read_probe_answer": ("target_probe", "read_answer"),
    "with_probe_marker": ("target_probe", "with_marker"),
    **{name: ("targets", name) for name in ("OPTION_OF", "Package", "Target", "imported_target", "target_for_root")},
    **{name: ("trainers", name) for name in ("ALL_TRAINERS", "TRAINERS")},
    "TrainerCoverage": ("trainers", "Coverage"),
    "trainer_coverage": ("trainers", "coverage"),
    "describe_coverage": ("trainers", "describe"),
    **{name: ("wheelcache", name) for name in ("cache_dir", "cached_tree", "fresh_copy", "unpacked_tree")},
}


__getattr__ = lazy_getattr(globals(), _LAZY)


__all__ = [
    "TARGET_OPTIONS", "TargetOption", "absent_program", "ask_interpreter", "interpreter_argv", "require_interpreter",
    "ALL_TRAINERS", "DUMP_PHASES", "EntryCheck", "HydraMain", "OPTION_OF", "PROBE_SOURCE", "TRAINERS", "TRUTHY", "Installed",
    "Package", "Target", "TrainerCoverage", "Version", "cache_dir", "cached_tree", "check_entry", "entry_file",
    "describe_coverage", "env_is_on", "find_package_dir",
    "fresh_copy", "imported_target", "is_on", "last_words", "probe", "probe_here", "probe_root", "py_tuple",
    "read_hydra_main", "read_probe_answer", "run_bounded", "target_for_root", "trainer_coverage", "unpacked_tree",
    "with_probe_marker",
]
