#!/usr/bin/env python3
"""Rewrites the F32 tensors of a GGUF file in another ggml type, and writes
beside it the file of the values that type stands for:

    requant.py IN.gguf TYPE OUT.gguf OUT-F32.gguf [--random SEED]

TYPE is f32 (no conversion), f16, q8_0 or q4_0. With --random, the tensors'
values are first replaced by deterministic random ones (vectors 1 + 0.1 N,
the rest 0.3 N: numpy's default_rng(SEED) in file order). Every tensor of two or more dimensions whose rows
(ne[0]) are whole blocks is converted, as llama.cpp's quantizer does with
--pure (the others stay F32, as its fallbacks keep them unquantized);
OUT-F32.gguf holds every tensor as F32: the converted ones dequantized as
ggml's dequantize_row_* define them. The metadata is copied byte for byte.
GGUF v2/v3 as ggml's docs/gguf.md lays it out; write_gguf.py has the block
formats.
"""
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from write_gguf import F16, F32, Q4_0, Q8_0, q4_0, q8_0  # noqa: E402

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, data):
        self.d, self.at = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.at)
        self.at += struct.calcsize(fmt)
        return v[0]

    def string(self):
        n = self.take("<Q")
        s = self.d[self.at:self.at + n]
        self.at += n
        return s.decode()

    def skip_value(self, t):
        if t == 8:
            self.string()
        elif t == 9:
            et, n = self.take("<I"), self.take("<Q")
            for _ in range(n):
                self.skip_value(et)
        else:
            self.at += SIZES[t]


def read(path):
    data = open(path, "rb").read()
    r = Reader(data)
    assert r.d[:4] == b"GGUF"
    r.at = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    kv_start = r.at
    alignment = 32
    for _ in range(n_kv):
        key = r.string()
        t = r.take("<I")
        if key == "general.alignment":
            alignment = struct.unpack_from("<I", data, r.at)[0]
        r.skip_value(t)
    kv = data[kv_start:r.at]
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        ne = [r.take("<Q") for _ in range(r.take("<I"))]
        infos.append((name, ne, r.take("<I"), r.take("<Q")))
    start = (r.at + alignment - 1) // alignment * alignment
    tensors = []
    for name, ne, ty, off in infos:
        assert ty == F32, f"{path}: {name} is not F32"
        n = int(np.prod(ne))
        a = np.frombuffer(data, np.float32, n, start + off).reshape(list(reversed(ne)))
        tensors.append((name, a))
    return version, n_kv, kv, alignment, tensors


def write(path, version, n_kv, kv, alignment, tensors):
    """tensors: (name, row-major shape, ggml type, bytes)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), n_kv) + kv
    offset, blobs = 0, []
    for name, shape, ty, raw in tensors:
        b = name.encode()
        out += struct.pack("<Q", len(b)) + b + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", n) for n in reversed(shape))
        out += struct.pack("<IQ", ty, offset)
        blob = raw + b"\0" * (-len(raw) % alignment)
        blobs.append(blob)
        offset += len(blob)
    out += b"\0" * (-len(out) % alignment)
    with open(path, "wb") as f:
        f.write(out + b"".join(blobs))


def main():
    src, kind, out, deq = sys.argv[1:5]
    version, n_kv, kv, alignment, tensors = read(src)
    if len(sys.argv) > 6 and sys.argv[5] == "--random":
        rng = np.random.default_rng(int(sys.argv[6]))
        tensors = [(n, (1 + 0.1 * rng.standard_normal(a.shape) if a.ndim == 1 else
                        0.3 * rng.standard_normal(a.shape)).astype(np.float32))
                   for n, a in tensors]
    ty, fn = {"f32": (F32, None), "f16": (F16, None), "q8_0": (Q8_0, q8_0),
              "q4_0": (Q4_0, q4_0)}[kind]
    block = 1 if fn is None else 32
    quant, plain = [], []
    for name, a in tensors:
        if ty != F32 and a.ndim >= 2 and a.shape[-1] % block == 0:
            if fn is None:
                raw, values = a.astype(np.float16).tobytes(), a.astype(np.float16).astype(np.float32)
            else:
                raw, values = fn(a.reshape(-1, a.shape[-1]))
                values = values.reshape(a.shape)
            quant.append((name, a.shape, ty, raw))
        else:
            quant.append((name, a.shape, F32, a.tobytes()))
            values = a
        plain.append((name, a.shape, F32, values.astype(np.float32).tobytes()))
    write(out, version, n_kv, kv, alignment, quant)
    write(deq, version, n_kv, kv, alignment, plain)


if __name__ == "__main__":
    main()
