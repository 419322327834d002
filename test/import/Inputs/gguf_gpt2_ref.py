#!/usr/bin/python3
"""A numpy forward pass of a GGUF file of llama.cpp's gpt2 architecture (F32
tensors, as make_gguf.py --random writes them), to show where tfm and
llama.cpp part: with ggml's CPU GELU (input rounded to f16, the value looked
up in a table of f16 results: ggml-cpu/vec.h, GGML_GELU_FP16) it gives
llama.cpp's logits, with the tanh GELU in f32 it gives tfm's.

    gguf_gpt2_ref.py FILE.gguf TOKENS.npy {ggml,exact} OUT.npy
"""
import struct
import sys

import numpy as np


def read_gguf(path):
    """Metadata (scalars only) and F32 tensors by name, in row-major order."""
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        (n,) = take("<Q")
        s = data[pos:pos + n].decode()
        pos += n
        return s

    fmts = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f",
            7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<IQ")
            return [value(et) for _ in range(n)]
        return take(fmts[t])[0]

    assert data[:4] == b"GGUF"
    pos = 4
    _, n_tensors, n_kv = take("<IQQ")
    kv = {}
    for _ in range(n_kv):
        k = string()
        (t,) = take("<I")
        kv[k] = value(t)
    infos = []
    for _ in range(n_tensors):
        name = string()
        (nd,) = take("<I")
        ne = take("<" + "Q" * nd)
        t, off = take("<IQ")
        assert t == 0, "F32 only"
        infos.append((name, ne, off))
    align = kv.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    tensors = {}
    for name, ne, off in infos:
        n = int(np.prod(ne))
        a = np.frombuffer(data, np.float32, n, base + off)
        tensors[name] = a.reshape(tuple(reversed(ne))).astype(np.float64)
    return kv, tensors


def gelu_exact(x):
    x = x.astype(np.float32)
    return (0.5 * x * (1 + np.tanh(np.float32(0.7978845608028654) *
                                   (x + np.float32(0.044715) * x ** 3))))


def gelu_ggml(x):
    x32 = x.astype(np.float32)
    h = x32.astype(np.float16).astype(np.float32)
    y = gelu_exact(h).astype(np.float16).astype(np.float32)
    return np.where(x32 <= -10, 0, np.where(x32 >= 10, x32, y))


def main():
    path, tokens, kind, out = sys.argv[1:5]
    kv, w = read_gguf(path)
    gelu = gelu_ggml if kind == "ggml" else gelu_exact
    H = kv["gpt2.attention.head_count"]
    eps = kv["gpt2.attention.layer_norm_epsilon"]
    L = kv["gpt2.block_count"]
    ids = np.load(tokens).reshape(-1)
    T = len(ids)
    x = w["token_embd.weight"][ids] + w["position_embd.weight"][:T]

    def ln(x, name):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * w[name + ".weight"] + w[name + ".bias"]

    d = x.shape[1]
    hd = d // H
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(L):
        b = f"blk.{i}."
        h = ln(x, b + "attn_norm")
        qkv = h @ w[b + "attn_qkv.weight"].T + w[b + "attn_qkv.bias"]
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        o = np.zeros_like(q)
        for j in range(H):
            s = slice(j * hd, (j + 1) * hd)
            sc = q[:, s] @ k[:, s].T / np.sqrt(hd) + mask
            p = np.exp(sc - sc.max(-1, keepdims=True))
            o[:, s] = (p / p.sum(-1, keepdims=True)) @ v[:, s]
        x = x + o @ w[b + "attn_output.weight"].T + w[b + "attn_output.bias"]
        h = ln(x, b + "ffn_norm")
        u = h @ w[b + "ffn_up.weight"].T + w[b + "ffn_up.bias"]
        x = x + gelu(u).astype(np.float64) @ w[b + "ffn_down.weight"].T + w[b + "ffn_down.bias"]
    x = ln(x, "output_norm")
    head = w.get("output.weight", w["token_embd.weight"])
    np.save(out, (x @ head.T).astype(np.float32)[None])


if __name__ == "__main__":
    main()
