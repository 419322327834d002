#!/usr/bin/env python3
"""read_saved.py FILE.gguf: reads a GGUF file as ggml's docs/gguf.md
(version 3) lays it out, independently of the runtime's reader, checks its
layout (tensor data offsets multiples of general.alignment, the data section
starting at the first aligned byte after the tensor infos, each tensor's
bytes within the file and overlapping no other's) and prints its metadata
(key = value) and tensors (name type [shape, row-major]), sorted."""
import struct
import sys

# ggml types: (name, values per block, bytes per block).
TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 8: ("Q8_0", 32, 34),
         12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
         30: ("BF16", 1, 2)}

path = sys.argv[1]
data = open(path, "rb").read()
at = 0


def take(fmt):
    global at
    v = struct.unpack_from(fmt, data, at)[0]
    at += struct.calcsize(fmt)
    return v


def string():
    global at
    n = take("<Q")
    at += n
    return data[at - n:at].decode()


def value(t):
    if t == 8:
        return string()
    if t == 9:
        et, n = take("<I"), take("<Q")
        return [value(et) for _ in range(n)]
    return take({0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}[t])


def fail(msg):
    sys.exit(f"{path}: {msg}")


if take("<4s") != b"GGUF":
    fail("no GGUF magic")
version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
if version != 3:
    fail(f"version {version}")
meta = {}
for _ in range(n_kv):
    key = string()
    meta[key] = value(take("<I"))
align = meta.get("general.alignment", 32)
tensors = []
for _ in range(n_tensors):
    name = string()
    ne = [take("<Q") for _ in range(take("<I"))]
    ty, off = take("<I"), take("<Q")
    tensors.append((name, ne, ty, off))
start = (at + align - 1) // align * align
spans = []
for name, ne, ty, off in tensors:
    if ty not in TYPES:
        fail(f"tensor {name}: ggml type {ty}")
    tname, block, size = TYPES[ty]
    if off % align or ne[0] % block:
        fail(f"tensor {name}: offset {off} or row {ne[0]} not aligned")
    n = 1
    for d in ne:
        n *= d
    nbytes = n // block * size
    if start + off + nbytes > len(data):
        fail(f"tensor {name}: past the end of the file")
    spans.append((off, off + nbytes, name))
spans.sort()
for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
    if b0 < a1:
        fail(f"tensors {an} and {bn} overlap")
for key in sorted(meta):
    print(f"{key} = {meta[key]}")
for name, ne, ty, off in sorted(tensors):
    print(f"{name} {TYPES[ty][0]} {list(reversed(ne))}")
