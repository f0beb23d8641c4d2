"""`rlpatch lint` stays light: it never imports libcst or a patch rule; neither lint nor the patch
commands (without `--ray`) import ray, msprobe or torch."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap


def test_lint_does_not_import_libcst(tmp_path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
    code = textwrap.dedent(f"""
        import sys
        from rlpatch.cli import main
        try:
            main(["lint", {str(script)!r}])
        except SystemExit:
            pass
        bad = sorted(m for m in sys.modules if m == "libcst" or m.startswith("libcst.")
                     or m == "rlpatch.patch" or m.startswith("rlpatch.patch."))
        print("BAD", bad)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "BAD []" in out.stdout, out.stdout + out.stderr


def _modules_after(argv: list[str]) -> str:
    """Run `rlpatch ARGV` in a fresh interpreter and list the heavy modules it imported."""
    code = textwrap.dedent(f"""
        import sys
        from rlpatch.cli import main
        try:
            main({argv!r})
        except SystemExit:
            pass
        heavy = ("ray", "msprobe", "torch", "rlpatch.cluster.driver")
        print("BAD", sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return out.stdout + out.stderr


def test_lint_and_patch_paths_never_import_ray(tmp_path) -> None:
    import shutil
    from pathlib import Path

    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
    tree = tmp_path / "tree"
    shutil.copytree(Path(__file__).resolve().parent.parent / "fixtures" / "verl_engine", tree)
    for argv in (["lint", str(script)], ["detect", str(script)], ["verify", "--verl-root", str(tree)],
                 ["apply", "--verl-root", str(tree)], ["status", "--verl-root", str(tree)],
                 ["revert", "--verl-root", str(tree)], ["--help"]):
        report = _modules_after(argv)
        assert "BAD []" in report, (argv, report)


def test_gen_help_imports_the_linter_api_only() -> None:
    """`gen` builds its command from the linter's api at import time: that stays light (no rule,
    no patch engine, no libcst, no torch)."""
    code = textwrap.dedent("""
        import sys
        from rlpatch.cli import main
        try:
            main(["gen", "--help"])
        except SystemExit:
            pass
        heavy = ("libcst", "torch", "ray", "rlpatch.patch", "rlpatch.rules")
        print("API", "rlpatch.lint.api" in sys.modules)
        print("BAD", sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "API True" in out.stdout and "BAD []" in out.stdout, out.stdout + out.stderr


def _loaded_by_a_plain_lint(tmp_path, modules: tuple[str, ...]) -> list[str]:
    """Which of `modules` a lint of a script without a dump (a pre-commit hook's common case) loads."""
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
    code = textwrap.dedent(f"""
        import sys
        from rlpatch.cli import main
        try:
            main(["lint", "--no-config", {str(script)!r}])
        except SystemExit:
            pass
        print("LOADED", sorted(m for m in sys.modules if m in {modules!r}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "LOADED " in out.stdout, out.stdout + out.stderr
    return ast.literal_eval(out.stdout.split("LOADED ", 1)[1].splitlines()[0])


def test_lint_start_leaves_the_wheel_cache_and_the_probes_unloaded(tmp_path) -> None:
    """`rlpatch.upstream.api` names its heavier parts lazily: a lint of a script without a dump (a
    pre-commit hook's common case) loads `Version`, not the wheel cache, the target probe or zipfile."""
    heavy = ("rlpatch.upstream.wheelcache", "rlpatch.upstream.target_probe", "rlpatch.upstream.targets", "zipfile")
    assert _loaded_by_a_plain_lint(tmp_path, heavy) == []


def test_a_plain_lint_starts_without_click_or_the_writers(tmp_path) -> None:
    """The pre-commit hook's command line is read without click (`rlpatch.lint.quick_cli`), and a lint
    that writes no file loads neither the durable writes (tempfile) nor dataclasses; the schema
    family's cache and Hydra wait for a verl to check against."""
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=1\n")
    code = textwrap.dedent(f"""
        import sys
        from rlpatch.cli import main
        try:
            main(["lint", "--no-config", "--select", "RL0,RL1,RL2,RL4", {str(script)!r}])
        except SystemExit:
            pass
        heavy = ("click", "tempfile", "dataclasses", "hydra", "rlpatch.lint.schema_cache")
        print("BAD", sorted(m for m in sys.modules if m in heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "BAD []" in out.stdout, out.stdout + out.stderr


def test_a_lint_without_an_msprobe_config_never_loads_the_config_checker(tmp_path) -> None:
    """The RL5xx rules name their kinds of problem (`rlpatch.msprobe_config.api`: the enum and the
    references, both light) when they load; the checker, its records and the JSON reader wait for a
    script that names a config file that is there."""
    rules = ("rlpatch.rules.rl502_msprobe_config_value", "rlpatch.msprobe_config.api")
    heavy = ("rlpatch.msprobe_config.checker", "rlpatch.msprobe_config.schema", "rlpatch.msprobe_config.jsonpos")
    assert _loaded_by_a_plain_lint(tmp_path, rules + heavy) == sorted(rules)
