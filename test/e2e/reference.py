#!/usr/bin/env python3
"""The PyTorch reference for tfm models.

Reads the resolved description (tfmc --emit=json), builds the same network
from torch.nn modules, fills it with random weights under the canonical
names, and writes the weights (safetensors), the inputs and the expected
output (npy). Written against shared/DSL.md, independently of the compiler.
"""
import json
import math
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# One thread: the reference models are small, and the suite runs two
# tests at once (more threads spin and wait more than they compute).
torch.set_num_threads(1)


class RMSNorm(nn.Module):
    def __init__(self, d, eps, offset=0.0):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps
        self.offset = offset

    def forward(self, x):
        r = x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps)
        return r * (self.offset + self.weight)


class LayerNorm(nn.Module):
    """LayerNorm multiplying by (offset + weight) (DSL v2 `offset`)."""

    def __init__(self, d, eps, offset=0.0):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.eps = eps
        self.offset = offset

    def forward(self, x):
        y = F.layer_norm(x, x.shape[-1:], None, None, self.eps)
        return y * (self.offset + self.weight) + self.bias


def make_norm(norm, d, final=False):
    eps = norm.get("final_eps", norm["eps"]) if final else norm["eps"]
    offset = norm.get("offset", 0.0)
    if norm["kind"] == "rmsnorm":
        return RMSNorm(d, eps, offset)
    return LayerNorm(d, eps, offset)


def rope_inv_freq(emb, head_dim):
    """RoPE frequencies theta^(-2i/R) of the R rotated dimensions, rescaled
    as DSL.md says: `linear` divides positions (so the frequencies) by
    `factor`; `llama3` is Hugging Face's rope_type "llama3"."""
    r = emb.get("rope_dim") or head_dim
    theta = emb["rope_theta"]
    inv = theta ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
    scaling = emb.get("rope_scaling", "none")
    factor = emb.get("rope_factor", 1.0)
    if scaling == "linear":
        inv = inv / factor
    elif scaling == "llama3":
        low = emb.get("rope_low_freq_factor", 1.0)
        high = emb.get("rope_high_freq_factor", 4.0)
        old = emb["rope_original_context"]
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old / high) & (wavelen <= old / low)
        inv = torch.where(medium, blended, scaled)
    elif scaling == "yarn":
        # Hugging Face's _compute_yarn_parameters (modeling_rope_utils.py).
        old = emb["rope_original_context"]

        def correction_dim(rotations):
            return r * math.log(old / (rotations * 2 * math.pi)) / (2 * math.log(theta))
        low = correction_dim(emb["rope_beta_fast"])
        high = correction_dim(emb["rope_beta_slow"])
        if emb["rope_truncate"]:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, r - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(r // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        extrapolation = 1 - ramp
        inv = inv / factor * (1 - extrapolation) + inv * extrapolation
    return inv


def rope(x, inv, style, factor=1.0):
    # x: [B, H, T, D]; the first R = 2 * len(inv) dimensions rotate; YaRN
    # multiplies cos and sin by its attention factor.
    b, h, t, d = x.shape
    r = 2 * inv.shape[0]
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = (ang.cos() * factor).float(), (ang.sin() * factor).float()
    xr, rest = x[..., :r], x[..., r:]
    if style == "half":
        cos = torch.cat([cos, cos], -1)
        sin = torch.cat([sin, sin], -1)
        x1, x2 = xr[..., : r // 2], xr[..., r // 2:]
        rot = torch.cat([-x2, x1], -1)
    else:
        cos = cos.repeat_interleave(2, -1)
        sin = sin.repeat_interleave(2, -1)
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        rot = torch.stack([-x2, x1], -1).reshape(xr.shape)
    return torch.cat([xr * cos + rot * sin, rest], -1)


def alibi_slopes(heads):
    """DSL.md (the ALiBi paper, BLOOM, MPT): 2^(-8 (h+1) / H) for a power
    of two H, else those of the nearest lower power of two N followed by
    every other slope of 2N."""
    n = 2 ** int(math.floor(math.log2(heads)))
    slopes = [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    k = 0
    while len(slopes) < heads:
        slopes.append(2.0 ** (-4.0 * (2 * k + 1) / n))
        k += 1
    return torch.tensor(slopes, dtype=torch.float32)


def relative_bucket(rel, bidirectional, buckets, max_distance):
    """T5's _relative_position_bucket (rel = key - query position)."""
    out = torch.zeros_like(rel)
    if bidirectional:
        buckets //= 2
        out += (rel > 0).long() * buckets
        rel = rel.abs()
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    exact = buckets // 2
    small = rel < exact
    large = exact + (torch.log(rel.float() / exact) / math.log(max_distance / exact)
                     * (buckets - exact)).long()
    large = torch.min(large, torch.full_like(large, buckets - 1))
    return out + torch.where(small, rel, large)


class HeadNorm(nn.Module):
    """qk_norm: the stack's norm kind over each head vector, weights of size
    head_dim shared by the heads, multiplied by (offset + weight), no bias."""

    def __init__(self, norm, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.kind, self.eps = norm["kind"], norm["eps"]
        self.offset = norm.get("offset", 0.0)

    def forward(self, x):
        w = self.offset + self.weight
        if self.kind == "rmsnorm":
            return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * w
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.eps) * w


# The dtype that self-attention's keys and values are rounded to, as a KV
# cache of f16 or bf16 holds them (tfmc --kv-cache; generate.py sets it), or
# None.
KV_ROUND = None


class Attention(nn.Module):
    """`position`: for self-attention, ("rope", inv_freq, style),
    ("alibi",) or ("relative", table module, bidirectional, buckets,
    max_distance); None for cross-attention."""

    def __init__(self, a, d, causal_mask, position, norm=None):
        super().__init__()
        self.a = a
        self.self_attention = causal_mask
        self.h, self.kv, self.hd = a["heads"], a["kv_heads"], a["head_dim"]
        self.q = nn.Linear(d, self.h * self.hd, bias=a["bias"])
        self.k = nn.Linear(d, self.kv * self.hd, bias=a["bias"])
        self.v = nn.Linear(d, self.kv * self.hd, bias=a["bias"])
        self.o = nn.Linear(self.h * self.hd, d, bias=a.get("out_bias", a["bias"]))
        # v3 qk_norm_width = projection (OLMoE): over the whole projections.
        self.full_qk_norm = a.get("qk_norm_width") == "projection"
        if a.get("qk_norm", False) and self.full_qk_norm:
            self.q_norm = HeadNorm(norm, self.h * self.hd)
            self.k_norm = HeadNorm(norm, self.kv * self.hd)
        elif a.get("qk_norm", False):
            self.q_norm = HeadNorm(norm, self.hd)
            self.k_norm = HeadNorm(norm, self.hd)
        self.clip = a.get("clip", 0.0)
        self.mask = a.get("mask", "none") if causal_mask else "none"
        self.window = a.get("window", 0)
        self.softcap = a.get("softcap", 0.0)
        if a.get("sinks", False):
            # gpt-oss (modeling_gpt_oss.py, eager_attention_forward): one
            # learned logit per head concatenated to every row of scores,
            # the softmax taken, its column dropped.
            self.sinks = nn.Parameter(torch.zeros(self.h))
        # A list, so that a shared table is not registered under the layer.
        self.position = [position]

    def forward(self, x, src, lengths):
        b, t, _ = x.shape
        s = src.shape[1]
        q, k, v = self.q(x), self.k(src), self.v(src)
        if self.full_qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(b, t, self.h, self.hd).transpose(1, 2)
        k = k.view(b, s, self.kv, self.hd).transpose(1, 2)
        v = v.view(b, s, self.kv, self.hd).transpose(1, 2)
        if hasattr(self, "q_norm") and not self.full_qk_norm:
            q = self.q_norm(q)
            k = self.k_norm(k)
        if self.clip > 0:  # OLMo's clip_qkv, after the norms
            q, k, v = (z.clamp(-self.clip, self.clip) for z in (q, k, v))
        pos = self.position[0]
        if pos is not None and pos[0] == "rope":
            q = rope(q, pos[1], pos[2], pos[3])
            k = rope(k, pos[1], pos[2], pos[3])
        if KV_ROUND is not None and self.self_attention:
            k, v = k.to(KV_ROUND).float(), v.to(KV_ROUND).float()
        rep = self.h // self.kv
        k = k.repeat_interleave(rep, 1)
        v = v.repeat_interleave(rep, 1)
        scores = q @ k.transpose(-1, -2) * self.a["scale"]
        if self.softcap > 0:
            scores = self.softcap * torch.tanh(scores / self.softcap)
        i = torch.arange(t)[:, None] + (s - t)
        j = torch.arange(s)[None, :]
        if pos is not None and pos[0] == "alibi":
            scores = scores + alibi_slopes(self.h)[:, None, None] * (j - i).float()
        if pos is not None and pos[0] == "relative":
            _, table, bidirectional, buckets, max_distance = pos
            bucket = relative_bucket(j - i, bidirectional, buckets, max_distance)
            scores = scores + table.weight[bucket].permute(2, 0, 1)
        masked = torch.zeros(t, s, dtype=torch.bool)
        if self.mask in ("causal", "sliding"):
            masked = masked | (j > i)
        if self.mask == "sliding":
            masked = masked | (j <= i - self.window)
        masked = masked[None, None].expand(b, 1, t, s)
        if lengths is not None:
            masked = masked | (j[None, None] >= lengths[:, None, None, None])
        scores = scores.masked_fill(masked, float("-inf"))
        if hasattr(self, "sinks"):
            sink = self.sinks.reshape(1, -1, 1, 1).expand(b, -1, t, 1)
            p = torch.softmax(torch.cat([scores, sink], -1), -1)[..., :-1]
            out = (p @ v).transpose(1, 2).reshape(b, t, self.h * self.hd)
            return self.o(out)
        p = torch.softmax(scores, -1)
        p = torch.where(torch.isnan(p), torch.zeros_like(p), p)  # all masked: 0
        out = (p @ v).transpose(1, 2).reshape(b, t, self.h * self.hd)
        return self.o(out)


class LatentAttention(nn.Module):
    """Multi-head latent attention as transformers' modeling_deepseek_v3.py
    (DeepseekV3Attention) computes it: the naive form, each head's key and
    value expanded from the latent (tfm computes the absorbed form)."""

    def __init__(self, a, d, position, norm):
        super().__init__()
        self.a = a
        self.h, self.hd, self.r = a["heads"], a["head_dim"], a["rope_dim"]
        self.nope, self.dv, self.rank = self.hd - self.r, a["value_dim"], a["kv_rank"]
        def latent_norm(width):
            # The stack's norm kind; a layernorm's bias is zero (tfm has
            # no latent norm bias; DeepSeek's are RMSNorms).
            n = make_norm(norm, width)
            if hasattr(n, "bias"):
                del n.bias
                n.register_buffer("bias", torch.zeros(width))
            return n
        if a["q_rank"]:
            self.q_a = nn.Linear(d, a["q_rank"], bias=False)
            self.q_a_norm = latent_norm(a["q_rank"])
            self.q_b = nn.Linear(a["q_rank"], self.h * self.hd, bias=False)
        else:
            self.q = nn.Linear(d, self.h * self.hd, bias=False)
        self.kv_a = nn.Linear(d, self.rank + self.r, bias=False)
        self.kv_a_norm = latent_norm(self.rank)
        self.kv_b = nn.Linear(self.rank, self.h * (self.nope + self.dv), bias=False)
        self.o = nn.Linear(self.h * self.dv, d, bias=False)
        self.mask = a.get("mask", "none")
        self.position = [position]

    def rotate(self, x):
        pos = self.position[0]
        if pos is None or pos[0] != "rope":
            return x
        if pos[2] == "interleaved":
            # apply_rotary_pos_emb_interleave: pairs (2i, 2i + 1) regrouped
            # as halves, then rotate_half.
            b, h, t, r = x.shape
            x = x.view(b, h, t, r // 2, 2).transpose(4, 3).reshape(b, h, t, r)
        return rope(x, pos[1], "half", pos[3])

    def forward(self, x, src, lengths):
        b, t, _ = x.shape
        q = self.q_b(self.q_a_norm(self.q_a(x))) if self.a["q_rank"] else self.q(x)
        q = q.view(b, t, self.h, self.hd).transpose(1, 2)
        q_pass, q_rot = q.split([self.nope, self.r], -1)
        k_pass, k_rot = self.kv_a(x).split([self.rank, self.r], -1)
        k_pass = self.kv_b(self.kv_a_norm(k_pass)).view(b, t, self.h, self.nope + self.dv)
        k_pass, v = k_pass.transpose(1, 2).split([self.nope, self.dv], -1)
        k_rot = k_rot.view(b, 1, t, self.r)
        q_rot, k_rot = self.rotate(q_rot), self.rotate(k_rot)
        k_rot = k_rot.expand(b, self.h, t, self.r)
        q = torch.cat([q_pass, q_rot], -1)
        k = torch.cat([k_pass, k_rot], -1)
        scores = q @ k.transpose(-1, -2) * self.a["scale"]
        i = torch.arange(t)[:, None]
        j = torch.arange(t)[None, :]
        masked = torch.zeros(t, t, dtype=torch.bool)
        if self.mask == "causal":
            masked = masked | (j > i)
        masked = masked[None, None].expand(b, 1, t, t)
        if lengths is not None:
            masked = masked | (j[None, None] >= lengths[:, None, None, None])
        p = torch.softmax(scores.masked_fill(masked, float("-inf")), -1)
        p = torch.where(torch.isnan(p), torch.zeros_like(p), p)
        out = (p @ v).transpose(1, 2).reshape(b, t, self.h * self.dv)
        return self.o(out)


class FFN(nn.Module):
    def __init__(self, f, d):
        super().__init__()
        self.act = f["activation"]
        self.up = nn.Linear(d, f["hidden"], bias=f["bias"])
        if self.act in GATED:
            self.gate = nn.Linear(d, f["hidden"], bias=f["bias"])
        self.down = nn.Linear(f["hidden"], d, bias=f["bias"])

    def forward(self, x):
        return gated_ffn(self.act, self.up, getattr(self, "gate", None), self.down)(x)


class Stacked(nn.Module):
    """E weights [E, out, in] (and biases [E, out]) of a mixture of experts."""

    def __init__(self, e, out, inp, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(e, out, inp))
        self.bias = nn.Parameter(torch.empty(e, out)) if bias else None

    def at(self, x, e):
        y = x @ self.weight[e].t()
        return y if self.bias is None else y + self.bias[e]


# The smallest gap, relative to the largest |score| of its row, between the
# last chosen and the first left-out score of every routing choice since
# the list was cleared: an implementation computing in f16 or bf16 chooses
# the same experts only where this exceeds its rounding (parity.py
# --router-margin).
ROUTER_GAPS = []


def select_topk(x, k):
    """torch.topk over the last dimension, recording the choice's margin."""
    if x.shape[-1] > k:
        s = torch.sort(x, -1, descending=True).values
        gap = (s[..., k - 1] - s[..., k]).abs() / s.abs().amax(-1).clamp_min(1e-30)
        ROUTER_GAPS.append(float(gap.min()))
    return torch.topk(x, k, -1)


GATED = ("swiglu", "geglu", "geglu_tanh", "swiglu_clamp")


def gated_ffn(act, up, gate, down):
    """An ffn (docs/Language.md, Activations) on callables up(x), gate(x),
    down(h)."""
    def run(x):
        if act == "swiglu_clamp":
            # gpt-oss (modeling_gpt_oss.py, GptOssExperts.forward).
            g = gate(x).clamp(max=7.0)
            u = up(x).clamp(min=-7.0, max=7.0)
            return down((u + 1) * (g * torch.sigmoid(g * 1.702)))
        if act == "swiglu":
            return down(F.silu(gate(x)) * up(x))
        if act == "geglu":
            return down(F.gelu(gate(x)) * up(x))
        if act == "geglu_tanh":
            return down(F.gelu(gate(x), approximate="tanh") * up(x))
        h = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu,
             "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
             "quick_gelu": lambda z: z * torch.sigmoid(1.702 * z)}[act](up(x))
        return down(h)
    return run


class MoE(nn.Module):
    """A mixture of experts (language v3, docs/Language.md): the router's
    logits, its K chosen experts and their weights (softmax over all then the
    top K, renormalized with `normalize`; or the top K logits' softmax), times
    routed_scale; the weighted sum of the chosen experts' ffns, plus a shared
    expert (times sigmoid(x . w) with shared_gate)."""

    def __init__(self, f, d):
        super().__init__()
        m = f["experts"]
        self.act, self.m = f["activation"], m
        e, h = m["count"], m["hidden"]
        gated = self.act in GATED
        self.router = nn.Linear(d, e, bias=m["router_bias"])
        if m.get("selection_bias"):
            self.router.selection_bias = nn.Parameter(torch.zeros(e))
        self.experts = nn.Module()
        self.experts.up = Stacked(e, h, d, f["bias"])
        if gated:
            self.experts.gate = Stacked(e, h, d, f["bias"])
        self.experts.down = Stacked(e, d, h, f["bias"])
        if m["shared_hidden"]:
            s = m["shared_hidden"]
            self.shared = nn.Module()
            self.shared.up = nn.Linear(d, s, bias=False)
            if gated:
                self.shared.gate = nn.Linear(d, s, bias=False)
            self.shared.down = nn.Linear(s, d, bias=False)
            if m["shared_gate"]:
                self.shared.scale = nn.Linear(d, 1, bias=False)

    def forward(self, x):
        m = self.m
        logits = self.router(x)
        k = m["per_token"]
        groups, topk_groups = m.get("groups", 1), m.get("topk_groups", 1)

        def group_mask(group_score):
            # The experts of the topk_groups best groups.
            gidx = select_topk(group_score, topk_groups).indices
            mask = torch.zeros_like(group_score).scatter_(-1, gidx, 1.0)
            return mask.repeat_interleave(m["count"] // groups, -1).bool()

        if m["router"] == "sigmoid":
            # DeepSeek-V3 (modeling_deepseek_v3.py, route_tokens_to_experts).
            scores = torch.sigmoid(logits)
            choice = scores + self.router.selection_bias if m["selection_bias"] else scores
            if groups > 1:
                split = choice.view(*choice.shape[:-1], groups, -1)
                group_score = torch.topk(split, 2, -1).values.sum(-1)
                choice = choice.masked_fill(~group_mask(group_score), 0.0)
            idx = select_topk(choice, k).indices
            w = scores.gather(-1, idx)
            if m["normalize"]:
                w = w / (w.sum(-1, keepdim=True) + 1e-20)
        elif m["router"] == "softmax":
            p = torch.softmax(logits, -1)
            if groups > 1:
                # DeepSeek-V2's group_limited_greedy: a group's best probability.
                group_score = p.view(*p.shape[:-1], groups, -1).max(-1).values
                p = p.masked_fill(~group_mask(group_score), 0.0)
            w, idx = select_topk(p, k)
            if m["normalize"]:
                w = w / w.sum(-1, keepdim=True)
        else:  # topk_softmax
            w, idx = select_topk(logits, k)
            w = torch.softmax(w, -1)
        w = w * m["routed_scale"]
        y = torch.zeros_like(x)
        ex = self.experts
        for e in range(m["count"]):
            we = (w * (idx == e)).sum(-1, keepdim=True)
            if not bool((we != 0).any()):
                continue
            run = gated_ffn(self.act, lambda z: ex.up.at(z, e),
                            (lambda z: ex.gate.at(z, e)) if hasattr(ex, "gate") else None,
                            lambda z: ex.down.at(z, e))
            y = y + we * run(x)
        if m["shared_hidden"]:
            sh = self.shared
            s = gated_ffn(self.act, sh.up, getattr(sh, "gate", None), sh.down)(x)
            if m["shared_gate"]:
                s = s * torch.sigmoid(sh.scale(x))
            y = y + s
        return y


def is_sparse(f, index):
    m = f.get("experts")
    return bool(m) and index >= m["first_dense"] and (index + 1) % m["sparse_every"] == 0


class Layer(nn.Module):
    def __init__(self, st, d, parallel, cross, position, index=0):
        super().__init__()
        self.placement = st["norm"]["placement"]
        self.pre = self.placement == "pre"
        self.parallel = parallel  # 0: sequential, else the number of norms
        attn = dict(st["attention"])
        # sliding(global_every = K): layer i with (i + 1) % K == 0 is causal.
        k = attn.get("global_every", 0)
        if attn.get("mask") == "sliding" and k and (index + 1) % k == 0:
            attn["mask"] = "causal"
        self.attn_norm = make_norm(st["norm"], d)
        if attn.get("kv_rank"):
            self.attn = LatentAttention(attn, d, position, st["norm"])
        else:
            self.attn = Attention(attn, d, True, position, st["norm"])
        if self.placement == "sandwich":
            self.attn_post_norm = make_norm(st["norm"], d)
        if cross:
            self.cross_norm = make_norm(st["norm"], d)
            self.cross_attn = Attention(st["cross_attention"], d, False, None,
                                        st["norm"])
        self.cross = cross
        if parallel != 1:
            self.ffn_norm = make_norm(st["norm"], d)
        self.ffn = MoE(st["ffn"], d) if is_sparse(st["ffn"], index) else FFN(st["ffn"], d)
        if self.placement == "sandwich":
            self.ffn_post_norm = make_norm(st["norm"], d)

    def forward(self, x, lengths, memory, mem_lengths):
        if self.parallel:
            h = self.attn_norm(x)
            h2 = self.ffn_norm(x) if self.parallel == 2 else h
            return x + self.attn(h, h, lengths) + self.ffn(h2)
        rs = getattr(self, "rs", 1.0)
        if self.placement == "sandwich":
            h = self.attn_norm(x)
            x = x + rs * self.attn_post_norm(self.attn(h, h, lengths))
            return x + rs * self.ffn_post_norm(self.ffn(self.ffn_norm(x)))
        if self.pre:
            h = self.attn_norm(x)
            x = x + rs * self.attn(h, h, lengths)
            if self.cross:
                x = x + rs * self.cross_attn(self.cross_norm(x), memory, mem_lengths)
            return x + rs * self.ffn(self.ffn_norm(x))
        x = self.attn_norm(x + rs * self.attn(x, x, lengths))
        if self.cross:
            x = self.cross_norm(x + rs * self.cross_attn(x, memory, mem_lengths))
        return self.ffn_norm(x + rs * self.ffn(x))


class Stack(nn.Module):
    def __init__(self, spec, st):
        super().__init__()
        d = spec["d_model"]
        self.st = st
        self.d = d
        emb = st["embedding"]
        if emb["position"] == "learned":
            self.positions = nn.Parameter(torch.zeros(spec["context"], d))
        if st["embedding"].get("norm"):
            self.embed_norm = make_norm(st["norm"], d)
        # Positions inside self-attention.
        position = None
        if emb["position"] == "rope":
            inv = rope_inv_freq(emb, st["attention"]["head_dim"])
            position = ("rope", inv, emb["rope_style"],
                        emb.get("rope_attention_factor", 1.0))
        elif emb["position"] == "alibi":
            position = ("alibi",)
        elif emb["position"] == "relative":
            # embed.relative.weight [buckets, heads], one per stack.
            buckets = emb.get("relative_buckets", 32)
            self.embed = nn.Module()
            self.embed.relative = nn.Embedding(buckets, st["attention"]["heads"])
            position = ("relative", self.embed.relative, st["name"] == "encoder",
                        buckets, emb.get("relative_max_distance", 128))
        parallel = spec.get("residual_norms", 1) if spec["residual"] == "parallel" else 0
        self.layers = nn.ModuleList(
            Layer(st, d, parallel, "cross_attention" in st, position, i)
            for i in range(st["layers"]))
        # v3 sequential(scale = X): GraniteMoE's residual_multiplier.
        for layer in self.layers:
            layer.rs = spec.get("residual_scale", 1.0)
        if st["norm"]["final"]:
            self.final_norm = make_norm(st["norm"], d, final=True)

    def forward(self, x, lengths=None, memory=None, mem_lengths=None):
        t = x.shape[1]
        pos = self.st["embedding"]["position"]
        if pos == "learned":
            x = x + self.positions[:t]
        elif pos == "sinusoidal":
            p = torch.arange(t, dtype=torch.float64)[:, None]
            i2 = torch.arange(0, self.d, 2, dtype=torch.float64)
            ang = p / (10000.0 ** (i2 / self.d))
            pe = torch.zeros(t, self.d, dtype=torch.float64)
            pe[:, 0::2] = torch.sin(ang)
            pe[:, 1::2] = torch.cos(ang)[:, : self.d // 2]
            x = x + pe.float()
        if hasattr(self, "embed_norm"):
            x = self.embed_norm(x)
        for layer in self.layers:
            x = layer(x, lengths, memory, mem_lengths)
        if self.st["norm"]["final"]:
            x = self.final_norm(x)
        return x


class Model(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.spec = spec
        d = spec["d_model"]
        inp = spec["input"]
        if inp["kind"] == "image":
            c, p = inp["channels"], inp["patch"]
            self.patch = nn.Linear(c * p * p, d)
            if spec["stacks"][-1]["embedding"]["cls_token"]:
                self.cls_token = nn.Parameter(torch.zeros(d))
        elif inp["kind"] == "tokens":
            self.tokens = nn.Parameter(torch.zeros(spec["vocab"], d))
        types = spec["stacks"][-1]["embedding"].get("types", 0)
        if types:
            self.types = nn.Parameter(torch.zeros(types, d))
        self.stacks = nn.ModuleList(Stack(spec, st) for st in spec["stacks"])
        out = spec["output"]
        top = spec["stacks"][-1]
        if out["kind"] == "lm_head" and not top["embedding"]["tie_output"]:
            self.lm_head = nn.Linear(d, spec["vocab"], bias=False)
        if out["kind"] == "lm_head" and out.get("bias"):
            self.lm_head_bias = nn.Parameter(torch.zeros(spec["vocab"]))
        if out["kind"] == "classifier":
            self.classifier = nn.Linear(d, out["classes"])

    def embed(self, tokens, st):
        x = F.embedding(tokens.long(), self.tokens)
        if st["embedding"]["scale"]:
            x = x * math.sqrt(self.spec["d_model"])
        # v3 multiplier (GraniteMoE's embedding_multiplier).
        return x * st["embedding"].get("multiplier", 1.0)

    def forward(self, inputs):
        spec = self.spec
        if spec["arch"] == "encoder_decoder":
            enc, dec = self.stacks
            sl = inputs.get("src_lengths")
            tl = inputs.get("tgt_lengths")
            mem = enc(self.embed(inputs["src"], spec["stacks"][0]), sl)
            x = dec(self.embed(inputs["tgt"], spec["stacks"][1]), tl, mem, sl)
            lengths = tl
        else:
            st = spec["stacks"][-1]
            lengths = inputs.get("lengths")
            if spec["input"]["kind"] == "image":
                px = inputs["pixels"]
                b, c, s, _ = px.shape
                p = spec["input"]["patch"]
                g = s // p
                x = px.reshape(b, c, g, p, g, p).permute(0, 2, 4, 1, 3, 5)
                x = self.patch(x.reshape(b, g * g, c * p * p))
                if st["embedding"]["cls_token"]:
                    x = torch.cat([self.cls_token.expand(b, 1, -1), x], 1)
            elif spec["input"]["kind"] == "features":
                x = inputs["features"]
            else:
                x = self.embed(inputs["tokens"], st)
                if hasattr(self, "types"):
                    types = inputs.get("types")
                    if types is None:
                        types = torch.zeros_like(inputs["tokens"])
                    x = x + F.embedding(types.long(), self.types)
            x = self.stacks[0](x, lengths)
        out = spec["output"]
        if out["kind"] == "hidden":
            return x
        if out["kind"] == "lm_head":
            w = self.lm_head.weight if hasattr(self, "lm_head") else self.tokens
            y = x @ w.t()
            if hasattr(self, "lm_head_bias"):
                y = y + self.lm_head_bias
            y = y * out.get("scale", 1.0)
            cap = out.get("softcap", 0.0)
            if cap > 0:
                y = cap * torch.tanh(y / cap)
            return y
        if out["pool"] == "cls":
            pooled = x[:, 0]
        elif lengths is not None:
            keep = torch.arange(x.shape[1])[None, :, None] < lengths[:, None, None]
            pooled = (x * keep).sum(1) / lengths.clamp(min=1)[:, None].float()
        else:
            pooled = x.mean(1)
        return self.classifier(pooled)


def canonical_state(model, spec):
    """Maps the torch module's parameters to the canonical weight names."""
    out = {}
    for name, p in model.named_parameters():
        parts = name.split(".")
        if parts[0] == "tokens":
            key = "embed.tokens.weight"
        elif parts[0] == "types":
            key = "embed.types.weight"
        elif parts[0] == "lm_head_bias":
            key = "lm_head.bias"
        elif parts[0] == "cls_token":
            key = "embed.cls_token"
        elif parts[0] == "stacks":
            st = spec["stacks"][int(parts[1])]
            rest = parts[2:]
            if rest[0] == "positions":
                key = st["prefix"] + "embed.positions.weight"
            elif rest[0] == "embed_norm":
                key = st["prefix"] + "embed.norm." + rest[1]
            else:
                key = st["prefix"] + ".".join(rest)
        else:
            key = name
        out[key] = p.detach()
    return out


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 2 and "positions" not in name and name != "tokens":
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
            elif p.dim() == 3:  # experts' stacks [E, out, in]
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[2]))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)


def write_safetensors(path, tensors, dtype="F32"):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        a = t.float().contiguous()
        if dtype == "F16":
            data = a.half().numpy().tobytes()
        elif dtype == "BF16":
            data = (a.bfloat16().view(torch.int16).numpy().tobytes())
        else:
            data = a.numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def round_weights(model, dtype):
    """Makes the reference use exactly the values stored in F16/BF16."""
    with torch.no_grad():
        for p in model.parameters():
            if dtype == "F16":
                p.copy_(p.half().float())
            elif dtype == "BF16":
                p.copy_(p.bfloat16().float())
