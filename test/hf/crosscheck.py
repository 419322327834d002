#!/usr/bin/env python3
"""Cross-checks hf_reference.py against the spec-driven reference of the
language (test/e2e/reference.py), for the model types that version 1 of the
language describes exactly.

For each case: hf_models.py writes the Hugging Face folder; this script
writes the .tfm for it by hand (from DSL.md, not with `tfmc import`), asks
`tfmc MODEL.tfm --emit=json` for the resolved description, converts the
Hugging Face tensors to the canonical names of DSL.md (splitting and
transposing fused projections here, independently of the compiler's
checkpoint loader), runs reference.Model on them and compares with
hf_reference.forward on the same inputs. Agreement validates both: the
Hugging Face equations and layouts of hf_reference.py, and the tensor
conversion, against the language's meaning.

    crosscheck.py --tfmc tfmc --work DIR [CASE...]

Prints PASS/FAIL per case with the error; exits 1 on any failure.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import hf_models  # noqa: E402
import hf_reference  # noqa: E402
import reference  # noqa: E402


def tfm_gpt2(cfg):
    return """model gpt2 {
  arch = decoder
  vocab = %(vocab_size)d
  context = %(n_positions)d
  d_model = %(n_embd)d
  layers = %(n_layer)d
  embedding { position = learned; tie_output = true }
  attention { heads = %(n_head)d; bias = true }
  ffn { hidden = 4 * d_model; activation = gelu_tanh }
  norm { kind = layernorm; eps = %(layer_norm_epsilon)r }
}
""" % cfg


def conv_gpt2(cfg, t):
    d = cfg["n_embd"]
    out = {"embed.tokens.weight": t["wte.weight"], "embed.positions.weight": t["wpe.weight"],
           "final_norm.weight": t["ln_f.weight"], "final_norm.bias": t["ln_f.bias"]}
    for i in range(cfg["n_layer"]):
        h, c = "h.%d." % i, "layers.%d." % i
        for a, b in (("ln_1", "attn_norm"), ("ln_2", "ffn_norm")):
            out[c + b + ".weight"] = t[h + a + ".weight"]
            out[c + b + ".bias"] = t[h + a + ".bias"]
        w = t[h + "attn.c_attn.weight"].t()  # Conv1D [in, out] -> [out, in]
        bias = t[h + "attn.c_attn.bias"]
        for k, m in enumerate("qkv"):
            out[c + "attn.%s.weight" % m] = w[k * d:(k + 1) * d]
            out[c + "attn.%s.bias" % m] = bias[k * d:(k + 1) * d]
        out[c + "attn.o.weight"] = t[h + "attn.c_proj.weight"].t()
        out[c + "attn.o.bias"] = t[h + "attn.c_proj.bias"]
        out[c + "ffn.up.weight"] = t[h + "mlp.c_fc.weight"].t()
        out[c + "ffn.up.bias"] = t[h + "mlp.c_fc.bias"]
        out[c + "ffn.down.weight"] = t[h + "mlp.c_proj.weight"].t()
        out[c + "ffn.down.bias"] = t[h + "mlp.c_proj.bias"]
    return out


def tfm_llama(cfg):
    c = dict(cfg)
    c["kv"] = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    c["mask"] = ("sliding(window = %d)" % cfg["sliding_window"]) if cfg.get("sliding_window") else "causal"
    return """model llama {
  arch = decoder
  vocab = %(vocab_size)d
  context = %(max_position_embeddings)d
  d_model = %(hidden_size)d
  layers = %(num_hidden_layers)d
  embedding { position = rope(theta = %(rope_theta)r); tie_output = false }
  attention { heads = %(num_attention_heads)d; kv_heads = %(kv)d; bias = false; mask = %(mask)s }
  ffn { hidden = %(intermediate_size)d; activation = swiglu; bias = false }
  norm { kind = rmsnorm; eps = %(rms_norm_eps)r }
}
""" % c


def conv_llama(cfg, t):
    out = {"embed.tokens.weight": t["model.embed_tokens.weight"],
           "final_norm.weight": t["model.norm.weight"], "lm_head.weight": t["lm_head.weight"]}
    for i in range(cfg["num_hidden_layers"]):
        h, c = "model.layers.%d." % i, "layers.%d." % i
        out[c + "attn_norm.weight"] = t[h + "input_layernorm.weight"]
        out[c + "ffn_norm.weight"] = t[h + "post_attention_layernorm.weight"]
        for m in "qkvo":
            out[c + "attn.%s.weight" % m] = t[h + "self_attn.%s_proj.weight" % m]
        for m in ("gate", "up", "down"):
            out[c + "ffn.%s.weight" % m] = t[h + "mlp.%s_proj.weight" % m]
    return out


def tfm_falcon7b(cfg):
    return """model falcon {
  arch = decoder
  vocab = %(vocab_size)d
  context = %(max_position_embeddings)d
  d_model = %(hidden_size)d
  layers = %(num_hidden_layers)d
  residual = parallel
  embedding { position = rope(theta = %(rope_theta)r); tie_output = true }
  attention { heads = %(num_attention_heads)d; kv_heads = 1; bias = false }
  ffn { hidden = 4 * d_model; activation = gelu; bias = false }
  norm { kind = layernorm; eps = %(layer_norm_epsilon)r }
}
""" % cfg


def conv_falcon7b(cfg, t):
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = d // H
    out = {"embed.tokens.weight": t["transformer.word_embeddings.weight"],
           "final_norm.weight": t["transformer.ln_f.weight"], "final_norm.bias": t["transformer.ln_f.bias"]}
    for i in range(cfg["num_hidden_layers"]):
        h, c = "transformer.h.%d." % i, "layers.%d." % i
        out[c + "attn_norm.weight"] = t[h + "input_layernorm.weight"]
        out[c + "attn_norm.bias"] = t[h + "input_layernorm.bias"]
        w = t[h + "self_attention.query_key_value.weight"]  # rows: H query heads, k, v
        out[c + "attn.q.weight"] = w[:H * hd]
        out[c + "attn.k.weight"] = w[H * hd:(H + 1) * hd]
        out[c + "attn.v.weight"] = w[(H + 1) * hd:]
        out[c + "attn.o.weight"] = t[h + "self_attention.dense.weight"]
        out[c + "ffn.up.weight"] = t[h + "mlp.dense_h_to_4h.weight"]
        out[c + "ffn.down.weight"] = t[h + "mlp.dense_4h_to_h.weight"]
    return out


def tfm_vit(cfg):
    return """model vit {
  arch = encoder
  input = image(size = %(image_size)d, patch = %(patch_size)d, channels = %(num_channels)d)
  d_model = %(hidden_size)d
  layers = %(num_hidden_layers)d
  output = hidden
  embedding { position = learned; cls_token = true }
  attention { heads = %(num_attention_heads)d; bias = true }
  ffn { hidden = %(intermediate_size)d; activation = gelu }
  norm { kind = layernorm; placement = pre; eps = %(layer_norm_eps)r }
}
""" % cfg


def conv_vit(cfg, t):
    d = cfg["hidden_size"]
    e = "vit.embeddings."
    out = {"patch.weight": t[e + "patch_embeddings.projection.weight"].reshape(d, -1),
           "patch.bias": t[e + "patch_embeddings.projection.bias"],
           "embed.cls_token": t[e + "cls_token"].reshape(d),
           "embed.positions.weight": t[e + "position_embeddings"][0],
           "final_norm.weight": t["vit.layernorm.weight"], "final_norm.bias": t["vit.layernorm.bias"]}
    for i in range(cfg["num_hidden_layers"]):
        h, c = "vit.encoder.layer.%d." % i, "layers.%d." % i
        pairs = [("layernorm_before", "attn_norm"), ("layernorm_after", "ffn_norm"),
                 ("attention.attention.query", "attn.q"), ("attention.attention.key", "attn.k"),
                 ("attention.attention.value", "attn.v"), ("attention.output.dense", "attn.o"),
                 ("intermediate.dense", "ffn.up"), ("output.dense", "ffn.down")]
        for a, b in pairs:
            out[c + b + ".weight"] = t[h + a + ".weight"]
            out[c + b + ".bias"] = t[h + a + ".bias"]
    return out


CHECKS = {
    "gpt2": (tfm_gpt2, conv_gpt2),
    "llama:plain": (tfm_llama, conv_llama),
    "mistral": (tfm_llama, conv_llama),
    "falcon:7b": (tfm_falcon7b, conv_falcon7b),
    "vit": (tfm_vit, conv_vit),
}


def check(case, tfmc, work, seed, batch, seq):
    mt, variant = hf_models.split_case(case)
    folder = os.path.join(work, case.replace(":", "-"))
    cfg = hf_models.make(mt, folder, seed, variant)
    make_tfm, convert = CHECKS[case]
    tfm = os.path.join(folder, "canonical.tfm")
    with open(tfm, "w") as f:
        f.write(make_tfm(cfg))
    r = subprocess.run([tfmc, tfm, "--emit=json"], capture_output=True, text=True)
    if r.returncode != 0:
        return False, "tfmc --emit=json failed:\n" + r.stderr
    spec = json.loads(r.stdout)
    model = reference.Model(spec)
    model.eval()
    params = reference.canonical_state(model, spec)
    _, hf = hf_reference.load(folder)
    canon = convert(cfg, hf)
    if set(canon) != set(params):
        return False, "canonical names differ: %s" % sorted(set(canon) ^ set(params))
    with torch.no_grad():
        for name, p in params.items():
            if tuple(canon[name].shape) != tuple(p.shape):
                return False, "%s: shape %s, expected %s" % (name, list(canon[name].shape), list(p.shape))
            p.copy_(canon[name])
    inputs = hf_models.make_inputs(mt, folder, batch, seq, seed)
    with torch.no_grad():
        ours = model({k: torch.from_numpy(v) for k, v in inputs.items()}).numpy()
    ref = hf_reference.forward(folder, inputs)
    if ours.shape != ref.shape:
        return False, "shape %s vs %s" % (ours.shape, ref.shape)
    err = float(np.abs(ours.astype(np.float64) - ref).max())
    scale = float(np.abs(ref).max())
    ok = err <= 1e-5 * scale
    return ok, "shape %s, max |reference.py - hf_reference.py| = %.3g, max |ref| = %.3g, relative %.3g" % (
        list(ref.shape), err, scale, err / scale)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*", default=list(CHECKS))
    ap.add_argument("--tfmc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=7)
    args = ap.parse_args()
    failed = 0
    for case in args.cases:
        if case not in CHECKS:
            print("FAIL %s: no cross-check (have: %s)" % (case, ", ".join(CHECKS)))
            failed += 1
            continue
        ok, msg = check(case, args.tfmc, args.work, args.seed, args.batch, args.seq)
        print("%s %s: %s" % ("PASS" if ok else "FAIL", case, msg))
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
