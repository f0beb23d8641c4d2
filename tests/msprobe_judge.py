"""Ask mindstudio-probe itself whether each config file is valid (run in a subprocess by the tests).

Usage: python msprobe_judge.py CONFIG.json...  -> one line per config on stdout:
    RLPATCH-VERDICT {"path": ..., "valid": true|false, "error": "..."}

msprobe's verdict for a config is what a run meets first: `PrecisionDebugger(config_path=...)`
(every field and cross-field check), then msprobe's own check of the dump directory, which it runs
before creating it at the first dumped step (`check_path_before_create`: length and characters).

`PrecisionDebugger` is a per-process singleton; between configs the instance is dropped from both
the base class and the PyTorch class so the next construction validates from scratch. The tests
prove this reset is reliable by judging a sample in fresh processes too and comparing.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

MARKER = "RLPATCH-VERDICT "


def main(paths: list[str]) -> None:
    with contextlib.redirect_stdout(io.StringIO()):  # msprobe prints its log lines to stdout
        from msprobe.core.common.file_utils import check_path_before_create
        from msprobe.core.dump.debugger.precision_debugger import BasePrecisionDebugger
        from msprobe.pytorch import PrecisionDebugger
    for path in paths:
        with contextlib.redirect_stdout(io.StringIO()):
            verdict = judge(path, PrecisionDebugger, BasePrecisionDebugger, check_path_before_create)
        print(MARKER + json.dumps({"path": path, **verdict}), flush=True)


def judge(path: str, debugger: type, base: type, check_dump_dir: object) -> dict[str, object]:
    base._instance = None  # type: ignore[attr-defined]
    debugger._instance = None  # type: ignore[attr-defined]
    try:
        instance = debugger(config_path=path)  # type: ignore[operator]
        check_dump_dir(instance.config.dump_path)  # type: ignore[operator]
    except BaseException as err:  # noqa: BLE001 - msprobe raises plain Exception, ValueError, SystemExit...
        return {"valid": False, "error": f"{type(err).__name__}: {err}"[:300]}
    finally:
        base._instance = None  # type: ignore[attr-defined]
        debugger._instance = None  # type: ignore[attr-defined]
    return {"valid": True, "error": ""}


if __name__ == "__main__":
    main(sys.argv[1:])
