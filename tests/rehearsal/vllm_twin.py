"""A vLLM-named twin of a Hugging Face Qwen2 model, for the rehearsal's inference side (CPU).

vLLM (and vLLM-Ascend) cannot run here: no NPU, no CUDA. What the consistency check compares is the
module tree msprobe hooks, so the twin has vLLM's names and classes for Qwen2
(`model.embed_tokens` VocabParallelEmbedding, `model.layers.N.self_attn.qkv_proj` QKVParallelLinear,
`o_proj` RowParallelLinear, `mlp.gate_up_proj` MergedColumnParallelLinear, `down_proj`, `act_fn`
SiluAndMul, `input_layernorm`/`post_attention_layernorm`/`model.norm` RMSNorm, `logits_processor`),
vLLM's flattened token layout (`[tokens, hidden]`, no batch dimension) and logits for the last token of
the prefill only, while each module computes what the Hugging Face module computes from the same
weights (q/k/v and gate/up concatenated the way vLLM's weight loader stacks them). Written for these
tests; no vLLM code is copied.

A step packs several requests along dim 0, as vLLM's runner does: `forward_context(StepRows)` names
each request's rows (offset, tokens, tokens computed before the step), and attention is causal per
request over its own KV cache (a decode or a prefill chunk attends to what the request computed in
earlier steps), as vLLM's varlen attention backends do. Tensor parallelism as vLLM shards Qwen2 over
`tp_size` processes (torch.distributed, gloo): VocabParallelEmbedding holds 1/tp of the vocabulary
and all-reduces; QKVParallelLinear holds this rank's heads, `[q_r | k_r | v_r]`;
MergedColumnParallelLinear `[gate_r | up_r]`; RowParallelLinear (o_proj, down_proj) holds its input
columns and all-reduces inside forward (so its output is full); the LM head holds 1/tp of the
vocabulary and the logits are gathered. Two faults can be switched on: `batch` (the last layer's
post-attention norm adds the mean of every row of the step when it runs more than one request) and
`tp_shard` (TP rank 1 shifts its shard of the last layer's gate_up_proj output).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch import nn

BATCH_FAULT = 0.5  # the batch fault adds this times the mean of the step's rows
SHARD_FAULT = 0.25  # the TP-shard fault adds this to TP rank 1's gate_up_proj shard


@dataclass
class StepRows:
    """One model step: (request id, first row, tokens, tokens computed before) per request, in row order."""

    rows: list[tuple[str, int, int, int]]
    kv_cache: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)


_STEP: list[StepRows] = []


@contextmanager
def forward_context(step: StepRows) -> Iterator[None]:
    """What vLLM's set_forward_context does for attention metadata: the step's rows, for every module."""
    _STEP.append(step)
    try:
        yield
    finally:
        _STEP.pop()


def current_step() -> StepRows:
    return _STEP[-1]


@dataclass(frozen=True)
class TensorParallel:
    rank: int = 0
    size: int = 1

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum over the TP group (accumulated in float32, rounded once to the tensor's dtype)."""
        if self.size == 1:
            return tensor
        total = tensor.float()
        torch.distributed.all_reduce(total)
        return total.to(tensor.dtype)

    def all_gather_last(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.size == 1:
            return tensor
        parts = [torch.empty_like(tensor) for _ in range(self.size)]
        torch.distributed.all_gather(parts, tensor.contiguous())
        return torch.cat(parts, dim=-1)

    def rows(self, total: int) -> slice:
        """This rank's contiguous share of `total` (heads, vocabulary rows, intermediate units)."""
        share = total // self.size
        return slice(self.rank * share, (self.rank + 1) * share)


NO_TP = TensorParallel()  # TP 1: the whole model in one process


class VocabParallelEmbedding(nn.Embedding):
    """This rank's rows of the vocabulary; ids outside it give zeros, the TP ranks' sum is the full lookup."""

    def __init__(self, vocab: int, hidden: int, tp: TensorParallel) -> None:
        super().__init__(vocab // tp.size, hidden)
        self.tp, self.first = tp, tp.rows(vocab).start

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        local = input_ids - self.first
        inside = (local >= 0) & (local < self.num_embeddings)
        found = nn.functional.embedding(local.clamp(0, self.num_embeddings - 1), self.weight)
        return self.tp.all_reduce(found * inside[:, None].to(found.dtype))


class QKVParallelLinear(nn.Linear):
    pass


class RowParallelLinear(nn.Linear):
    """This rank's input columns; the partial products are all-reduced inside forward (reduce_results)."""

    def __init__(self, inputs: int, outputs: int, tp: TensorParallel, bias: bool = False) -> None:
        super().__init__(inputs // tp.size, outputs, bias=bias)
        self.tp = tp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tp.all_reduce(super().forward(x))


class MergedColumnParallelLinear(nn.Linear):
    def __init__(self, inputs: int, outputs: int, bias: bool = False) -> None:
        super().__init__(inputs, outputs, bias=bias)
        self.fault_shift = 0.0  # the TP-shard fault: added to this rank's output shard

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        return out + self.fault_shift if self.fault_shift else out


class ParallelLMHead(nn.Module):
    """Holds the LM head weight; vLLM never calls it as a module (the logits processor does the matmul)."""

    def __init__(self, vocab: int, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab, hidden))


class LogitsProcessor(nn.Module):
    def __init__(self, tp: TensorParallel) -> None:
        super().__init__()
        self.tp = tp

    def forward(self, lm_head: ParallelLMHead, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.tp.all_gather_last(hidden_states @ lm_head.weight.t())


class SiluAndMul(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return nn.functional.silu(gate) * up


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps
        self.batch_fault = False  # the batch fault: output depends on the other requests of the step

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)
        out = self.weight * (x.float() * torch.rsqrt(variance + self.eps)).to(x.dtype)
        if self.batch_fault and len(current_step().rows) > 1:  # a reduction over every packed row
            out = out + BATCH_FAULT * out.mean(dim=0, keepdim=True)
        return out


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim), False)

    def forward(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = (t[:, None, :].to(q.dtype) for t in (emb.cos(), emb.sin()))  # [tokens, 1, head_dim]

        def rotate(x: torch.Tensor) -> torch.Tensor:
            half = x.shape[-1] // 2
            return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

        return q * cos + rotate(q) * sin, k * cos + rotate(k) * sin


class Attention(nn.Module):
    """Causal attention per request over its KV cache (vLLM's varlen/paged backends), rows packed along dim 0."""

    def __init__(self, heads: int, kv_heads: int, head_dim: int, layer: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.layer = heads, kv_heads, head_dim, layer

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        step = current_step()
        outputs = []
        for request_id, offset, tokens, computed in step.rows:
            rows = slice(offset, offset + tokens)
            cached = step.kv_cache.get((self.layer, request_id))
            keys = k[rows] if cached is None else torch.cat([cached[0], k[rows]])
            values = v[rows] if cached is None else torch.cat([cached[1], v[rows]])
            if keys.shape[0] != computed + tokens:
                raise ValueError(f"{request_id}: {keys.shape[0]} cached+new keys, expected {computed + tokens}")
            step.kv_cache[(self.layer, request_id)] = (keys, values)
            outputs.append(self._attend(q[rows], keys, values, computed))
        out = torch.cat(outputs)
        return out.reshape(out.shape[0], -1)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, computed: int) -> torch.Tensor:
        repeat = self.heads // self.kv_heads
        q, k, v = (t.transpose(0, 1) for t in (q, k.repeat_interleave(repeat, 1), v.repeat_interleave(repeat, 1)))
        if computed == 0:  # a whole prefill: plain causal
            out = nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
        else:  # query i sits at position computed + i and sees keys 0 .. computed + i
            visible = torch.arange(k.shape[1])[None, :] <= (computed + torch.arange(q.shape[1]))[:, None]
            out = nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=visible)[0]
        return out.transpose(0, 1)


class Qwen2Attention(nn.Module):
    def __init__(self, config: dict[str, Any], tp: TensorParallel, layer: int) -> None:
        super().__init__()
        hidden = config["hidden_size"]
        heads, kv_heads = config["num_attention_heads"] // tp.size, config["num_key_value_heads"] // tp.size
        self.head_dim = hidden // config["num_attention_heads"]
        self.q_size, self.kv_size = heads * self.head_dim, kv_heads * self.head_dim
        self.qkv_proj = QKVParallelLinear(hidden, self.q_size + 2 * self.kv_size, bias=True)
        self.o_proj = RowParallelLinear(self.q_size * tp.size, hidden, tp, bias=False)
        self.rotary_emb = RotaryEmbedding(self.head_dim, float(config.get("rope_theta", 10000.0)))
        self.attn = Attention(heads, kv_heads, self.head_dim, layer)

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv_proj(hidden_states).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        tokens = hidden_states.shape[0]
        q, k = self.rotary_emb(positions, q.view(tokens, -1, self.head_dim), k.view(tokens, -1, self.head_dim))
        return self.o_proj(self.attn(q, k, v.view(tokens, -1, self.head_dim)))


class Qwen2MLP(nn.Module):
    def __init__(self, config: dict[str, Any], tp: TensorParallel) -> None:
        super().__init__()
        hidden, inner = config["hidden_size"], config["intermediate_size"]
        self.gate_up_proj = MergedColumnParallelLinear(hidden, 2 * inner // tp.size, bias=False)
        self.down_proj = RowParallelLinear(inner, hidden, tp, bias=False)
        self.act_fn = SiluAndMul()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_up_proj(x)))


class Qwen2DecoderLayer(nn.Module):
    def __init__(self, config: dict[str, Any], tp: TensorParallel, layer: int) -> None:
        super().__init__()
        eps = float(config.get("rms_norm_eps", 1e-6))
        self.self_attn = Qwen2Attention(config, tp, layer)
        self.mlp = Qwen2MLP(config, tp)
        self.input_layernorm = RMSNorm(config["hidden_size"], eps)
        self.post_attention_layernorm = RMSNorm(config["hidden_size"], eps)

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = hidden_states + self.self_attn(positions, self.input_layernorm(hidden_states))
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class Qwen2Model(nn.Module):
    def __init__(self, config: dict[str, Any], tp: TensorParallel) -> None:
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(config["vocab_size"], config["hidden_size"], tp)
        self.layers = nn.ModuleList(Qwen2DecoderLayer(config, tp, n) for n in range(config["num_hidden_layers"]))
        self.norm = RMSNorm(config["hidden_size"], float(config.get("rms_norm_eps", 1e-6)))

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        hidden_states = self.embed_tokens(input_ids)
        for layer in self.layers:
            hidden_states = layer(positions, hidden_states)
        return self.norm(hidden_states)


class Qwen2ForCausalLM(nn.Module):
    def __init__(self, config: dict[str, Any], tp: TensorParallel) -> None:
        super().__init__()
        self.model = Qwen2Model(config, tp)
        self.lm_head = ParallelLMHead(config["vocab_size"] // tp.size, config["hidden_size"])
        self.logits_processor = LogitsProcessor(tp)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids, positions)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.logits_processor(self.lm_head, hidden_states)


def _shard(name: str, tensor: torch.Tensor, state: dict[str, torch.Tensor], config: dict[str, Any],
           tp: TensorParallel) -> tuple[str, torch.Tensor] | None:
    """The twin's parameter for one Hugging Face tensor, cut for this TP rank as vLLM's loaders cut it."""
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config["hidden_size"] // heads
    if ".self_attn.k_proj." in name or ".self_attn.v_proj." in name or ".mlp.up_proj." in name:
        return None  # stacked with q_proj / gate_proj
    if ".self_attn.q_proj." in name:  # QKVParallelLinear: this rank's q heads, then its k and v heads
        stem = name.replace(".q_proj.", ".{}.")
        q_rows, kv_rows = tp.rows(heads), tp.rows(kv_heads)
        parts = [state[stem.format("q_proj")].unflatten(0, (heads, head_dim))[q_rows].flatten(0, 1)]
        parts += [state[stem.format(part)].unflatten(0, (kv_heads, head_dim))[kv_rows].flatten(0, 1)
                  for part in ("k_proj", "v_proj")]
        return name.replace("q_proj", "qkv_proj"), torch.cat(parts)
    if ".mlp.gate_proj." in name:  # MergedColumnParallelLinear: this rank's gate rows, then its up rows
        stem = name.replace(".gate_proj.", ".{}.")
        rows = tp.rows(config["intermediate_size"])
        return name.replace("gate_proj", "gate_up_proj"), torch.cat(
            [state[stem.format(part)][rows] for part in ("gate_proj", "up_proj")])
    if ".self_attn.o_proj." in name or ".mlp.down_proj." in name:  # RowParallelLinear: this rank's columns
        return name, tensor[:, tp.rows(tensor.shape[1])]
    if name in ("model.embed_tokens.weight", "lm_head.weight"):  # vocabulary-parallel
        return name, tensor[tp.rows(tensor.shape[0])]
    return name, tensor


def from_hf_state_dict(config: dict[str, Any], state: dict[str, torch.Tensor],
                       tp: TensorParallel = NO_TP) -> Qwen2ForCausalLM:
    """The twin (this TP rank's shards), loaded from a Hugging Face Qwen2 state dict as vLLM's loader loads it."""
    model = Qwen2ForCausalLM(config, tp)
    if "lm_head.weight" not in state:  # tied embeddings
        state = {**state, "lm_head.weight": state["model.embed_tokens.weight"]}
    loaded = dict(filter(None, (_shard(name, tensor, state, config, tp) for name, tensor in state.items())))
    missing, unexpected = model.load_state_dict(loaded, strict=False)
    real_missing = [name for name in missing if not name.endswith("inv_freq")]
    if real_missing or unexpected:
        raise ValueError(f"twin weights: missing {real_missing}, unexpected {unexpected}")
    return model


def inject_fault(model: Qwen2ForCausalLM, fault: str | None, tp: TensorParallel) -> None:
    """Switch on one of the rehearsal's faults in the last decoder layer."""
    last = model.model.layers[-1]
    if fault == "batch":
        last.post_attention_layernorm.batch_fault = True
    elif fault == "tp_shard" and tp.rank == 1:
        last.mlp.gate_up_proj.fault_shift = SHARD_FAULT
    elif fault not in (None, "tp_shard"):
        raise ValueError(f"unknown fault {fault!r}")
