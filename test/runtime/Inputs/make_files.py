#!/usr/bin/env python3
"""Writes good and bad weight and input files for a model description (the
JSON of tfmc --emit=json): every problem the runtime must report."""
import json
import os
import struct
import sys

import numpy as np


def write(path, tensors, dtype_override=None, header_len=None, truncate=0,
          raw_header=None):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        data = a.astype(np.float32).tobytes()
        header[name] = {"dtype": dtype_override or "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    body = b"".join(blobs)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", header_len if header_len is not None else len(h)))
        f.write(h)
        f.write(body[: len(body) - truncate] if truncate else body)


def main():
    spec = json.load(open(sys.argv[1]))
    out = sys.argv[2]
    rng = np.random.default_rng(0)
    good = {p["name"]: rng.standard_normal(p["shape"]).astype(np.float32) * 0.1
            for p in spec["parameters"]}
    write(os.path.join(out, "good.safetensors"), good)
    missing = dict(good)
    del missing["layers.1.ffn.down.bias"]
    write(os.path.join(out, "missing.safetensors"), missing)
    shape = dict(good)
    shape["layers.0.attn.q.weight"] = np.zeros((48, 47), np.float32)
    write(os.path.join(out, "shape.safetensors"), shape)
    extra = dict(good)
    extra["layers.9.attn.q.weight"] = np.zeros((2, 2), np.float32)
    write(os.path.join(out, "extra.safetensors"), extra)
    many = dict(good)
    del many["final_norm.bias"]
    many["embed.tokens.weight"] = np.zeros((53, 47), np.float32)
    many["bogus"] = np.zeros((1,), np.float32)
    write(os.path.join(out, "many.safetensors"), many)
    write(os.path.join(out, "truncated.safetensors"), good, truncate=100)
    write(os.path.join(out, "badjson.safetensors"), {}, raw_header=b"{not json")
    write(os.path.join(out, "hugeheader.safetensors"), good, header_len=1 << 40)
    write(os.path.join(out, "dtype.safetensors"), {"embed.tokens.weight": good["embed.tokens.weight"]},
          dtype_override="X32")
    # A dtype safetensors knows but a parameter cannot read.
    write(os.path.join(out, "u32.safetensors"),
          {"embed.tokens.weight": good["embed.tokens.weight"]},
          dtype_override="U32")

    # The format to the letter: tensors sharing bytes, bytes in no tensor, a
    # name twice, metadata that is not a string map, a wrapping shape.
    def raw(name, header, body):
        h = header.encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(out, name), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + body)
    emb = good["embed.tokens.weight"]
    n = emb.nbytes
    raw("overlap.safetensors",
        '{"embed.tokens.weight":{"dtype":"F32","shape":%s,"data_offsets":[0,%d]},'
        '"final_norm.bias":{"dtype":"F32","shape":[48],"data_offsets":[%d,%d]}}'
        % (list(emb.shape), n, n - 96, n + 96), emb.tobytes() + bytes(96))
    raw("gap.safetensors",
        '{"embed.tokens.weight":{"dtype":"F32","shape":%s,"data_offsets":[0,%d]}}'
        % (list(emb.shape), n), emb.tobytes() + bytes(16))
    raw("dup.safetensors",
        '{"embed.tokens.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        '"embed.tokens.weight":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
        bytes(8))
    raw("meta.safetensors",
        '{"__metadata__":{"format":["pt"]},'
        '"embed.tokens.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
        bytes(4))
    raw("wrap.safetensors",
        '{"embed.tokens.weight":{"dtype":"F32","shape":[1099511627776,'
        '1099511627776,1099511627776],"data_offsets":[0,0]}}', b"")

    # npy headers as numpy reads them: a string value holding a shape, a
    # bool that is not True or False, a size the file does not hold.
    def npy(name, header, body):
        h = header.encode() + b"\n"
        h = h[:-1] + b" " * (-(10 + len(h)) % 64) + b"\n"
        with open(os.path.join(out, name), "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + body)
    tok = np.arange(8, dtype=np.int32).tobytes()
    npy("strshape.npy", "{'descr': '<i4', 'fortran_order': False, "
        "'shape': (2, 4), 'note': 'shape': (1, 1)}", tok)
    npy("falsey.npy", "{'descr': '<i4', 'fortran_order': Falsey, "
        "'shape': (2, 4), }", tok)
    npy("huge.npy", "{'descr': '<i4', 'fortran_order': False, "
        "'shape': (60000, 60000), }", tok)

    np.save(os.path.join(out, "tokens.npy"), np.arange(8, dtype=np.int32).reshape(2, 4))
    np.save(os.path.join(out, "tokens64.npy"), np.arange(8, dtype=np.int64).reshape(2, 4))
    oov = np.zeros((2, 4), np.int32)
    oov[1, 1] = 53
    np.save(os.path.join(out, "oov.npy"), oov)
    np.save(os.path.join(out, "long.npy"), np.zeros((1, 33), np.int32))
    np.save(os.path.join(out, "float.npy"), np.zeros((2, 4), np.float32))
    np.save(os.path.join(out, "rank3.npy"), np.zeros((1, 2, 3), np.int32))
    np.save(os.path.join(out, "u8.npy"), np.zeros((2, 4), np.uint8))
    with open(os.path.join(out, "notnpy.npy"), "wb") as f:
        f.write(b"hello, not an npy file")
    np.save(os.path.join(out, "shortnpy.npy"), np.zeros((2, 4), np.int32))
    data = open(os.path.join(out, "shortnpy.npy"), "rb").read()
    open(os.path.join(out, "shortnpy.npy"), "wb").write(data[:-5])


if __name__ == "__main__":
    main()
