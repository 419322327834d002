#!/usr/bin/env python3
"""Writes one set of random weights of a model (the JSON of tfmc --emit=json)
as GGUF files under the canonical names, and as safetensors files holding
the values each GGUF file's tensors stand for, so that the runtime must give
the same output from both:

  f32.gguf      every tensor F32               ref.safetensors      the values
  f16.gguf      matrices F16, vectors F32      f16.safetensors      rounded to f16
  q8_0.gguf     matrices Q8_0, vectors F32     q8_0.safetensors     dequantized
  q4_0.gguf     matrices Q4_0, vectors F32     q4_0.safetensors     dequantized
  missing.gguf  f32.gguf without final_norm.weight

GGUF v3 as ggml's docs/gguf.md lays it out (alignment 32, dims fastest
first: a [out, in] matrix has ne = [in, out]); Q8_0 and Q4_0 blocks as
ggml-common.h defines them, quantized as quantize_row_q8_0_ref /
quantize_row_q4_0_ref do, and dequantized as dequantize_row_q8_0 /
dequantize_row_q4_0 do (f32 products of the f16 scale and the integer).

Usage: write_gguf.py SPEC.json OUT_DIR
"""
import json
import os
import struct
import sys

import numpy as np

F32, F16, Q4_0, Q8_0 = 0, 1, 2, 8


def round_away(x):
    """C's roundf: halves away from zero (in float64, exact for float32)."""
    x = x.astype(np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def q8_0(w):
    """Q8_0 blocks of `w` [rows, k] (bytes) and their dequantized values."""
    b = w.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = round_away(b * inv[:, None]).astype(np.int8)
    d16 = d.astype(np.float16)
    blocks = np.zeros((b.shape[0], 34), np.uint8)
    blocks[:, :2] = d16.view(np.uint8).reshape(-1, 2)
    blocks[:, 2:] = q.view(np.uint8)
    deq = (q.astype(np.float32) * d16.astype(np.float32)[:, None]).astype(np.float32)
    return blocks.tobytes(), deq.reshape(w.shape)


def q4_0(w):
    """Q4_0 blocks of `w` and their dequantized values."""
    b = w.reshape(-1, 32).astype(np.float32)
    at = np.abs(b).argmax(axis=1)  # the first of the largest magnitude
    mx = b[np.arange(b.shape[0]), at]
    d = (mx / np.float32(-8)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    x = (b * inv[:, None]).astype(np.float32) + np.float32(8.5)
    q = np.minimum(15, np.trunc(x.astype(np.float64))).astype(np.uint8)
    d16 = d.astype(np.float16)
    blocks = np.zeros((b.shape[0], 18), np.uint8)
    blocks[:, :2] = d16.view(np.uint8).reshape(-1, 2)
    blocks[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    deq = ((q.astype(np.int32) - 8).astype(np.float32) * d16.astype(np.float32)[:, None])
    return blocks.tobytes(), deq.astype(np.float32).reshape(w.shape)


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, tensors):
    """tensors: name -> (row-major shape, ggml type, bytes)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 1)
    out += gguf_string("general.architecture") + struct.pack("<I", 8) + gguf_string("llama")
    offset, data = 0, b""
    for name, (shape, ty, raw) in tensors.items():
        out += gguf_string(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", n) for n in reversed(shape))
        out += struct.pack("<IQ", ty, offset)
        blob = raw + b"\0" * (-len(raw) % 32)
        data += blob
        offset += len(blob)
    out += b"\0" * (-len(out) % 32)
    with open(path, "wb") as f:
        f.write(out + data)


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        raw = a.astype(np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    spec, out = json.load(open(sys.argv[1])), sys.argv[2]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(29)
    w = {}
    for p in spec["parameters"]:
        shape = tuple(p["shape"])
        if p.get("synthetic") == "ones":
            w[p["name"]] = (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            w[p["name"]] = (rng.standard_normal(shape) * 0.3).astype(np.float32)
    write_safetensors(os.path.join(out, "ref.safetensors"), w)
    write_gguf(os.path.join(out, "f32.gguf"),
               {n: (a.shape, F32, a.tobytes()) for n, a in w.items()})
    write_gguf(os.path.join(out, "missing.gguf"),
               {n: (a.shape, F32, a.tobytes()) for n, a in w.items()
                if n != "final_norm.weight"})
    for kind, ty, fn in (("f16", F16, None), ("q8_0", Q8_0, q8_0), ("q4_0", Q4_0, q4_0)):
        g, ref = {}, {}
        for n, a in w.items():
            if a.ndim == 1:
                g[n], ref[n] = (a.shape, F32, a.tobytes()), a
            elif fn is None:
                h = a.astype(np.float16)
                g[n], ref[n] = (a.shape, ty, h.tobytes()), h.astype(np.float32)
            else:
                raw, deq = fn(a)
                g[n], ref[n] = (a.shape, ty, raw), deq
        write_gguf(os.path.join(out, kind + ".gguf"), g)
        write_safetensors(os.path.join(out, kind + ".safetensors"), ref)


if __name__ == "__main__":
    main()
