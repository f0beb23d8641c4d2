"""The msprobe config wing's one door: what mindstudio-probe 26.2 makes of a `config.json`, as typed findings.

- checking a config: `check_file(path, options)`, `check_bytes(raw, path, options)`,
  `check_text(text, file, options)`, each a list of `ConfigFinding` (its `Problem` kind, severity,
  message, 1-based span inside the file and JSON pointer), in the order msprobe meets them;
  `CheckOptions` says what the run adds to the file (dump mode, world size, training backend, NPU);
  `is_valid(findings)` is msprobe's verdict as predicted (no error of a kind that stops msprobe);
- reading one: `read_config(path)`, bounded to `MAX_CONFIG_BYTES` (an `InputError` otherwise);
- where a run names its configs: `references(run)`, each a `Reference` (role, key or env var, path
  as written, span), with the names themselves: `TRAINING_CONFIG_KEY`, `ACTOR_CONFIG_ENV`,
  `SGLANG_CONFIG_ENV_PREFIX`.

Findings never carry a code of their reader: a caller maps the kinds it reports to its own words.

`Problem` and the references are defined here, in the door itself, rather than in modules of their
own: the linter loads them with every lint (its rules name the kinds they own), and each module more
on that path costs a tenth of a millisecond of a pre-commit hook's cold start. The checker, its
records and the JSON reader load on first use (PEP 562): a lint of a script that names no config
never pays for them.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from rlpatch import lazy_getattr
from rlpatch.shell.api import INFERENCE_DUMP_KEYS

if TYPE_CHECKING:  # the type checker sees every name; at run time these load on first use
    from rlpatch.msprobe_config.checker import (
        MAX_CONFIG_BYTES,
        check_bytes,
        check_file,
        check_text,
        is_valid,
        read_config,
    )
    from rlpatch.msprobe_config.schema import CheckOptions, ConfigFinding, Severity
    from rlpatch.shell.api import Run, Span


# ---- the kinds of problem: one `Problem` per finding
class Problem(Enum):
    """What kind of problem one finding is, in msprobe's terms; the finding's severity says how bad it
    is in its case (a task section msprobe adjusts is a warning, one it rejects an error)."""

    UNREADABLE = "unreadable"  # msprobe's json.load fails: not a regular file, not UTF-8, not JSON
    NOT_CHECKED = "not-checked"  # too large, or nested too deeply, to check here (msprobe may still read it)
    REJECTED_VALUE = "rejected-value"  # one field's value msprobe rejects
    REJECTED_COMBINATION = "rejected-combination"  # fields msprobe rejects (or adjusts) together
    REJECTED_PATH = "rejected-path"  # a path msprobe refuses: dump_path, load.path, the config's own name
    NO_DUMP_PATH = "no-dump-path"  # the file alone has no dump_path: right for verl's tool only
    RELATIVE_DUMP_PATH = "relative-dump-path"  # resolved against each worker's working directory
    IGNORED_KEY = "ignored-key"  # a key, a task option or a whole section msprobe ignores without a word
    RANK_OUTSIDE_RUN = "rank-outside-run"  # a `rank` list that no rank of the run is in
    TASK_UNFIT_FOR_CONSISTENCY = "task-unfit-for-consistency"  # a task the consistency comparison cannot use

    @property
    def refused_by_msprobe(self) -> bool:
        """Whether an error of this kind stops msprobe (the others change what it dumps, or nothing)."""
        return self in _REFUSED


_REFUSED = frozenset({Problem.UNREADABLE, Problem.REJECTED_VALUE, Problem.REJECTED_COMBINATION, Problem.REJECTED_PATH})


# ---- where a verl run names its msprobe config files
# Overrides (verl's `precision_debugger.config_path`, the vLLM `dump_config_path` / `dump_config`,
# SGLang's `msprobe_dump_config`) and env vars (`MSPROBE_ACTOR_CONFIG` for the training side of a
# consistency run, read by rlpatch's engine patch; `MSPROBE_SGLANG_CONFIG*`, read by rlpatch's SGLang
# ModelRunner patch). `gen` writes them, `dumps check` and the linter read them: each from here.
TRAINING_CONFIG_KEY = "global_profiler.global_tool_config.precision_debugger.config_path"
ACTOR_CONFIG_ENV = "MSPROBE_ACTOR_CONFIG"
SGLANG_CONFIG_ENV_PREFIX = "MSPROBE_SGLANG_CONFIG"


class Reference:
    """One place where the run names a config file (a plain class: this module loads with every lint)."""

    __slots__ = ("role", "what", "text", "span")

    def __init__(self, role: str, what: str, text: str, span: Span) -> None:
        self.role = role  # training | inference | actor
        self.what = what  # the key or env var
        self.text = text  # the path as written
        self.span = span

    @property
    def from_env(self) -> bool:
        """Whether an env var names the file (else an override)."""
        return _names_a_config(self.what)

    def __repr__(self) -> str:
        return f"Reference({self.role!r}, {self.what!r}, {self.text!r})"


def _names_a_config(env_var: str) -> bool:
    return env_var == ACTOR_CONFIG_ENV or env_var.startswith(SGLANG_CONFIG_ENV_PREFIX)


def references(run: Run) -> list[Reference]:
    """Every msprobe config path the run names with a known value: the overrides first (training, then
    inference), then the env vars by name."""
    found = []
    for key, role in [(TRAINING_CONFIG_KEY, "training")] + [(key, "inference") for key in INFERENCE_DUMP_KEYS]:
        setting = run.setting(key)
        if setting.is_set and setting.known and not setting.is_null() and setting.value:
            found.append(Reference(role, key, setting.value.strip(), setting.span))
    for name, var in sorted(run.env.items()):
        if var.text and _names_a_config(name):
            found.append(Reference("actor" if name == ACTOR_CONFIG_ENV else "inference", name, var.text.strip(),
                                   var.span))
    return found


# Where each name that loads on first use lives. The checker's dataclasses and compiled patterns cost
# a few milliseconds that a lint of a script without an msprobe config never needs.
_LAZY: dict[str, str] = {
    **{name: "checker" for name in ("MAX_CONFIG_BYTES", "check_bytes", "check_file", "check_text", "is_valid",
                                    "read_config")},
    **{name: "schema" for name in ("CheckOptions", "ConfigFinding", "Severity")},
}
__getattr__ = lazy_getattr(globals(), _LAZY)

__all__ = [
    "ACTOR_CONFIG_ENV", "MAX_CONFIG_BYTES", "SGLANG_CONFIG_ENV_PREFIX", "TRAINING_CONFIG_KEY", "CheckOptions",
    "ConfigFinding", "Problem", "Reference", "Severity", "check_bytes", "check_file", "check_text", "is_valid",
    "read_config", "references",
]
