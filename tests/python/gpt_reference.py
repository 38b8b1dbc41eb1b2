"""A small, plain-PyTorch GPT written from the published architectures (GPT-2: learned positions,
LayerNorm, GELU MLP, biases, tied embeddings; Llama: RoPE, RMSNorm, SwiGLU, grouped-query
attention, no biases; Llama 3: RoPE frequency scaling; Qwen 2: bias on q/k/v only; BLOOM: ALiBi
and a LayerNorm on the word embeddings; RoFormer/Meta-Llama's interleaved rotary pairs as complex
products). Batch-first [b, s, h], separate q/k/v projections per head, attention written out as
softmax(q k^T / sqrt(d) + bias + causal mask) v. It shares no code with megatron-cpp;
`from_megatron_state_dict` is the only place that knows megatron's parameter names and layouts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Config:
    vocab_size: int            # (padded) vocabulary rows of the embedding
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    ffn_hidden_size: int
    max_seq_len: int = 0
    norm: str = "layernorm"    # or "rmsnorm"
    eps: float = 1e-5
    mlp: str = "gelu"          # "gelu", "gelu_tanh" or "swiglu"
    bias: bool = True
    position: str = "learned"  # or "rope", "alibi", "none"
    rotary_percent: float = 1.0
    rotary_base: float = 10000.0
    rotary_interleaved: bool = False
    # Llama 3 scaling: (factor, low_freq_factor, high_freq_factor, original context) or None.
    rope_scaling: tuple | None = None
    qkv_bias: bool = False     # bias on q, k, v even without `bias` (Qwen 2)
    embed_ln: bool = False     # LayerNorm on the word embeddings (BLOOM)
    tied: bool = True
    # True: torch's fused kernels (F.layer_norm / F.rms_norm, F.scaled_dot_product_attention)
    # instead of the written-out formulas; what an idiomatic PyTorch model uses (benchmarks).
    fused: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


class Norm(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.kind, self.eps, self.fused = cfg.norm, cfg.eps, cfg.fused
        self.weight = nn.Parameter(torch.ones(cfg.hidden_size))
        self.bias = nn.Parameter(torch.zeros(cfg.hidden_size)) if cfg.norm == "layernorm" else None

    def forward(self, x):
        if self.fused:
            if self.kind == "layernorm":
                return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)
            return F.rms_norm(x, x.shape[-1:], self.weight, self.eps)
        if self.kind == "layernorm":
            mean = x.mean(-1, keepdim=True)
            var = ((x - mean) ** 2).mean(-1, keepdim=True)
            return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


def llama3_inv_freq(inv_freq, factor, low_freq_factor, high_freq_factor, original):
    """Llama 3.1's published frequency scaling, frequency by frequency: long wavelengths divided by
    `factor`, short ones kept, the band between blended linearly in original / wavelength."""
    out = []
    for f in inv_freq.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < original / high_freq_factor:
            out.append(f)
        elif wavelen > original / low_freq_factor:
            out.append(f / factor)
        else:
            smooth = (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append((1 - smooth) * f / factor + smooth * f)
    return torch.tensor(out, dtype=torch.float32, device=inv_freq.device)


def rope_tables(cfg: Config, seq_len: int, device=None):
    rot = int(cfg.head_dim * cfg.rotary_percent)
    inv_freq = 1.0 / (cfg.rotary_base ** (torch.arange(0, rot, 2, dtype=torch.float32, device=device) / rot))
    if cfg.rope_scaling is not None:
        inv_freq = llama3_inv_freq(inv_freq, *cfg.rope_scaling)
    angles = torch.arange(seq_len, dtype=torch.float32, device=device)[:, None] * inv_freq[None, :]  # [s, rot/2]
    if cfg.rotary_interleaved:
        return angles, None, rot
    angles = torch.cat([angles, angles], dim=-1)                                       # [s, rot]
    return angles.cos(), angles.sin(), rot


def apply_rope(x, cos, sin, rot):
    """x: [b, heads, s, d]; rotates the first `rot` channels, pairing channel i with i + rot/2; or,
    when `sin` is None (`cos` holds the angles), channels (2i, 2i+1) as one complex number each."""
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    if sin is None:
        pairs = torch.view_as_complex(x_rot.float().reshape(*x_rot.shape[:-1], rot // 2, 2).contiguous())
        turned = torch.view_as_real(pairs * torch.polar(torch.ones_like(cos), cos)).flatten(-2)
        return torch.cat([turned.to(x.dtype), x_pass], dim=-1)
    half = rot // 2
    rotated = torch.cat([-x_rot[..., half:], x_rot[..., :half]], dim=-1)
    return torch.cat([x_rot * cos + rotated * sin, x_pass], dim=-1)


def alibi_slopes(n: int) -> list[float]:
    """Press et al.'s slopes: 2^(-8/n), 2^(-16/n), ... for n a power of two; otherwise those of
    the largest power of two below n, then every other slope of twice that."""
    if math.log2(n).is_integer():
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]
    p = 2 ** math.floor(math.log2(n))
    return alibi_slopes(p) + alibi_slopes(2 * p)[0::2][:n - p]


class Attention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        d = cfg.head_dim
        qkv_bias = cfg.bias or cfg.qkv_bias
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_heads * d, bias=qkv_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * d, bias=qkv_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * d, bias=qkv_bias)
        self.o_proj = nn.Linear(cfg.num_heads * d, cfg.hidden_size, bias=cfg.bias)

    def forward(self, x, rope=None):
        b, s, _ = x.shape
        cfg, d = self.cfg, self.cfg.head_dim
        q = self.q_proj(x).view(b, s, cfg.num_heads, d).transpose(1, 2)
        k = self.k_proj(x).view(b, s, cfg.num_kv_heads, d).transpose(1, 2)
        v = self.v_proj(x).view(b, s, cfg.num_kv_heads, d).transpose(1, 2)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        rep = cfg.num_heads // cfg.num_kv_heads  # query head i uses key/value head i // rep
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        if cfg.fused and cfg.position != "alibi":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o_proj(out.transpose(1, 2).reshape(b, s, cfg.num_heads * d))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)
        if cfg.position == "alibi":  # BLOOM's form: head h adds slope_h x key position
            slopes = torch.tensor(alibi_slopes(cfg.num_heads), dtype=scores.dtype, device=scores.device)
            scores = scores + slopes[:, None, None] * torch.arange(s, dtype=scores.dtype, device=scores.device)
        causal = torch.ones(s, s, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        out = scores.softmax(-1) @ v  # [b, heads, s, d]
        return self.o_proj(out.transpose(1, 2).reshape(b, s, cfg.num_heads * d))


class MLP(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.kind = cfg.mlp
        if cfg.mlp == "swiglu":
            self.gate_proj = nn.Linear(cfg.hidden_size, cfg.ffn_hidden_size, bias=cfg.bias)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.ffn_hidden_size, bias=cfg.bias)
        self.down_proj = nn.Linear(cfg.ffn_hidden_size, cfg.hidden_size, bias=cfg.bias)

    def forward(self, x):
        if self.kind == "swiglu":
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        approx = "tanh" if self.kind == "gelu_tanh" else "none"
        return self.down_proj(F.gelu(self.up_proj(x), approximate=approx))


class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = Norm(cfg), Attention(cfg), Norm(cfg), MLP(cfg)

    def forward(self, x, rope=None):
        x = x + self.attn(self.ln_1(x), rope)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.wpe = nn.Embedding(cfg.max_seq_len, cfg.hidden_size) if cfg.position == "learned" else None
        self.ln_emb = Norm(Config(**{**cfg.__dict__, "norm": "layernorm"})) if cfg.embed_ln else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.ln_f = Norm(cfg)
        self.lm_head = None if cfg.tied else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, idx, labels=None):
        b, s = idx.shape
        x = self.wte(idx)
        if self.ln_emb is not None:
            x = self.ln_emb(x)
        rope = None
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(s, device=idx.device))[None]
        elif self.cfg.position == "rope":
            rope = rope_tables(self.cfg, s, idx.device)
        for block in self.blocks:
            x = block(x, rope)
        x = self.ln_f(x)
        logits = x @ (self.wte.weight if self.lm_head is None else self.lm_head.weight).t()
        if labels is None:
            return logits
        return F.cross_entropy(logits.reshape(b * s, -1), labels.reshape(-1), reduction="none").view(b, s)


def from_megatron_state_dict(cfg: Config, sd: dict[str, torch.Tensor]) -> GPT:
    """Builds the reference from a TP=1 megatron state dict, undoing megatron's fused layouts:
    linear_qkv rows are grouped per key/value head g as [q heads of g; k_g; v_g], and a gated
    linear_fc1 is [gate; up]."""
    model = GPT(cfg)
    d, ng = cfg.head_dim, cfg.num_kv_heads
    per = cfg.num_heads // ng
    with torch.no_grad():
        model.wte.weight.copy_(sd["embedding.word_embeddings.weight"])
        if model.ln_emb is not None:
            model.ln_emb.weight.copy_(sd["embedding.word_embeddings.norm.weight"])
            model.ln_emb.bias.copy_(sd["embedding.word_embeddings.norm.bias"])
        if model.wpe is not None:
            model.wpe.weight.copy_(sd["embedding.position_embeddings.weight"])
        for i, blk in enumerate(model.blocks):
            p = f"decoder.layers.{i}."
            blk.ln_1.weight.copy_(sd[p + "input_layernorm.weight"])
            blk.ln_2.weight.copy_(sd[p + "pre_mlp_layernorm.weight"])
            if cfg.norm == "layernorm":
                blk.ln_1.bias.copy_(sd[p + "input_layernorm.bias"])
                blk.ln_2.bias.copy_(sd[p + "pre_mlp_layernorm.bias"])
            w = sd[p + "self_attention.linear_qkv.weight"].view(ng, per + 2, d, cfg.hidden_size)
            blk.attn.q_proj.weight.copy_(w[:, :per].reshape(-1, cfg.hidden_size))
            blk.attn.k_proj.weight.copy_(w[:, per].reshape(-1, cfg.hidden_size))
            blk.attn.v_proj.weight.copy_(w[:, per + 1].reshape(-1, cfg.hidden_size))
            blk.attn.o_proj.weight.copy_(sd[p + "self_attention.linear_proj.weight"])
            fc1 = sd[p + "mlp.linear_fc1.weight"]
            if cfg.mlp == "swiglu":
                gate, up = fc1.chunk(2, dim=0)
                blk.mlp.gate_proj.weight.copy_(gate)
                blk.mlp.up_proj.weight.copy_(up)
            else:
                blk.mlp.up_proj.weight.copy_(fc1)
            blk.mlp.down_proj.weight.copy_(sd[p + "mlp.linear_fc2.weight"])
            if cfg.bias or cfg.qkv_bias:
                bq = sd[p + "self_attention.linear_qkv.bias"].view(ng, per + 2, d)
                blk.attn.q_proj.bias.copy_(bq[:, :per].reshape(-1))
                blk.attn.k_proj.bias.copy_(bq[:, per].reshape(-1))
                blk.attn.v_proj.bias.copy_(bq[:, per + 1].reshape(-1))
            if cfg.bias:
                blk.attn.o_proj.bias.copy_(sd[p + "self_attention.linear_proj.bias"])
                b1 = sd[p + "mlp.linear_fc1.bias"]
                if cfg.mlp == "swiglu":
                    bg, bu = b1.chunk(2)
                    blk.mlp.gate_proj.bias.copy_(bg)
                    blk.mlp.up_proj.bias.copy_(bu)
                else:
                    blk.mlp.up_proj.bias.copy_(b1)
                blk.mlp.down_proj.bias.copy_(sd[p + "mlp.linear_fc2.bias"])
        model.ln_f.weight.copy_(sd["decoder.final_layernorm.weight"])
        if cfg.norm == "layernorm":
            model.ln_f.bias.copy_(sd["decoder.final_layernorm.bias"])
        if model.lm_head is not None:
            model.lm_head.weight.copy_(sd["output_layer.weight"])
    return model
