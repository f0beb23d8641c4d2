"""gen through its door, without a command line (issue 31.6): `generate_collection(GenOptions) -> GenResult`,
as Fixit tests `fixit_bytes` and LibCST's CodemodTest a codemod. The command line is tested in
test_gen.py; here the result records themselves: what is written, the lint of it, the next steps, and
the refusals that leave nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from gen_harness import copy_fixtures, stub_verl

from rlpatch.errors import InputError
from rlpatch.gen.api import GenOptions, GenResult, generate_collection


def _generate(tmp_path: Path, mode: str, **options: object) -> tuple[GenResult, Path]:
    folder = copy_fixtures(tmp_path)
    script = folder / "megatron_vllm.sh"
    given = {"verl_root": str(stub_verl(tmp_path, "0.9.1")), **options}
    return generate_collection(GenOptions(mode, str(script), **given)), folder  # type: ignore[arg-type]


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("mode", ["training", "inference", "consistency"])
def test_each_mode_writes_a_script_and_its_configs_that_lint_clean(tmp_path: Path, mode: str) -> None:
    result, folder = _generate(tmp_path, mode)
    new = Path(result.new_path)
    assert new.parent == folder and new.name == f"megatron_vllm.{mode}-dump.sh"
    assert list(result.files)[0] == result.new_path  # the new script first, then its msprobe configs
    for path, text in result.files.items():
        assert Path(path).read_text(encoding="utf-8") == text
    assert result.lint_error is None and result.failing == [] and result.exit_code == 0
    assert result.request.mode == mode and str(result.targets.verl) == "0.9.1"
    data = result.as_json()
    assert data["script"] == result.new_path and data["mode"] == mode
    assert data["configs"] == [p for p in result.files if p != result.new_path]
    assert result.next is not None and any(step.startswith("rlpatch doctor") for step in result.next.before)
    assert result.text().startswith(f"rlpatch gen: wrote {result.new_path} ({mode} mode, verl 0.9.1")


def test_a_dry_run_returns_what_it_would_write_and_writes_nothing(tmp_path: Path) -> None:
    folder = copy_fixtures(tmp_path)
    before = _tree(folder)
    result = generate_collection(GenOptions("consistency", str(folder / "megatron_vllm.sh"), dry_run=True,
                                            verl_root=str(stub_verl(tmp_path, "0.9.1"))))
    assert _tree(folder) == before
    assert result.files and not Path(result.new_path).exists()
    assert result.text().startswith(f"rlpatch gen: would write {result.new_path}")


@pytest.mark.parametrize("options,said", [
    ({"verl_version": "0.9.1", "python": "/usr/bin/python3"}, "give at most one of --verl-version, --verl-root, --python"),
    ({"steps": "x"}, "--steps"),
    ({"python": "/nonexistent/python3 -I"}, "--python /nonexistent/python3 -I: no such interpreter"),
])
def test_bad_options_raise_one_input_error_and_write_nothing(tmp_path: Path, options: dict[str, str], said: str) -> None:
    folder = copy_fixtures(tmp_path)
    before = _tree(folder)
    given = {"verl_root": None if {"verl_version", "python"} & set(options) else str(stub_verl(tmp_path, "0.9.1")),
             **options}
    with pytest.raises(InputError, match=said.replace("-", r"\-").replace(".", r"\.")):
        generate_collection(GenOptions("training", str(folder / "megatron_vllm.sh"), **given))  # type: ignore[arg-type]
    assert _tree(folder) == before


def test_an_existing_output_is_kept_unless_forced(tmp_path: Path) -> None:
    first, folder = _generate(tmp_path, "inference")
    kept = Path(first.new_path).read_bytes()
    Path(first.new_path).write_text("# the user's own edits\n")
    with pytest.raises(InputError, match="exists"):
        generate_collection(GenOptions("inference", str(folder / "megatron_vllm.sh"), verl_root=first.options.verl_root))
    assert Path(first.new_path).read_text() == "# the user's own edits\n"
    again = generate_collection(GenOptions("inference", str(folder / "megatron_vllm.sh"), verl_root=first.options.verl_root,
                                           force=True))
    assert Path(again.new_path).read_bytes() == kept
