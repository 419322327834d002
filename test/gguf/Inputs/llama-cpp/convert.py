#!/usr/bin/python3
"""Converts an F32 GGUF file of make_llama.py to F16, BF16 or Q8_0 as
llama.cpp's quantizer (llama_model_quantize, ftype MOSTLY_F16 = 1,
MOSTLY_BF16 = 32, MOSTLY_Q8_0 = 7) writes it, byte for byte: the metadata copied with
general.quantization_version = 2 and general.file_type appended, the
tensors in llama.cpp's order (those outside blk.N first, then layer by
layer, each group sorted by name), every tensor of two dimensions
converted (f16: IEEE round to nearest even; bf16: the high half of the f32
rounded to nearest even; q8_0: ggml's quantize_row_q8_0_ref, in
../write_gguf.py), the vectors kept F32, alignment 32.

    convert.py IN-F32.gguf OUT.gguf f16|bf16|q8_0  (any case)

regen.sh checks that the result is llama.cpp's own file (sha256 in
SHA256SUMS), so the test needs no llama.cpp to have it.
"""
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from write_gguf import q8_0  # noqa: E402

SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def main():
    src, dst, kind = sys.argv[1], sys.argv[2], sys.argv[3].lower()
    data = open(src, "rb").read()
    at = 4
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, at)
    at += 20

    def take(fmt):
        nonlocal at
        v = struct.unpack_from(fmt, data, at)[0]
        at += struct.calcsize(fmt)
        return v

    def skip(t):
        nonlocal at
        if t == 8:
            n = take("<Q")
            at += n
        elif t == 9:
            et, n = take("<I"), take("<Q")
            for _ in range(n):
                skip(et)
        else:
            at += SCALAR[t]

    kv_start = at
    for _ in range(n_kv):
        n = take("<Q")
        at += n
        skip(take("<I"))
    kv = data[kv_start:at]
    infos = []
    for _ in range(n_tensors):
        n = take("<Q")
        name = data[at:at + n].decode()
        at += n
        ne = [take("<Q") for _ in range(take("<I"))]
        ty, off = take("<I"), take("<Q")
        assert ty == 0, f"{src}: {name} is not F32"
        infos.append((name, ne, off))
    start = (at + 31) // 32 * 32

    def key(info):
        m = re.match(r"blk\.(\d+)\.", info[0])
        return (int(m.group(1)) if m else -1, info[0])

    ftype = {"f16": 1, "bf16": 32, "q8_0": 7}[kind]
    for k, t, v in (("general.quantization_version", 4, 2), ("general.file_type", 4, ftype)):
        kv += struct.pack("<Q", len(k)) + k.encode() + struct.pack("<II", t, v)
    out = b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv + 2) + kv
    offset, blobs = 0, []
    for name, ne, off in sorted(infos, key=key):
        x = np.frombuffer(data, "<f4", int(np.prod(ne)), start + off)
        ty = 0
        if len(ne) == 2 and kind == "f16":
            x, ty = x.astype("<f2"), 1
        elif len(ne) == 2 and kind == "q8_0":
            x, ty = np.frombuffer(q8_0(x.reshape(-1, ne[0]))[0], np.uint8), 8
        elif len(ne) == 2:
            u = x.view("<u4").astype(np.uint64)
            x, ty = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2"), 30
        out += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", ty, offset)
        blob = x.tobytes() + b"\0" * (-x.nbytes % 32)
        blobs.append(blob)
        offset += len(blob)
    out += b"\0" * (-len(out) % 32)
    with open(dst, "wb") as f:
        f.write(out + b"".join(blobs))


if __name__ == "__main__":
    main()
