"""The registry lists every rule module once, and each defines one documented rule."""

from __future__ import annotations

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
        assert result.stdout.startswith(f"{rule.id} (") and "Good (patched):" in result.stdout
        assert "Bad (refused" in result.stdout and len(result.stdout.splitlines()) > 15
