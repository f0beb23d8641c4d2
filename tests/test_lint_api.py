"""`rlpatch.lint.api`, the linter's facade for the other wings (imported by the wings that lint what they write)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES

from rlpatch.errors import InputError
from rlpatch.lint import api


def test_options_findings_and_schema(tmp_path: Path) -> None:
    root = str(FIXTURES / "verl_mini")
    options = api.make_options(verl_root=root, env={"N": "4"})
    assert str(api.verl_version_of(options)) == "0.9.1" and options.env == {"N": "4"}
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$N trainer.no_such_key=1\n")
    codes = {finding.code for finding in api.lint_file(str(script), options)}
    assert "RL302" in codes and "RL305" in codes
    schema, origin = api.schema_of(options)
    assert schema is not None and "--verl-root" in origin
    assert schema.has("trainer.n_gpus_per_node") and not schema.has("trainer.no_such_key")


def test_unreadable_file_and_missing_schema(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        api.lint_file(str(tmp_path / "missing.sh"), api.make_options())
    empty = tmp_path / "verl"
    (empty / "verl" / "version").mkdir(parents=True)
    (empty / "verl" / "__init__.py").write_text("")
    (empty / "verl" / "version" / "version").write_text("0.9.1\n")
    schema, why = api.schema_of(api.make_options(verl_root=str(empty)))
    assert schema is None and why
