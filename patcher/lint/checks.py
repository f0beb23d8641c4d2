"""Small checks many rules share: "key must be X", integer reads that respect unknowns, messages.

A value a script does not set is verl's default, and a finding about it points at the entry
token (`python3 -m verl.trainer.main_ppo`) and says "(verl default)" so the fix is obvious: add
the override.
"""

from __future__ import annotations

from rlpatch.lint.rule import Edit, Fix, LintContext
from rlpatch.shell.api import Override, Setting, Span


def canonical(setting: Setting) -> str | None:
    """A comparable form of a value: true/false, null, an int as text, else the stripped text."""
    if not setting.known:
        return None
    if setting.is_null():
        return "null"
    boolean = setting.as_bool()
    if boolean is not None:
        return "true" if boolean else "false"
    number = setting.as_int()
    return str(number) if number is not None else (setting.value or "").strip()


def shown(setting: Setting) -> str:
    """`key=value` as the user would write it, with where it came from."""
    return setting.describe()


def expect_value(ctx: LintContext, key: str, want: str, why: str) -> bool:
    """Report unless `key` resolves to `want` ("true", "false", "null", "1", ...); True when it does."""
    setting = ctx.run.setting(key)
    if ctx.unresolved(setting):
        return True
    if canonical(setting) == want:
        return True
    spelled = {"true": "True", "false": "False"}.get(want, want)
    overridden = _earlier_wanted(ctx, setting, want)
    note = ""
    related = list(setting.related())
    if overridden is not None:
        note = (f"; it overrides the earlier {overridden.key}={overridden.value} at line {overridden.value_span.line} "
                "(the last value wins in Hydra)")
        related.append(overridden.value_span)
    ctx.report(f"{key} must be {spelled} ({why}); found {shown(setting)}{note}", at=setting.span, related=related,
               fix=value_fix(setting, spelled))
    return False


def value_fix(setting: Setting, replacement: str) -> Fix | None:
    """Write `replacement` where the deciding override's value is written: safe when that is the
    override's own token, unsafe when it is a variable's or an array's (it may be used elsewhere too).
    None for a default (nothing written to edit) or a dict value's leaf."""
    override = setting.override
    if setting.source != "override" or override is None or override.leaf is not None or not override.value_known:
        return None
    edit = Edit(setting.span, override.value or "", replacement)
    return Fix(f"set {setting.key}={replacement}", (edit,), "safe" if within(setting.span, override.used_at) else "unsafe")


def prefix_fix(override: Override, prefix: str, why: str) -> Fix | None:
    """Write `prefix` before the override's key (RL103: `+`, RL303: `++`), replacing the prefix it had."""
    if override.leaf is not None:
        return None
    edit = Edit(override.span, override.prefix + override.key, prefix + override.key)
    return Fix(f"{why}: {prefix}{override.key}", (edit,), "safe" if within(override.span, override.used_at) else "unsafe")


def within(inner: Span, outer: Span) -> bool:
    """Whether `inner` lies inside `outer` (the same file)."""
    return (inner.file == outer.file and (inner.line, inner.column) >= (outer.line, outer.column)
            and (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column))


def _earlier_wanted(ctx: LintContext, setting: Setting, want: str) -> Override | None:
    """An earlier override of the same key that had the wanted value, which the deciding one undoes."""
    if setting.override is None:
        return None
    earlier = ctx.run.overrides_of(setting.key)[:-1]
    for override in reversed(earlier):
        if override.prefix != "~" and override.value_known and canonical(
                Setting(setting.key, override.value, "override", override.value_span, override)) == want:
            return override
    return None


# From verl 0.9.0 the engine's micro-batch holds nested (jagged) input_ids, from which the engine
# patch logs where each request's tokens sit (update_actor_log.jsonl "rows"); the vLLM-Ascend dispatch
# logger logs the runner's rows and TP group. `dumps pair` then pairs every request of packed steps
# and micro-batches and rebuilds rollout TP shards against FSDP, so the batch chain and the FSDP
# rollout TP no longer have to be 1. Before 0.9.0 the engine patch logs no rows: only single-request
# micro-batches against single-request prefills of a full-model replica pair.
PAIRS_BY_ROWS_FROM = "0.9.0"


def pairs_by_rows(ctx: LintContext) -> bool:
    """True when this run's verl pairs request by request through the logged rows (>= 0.9.0)."""
    return not ctx.run.version < PAIRS_BY_ROWS_FROM


def dumps_log_prob_only(ctx: LintContext) -> bool:
    """True when the engine patch dumps only the log-prob pass (DUMP_PHASE unset, empty or log_prob),
    which runs on the weights the rollout generated with, before any actor update."""
    phase = ctx.run.env.get("DUMP_PHASE")
    if phase is None:
        return True
    return phase.text is not None and phase.text.strip() in ("", "log_prob")


def ints(ctx: LintContext, *keys: str) -> list[tuple[int, Setting]] | None:
    """Integer values of `keys`, or None (noted for RL002) when any is unknown or not an integer."""
    settings = [ctx.run.setting(key) for key in keys]
    if ctx.unresolved(*settings):
        return None
    values = [s.as_int() for s in settings]
    known = [v for v in values if v is not None]
    if len(known) != len(values):
        return None
    return list(zip(known, settings, strict=False))


def pick(*settings: Setting) -> Setting:
    """The setting a finding should point at: the first one the script sets, else the first."""
    return next((s for s in settings if s.is_set), settings[0])


def related_of(*settings: Setting) -> list:
    """Positions of all set settings plus where their values were used."""
    spans = []
    for setting in settings:
        if setting.is_set:
            spans.append(setting.span)
            spans.extend(setting.related())
    return spans


def msprobe_configs(ctx: LintContext, roles: tuple[str, ...] = ("training", "inference", "actor")) -> list[tuple]:
    """The msprobe config.json files this run references that can be read and parsed as a JSON object:
    (role, span of the reference, path, data, text). Roles: `training` (verl's precision_debugger
    config_path, when that tool is on), `inference` (the vLLM/SGLang dump key, or the SGLang patch's
    `MSPROBE_SGLANG_CONFIG*`), `actor` (MSPROBE_ACTOR_CONFIG, consistency). The references are
    `rlpatch.msprobe_config.api.references`, the ones RL5xx reads."""
    from rlpatch.msprobe_config.api import references

    run = ctx.run
    found = []
    for reference in references(run):
        if reference.role not in roles or (reference.role == "training" and not run.training_tool):
            continue
        if not reference.text.endswith(".json"):
            continue
        path = ctx.resolve_path(reference.text)
        loaded = ctx.read_json(path)
        if loaded is not None and isinstance(loaded[0], dict):
            found.append((reference.role, reference.span, path, loaded[0], loaded[1]))
    return found
