"""The shell wing's one door: everything the other wings (lint, gen, dumps, doctor, the rules) use.

Reading a script and modelling its runs:

- `script_runs(script, version, env=, args=, mode=, verl_root=)`: a launch script (a path, read bounded, or a
  `SourceFile` already read) evaluated over all its paths, with one `Run` per verl launch
  (`ScriptRuns`: the evaluation, with its source, parse tree and launches, and the runs).
- `SourceFile`, `Span`, `read_regular`, `read_stream`, `MAX_SCRIPT_BYTES`, `InputTooLarge`,
  `file_kind`: bounded reading of scripts and configs, and source positions.
- `parse_file`, `ParsedScript`, `language` (tree-sitter-bash), `evaluate_source`, `Options`,
  `Evaluation`, `Launch`, `Arg`, `Unknown`, `Piece`, `Value`, `Word`, `word_text`: the lower steps,
  for callers that re-evaluate edited text (`gen` proves what it wrote) or read the tree itself.
- `env_assignments`: `--env KEY=VALUE` words as the starting environment.

The run model and verl's keys:

- `Run`, `OWN_TRAINER`, `Setting`, `EnvVar`, `Override`, `parse_override`, `unquote`, `Mode`, `MODES`.
- `ACTOR`, `REF`, `ROLLOUT`, `NEWEST_VERL`, `INFERENCE_DUMP_KEYS`, `SGLANG_DUMP_KEYS`, `renamed_key`,
  `rollout_skip_key`, `ulysses_keys`.
"""

# No `from __future__ import annotations`: typing compiles each string annotation of a NamedTuple's
# fields (a ForwardRef each) at import, on every cold start of `rlpatch lint`; evaluated ones it takes as they are.

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from rlpatch.shell.defaults import ACTOR, NEWEST_VERL, REF, ROLLOUT, renamed_key, rollout_skip_key, ulysses_keys
from rlpatch.shell.evaluator import Options, env_assignments, evaluate_source
from rlpatch.shell.launch import Launch
from rlpatch.shell.model import (
    INFERENCE_DUMP_KEYS,
    MODES,
    OWN_TRAINER,
    SGLANG_DUMP_KEYS,
    EnvVar,
    Mode,
    Run,
    Setting,
)
from rlpatch.shell.overrides import Override, parse_override, unquote
from rlpatch.shell.parse import ParsedScript, language, parse_file
from rlpatch.shell.pieces import Piece, Value, Word, word_text
from rlpatch.shell.results import Arg, Evaluation, Unknown
from rlpatch.shell.run_reading import read_run
from rlpatch.shell.source import MAX_SCRIPT_BYTES, InputTooLarge, SourceFile, Span, file_kind, read_regular, read_stream
from rlpatch.upstream.api import Version

__all__ = [
    "ACTOR", "INFERENCE_DUMP_KEYS", "MAX_SCRIPT_BYTES", "MODES", "NEWEST_VERL", "REF", "ROLLOUT", "SGLANG_DUMP_KEYS",
    "Arg", "EnvVar", "Evaluation", "InputTooLarge", "Launch", "Mode", "OWN_TRAINER", "Options", "Override", "ParsedScript", "Piece",
    "Run", "ScriptRuns", "Setting", "SourceFile", "Span", "Unknown", "Value", "Word",
    "env_assignments", "evaluate_source", "file_kind", "language", "parse_file", "parse_override", "read_regular",
    "read_stream", "renamed_key", "rollout_skip_key", "script_runs", "ulysses_keys", "unquote", "word_text",
]


class ScriptRuns(NamedTuple):
    """One script read through the front end: what evaluating it gave, and one run per verl launch."""

    evaluation: Evaluation  # with the script's `source`, its `parsed` tree and its `launches`
    runs: list[Run]

    @property
    def source(self) -> SourceFile:
        return self.evaluation.source


def script_runs(script: str | SourceFile, version: Version, *, env: Mapping[str, str] | None = None,
                args: Sequence[str] = (), mode: str | None = None, verl_root: str | None = None) -> ScriptRuns:
    """Read `script` (a path: a regular file of at most 2 MB, UTF-8, else InputError with a one-line
    reason; or a `SourceFile` already read, as stdin is), evaluate it starting from `env` with `args`
    as its "$@", and model each verl launch it makes as a `Run` of verl `version`. `mode` (one of
    `MODES`, or None to detect it) forces every run's dump mode. A script without a launch gives no
    runs: what that means is the caller's to say. `verl_root`, the verl tree the user named, is where
    each run reads its entry module (`Run.entry_check`, `Run.trainer`)."""
    source = SourceFile.read(script) if isinstance(script, str) else script
    evaluation = evaluate_source(source, Options(env=dict(env or {}), args=list(args)))
    forced = _forced_mode(mode)
    return ScriptRuns(evaluation, [read_run(launch, source.path, version, forced, verl_root)
                                   for launch in evaluation.launches])


def _forced_mode(mode: str | None) -> Mode | None:
    if mode is None:
        return None
    for known in MODES:  # the commands' `--mode` choices are MODES: anything else is a caller's bug
        if mode == known:
            return known
    raise ValueError(f"not a dump mode: {mode!r} (one of {', '.join(MODES)})")
