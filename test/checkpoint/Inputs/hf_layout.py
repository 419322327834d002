#!/usr/bin/env python3
"""Writes the weights of a model (the JSON of tfmc --emit=json) twice: under
the canonical names, and in the layout Hugging Face publishes for a
model_type, built from the canonical tensors with the inverse of what each
type's modeling code does (modeling_<type>.py): GPT-2's Conv1D weights are
[in, out] and c_attn is [q | k | v] on the output axis; Falcon's
query_key_value is [kv_heads, heads / kv_heads + 2, head_dim]; GPT-NeoX's and
BLOOM's are [heads, 3, head_dim]; Phi-3 fuses qkv_proj and gate_up_proj;
RoBERTa's and BART's position tables start at row 2. The layout here is
written from the Hugging Face code, never from the description's "source"
entries, so the test checks the compiler's mapping against it.

Usage: hf_layout.py TYPE SPEC.json OUT_DIR

Writes in OUT_DIR: canonical.safetensors; hf.safetensors (with the
base-model prefix, buffers, and a tied lm_head.weight where the model ties);
hf-bare.safetensors (no prefix); hf-f16.safetensors and
canonical-f16.safetensors; model/ (model.safetensors); sharded/ (two shards
and model.safetensors.index.json); shard1/2.safetensors (for --weights
twice); and the broken files of the error tests: missing.safetensors,
extra.safetensors, dup/ (a tensor in both shards), badindex/ (not JSON),
nomap/ (no weight_map), wrongshard/ (the index names the wrong shard),
weights.npy.
"""
import json
import os
import struct
import sys

import numpy as np


def write(path, tensors, dtype="F32"):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        data = a.astype(np.float16 if dtype == "F16" else np.float32).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        f.write(b"".join(blobs))


def stack_of(spec):
    return spec["stacks"][-1]


def hf_gpt2(spec, w):
    s = stack_of(spec)
    out = {"wte.weight": w["embed.tokens.weight"]}
    # A published table may hold more positions than the model's context.
    pos = w["embed.positions.weight"]
    out["wpe.weight"] = np.concatenate([pos, np.full((3, pos.shape[1]), 7.0, np.float32)])
    ctx = spec["context"]
    for i in range(s["layers"]):
        c, h = f"layers.{i}.", f"h.{i}."
        out[h + "ln_1.weight"] = w[c + "attn_norm.weight"]
        out[h + "ln_1.bias"] = w[c + "attn_norm.bias"]
        # Conv1D: y = x @ W + b with W [in, out]; c_attn's output splits
        # into query, key, value (split(split_size, dim=2)).
        qkv = np.concatenate([w[c + "attn.q.weight"], w[c + "attn.k.weight"],
                              w[c + "attn.v.weight"]], 0)
        out[h + "attn.c_attn.weight"] = np.ascontiguousarray(qkv.T)
        out[h + "attn.c_attn.bias"] = np.concatenate(
            [w[c + "attn.q.bias"], w[c + "attn.k.bias"], w[c + "attn.v.bias"]])
        out[h + "attn.c_proj.weight"] = np.ascontiguousarray(w[c + "attn.o.weight"].T)
        out[h + "attn.c_proj.bias"] = w[c + "attn.o.bias"]
        out[h + "ln_2.weight"] = w[c + "ffn_norm.weight"]
        out[h + "ln_2.bias"] = w[c + "ffn_norm.bias"]
        out[h + "mlp.c_fc.weight"] = np.ascontiguousarray(w[c + "ffn.up.weight"].T)
        out[h + "mlp.c_fc.bias"] = w[c + "ffn.up.bias"]
        out[h + "mlp.c_proj.weight"] = np.ascontiguousarray(w[c + "ffn.down.weight"].T)
        out[h + "mlp.c_proj.bias"] = w[c + "ffn.down.bias"]
        # Buffers of GPT2Attention that old checkpoints carry.
        out[h + "attn.bias"] = np.tril(np.ones((1, 1, ctx, ctx), np.float32))
        out[h + "attn.masked_bias"] = np.array(-1e4, np.float32)
    out["ln_f.weight"] = w["final_norm.weight"]
    out["ln_f.bias"] = w["final_norm.bias"]
    return out, "transformer.", {"lm_head.weight": w["embed.tokens.weight"]}


def hf_llama(spec, w):
    s = stack_of(spec)
    out = {"embed_tokens.weight": w["embed.tokens.weight"]}
    for i in range(s["layers"]):
        c, h = f"layers.{i}.", f"layers.{i}."
        out[h + "input_layernorm.weight"] = w[c + "attn_norm.weight"]
        for p in "qkvo":
            out[h + f"self_attn.{p}_proj.weight"] = w[c + f"attn.{p}.weight"]
        out[h + "post_attention_layernorm.weight"] = w[c + "ffn_norm.weight"]
        for p in ("gate", "up", "down"):
            out[h + f"mlp.{p}_proj.weight"] = w[c + f"ffn.{p}.weight"]
        out[h + "self_attn.rotary_emb.inv_freq"] = np.ones(4, np.float32)
    out["norm.weight"] = w["final_norm.weight"]
    return out, "model.", {"lm_head.weight": w["lm_head.weight"]}


def hf_phi3(spec, w):
    s = stack_of(spec)
    out = {"embed_tokens.weight": w["embed.tokens.weight"]}
    for i in range(s["layers"]):
        c, h = f"layers.{i}.", f"layers.{i}."
        out[h + "input_layernorm.weight"] = w[c + "attn_norm.weight"]
        # Phi3Attention: qkv = qkv_proj(x); q = qkv[..., :q_pos],
        # k = qkv[..., q_pos : q_pos + kv], v = the rest.
        out[h + "self_attn.qkv_proj.weight"] = np.concatenate(
            [w[c + "attn.q.weight"], w[c + "attn.k.weight"], w[c + "attn.v.weight"]], 0)
        out[h + "self_attn.o_proj.weight"] = w[c + "attn.o.weight"]
        out[h + "post_attention_layernorm.weight"] = w[c + "ffn_norm.weight"]
        # Phi3MLP: gate, up = gate_up_proj(x).chunk(2, dim=-1).
        out[h + "mlp.gate_up_proj.weight"] = np.concatenate(
            [w[c + "ffn.gate.weight"], w[c + "ffn.up.weight"]], 0)
        out[h + "mlp.down_proj.weight"] = w[c + "ffn.down.weight"]
    out["norm.weight"] = w["final_norm.weight"]
    return out, "model.", {"lm_head.weight": w["lm_head.weight"]}


def hf_falcon(spec, w):
    s = stack_of(spec)
    a = s["attention"]
    heads, kv, hd = a["heads"], a["kv_heads"], a["head_dim"]
    d = spec["d_model"]
    g = heads // kv
    out = {"word_embeddings.weight": w["embed.tokens.weight"]}
    for i in range(s["layers"]):
        c, h = f"layers.{i}.", f"h.{i}."
        out[h + "input_layernorm.weight"] = w[c + "attn_norm.weight"]
        out[h + "input_layernorm.bias"] = w[c + "attn_norm.bias"]
        # FalconAttention._split_heads: the new decoder architecture views
        # the output as [kv, g + 2, head_dim] (queries of a group, its key,
        # its value); multi_query as [heads + 2, head_dim]; the old
        # multi-head one as [heads, 3, head_dim]. All are this layout.
        q = w[c + "attn.q.weight"].reshape(kv, g, hd, d)
        k = w[c + "attn.k.weight"].reshape(kv, 1, hd, d)
        v = w[c + "attn.v.weight"].reshape(kv, 1, hd, d)
        out[h + "self_attention.query_key_value.weight"] = np.concatenate(
            [q, k, v], 1).reshape(-1, d)
        out[h + "self_attention.dense.weight"] = w[c + "attn.o.weight"]
        out[h + "mlp.dense_h_to_4h.weight"] = w[c + "ffn.up.weight"]
        out[h + "mlp.dense_4h_to_h.weight"] = w[c + "ffn.down.weight"]
    out["ln_f.weight"] = w["final_norm.weight"]
    out["ln_f.bias"] = w["final_norm.bias"]
    return out, "transformer.", {"lm_head.weight": w["lm_head.weight"]}


def hf_vit(spec, w):
    s = stack_of(spec)
    d = spec["d_model"]
    inp = spec["input"]
    C, P = inp["channels"], inp["patch"]
    out = {
        "embeddings.cls_token": w["embed.cls_token"].reshape(1, 1, d),
        "embeddings.position_embeddings": w["embed.positions.weight"][None],
        "embeddings.patch_embeddings.projection.weight": w["patch.weight"].reshape(d, C, P, P),
        "embeddings.patch_embeddings.projection.bias": w["patch.bias"],
    }
    names = {"q": "attention.attention.query", "k": "attention.attention.key",
             "v": "attention.attention.value", "o": "attention.output.dense"}
    for i in range(s["layers"]):
        c, h = f"layers.{i}.", f"encoder.layer.{i}."
        for ours, theirs in (("attn_norm", "layernorm_before"), ("ffn_norm", "layernorm_after")):
            out[h + theirs + ".weight"] = w[c + ours + ".weight"]
            out[h + theirs + ".bias"] = w[c + ours + ".bias"]
        for p, n in names.items():
            out[h + n + ".weight"] = w[c + f"attn.{p}.weight"]
            out[h + n + ".bias"] = w[c + f"attn.{p}.bias"]
        for ours, theirs in (("up", "intermediate.dense"), ("down", "output.dense")):
            out[h + theirs + ".weight"] = w[c + f"ffn.{ours}.weight"]
            out[h + theirs + ".bias"] = w[c + f"ffn.{ours}.bias"]
    out["layernorm.weight"] = w["final_norm.weight"]
    out["layernorm.bias"] = w["final_norm.bias"]
    # ViTModel's pooler, which ViTForImageClassification does not use.
    out["pooler.dense.weight"] = np.zeros((d, d), np.float32)
    out["pooler.dense.bias"] = np.zeros((d,), np.float32)
    return out, "vit.", {"classifier.weight": w["classifier.weight"],
                         "classifier.bias": w["classifier.bias"]}


BUILDERS = {"gpt2": hf_gpt2, "llama": hf_llama, "mistral": hf_llama,
            "qwen2": hf_llama, "phi3": hf_phi3, "falcon": hf_falcon,
            "vit": hf_vit}


def main():
    kind, spec_path, out = sys.argv[1:4]
    spec = json.load(open(spec_path))
    rng = np.random.default_rng(1)
    canon = {}
    for p in spec["parameters"]:
        a = rng.standard_normal(p["shape"]).astype(np.float32) * 0.2
        if p["synthetic"] == "ones":
            a += 1
        canon[p["name"]] = a
    base, prefix, heads = BUILDERS[kind](spec, canon)
    hf = {prefix + k: v for k, v in base.items()}
    hf.update(heads)
    bare = dict(base)
    bare.update(heads)
    os.makedirs(out, exist_ok=True)
    j = lambda *p: os.path.join(out, *p)
    write(j("canonical.safetensors"), canon)
    write(j("canonical-f16.safetensors"), canon, "F16")
    write(j("hf.safetensors"), hf)
    write(j("hf-bare.safetensors"), bare)
    write(j("hf-f16.safetensors"), hf, "F16")
    os.makedirs(j("model"), exist_ok=True)
    write(j("model", "model.safetensors"), hf)
    names = sorted(hf)
    half = len(names) // 2
    first = {n: hf[n] for n in names[:half]}
    second = {n: hf[n] for n in names[half:]}
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    def sharded(folder, a, b, index):
        os.makedirs(j(folder), exist_ok=True)
        write(j(folder, shards[0]), a)
        write(j(folder, shards[1]), b)
        with open(j(folder, "model.safetensors.index.json"), "w") as f:
            f.write(index if isinstance(index, str) else json.dumps(index))
    weight_map = {n: shards[0] for n in first}
    weight_map.update({n: shards[1] for n in second})
    sharded("sharded", first, second, {"metadata": {"total_size": 0}, "weight_map": weight_map})
    write(j("shard1.safetensors"), first)
    write(j("shard2.safetensors"), second)
    # Errors.
    # A tensor every layout needs: the first of the base model's that is
    # not a buffer.
    buffers = ("attn.bias", "masked_bias", "inv_freq", "pooler.")
    needed = [n for n in names if n.startswith(prefix) and
              not any(b in n for b in buffers)][0]
    missing = dict(hf)
    del missing[needed]
    write(j("missing.safetensors"), missing)
    extra = dict(hf)
    extra[prefix + "unused.weight"] = np.zeros(3, np.float32)
    write(j("extra.safetensors"), extra)
    dup = dict(second)
    dup[needed] = hf[needed]
    sharded("dup", first, dup, {"weight_map": weight_map})
    sharded("badindex", first, second, "{ not json")
    sharded("nomap", first, second, {"metadata": {}})
    wrong = dict(weight_map)
    wrong[needed] = shards[1] if needed in first else shards[0]
    sharded("wrongshard", first, second, {"weight_map": wrong})
    np.save(j("weights.npy"), canon[spec["parameters"][0]["name"]])


if __name__ == "__main__":
    main()
