"""Twin decoder models named as the training and the inference engines name them, dumped by real msprobe.

Usage: python msprobe_twins.py SIDE TASK LEVEL DUMP_PATH
SIDE: `fsdp1` (the HF model wrapped by torch's FullyShardedDataParallel, every decoder layer
wrapped too, as verl's `strategy=fsdp` does), `fsdp2` (the HF model after `fully_shard` on each
layer and the root, verl's `strategy=fsdp2`), `megatron` (Megatron-core names: `decoder.layers.N.
self_attention.linear_qkv`, `mlp.linear_fc1` ...) or `vllm` (vLLM names: `model.layers.N.self_attn.
qkv_proj`, `mlp.gate_up_proj` ...). Every side holds the same seeded weights (vLLM's fused
projections are the concatenation of HF's q/k/v and gate/up; Megatron's `linear_qkv` and
`linear_fc1` too), so the forward activations agree. FSDP runs in a one-rank gloo group on CPU.
The dump goes to `DUMP_PATH/step0/rank0/`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import torch
from torch import nn

WIDTH, LAYERS, VOCAB, TOKENS = 8, 2, 16, 3


class RmsNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(WIDTH))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-1, -2) / WIDTH**0.5, dim=-1) @ v


# HF (FSDP1 / FSDP2 training side): q/k/v and gate/up are separate Linears.
class HfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(4))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.o_proj(_attend(self.q_proj(hidden), self.k_proj(hidden), self.v_proj(hidden)))


class HfMlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(WIDTH, 2 * WIDTH, bias=False), nn.Linear(WIDTH, 2 * WIDTH, bias=False)
        self.down_proj = nn.Linear(2 * WIDTH, WIDTH, bias=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.down_proj(torch.relu(self.gate_proj(hidden)) * self.up_proj(hidden))


class HfLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RmsNorm(), RmsNorm()
        self.self_attn, self.mlp = HfAttention(), HfMlp()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.self_attn(self.input_layernorm(hidden))
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class HfBody(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, WIDTH)
        self.layers = nn.ModuleList(HfLayer() for _ in range(LAYERS))
        self.norm = RmsNorm()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden = self.embed_tokens(ids)
        for layer in self.layers:
            hidden = layer(hidden)
        return self.norm(hidden)


class HfCausalLm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.model, self.lm_head = HfBody(), nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.model(ids))


# vLLM (inference side): fused qkv_proj and gate_up_proj.
class VllmAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv_proj, self.o_proj = nn.Linear(WIDTH, 3 * WIDTH, bias=False), nn.Linear(WIDTH, WIDTH, bias=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.o_proj(_attend(*self.qkv_proj(hidden).split(WIDTH, dim=-1)))


class VllmMlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
        self.down_proj = nn.Linear(2 * WIDTH, WIDTH, bias=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(hidden).split(2 * WIDTH, dim=-1)
        return self.down_proj(torch.relu(gate) * up)


class VllmLayer(HfLayer):
    def __init__(self) -> None:
        nn.Module.__init__(self)
        self.input_layernorm, self.post_attention_layernorm = RmsNorm(), RmsNorm()
        self.self_attn, self.mlp = VllmAttention(), VllmMlp()


class VllmBody(HfBody):
    def __init__(self) -> None:
        nn.Module.__init__(self)
        self.embed_tokens = nn.Embedding(VOCAB, WIDTH)
        self.layers = nn.ModuleList(VllmLayer() for _ in range(LAYERS))
        self.norm = RmsNorm()


class VllmCausalLm(HfCausalLm):
    """vLLM's forward returns hidden states; `compute_logits` applies lm_head's weight outside any
    module call, so an L0 dump has no lm_head row (as in a real vLLM dump)."""

    def __init__(self) -> None:
        nn.Module.__init__(self)
        self.model, self.lm_head = VllmBody(), nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(hidden, self.lm_head.weight)


# Megatron-core (training side with strategy=megatron).
class MegatronAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear_qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.linear_proj = nn.Linear(WIDTH, WIDTH, bias=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear_proj(_attend(*self.linear_qkv(hidden).split(WIDTH, dim=-1)))


class MegatronMlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear_fc1 = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
        self.linear_fc2 = nn.Linear(2 * WIDTH, WIDTH, bias=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        gate, up = self.linear_fc1(hidden).split(2 * WIDTH, dim=-1)
        return self.linear_fc2(torch.relu(gate) * up)


class MegatronLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.input_layernorm, self.pre_mlp_layernorm = RmsNorm(), RmsNorm()
        self.self_attention, self.mlp = MegatronAttention(), MegatronMlp()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.self_attention(self.input_layernorm(hidden))
        return hidden + self.mlp(self.pre_mlp_layernorm(hidden))


class MegatronEmbedding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, WIDTH)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.word_embeddings(ids)


class MegatronDecoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(MegatronLayer() for _ in range(LAYERS))
        self.final_layernorm = RmsNorm()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            hidden = layer(hidden)
        return self.final_layernorm(hidden)


class GPTModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding, self.decoder = MegatronEmbedding(), MegatronDecoder()
        self.output_layer = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.output_layer(self.decoder(self.embedding(ids)))


def _reference() -> HfCausalLm:
    torch.manual_seed(0)
    return HfCausalLm()


def _fused(reference: HfCausalLm, model: nn.Module) -> nn.Module:
    """Copy the reference weights into a model with fused projections, layer by layer."""
    source = dict(reference.named_parameters())
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.copy_(_fused_weight(name, source))
    return model


_RENAMES = {"embedding.word_embeddings": "model.embed_tokens", "decoder.final_layernorm": "model.norm",
            "output_layer": "lm_head", "decoder.layers": "model.layers", "self_attention": "self_attn",
            "linear_qkv": "qkv_proj", "linear_proj": "o_proj", "linear_fc1": "gate_up_proj",
            "linear_fc2": "down_proj", "pre_mlp_layernorm": "post_attention_layernorm"}


def _fused_weight(name: str, source: dict[str, torch.Tensor]) -> torch.Tensor:
    for old, new in _RENAMES.items():
        name = name.replace(old, new)
    if ".qkv_proj." in name:
        return torch.cat([source[name.replace("qkv_proj", part)] for part in ("q_proj", "k_proj", "v_proj")])
    if ".gate_up_proj." in name:
        return torch.cat([source[name.replace("gate_up_proj", part)] for part in ("gate_proj", "up_proj")])
    return source[name]


def _init_group() -> None:
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    store = tempfile.NamedTemporaryFile(prefix="rlpatch_twins_", delete=False).name
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)


def build(side: str) -> nn.Module:
    reference = _reference()
    if side == "vllm":
        return _fused(reference, VllmCausalLm())
    if side == "megatron":
        return _fused(reference, GPTModel())
    _init_group()
    if side == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy

        return FullyShardedDataParallel(reference, auto_wrap_policy=ModuleWrapPolicy({HfLayer}), use_orig_params=True,
                                        device_id=torch.device("cpu"))
    if side == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for layer in reference.model.layers:
            fully_shard(layer)
        return fully_shard(reference)
    raise SystemExit(f"unknown side {side!r}")


def main(side: str, task: str, level: str, dump_path: str) -> None:
    model = build(side)
    config = os.path.join(tempfile.mkdtemp(prefix="rlpatch_twins_"), "config.json")
    with open(config, "w", encoding="utf-8") as handle:
        json.dump({"task": task, "dump_path": dump_path, "rank": [], "step": [], "level": level}, handle)
    from msprobe.pytorch import PrecisionDebugger

    debugger = PrecisionDebugger(config_path=config)
    ids = torch.arange(TOKENS).unsqueeze(0)
    debugger.start(model=model, rank_id=0)
    with torch.no_grad():
        logits = model(ids)
        if isinstance(model, VllmCausalLm):
            logits = model.compute_logits(logits)
    debugger.stop()
    debugger.step()
    print(json.dumps({"logits": logits.flatten().tolist()}))
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:5])
