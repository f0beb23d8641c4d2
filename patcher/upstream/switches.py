"""The run-time switches rlpatch's patches add to an upstream tree, and how they are read.

The patched verl reads `DUMP_ON`, `PROMPTS_ONLY`, `DUMP_PHASE` and `MSPROBE_ACTOR_CONFIG` from the
environment of its workers. The inserted code and the linter (RL211) must agree on what "on"
means, so both take it from here: the patch rules write `env_is_on(NAME)` into upstream code, the
lint rules call `is_on(text)`.
"""

from __future__ import annotations

# What the inserted code treats as on (after strip and lower-casing); anything else, unset
# included, is off. The msprobe guide writes `1`.
TRUTHY: tuple[str, ...] = ("1", "true", "yes", "on")
DUMP_PHASES: tuple[str, ...] = ("log_prob", "update_actor", "all")


def is_on(text: str | None) -> bool:
    """Whether the patched code reads this env value as on."""
    return text is not None and text.strip().lower() in TRUTHY


def py_tuple(values: tuple[str, ...]) -> str:
    """A tuple of strings as Python source (double quotes, like the rest of the inserted code)."""
    return "(" + ", ".join(f'"{value}"' for value in values) + ")"


def env_is_on(name: str) -> str:
    """The Python expression the inserted code uses to read switch `name`."""
    return f'os.environ.get("{name}", "").strip().lower() in {py_tuple(TRUTHY)}'
