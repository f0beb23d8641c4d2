"""Cut one request's rows out of a training and an inference tensor dump into a msprobe-format pair.

Run as a script in the interpreter that has msprobe and torch (`<python> slicing.py SPEC.json`), or
called in-process when that interpreter is rlpatch's own (no second torch start-up per pair); it
imports only the standard library at module level. SPEC names
each side's dump.json, where to write the cut copy, and the rows:
- training (`token_dim` 1, FSDP: `[batch, tokens, ...]`; 0, Megatron: `[tokens, batch, ...]`): the
  request's positions are `batch_index` and `[start, start + tokens)` along the token dim, and a
  tensor is cut when its batch and token dims have the micro-batch's sizes (`batch`, `length`);
- inference (`[step_tokens, ...]`): rows `[offset, offset + tokens)` of every tensor whose dim 0 is
  the step's token count; with `shards` (rollout TP > 1 against full training tensors) the sharded
  outputs are first rebuilt from the TP ranks' dumps (`rlpatch.dumps.tp`'s rules, passed in SPEC).
A cut tensor is saved as msprobe saves it (the tensor itself, `torch.save`) with its statistics
recomputed as msprobe 26.2.0 computes them (`PytorchDataProcessor.get_stat_info`: max, min, and for
floating tensors other than float64 mean and norm, in the tensor's own dtype). A tensor without a
token dimension of the step's size is not cut: its entry becomes null in the cut dump.json (msprobe
compares nothing for it) and its name is reported in the answer, never silently dropped.
The answer, one JSON object on stdout: {"train": path, "infer": path, "unsliced": [...], "not_compared": [...]}.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
from typing import Any

TENSOR_DIR = "dump_tensor_data"


def _torch() -> Any:
    """torch of the interpreter msprobe runs in: never a dependency of rlpatch (it comes with msprobe's env)."""
    return importlib.import_module("torch")


def _stats(tensor: Any) -> dict[str, Any]:
    """msprobe 26.2.0's statistics of a tensor (get_stat_info, low precision)."""
    torch = _torch()

    if not tensor.numel():
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    if tensor.dtype == torch.bool:
        return {"Max": bool(torch.any(tensor)), "Min": bool(torch.all(tensor)), "Mean": None, "Norm": None}
    found: dict[str, Any] = {"Max": torch.max(tensor).item(), "Min": torch.min(tensor).item(), "Mean": None,
                             "Norm": None}
    if tensor.is_floating_point() and tensor.dtype != torch.float64:
        found["Mean"] = torch.mean(tensor).item()
        found["Norm"] = torch.norm(tensor).item()
    return found


def _leaves(node: Any, path: str) -> Any:
    """(container, key, leaf, name) of every tensor entry (a dict with a data_name) under node."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict) and isinstance(value.get("data_name"), str):
                yield node, key, value, f"{path}.{key}"
            else:
                yield from _leaves(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            if isinstance(value, dict) and isinstance(value.get("data_name"), str):
                yield node, index, value, f"{path}.{index}"
            else:
                yield from _leaves(value, f"{path}.{index}")


def _load(folder: str, data_name: str) -> Any:
    torch = _torch()

    return torch.load(os.path.join(folder, TENSOR_DIR, data_name), map_location="cpu", weights_only=True)


def _cut_train(tensor: Any, rows: dict[str, Any]) -> Any | None:
    dim = rows["token_dim"]
    other = 1 - dim
    if tensor.dim() < 2 or tensor.shape[dim] != rows["length"] or tensor.shape[other] != rows["batch"]:
        return None
    if tensor.dim() == 4 and tensor.shape[-1] == tensor.shape[-2] == rows["length"]:
        return None  # eager attention's weights [batch, heads, tokens, tokens]: heads may equal the token count
    start = rows["start"]
    picked = tensor.select(other, rows["batch_index"])
    return picked.narrow(0, start, rows["tokens"]).clone()


def _cut_infer(tensor: Any, rows: dict[str, Any]) -> Any | None:
    if tensor.dim() < 1 or tensor.shape[0] != rows["step_tokens"]:
        return None
    return tensor.narrow(0, rows["offset"], rows["tokens"]).clone()


def _write_side(dump_json: str, out: str, cut, rebuild=None) -> tuple[str, list[str], list[str]]:
    """Write the cut copy of one dump into `out`; its path, the entries not cut, those not compared."""
    torch = _torch()

    with open(dump_json, encoding="utf-8") as handle:
        document = json.load(handle)
    source = os.path.dirname(os.path.abspath(dump_json))
    os.makedirs(os.path.join(out, TENSOR_DIR), exist_ok=True)
    unsliced: list[str] = []
    not_compared: list[str] = []
    for container, key, leaf, name in list(_leaves(document.get("data", {}), "")):
        label = name.lstrip(".")
        tensor = _load(source, leaf["data_name"])
        if ".parameters." in f"{label}.":  # weights have no token rows: the same in every request's pair
            why = "" if rebuild is None else rebuild(label, leaf["data_name"], tensor)[1]
            if why:
                container[key] = None
                not_compared.append(f"{label}: {why}")
            else:
                shutil.copyfile(os.path.join(source, TENSOR_DIR, leaf["data_name"]),
                                os.path.join(out, TENSOR_DIR, leaf["data_name"]))
            continue
        if rebuild is not None:
            tensor, why = rebuild(label, leaf["data_name"], tensor)
            if tensor is None:
                container[key] = None
                not_compared.append(f"{label}: {why}")
                continue
        piece = cut(tensor)
        if piece is None:
            container[key] = None
            unsliced.append(f"{label} {list(tensor.shape)}")
            continue
        torch.save(piece, os.path.join(out, TENSOR_DIR, leaf["data_name"]))
        leaf.update(_stats(piece))
        leaf["shape"] = list(piece.shape)
        leaf.pop("md5", None)
    if isinstance(document.get("dump_data_dir"), str):
        document["dump_data_dir"] = os.path.join(os.path.abspath(out), TENSOR_DIR)
    stack = os.path.join(source, "stack.json")
    if os.path.isfile(stack):
        shutil.copyfile(stack, os.path.join(out, "stack.json"))
    path = os.path.join(out, "dump.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
    return path, unsliced, not_compared


def _rebuilder() -> Any:
    """tp.Rebuilder: from the package in rlpatch's interpreter, from beside this script in another."""
    try:
        from rlpatch.dumps.tp import Rebuilder
    except ImportError:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        return importlib.import_module("tp").Rebuilder
    return Rebuilder


def cut(spec: dict[str, Any]) -> dict[str, Any]:
    """Write both cut sides; what was written and what was not cut."""
    train_rows, infer_rows = spec["train_rows"], spec["infer_rows"]
    train, train_unsliced, _ = _write_side(spec["train"], os.path.join(spec["out"], "train"),
                                           lambda t: _cut_train(t, train_rows))
    rebuild = None
    if spec.get("shards"):
        rebuild = _rebuilder()(spec["shards"], spec["train"]).rebuild
    infer, infer_unsliced, not_compared = _write_side(spec["infer"], os.path.join(spec["out"], "infer"),
                                                      lambda t: _cut_infer(t, infer_rows), rebuild)
    return {"train": train, "infer": infer, "unsliced": [f"train {n}" for n in train_unsliced]
            + [f"infer {n}" for n in infer_unsliced], "not_compared": not_compared}


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    sys.stdout.write(json.dumps(cut(spec)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
