#!/usr/bin/python3
"""Writes the ggml block-type test inputs of GgufQuantsTest.cpp: for each type T,
quants-T.gguf holds three tensors, all [8, 768] (ne {768, 8}):

  source       F32  the rows llama.cpp's quantizer was given
  quantized    T    what llama.cpp's quantizer wrote for them
  dequantized  F32  llama.cpp's own dequantization of `quantized`

made with the llama.cpp peer (../shared/peers/llama, llama.cpp v0.5.0, after its setup.sh):

  1. make_gguf.py --model gpt2 --layers 1 --vocab 1000 --dtype f32 --out DIR
     (a small F32 GPT-2 that llama.cpp loads; rows of 768 = 3 super-blocks of 256, so the
     K-quants apply);
  2. rows 0-3 of blk.0.ffn_up.weight overwritten here with awkward values (a zero super-block,
     constants, a ramp, tiny values whose scales are f16 subnormals, large values, outliers,
     all-positive rows: every scale and min path), rows 4-7 as make_gguf.py drew them;
  3. build/llama_quant DIR/gpt2-V1000-L1-f32.gguf DIR/T.gguf T 1 --pure
     (llama_model_quantize, every matrix in T's base type, no importance matrix);
  4. build/llama_quant --requant DIR/T.gguf DIR/T-f32.gguf F32
     (llama.cpp dequantizes each tensor with its type's to_float, ggml's dequantize_row_*);
  5. rows 0-7 of blk.0.ffn_up.weight of the three files copied here.

Run:  /usr/bin/python3 make_inputs.py [PEER_DIR]   (default /work/shared/peers/llama)
Needs numpy; gguf-py comes from the peer's llama.cpp tree.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

PEER = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/peers/llama"
sys.path.insert(0, os.path.join(PEER, "build", "llama.cpp", "gguf-py"))
import gguf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TENSOR = "blk.0.ffn_up.weight"
ROWS = 8
# llama_quant's type names -> the ggml type the file holds.
TYPES = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
         "Q6_K", "IQ4_NL", "IQ4_XS"]


def awkward_rows(k):
    """Rows 0-3: values that reach every branch of the quantizers' scales."""
    rng = np.random.default_rng(29)
    r = np.zeros((4, k), np.float32)
    # Row 0: a zero super-block, a constant one with a negative half, a ramp.
    r[0, 256:384] = 0.5
    r[0, 384:512] = -1e-3
    r[0, 512:768] = np.linspace(-1, 1, 256, dtype=np.float32)
    # Row 1: tiny values (scales below f16's normal range) with outliers.
    r[1] = rng.standard_normal(k) * 1e-6
    r[1, 7] = 3e-5
    r[1, 300] = -4e-5
    # Row 2: large values, one block of a single spike.
    r[2] = rng.standard_normal(k) * 300.0
    r[2, 64:96] = 0.0
    r[2, 80] = -5000.0
    # Row 3: all positive, and one block all negative.
    r[3] = rng.uniform(0.0, 2.0, k)
    r[3, 640:672] = -rng.uniform(0.5, 1.0, 32)
    return r


def tensor(path, name):
    rd = gguf.GGUFReader(path)
    for t in rd.tensors:
        if t.name == name:
            return t
    raise SystemExit(f"{path}: no tensor {name}")


def row_bytes(t, rows):
    """The bytes of the first `rows` rows of tensor t (ne[0] elements each)."""
    data = np.asarray(t.data).reshape(-1).view(np.uint8)
    per = data.size // int(t.shape[1])
    return data[: rows * per].copy(), per


def main():
    quant = os.path.join(PEER, "build", "llama_quant")
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, os.path.join(PEER, "make_gguf.py"), "--model", "gpt2",
                        "--layers", "1", "--vocab", "1000", "--dtype", "f32", "--out", d],
                       check=True, stdout=subprocess.DEVNULL)
        src = os.path.join(d, "gpt2-V1000-L1-f32.gguf")
        rd = gguf.GGUFReader(src, "r+")
        t = [t for t in rd.tensors if t.name == TENSOR][0]
        k = int(t.shape[0])
        t.data[:4] = awkward_rows(k)
        rd.data.flush()
        del rd
        source = np.asarray(tensor(src, TENSOR).data[:ROWS], np.float32).copy()
        for ty in TYPES:
            q = os.path.join(d, ty + ".gguf")
            f = os.path.join(d, ty + "-f32.gguf")
            subprocess.run([quant, src, q, ty, "1", "--pure"], check=True,
                           stdout=subprocess.DEVNULL)
            subprocess.run([quant, q, f, "F32", "1", "--requant"], check=True,
                           stdout=subprocess.DEVNULL)
            qt = tensor(q, TENSOR)
            blocks, per = row_bytes(qt, ROWS)
            deq = np.asarray(tensor(f, TENSOR).data[:ROWS], np.float32).copy()
            w = gguf.GGUFWriter(os.path.join(HERE, f"quants-{ty.lower()}.gguf"), "tfm-test")
            w.add_string("tfm.test.made_by", "test/runtime/Inputs/gguf/make_inputs.py: "
                         f"llama_quant {ty} --pure, then --requant F32 (llama.cpp v0.5.0)")
            w.add_tensor("source", source)
            w.add_tensor("quantized", blocks.reshape(ROWS, per), raw_dtype=qt.tensor_type)
            w.add_tensor("dequantized", deq)
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
            print(f"quants-{ty.lower()}.gguf: {qt.tensor_type.name}, {per} bytes a row")


if __name__ == "__main__":
    main()
