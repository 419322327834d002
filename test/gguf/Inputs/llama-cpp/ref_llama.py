#!/usr/bin/python3
"""A float64 numpy forward pass of a GGUF file of arch `llama` as llama.cpp
runs it, on the values its tensors stand for: every tensor dequantized from
ggml's blocks here (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; layouts
of ggml-common.h, values in f32 as ggml's dequantize_row_* compute them),
then all arithmetic in float64 with no activation quantization (but
--act8's).

    ref_llama.py MODEL.gguf TOKENS.npy OUT.npy [--act8 TYPES] [--steps IDS.npy]
        logits [1, T, vocab]; with --act8 (e.g. Q8_0,Q4_0,Q6_K) the input
        of every matrix of those types rounded first as llama.cpp (and
        tfm's integer kernels) round activations: to Q8_0 blocks of 32, for
        K-quants to Q8_K blocks of 256; with
        --steps, the logits [1, N, vocab] of the N steps that generated
        IDS [1, N] after TOKENS (tfm --generate N --logits)
    ref_llama.py --dequant Q.gguf DEQ.gguf         every tensor of Q.gguf
        dequantized here equals DEQ.gguf's (llama.cpp's own dequantization,
        llama_quant --requant Q.gguf DEQ.gguf F32) bit for bit
    ref_llama.py --types MODEL.gguf                the count of tensors of
        each ggml type (what a Q4_K_M file really holds)

The model: x = token_embd[tokens]; per layer RMSNorm (eps from
llama.attention.layer_norm_rms_epsilon) times attn_norm, q/k/v, RoPE on
the rows as stored (llama.cpp's LLAMA_ROPE_TYPE_NORM: adjacent pairs (2i,
2i+1) of each head rotated by pos * base^(-2i/head_dim)), causal softmax
attention scaled by 1/sqrt(head_dim), query head h reading KV head
h / (heads / kv_heads), attn_output, residual; RMSNorm times ffn_norm,
ffn_down(silu(ffn_gate x) * ffn_up x), residual; RMSNorm times
output_norm, then output (or token_embd when the file has no output).
"""
import struct
import sys

import numpy as np

SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
# ggml type: (elements per block, bytes per block)
BLOCK = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18),
         12: (256, 144), 13: (256, 176), 14: (256, 210)}
NAMES = {0: "F32", 1: "F16", 30: "BF16", 8: "Q8_0", 2: "Q4_0", 12: "Q4_K", 13: "Q5_K",
         14: "Q6_K"}
f32 = np.float32


def read_gguf(path):
    data = open(path, "rb").read()
    if data[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    at = 4

    def take(fmt):
        nonlocal at
        v = struct.unpack_from(fmt, data, at)[0]
        at += struct.calcsize(fmt)
        return v

    def value(t):
        nonlocal at
        if t == 8:
            n = take("<Q")
            at += n
            return data[at - n:at].decode()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return [value(et) for _ in range(n)]
        fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
               10: "<Q", 11: "<q", 12: "<d"}[t]
        return take(fmt)

    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    if version not in (2, 3):
        sys.exit(f"{path}: GGUF version {version}")
    meta = {}
    for _ in range(n_kv):
        n = take("<Q")
        at += n
        key = data[at - n:at].decode()
        meta[key] = value(take("<I"))
    align = meta.get("general.alignment", 32)
    infos = []
    for _ in range(n_tensors):
        n = take("<Q")
        at += n
        name = data[at - n:at].decode()
        ne = [take("<Q") for _ in range(take("<I"))]
        infos.append((name, ne, take("<I"), take("<Q")))
    start = (at + align - 1) // align * align
    tensors = {}
    for name, ne, ty, off in infos:
        if ty not in BLOCK:
            sys.exit(f"{path}: {name}: ggml type {ty} not handled here")
        per, size = BLOCK[ty]
        n = int(np.prod(ne))
        raw = np.frombuffer(data, np.uint8, n // per * size, start + off)
        tensors[name] = (ty, ne, raw)
    return meta, tensors


def fp16(b):
    """f16 stored in the bytes b [..., 2] as f32."""
    return np.ascontiguousarray(b).view("<f2")[..., 0].astype(f32)


def scale_min_k4(j, s):
    s = s.astype(np.int32)
    if j < 4:
        return s[:, j] & 63, s[:, j + 4] & 63
    return ((s[:, j + 4] & 0xF) | ((s[:, j - 4] >> 6) << 4),
            (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4))


def dequant(ty, ne, raw):
    """The f32 values of a tensor, numpy shape (reversed ne)."""
    shape = list(reversed(ne))
    if ty == 0:
        return raw.view("<f4").reshape(shape)
    if ty == 1:
        return raw.view("<f2").astype(f32).reshape(shape)
    if ty == 30:
        return (raw.view("<u2").astype(np.uint32) << 16).view(f32).reshape(shape)
    per, size = BLOCK[ty]
    b = raw.reshape(-1, size)
    n = b.shape[0]
    y = np.zeros((n, per), f32)
    if ty == 8:  # Q8_0: d, int8 q[32]
        y[:] = b[:, 2:].view(np.int8).astype(f32) * fp16(b[:, 0:2])[:, None]
    elif ty == 2:  # Q4_0: d, 16 bytes of two 4-bit values, minus 8
        d, qs = fp16(b[:, 0:2])[:, None], b[:, 2:].astype(np.int32)
        y[:, :16] = ((qs & 15) - 8).astype(f32) * d
        y[:, 16:] = ((qs >> 4) - 8).astype(f32) * d
    elif ty in (12, 13):  # Q4_K, Q5_K: d, dmin, 12 scale bytes, [qh 32], qs 128
        d, dmin, sc = fp16(b[:, 0:2]), fp16(b[:, 2:4]), b[:, 4:16]
        qh = b[:, 16:48].astype(np.int32) if ty == 13 else None
        qs = b[:, 48:].astype(np.int32) if ty == 13 else b[:, 16:].astype(np.int32)
        for j in range(8):
            s, m = scale_min_k4(j, sc)
            d1, m1 = (d * s.astype(f32))[:, None], (dmin * m.astype(f32))[:, None]
            q = (qs[:, 32 * (j // 2):32 * (j // 2) + 32] >> (4 * (j % 2))) & 15
            if qh is not None:
                q = q + 16 * ((qh >> j) & 1)
            y[:, 32 * j:32 * j + 32] = d1 * q.astype(f32) - m1
    elif ty == 14:  # Q6_K: ql 128, qh 64, int8 scales 16, d
        ql, qh = b[:, :128].astype(np.int32), b[:, 128:192].astype(np.int32)
        sc, d = b[:, 192:208].view(np.int8).astype(f32), fp16(b[:, 208:210])
        for h in range(2):
            for t in range(4):
                low = (ql[:, 64 * h + 32 * (t % 2):64 * h + 32 * (t % 2) + 32] >> (4 * (t // 2))) & 15
                q = (low | (((qh[:, 32 * h:32 * h + 32] >> (2 * t)) & 3) << 4)) - 32
                for half in range(2):
                    ds = (d * sc[:, 8 * h + 2 * t + half])[:, None]
                    at = 128 * h + 32 * t + 16 * half
                    y[:, at:at + 16] = ds * q[:, 16 * half:16 * half + 16].astype(f32)
    return y.reshape(shape)


def rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def quantize_q8_0(x):
    """x [T, K] with every block of 32 rounded to ggml's Q8_0 (scale max |x|
    / 127, values rounded to the nearest integer) and back."""
    b = x.reshape(x.shape[0], -1, 32)
    d = np.abs(b).max(-1, keepdims=True) / 127
    q = np.round(np.divide(b, d, out=np.zeros_like(b), where=d > 0))
    return (q * d).reshape(x.shape)


def quantize_q8_K(x):
    """x [T, K] with every block of 256 rounded as ggml's quantize_row_q8_K
    does for the K-quants' dot products, in f32: the value of largest |x|
    (the first), iscale = -127 / it, bytes min(round(iscale x), 127) to
    nearest even, scale 1 / iscale; and back."""
    b = x.astype(np.float32).reshape(x.shape[0], -1, 256)
    at = np.abs(b).argmax(-1)[..., None]
    top = np.take_along_axis(b, at, -1)
    nonzero = top != 0
    iscale = np.where(nonzero, np.float32(-127) / np.where(nonzero, top, 1),
                      np.float32(0)).astype(np.float32)
    q = np.minimum(np.round(b * iscale), 127)
    d = np.where(nonzero, np.float32(1) / np.where(nonzero, iscale, 1), 0)
    return (q.astype(np.float64) * d.astype(np.float32)).reshape(x.shape)


K_QUANTS = ("Q4_K", "Q5_K", "Q6_K")


def forward(meta, w, tokens, act8=()):
    H = meta["llama.attention.head_count"]
    KV = meta["llama.attention.head_count_kv"]
    eps = meta["llama.attention.layer_norm_rms_epsilon"]
    base = meta["llama.rope.freq_base"]
    L = meta["llama.block_count"]
    x = w["token_embd.weight"][0][tokens]
    T, d = x.shape
    hd = d // H
    theta = np.arange(T, dtype=np.float64)[:, None] * base ** (-np.arange(0, hd, 2) / hd)
    cos, sin = np.cos(theta), np.sin(theta)

    def rope(v):  # v [T, heads, hd]: pairs (2i, 2i+1)
        a, b = v[..., 0::2], v[..., 1::2]
        out = np.empty_like(v)
        out[..., 0::2] = a * cos[:, None] - b * sin[:, None]
        out[..., 1::2] = a * sin[:, None] + b * cos[:, None]
        return out

    def linear(x, name):
        if w[name][1] in act8:
            x = quantize_q8_K(x) if w[name][1] in K_QUANTS else quantize_q8_0(x)
        return x @ w[name][0].T

    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(L):
        p = f"blk.{i}."
        h = rmsnorm(x, w[p + "attn_norm.weight"][0], eps)
        q = rope(linear(h, p + "attn_q.weight").reshape(T, H, hd))
        k = rope(linear(h, p + "attn_k.weight").reshape(T, KV, hd))
        v = linear(h, p + "attn_v.weight").reshape(T, KV, hd)
        o = np.empty((T, H, hd))
        for j in range(H):
            g = j // (H // KV)
            s = q[:, j] @ k[:, g].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            o[:, j] = (s / s.sum(-1, keepdims=True)) @ v[:, g]
        x = x + linear(o.reshape(T, H * hd), p + "attn_output.weight")
        h = rmsnorm(x, w[p + "ffn_norm.weight"][0], eps)
        gate = linear(h, p + "ffn_gate.weight")
        x = x + linear(gate / (1 + np.exp(-gate)) * linear(h, p + "ffn_up.weight"),
                       p + "ffn_down.weight")
    x = rmsnorm(x, w["output_norm.weight"][0], eps)
    return linear(x, "output.weight" if "output.weight" in w else "token_embd.weight")


def main():
    if sys.argv[1] == "--types":
        _, q = read_gguf(sys.argv[2])
        types = [NAMES[ty] for ty, _, _ in q.values()]
        print(" ".join(f"{t}:{types.count(t)}" for t in sorted(set(types))))
        return
    if sys.argv[1] == "--dequant":
        _, q = read_gguf(sys.argv[2])
        _, ref = read_gguf(sys.argv[3])
        bad = 0
        for name, (ty, ne, raw) in q.items():
            rty, rne, rraw = ref[name]
            assert rty == 0 and rne == ne, name
            if not np.array_equal(dequant(ty, ne, raw).view(np.uint32),
                                  dequant(0, ne, rraw).view(np.uint32)):
                print(f"{name}: type {ty} differs from llama.cpp's dequantization")
                bad += 1
        print(f"{len(q) - bad}/{len(q)} tensors equal llama.cpp's dequantization")
        sys.exit(1 if bad else 0)
    meta, tensors = read_gguf(sys.argv[1])
    w = {n: (dequant(*t).astype(np.float64), NAMES[t[0]]) for n, t in tensors.items()}
    tokens = np.load(sys.argv[2]).reshape(-1)
    opts = dict(zip(sys.argv[4::2], sys.argv[5::2]))
    act8 = opts["--act8"].split(",") if "--act8" in opts else ()
    if "--steps" in opts:
        ids = np.load(opts["--steps"]).reshape(-1)
        logits = forward(meta, w, np.concatenate([tokens, ids[:-1]]), act8)[len(tokens) - 1:]
    else:
        logits = forward(meta, w, tokens, act8)
    np.save(sys.argv[3], logits[None])


if __name__ == "__main__":
    main()
