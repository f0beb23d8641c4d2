"""The run model: what one verl launch will do, resolved from the script's overrides.

A `Run` is built from one `Launch` (a command that starts a verl entry point). It knows the
Hydra overrides in order (last wins, `~key` deletes), verl's defaults for the keys rules read,
the values of the config file given with `--config-path/--config-name` (read by `config_file`),
the env vars the launch sees, and from those: the dump mode, rollout and training backends, world
size and parallel/batch sizes, each with where it came from. Unknown values stay unknown
(`Setting.known` is False). How `rlpatch detect` lays a run out is `run_summary`'s.

`Setting`, `EnvVar` and `Run` are plain classes, not dataclasses: `rlpatch lint` imports this module
on every cold start, and generating a dataclass's methods costs about a millisecond each.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from rlpatch.shell.config_file import ConfigValues
from rlpatch.shell.defaults import ACTOR, AR, DEFAULTS, ROLLOUT, Ref, ulysses_keys
from rlpatch.shell.launch import Launch
from rlpatch.shell.overrides import Override, unquote
from rlpatch.shell.pieces import unknown_descs
from rlpatch.shell.results import Arg, Unknown
from rlpatch.shell.run_summary import run_summary
from rlpatch.shell.source import Span
from rlpatch.upstream.api import Version

if TYPE_CHECKING:
    from rlpatch.upstream.api import EntryCheck

Mode = Literal["training", "inference", "consistency", "none"]
MODES: tuple[Mode, ...] = ("training", "inference", "consistency", "none")

VLLM_DUMP_KEYS = (f"{ROLLOUT}.engine_kwargs.vllm.additional_config.dump_config_path",
                  f"{ROLLOUT}.engine_kwargs.vllm.additional_config.dump_config")
SGLANG_DUMP_KEYS = (f"{ROLLOUT}.engine_kwargs.sglang.msprobe_dump_config",)
INFERENCE_DUMP_KEYS = VLLM_DUMP_KEYS + SGLANG_DUMP_KEYS
# rlpatch's SGLang ModelRunner patch (SGLang < 0.5.11) reads its config from the environment
# instead of a server argument; under PD disaggregation each side has its own variable.
SGLANG_DUMP_ENV = ("MSPROBE_SGLANG_CONFIG", "MSPROBE_SGLANG_CONFIG_PREFILL", "MSPROBE_SGLANG_CONFIG_DECODE")
CONSISTENCY_ENV = ("DUMP_ON", "PROMPTS_ONLY")
TOOL_KEY = "global_profiler.tool"
# The trainer id of a trainer class the entry module defines and starts itself (verl 0.8.0's
# `main_ppo_sync` and its `PPOTrainer`): no patch rule names it, so no patched set covers it.
OWN_TRAINER = "own"


class Setting:
    """The value one key will have, and where it came from."""

    __slots__ = ("key", "text", "source", "span", "override", "desc")

    def __init__(self, key: str, text: str | None, source: Literal["override", "config", "default", "absent"],
                 span: Span, override: Override | None = None, desc: str = "") -> None:
        self.key = key
        self.text = text  # None: unknown (see `desc`) — "null" means Hydra null
        self.source = source
        self.span = span  # the value's position (or the entry token for defaults)
        self.override = override
        self.desc = desc  # what could not be resolved

    def _fields(self) -> tuple:
        return (self.key, self.text, self.source, self.span, self.override, self.desc)

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, Setting) else NotImplemented

    def __repr__(self) -> str:
        return f"Setting({self.describe()!r})"

    @property
    def known(self) -> bool:
        return self.text is not None

    @property
    def is_set(self) -> bool:
        return self.source in ("override", "config")

    @property
    def value(self) -> str | None:
        return None if self.text is None else unquote(self.text)

    def as_int(self) -> int | None:
        value = self.value
        if value is None or not re.fullmatch(r"[+-]?\d+", value.strip()):
            return None
        return int(value)

    def as_bool(self) -> bool | None:
        value = (self.value or "").strip().lower()
        return True if value == "true" else False if value == "false" else None

    def is_null(self) -> bool:
        return self.value is not None and self.value.strip().lower() in ("null", "~", "")

    def as_list(self) -> list[str] | None:
        value = self.value
        if value is None:
            return None
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            return [unquote(item.strip()) for item in value[1:-1].split(",") if item.strip()]
        return None if value.lower() == "null" else [value]

    def related(self) -> tuple[Span, ...]:
        return self.override.related() if self.override is not None else ()

    @property
    def key_span(self) -> Span:
        """Where the override's key is written (the entry token for defaults)."""
        return self.override.span if self.override is not None else self.span

    def describe(self) -> str:
        where = {"override": "", "config": " (from the config file)", "default": " (verl default)",
                 "absent": " (not set)"}[self.source]
        return f"{self.key}={self.text if self.text is not None else '<unknown>'}{where}"


class EnvVar:
    """A variable the launch's environment has, and how it got there."""

    __slots__ = ("name", "text", "span", "how")

    def __init__(self, name: str, text: str | None, span: Span, how: str) -> None:
        self.name = name
        self.text = text
        self.span = span
        self.how = how  # "export", "prefix", "--env"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EnvVar):
            return NotImplemented
        return (self.name, self.text, self.span, self.how) == (other.name, other.text, other.span, other.how)

    def __repr__(self) -> str:
        return f"EnvVar({self.name!r}, {self.text!r}, {self.how!r})"


class Run:
    """One verl launch, resolved."""

    def __init__(self, launch: Launch, file: str, version: Version, forced_mode: Mode | None = None,
                 verl_root: str | None = None) -> None:
        self.launch = launch
        self.file = file
        self.version = version
        self.verl_root = verl_root  # the verl tree the user named: its entry module says which trainer runs
        self._entry: EntryCheck | None = None
        self.forced_mode = forced_mode
        self.overrides: list[Override] = []
        self.options_args: list[Arg] = []  # --config-path etc.
        self.config_dir: str | None = None
        self.config_name: str | None = None
        self.config_values: ConfigValues = {}
        self.env: dict[str, EnvVar] = {}
        self.unknown: list[Unknown] = []
        self._memo_size = -1
        self._settings: dict[str, Setting] = {}
        self._last: dict[str, Override] = {}
        self._effective: list[Override] = []
        self._inference: list[Override] | None = None  # asked by every rule, via `mode`

    def __repr__(self) -> str:
        return f"Run({self.launch.entry!r} in {self.file})"

    # ---- settings -------------------------------------------------------------------------------
    def _refresh(self) -> None:
        """(Re)build the memos when the override list changed (it is built once, in from_launch)."""
        if self._memo_size != len(self.overrides):
            self._memo_size, self._settings, self._last = len(self.overrides), {}, {}
            self._inference = None
            # a dict value sets its leaves too (Hydra merges it): `key={a:1}` is also `key.a=1`
            self._effective = [item for override in self.overrides for item in (override, *override.leaves())]
            for override in self._effective:
                self._last[override.key] = override

    def overrides_of(self, key: str) -> list[Override]:
        """Every override that sets `key`, in order (the last one decides; dict leaves included)."""
        return [o for o in self.effective_overrides() if o.key == key]

    def effective_overrides(self) -> list[Override]:
        """The overrides in order, each dict value followed by its leaves (`key.a` for `key={a:..}`)."""
        self._refresh()
        return self._effective

    def last_override(self, key: str) -> Override | None:
        """The override that decides `key` (later overrides win, as in Hydra)."""
        self._refresh()
        return self._last.get(key)

    def setting(self, key: str) -> Setting:
        """The value `key` will have (memoised: a run's overrides do not change once built)."""
        self._refresh()
        found = self._settings.get(key)
        if found is None:
            found = self._settings[key] = self._resolve(key)
        return found

    def _resolve(self, key: str) -> Setting:
        override = self.last_override(key)
        if override is not None:
            if override.prefix == "~":
                return Setting(key, "null", "override", override.span, override)
            if not override.value_known:
                return Setting(key, None, "override", override.value_span, override,
                               desc="".join(unknown_descs(override.arg.word)))
            return Setting(key, override.value, "override", override.value_span, override)
        if key in self.config_values:
            text, span = self.config_values[key]
            return Setting(key, text, "config", span)
        default = DEFAULTS.get(key)
        if isinstance(default, Ref):
            inherited = self.setting(default.key)
            return Setting(key, inherited.text, inherited.source if inherited.is_set else "default", inherited.span,
                           inherited.override, inherited.desc)
        if default is not None:
            return Setting(key, default, "default", self.entry_span)
        return Setting(key, "null", "absent", self.entry_span)

    def has(self, key: str) -> bool:
        override = self.last_override(key)
        return (override is not None and override.prefix != "~") or key in self.config_values

    @property
    def entry_span(self) -> Span:
        return self.launch.entry_arg.span

    # ---- what the run is ----------------------------------------------------------------------
    def inference_dump_overrides(self) -> list[Override]:
        effective = self.effective_overrides()  # refreshes the memo, and _inference with it
        if self._inference is None:
            self._inference = [o for o in effective if o.key in INFERENCE_DUMP_KEYS and o.prefix != "~"]
        return list(self._inference)

    def live_inference_dump_overrides(self) -> list[Override]:
        """The inference dump overrides whose key does not end up null (a later `key=null`, as
        `rlpatch gen` writes to neutralise a user's key, switches that dump off)."""
        return [o for o in self.inference_dump_overrides() if not self.setting(o.key).is_null()]

    @property
    def training_tool(self) -> bool:
        return self.setting(TOOL_KEY).value == "precision_debugger"

    def sglang_dump_env(self) -> list[EnvVar]:
        """The env vars of the SGLang patch route (`MSPROBE_SGLANG_CONFIG*`) this launch exports."""
        return [self.env[name] for name in SGLANG_DUMP_ENV if name in self.env and self.env[name].text != ""]

    def env_set(self, name: str) -> bool:
        return name in self.env

    def inference_dump_reason(self) -> str | None:
        """What makes this run dump inference: the engine key (unless a later override nulls it), or
        the SGLang patch's env var."""
        inference = self.live_inference_dump_overrides()
        if inference:
            return inference[0].key
        env = self.sglang_dump_env()
        return f"{env[0].name} in the env (rlpatch's SGLang ModelRunner patch)" if env else None

    def detected_mode(self) -> tuple[Mode, str]:
        """The dump mode and why (a `--mode` option wins)."""
        if self.forced_mode:
            return self.forced_mode, "--mode"
        inference = self.inference_dump_reason()
        if inference and any(self.env_set(name) for name in CONSISTENCY_ENV):
            names = "+".join(n for n in CONSISTENCY_ENV if self.env_set(n))
            return "consistency", f"{inference} with {names} in the env"
        if self.training_tool:
            return "training", f"{TOOL_KEY}=precision_debugger"
        if inference:
            return "inference", inference
        return "none", "no msprobe dump configured"

    @property
    def mode(self) -> Mode:
        return self.detected_mode()[0]

    @property
    def rollout_backend(self) -> str | None:
        value = self.setting(f"{ROLLOUT}.name").value
        return None if value in (None, "???", "null") else value

    def train_backend_why(self) -> tuple[str, str]:
        engine = self.setting("model_engine")
        if engine.value == "megatron":
            return "megatron", "model_engine=megatron"
        strategy = self.setting(f"{ACTOR}.strategy")
        if strategy.is_set and strategy.value == "megatron":
            return "megatron", f"{ACTOR}.strategy=megatron"
        if self.config_name and "megatron" in self.config_name:
            return "megatron", f"--config-name {self.config_name}"
        return (strategy.value or "fsdp"), (f"{ACTOR}.strategy" if strategy.is_set else "default")

    def entry_check(self) -> EntryCheck:
        """Whether the entry module exists in the target verl (the tree, else the release) and what it
        starts (read once per run)."""
        if self._entry is None:
            from rlpatch.upstream.api import check_entry  # here: ast and difflib, only for runs whose trainer is asked

            self._entry = check_entry(self.launch.entry, self.version, self.verl_root)
        return self._entry

    def trainer(self) -> tuple[str | None, str, Setting | None]:
        """The verl trainer the launch runs (an id of rlpatch.upstream.trainers, or OWN_TRAINER for a
        trainer class the entry module defines itself), why, and the setting that decided it; the id
        is None when that setting is unknown or the entry module does not exist."""
        entry = self.entry_check()
        if entry.exists is False:
            return None, f"the entry module does not exist: {entry.missing_text()}", None
        if entry.own_trainer is not None:
            return OWN_TRAINER, (f"{entry.own_trainer} defined in {entry.file}, read from {entry.against}; no rlpatch "
                                 "rule patches it"), None
        if entry.runs == "fully-async" or (entry.runs is None and self.launch.entry.rsplit(".", 1)[-1]
                                           .removesuffix(".py").endswith("fully_async_main")):
            return "fully-async", f"entry {self.launch.entry}", None
        if entry.runs == "v0" and not self.version < "0.9.0":  # main_ppo_v0: RayPPOTrainer whatever use_v1 says
            return "v0", f"{entry.file} constructs RayPPOTrainer, read from {entry.against}", None
        if self.version < "0.9.0":  # no v1 trainer (and no trainer.use_v1 key) before 0.9.0
            legacy = self.setting("trainer.use_legacy_worker_impl")
            if self.version.minor == (0, 7) and legacy.value != "disable":
                return "v0", f"verl {self.version}; legacy workers ({legacy.describe()})", legacy
            return "v0", f"verl {self.version} has no v1 trainer", None
        use_v1 = self.setting("trainer.use_v1")
        if not use_v1.is_set:
            return "v1", f"trainer.use_v1 defaults to true on verl {self.version}", use_v1
        if not use_v1.known:
            return None, use_v1.describe(), use_v1
        off = (use_v1.value or "").strip().lower() in ("false", "no", "off", "0", "null")  # `if use_v1:` in main_ppo
        return ("v0" if off else "v1"), use_v1.describe(), use_v1

    @property
    def megatron(self) -> bool:
        return self.train_backend_why()[0] == "megatron"

    def world_size(self) -> int | None:
        per_node = self.setting("trainer.n_gpus_per_node").as_int()
        nodes = self.setting("trainer.nnodes").as_int()
        return None if per_node is None or nodes is None else per_node * nodes

    def world_settings(self) -> list[Setting]:
        return [self.setting("trainer.n_gpus_per_node"), self.setting("trainer.nnodes")]

    def train_dp(self) -> tuple[int | None, list[Setting]]:
        """Training data-parallel size: Megatron world/(TP*PP*CP); FSDP world/SP (Ulysses)."""
        used = self.world_settings()
        if self.megatron:
            used += [self.setting(f"{ACTOR}.megatron.{n}_parallel_size") for n in
                     ("tensor_model", "pipeline_model", "context")]
        else:
            used.append(self.ulysses_setting(ACTOR))
        world = self.world_size()
        divisors = [s.as_int() for s in used[2:]]
        if world is None or any(d is None or d <= 0 for d in divisors):
            return None, used
        product = 1
        for divisor in divisors:
            assert divisor is not None  # checked above
            product *= divisor
        return (world // product if world % product == 0 else None), used

    def ulysses_setting(self, role: str) -> Setting:
        """The Ulysses SP size `role` (actor or ref) trains with: the old key when it is > 1 (verl
        copies it into `fsdp_config` then), else `fsdp_config.ulysses_sequence_parallel_size`."""
        old_key, new_key = ulysses_keys(role)
        old = self.setting(old_key)
        value = old.as_int()
        if not old.known or (value is not None and value > 1):
            return old
        return self.setting(new_key)

    def env_reaches_workers(self) -> bool | None:
        """Whether env exported by the launching shell reaches every Ray worker (single node, no
        `ray job submit`); None when the node count is unknown."""
        if self.launch.ray_submit:
            return False
        nodes = self.setting("trainer.nnodes").as_int()
        return None if nodes is None else nodes <= 1

    def summary(self) -> dict:
        """The `rlpatch detect` object for this run (a stable JSON contract: `detect --format json`)."""
        return run_summary(self)


__all__ = ["AR", "EnvVar", "MODES", "Mode", "OWN_TRAINER", "Override", "Run", "Setting"]
