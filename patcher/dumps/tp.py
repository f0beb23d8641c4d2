"""The inference side of a request under rollout TP > 1, rebuilt for full training tensors (FSDP).

Imported by `slicing.py` in the target interpreter (standard library at module level, torch when a
tensor is rebuilt). Under vLLM's tensor parallelism, outputs that are all-reduced (decoder layers,
self_attn after o_proj, mlp after down_proj, norms, embeddings) are full on every TP rank: rank 0's
tensor is compared. Column-parallel tensors are shards, rebuilt from the TP ranks of one replica in
their layout:
- qkv_proj output, per rank `[q_r | k_r | v_r]`: the full tensor is `[q_0..q_n | k_0..k_n | v_0..v_n]`,
  with the q and k/v widths of the training dump's q_proj/k_proj/v_proj outputs of the same layer;
- gate_up_proj output and act_fn input, per rank `[gate_r | up_r]`: `[gate_0..gate_n | up_0..up_n]`;
- act_fn output, attention internals (`.attn.`, `rotary_emb`), o_proj and down_proj inputs: the ranks'
  heads / intermediate units concatenated on the last dim (3-D rotary q/k: on the heads dim).
A tensor of a sharded module that is the same on every rank (positions) is replicated: rank 0's; so is
a weight (norms); a weight split over the ranks is "sharded: not compared" (its activations are).
A shard whose layout needs sizes the training dump does not give is "sharded: not compared" with
the reason, never a divergence.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from typing import Any

TENSOR_DIR = "dump_tensor_data"


def _torch() -> Any:
    """torch of the interpreter msprobe runs in: never a dependency of rlpatch (it comes with msprobe's env)."""
    return importlib.import_module("torch")
SHARDED_MODULES = (".qkv_proj.", ".gate_up_proj.", ".act_fn.", ".attn.", ".rotary_emb.", ".o_proj.", ".down_proj.")
_LAYER = re.compile(r"layers\.(\d+)\.")
_PROJ = re.compile(r"layers\.(\d+)\..*?\.(q_proj|k_proj|v_proj|gate_proj|up_proj)\.[A-Za-z0-9_]+\.forward\.\d+$")


def layer_of(name: str) -> int | None:
    found = _LAYER.search(name)
    return int(found.group(1)) if found else None


def projection_widths(train_data: dict[str, Any]) -> dict[tuple[int, str], int]:
    """(layer, q_proj|k_proj|...) -> the last dim of that projection's output in the training dump."""
    widths: dict[tuple[int, str], int] = {}
    for name, entry in train_data.items():
        found = _PROJ.search(name)
        output = entry.get("output") if isinstance(entry, dict) else None
        if found is None or not isinstance(output, list) or not output or not isinstance(output[0], dict):
            continue
        shape = output[0].get("shape")
        if isinstance(shape, list) and shape:
            widths[(int(found.group(1)), found.group(2))] = int(shape[-1])
    return widths


def layout_of(label: str) -> str:
    """How a tensor of the inference dump is laid out over the TP ranks: full, qkv, gate_up or concat."""
    if ".parameters." in f"{label}.":
        return "weight"  # replicated (norms) or split over the ranks (projections, embeddings)
    if not any(part in label for part in SHARDED_MODULES):
        return "full"
    is_output = ".output." in label
    if ".qkv_proj." in label:
        return "qkv" if is_output else "full"
    if ".gate_up_proj." in label:
        return "gate_up" if is_output else "full"
    if ".act_fn." in label:
        return "concat" if is_output else "gate_up"
    if ".o_proj." in label or ".down_proj." in label:
        return "full" if is_output else "concat"
    return "concat"  # attention internals, rotary q/k (positions are replicated: caught as equal)


class Rebuilder:
    """Rebuild the TP=1 tensor of an inference dump entry from the dumps of one replica's TP ranks."""

    def __init__(self, shards: list[str], train_json: str) -> None:
        self.folders = [os.path.dirname(os.path.abspath(path)) for path in shards]
        with open(train_json, encoding="utf-8") as handle:
            data = json.load(handle).get("data", {})
        self.widths = projection_widths(data if isinstance(data, dict) else {})

    def _tensors(self, data_name: str, first: Any) -> list[Any]:
        torch = _torch()

        found = [first]
        for folder in self.folders[1:]:
            found.append(torch.load(os.path.join(folder, TENSOR_DIR, data_name), map_location="cpu", weights_only=True))
        return found

    def rebuild(self, label: str, data_name: str, tensor: Any) -> tuple[Any | None, str]:
        """(the full tensor, "") or (None, why it is not compared)."""
        torch = _torch()

        layout = layout_of(label)
        if layout == "full":
            return tensor, ""
        try:
            parts = self._tensors(data_name, tensor)
        except OSError as err:
            return None, f"sharded: not compared (a TP rank's file is unreadable: {err.strerror})"
        if any(p.shape != tensor.shape for p in parts):
            return None, "sharded: not compared (the TP ranks' shapes differ)"
        if all(p.equal(tensor) for p in parts[1:]):
            return tensor, ""  # replicated on every rank
        size = len(parts)
        if layout == "weight":
            return None, ("sharded: not compared (each TP rank holds its part of this weight; the activations it "
                          "gives are compared)")
        if layout == "concat":
            dim = 1 if ".rotary_emb." in label and tensor.dim() == 3 else -1
            return torch.cat(parts, dim=dim), ""
        layer = layer_of(label)
        if layout == "gate_up":
            return torch.cat([half[kind] for kind in range(2) for half in (p.chunk(2, dim=-1) for p in parts)],
                             dim=-1), ""
        widths = [self.widths.get((layer, name)) if layer is not None else None for name in ("q_proj", "k_proj", "v_proj")]
        if None in widths:
            return None, ("sharded: not compared (no q_proj/k_proj/v_proj output in the training dump for layer "
                          f"{layer}: the q/k/v widths that split qkv_proj are unknown)")
        split = [width // size for width in widths if width is not None]
        if sum(split) != tensor.shape[-1]:
            return None, (f"sharded: not compared (qkv_proj's {tensor.shape[-1]} columns per rank are not the "
                          f"training q/k/v widths {widths} over {size} ranks)")
        pieces = [p.split(split, dim=-1) for p in parts]
        return torch.cat([piece[kind] for kind in range(3) for piece in pieces], dim=-1), ""
