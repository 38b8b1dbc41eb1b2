"""A small, plain-PyTorch GPT written from the published architectures (GPT-2: learned positions,
LayerNorm, GELU MLP, biases, tied embeddings; Llama: RoPE, RMSNorm, SwiGLU, grouped-query
attention, no biases; Llama 3: RoPE frequency scaling; Qwen 2: bias on q/k/v only; BLOOM: ALiBi
and a LayerNorm on the word embeddings; RoFormer/Meta-Llama's interleaved rotary pairs as complex
products; mixture-of-experts blocks: Mixtral's softmax over the top-k, DeepSeek-V3's sigmoid
scores with group-limited routing, Qwen2-MoE's gated shared expert, Switch Transformer's
load-balancing loss and capacity, ST-MoE's z-loss, DeepSeek-V2's per-sequence balance loss).
Batch-first [b, s, h], separate q/k/v projections per head, attention written out as
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
    mlp: str = "gelu"          # "gelu", "gelu_tanh", "squared_relu" or "swiglu"
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
    # Mixture of experts (num_experts 0: dense MLPs): which layers (one 0/1 each; None: all),
    # routing and the auxiliary losses, as MoE in this file documents them.
    num_experts: int = 0
    moe_layers: list | None = None
    moe_ffn_hidden_size: int = 0
    topk: int = 2
    score: str = "softmax"         # or "sigmoid"
    pre_softmax: bool = False
    topk_scaling: float | None = None
    num_groups: int | None = None
    group_topk: int | None = None
    shared_ffn_hidden_size: int = 0
    shared_gate: bool = False
    capacity_factor: float | None = None
    drop_policy: str = "probs"     # or "position"
    balancing: str = "aux_loss"    # or "seq_aux_loss", "sinkhorn", "none"
    aux_coeff: float = 0.0
    z_coeff: float | None = None
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
    def __init__(self, cfg: Config, ffn: int = 0):
        super().__init__()
        self.kind = cfg.mlp
        ffn = ffn or cfg.ffn_hidden_size
        if cfg.mlp == "swiglu":
            self.gate_proj = nn.Linear(cfg.hidden_size, ffn, bias=cfg.bias)
        self.up_proj = nn.Linear(cfg.hidden_size, ffn, bias=cfg.bias)
        self.down_proj = nn.Linear(ffn, cfg.hidden_size, bias=cfg.bias)

    def forward(self, x):
        if self.kind == "swiglu":
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        if self.kind == "squared_relu":  # Primer (So et al., 2021): relu(x)^2
            return self.down_proj(torch.square(F.relu(self.up_proj(x))))
        approx = "tanh" if self.kind == "gelu_tanh" else "none"
        return self.down_proj(F.gelu(self.up_proj(x), approximate=approx))


class MoE(nn.Module):
    """A mixture of experts written densely: every expert sees every token and its output is
    weighted by the token's routing weight (0 off its chosen experts). Routing per token t, with
    logits l = W x_t: Mixtral takes the top-k logits and softmaxes them; with pre_softmax the
    softmax over all experts is taken first and its top-k kept as they are; the sigmoid scores of
    DeepSeek-V3 pick the top-k (within the group_topk groups whose top k/group_topk scores sum
    highest) and are normalised to sum to 1; then times topk_scaling. Capacity (Switch
    Transformer): an expert keeps at most ceil(T k / E * factor) tokens, those of highest weight
    or the earliest. Losses: Switch's E * coeff * sum_e f_e P_e, with f_e the share of the T*k
    choices of a plain top-k of the full softmax (normalised sigmoid) scores s and P_e the mean
    of s over tokens; DeepSeek-V2's per-sequence version averaged over the batch; ST-MoE's
    z-loss coeff * mean_t logsumexp(l_t)^2. Tokens are counted sequence-major (t = s * b + b_i)."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.router = nn.Linear(cfg.hidden_size, cfg.num_experts, bias=False)
        self.experts = nn.ModuleList(MLP(cfg, cfg.moe_ffn_hidden_size) for _ in range(cfg.num_experts))
        self.shared = MLP(cfg, cfg.shared_ffn_hidden_size) if cfg.shared_ffn_hidden_size else None
        self.shared_gate = nn.Linear(cfg.hidden_size, 1, bias=False) if cfg.shared_gate else None
        self.aux_losses = []

    def choose(self, logits):
        cfg, k = self.cfg, self.cfg.topk
        if cfg.balancing == "sinkhorn":
            weights = logits.sigmoid() if k == 1 else logits.softmax(-1)
            idx = (sinkhorn(logits.detach()) if self.training else weights).topk(k, dim=-1).indices
            return idx, weights.gather(1, idx)
        if cfg.score == "softmax" and not cfg.pre_softmax:
            top, idx = logits.topk(k, dim=-1)
            return idx, top.softmax(-1)
        scores = logits.softmax(-1) if cfg.score == "softmax" else logits.sigmoid()
        candidates = scores
        if cfg.group_topk:
            t, g = scores.shape[0], cfg.num_groups
            grouped = scores.view(t, g, -1)
            best = grouped.topk(k // cfg.group_topk, dim=-1).values.sum(-1).topk(cfg.group_topk, dim=-1).indices
            allowed = torch.zeros(t, g, dtype=torch.bool).scatter(1, best, True)
            candidates = grouped.masked_fill(~allowed[..., None], float("-inf")).view(t, -1)
        idx = candidates.topk(k, dim=-1).indices
        weights = scores.gather(1, idx)
        if cfg.score == "sigmoid" and k > 1:
            weights = weights / weights.sum(-1, keepdim=True)
        return idx, weights

    def balance_loss(self, logits, b):
        cfg, e, k = self.cfg, self.cfg.num_experts, self.cfg.topk
        s = logits.softmax(-1) if cfg.score == "softmax" else logits.sigmoid() / logits.sigmoid().sum(-1, keepdim=True)
        chosen = torch.zeros_like(s).scatter(1, s.topk(k, dim=-1).indices, 1.0)

        def switch(s, chosen):
            t = s.shape[0]
            return e * cfg.aux_coeff * ((chosen.sum(0) / (t * k)) * (s.sum(0) / t)).sum()
        if cfg.balancing == "aux_loss":
            return switch(s, chosen)
        per_seq = [switch(s.view(-1, b, e)[:, i], chosen.view(-1, b, e)[:, i]) for i in range(b)]
        return torch.stack(per_seq).mean()

    def forward(self, x):  # [b, s, h]
        cfg, (b, s, h) = self.cfg, x.shape
        tokens = x.transpose(0, 1).reshape(-1, h)
        logits = self.router(tokens)
        idx, w = self.choose(logits)
        if cfg.topk_scaling:
            w = w * cfg.topk_scaling
        weights = torch.zeros_like(logits).scatter(1, idx, w)
        if cfg.capacity_factor:
            t = tokens.shape[0]
            capacity = math.ceil(t * cfg.topk / cfg.num_experts * cfg.capacity_factor)
            routed = weights != 0
            for ex in range(cfg.num_experts):
                mine = routed[:, ex].nonzero().squeeze(1).tolist()
                if cfg.drop_policy == "probs":
                    mine.sort(key=lambda i: -weights[i, ex].item())
                for i in mine[capacity:]:
                    weights = weights.index_put((torch.tensor([i]), torch.tensor([ex])), torch.zeros(1))
        out = sum(weights[:, ex:ex + 1] * expert(tokens) for ex, expert in enumerate(self.experts))
        if self.shared is not None:
            shared = self.shared(tokens)
            out = out + (shared * self.shared_gate(tokens).sigmoid() if self.shared_gate is not None else shared)
        self.aux_losses = []
        if self.training:
            if cfg.aux_coeff > 0 and cfg.balancing != "none":
                self.aux_losses.append(self.balance_loss(logits, b))
            if cfg.z_coeff is not None:
                self.aux_losses.append(cfg.z_coeff * logits.logsumexp(-1).square().mean())
        return out.view(s, b, h).transpose(0, 1)


def sinkhorn(logits, tol=1e-4):
    """S-BASE's balanced assignment: exp(logits) [T, E] scaled by row factors r and column factors
    c, alternately set so that rows sum to 1/T and columns to 1/E, until c moves by less than tol
    on average."""
    k = logits.float().exp()
    t, e = k.shape
    r, c = torch.ones(t), torch.ones(e)
    while True:
        r = 1 / t / ((k * c).sum(1) + 1e-8)
        c_next = 1 / e / ((k * r[:, None]).sum(0) + 1e-8)
        moved = (c - c_next).abs().mean()
        c = c_next
        if not moved > tol:
            return k * c * r[:, None]


class Block(nn.Module):
    def __init__(self, cfg: Config, moe: bool = False):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = Norm(cfg), Attention(cfg), Norm(cfg)
        self.mlp = MoE(cfg) if moe else MLP(cfg)

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
        moe = [bool(cfg.num_experts) and (cfg.moe_layers is None or cfg.moe_layers[i] == 1)
               for i in range(cfg.num_layers)]
        self.blocks = nn.ModuleList(Block(cfg, moe[i]) for i in range(cfg.num_layers))
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

    def aux_loss(self):
        """The MoE blocks' auxiliary losses of the last training forward, summed."""
        return sum((l for blk in self.blocks if isinstance(blk.mlp, MoE) for l in blk.mlp.aux_losses),
                   torch.zeros(()))


def load_mlp(cfg: Config, mlp: MLP, sd: dict[str, torch.Tensor], prefix: str):
    """An MLP's weights (and biases) from megatron's linear_fc1 ([gate; up] when gated) and linear_fc2."""
    for kind in ("weight", "bias") if cfg.bias else ("weight",):
        fc1 = sd[prefix + "linear_fc1." + kind]
        if cfg.mlp == "swiglu":
            gate, up = fc1.chunk(2, dim=0)
            getattr(mlp.gate_proj, kind).copy_(gate)
            getattr(mlp.up_proj, kind).copy_(up)
        else:
            getattr(mlp.up_proj, kind).copy_(fc1)
        getattr(mlp.down_proj, kind).copy_(sd[prefix + "linear_fc2." + kind])


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
            if isinstance(blk.mlp, MoE):
                blk.mlp.router.weight.copy_(sd[p + "mlp.router.weight"])
                for e, expert in enumerate(blk.mlp.experts):
                    load_mlp(cfg, expert, sd, p + f"mlp.experts.local_experts.{e}.")
                if blk.mlp.shared is not None:
                    load_mlp(cfg, blk.mlp.shared, sd, p + "mlp.shared_experts.")
                if blk.mlp.shared_gate is not None:
                    blk.mlp.shared_gate.weight.copy_(sd[p + "mlp.shared_experts.gate_weight"])
            else:
                load_mlp(cfg, blk.mlp, sd, p + "mlp.")
            if cfg.bias or cfg.qkv_bias:
                bq = sd[p + "self_attention.linear_qkv.bias"].view(ng, per + 2, d)
                blk.attn.q_proj.bias.copy_(bq[:, :per].reshape(-1))
                blk.attn.k_proj.bias.copy_(bq[:, per].reshape(-1))
                blk.attn.v_proj.bias.copy_(bq[:, per + 1].reshape(-1))
            if cfg.bias:  # the MLPs' biases came with load_mlp
                blk.attn.o_proj.bias.copy_(sd[p + "self_attention.linear_proj.bias"])
        model.ln_f.weight.copy_(sd["decoder.final_layernorm.weight"])
        if cfg.norm == "layernorm":
            model.ln_f.bias.copy_(sd["decoder.final_layernorm.bias"])
        if model.lm_head is not None:
            model.lm_head.weight.copy_(sd["output_layer.weight"])
    return model
