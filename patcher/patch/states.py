"""What a rule finds on a tree, what a command does with it, and which findings refuse: typed, stated once.

A report keeps the two apart: its `Finding` is decided by reading the tree (`engine.Session.report`)
and never changes; its `Outcome` is what apply or revert then did (None: the command only looked).
The state and message a report shows (text and JSON) are derived from the two, so the code asks
the finding or the outcome, never a message.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

# The state a report shows for one rule, and a set's state on one tree (text and JSON).
RuleState = Literal["applied", "absent", "partial", "drifted", "not-applicable", "refused"]


class Finding(str, Enum):
    """What one rule finds on one tree. The value is the state a report shows while no command acted."""

    APPLIED = "applied"
    ABSENT = "absent"
    PARTIAL = "partial"  # some edits in place, others not
    DRIFTED = "drifted"  # patch code edited or moved since apply
    NOT_APPLICABLE = "not-applicable"  # the release has no file, no anchor, or its gate says so
    SHAPE_UNKNOWN = "refused"  # an anchor missing or ambiguous (AnchorError): the state cannot be told


class Outcome(str, Enum):
    """What apply or revert did with one rule. The value is the message its report shows (a release
    that needs --force says its own reason), so text and JSON read as they always did."""

    APPLIED_NOW = "applied now"
    ALREADY_APPLIED = "already applied, nothing to do"
    WOULD_APPLY = "would apply"
    REVERTED = "reverted"
    NOTHING_TO_REVERT = "not applied, nothing to do"
    NEEDS_FORCE = "refused: the release needs --force"

    def __str__(self) -> str:
        return self.value


# The findings that refuse a command before it writes anything (the one place that says so).
REFUSES_APPLY = frozenset({Finding.SHAPE_UNKNOWN, Finding.DRIFTED})  # apply and diff
REFUSES_REVERT = frozenset({Finding.SHAPE_UNKNOWN})  # a drifted file refuses later, naming its file
IN_PLACE = frozenset({Finding.APPLIED, Finding.NOT_APPLICABLE})  # verify passes on these

# The state a report shows once the command acted (an outcome not listed leaves its finding shown).
STATE_AFTER: dict[Outcome, RuleState] = {
    Outcome.APPLIED_NOW: "applied",
    Outcome.ALREADY_APPLIED: "applied",
    Outcome.REVERTED: "absent",
    Outcome.NOTHING_TO_REVERT: "absent",
    Outcome.NEEDS_FORCE: "refused",
}
