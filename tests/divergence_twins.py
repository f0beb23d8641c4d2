"""Twin Qwen2-shaped models under three naming conventions, with faults injected at known modules.

For tests/test_divergence.py: real msprobe 26.2.0 dumps (CPU) of models that compute the same thing
from the same seeded weights, named as the training side (Hugging Face names under FSDP1's wrappers,
or Megatron-Core's GPTModel names under its `module.module` wrappers) or the inference side (vLLM's
names, merged q/k/v and gate/up, flattened `[tokens, hidden]` layout) names them, so msprobe's
`--consistent_check --backend fsdp|megatron` maps one onto the other. A fault is injected into one
inference-side module: the culprit the divergence attribution must name.

Run as a script (one dump per process: msprobe's debugger is a process-wide singleton):
    python divergence_twins.py DUMP_ROOT NAMING TASK [FAULT]
NAMING: fsdp | megatron | vllm; TASK: tensor | statistics; FAULT: one of FAULTS (inference side only).
Writes DUMP_ROOT/step0/rank0/dump.json. Written for these tests; no upstream model code is copied.
"""

from __future__ import annotations

import json
import math
import os
import sys

import torch
from torch import nn

CONFIG = {"vocab": 64, "hidden": 32, "heads": 4, "kv_heads": 2, "inter": 64, "layers": 3, "eps": 1e-6, "tokens": 6}
HEAD_DIM = CONFIG["hidden"] // CONFIG["heads"]
# fault name -> (where, what): the inference-side module it is injected into, per the training-side names.
FAULTS = {
    "dtype": "layer 1 mlp.down_proj computed in bfloat16",
    "eps": "layer 2 input_layernorm with epsilon 1e-2 instead of 1e-6",
    "scale": "layer 0 attention softmax scale 1.25x",
    "weight": "layer 1 self_attn.o_proj weight perturbed by 1e-3 (relative)",
    "tiny": "layer 1 self_attn.o_proj weight perturbed by 3e-7 (relative: a few fp32 ulps)",
}
# The training-side module each fault must be attributed to, per backend (None: no culprit to name).
CULPRITS = {
    "fsdp": {"dtype": "model.layers.1.mlp.down_proj", "eps": "model.layers.2.input_layernorm",
             "scale": "model.layers.0.self_attn", "weight": "model.layers.1.self_attn.o_proj", "tiny": None},
    "megatron": {"dtype": "module.module.decoder.layers.1.mlp.linear_fc2",
                 "eps": "module.module.decoder.layers.2.input_layernorm",
                 "scale": "module.module.decoder.layers.0.self_attention.core_attention",
                 "weight": "module.module.decoder.layers.1.self_attention.linear_proj", "tiny": None},
}


def weights(seed: int = 0) -> dict[str, torch.Tensor]:
    """The shared weights, Hugging Face names."""
    generator = torch.Generator().manual_seed(seed)
    hidden, inter, kv = CONFIG["hidden"], CONFIG["inter"], CONFIG["kv_heads"] * HEAD_DIM

    def randn(*shape: int, scale: float = 0.2) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * scale

    state = {"model.embed_tokens.weight": randn(CONFIG["vocab"], hidden, scale=1.0),
             "model.norm.weight": 1 + randn(hidden, scale=0.05), "lm_head.weight": randn(CONFIG["vocab"], hidden)}
    for i in range(CONFIG["layers"]):
        p = f"model.layers.{i}."
        state.update({
            p + "self_attn.q_proj.weight": randn(hidden, hidden), p + "self_attn.q_proj.bias": randn(hidden),
            p + "self_attn.k_proj.weight": randn(kv, hidden), p + "self_attn.k_proj.bias": randn(kv),
            p + "self_attn.v_proj.weight": randn(kv, hidden), p + "self_attn.v_proj.bias": randn(kv),
            p + "self_attn.o_proj.weight": randn(hidden, hidden),
            p + "mlp.gate_proj.weight": randn(inter, hidden), p + "mlp.up_proj.weight": randn(inter, hidden),
            p + "mlp.down_proj.weight": randn(hidden, inter),
            p + "input_layernorm.weight": 1 + randn(hidden, scale=0.05),
            p + "post_attention_layernorm.weight": 1 + randn(hidden, scale=0.05),
        })
    return state


def rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of `[tokens, heads, head_dim]`."""
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM)
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    half = HEAD_DIM // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * emb.cos()[:, None, :] + rotated * emb.sin()[:, None, :]


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal attention of `[tokens, heads|kv_heads, head_dim]`; `[tokens, hidden]` out."""
    repeat = CONFIG["heads"] // CONFIG["kv_heads"]
    q, k, v = (t.transpose(0, 1) for t in (q, k.repeat_interleave(repeat, 1), v.repeat_interleave(repeat, 1)))
    out = nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True, scale=scale)[0]
    return out.transpose(0, 1).reshape(out.shape[1], -1)


class RMSNorm(nn.Module):
    def __init__(self, weight: torch.Tensor, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.clone())
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def linear(weight: torch.Tensor, bias: torch.Tensor | None = None, cls: type[nn.Linear] = nn.Linear) -> nn.Linear:
    layer = cls(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


class Bf16Linear(nn.Linear):
    """The dtype fault: the matmul in bfloat16, the result back in float32."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x.bfloat16(), self.weight.bfloat16()).float()


# ---- Hugging Face names (the FSDP training side) ------------------------------------------------------
class Qwen2Attention(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor], p: str) -> None:
        super().__init__()
        for name in ("q_proj", "k_proj", "v_proj"):
            setattr(self, name, linear(w[p + name + ".weight"], w[p + name + ".bias"]))
        self.o_proj = linear(w[p + "o_proj.weight"])

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        flat = hidden[0]
        q = rope(self.q_proj(hidden)[0].view(len(flat), -1, HEAD_DIM), positions)
        k = rope(self.k_proj(hidden)[0].view(len(flat), -1, HEAD_DIM), positions)
        v = self.v_proj(hidden)[0].view(len(flat), -1, HEAD_DIM)
        return self.o_proj(attention(q, k, v, 1 / math.sqrt(HEAD_DIM))[None])


class Qwen2MLP(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor], p: str) -> None:
        super().__init__()
        self.gate_proj, self.up_proj = linear(w[p + "gate_proj.weight"]), linear(w[p + "up_proj.weight"])
        self.down_proj = linear(w[p + "down_proj.weight"])
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Qwen2DecoderLayer(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor], i: int) -> None:
        super().__init__()
        p = f"model.layers.{i}."
        self.self_attn, self.mlp = Qwen2Attention(w, p + "self_attn."), Qwen2MLP(w, p + "mlp.")
        self.input_layernorm = RMSNorm(w[p + "input_layernorm.weight"], CONFIG["eps"])
        self.post_attention_layernorm = RMSNorm(w[p + "post_attention_layernorm.weight"], CONFIG["eps"])

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), positions)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class FsdpWrapped(nn.Module):
    """FSDP1's wrapper: the wrapped module is the attribute `_fsdp_wrapped_module`."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self._fsdp_wrapped_module = module

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self._fsdp_wrapped_module(*args)


class Qwen2Model(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding.from_pretrained(w["model.embed_tokens.weight"], freeze=False)
        self.layers = nn.ModuleList(FsdpWrapped(Qwen2DecoderLayer(w, i)) for i in range(CONFIG["layers"]))
        self.norm = RMSNorm(w["model.norm.weight"], CONFIG["eps"])

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1])
        hidden = self.embed_tokens(input_ids)
        for layer in self.layers:
            hidden = layer(hidden, positions)
        return self.norm(hidden)


class Qwen2ForCausalLM(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.model = Qwen2Model(w)
        self.lm_head = linear(w["lm_head.weight"])

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.model(input_ids))


# ---- Megatron-Core names (the Megatron training side), `[tokens, 1, hidden]` ---------------------------
class ColumnParallelLinear(nn.Linear):
    pass


class RowParallelLinear(nn.Linear):
    pass


class VocabParallelEmbedding(nn.Embedding):
    pass


class DotProductAttention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return attention(q, k, v, 1 / math.sqrt(HEAD_DIM))[:, None]


class SelfAttention(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor], p: str) -> None:
        super().__init__()
        qkv = [w[p + f"{n}.weight"] for n in ("q_proj", "k_proj", "v_proj")]
        bias = [w[p + f"{n}.bias"] for n in ("q_proj", "k_proj", "v_proj")]
        self.linear_qkv = linear(torch.cat(qkv), torch.cat(bias), ColumnParallelLinear)
        self.core_attention = DotProductAttention()
        self.linear_proj = linear(w[p + "o_proj.weight"], cls=RowParallelLinear)

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        kv = CONFIG["kv_heads"] * HEAD_DIM
        q, k, v = self.linear_qkv(hidden)[:, 0].split([CONFIG["hidden"], kv, kv], dim=-1)
        tokens = hidden.shape[0]
        q, k = rope(q.view(tokens, -1, HEAD_DIM), positions), rope(k.view(tokens, -1, HEAD_DIM), positions)
        return self.linear_proj(self.core_attention(q, k, v.view(tokens, -1, HEAD_DIM)))


class MLP(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor], p: str) -> None:
        super().__init__()
        fc1 = torch.cat([w[p + "gate_proj.weight"], w[p + "up_proj.weight"]])
        self.linear_fc1 = linear(fc1, cls=ColumnParallelLinear)
        self.linear_fc2 = linear(w[p + "down_proj.weight"], cls=RowParallelLinear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.linear_fc1(x).chunk(2, dim=-1)
        return self.linear_fc2(nn.functional.silu(gate) * up)


class TransformerLayer(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor], i: int) -> None:
        super().__init__()
        p = f"model.layers.{i}."
        self.input_layernorm = RMSNorm(w[p + "input_layernorm.weight"], CONFIG["eps"])
        self.self_attention = SelfAttention(w, p + "self_attn.")
        self.pre_mlp_layernorm = RMSNorm(w[p + "post_attention_layernorm.weight"], CONFIG["eps"])
        self.mlp = MLP(w, p + "mlp.")

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.self_attention(self.input_layernorm(hidden), positions)
        return hidden + self.mlp(self.pre_mlp_layernorm(hidden))


class TransformerBlock(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(TransformerLayer(w, i) for i in range(CONFIG["layers"]))
        self.final_layernorm = RMSNorm(w["model.norm.weight"], CONFIG["eps"])

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            hidden = layer(hidden, positions)
        return self.final_layernorm(hidden)


class LanguageModelEmbedding(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.word_embeddings = VocabParallelEmbedding.from_pretrained(w["model.embed_tokens.weight"], freeze=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.word_embeddings(input_ids).transpose(0, 1)  # [tokens, 1, hidden]


class GPTModel(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.embedding = LanguageModelEmbedding(w)
        self.decoder = TransformerBlock(w)
        self.output_layer = linear(w["lm_head.weight"], cls=ColumnParallelLinear)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1])
        return self.output_layer(self.decoder(self.embedding(input_ids), positions))


class Wrapper(nn.Module):
    """DistributedDataParallel / Float16Module: the wrapped model is the attribute `module`."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.module(*args)


# ---- vLLM names (the inference side), `[tokens, hidden]` ----------------------------------------------
class QKVParallelLinear(nn.Linear):
    pass


class MergedColumnParallelLinear(nn.Linear):
    pass


class SiluAndMul(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return nn.functional.silu(gate) * up


class Attention(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return attention(q, k, v, self.scale)


class VllmAttention(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor], p: str, scale: float) -> None:
        super().__init__()
        qkv = [w[p + f"{n}.weight"] for n in ("q_proj", "k_proj", "v_proj")]
        bias = [w[p + f"{n}.bias"] for n in ("q_proj", "k_proj", "v_proj")]
        self.qkv_proj = linear(torch.cat(qkv), torch.cat(bias), QKVParallelLinear)
        self.o_proj = linear(w[p + "o_proj.weight"], cls=RowParallelLinear)
        self.attn = Attention(scale)

    def forward(self, positions: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        kv = CONFIG["kv_heads"] * HEAD_DIM
        q, k, v = self.qkv_proj(hidden).split([CONFIG["hidden"], kv, kv], dim=-1)
        tokens = hidden.shape[0]
        q, k = rope(q.view(tokens, -1, HEAD_DIM), positions), rope(k.view(tokens, -1, HEAD_DIM), positions)
        return self.o_proj(self.attn(q, k, v.view(tokens, -1, HEAD_DIM)))


class VllmMLP(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor], p: str, bf16_down: bool) -> None:
        super().__init__()
        self.gate_up_proj = linear(torch.cat([w[p + "gate_proj.weight"], w[p + "up_proj.weight"]]),
                                   cls=MergedColumnParallelLinear)
        self.down_proj = linear(w[p + "down_proj.weight"], cls=Bf16Linear if bf16_down else RowParallelLinear)
        self.act_fn = SiluAndMul()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_up_proj(x)))


class VllmDecoderLayer(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor], i: int, fault: str | None) -> None:
        super().__init__()
        p = f"model.layers.{i}."
        scale = 1 / math.sqrt(HEAD_DIM) * (1.25 if fault == "scale" and i == 0 else 1.0)
        self.self_attn = VllmAttention(w, p + "self_attn.", scale)
        self.mlp = VllmMLP(w, p + "mlp.", fault == "dtype" and i == 1)
        eps = 1e-2 if fault == "eps" and i == 2 else CONFIG["eps"]
        self.input_layernorm = RMSNorm(w[p + "input_layernorm.weight"], eps)
        self.post_attention_layernorm = RMSNorm(w[p + "post_attention_layernorm.weight"], CONFIG["eps"])

    def forward(self, positions: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.self_attn(positions, self.input_layernorm(hidden))
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class VllmModel(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor], fault: str | None) -> None:
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding.from_pretrained(w["model.embed_tokens.weight"], freeze=False)
        self.layers = nn.ModuleList(VllmDecoderLayer(w, i, fault) for i in range(CONFIG["layers"]))
        self.norm = RMSNorm(w["model.norm.weight"], CONFIG["eps"])

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        hidden = self.embed_tokens(input_ids)
        for layer in self.layers:
            hidden = layer(positions, hidden)
        return self.norm(hidden)


class LogitsProcessor(nn.Module):
    def forward(self, weight: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        return hidden @ weight.t()


class VllmQwen2ForCausalLM(nn.Module):
    def __init__(self, w: dict[str, torch.Tensor], fault: str | None) -> None:
        super().__init__()
        self.model = VllmModel(w, fault)
        self.lm_head_weight = nn.Parameter(w["lm_head.weight"].clone())
        self.logits_processor = LogitsProcessor()

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids, positions)


def perturbed(fault: str | None) -> dict[str, torch.Tensor]:
    state = weights()
    if fault in ("weight", "tiny"):
        name = "model.layers.1.self_attn.o_proj.weight"
        noise = torch.randn(state[name].shape, generator=torch.Generator().manual_seed(7))
        state[name] = state[name] * (1 + (1e-3 if fault == "weight" else 3e-7) * noise)
    return state


def input_ids() -> torch.Tensor:
    return torch.randint(0, CONFIG["vocab"], (1, CONFIG["tokens"]), generator=torch.Generator().manual_seed(3))


def dump(root: str, naming: str, task: str, fault: str | None) -> None:
    from msprobe.pytorch import PrecisionDebugger, seed_all

    seed_all(mode=True)
    os.makedirs(root, exist_ok=True)
    config = os.path.join(root, "config.json")
    with open(config, "w", encoding="utf-8") as handle:
        json.dump({"task": task, "dump_path": root, "rank": [], "step": [], "level": "L0"}, handle)
    model: nn.Module
    if naming == "fsdp":
        model = FsdpWrapped(Qwen2ForCausalLM(weights()))
    elif naming == "megatron":
        model = Wrapper(Wrapper(GPTModel(weights())))
    else:
        model = VllmQwen2ForCausalLM(perturbed(fault), fault)
    debugger = PrecisionDebugger(config_path=config)
    debugger.start(model=model, rank_id=0)
    with torch.no_grad():
        ids = input_ids()
        if naming == "vllm":
            hidden = model(ids[0], torch.arange(ids.shape[1]))
            model.logits_processor(model.lm_head_weight, hidden)
        else:
            model(ids)
    debugger.stop()
    debugger.step()
    os.remove(config)


if __name__ == "__main__":
    dump(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
