#!/usr/bin/env python3
"""Writes random weights of a model (the JSON of tfmc --emit=json) as GGUF
files whose matrices hold random but valid blocks of each ggml type the
kernels of tfm.ggml_linear_kernel compute, and beside each a safetensors
file of the values those blocks stand for, dequantized here in numpy from
ggml's block layouts (ggml-common.h, dequantize_row_* of ggml-quants.c):

  TYPE.gguf / TYPE.safetensors   every matrix of TYPE (f32, f16, bf16,
                                 q8_0, q4_0, q4_k, q5_k, q6_k), vectors F32
  mix.gguf / mix.safetensors     the matrices in turn of every type (a
                                 Q4_K_M file mixes Q4_K and Q6_K)
  f32-q8_0.safetensors,          f32.safetensors with its matrices as
  f32-q4_0.safetensors           ggml's reference quantizers make them
                                 (what --quantize=q8_0 / q4_0 compute with)
  f32-T.safetensors, f32-T.gguf  for T = q4_k, q5_k, q6_k: the same with
                                 ggml's K-quantizers (kquants.py), matrices
                                 whose rows are not whole super-blocks of
                                 256 as Q8_0 (what --quantize=T computes
                                 with), and the blocks themselves

With --f32-only, only f32.safetensors and the f32-* files (a model whose
rows are not all whole super-blocks).

The embedding's table is a matrix like the others: its kernel gathers and
dequantizes rows of blocks.

Usage: write_blocks.py SPEC.json OUT_DIR [--f32-only]
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from write_gguf import q4_0, q8_0, write_gguf, write_safetensors  # noqa: E402
from kquants import q4_k, q5_k, q6_k  # noqa: E402

TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8, "q4_k": 12, "q5_k": 13,
         "q6_k": 14, "bf16": 30}


def f16(rng, n, lo, hi):
    return rng.uniform(lo, hi, n).astype(np.float16)


def scale_min_k4(j, s):
    """ggml's get_scale_min_k4 on the 12 scale bytes `s` [blocks, 12]."""
    s = s.astype(np.int32)
    if j < 4:
        return s[:, j] & 63, s[:, j + 4] & 63
    return ((s[:, j + 4] & 0xF) | ((s[:, j - 4] >> 6) << 4),
            (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4))


def blocks(rng, kind, rows, k):
    """Random blocks of `kind` for a [rows, k] matrix: (bytes, f32 values),
    the values of the order of 1 / sqrt(k) (the model stays well
    conditioned: outputs of two summation orders agree to f32 rounding)."""
    nb = rows * k
    f32 = np.float32
    if kind == "f32":
        v = (rng.standard_normal(nb) / np.sqrt(k)).astype(f32)
        return v.tobytes(), v.reshape(rows, k)
    if kind == "f16":
        v = (rng.standard_normal(nb) / np.sqrt(k)).astype(np.float16)
        return v.tobytes(), v.astype(f32).reshape(rows, k)
    if kind == "bf16":
        v = (rng.standard_normal(nb) / np.sqrt(k)).astype(f32)
        hi = (v.view(np.uint32) >> 16).astype(np.uint16)
        return hi.tobytes(), (hi.astype(np.uint32) << 16).view(f32).reshape(rows, k)
    if kind == "q8_0":
        n = nb // 32
        d = f16(rng, n, 0.5, 1.5) * np.float16(0.001 / np.sqrt(k / 256))
        q = rng.integers(-127, 128, (n, 32)).astype(np.int8)
        raw = np.concatenate([d.view(np.uint8).reshape(n, 2), q.view(np.uint8)], 1)
        v = q.astype(f32) * d.astype(f32)[:, None]
        return raw.tobytes(), v.reshape(rows, k)
    if kind == "q4_0":
        n = nb // 32
        d = f16(rng, n, 0.5, 1.5) * np.float16(0.015 / np.sqrt(k / 256))
        qs = rng.integers(0, 256, (n, 16)).astype(np.uint8)
        raw = np.concatenate([d.view(np.uint8).reshape(n, 2), qs], 1)
        q = np.concatenate([qs & 15, qs >> 4], 1).astype(np.int32) - 8
        v = q.astype(f32) * d.astype(f32)[:, None]
        return raw.tobytes(), v.reshape(rows, k)
    n = nb // 256  # super-blocks
    if kind in ("q4_k", "q5_k"):
        five = kind == "q5_k"
        d = f16(rng, n, 0.5, 1.5) * np.float16(0.0002 / np.sqrt(k / 256))
        dmin = f16(rng, n, 0.5, 1.5) * np.float16(0.0004 / np.sqrt(k / 256))
        sc = rng.integers(0, 256, (n, 12)).astype(np.uint8)
        qh = rng.integers(0, 256, (n, 32)).astype(np.uint8)
        qs = rng.integers(0, 256, (n, 128)).astype(np.uint8)
        parts = [d.view(np.uint8).reshape(n, 2), dmin.view(np.uint8).reshape(n, 2), sc]
        raw = np.concatenate(parts + ([qh] if five else []) + [qs], 1)
        v = np.zeros((n, 256), f32)
        for j in range(8):
            s, m = scale_min_k4(j, sc)
            d1 = d.astype(f32) * s.astype(f32)
            m1 = dmin.astype(f32) * m.astype(f32)
            q = (qs[:, 32 * (j // 2):32 * (j // 2) + 32] >> (4 * (j % 2))) & 15
            q = q.astype(np.int32)
            if five:
                q = q + 16 * ((qh.astype(np.int32) >> j) & 1)
            v[:, 32 * j:32 * j + 32] = d1[:, None] * q.astype(f32) - m1[:, None]
        return raw.tobytes(), v.reshape(rows, k)
    if kind == "q6_k":
        d = f16(rng, n, 0.5, 1.5) * np.float16(0.00006 / np.sqrt(k / 256))
        ql = rng.integers(0, 256, (n, 128)).astype(np.uint8)
        qh = rng.integers(0, 256, (n, 64)).astype(np.uint8)
        sc = rng.integers(-128, 128, (n, 16)).astype(np.int8)
        raw = np.concatenate([ql, qh, sc.view(np.uint8), d.view(np.uint8).reshape(n, 2)], 1)
        v = np.zeros((n, 256), f32)
        for h in range(2):
            for t in range(4):
                low = ql[:, 64 * h + 32 * (t % 2):64 * h + 32 * (t % 2) + 32]
                low = (low >> (4 * (t // 2))) & 15
                high = (qh[:, 32 * h:32 * h + 32] >> (2 * t)) & 3
                q = (low.astype(np.int32) | (high.astype(np.int32) << 4)) - 32
                for l16 in range(2):
                    s = sc[:, 8 * h + 2 * t + l16].astype(f32)
                    ds = d.astype(f32) * s
                    at = 128 * h + 32 * t + 16 * l16
                    v[:, at:at + 16] = ds[:, None] * q[:, 16 * l16:16 * l16 + 16].astype(f32)
        return raw.tobytes(), v.reshape(rows, k)
    raise ValueError(kind)


def main():
    spec, out = json.load(open(sys.argv[1])), sys.argv[2]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(30)
    vectors, matrices = {}, []
    for p in spec["parameters"]:
        shape = tuple(p["shape"])
        if len(shape) == 1:
            vectors[p["name"]] = (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            matrices.append((p["name"], shape))
    names = ["f32"] if "--f32-only" in sys.argv[3:] else list(TYPES) + ["mix"]
    for kind in names:
        g, ref = {}, {}
        for n, a in vectors.items():
            g[n], ref[n] = (a.shape, 0, a.tobytes()), a
        for i, (n, shape) in enumerate(matrices):
            t = kind if kind != "mix" else list(TYPES)[i % len(TYPES)]
            raw, v = blocks(rng, t, shape[0], shape[1])
            g[n], ref[n] = (shape, TYPES[t], raw), v
        write_gguf(os.path.join(out, kind + ".gguf"), g)
        write_safetensors(os.path.join(out, kind + ".safetensors"), ref)
        if kind == "f32":
            for name, fn in (("q8_0", q8_0), ("q4_0", q4_0)):
                write_safetensors(
                    os.path.join(out, "f32-%s.safetensors" % name),
                    {n: (a if a.ndim == 1 else fn(a)[1]) for n, a in ref.items()})
            for name, fn in (("q4_k", q4_k), ("q5_k", q5_k), ("q6_k", q6_k)):
                g, deq = {}, {}
                for n, a in ref.items():
                    if a.ndim == 1:
                        g[n], deq[n] = (a.shape, 0, a.tobytes()), a
                        continue
                    k = a.shape[1]
                    t, f = (name, fn) if k % 256 == 0 else ("q8_0", q8_0)
                    if k % 32 != 0:
                        t, f = "f32", lambda x: (x.tobytes(), x)
                    raw, deq[n] = f(a)
                    g[n] = (a.shape, TYPES[t], raw)
                write_gguf(os.path.join(out, "f32-%s.gguf" % name), g)
                write_safetensors(os.path.join(out, "f32-%s.safetensors" % name), deq)


if __name__ == "__main__":
    main()
