"""What the README says about commands matches what they do or what their spec says (issue 10, item 15)."""

from __future__ import annotations

from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_doctor_is_not_said_to_use_rlpatchs_own_msprobe() -> None:
    # `rlpatch doctor` (shared spec doctor-cluster.md) probes the interpreter that runs verl in a
    # subprocess; the `[msprobe]` extra in rlpatch's own environment is for the runtime tests only.
    for line in README.splitlines():
        if "[msprobe]" in line or "mindstudio-probe for" in line:
            assert "for `doctor`" not in line, line
