"""How large a consistency dump will be, said before the run, and whether the dump folder has room.

The estimate is for `task: tensor` at `level: L0`: msprobe saves every module's inputs and outputs.
Per token and decoder layer of a dense model that is about 17*H + 2*Q + 2*KV + 5*I elements
(H hidden, Q = heads*head_dim, KV = kv_heads*head_dim, I intermediate: the layer, its norms,
attention, q/k/v/o projections, MLP, gate/up/down and the activation), plus the embedding, the
final norm and lm_head (H + V). The numbers come from the HF `config.json` of the model folder when
the model path is a folder on this machine; otherwise the size is unknown and gen says why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import NamedTuple

from rlpatch.errors import InputError
from rlpatch.gen.plan import Facts, variable_names

MODEL_PATH = "actor_rollout_ref.model.path"
_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}


def human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def model_config(path: str | None) -> tuple[dict | None, str]:
    """(the text model's config, where it came from) or (None, why it is unknown)."""
    if not path:
        return None, "the script sets no model path"
    folder = os.path.expanduser(path)
    if not os.path.isdir(folder):
        return None, f"the model path {path} is not a folder on this machine (a hub id, or a path on the cluster)"
    config_path = os.path.join(folder, "config.json")
    try:
        with open(config_path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as err:
        return None, f"{config_path} cannot be read ({err})"
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    return text, config_path


def unknown_path(facts: Facts) -> str:
    """Why the model path is unknown: the variable it depends on that gen does not know, and how to give it."""
    setting = facts.setting(MODEL_PATH)
    override = setting.override
    unknown = [piece for piece in override.arg.word if piece.text is None] if override is not None else []
    for piece in unknown:
        names = variable_names(piece)
        root = re.fullmatch(r"\$\{?(\w+)\}?", (piece.desc or "").strip())
        if root is not None:
            name = root.group(1)
            holders = [n for n in names if n != name]
            through = f" ({', '.join(holders)})" if holders else ""
            return (f"the model path{through} depends on ${name}, which gen does not know (the script's own "
                    f"environment is not read): pass --env {name}=...")
        if names:
            return f"the model path depends on {piece.desc or 'a value known only at run time'}: pass --env {names[0]}=..."
    return f"the model path is not known statically ({setting.desc or '?'})"


class Shape(NamedTuple):
    """The figures of a config.json both estimates read."""

    hidden: int
    layers: int
    q: int  # heads * head_dim
    kv: int  # kv_heads * head_dim
    vocab: int


def shape_of(config: dict) -> Shape | None:
    try:
        hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or hidden // heads)
        return Shape(hidden, layers, heads * head_dim, kv_heads * head_dim, int(config["vocab_size"]))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def _int(config: dict, key: str) -> int | None:
    try:
        return int(config[key])
    except (KeyError, TypeError, ValueError):
        return None


def per_token_elements(config: dict) -> tuple[int, str] | None:
    """Elements msprobe L0 saves per token (all layers), and the figures used; None without them."""
    shape, inter = shape_of(config), _int(config, "intermediate_size")
    if shape is None or inter is None:
        return None
    per_layer = 17 * shape.hidden + 2 * shape.q + 2 * shape.kv + 5 * inter
    total = shape.layers * per_layer + 4 * shape.hidden + shape.vocab
    return total, f"{shape.layers} layers, hidden {shape.hidden}, intermediate {inter}, vocab {shape.vocab}"


# One NPU device's memory: 64 GB on Atlas 800T A2 (910B) and per die on A3; a replica whose weights alone
# are larger cannot start on one card, whatever the batch.
CARD_BYTES = 64 * 1024**3


def weight_elements(config: dict) -> int | None:
    """The model's parameters from its config.json (dense or MoE layers, embeddings), None without them."""
    shape = shape_of(config)
    experts = _int(config, "num_experts") or _int(config, "n_routed_experts") or 0
    inter = _int(config, "moe_intermediate_size" if experts else "intermediate_size")
    if shape is None or inter is None:
        return None
    shared = _int(config, "shared_expert_intermediate_size") or 0
    attention = 2 * shape.hidden * shape.q + 2 * shape.hidden * shape.kv
    mlp = 3 * shape.hidden * inter * max(experts, 1) + 3 * shape.hidden * shared
    embeddings = shape.vocab * shape.hidden * (1 if config.get("tie_word_embeddings") else 2)
    return shape.layers * (attention + mlp) + embeddings


def refuse_replica_over_one_card(facts: Facts, fix: str) -> None:
    """Rollout TP 1 puts a whole replica on each card: refuse, with the numbers and `fix`, a model whose
    weights alone are larger than one card (nothing written)."""
    config, source = model_config(facts.value(MODEL_PATH))
    elements = weight_elements(config) if config is not None else None
    if elements is None or config is None:
        return
    width, dtype = dtype_bytes(config)
    if elements * width > CARD_BYTES:
        raise InputError(f"rollout TP 1 puts a whole model replica on each card, but the weights alone are about "
                         f"{human(elements * width)} ({elements / 1e9:.1f} B parameters from {source}, {dtype}), over "
                         f"one card's {human(CARD_BYTES)}: {fix}")


def dtype_bytes(config: dict) -> tuple[int, str]:
    name = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16").replace("torch.", "")
    return _BYTES.get(name, 2), name


def counted(count: int, noun: str) -> str:
    """`1 step`, `8 steps`: a DP of 1 is common on one card, and "1 steps" reads as a slip."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def nearest_existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def dump_size_notes(facts: Facts, request, requests: int | None, rollout_tp: int | None,
                    assumptions: list[str]) -> list[str]:
    """The notes gen prints before the run: size per dumped request, for the run, and free space.

    `requests` is how many requests the dumped step sends (each dumped once per side; None when the
    batch is unknown); the inference side counts `rollout_tp` times, as every TP rank holds the
    all-reduced outputs (decoder layers, norms, o_proj and down_proj outputs) in full."""
    task, level = request.task or "tensor", request.level or "L0"
    tokens = facts.int_or("data.max_prompt_length", 512) + 1  # the prompt and the one generated token
    if task != "tensor":
        return [f"dump size: task {task} saves statistics only (a few hundred bytes per tensor), no tensor data"]
    count = counted(requests, "request") if requests else "data.train_batch_size x rollout.n requests (not known statically)"
    path = facts.value(MODEL_PATH)
    config, source = model_config(path) if path or not facts.is_set(MODEL_PATH) else (None, unknown_path(facts))
    if config is None:
        return [f"dump size: unknown: {source}; with task tensor each request dumps every module's inputs and "
                f"outputs for up to {tokens} tokens on each side ({count} in this run)",
                free_space_note(request.dump_root, None)]
    per_token = per_token_elements(config)
    if per_token is None:
        return [f"dump size: unknown: {source} lacks hidden_size/num_hidden_layers/heads/intermediate_size/vocab_size"]
    elements, figures = per_token
    width, dtype = dtype_bytes(config)
    per_request = elements * tokens * width
    tp = max(rollout_tp or 1, 1)
    more = "" if level == "L0" else f" (level {level} also dumps API calls: more than this)"
    assumptions.append(f"dump size estimated from {source} for prompts of up to {tokens} tokens")
    head = (f"dump size (estimate, task tensor, level L0, dense model): about {human(per_request)} per request per "
            f"side: up to {tokens} tokens x {figures}, {dtype}")
    if not requests:
        return [f"{head}; this run dumps {count}{more}", free_space_note(request.dump_root, None)]
    total = per_request * requests * (1 + tp)
    counted_tp = f", the inference side {tp}x (each TP rank holds the all-reduced outputs)" if tp > 1 else ""
    notes = [f"{head}; this run dumps {count} on each side{counted_tp}: about {human(total)}{more}"]
    notes.append(free_space_note(request.dump_root, total))
    if "NOT enough room" in notes[-1]:
        notes.append("to dump less: fewer ranks (the msprobe configs' `rank`), fewer modules (`list`), shorter "
                     "prompts (data.max_prompt_length), or gen --minimal (one request per training rank)")
    return notes


def free_space_note(dump_root: str, needed: float | None) -> str:
    where = nearest_existing(dump_root)
    try:
        free = shutil.disk_usage(where).free
    except OSError as err:
        return f"disk: cannot read the free space at {where} ({err.strerror or err})"
    if needed is None:
        verdict = "compare it with the size of a few full forward passes of the model"
    else:
        verdict = "room for the estimate" if free >= needed else "NOT enough room for the estimate"
    return f"disk: {human(free)} free at {where} (this machine; the dumps go to {dump_root}): {verdict}"
