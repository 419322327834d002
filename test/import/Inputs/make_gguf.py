#!/usr/bin/python3
"""Small GGUF files for the tests of `tfmc import model.gguf`: the metadata
and tensor infos llama.cpp's converter writes for an architecture, with
zero-filled data (the importer reads no tensor data). Standard library only.

    make_gguf.py OUT.gguf ARCH [--set KEY=TYPE:VALUE] [--del KEY]
                 [--drop TENSOR] [--add TENSOR=D0xD1...] [--tied] [--version 2]
                 [--random SEED --vocab V] [--split-kv-b] [--kv-b-type f16]

ARCH is a preset below (llama, mixtral, qwen2, qwen3, qwen3moe, gemma2,
gemma3, phi3, gpt2, deepseek2). Keys without a dot prefix get the
architecture's: `--set context_length=u32:64`. TYPE is one of u8 i8 u16 i16
u32 i32 f32 bool str u64 i64 f64, or arr-TYPE with comma-separated values.
Tensor shapes are given and stored in ggml's order (ne[0] first: [in, out]).

With --random SEED the tensors hold random F32 values instead of zeros
(matrices N(0, 1/in), norm weights 1 + 0.1 N, biases and the rest 0.1 N;
Python's random.Random(SEED), so the same SEED writes the same bytes) and
the file gets the SentencePiece tokenizer llama.cpp needs to load it (V >=
259: <unk> <s> </s>, the 256 byte tokens, dummies): a model llama.cpp runs
(test/import/gguf-llama.test).

With --split-kv-b the deepseek2 file is written as newer converters write
DeepSeek's (convert_hf_to_gguf.py, DeepseekV2Model): each attn_kv_b [kv_rank,
heads * (nope + v)] (ggml's ne) viewed as [heads, nope + v, kv_rank] and
split into attn_k_b, its nope rows transposed (ne [nope, kv_rank, heads]),
and attn_v_b (ne [kv_rank, v, heads]), with the same values as the unsplit
file's (the same model), and the keys it writes with them: key_length /
value_length the latent's (kv_rank + rope, kv_rank), key_length_mla /
value_length_mla the heads', head_count_kv 1. --kv-b-type f16 stores
attn_kv_b (or attn_k_b and attn_v_b) in F16, the values rounded.

The layout (GGUF v3, docs/gguf.md of ggml): magic "GGUF", version u32,
tensor count u64, key/value count u64, the pairs (string key, u32 type,
value), the tensor infos (name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
u64 offset), padding to general.alignment (32), then the data.
"""
import argparse
import struct
import sys

TYPES = {"u8": (0, "<B"), "i8": (1, "<b"), "u16": (2, "<H"), "i16": (3, "<h"),
         "u32": (4, "<I"), "i32": (5, "<i"), "f32": (6, "<f"), "bool": (7, "<?"),
         "str": (8, None), "u64": (10, "<Q"), "i64": (11, "<q"), "f64": (12, "<d")}
ARRAY = 9
F32 = 0
F16 = 1


def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def scalar(t, v):
    code, fmt = TYPES[t]
    if t == "str":
        return string(v)
    return struct.pack(fmt, v)


def value(t, v):
    """The type code and encoding of a value of type t."""
    if t.startswith("arr-"):
        et = t[4:]
        body = struct.pack("<IQ", TYPES[et][0], len(v))
        for x in v:
            body += scalar(et, x)
        return ARRAY, body
    return TYPES[t][0], scalar(t, v)


def parse(t, text):
    def one(et, x):
        if et == "str":
            return x
        if et == "bool":
            return x in ("1", "true")
        if et.startswith("f"):
            return float(x)
        return int(x)
    if t.startswith("arr-"):
        return [one(t[4:], x) for x in text.split(",")] if text else []
    return one(t, text)


class Model:
    def __init__(self, arch):
        self.arch = arch
        self.kv = [("general.architecture", "str", arch),
                   ("general.name", "str", "test")]
        self.tensors = []  # (name, ne)
        self.fixed = {}  # name -> values, written as they are
        self.f16 = set()  # names stored in F16 (the values rounded)

    def key(self, k, t, v):
        k = k if "." in k and k.split(".")[0] in ("general", "tokenizer", "split", "quantize", "clip") \
            or k.startswith(self.arch + ".") else self.arch + "." + k
        self.kv = [x for x in self.kv if x[0] != k] + [(k, t, v)]

    def t(self, name, *ne):
        self.tensors.append((name, list(ne)))

    def values(self, name, n, ne, rng):
        """Random values of tensor `name` (n elements, ggml shape ne)."""
        if name.endswith("norm.weight"):
            return [1.0 + 0.1 * rng.gauss(0, 1) for _ in range(n)]
        if len(ne) >= 2 and name.endswith(".weight"):
            sd = ne[0] ** -0.5
            return [rng.gauss(0, sd) for _ in range(n)]
        return [0.1 * rng.gauss(0, 1) for _ in range(n)]

    def write(self, path, version=3, seed=None):
        align = 32
        out = b"GGUF" + struct.pack("<IQQ", version, len(self.tensors), len(self.kv))
        for k, t, v in self.kv:
            code, body = value(t, v)
            out += string(k) + struct.pack("<I", code) + body
        offset = 0
        infos = b""
        sizes = []
        for name, ne in self.tensors:
            n = 1
            for x in ne:
                n *= x
            width = 2 if name in self.f16 else 4
            infos += string(name) + struct.pack("<I", len(ne))
            infos += b"".join(struct.pack("<Q", x) for x in ne)
            infos += struct.pack("<IQ", F16 if width == 2 else F32, offset)
            sizes.append(n * width)
            offset += (n * width + align - 1) // align * align
        out += infos
        out += b"\0" * ((align - len(out) % align) % align)
        import random
        rng = random.Random(seed)
        for (name, ne), size in zip(self.tensors, sizes):
            if name in self.f16:
                data = struct.pack(f"<{size // 2}e", *self.fixed[name])
            elif name in self.fixed:
                data = struct.pack(f"<{size // 4}f", *self.fixed[name])
            elif seed is None:
                data = b"\0" * size
            else:
                data = struct.pack(f"<{size // 4}f", *self.values(name, size // 4, ne, rng))
            out += data + b"\0" * ((align - size % align) % align)
        with open(path, "wb") as f:
            f.write(out)

    def fix_values(self, seed):
        """Every tensor's values fixed as write() would draw them."""
        import random
        rng = random.Random(seed)
        for name, ne in self.tensors:
            n = 1
            for x in ne:
                n *= x
            if name in self.fixed:
                continue
            self.fixed[name] = [0.0] * n if seed is None else self.values(name, n, ne, rng)

    def split_kv_b(self, seed):
        """attn_kv_b split into attn_k_b and attn_v_b, as
        convert_hf_to_gguf.py's DeepseekV2Model.modify_tensors splits
        kv_b_proj (the values drawn as for the unsplit file)."""
        kv = {k: v for k, _, v in self.kv}
        a = self.arch + "."
        heads = kv[a + "attention.head_count"]
        kvr = kv[a + "attention.kv_lora_rank"]
        rope = kv[a + "rope.dimension_count"]
        nope = kv[a + "attention.key_length"] - rope
        vd = kv[a + "attention.value_length"]
        self.fix_values(seed)
        tensors = []
        for name, ne in self.tensors:
            if not name.endswith(".attn_kv_b.weight"):
                tensors.append((name, ne))
                continue
            # Row-major [heads * (nope + vd), kvr]: row h * (nope + vd) + j.
            w = self.fixed.pop(name)
            def row(h, j):
                return w[(h * (nope + vd) + j) * kvr:(h * (nope + vd) + j + 1) * kvr]
            # k_b [heads, kvr, nope] (the nope rows transposed), v_b
            # [heads, vd, kvr], row-major.
            k_b = [row(h, j)[c] for h in range(heads) for c in range(kvr) for j in range(nope)]
            v_b = [x for h in range(heads) for j in range(vd) for x in row(h, nope + j)]
            base = name[:-len("attn_kv_b.weight")]
            tensors.append((base + "attn_k_b.weight", [nope, kvr, heads]))
            tensors.append((base + "attn_v_b.weight", [kvr, vd, heads]))
            self.fixed[base + "attn_k_b.weight"] = k_b
            self.fixed[base + "attn_v_b.weight"] = v_b
        self.tensors = tensors
        # The keys the converter writes for MLA.
        self.key("attention.head_count_kv", "u32", 1)
        self.key("attention.key_length", "u32", kvr + rope)
        self.key("attention.value_length", "u32", kvr)
        self.key("attention.key_length_mla", "u32", nope + rope)
        self.key("attention.value_length_mla", "u32", vd)

    def store_f16(self, suffixes, seed):
        """The tensors whose names end in one of `suffixes` in F16."""
        self.fix_values(seed)
        for name, _ in self.tensors:
            if name.endswith(suffixes):
                self.f16.add(name)


def common(m, d, layers, heads, ctx=256, kv=None, key_length=None, ffn=None):
    m.key("context_length", "u32", ctx)
    m.key("embedding_length", "u32", d)
    m.key("block_count", "u32", layers)
    if ffn:
        m.key("feed_forward_length", "u32", ffn)
    m.key("attention.head_count", "u32", heads)
    if kv:
        m.key("attention.head_count_kv", "u32", kv)
    if key_length:
        m.key("attention.key_length", "u32", key_length)
        m.key("attention.value_length", "u32", key_length)


def attn(m, i, d, q, kvn, bias=False, out_bias=False):
    b = f"blk.{i}."
    m.t(b + "attn_q.weight", d, q)
    m.t(b + "attn_k.weight", d, kvn)
    m.t(b + "attn_v.weight", d, kvn)
    if bias:
        m.t(b + "attn_q.bias", q)
        m.t(b + "attn_k.bias", kvn)
        m.t(b + "attn_v.bias", kvn)
    m.t(b + "attn_output.weight", q, d)
    if out_bias:
        m.t(b + "attn_output.bias", d)


def ffn(m, i, d, f, gate=True):
    b = f"blk.{i}."
    if gate:
        m.t(b + "ffn_gate.weight", d, f)
    m.t(b + "ffn_up.weight", d, f)
    m.t(b + "ffn_down.weight", f, d)


def experts(m, i, d, f, n):
    b = f"blk.{i}."
    m.t(b + "ffn_gate_inp.weight", d, n)
    m.t(b + "ffn_gate_exps.weight", d, f, n)
    m.t(b + "ffn_up_exps.weight", d, f, n)
    m.t(b + "ffn_down_exps.weight", f, d, n)


def ends(m, d, vocab, tied, bias=False):
    m.t("token_embd.weight", d, vocab)
    m.t("output_norm.weight", d)
    if bias:
        m.t("output_norm.bias", d)
    if not tied:
        m.t("output.weight", d, vocab)


VOCAB = 64
LAYERS = 0  # --layers: the preset's own when 0 (gemma2 and gemma3 only)


def spm_tokenizer(m, V):
    """llama.cpp's SentencePiece vocabulary of V >= 259 tokens."""
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    toks += [f"<t{i}>" for i in range(len(toks), V)]
    types += [1] * (V - len(types))
    m.key("tokenizer.ggml.model", "str", "llama")
    m.key("tokenizer.ggml.tokens", "arr-str", toks)
    m.key("tokenizer.ggml.scores", "arr-f32",
          [0.0] * 259 + [-float(i) for i in range(259, V)])
    m.key("tokenizer.ggml.token_type", "arr-i32", types)
    m.key("tokenizer.ggml.bos_token_id", "u32", 1)
    m.key("tokenizer.ggml.eos_token_id", "u32", 2)
    m.key("tokenizer.ggml.unknown_token_id", "u32", 0)
    m.key("tokenizer.ggml.add_bos_token", "bool", False)


def llama(m, tied, moe=False):
    d, L, H, KV, F, V = 32, 2, 4, 2, 48, VOCAB
    common(m, d, L, H, ctx=512, kv=KV, ffn=16 if moe else F)
    m.key("attention.layer_norm_rms_epsilon", "f32", 1e-5)
    m.key("rope.freq_base", "f32", 500000.0)
    m.key("rope.dimension_count", "u32", 8)
    m.key("vocab_size", "u32", V)
    if moe:
        m.key("expert_count", "u32", 4)
        m.key("expert_used_count", "u32", 2)
    if V < 259:
        m.key("tokenizer.ggml.model", "str", "llama")
        m.key("tokenizer.ggml.tokens", "arr-str", [f"t{i}" for i in range(V)])
    ends(m, d, V, tied)
    for i in range(L):
        m.t(f"blk.{i}.attn_norm.weight", d)
        attn(m, i, d, H * 8, KV * 8)
        m.t(f"blk.{i}.ffn_norm.weight", d)
        if moe:
            experts(m, i, d, 16, 4)
        else:
            ffn(m, i, d, F)


def qwen(m, tied, version):
    d, L, H, KV, V = 32, 2, 4, 2, VOCAB
    hd = 8 if version == 2 else 16  # qwen3: heads * head_dim != d_model
    moe = version == "3moe"
    common(m, d, L, H, ctx=1024, kv=KV, key_length=None if version == 2 else hd,
           ffn=40)
    m.key("attention.layer_norm_rms_epsilon", "f32", 1e-6)
    m.key("rope.freq_base", "f32", 1000000.0)
    if moe:
        m.key("expert_count", "u32", 4)
        m.key("expert_used_count", "u32", 2)
        m.key("expert_feed_forward_length", "u32", 12)
    ends(m, d, V, tied)
    for i in range(L):
        m.t(f"blk.{i}.attn_norm.weight", d)
        attn(m, i, d, H * hd, KV * hd, bias=version == 2)
        if version != 2:
            m.t(f"blk.{i}.attn_q_norm.weight", hd)
            m.t(f"blk.{i}.attn_k_norm.weight", hd)
        m.t(f"blk.{i}.ffn_norm.weight", d)
        if moe:
            experts(m, i, d, 12, 4)
        else:
            ffn(m, i, d, 40)


def gemma(m, tied, version):
    # heads * head_dim != d_model, as in Gemma 2 27B (32 * 128 > 4608).
    d, L, H, KV, hd, F, V = 32, 6 if version == 3 else 2, 4, 2, 16, 64, VOCAB
    L = LAYERS or L
    common(m, d, L, H, ctx=8192, kv=KV, key_length=hd, ffn=F)
    m.key("attention.layer_norm_rms_epsilon", "f32", 1e-6)
    m.key("rope.freq_base", "f32", 10000.0)
    m.key("attention.sliding_window", "u32", 512)
    if version == 2:
        m.key("attn_logit_softcapping", "f32", 50.0)
        m.key("final_logit_softcapping", "f32", 30.0)
    else:
        m.key("rope.freq_base_swa", "f32", 10000.0)
    ends(m, d, V, tied)
    for i in range(L):
        m.t(f"blk.{i}.attn_norm.weight", d)
        attn(m, i, d, H * hd, KV * hd)
        if version == 3:
            m.t(f"blk.{i}.attn_q_norm.weight", hd)
            m.t(f"blk.{i}.attn_k_norm.weight", hd)
        m.t(f"blk.{i}.post_attention_norm.weight", d)
        m.t(f"blk.{i}.ffn_norm.weight", d)
        ffn(m, i, d, F)
        m.t(f"blk.{i}.post_ffw_norm.weight", d)


def phi3(m, tied):
    d, L, H, F, V = 32, 2, 4, 48, VOCAB
    common(m, d, L, H, ctx=4096, kv=H, ffn=F)
    m.key("attention.layer_norm_rms_epsilon", "f32", 1e-5)
    m.key("rope.freq_base", "f32", 10000.0)
    m.key("rope.dimension_count", "u32", 8)
    m.key("attention.sliding_window", "u32", 2047)
    ends(m, d, V, tied)
    for i in range(L):
        b = f"blk.{i}."
        m.t(b + "attn_norm.weight", d)
        m.t(b + "attn_qkv.weight", d, 3 * d)
        m.t(b + "attn_output.weight", d, d)
        m.t(b + "ffn_norm.weight", d)
        m.t(b + "ffn_up.weight", d, 2 * F)
        m.t(b + "ffn_down.weight", F, d)


def gpt2(m, tied):
    d, L, H, F, V, C = 32, 2, 4, 128, VOCAB, 96
    common(m, d, L, H, ctx=C, ffn=F)
    m.key("attention.layer_norm_epsilon", "f32", 1e-5)
    ends(m, d, V, tied, bias=True)
    m.t("position_embd.weight", d, C)
    for i in range(L):
        b = f"blk.{i}."
        m.t(b + "attn_norm.weight", d)
        m.t(b + "attn_norm.bias", d)
        m.t(b + "attn_qkv.weight", d, 3 * d)
        m.t(b + "attn_qkv.bias", 3 * d)
        m.t(b + "attn_output.weight", d, d)
        m.t(b + "attn_output.bias", d)
        m.t(b + "ffn_norm.weight", d)
        m.t(b + "ffn_norm.bias", d)
        m.t(b + "ffn_up.weight", d, F)
        m.t(b + "ffn_up.bias", F)
        m.t(b + "ffn_down.weight", F, d)
        m.t(b + "ffn_down.bias", d)


def deepseek2(m, tied):
    # V3-like: a query latent, sigmoid routing over groups with exp_probs_b,
    # one dense layer first, shared experts; the unsplit attn_kv_b.
    d, L, H, V = 32, 3, 2, VOCAB
    qr, kvr, nope, rope, vd = 24, 16, 8, 4, 8
    E, K, FE, FD = 8, 2, 12, 40
    common(m, d, L, H, ctx=2048, ffn=FD)
    m.key("attention.key_length", "u32", nope + rope)
    m.key("attention.value_length", "u32", vd)
    m.key("attention.layer_norm_rms_epsilon", "f32", 1e-6)
    m.key("rope.freq_base", "f32", 10000.0)
    m.key("rope.dimension_count", "u32", rope)
    m.key("attention.q_lora_rank", "u32", qr)
    m.key("attention.kv_lora_rank", "u32", kvr)
    m.key("leading_dense_block_count", "u32", 1)
    m.key("expert_count", "u32", E)
    m.key("expert_used_count", "u32", K)
    m.key("expert_feed_forward_length", "u32", FE)
    m.key("expert_shared_count", "u32", 1)
    m.key("expert_weights_scale", "f32", 2.5)
    m.key("expert_weights_norm", "bool", True)
    m.key("expert_gating_func", "u32", 2)
    m.key("expert_group_count", "u32", 4)
    m.key("expert_group_used_count", "u32", 2)
    ends(m, d, V, tied)
    for i in range(L):
        b = f"blk.{i}."
        m.t(b + "attn_norm.weight", d)
        m.t(b + "attn_q_a.weight", d, qr)
        m.t(b + "attn_q_a_norm.weight", qr)
        m.t(b + "attn_q_b.weight", qr, H * (nope + rope))
        m.t(b + "attn_kv_a_mqa.weight", d, kvr + rope)
        m.t(b + "attn_kv_a_norm.weight", kvr)
        m.t(b + "attn_kv_b.weight", kvr, H * (nope + vd))
        m.t(b + "attn_output.weight", H * vd, d)
        m.t(b + "ffn_norm.weight", d)
        if i == 0:
            ffn(m, i, d, FD)
        else:
            experts(m, i, d, FE, E)
            m.t(b + "exp_probs_b.bias", E)
            m.t(b + "ffn_gate_shexp.weight", d, FE)
            m.t(b + "ffn_up_shexp.weight", d, FE)
            m.t(b + "ffn_down_shexp.weight", FE, d)


def llama3_freqs(m, factor, low, high, ctx):
    """rope_freqs.weight as conversion/llama.py's generate_extra_tensors
    computes it from the file's rope.freq_base and rope.dimension_count."""
    import math
    kv = {k: v for k, _, v in m.kv}
    base = kv[m.arch + ".rope.freq_base"]
    dim = kv[m.arch + ".rope.dimension_count"]
    out = []
    for i in range(0, dim, 2):
        freq = 1.0 / base ** (i / dim)
        wavelen = 2 * math.pi / freq
        if wavelen < ctx / high:
            out.append(1.0)
        elif wavelen > ctx / low:
            out.append(factor)
        else:
            smooth = (ctx / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    m.t("rope_freqs.weight", dim // 2)
    m.fixed["rope_freqs.weight"] = out


PRESETS = {
    "llama": ("llama", lambda m, t: llama(m, t)),
    "mixtral": ("llama", lambda m, t: llama(m, t, moe=True)),
    "qwen2": ("qwen2", lambda m, t: qwen(m, t, 2)),
    "qwen3": ("qwen3", lambda m, t: qwen(m, t, 3)),
    "qwen3moe": ("qwen3moe", lambda m, t: qwen(m, t, "3moe")),
    "gemma2": ("gemma2", lambda m, t: gemma(m, True, 2)),
    "gemma3": ("gemma3", lambda m, t: gemma(m, t, 3)),
    "phi3": ("phi3", lambda m, t: phi3(m, t)),
    "gpt2": ("gpt2", lambda m, t: gpt2(m, t)),
    "deepseek2": ("deepseek2", lambda m, t: deepseek2(m, t)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("preset", choices=sorted(PRESETS))
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--del", dest="delete", action="append", default=[])
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--add", action="append", default=[])
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--no-tensors", action="store_true",
                    help="metadata only, as llama.cpp's vocabulary files")
    ap.add_argument("--version", type=int, default=3)
    ap.add_argument("--random", type=int, default=None)
    ap.add_argument("--llama3", default=None,
                    help="FACTOR,LOW,HIGH,CONTEXT: LLaMA 3's RoPE scaling as "
                         "the converter stores it (rope_freqs.weight)")
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--split-kv-b", action="store_true",
                    help="deepseek2: attn_k_b and attn_v_b for attn_kv_b, "
                         "as newer converters write them")
    ap.add_argument("--kv-b-type", choices=["f32", "f16"], default="f32",
                    help="deepseek2: the type of attn_kv_b (or its parts)")
    a = ap.parse_args()
    global VOCAB, LAYERS
    VOCAB = a.vocab
    LAYERS = a.layers
    arch, build = PRESETS[a.preset]
    m = Model(arch)
    build(m, a.tied)
    if a.random is not None:
        if a.vocab < 259:
            sys.exit("--random needs --vocab >= 259 (llama.cpp's tokenizer)")
        spm_tokenizer(m, a.vocab)
    if a.llama3:
        llama3_freqs(m, *[float(x) for x in a.llama3.split(",")])
    if a.split_kv_b:
        m.split_kv_b(a.random)
    if a.kv_b_type == "f16":
        m.store_f16((".attn_kv_b.weight", ".attn_k_b.weight", ".attn_v_b.weight"), a.random)
    for s in a.set:
        k, tv = s.split("=", 1)
        t, v = tv.split(":", 1)
        m.key(k, t, parse(t, v))
    for k in a.delete:
        m.kv = [x for x in m.kv if x[0] not in (k, arch + "." + k)]
    if a.no_tensors:
        m.tensors = []
    for name in a.drop:
        m.tensors = [x for x in m.tensors if x[0] != name]
    for spec in a.add:
        name, dims = spec.split("=")
        m.t(name, *[int(x) for x in dims.split("x")])
    m.write(a.out, a.version, a.random)


if __name__ == "__main__":
    main()
