#!/usr/bin/env python3
"""PyTorch forward passes of Hugging Face model types, from their equations.

forward(folder, inputs) reads a Hugging Face model folder (config.json and
the safetensors checkpoint, single file or sharded with an index), and
computes, in float32, what the Hugging Face model of that `model_type`
computes:

  decoders (gpt2 ... bloom)     inputs["tokens"] [B, T]   -> logits [B, T, V]
  mixtral, qwen2_moe, qwen3_moe, olmoe, granitemoe, gpt_oss, deepseek_v2,
  deepseek_v3 (mixture of experts, computed in float64; DeepSeek's FP8
  weights dequantized)          inputs["tokens"] [B, T]   -> logits [B, T, V]
  bert, roberta                 inputs["tokens"] (+ "types") -> last hidden state
  vit                           inputs["pixels"] [B, C, S, S] -> last hidden state
  t5, bart                      inputs["src"], inputs["tgt"] -> logits
  whisper (the encoder)         inputs["features"] [B, T, d_model], the
                                output of the conv stem + GELU -> last hidden state

Written from the modeling code of `transformers` (modeling_<type>.py) as a
reader of it, without importing it (it is not installed) and without any tfm
code: tensors are read under their Hugging Face names, fused projections are
split as Hugging Face splits them.
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

# One thread: the reference models are small, and the suite runs two
# tests at once (more threads spin and wait more than they compute).
torch.set_num_threads(1)

# ---------------------------------------------------------------------------
# checkpoint reading

_NP = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
       "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
       "BOOL": np.bool_}


def read_safetensors(path):
    out = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[a:b]
        shape = info["shape"]
        if info["dtype"] == "BF16":
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        elif info["dtype"] == "F8_E4M3":
            arr = e4m3_table().astype(np.float32)[np.frombuffer(raw, dtype=np.uint8)]
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(_NP[info["dtype"]]).newbyteorder("<"))
        arr = arr.reshape(shape)
        t = torch.from_numpy(arr.copy())
        if t.is_floating_point():
            t = t.float()
        out[name] = t
    return out


def e4m3_table():
    """The value of each OCP e4m3fn code (float8_e4m3fn): sign, exponent
    (4 bits, bias 7), mantissa (3 bits); exponent 0 subnormal; 0x7F and 0xFF
    NaN; no infinities."""
    s = np.arange(256) >> 7
    e = (np.arange(256) >> 3) & 15
    m = (np.arange(256) & 7).astype(np.float64)
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return np.where(s == 1, -v, v)


def load(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    index = os.path.join(folder, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        for fn in files:
            tensors.update(read_safetensors(os.path.join(folder, fn)))
    else:
        tensors = read_safetensors(os.path.join(folder, "model.safetensors"))
    return cfg, tensors


class Tensors:
    """Looks a name up with or without the base-model prefix, as Hugging
    Face's loader accepts both."""

    def __init__(self, tensors, prefix):
        self.t = tensors
        self.prefix = prefix

    def __contains__(self, name):
        return self._find(name) is not None

    def _find(self, name):
        for cand in (name, self.prefix + name,
                     name[len(self.prefix):] if self.prefix and name.startswith(self.prefix) else None):
            if cand is not None and cand in self.t:
                return cand
        return None

    def __getitem__(self, name):
        k = self._find(name)
        if k is None:
            raise KeyError("tensor %s not in the checkpoint" % name)
        return self.t[k]

    def get(self, name):
        k = self._find(name)
        return self.t[k] if k is not None else None


# ---------------------------------------------------------------------------
# building blocks

def act_fn(name):
    fns = {
        "gelu": F.gelu,
        "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
        "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "gelu_fast": lambda x: F.gelu(x, approximate="tanh"),
        "relu": F.relu,
        "silu": F.silu,
        "swish": F.silu,
        "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
    }
    if name not in fns:
        raise NotImplementedError("activation %s" % name)
    return fns[name]


def bloom_gelu(x):
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def linear(x, W, prefix):
    return F.linear(x, W[prefix + ".weight"], W.get(prefix + ".bias"))


def layernorm(x, W, prefix, eps):
    return F.layer_norm(x, (x.shape[-1],), W[prefix + ".weight"], W.get(prefix + ".bias"), eps)


def rmsnorm(x, w, eps, offset=0.0):
    var = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(var + eps) * (offset + w)


def t5_layernorm(x, w, eps):
    # T5LayerNorm: no mean subtraction, no bias
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def split_heads(x, n, hd):
    b, t, _ = x.shape
    return x.view(b, t, n, hd).transpose(1, 2)


def merge_heads(x):
    b, h, t, hd = x.shape
    return x.transpose(1, 2).reshape(b, t, h * hd)


def attention(q, k, v, scale, causal=False, window=0, bias=None, softcap=0.0):
    """q [B, H, T, D], k and v [B, KV, S, D] (query head h reads kv head
    h // (H / KV)); bias added to the scores (broadcast to [B, H, T, S])."""
    h, kv = q.shape[1], k.shape[1]
    if kv != h:
        k = k.repeat_interleave(h // kv, 1)
        v = v.repeat_interleave(h // kv, 1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap:
        s = torch.tanh(s / softcap) * softcap
    if bias is not None:
        s = s + bias
    t, sk = q.shape[2], k.shape[2]
    i = torch.arange(t)[:, None] + (sk - t)
    j = torch.arange(sk)[None, :]
    masked = torch.zeros(t, sk, dtype=torch.bool)
    if causal:
        masked |= j > i
    if window:
        masked |= j <= i - window
    s = s.masked_fill(masked, float("-inf"))
    # float32 softmax as the Hugging Face code has it (the mixture-of-experts
    # types compute everything in float64 and keep it)
    p = torch.softmax(s if s.dtype == torch.float64 else s.float(), -1)
    return torch.matmul(p, v)


def rope_inv_freq(cfg, dim, theta):
    """Default inverse frequencies, then rope_scaling (linear / llama3) as
    Hugging Face's modeling_rope_utils computes them."""
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).double() / dim))
    sc = cfg.get("rope_scaling")
    if not sc:
        return inv
    kind = sc.get("rope_type", sc.get("type"))
    if kind in (None, "default"):
        return inv
    if kind == "linear":
        return inv / sc["factor"]
    if kind == "llama3":
        factor = sc["factor"]
        low, high = sc["low_freq_factor"], sc["high_freq_factor"]
        old = sc["original_max_position_embeddings"]
        low_wl, high_wl = old / low, old / high
        wl = 2 * math.pi / inv
        scaled = torch.where(wl > low_wl, inv / factor, inv)
        smooth = (old / wl - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wl < high_wl) & ~(wl > low_wl)
        return torch.where(medium, smoothed, scaled)
    raise NotImplementedError("rope_scaling type %s" % kind)


def rope_half(x, inv, rot):
    """rotate_half RoPE on the first `rot` dims of each head (the rest pass)."""
    t = x.shape[2]
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], -1)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    xr, xp = x[..., :rot], x[..., rot:]
    x1, x2 = xr[..., : rot // 2], xr[..., rot // 2:]
    rotated = torch.cat([-x2, x1], -1)
    return torch.cat([xr * cos + rotated * sin, xp], -1)


def rope_interleaved(x, inv, rot):
    """GPT-J's rotate_every_two on the first `rot` dims."""
    t = x.shape[2]
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    cos = ang.cos().float().repeat_interleave(2, -1)
    sin = ang.sin().float().repeat_interleave(2, -1)
    xr, xp = x[..., :rot], x[..., rot:]
    x1, x2 = xr[..., 0::2], xr[..., 1::2]
    rotated = torch.stack([-x2, x1], -1).flatten(-2)
    return torch.cat([xr * cos + rotated * sin, xp], -1)


def embed(W, name, ids):
    return F.embedding(ids.long(), W[name])


# ---------------------------------------------------------------------------
# decoders

def gpt2(cfg, W, inp):
    ids = inp["tokens"]
    t = ids.shape[1]
    d, H = cfg["n_embd"], cfg["n_head"]
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    act = act_fn(cfg.get("activation_function", "gelu_new"))
    hd = d // H

    def conv1d(x, p):  # Conv1D: weight [in, out]
        return x @ W[p + ".weight"] + W[p + ".bias"]

    x = embed(W, "wte.weight", ids) + W["wpe.weight"][:t]
    for i in range(cfg["n_layer"]):
        p = "h.%d." % i
        h = layernorm(x, W, p + "ln_1", eps)
        q, k, v = conv1d(h, p + "attn.c_attn").split(d, -1)
        q, k, v = (split_heads(z, H, hd) for z in (q, k, v))
        scale = 1.0 / math.sqrt(hd) if cfg.get("scale_attn_weights", True) else 1.0
        if cfg.get("scale_attn_by_inverse_layer_idx"):
            scale /= float(i + 1)
        a = merge_heads(attention(q, k, v, scale, causal=True))
        x = x + conv1d(a, p + "attn.c_proj")
        h = layernorm(x, W, p + "ln_2", eps)
        x = x + conv1d(act(conv1d(h, p + "mlp.c_fc")), p + "mlp.c_proj")
    x = layernorm(x, W, "ln_f", eps)
    return x @ W["wte.weight"].t()


def gpt_neox(cfg, W, inp):
    ids = inp["tokens"]
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = d // H
    eps = cfg.get("layer_norm_eps", 1e-5)
    rot = int(hd * cfg.get("rotary_pct", 0.25))
    theta = cfg.get("rope_theta", cfg.get("rotary_emb_base", 10000))
    inv = rope_inv_freq(cfg, rot, theta)
    act = act_fn(cfg.get("hidden_act", "gelu"))
    x = embed(W, "gpt_neox.embed_in.weight", ids)
    for i in range(cfg["num_hidden_layers"]):
        p = "gpt_neox.layers.%d." % i
        h = layernorm(x, W, p + "input_layernorm", eps)
        qkv = linear(h, W, p + "attention.query_key_value")
        b, t, _ = qkv.shape
        qkv = qkv.view(b, t, H, 3 * hd).permute(0, 2, 1, 3)  # per head: q, k, v
        q, k, v = qkv[..., :hd], qkv[..., hd:2 * hd], qkv[..., 2 * hd:]
        q, k = rope_half(q, inv, rot), rope_half(k, inv, rot)
        a = linear(merge_heads(attention(q, k, v, 1.0 / math.sqrt(hd), causal=True)), W, p + "attention.dense")

        def mlp(z):
            return linear(act(linear(z, W, p + "mlp.dense_h_to_4h")), W, p + "mlp.dense_4h_to_h")
        if cfg.get("use_parallel_residual", True):
            x = x + a + mlp(layernorm(x, W, p + "post_attention_layernorm", eps))
        else:
            x = x + a
            x = x + mlp(layernorm(x, W, p + "post_attention_layernorm", eps))
    x = layernorm(x, W, "gpt_neox.final_layer_norm", eps)
    if cfg.get("tie_word_embeddings", False):
        return x @ W["gpt_neox.embed_in.weight"].t()
    return x @ W["embed_out.weight"].t()


def gptj(cfg, W, inp):
    ids = inp["tokens"]
    d, H = cfg["n_embd"], cfg["n_head"]
    hd = d // H
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    rot = cfg.get("rotary_dim") or hd
    inv = rope_inv_freq(cfg, rot, 10000.0)
    act = act_fn(cfg.get("activation_function", "gelu_new"))
    x = embed(W, "transformer.wte.weight", ids)
    for i in range(cfg["n_layer"]):
        p = "transformer.h.%d." % i
        h = layernorm(x, W, p + "ln_1", eps)
        q, k, v = (split_heads(linear(h, W, p + "attn.%s_proj" % m), H, hd) for m in "qkv")
        q, k = rope_interleaved(q, inv, rot), rope_interleaved(k, inv, rot)
        a = linear(merge_heads(attention(q, k, v, 1.0 / math.sqrt(hd), causal=True)), W, p + "attn.out_proj")
        m = linear(act(linear(h, W, p + "mlp.fc_in")), W, p + "mlp.fc_out")
        x = x + a + m
    x = layernorm(x, W, "transformer.ln_f", eps)
    return linear(x, W, "lm_head")


TIED_DEFAULT = {"llama": False, "mistral": False, "qwen2": False, "qwen3": False,
                "gemma": True, "gemma2": True, "phi3": False}


def llama_family(cfg, W, inp):
    """llama, mistral, qwen2, qwen3, gemma, gemma2, phi3."""
    mt = cfg["model_type"]
    ids = inp["tokens"]
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or d // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    gemma = mt in ("gemma", "gemma2")
    off = 1.0 if gemma else 0.0
    rot = int(hd * cfg.get("partial_rotary_factor", 1.0))
    inv = rope_inv_freq(cfg, rot, cfg.get("rope_theta", 10000.0))
    if gemma:
        act = act_fn(cfg.get("hidden_activation") or "gelu_pytorch_tanh")
    else:
        act = act_fn(cfg.get("hidden_act", "silu"))
    scale = 1.0 / math.sqrt(hd)
    softcap = 0.0
    if mt == "gemma2":
        scale = cfg["query_pre_attn_scalar"] ** -0.5
        softcap = cfg.get("attn_logit_softcapping") or 0.0
    if mt in ("qwen2", "qwen3") and cfg.get("use_sliding_window"):
        raise NotImplementedError("use_sliding_window")

    def norm(z, name):
        return rmsnorm(z, W[name + ".weight"], eps, off)

    x = embed(W, "model.embed_tokens.weight", ids)
    if gemma:
        x = x * torch.tensor(d ** 0.5, dtype=x.dtype)
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        window = 0
        if mt in ("mistral", "phi3") and cfg.get("sliding_window"):
            window = cfg["sliding_window"]
        if mt == "gemma2" and i % 2 == 0:  # is_sliding = not bool(layer_idx % 2)
            window = cfg["sliding_window"]
        h = norm(x, p + "input_layernorm")
        if mt == "phi3":
            qkv = linear(h, W, p + "self_attn.qkv_proj")
            q, k, v = qkv.split([H * hd, KV * hd, KV * hd], -1)
        else:
            q, k, v = (linear(h, W, p + "self_attn.%s_proj" % m) for m in "qkv")
        q, k, v = split_heads(q, H, hd), split_heads(k, KV, hd), split_heads(v, KV, hd)
        if mt == "qwen3":
            q = rmsnorm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = rope_half(q, inv, rot), rope_half(k, inv, rot)
        a = attention(q, k, v, scale, causal=True, window=window, softcap=softcap)
        a = linear(merge_heads(a), W, p + "self_attn.o_proj")
        if mt == "gemma2":
            x = x + norm(a, p + "post_attention_layernorm")
            h = norm(x, p + "pre_feedforward_layernorm")
        else:
            x = x + a
            h = norm(x, p + "post_attention_layernorm")
        if mt == "phi3":
            gate, up = linear(h, W, p + "mlp.gate_up_proj").chunk(2, -1)
        else:
            gate, up = linear(h, W, p + "mlp.gate_proj"), linear(h, W, p + "mlp.up_proj")
        m = linear(act(gate) * up, W, p + "mlp.down_proj")
        if mt == "gemma2":
            m = norm(m, p + "post_feedforward_layernorm")
        x = x + m
    x = norm(x, "model.norm")
    if cfg.get("tie_word_embeddings", TIED_DEFAULT[mt]):
        logits = x @ W["model.embed_tokens.weight"].t()
    else:
        logits = x @ W["lm_head.weight"].t()
    if mt == "gemma2" and cfg.get("final_logit_softcapping"):
        c = cfg["final_logit_softcapping"]
        logits = torch.tanh(logits / c) * c
    return logits


def phi(cfg, W, inp):
    ids = inp["tokens"]
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd = d // H
    eps = cfg.get("layer_norm_eps", 1e-5)
    rot = int(hd * cfg.get("partial_rotary_factor", 0.5))
    inv = rope_inv_freq(cfg, rot, cfg.get("rope_theta", 10000.0))
    act = act_fn(cfg.get("hidden_act", "gelu_new"))
    if cfg.get("qk_layernorm"):
        raise NotImplementedError("qk_layernorm")
    x = embed(W, "model.embed_tokens.weight", ids)
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = layernorm(x, W, p + "input_layernorm", eps)
        q = split_heads(linear(h, W, p + "self_attn.q_proj"), H, hd)
        k = split_heads(linear(h, W, p + "self_attn.k_proj"), KV, hd)
        v = split_heads(linear(h, W, p + "self_attn.v_proj"), KV, hd)
        q, k = rope_half(q, inv, rot), rope_half(k, inv, rot)
        a = linear(merge_heads(attention(q, k, v, 1.0 / math.sqrt(hd), causal=True)), W, p + "self_attn.dense")
        m = linear(act(linear(h, W, p + "mlp.fc1")), W, p + "mlp.fc2")
        x = x + a + m
    x = layernorm(x, W, "model.final_layernorm", eps)
    if cfg.get("tie_word_embeddings", False):
        return x @ W["model.embed_tokens.weight"].t()
    return linear(x, W, "lm_head")


def falcon(cfg, W, inp):
    ids = inp["tokens"]
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = d // H
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    new = cfg.get("new_decoder_architecture", False)
    mq = cfg.get("multi_query", True)
    parallel = cfg.get("parallel_attn", True)
    n_ln = cfg.get("num_ln_in_parallel_attn") or (2 if new else 1)
    KV = (cfg.get("num_kv_heads") or H) if (new or not mq) else 1
    if cfg.get("alibi"):
        raise NotImplementedError("falcon with alibi")
    inv = rope_inv_freq(cfg, hd, cfg.get("rope_theta", 10000.0))
    act = act_fn(cfg.get("activation", "gelu"))
    x = embed(W, "transformer.word_embeddings.weight", ids)
    for i in range(cfg["num_hidden_layers"]):
        p = "transformer.h.%d." % i
        if new and n_ln == 2:
            ha = layernorm(x, W, p + "ln_attn", eps)
            hm = layernorm(x, W, p + "ln_mlp", eps)
        else:
            ha = layernorm(x, W, p + "input_layernorm", eps)
            hm = ha
        fused = linear(ha, W, p + "self_attention.query_key_value")
        b, t, _ = fused.shape
        if new:
            g = fused.view(b, t, KV, H // KV + 2, hd)
            q = g[:, :, :, :-2].reshape(b, t, H, hd)
            k, v = g[:, :, :, -2], g[:, :, :, -1]  # [b, t, KV, hd]
        elif mq:
            g = fused.view(b, t, H + 2, hd)
            q, k, v = g[:, :, :-2], g[:, :, -2:-1], g[:, :, -1:]
        else:
            g = fused.view(b, t, H, 3, hd)
            q, k, v = g[..., 0, :], g[..., 1, :], g[..., 2, :]
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        q, k = rope_half(q, inv, hd), rope_half(k, inv, hd)
        a = linear(merge_heads(attention(q, k, v, 1.0 / math.sqrt(hd), causal=True)), W, p + "self_attention.dense")
        if not new and not parallel:
            x = x + a
            hm = layernorm(x, W, p + "post_attention_layernorm", eps)
        m = linear(act(linear(hm, W, p + "mlp.dense_h_to_4h")), W, p + "mlp.dense_4h_to_h")
        x = x + m + a if (new or parallel) else x + m
    x = layernorm(x, W, "transformer.ln_f", eps)
    if cfg.get("tie_word_embeddings", True):
        return x @ W["transformer.word_embeddings.weight"].t()
    return x @ W["lm_head.weight"].t()


def alibi_slopes(n):
    """BLOOM's build_alibi_tensor slopes."""
    closest = 2 ** math.floor(math.log2(n))
    base = 2 ** (-(2 ** -(math.log2(closest) - 3)))
    slopes = [base ** k for k in range(1, closest + 1)]
    if closest != n:
        extra_base = 2 ** (-(2 ** -(math.log2(2 * closest) - 3)))
        rem = min(closest, n - closest)
        slopes += [extra_base ** k for k in range(1, 1 + 2 * rem, 2)]
    return torch.tensor(slopes, dtype=torch.float32)


def bloom(cfg, W, inp):
    ids = inp["tokens"]
    d = cfg["hidden_size"]
    H = cfg.get("n_head", cfg.get("num_attention_heads"))
    L = cfg.get("n_layer", cfg.get("num_hidden_layers"))
    hd = d // H
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    post = cfg.get("apply_residual_connection_post_layernorm", False)
    b, t = ids.shape
    # alibi = slope_h * key position (the same softmax as slope_h * (j - i))
    alibi = alibi_slopes(H)[:, None, None] * torch.arange(t, dtype=torch.float32)[None, None, :]
    x = embed(W, "transformer.word_embeddings.weight", ids)
    x = layernorm(x, W, "transformer.word_embeddings_layernorm", eps)
    for i in range(L):
        p = "transformer.h.%d." % i
        h = layernorm(x, W, p + "input_layernorm", eps)
        g = linear(h, W, p + "self_attention.query_key_value").view(b, t, H, 3, hd)
        q, k, v = (g[..., j, :].transpose(1, 2) for j in range(3))
        a = attention(q, k, v, 1.0 / math.sqrt(hd), causal=True, bias=alibi[None])
        a = linear(merge_heads(a), W, p + "self_attention.dense")
        x = (h if post else x) + a
        h2 = layernorm(x, W, p + "post_attention_layernorm", eps)
        m = linear(bloom_gelu(linear(h2, W, p + "mlp.dense_h_to_4h")), W, p + "mlp.dense_4h_to_h")
        x = (h2 if post else x) + m
    x = layernorm(x, W, "transformer.ln_f", eps)
    return x @ W["transformer.word_embeddings.weight"].t()


# ---------------------------------------------------------------------------
# encoders

def bert(cfg, W, inp):
    mt = cfg["model_type"]
    ids = inp["tokens"].long()
    b, t = ids.shape
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = d // H
    eps = cfg.get("layer_norm_eps", 1e-12)
    act = act_fn(cfg.get("hidden_act", "gelu"))
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise NotImplementedError("position_embedding_type")
    e = "embeddings."
    if mt == "roberta":
        pad = cfg["pad_token_id"]
        mask = (ids != pad).long()
        pos = torch.cumsum(mask, 1) * mask + pad
    else:
        pos = torch.arange(t)[None, :].expand(b, t)
    types = inp.get("types")
    types = torch.zeros_like(ids) if types is None else types.long()
    x = (F.embedding(ids, W[e + "word_embeddings.weight"])
         + F.embedding(types, W[e + "token_type_embeddings.weight"])
         + F.embedding(pos, W[e + "position_embeddings.weight"]))
    x = layernorm(x, W, e + "LayerNorm", eps)
    for i in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % i
        q, k, v = (split_heads(linear(x, W, p + "attention.self." + m), H, hd)
                   for m in ("query", "key", "value"))
        a = linear(merge_heads(attention(q, k, v, 1.0 / math.sqrt(hd))), W, p + "attention.output.dense")
        x = layernorm(a + x, W, p + "attention.output.LayerNorm", eps)
        m = linear(act(linear(x, W, p + "intermediate.dense")), W, p + "output.dense")
        x = layernorm(m + x, W, p + "output.LayerNorm", eps)
    return x


def vit(cfg, W, inp):
    px = inp["pixels"].float()
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = d // H
    eps = cfg.get("layer_norm_eps", 1e-12)
    act = act_fn(cfg.get("hidden_act", "gelu"))
    e = "embeddings."
    P = cfg["patch_size"]
    x = F.conv2d(px, W[e + "patch_embeddings.projection.weight"],
                 W[e + "patch_embeddings.projection.bias"], stride=P)
    x = x.flatten(2).transpose(1, 2)
    b = x.shape[0]
    x = torch.cat([W[e + "cls_token"].expand(b, -1, -1), x], 1)
    x = x + W[e + "position_embeddings"]
    for i in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % i
        h = layernorm(x, W, p + "layernorm_before", eps)
        q, k, v = (split_heads(linear(h, W, p + "attention.attention." + m), H, hd)
                   for m in ("query", "key", "value"))
        x = x + linear(merge_heads(attention(q, k, v, 1.0 / math.sqrt(hd))), W, p + "attention.output.dense")
        h = layernorm(x, W, p + "layernorm_after", eps)
        x = x + linear(act(linear(h, W, p + "intermediate.dense")), W, p + "output.dense")
    return layernorm(x, W, "layernorm", eps)


def whisper_encoder(cfg, W, inp):
    x = inp["features"].float()
    t = x.shape[1]
    d, H = cfg["d_model"], cfg["encoder_attention_heads"]
    hd = d // H
    act = act_fn(cfg.get("activation_function", "gelu"))
    e = "encoder."
    x = x + W[e + "embed_positions.weight"][:t]
    for i in range(cfg["encoder_layers"]):
        p = e + "layers.%d." % i
        h = layernorm(x, W, p + "self_attn_layer_norm", 1e-5)
        q = split_heads(linear(h, W, p + "self_attn.q_proj") * hd ** -0.5, H, hd)
        k = split_heads(linear(h, W, p + "self_attn.k_proj"), H, hd)
        v = split_heads(linear(h, W, p + "self_attn.v_proj"), H, hd)
        x = x + linear(merge_heads(attention(q, k, v, 1.0)), W, p + "self_attn.out_proj")
        h = layernorm(x, W, p + "final_layer_norm", 1e-5)
        x = x + linear(act(linear(h, W, p + "fc1")), W, p + "fc2")
    return layernorm(x, W, e + "layer_norm", 1e-5)


# ---------------------------------------------------------------------------
# encoder-decoders

def t5_bucket(rel, bidirectional, num_buckets, max_distance):
    buckets = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (rel > 0).long() * num_buckets
        rel = rel.abs()
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    small = rel < max_exact
    large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(small, rel, large)


def t5(cfg, W, inp):
    src, tgt = inp["src"].long(), inp["tgt"].long()
    d, H, dkv = cfg["d_model"], cfg["num_heads"], cfg["d_kv"]
    eps = cfg.get("layer_norm_epsilon", 1e-6)
    nb = cfg.get("relative_attention_num_buckets", 32)
    md = cfg.get("relative_attention_max_distance", 128)
    proj = cfg.get("feed_forward_proj", "relu")
    parts = proj.split("-")
    gated = parts[0] == "gated"
    act = act_fn("gelu_new" if proj == "gated-gelu" else parts[-1])
    L = cfg["num_layers"]
    LD = cfg.get("num_decoder_layers") or L
    emb = W["shared.weight"] if "shared.weight" in W else W["encoder.embed_tokens.weight"]

    def pos_bias(stack, t, s, bidirectional):
        table = W["%s.block.0.layer.0.SelfAttention.relative_attention_bias.weight" % stack]
        rel = torch.arange(s)[None, :] - torch.arange(t)[:, None]
        bucket = t5_bucket(rel, bidirectional, nb, md)
        return table[bucket].permute(2, 0, 1)[None]  # [1, H, t, s]

    def attn(x, mem, p, bias, causal):
        q = split_heads(linear(x, W, p + ".q"), H, dkv)
        k = split_heads(linear(mem, W, p + ".k"), H, dkv)
        v = split_heads(linear(mem, W, p + ".v"), H, dkv)
        return linear(merge_heads(attention(q, k, v, 1.0, causal=causal, bias=bias)), W, p + ".o")

    def ff(x, p):
        if gated:
            h = act(linear(x, W, p + ".wi_0")) * linear(x, W, p + ".wi_1")
        else:
            h = act(linear(x, W, p + ".wi"))
        return linear(h, W, p + ".wo")

    def ln(x, name):
        return t5_layernorm(x, W[name + ".weight"], eps)

    x = F.embedding(src, emb)
    bias = pos_bias("encoder", src.shape[1], src.shape[1], True)
    for i in range(L):
        p = "encoder.block.%d.layer." % i
        x = x + attn(ln(x, p + "0.layer_norm"), ln(x, p + "0.layer_norm"), p + "0.SelfAttention", bias, False)
        x = x + ff(ln(x, p + "1.layer_norm"), p + "1.DenseReluDense")
    mem = ln(x, "encoder.final_layer_norm")

    y = F.embedding(tgt, emb)
    bias = pos_bias("decoder", tgt.shape[1], tgt.shape[1], False)
    for i in range(LD):
        p = "decoder.block.%d.layer." % i
        h = ln(y, p + "0.layer_norm")
        y = y + attn(h, h, p + "0.SelfAttention", bias, True)
        y = y + attn(ln(y, p + "1.layer_norm"), mem, p + "1.EncDecAttention", None, False)
        y = y + ff(ln(y, p + "2.layer_norm"), p + "2.DenseReluDense")
    y = ln(y, "decoder.final_layer_norm")
    if cfg.get("tie_word_embeddings", True):
        return (y * d ** -0.5) @ emb.t()
    return y @ W["lm_head.weight"].t()


def bart(cfg, W, inp):
    src, tgt = inp["src"].long(), inp["tgt"].long()
    d = cfg["d_model"]
    act = act_fn(cfg.get("activation_function", "gelu"))
    scale = math.sqrt(d) if cfg.get("scale_embedding", False) else 1.0
    emb = W["model.shared.weight"]
    if cfg.get("normalize_before"):
        raise NotImplementedError("normalize_before")

    def attn(x, mem, p, H, causal):
        hd = d // H
        q = split_heads(linear(x, W, p + ".q_proj") * hd ** -0.5, H, hd)
        k = split_heads(linear(mem, W, p + ".k_proj"), H, hd)
        v = split_heads(linear(mem, W, p + ".v_proj"), H, hd)
        return linear(merge_heads(attention(q, k, v, 1.0, causal=causal)), W, p + ".out_proj")

    def embed_stack(ids, stack):
        t = ids.shape[1]
        x = F.embedding(ids, emb) * scale
        x = x + W["model.%s.embed_positions.weight" % stack][torch.arange(t) + 2]
        return layernorm(x, W, "model.%s.layernorm_embedding" % stack, 1e-5)

    x = embed_stack(src, "encoder")
    H = cfg["encoder_attention_heads"]
    for i in range(cfg["encoder_layers"]):
        p = "model.encoder.layers.%d." % i
        x = layernorm(x + attn(x, x, p + "self_attn", H, False), W, p + "self_attn_layer_norm", 1e-5)
        x = layernorm(x + linear(act(linear(x, W, p + "fc1")), W, p + "fc2"), W, p + "final_layer_norm", 1e-5)
    if "model.encoder.layer_norm.weight" in W:
        x = layernorm(x, W, "model.encoder.layer_norm", 1e-5)
    mem = x

    y = embed_stack(tgt, "decoder")
    H = cfg["decoder_attention_heads"]
    for i in range(cfg["decoder_layers"]):
        p = "model.decoder.layers.%d." % i
        y = layernorm(y + attn(y, y, p + "self_attn", H, True), W, p + "self_attn_layer_norm", 1e-5)
        y = layernorm(y + attn(y, mem, p + "encoder_attn", H, False), W, p + "encoder_attn_layer_norm", 1e-5)
        y = layernorm(y + linear(act(linear(y, W, p + "fc1")), W, p + "fc2"), W, p + "final_layer_norm", 1e-5)
    if "model.decoder.layer_norm.weight" in W:
        y = layernorm(y, W, "model.decoder.layer_norm", 1e-5)
    head = emb if cfg.get("tie_word_embeddings", True) else W["lm_head.weight"]
    logits = y @ head.t()
    if "final_logits_bias" in W:
        logits = logits + W["final_logits_bias"]
    return logits


# ---------------------------------------------------------------------------
# mixture of experts: mixtral, qwen2_moe, qwen3_moe, olmoe, granitemoe
#
# Computed in float64 throughout (the checkpoints' float32 values converted
# exactly), so that the reference itself adds no rounding to the routing.
# Written from these files of huggingface/transformers (the quoted lines are
# the equations; line numbers move between versions, so the class and method
# are named instead):
#   mixtral/modeling_mixtral.py (commit 00d4b3d2): MixtralSparseMoeBlock,
#     MixtralBlockSparseTop2MLP, MixtralAttention, MixtralDecoderLayer
#   qwen2_moe/modeling_qwen2_moe.py (00a3f938) and modular_qwen2_moe.py
#     (001f85b3): Qwen2MoeSparseMoeBlock / Qwen2MoeTopKRouter, Qwen2MoeMLP,
#     Qwen2MoeDecoderLayer, Qwen2MoeAttention; configuration_qwen2_moe.py
#   qwen3_moe/modular_qwen3_moe.py (00eb1166): Qwen3MoeAttention =
#     Qwen3Attention, Qwen3MoeSparseMoeBlock (Qwen2Moe's router, no shared
#     expert), Qwen3MoeDecoderLayer = Qwen2MoeDecoderLayer
#   olmoe/modeling_olmoe.py (00dcc6dd): OlmoeAttention, OlmoeSparseMoeBlock,
#     OlmoeMLP, OlmoeDecoderLayer; configuration_olmoe.py
#   granitemoe/modular_granitemoe.py (023633dd): GraniteMoeMoE,
#     GraniteMoeAttention, GraniteMoeDecoderLayer, GraniteMoeModel,
#     GraniteMoeForCausalLM; modeling_granitemoe.py (013458c1):
#     GraniteMoeTopKGating, GraniteMoeParallelExperts; configuration_granitemoe.py

MOE_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "granitemoe")

# A top-k choice closer than this (k-th against (k+1)-th router probability)
# could go the other way in a float32 computation: forward() says so on
# stderr, and ROUTER_GAPS keeps the smallest gap of each MoE layer of the
# last forward() (selfcheck.py requires them all above TOPK_GAP).
TOPK_GAP = 1e-6
ROUTER_GAPS = []


def route(logits, k, kind, norm_topk_prob=False):
    """The router of each type on router logits [N, E]. Returns (weights
    [N, k], experts [N, k], the smallest gap between the k-th and (k+1)-th
    probability over the N tokens (inf when k == E)).

    kind "softmax_topk" (mixtral, qwen2_moe, qwen3_moe, olmoe):
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        mixtral, always:            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        the others, if self.norm_topk_prob: the same line
    kind "topk_softmax" (granitemoe, GraniteMoeTopKGating.forward):
        top_k_logits, top_k_indices = logits.topk(self.top_k, dim=1)
        top_k_gates = torch.softmax(top_k_logits, dim=1).type_as(hidden_states)
      (the same numbers as softmax, top-k, renormalize: softmax is monotone
      and its normalizer cancels; selfcheck.py checks this)
    """
    probs = torch.softmax(logits, -1)
    if kind == "softmax_topk":
        w, idx = torch.topk(probs, k, dim=-1)
        if norm_topk_prob:
            w = w / w.sum(-1, keepdim=True)
    elif kind == "topk_softmax":
        top, idx = logits.topk(k, dim=1)
        w = torch.softmax(top, dim=1)
    else:
        raise ValueError(kind)
    gap = float("inf")
    if probs.shape[-1] > k:
        srt = probs.sort(-1, descending=True).values
        gap = float((srt[:, k - 1] - srt[:, k]).min())
    return w, idx, gap


def swiglu(x, gate_w, up_w, down_w, act):
    """MixtralBlockSparseTop2MLP.forward:
           current_hidden_states = self.act_fn(self.w1(hidden_states)) * self.w3(hidden_states)
           current_hidden_states = self.w2(current_hidden_states)
       Qwen2MoeMLP / OlmoeMLP.forward:
           down_proj(act_fn(gate_proj(x)) * up_proj(x))"""
    return F.linear(act(F.linear(x, gate_w)) * F.linear(x, up_w), down_w)


def moe_experts(mt, W, m, n_experts):
    """[(gate, up, down)] weights of each expert of the sparse block at
    prefix m, as published:
      mixtral   block_sparse_moe.experts.{e}.w1 (gate) / w3 (up) / w2 (down)
      qwen2_moe, qwen3_moe, olmoe   mlp.experts.{e}.gate_proj / up_proj / down_proj
      granitemoe   block_sparse_moe.input_linear.weight [E, 2F, D]: per
                   expert F.linear(x, weight[e]) gives [.., 2F], then
                   (GraniteMoeMoE.forward)
                       chunked_hidden_states = hidden_states.chunk(2, dim=-1)
                       hidden_states = self.activation(chunked_hidden_states[0]) * chunked_hidden_states[1]
                   so rows [0, F) are the gate and [F, 2F) the up projection;
                   output_linear.weight [E, D, F] the down projection."""
    if mt == "granitemoe":
        wi, wo = W[m + "input_linear.weight"], W[m + "output_linear.weight"]
        f = wi.shape[1] // 2
        return [(wi[e, :f], wi[e, f:], wo[e]) for e in range(n_experts)]
    names = ("w1", "w3", "w2") if mt == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    return [tuple(W[m + "experts.%d.%s.weight" % (e, nm)] for nm in names) for e in range(n_experts)]


def moe_block(mt, cfg, W, m, h, act):
    """The sparse block on h [B, T, D] (the post-attention-norm output) at
    prefix m. Returns (output, smallest top-k gap)."""
    b, t, dd = h.shape
    x = h.reshape(-1, dd)
    k = cfg["num_experts_per_tok"]
    if mt == "granitemoe":
        # GraniteMoeTopKGating: logits = self.layer(hidden_states).float()
        logits = F.linear(x, W[m + "router.layer.weight"])
        w, idx, gap = route(logits, k, "topk_softmax")
    else:
        # router_logits = self.gate(hidden_states)
        logits = F.linear(x, W[m + "gate.weight"])
        norm = True if mt == "mixtral" else cfg.get("norm_topk_prob", False)
        w, idx, gap = route(logits, k, "softmax_topk", norm)
    experts = moe_experts(mt, W, m, logits.shape[-1])
    # Every expert on every token, then for each token the sum over its k
    # choices of weight * expert output: what the per-expert index_add_ loop
    # of the sparse blocks (and GraniteMoeMoE's sorted scatter) computes.
    ys = torch.stack([swiglu(x, g, u, dn, act) for g, u, dn in experts])  # [E, N, D]
    rows = torch.arange(x.shape[0])
    out = sum(w[:, j, None] * ys[idx[:, j], rows] for j in range(k))
    if mt == "qwen2_moe":
        # Qwen2MoeSparseMoeBlock.forward:
        #   shared_expert_output = self.shared_expert(hidden_states)
        #   shared_expert_output = F.sigmoid(self.shared_expert_gate(hidden_states)) * shared_expert_output
        #   final_hidden_states = final_hidden_states + shared_expert_output
        s = swiglu(x, W[m + "shared_expert.gate_proj.weight"], W[m + "shared_expert.up_proj.weight"],
                   W[m + "shared_expert.down_proj.weight"], act)
        out = out + torch.sigmoid(F.linear(x, W[m + "shared_expert_gate.weight"])) * s
    return out.reshape(b, t, dd), gap


def qwen_moe_sparse(i, cfg):
    """Qwen2MoeDecoderLayer.__init__ (Qwen3MoeDecoderLayer is the same class):
        if (layer_idx not in config.mlp_only_layers) and (
            config.num_experts > 0 and (layer_idx + 1) % config.decoder_sparse_step == 0
        ):
            self.mlp = Qwen2MoeSparseMoeBlock(config)
        else:
            self.mlp = Qwen2MoeMLP(config, intermediate_size=config.intermediate_size)
    (defaults: mlp_only_layers [], decoder_sparse_step 1)"""
    return (i not in (cfg.get("mlp_only_layers") or []) and cfg.get("num_experts", 0) > 0
            and (i + 1) % (cfg.get("decoder_sparse_step") or 1) == 0)


# defaults of the configuration classes for the fields the forward reads
MOE_DEFAULTS = {
    "mixtral": {"rms_norm_eps": 1e-5, "rope_theta": 1e6},
    "qwen2_moe": {"rms_norm_eps": 1e-6, "rope_theta": 10000.0},
    "qwen3_moe": {"rms_norm_eps": 1e-6, "rope_theta": 10000.0},
    "olmoe": {"rms_norm_eps": 1e-5, "rope_theta": 10000.0},
    "granitemoe": {"rms_norm_eps": 1e-6, "rope_theta": 10000.0},
}


def moe_family(cfg, W, inp):
    mt = cfg["model_type"]
    W = Tensors({n: (t.double() if t.is_floating_point() else t) for n, t in W.t.items()}, W.prefix)
    defaults = MOE_DEFAULTS[mt]
    ids = inp["tokens"]
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    if mt == "olmoe":
        hd = d // H  # OlmoeAttention: self.head_dim = self.hidden_size // self.num_heads
    else:
        # MixtralAttention / Qwen3Attention: getattr(config, "head_dim", None) or hidden_size // heads
        hd = cfg.get("head_dim") or d // H
    eps = cfg.get("rms_norm_eps", defaults["rms_norm_eps"])
    inv = rope_inv_freq(cfg, hd, cfg.get("rope_theta", defaults["rope_theta"]))
    act = act_fn(cfg.get("hidden_act", "silu"))
    # GraniteMoeAttention: self.scaling = config.attention_multiplier; the
    # others head_dim ** -0.5
    scale = cfg.get("attention_multiplier", 1.0) if mt == "granitemoe" else hd ** -0.5
    # granitemoe: hidden_states = residual + hidden_states * self.residual_multiplier (both branches)
    resid = cfg.get("residual_multiplier", 1.0) if mt == "granitemoe" else 1.0
    window = 0
    if mt == "mixtral" and cfg.get("sliding_window"):
        window = cfg["sliding_window"]  # MixtralAttention: sliding_window=getattr(config, "sliding_window", None)
    if mt in ("qwen2_moe", "qwen3_moe") and cfg.get("use_sliding_window"):
        raise NotImplementedError("use_sliding_window")
    clip = cfg.get("clip_qkv") if mt == "olmoe" else None

    def norm(z, name):
        return rmsnorm(z, W[name + ".weight"], eps)

    x = embed(W, "model.embed_tokens.weight", ids)
    if mt == "granitemoe":
        x = x * cfg.get("embedding_multiplier", 1.0)  # inputs_embeds = inputs_embeds * self.embedding_multiplier
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = norm(x, p + "input_layernorm")
        # q/k/v_proj: bias on q, k, v for qwen2_moe (Qwen2MoeAttention:
        # bias=config.qkv_bias, default True; o_proj bias=False), and where
        # attention_bias is set for the others: linear() reads a bias when stored.
        q, k, v = (linear(h, W, p + "self_attn.%s_proj" % c) for c in "qkv")
        if mt == "olmoe":
            # OlmoeAttention.forward, before the heads are split: q_norm is
            # OlmoeRMSNorm(hidden_size), k_norm OlmoeRMSNorm((hidden_size // num_heads) * num_key_value_heads)
            #   query_states = self.q_norm(self.q_proj(hidden_states))
            #   key_states = self.k_norm(self.k_proj(hidden_states))
            #   if self.config.clip_qkv is not None:
            #       query_states.clamp_(min=-self.config.clip_qkv, max=self.config.clip_qkv)   (and key, value)
            q = norm(q, p + "self_attn.q_norm")
            k = norm(k, p + "self_attn.k_norm")
            if clip is not None:
                q, k, v = (z.clamp(-clip, clip) for z in (q, k, v))
        q, k, v = split_heads(q, H, hd), split_heads(k, KV, hd), split_heads(v, KV, hd)
        if mt == "qwen3_moe":
            # Qwen3Attention: self.q_norm(self.q_proj(hidden_states).view(hidden_shape)), per head (head_dim wide)
            q = norm(q, p + "self_attn.q_norm")
            k = norm(k, p + "self_attn.k_norm")
        q, k = rope_half(q, inv, hd), rope_half(k, inv, hd)
        a = attention(q, k, v, scale, causal=True, window=window)
        x = x + linear(merge_heads(a), W, p + "self_attn.o_proj") * resid
        h = norm(x, p + "post_attention_layernorm")
        if mt in ("qwen2_moe", "qwen3_moe") and not qwen_moe_sparse(i, cfg):
            m = p + "mlp."
            y = swiglu(h, W[m + "gate_proj.weight"], W[m + "up_proj.weight"], W[m + "down_proj.weight"], act)
        else:
            m = p + ("block_sparse_moe." if mt in ("mixtral", "granitemoe") else "mlp.")
            y, gap = moe_block(mt, cfg, W, m, h, act)
            ROUTER_GAPS.append((i, gap))
            if gap < TOPK_GAP:
                import sys
                print("hf_reference.py: %s layer %d: top-k gap %.3g < %g: the expert choice of some token "
                      "is a near tie" % (mt, i, gap, TOPK_GAP), file=sys.stderr)
        x = x + y * resid
    x = norm(x, "model.norm")
    if cfg.get("tie_word_embeddings", False):
        logits = x @ W["model.embed_tokens.weight"].t()
    else:
        logits = x @ W["lm_head.weight"].t()
    if mt == "granitemoe":
        logits = logits / cfg.get("logits_scaling", 1.0)  # logits = logits / self.config.logits_scaling
    return logits

# ---------------------------------------------------------------------------
# gpt-oss (modeling_gpt_oss.py, integrations/mxfp4.py)

# How many gate / up values of the experts the tokens chose the last gpt_oss
# forward() clamped, of how many: (gate > 7, |up| > 7, total).
CLAMPED = []


def yarn_parameters(sc, dim, theta, max_position_embeddings):
    """_compute_yarn_parameters (modeling_rope_utils.py): (inv_freq [dim / 2],
    attention_factor) of rope_scaling `sc`. transformers 4 takes the factor
    to be max_position_embeddings / original_max_position_embeddings when
    the latter is given; the tests' configs make the two agree."""
    factor = sc["factor"]
    original = sc.get("original_max_position_embeddings") or max_position_embeddings
    if "original_max_position_embeddings" in sc:
        assert max_position_embeddings / original == factor, "transformers 4 and 5 disagree"

    def get_mscale(scale, mscale=1):
        if scale <= 1:
            return 1.0
        return 0.1 * mscale * math.log(scale) + 1.0

    attention_factor = sc.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = sc.get("mscale"), sc.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = get_mscale(factor)
    beta_fast = sc.get("beta_fast") or 32
    beta_slow = sc.get("beta_slow") or 1

    def find_correction_dim(num_rotations):
        return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = find_correction_dim(beta_fast), find_correction_dim(beta_slow)
    if sc.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # Prevent singularity
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    pos_freqs = theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)
    inv_freq_extrapolation_factor = 1 - ramp
    inv = (inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
           + inv_freq_extrapolation * inv_freq_extrapolation_factor)
    return inv, attention_factor


FP4_VALUES = [+0.0, +0.5, +1.0, +1.5, +2.0, +3.0, +4.0, +6.0,
              -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def convert_moe_packed_tensors(blocks, scales):
    """integrations/mxfp4.py's convert_moe_packed_tensors (in float64):
    blocks [*prefix, G, B] uint8, scales [*prefix, G] uint8 ->
    [prefix[0], G * B * 2, prefix[1]]:
        scales = scales.to(torch.int32) - 127
        *prefix_shape, G, B = blocks.shape
        rows_total = math.prod(prefix_shape) * G
        blocks = blocks.reshape(rows_total, B); scales = scales.reshape(rows_total, 1)
        idx_lo = (blk & 0x0F).to(torch.long); idx_hi = (blk >> 4).to(torch.long)
        sub[:, 0::2] = lut[idx_lo]; sub[:, 1::2] = lut[idx_hi]
        torch.ldexp(sub, exp, out=sub)
        out = out.reshape(*prefix_shape, G, B * 2).view(*prefix_shape, G * B * 2)
        return out.transpose(1, 2).contiguous()"""
    scales = scales.to(torch.int32) - 127
    assert blocks.shape[:-1] == scales.shape
    lut = torch.tensor(FP4_VALUES, dtype=torch.float64)
    *prefix_shape, G, B = blocks.shape
    rows_total = math.prod(prefix_shape) * G
    blocks = blocks.reshape(rows_total, B)
    scales = scales.reshape(rows_total, 1)
    out = torch.empty(rows_total, B * 2, dtype=torch.float64)
    idx_lo = (blocks & 0x0F).to(torch.long)
    idx_hi = (blocks >> 4).to(torch.long)
    out[:, 0::2] = lut[idx_lo]
    out[:, 1::2] = lut[idx_hi]
    out = torch.ldexp(out, scales.double())
    out = out.reshape(*prefix_shape, G, B * 2).view(*prefix_shape, G * B * 2)
    return out.transpose(1, 2).contiguous()


def gpt_oss_expert_weights(W, m):
    """GptOssExperts' gate_up_proj [E, d, 2F] and down_proj [E, F, d]: as
    stored, or (Mxfp4HfQuantizer, dequantize) from their MXFP4 _blocks and
    _scales."""
    out = []
    for name in ("gate_up_proj", "down_proj"):
        full = m + "experts." + name
        if full in W:
            out.append(W[full])
        else:
            out.append(convert_moe_packed_tensors(W[full + "_blocks"], W[full + "_scales"]))
    return out


# GptOssExperts: self.limit = 7.0 (selfcheck.py lifts it to see that the
# clamp matters).
SWIGLU_LIMIT = 7.0


def gpt_oss_block(cfg, W, m, h):
    """GptOssMLP at prefix m on h [B, T, D] (the post-attention-norm output),
    computing every expert on every token and then the routed sum (what the
    inference branch of GptOssExperts.forward computes). Returns (output,
    the smallest top-k gap, (gate values clamped, up values clamped, values)
    of the experts the tokens chose)."""
    b, tt, dd = h.shape
    xs = h.reshape(-1, dd)
    k_top = cfg["num_experts_per_tok"]
    alpha, limit = 1.702, SWIGLU_LIMIT  # GptOssExperts: self.alpha = 1.702
    # GptOssTopKRouter: router_logits = F.linear(hidden_states, self.weight, self.bias)
    #   router_top_value, router_indices = torch.topk(router_logits, self.top_k, dim=-1)
    #   router_top_value = softmax(router_top_value, dim=1)
    logits = F.linear(xs, W[m + "router.weight"], W[m + "router.bias"])
    w, idx, gap = route(logits, k_top, "topk_softmax")
    # GptOssExperts.forward:
    #   gate_up = hidden_states @ self.gate_up_proj + self.gate_up_proj_bias[..., None, :]
    #   gate, up = gate_up[..., ::2], gate_up[..., 1::2]
    #   gate = gate.clamp(min=None, max=self.limit); up = up.clamp(min=-self.limit, max=self.limit)
    #   glu = gate * torch.sigmoid(gate * self.alpha)
    #   next_states = ((up + 1) * glu) @ self.down_proj + self.down_proj_bias[..., None, :]
    gate_up_proj, down_proj = gpt_oss_expert_weights(W, m)
    gate_up = torch.matmul(xs[None], gate_up_proj) + W[m + "experts.gate_up_proj_bias"][:, None, :]
    gate, up = gate_up[..., ::2], gate_up[..., 1::2]
    rows = torch.arange(xs.shape[0])
    counts = [0, 0, 0]
    for j in range(k_top):
        counts[0] += int((gate[idx[:, j], rows] > 7.0).sum())
        counts[1] += int((up[idx[:, j], rows].abs() > 7.0).sum())
        counts[2] += gate[idx[:, j], rows].numel()
    gate = gate.clamp(min=None, max=limit)
    up = up.clamp(min=-limit, max=limit)
    glu = gate * torch.sigmoid(gate * alpha)
    ys = torch.matmul((up + 1) * glu, down_proj) + W[m + "experts.down_proj_bias"][:, None, :]
    y = sum(w[:, j, None] * ys[idx[:, j], rows] for j in range(k_top))
    return y.reshape(b, tt, dd), gap, counts


def gpt_oss(cfg, W, inp):
    """GptOssForCausalLM.forward, in float64."""
    W = Tensors({n: (t.double() if t.is_floating_point() else t) for n, t in W.t.items()}, W.prefix)
    ids = inp["tokens"]
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    # GptOssAttention: self.head_dim = getattr(config, "head_dim", config.hidden_size // config.num_attention_heads)
    hd = cfg.get("head_dim") or d // H
    eps = cfg.get("rms_norm_eps", 1e-5)
    L = cfg["num_hidden_layers"]
    # GptOssConfig: layer_types default "sliding_attention" if bool((i + 1) % 2) else "full_attention"
    layer_types = cfg.get("layer_types") or [
        "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(L)]
    inv, attn_factor = yarn_parameters(cfg["rope_scaling"], hd, cfg.get("rope_theta", 150000.0),
                                       cfg["max_position_embeddings"])
    del CLAMPED[:]
    counts = [0, 0, 0]

    def norm(z, name):
        # GptOssRMSNorm: hidden_states * torch.rsqrt(variance + eps); self.weight * hidden_states
        return rmsnorm(z, W[name + ".weight"], eps)

    def rotary(x):
        # GptOssRotaryEmbedding.forward: emb = freqs; cos = emb.cos() * self.attention_scaling;
        # _apply_rotary_emb: first_half, second_half = torch.chunk(x, 2, dim=-1)
        #   first_ = first_half * cos - second_half * sin; second_ = second_half * cos + first_half * sin
        t = x.shape[2]
        ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
        cos, sin = ang.cos() * attn_factor, ang.sin() * attn_factor
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    x = embed(W, "model.embed_tokens.weight", ids)
    for i in range(L):
        p = "model.layers.%d." % i
        h = norm(x, p + "input_layernorm")
        # q/k/v/o_proj: nn.Linear(..., bias=config.attention_bias)
        q, k, v = (linear(h, W, p + "self_attn.%s_proj" % c) for c in "qkv")
        q, k, v = split_heads(q, H, hd), split_heads(k, KV, hd), split_heads(v, KV, hd)
        q, k = rotary(q), rotary(k)
        # eager_attention_forward: attn_weights = q k^T * scaling + causal_mask (sliding: the
        # last sliding_window keys, the query's own included);
        #   sinks = module.sinks.reshape(1, -1, 1, 1).expand(...)
        #   combined_logits = torch.cat([attn_weights, sinks], dim=-1)
        #   combined_logits = combined_logits - combined_logits.max(dim=-1, keepdim=True).values
        #   probs = F.softmax(combined_logits, dim=-1); scores = probs[..., :-1]
        kk = k.repeat_interleave(H // KV, 1)
        vv = v.repeat_interleave(H // KV, 1)
        s = torch.matmul(q, kk.transpose(-1, -2)) * hd ** -0.5
        t = s.shape[-1]
        qi = torch.arange(t)[:, None]
        kj = torch.arange(t)[None, :]
        masked = kj > qi
        if layer_types[i] == "sliding_attention":
            masked |= kj <= qi - cfg["sliding_window"]
        s = s.masked_fill(masked, float("-inf"))
        sinks = W[p + "self_attn.sinks"].reshape(1, -1, 1, 1).expand(s.shape[0], -1, t, -1)
        combined = torch.cat([s, sinks], dim=-1)
        combined = combined - combined.max(dim=-1, keepdim=True).values
        probs = F.softmax(combined, dim=-1)[..., :-1]
        a = torch.matmul(probs, vv)
        x = x + linear(merge_heads(a), W, p + "self_attn.o_proj")

        h = norm(x, p + "post_attention_layernorm")
        y, gap, clamped = gpt_oss_block(cfg, W, p + "mlp.", h)
        ROUTER_GAPS.append((i, gap))
        if gap < TOPK_GAP:
            import sys
            print("hf_reference.py: gpt_oss layer %d: top-k gap %.3g < %g" % (i, gap, TOPK_GAP),
                  file=sys.stderr)
        counts = [c + n for c, n in zip(counts, clamped)]
        x = x + y
    CLAMPED.append(tuple(counts))
    x = norm(x, "model.norm")
    if cfg.get("tie_word_embeddings", False):
        return x @ W["model.embed_tokens.weight"].t()
    return x @ W["lm_head.weight"].t()

# ---------------------------------------------------------------------------
# DeepSeek-V2 and V3 (modeling_deepseek_v2.py, modeling_deepseek_v3.py,
# FineGrainedFP8 for the FP8 checkpoints)


def fp8_dequantized(cfg, tensors):
    """The weights of an FP8 checkpoint (quantization_config quant_method
    fp8) as transformers dequantizes them (FP8Linear with dequantize, and
    DeepSeek's weight_dequant): weight [N, K] (F8_E4M3, read as its e4m3
    values) times weight_scale_inv [ceil(N / rows), ceil(K / cols)], each
    scale over its block of weight_block_size = [rows, cols], in float64."""
    q = cfg.get("quantization_config")
    if not q:
        return tensors
    assert q["quant_method"] == "fp8" and q.get("fmt", "e4m3") == "e4m3"
    rows, cols = q.get("weight_block_size", [128, 128])
    out = {}
    for name, t in tensors.items():
        if name.endswith(".weight_scale_inv"):
            continue
        s = tensors.get(name + "_scale_inv")
        if s is not None:
            n, k = t.shape
            full = s.double().repeat_interleave(rows, 0)[:n].repeat_interleave(cols, 1)[:, :k]
            t = t.double() * full
        out[name] = t
    return out


def yarn_get_mscale(scale=1, mscale=1):
    """modeling_deepseek_v3.py (and v2's since the July 2026 fix; DeepSeek's
    modeling_deepseek.py):
        if scale <= 1: return 1.0
        return 0.1 * mscale * math.log(scale) + 1.0"""
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


# The smallest gap between the last group chosen and the next one (group
# scores), and between the last expert chosen and the next one, of every
# DeepSeek MoE layer of the last forward(): (layer, groups gap, experts gap).
DEEPSEEK_GAPS = []


def deepseek_route(cfg, v3, logits, bias):
    """The routers on router logits [N, E] (float64). Returns (weights
    [N, k], experts [N, k], the smallest group gap, the smallest expert gap).

    DeepseekV3TopkRouter (noaux_tc):
        scores = router_logits.sigmoid()
        scores_for_choice = scores.view(-1, self.n_routed_experts) + self.e_score_correction_bias.unsqueeze(0)
        group_scores = scores_for_choice.view(-1, self.n_group, E // self.n_group).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=self.topk_group, dim=-1, sorted=False)[1]
        ... score_mask: the experts of those groups
        scores_for_choice = scores_for_choice.masked_fill(~score_mask.bool(), 0.0)
        topk_indices = torch.topk(scores_for_choice, k=self.top_k, dim=-1, sorted=False)[1]
        topk_weights = scores.gather(1, topk_indices)
        if self.norm_topk_prob: topk_weights /= topk_weights.sum(dim=-1, keepdim=True) + 1e-20
        topk_weights = topk_weights * self.routed_scaling_factor
    DeepseekV2Moe.route_tokens_to_experts:
        router_logits = router_logits.softmax(dim=-1, dtype=torch.float32)
        greedy:               topk_weight, topk_idx = torch.topk(router_logits, k=self.top_k, dim=-1, sorted=False)
        group_limited_greedy: group_scores = router_logits.view(N, self.num_group, -1).max(dim=-1).values
                              group_idx = torch.topk(group_scores, k=self.topk_group, dim=-1, sorted=False)[1]
                              tmp_scores = router_logits.masked_fill(~score_mask.bool(), 0.0)
                              topk_weight, topk_idx = torch.topk(tmp_scores, k=self.top_k, dim=-1, sorted=False)
        topk_weight = topk_weight * self.routed_scaling_factor
    (norm_topk_prob is not read: the config's false is what DeepSeek's
    modeling_deepseek.py computes too)."""
    k, E = cfg["num_experts_per_tok"], logits.shape[-1]

    def gap(x, n):
        if x.shape[-1] <= n:
            return float("inf")
        srt = x.sort(-1, descending=True).values
        return float((srt[:, n - 1] - srt[:, n]).min())

    def mask_groups(choice, group_scores, groups, topk_group):
        group_idx = torch.topk(group_scores, k=topk_group, dim=-1).indices
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(-1, groups, E // groups).reshape(-1, E)
        return choice.masked_fill(~score_mask.bool(), 0.0), gap(group_scores, topk_group)

    group_gap = float("inf")
    if v3:
        scores = logits.sigmoid()
        choice = scores + bias.unsqueeze(0)
        groups, topk_group = cfg.get("n_group", 8), cfg.get("topk_group", 4)
        group_scores = choice.view(-1, groups, E // groups).topk(2, dim=-1)[0].sum(dim=-1)
        choice, group_gap = mask_groups(choice, group_scores, groups, topk_group)
        idx = torch.topk(choice, k=k, dim=-1).indices
        w = scores.gather(1, idx)
        if cfg.get("norm_topk_prob", True):
            w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
        w = w * cfg.get("routed_scaling_factor", 2.5)
    else:
        scores = logits.softmax(dim=-1)
        choice = scores
        method = cfg.get("topk_method", "greedy")
        if method == "group_limited_greedy":
            groups, topk_group = cfg["n_group"], cfg["topk_group"]
            group_scores = scores.view(-1, groups, E // groups).max(dim=-1).values
            choice, group_gap = mask_groups(scores, group_scores, groups, topk_group)
        else:
            assert method == "greedy", method
        w, idx = torch.topk(choice, k=k, dim=-1)
        w = w * cfg.get("routed_scaling_factor", 1.0)
    return w, idx, group_gap, gap(choice, k)


def deepseek(cfg, W, inp):
    """DeepseekV2ForCausalLM / DeepseekV3ForCausalLM.forward in float64, the
    attention in its naive form (each head's key and value expanded from the
    latent by kv_b_proj), every expert on every token, then the routed sum."""
    mt = cfg["model_type"]
    v3 = mt == "deepseek_v3"
    W = Tensors({n: (t.double() if t.is_floating_point() else t)
                 for n, t in fp8_dequantized(cfg, W.t).items()}, W.prefix)
    ids = inp["tokens"]
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    assert (cfg.get("num_key_value_heads") or H) == H
    nope, rope, vdim = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    q_rank, kv_rank = cfg.get("q_lora_rank"), cfg["kv_lora_rank"]
    qk_head_dim = nope + rope
    eps = cfg.get("rms_norm_eps", 1e-6)
    act = act_fn(cfg.get("hidden_act", "silu"))
    theta = cfg.get("rope_theta", 10000.0)
    sc = cfg.get("rope_scaling")
    # RotaryEmbedding: the rope_init_fn of the scaling over config.head_dim
    # = qk_rope_head_dim; cos and sin (V2: freqs_cis) times attention_scaling.
    if sc and sc.get("rope_type", sc.get("type")) == "yarn":
        inv, attn_factor = yarn_parameters(sc, rope, theta, cfg["max_position_embeddings"])
    else:
        inv, attn_factor = rope_inv_freq(cfg, rope, theta), 1.0
    # Attention.__init__:
    #   self.scaling = self.qk_head_dim ** (-0.5)
    #   if self.config.rope_scaling is not None:
    #       mscale_all_dim = self.config.rope_scaling.get("mscale_all_dim", 0)
    #       scaling_factor = self.config.rope_scaling["factor"]
    #       if mscale_all_dim:
    #           mscale = yarn_get_mscale(scaling_factor, mscale_all_dim)
    #           self.scaling = self.scaling * mscale * mscale
    scaling = qk_head_dim ** (-0.5)
    if sc is not None:
        mscale_all_dim = sc.get("mscale_all_dim", 0)
        if mscale_all_dim:
            mscale = yarn_get_mscale(sc["factor"], mscale_all_dim)
            scaling = scaling * mscale * mscale

    def rotary(x):
        t = x.shape[2]
        freqs = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
        if not v3:
            # DeepseekV2RotaryEmbedding: freqs_cis = torch.polar(torch.ones_like(freqs), freqs) * attention_scaling
            # apply_rotary_emb: xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
            #                   torch.view_as_real(xq_ * freqs_cis).flatten(3)
            freqs_cis = torch.polar(torch.ones_like(freqs), freqs) * attn_factor
            xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
            return torch.view_as_real(xc * freqs_cis).flatten(3)
        # DeepseekV3RotaryEmbedding: emb = torch.cat((freqs, freqs), dim=-1)
        #   cos = emb.cos() * self.attention_scaling; sin = emb.sin() * self.attention_scaling
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos() * attn_factor, emb.sin() * attn_factor
        if cfg.get("rope_interleave", True):
            # apply_rotary_pos_emb_interleave: q.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
            b, h, s, dd = x.shape
            x = x.view(b, h, s, dd // 2, 2).transpose(4, 3).reshape(b, h, s, dd)
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def norm(z, name, e=eps):
        return rmsnorm(z, W[name + ".weight"], e)

    def mlp(z, m):
        # DeepseekV3MLP / DeepseekV2MLP: down_proj(act_fn(gate_proj(x)) * up_proj(x))
        return swiglu(z, W[m + "gate_proj.weight"], W[m + "up_proj.weight"], W[m + "down_proj.weight"], act)

    x = embed(W, "model.embed_tokens.weight", ids)
    b, t = ids.shape
    del DEEPSEEK_GAPS[:]
    for i in range(L):
        p = "model.layers.%d." % i
        a = p + "self_attn."
        h = norm(x, p + "input_layernorm")
        # q_lora_rank None: q_proj; else q_b_proj(q_a_layernorm(q_a_proj(x)))
        # (q_a_layernorm and kv_a_layernorm: RMSNorm(rank), eps 1e-6)
        if q_rank is None:
            q = F.linear(h, W[a + "q_proj.weight"])
        else:
            q = F.linear(norm(F.linear(h, W[a + "q_a_proj.weight"]), a + "q_a_layernorm", 1e-6),
                         W[a + "q_b_proj.weight"])
        q = q.view(b, t, H, qk_head_dim).transpose(1, 2)
        q_pass, q_rot = torch.split(q, [nope, rope], dim=-1)
        compressed_kv = F.linear(h, W[a + "kv_a_proj_with_mqa.weight"])
        k_pass, k_rot = torch.split(compressed_kv, [kv_rank, rope], dim=-1)
        k_pass = F.linear(norm(k_pass, a + "kv_a_layernorm", 1e-6), W[a + "kv_b_proj.weight"])
        k_pass = k_pass.view(b, t, H, nope + vdim).transpose(1, 2)
        k_pass, value = torch.split(k_pass, [nope, vdim], dim=-1)
        k_rot = k_rot.view(b, 1, t, rope)
        q_rot, k_rot = rotary(q_rot), rotary(k_rot)
        k_rot = k_rot.expand(*k_pass.shape[:-1], -1)
        query = torch.cat((q_pass, q_rot), dim=-1)
        key = torch.cat((k_pass, k_rot), dim=-1)
        o = attention(query, key, value, scaling, causal=True)
        x = x + F.linear(merge_heads(o), W[a + "o_proj.weight"])

        h = norm(x, p + "post_attention_layernorm")
        # DecoderLayer: self.mlp = MoE(config) if layer_idx >= config.first_k_dense_replace else MLP(config)
        if i < cfg.get("first_k_dense_replace", 3 if v3 else 0):
            x = x + mlp(h, p + "mlp.")
            continue
        m = p + "mlp."
        xs = h.reshape(-1, d)
        logits = F.linear(xs, W[m + "gate.weight"])
        bias = W.get(m + "gate.e_score_correction_bias")
        w, idx, group_gap, expert_gap = deepseek_route(cfg, v3, logits, bias)
        DEEPSEEK_GAPS.append((i, group_gap, expert_gap))
        ROUTER_GAPS.append((i, min(group_gap, expert_gap)))
        if min(group_gap, expert_gap) < TOPK_GAP:
            import sys
            print("hf_reference.py: %s layer %d: a group or expert choice is a near tie (%.3g, %.3g)"
                  % (mt, i, group_gap, expert_gap), file=sys.stderr)
        ys = torch.stack([mlp(xs, m + "experts.%d." % e) for e in range(logits.shape[-1])])  # [E, N, D]
        rows = torch.arange(xs.shape[0])
        y = sum(w[:, j, None] * ys[idx[:, j], rows] for j in range(idx.shape[1]))
        # hidden_states = hidden_states + self.shared_experts(residuals)
        y = y + mlp(xs, m + "shared_experts.")
        x = x + y.reshape(b, t, d)
    x = norm(x, "model.norm")
    if cfg.get("tie_word_embeddings", False):
        return x @ W["model.embed_tokens.weight"].t()
    return x @ W["lm_head.weight"].t()

# ---------------------------------------------------------------------------

# model_type -> (forward, base-model prefix of its published checkpoints)
MODELS = {
    "gpt2": (gpt2, "transformer."),
    "gpt_neox": (gpt_neox, "gpt_neox."),
    "gptj": (gptj, "transformer."),
    "llama": (llama_family, "model."),
    "mistral": (llama_family, "model."),
    "qwen2": (llama_family, "model."),
    "qwen3": (llama_family, "model."),
    "gemma": (llama_family, "model."),
    "gemma2": (llama_family, "model."),
    "phi3": (llama_family, "model."),
    "phi": (phi, "model."),
    "falcon": (falcon, "transformer."),
    "bloom": (bloom, "transformer."),
    "bert": (bert, "bert."),
    "roberta": (bert, "roberta."),
    "vit": (vit, "vit."),
    "whisper": (whisper_encoder, "model."),
    "t5": (t5, ""),
    "bart": (bart, ""),
    "mixtral": (moe_family, "model."),
    "qwen2_moe": (moe_family, "model."),
    "qwen3_moe": (moe_family, "model."),
    "olmoe": (moe_family, "model."),
    "granitemoe": (moe_family, "model."),
    "gpt_oss": (gpt_oss, "model."),
    "deepseek_v2": (deepseek, "model."),
    "deepseek_v3": (deepseek, "model."),
}


def forward(folder, inputs):
    """inputs: dict of numpy arrays (tokens / types / pixels / features /
    src / tgt). Returns a float32 numpy array."""
    cfg, tensors = load(folder)
    mt = cfg["model_type"]
    if mt not in MODELS:
        raise NotImplementedError("model_type %s" % mt)
    fn, prefix = MODELS[mt]
    W = Tensors(tensors, prefix)
    inp = {k: torch.from_numpy(np.asarray(v)) for k, v in inputs.items()}
    del ROUTER_GAPS[:]
    with torch.no_grad():
        return fn(cfg, W, inp).float().numpy()


if __name__ == "__main__":
    import sys
    if len(sys.argv) < 3:
        print("usage: hf_reference.py FOLDER NAME=x.npy... [-o out.npy]", file=sys.stderr)
        sys.exit(2)
    args = sys.argv[2:]
    out = None
    if "-o" in args:
        k = args.index("-o")
        out = args[k + 1]
        del args[k:k + 2]
    inputs = {a.split("=", 1)[0]: np.load(a.split("=", 1)[1]) for a in args}
    y = forward(sys.argv[1], inputs)
    if out:
        np.save(out, y)
    print(list(y.shape), float(np.abs(y).max()))
