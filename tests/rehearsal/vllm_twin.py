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
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class VocabParallelEmbedding(nn.Embedding):
    pass


class QKVParallelLinear(nn.Linear):
    pass


class RowParallelLinear(nn.Linear):
    pass


class MergedColumnParallelLinear(nn.Linear):
    pass


class ParallelLMHead(nn.Module):
    """Holds the LM head weight; vLLM never calls it as a module (the logits processor does the matmul)."""

    def __init__(self, vocab: int, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab, hidden))


class LogitsProcessor(nn.Module):
    def forward(self, lm_head: ParallelLMHead, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states @ lm_head.weight.t()


class SiluAndMul(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return nn.functional.silu(gate) * up


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(variance + self.eps)).to(x.dtype)


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
    """Causal attention over one prefill (the paged attention backend in vLLM)."""

    def __init__(self, heads: int, kv_heads: int, head_dim: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        repeat = self.heads // self.kv_heads
        q, k, v = (t.transpose(0, 1) for t in (q, k.repeat_interleave(repeat, 1), v.repeat_interleave(repeat, 1)))
        out = nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
        return out.transpose(0, 1).reshape(out.shape[1], -1)


class Qwen2Attention(nn.Module):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        hidden, heads, kv_heads = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
        self.head_dim = hidden // heads
        self.q_size, self.kv_size = heads * self.head_dim, kv_heads * self.head_dim
        self.qkv_proj = QKVParallelLinear(hidden, self.q_size + 2 * self.kv_size, bias=True)
        self.o_proj = RowParallelLinear(self.q_size, hidden, bias=False)
        self.rotary_emb = RotaryEmbedding(self.head_dim, float(config.get("rope_theta", 10000.0)))
        self.attn = Attention(heads, kv_heads, self.head_dim)

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv_proj(hidden_states).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        tokens = hidden_states.shape[0]
        q, k = self.rotary_emb(positions, q.view(tokens, -1, self.head_dim), k.view(tokens, -1, self.head_dim))
        return self.o_proj(self.attn(q, k, v.view(tokens, -1, self.head_dim)))


class Qwen2MLP(nn.Module):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        hidden, inner = config["hidden_size"], config["intermediate_size"]
        self.gate_up_proj = MergedColumnParallelLinear(hidden, 2 * inner, bias=False)
        self.down_proj = RowParallelLinear(inner, hidden, bias=False)
        self.act_fn = SiluAndMul()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_up_proj(x)))


class Qwen2DecoderLayer(nn.Module):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        eps = float(config.get("rms_norm_eps", 1e-6))
        self.self_attn = Qwen2Attention(config)
        self.mlp = Qwen2MLP(config)
        self.input_layernorm = RMSNorm(config["hidden_size"], eps)
        self.post_attention_layernorm = RMSNorm(config["hidden_size"], eps)

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = hidden_states + self.self_attn(positions, self.input_layernorm(hidden_states))
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class Qwen2Model(nn.Module):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(config["vocab_size"], config["hidden_size"])
        self.layers = nn.ModuleList(Qwen2DecoderLayer(config) for _ in range(config["num_hidden_layers"]))
        self.norm = RMSNorm(config["hidden_size"], float(config.get("rms_norm_eps", 1e-6)))

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        hidden_states = self.embed_tokens(input_ids)
        for layer in self.layers:
            hidden_states = layer(positions, hidden_states)
        return self.norm(hidden_states)


class Qwen2ForCausalLM(nn.Module):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        self.model = Qwen2Model(config)
        self.lm_head = ParallelLMHead(config["vocab_size"], config["hidden_size"])
        self.logits_processor = LogitsProcessor()

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids, positions)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.logits_processor(self.lm_head, hidden_states)


def from_hf_state_dict(config: dict[str, Any], state: dict[str, torch.Tensor]) -> Qwen2ForCausalLM:
    """The twin, loaded from a Hugging Face Qwen2 state dict the way vLLM's loader stacks q/k/v and gate/up."""
    model = Qwen2ForCausalLM(config)
    loaded: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if ".self_attn.k_proj." in name or ".self_attn.v_proj." in name or ".mlp.up_proj." in name:
            continue
        if ".self_attn.q_proj." in name:
            stem = name.replace(".q_proj.", ".{}.")
            loaded[name.replace("q_proj", "qkv_proj")] = torch.cat(
                [state[stem.format(part)] for part in ("q_proj", "k_proj", "v_proj")])
        elif ".mlp.gate_proj." in name:
            stem = name.replace(".gate_proj.", ".{}.")
            loaded[name.replace("gate_proj", "gate_up_proj")] = torch.cat(
                [state[stem.format(part)] for part in ("gate_proj", "up_proj")])
        else:
            loaded[name] = tensor
    if "lm_head.weight" not in loaded:  # tied embeddings
        loaded["lm_head.weight"] = loaded["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(loaded, strict=False)
    real_missing = [name for name in missing if not name.endswith("inv_freq")]
    if real_missing or unexpected:
        raise ValueError(f"twin weights: missing {real_missing}, unexpected {unexpected}")
    return model
