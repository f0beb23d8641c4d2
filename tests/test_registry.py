"""The registry lists every rule module once, and each defines one documented rule."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import run_cli

from rlpatch import registry, rules

RULES_DIR = Path(rules.__file__).parent


def test_every_rule_module_is_registered_once():
    on_disk = sorted(p.stem for p in RULES_DIR.glob("*.py") if not p.stem.startswith("_"))
    listed = list(rules.PATCH_RULE_MODULES) + list(rules.LINT_RULE_MODULES)
    assert sorted(listed) == on_disk
    assert len(set(listed)) == len(listed)


def test_patch_rules_have_ids_docs_and_files():
    ids = [rule.id for rule in registry.patch_rules()]
    assert len(set(ids)) == len(ids)
    for rule in registry.patch_rules():
        assert rule.summary(), rule.id
        assert sys.modules[type(rule).__module__].__doc__, rule.id
        assert rule.files and rule.package in ("verl", "sglang", "vllm_ascend")


def test_rules_command_lists_every_rule():
    result = run_cli("rules")
    assert result.exit_code == 0
    for rule in registry.patch_rules():
        assert rule.id in result.stdout


def test_help_imports_no_patch_engine():
    code = "import sys; from rlpatch.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\nprint('libcst' in sys.modules, 'rlpatch.patch.engine' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False False"


def test_rule_command_documents_every_patch_rule():
    for rule in registry.patch_rules():
        result = run_cli("rule", rule.id)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.startswith(f"{rule.id} (") and "\nPatched:\n" in result.stdout
        assert "\nRefused (the anchor is not there):\n" in result.stdout and len(result.stdout.splitlines()) > 15


def test_generated_mode_table_is_current():
    """`rules/_lint_modes.py` is written from the rule classes' `modes`; it must say what they say now."""
    from rlpatch.rules.__main__ import REGENERATE, TABLE_PATH, table_text

    assert Path(TABLE_PATH).read_text(encoding="utf-8") == table_text(), f"{TABLE_PATH} is stale: run `{REGENERATE}`"


def test_only_lint_rules_are_found_by_name_and_only_patch_rules_are_listed():
    """Lint rules are the `rlNNN_*` modules of the folder; the patch rules' list (their order) names
    every other module, and no lint rule."""
    on_disk = {p.stem for p in RULES_DIR.glob("*.py") if not p.stem.startswith("_")}
    assert set(rules.LINT_RULE_MODULES) == {name for name in on_disk if name[:2] == "rl" and name[2:5].isdigit()}
    assert set(rules.PATCH_RULE_MODULES) == on_disk - set(rules.LINT_RULE_MODULES)
    assert list(rules.LINT_RULE_MODULES) == sorted(rules.LINT_RULE_MODULES)


def test_lint_rule_table_agrees_with_the_rule_classes():
    """`rules.LINT_RULE_MODES` (what `rlpatch lint` imports for a run's mode) and the code taken
    from a module's name must say what the classes say; a rule that checks whole files must check
    every mode, because a lint imports the other rules only for the modes of its runs."""
    from rlpatch.lint.rule import ALL_MODES, LintRule

    for name, module in zip(rules.LINT_RULE_MODULES, rules.load(rules.LINT_RULE_MODULES), strict=True):
        cls = registry._rule_class(module, LintRule)
        assert rules.lint_code(name) == cls.code, name
        assert rules.LINT_RULE_MODES.get(name, ALL_MODES) == cls.modes, name
        if name in rules.LINT_RULE_MODES:
            assert cls.check_file is LintRule.check_file, f"{name} checks files but not every mode"
    assert registry.lint_rule_codes() == tuple(cls.code for cls in registry.lint_rule_classes())


def test_a_lint_imports_only_the_rules_its_runs_need(tmp_path):
    code = ("import sys\nfrom rlpatch.cli import main\ntry:\n    main(['lint', '--no-config', sys.argv[1]])\n"
            "except SystemExit:\n    pass\nprint(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('rlpatch.rules.')\n"
            "             and not m.startswith('rlpatch.rules._')))")

    def loaded(script: Path) -> set[str]:
        out = subprocess.run([sys.executable, "-c", code, str(script)], capture_output=True, text=True, check=True).stdout
        return set(ast.literal_eval(out.strip().splitlines()[-1]))

    def checking(mode: str) -> set[str]:
        return {name for name in rules.LINT_RULE_MODULES if mode in rules.LINT_RULE_MODES.get(name, {mode})}

    plain = tmp_path / "plain.sh"
    plain.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
    assert loaded(plain) == checking("none") == {n for n in rules.LINT_RULE_MODULES if n not in rules.LINT_RULE_MODES}
    consistency = Path(__file__).resolve().parent.parent / "fixtures" / "lint" / "consistency" / "fsdp_vllm.sh"
    assert loaded(consistency) == checking("consistency")
