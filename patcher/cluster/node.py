"""What runs inside the Ray task on each node: the local command, through the CLI, and who ran it.

The command line is the entry point's in-process runner (`rlpatch.cli.capture`), handed down by the
entry itself (`api.COMMAND_LINE`) and sent with the task: this wing never imports the entry point.

This module is shipped to every node with `runtime_env` `py_modules`, and the task is pickled by
reference to it, so each node runs the checker the driver has, not a stale rlpatch of its own. It
needs only rlpatch's own requirements on the node; the trees are found there (`find_spec` in the
node's interpreter and environment), never from the driver's paths.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
from typing import Any, Callable

CommandLine = Callable[[list[str]], tuple[int, str, str]]
"""`rlpatch ARGV` run in this process: (exit code, stdout, stderr), as a subprocess would give them."""


def run_command(command_line: CommandLine, argv: list[str]) -> dict[str, Any]:
    """Run `rlpatch ARGV` on this node and return its exit code, parsed JSON output and identity."""
    import rlpatch

    code, out, err = command_line(argv)
    try:
        result: Any = json.loads(out) if out.strip() else None
    except ValueError:
        result = None
    return {**identity(), "rlpatch": rlpatch.__version__, "rlpatch_path": os.path.dirname(rlpatch.__file__),
            "exit_code": code, "result": result, "stdout": "" if result is not None else out, "stderr": err}


def identity() -> dict[str, str]:
    """Hostname, IP, node id, interpreter and versions of the node this runs on."""
    import ray

    return {
        "hostname": socket.gethostname(),
        "ip": ray.util.get_node_ip_address(),
        "node_id": ray.get_runtime_context().get_node_id(),
        "executable": sys.executable,
        "python": platform.python_version(),
        "ray": ray.__version__,
    }


def call_pinned(function: Callable[..., Any], arguments: tuple[Any, ...]) -> dict[str, Any]:
    """Run `function(*arguments)` on this node; its value and who ran it (the driver checks the node id)."""
    return {"identity": identity(), "value": function(*arguments)}
