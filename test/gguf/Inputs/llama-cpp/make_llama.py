#!/usr/bin/python3
"""A LLaMA-shaped GGUF file of random F32 weights whose rows are whole
K-quant super-blocks (256), for llama.cpp's quantizer to quantize
(test/gguf/llama-cpp.test, regen.sh beside this file):

    make_llama.py OUT.gguf [--d 256] [--ffn 512] [--layers 2] [--heads 4]
                  [--kv-heads 2] [--vocab 300] [--untied] [--seed 1]

Arch `llama` with the keys and tensor names llama.cpp's converter writes
(general.architecture, llama.context_length, .embedding_length,
.block_count, .feed_forward_length, .attention.head_count,
.head_count_kv, .layer_norm_rms_epsilon, .rope.freq_base,
.rope.dimension_count, .vocab_size; token_embd, output_norm, output
(--untied; tied files reuse token_embd), blk.N.attn_norm, attn_q, attn_k,
attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down) and
llama.cpp's SentencePiece vocabulary (<unk> <s> </s>, the 256 byte
tokens, dummies). Values: matrices N(0, 1/in), norm weights 1 + 0.1 N,
from numpy's RandomState(SEED) in file order (its streams are frozen, so
the same SEED writes the same bytes on every numpy). GGUF v3, alignment
32, dims fastest first (a [out, in] matrix has ne = [in, out]).
"""
import argparse
import struct

import numpy as np

GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STR, GGUF_ARR = 4, 5, 6, 7, 8, 9


def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, t, v):
    out = string(key) + struct.pack("<I", t)
    if t == GGUF_STR:
        return out + string(v)
    if t == GGUF_ARR:
        et, items = v
        out += struct.pack("<IQ", et, len(items))
        if et == GGUF_STR:
            return out + b"".join(string(x) for x in items)
        fmt = {GGUF_I32: "<i", GGUF_F32: "<f"}[et]
        return out + b"".join(struct.pack(fmt, x) for x in items)
    fmt = {GGUF_U32: "<I", GGUF_F32: "<f", GGUF_BOOL: "<?"}[t]
    return out + struct.pack(fmt, v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=300)
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    d, f, L, H, KV, V = a.d, a.ffn, a.layers, a.heads, a.kv_heads, a.vocab
    assert V >= 259 and d % H == 0
    hd = d // H
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    toks += [f"<t{i}>" for i in range(len(toks), V)]
    types = [2, 3, 3] + [6] * 256 + [1] * (V - 259)
    meta = [
        kv("general.architecture", GGUF_STR, "llama"),
        kv("general.name", GGUF_STR, "llama-cpp-test"),
        kv("llama.context_length", GGUF_U32, 512),
        kv("llama.embedding_length", GGUF_U32, d),
        kv("llama.block_count", GGUF_U32, L),
        kv("llama.feed_forward_length", GGUF_U32, f),
        kv("llama.attention.head_count", GGUF_U32, H),
        kv("llama.attention.head_count_kv", GGUF_U32, KV),
        kv("llama.attention.layer_norm_rms_epsilon", GGUF_F32, 1e-5),
        kv("llama.rope.freq_base", GGUF_F32, 10000.0),
        kv("llama.rope.dimension_count", GGUF_U32, hd),
        kv("llama.vocab_size", GGUF_U32, V),
        kv("tokenizer.ggml.model", GGUF_STR, "llama"),
        kv("tokenizer.ggml.tokens", GGUF_ARR, (GGUF_STR, toks)),
        kv("tokenizer.ggml.scores", GGUF_ARR,
           (GGUF_F32, [0.0] * 259 + [-float(i) for i in range(259, V)])),
        kv("tokenizer.ggml.token_type", GGUF_ARR, (GGUF_I32, types)),
        kv("tokenizer.ggml.bos_token_id", GGUF_U32, 1),
        kv("tokenizer.ggml.eos_token_id", GGUF_U32, 2),
        kv("tokenizer.ggml.unknown_token_id", GGUF_U32, 0),
        kv("tokenizer.ggml.add_bos_token", GGUF_BOOL, False),
    ]
    tensors = [("token_embd.weight", [d, V]), ("output_norm.weight", [d])]
    if a.untied:
        tensors.append(("output.weight", [d, V]))
    for i in range(L):
        b = f"blk.{i}."
        tensors += [(b + "attn_norm.weight", [d]), (b + "attn_q.weight", [d, H * hd]),
                    (b + "attn_k.weight", [d, KV * hd]), (b + "attn_v.weight", [d, KV * hd]),
                    (b + "attn_output.weight", [H * hd, d]), (b + "ffn_norm.weight", [d]),
                    (b + "ffn_gate.weight", [d, f]), (b + "ffn_up.weight", [d, f]),
                    (b + "ffn_down.weight", [f, d])]
    rng = np.random.RandomState(a.seed)
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta)
    offset, blobs = 0, []
    for name, ne in tensors:
        out += string(name) + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", x) for x in ne)
        out += struct.pack("<IQ", 0, offset)
        n = int(np.prod(ne))
        if len(ne) == 1:
            x = 1 + 0.1 * rng.standard_normal(n)
        else:
            x = rng.standard_normal(n) / np.sqrt(ne[0])
        blob = x.astype("<f4").tobytes()
        blob += b"\0" * (-len(blob) % 32)
        blobs.append(blob)
        offset += len(blob)
    out += b"\0" * (-len(out) % 32)
    with open(a.out, "wb") as fh:
        fh.write(out + b"".join(blobs))


if __name__ == "__main__":
    main()
