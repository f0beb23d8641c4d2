"""One truthy set for rlpatch's run-time switches: the inserted code and the linter agree (issue 10.7)."""

from __future__ import annotations

import os

import pytest

from rlpatch.rules._engine_dump import ENSURE_DEBUGGER
from rlpatch.rules._verl_consistency import PROMPTS_ONLY_IS_ON
from rlpatch.upstream.switches import TRUTHY, env_is_on, is_on, py_tuple

VALUES = ["1", "true", "TRUE", " yes ", "on", "On", "0", "false", "no", "off", "", "2", "y"]


@pytest.mark.parametrize("value", VALUES)
def test_inserted_switch_and_lint_agree(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTS_ONLY", value)
    inserted = eval(PROMPTS_ONLY_IS_ON, {"os": os})  # our own generated expression
    assert inserted == is_on(value)


def test_every_inserted_switch_reads_the_shared_set() -> None:
    assert env_is_on("PROMPTS_ONLY") == PROMPTS_ONLY_IS_ON
    assert f"not in {py_tuple(TRUTHY)}" in ENSURE_DEBUGGER
    assert "{{" not in ENSURE_DEBUGGER
