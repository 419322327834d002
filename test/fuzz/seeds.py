#!/usr/bin/env python3
"""Writes the seed corpora of the fuzzers (test/fuzz) from the repository:
usage: seeds.py SOURCE_ROOT OUT_DIR. One folder per fuzzer; numpy is not
needed (the npy and safetensors seeds are written byte by byte)."""
import glob
import json
import os
import re
import struct
import sys


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, meta=None):
    header, body = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + body


def npy(descr, shape, data, version=1):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    h = ("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }"
         % (descr, dims)).encode()
    pre = 10 if version == 1 else 12
    h += b" " * (-(pre + len(h) + 1) % 64) + b"\n"
    size = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + size + h + data


def main():
    root, out = sys.argv[1], sys.argv[2]
    for pattern in ["models/*.tfm", "models/hf/*.tfm", "test/frontend/*.tfm",
                    "test/e2e/Inputs/*.tfm", "test/checkpoint/Inputs/*.tfm",
                    "test/gpu/Inputs/*.tfm"]:
        for p in glob.glob(os.path.join(root, pattern)):
            put(out, "fuzz-tfm", pattern.split("/")[0] + "-" +
                os.path.basename(p), open(p, "rb").read())
    for pattern in ["test/dialect/*.mlir", "test/passes/*.mlir",
                    "test/codegen/*.mlir", "test/gpu/*.mlir",
                    "test/gpu/Inputs/*.mlir"]:
        for p in glob.glob(os.path.join(root, pattern)):
            text = open(p).read()
            for i, part in enumerate(re.split(r"^// -----$", text, flags=re.M)):
                put(out, "fuzz-mlir", "%s-%d" % (os.path.basename(p), i), part)
    for p in glob.glob(os.path.join(root, "test/import/Inputs/*/config.json")):
        put(out, "fuzz-import", os.path.basename(os.path.dirname(p)) + ".json",
            open(p, "rb").read())

    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    put(out, "fuzz-safetensors", "one.safetensors",
        safetensors({"a": ("F32", [2, 2], f32)}))
    put(out, "fuzz-safetensors", "meta.safetensors",
        safetensors({"w": ("F16", [2], f32[:4]), "b": ("BF16", [2], f32[4:8]),
                     "e": ("F32", [0, 3], b"")}, meta={"format": "pt"}))
    put(out, "fuzz-safetensors", "ints.safetensors",
        safetensors({"i": ("I64", [1], f32[:8]), "j": ("I32", [2], f32[8:]),
                     "u": ("U8", [1], b"\x01")}))
    put(out, "fuzz-npy", "f32.npy", npy("<f4", [2, 2], f32))
    put(out, "fuzz-npy", "i32.npy", npy("<i4", [4], f32))
    put(out, "fuzz-npy", "i64-v2.npy", npy("<i8", [2, 1], f32, version=2))
    put(out, "fuzz-npy", "f16-v3.npy", npy("<f2", [], f32[:2], version=3))

    # The description reader: the fixture of its unit tests.
    src = open(os.path.join(root, "test/runtime/unit/DescriptionTest.cpp")).read()
    m = re.search(r"const std::string kSeq2Seq =(.*?);", src, re.S)
    if m:
        put(out, "fuzz-description", "seq2seq.json",
            "".join(re.findall(r'R"\((.*?)\)"', m.group(1), re.S)))
    put(out, "fuzz-description", "minimal.json",
        '{"name":"m","parameter_count":0,"parameters":[],"abi_params":[],'
        '"inputs":[{"name":"x","dtype":"float32","shape":["B",4]}],'
        '"outputs":[{"name":"y","dtype":"float32","shape":["B",4]}]}')
    for d in sorted(os.listdir(out)):
        print("%s: %d seeds" % (d, len(os.listdir(os.path.join(out, d)))))


if __name__ == "__main__":
    main()
