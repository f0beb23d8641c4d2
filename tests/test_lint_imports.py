"""`rlpatch lint` stays light: it must never import libcst or a patch rule."""

from __future__ import annotations

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
