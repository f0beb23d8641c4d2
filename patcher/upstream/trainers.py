"""Which verl trainer runs a launch, and whether a patched set covers it.

A patch only counts if the code it changes runs, and verl has several trainers whose code paths
differ:

- `v0`: `RayPPOTrainer.fit` in `verl/trainer/ppo/ray_trainer.py` (DataProto data path), the only
  trainer before 0.9.0; from 0.9.0 it runs only with `trainer.use_v1=False` (`main_ppo_v0`,
  deprecated).
- `v1`: the `PPOTrainer` of `verl/trainer/ppo/v1/trainer_base.py` (TransferQueue data path),
  selected by `trainer.use_v1=True`, the default from 0.9.0.
- `fully-async`: `FullyAsyncTrainer`, started by its own entry point
  `verl.experimental.fully_async_policy.fully_async_main` (from 0.8.0).

Every patch rule names the trainers whose run executes its code (`PatchRule.trainers`). This
module works on plain dicts (the rule reports of `rlpatch verify --format json`), so that the patch
commands and the linter judge coverage the same way without importing each other.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple

from rlpatch.upstream.versions import Version


class Trainer(NamedTuple):
    """One verl trainer: how a launch selects it and from which release it exists."""

    id: str
    label: str
    selected_by: str
    since: str
    default_from: str | None = None  # the release from which a plain `verl.trainer.main_ppo` runs it


TRAINERS: dict[str, Trainer] = {
    "v1": Trainer("v1", "v1 PPOTrainer", "trainer.use_v1=True (the default from 0.9.0)", "0.9.0", "0.9.0"),
    "v0": Trainer("v0", "RayPPOTrainer.fit", "trainer.use_v1=False from 0.9.0 (main_ppo_v0, deprecated)", "0.0.0"),
    "fully-async": Trainer("fully-async", "FullyAsyncTrainer", "python -m verl.experimental.fully_async_policy."
                           "fully_async_main", "0.8.0"),
}
ALL_TRAINERS = frozenset(TRAINERS)
# For messages: the engine-worker rules run under every trainer.
EVERY_TRAINER = "engine workers (every trainer)"


def exists_in(trainer_id: str, version: Version | None) -> bool:
    """Whether the trainer ships in this release (unknown versions: assume it does)."""
    return version is None or not version < TRAINERS[trainer_id].since


def default_trainer(version: Version | None) -> str:
    """The trainer `python -m verl.trainer.main_ppo` runs with verl's defaults."""
    return "v1" if version is None or not version < "0.9.0" else "v0"


class Coverage(NamedTuple):
    """Whether a set of rule reports covers one trainer, and why not."""

    trainer: str
    state: str  # "complete", "incomplete" or "absent" (no such trainer in this tree)
    missing: tuple[str, ...] = ()  # "rule-id (state)" of the rules in the way

    def as_json(self) -> dict[str, Any]:
        return {"trainer": self.trainer, "label": TRAINERS[self.trainer].label, "state": self.state,
                "missing": list(self.missing)}


def coverage(reports: Iterable[Mapping[str, Any]], version: Version | None) -> dict[str, Coverage]:
    """Per trainer: is the set of `reports` ({"id", "state", "trainers"}) complete for it?

    A trainer is covered when at least one rule of the set patches a path of its own (a rule whose
    `trainers` is that trainer alone: its prompts-only trim) and is applied, and every rule of the
    set that runs under it is applied or not applicable to the release. A trainer whose own rules
    are all not applicable (or that the release does not ship) is absent.
    """
    reports = list(reports)
    result: dict[str, Coverage] = {}
    for trainer_id in TRAINERS:
        runs_here = [r for r in reports if trainer_id in r.get("trainers", ())]
        own = [r for r in runs_here if list(r.get("trainers", ())) == [trainer_id]]
        if not exists_in(trainer_id, version) or (own and all(r["state"] == "not-applicable" for r in own)):
            result[trainer_id] = Coverage(trainer_id, "absent")
            continue
        missing = [f"{r['id']} ({r['state']})" for r in runs_here if r["state"] not in ("applied", "not-applicable")]
        if not own:
            missing.append("no rule of the selected set patches its own code path")
        result[trainer_id] = Coverage(trainer_id, "incomplete" if missing else "complete", tuple(missing))
    return result


def describe(covered: Mapping[str, Coverage], version: Version | None) -> str:
    """One line for `verify`/`status`: for which trainers the set is complete."""
    default = default_trainer(version)
    complete = [TRAINERS[t].label + (" (default)" if t == default else "")
                for t, c in covered.items() if c.state == "complete"]
    incomplete = [f"{TRAINERS[t].label}{' (default)' if t == default else ''}: {_shortened(c.missing)}"
                  for t, c in covered.items() if c.state == "incomplete"]
    text = "complete for " + (", ".join(complete) if complete else "no trainer")
    if incomplete:
        text += "; not for " + "; ".join(incomplete)
    return text


def _shortened(missing: tuple[str, ...], shown: int = 3) -> str:
    more = len(missing) - shown
    return ", ".join(missing[:shown]) + (f" and {more} more" if more > 0 else "")
