#!/usr/bin/env python3
"""Self-checks of hf_models.py and hf_reference.py that need no compiler.

  - every case: the folder is written, the forward pass runs, is finite and
    has the shape its config implies;
  - checkpoint forms: a sharded checkpoint rewritten as one file, and a
    checkpoint with the base-model prefix added or removed, give the same
    output (the reference reads what Hugging Face reads);
  - sensitivity: each config field a test relies on changes the output when
    changed (so a compiled model that ignored the field would fail
    models.test), and so does each kind of tensor a loader must not confuse;
  - the ALiBi slopes and T5 buckets of the reference agree with DSL.md's
    description of them, written here a second time from that text.

    selfcheck.py --work DIR
"""
import argparse
import json
import math
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_models  # noqa: E402
import hf_reference  # noqa: E402

FAILED = []


def report(ok, what):
    print("%s %s" % ("PASS" if ok else "FAIL", what))
    if not ok:
        FAILED.append(what)


def rel(a, b):
    return float(np.abs(a.astype(np.float64) - b).max() / max(np.abs(b).max(), 1e-30))


def expected_shape(mt, cfg, inputs):
    if mt == "vit":
        n = (cfg["image_size"] // cfg["patch_size"]) ** 2 + 1
        return [inputs["pixels"].shape[0], n, cfg["hidden_size"]]
    if mt in ("bert", "roberta"):
        return list(inputs["tokens"].shape) + [cfg["hidden_size"]]
    if mt == "whisper":
        return list(inputs["features"].shape)
    if mt in ("t5", "bart"):
        return list(inputs["tgt"].shape) + [cfg["vocab_size"]]
    return list(inputs["tokens"].shape) + [cfg["vocab_size"]]


def with_config(src, dst, **changes):
    """A copy of the folder with config fields changed (None deletes)."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    with open(os.path.join(dst, "config.json")) as f:
        cfg = json.load(f)
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f)
    return dst


def with_tensors(src, dst, fn):
    """A copy of the folder with its tensors rewritten as one file by fn."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    shutil.copy(os.path.join(src, "config.json"), dst)
    _, t = hf_reference.load(src)
    t = fn({k: v.numpy() for k, v in t.items()})
    hf_models.write_safetensors(os.path.join(dst, "model.safetensors"), t)
    return dst


# (case, config changes, why) -- each must change the output by more than
# 1e-3 relative (gelu against its tanh approximation: more than the 1e-4 of
# models.test; the two differ by at most ~5e-4 anywhere, so that is as much
# as a small model shows).
SENSITIVE = [
    ("gpt_neox", {"use_parallel_residual": False}, "NeoX parallel residual"),
    ("gpt_neox", {"rotary_pct": 0.5}, "NeoX partial rotary"),
    ("gptj", {"rotary_dim": 16}, "GPT-J partial rotary"),
    ("llama:llama3", {"rope_scaling": None}, "llama3 rope scaling"),
    ("llama:llama3", {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}, "llama3 vs linear scaling"),
    ("llama:linear", {"rope_scaling": None}, "linear rope scaling"),
    ("mistral", {"sliding_window": None}, "Mistral sliding window"),
    ("gemma", {"hidden_activation": "gelu"}, "Gemma gelu_pytorch_tanh (not hidden_act)", 1e-4),
    ("gemma2", {"attn_logit_softcapping": None}, "Gemma 2 attention softcap"),
    ("gemma2", {"final_logit_softcapping": None}, "Gemma 2 final softcap"),
    ("gemma2", {"query_pre_attn_scalar": 16}, "Gemma 2 query_pre_attn_scalar"),
    ("gemma2", {"sliding_window": 64}, "Gemma 2 sliding window"),
    ("phi", {"partial_rotary_factor": 1.0}, "Phi partial rotary"),
    ("t5:v1.1", {"relative_attention_max_distance": 128}, "T5 max_distance (log buckets)"),
    ("t5:v1.0", {"relative_attention_max_distance": 8}, "T5 max_distance (v1.0)"),
    ("gpt2", {"activation_function": "gelu"}, "GPT-2 gelu_new", 1e-4),
    ("t5:v1.1", {"feed_forward_proj": "gated-silu"}, "T5 v1.1 gated-gelu"),
    ("bart", {"scale_embedding": False}, "BART scale_embedding"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    folders, outputs, inputs = {}, {}, {}

    for case in hf_models.CASES:
        mt, v = hf_models.split_case(case)
        folder = os.path.join(args.work, case.replace(":", "-"))
        cfg = hf_models.make(mt, folder, args.seed, v)
        inp = hf_models.make_inputs(mt, folder, 2, 7, args.seed)
        y = hf_reference.forward(folder, inp)
        folders[case], outputs[case], inputs[case] = folder, y, inp
        ok = bool(np.isfinite(y).all()) and list(y.shape) == expected_shape(mt, cfg, inp)
        report(ok, "%s: forward %s, max |y| %.3g" % (case, list(y.shape), float(np.abs(y).max())))
        # Deterministic: the same seed writes the same folder.
        again = os.path.join(args.work, "again")
        shutil.rmtree(again, ignore_errors=True)
        hf_models.make(mt, again, args.seed, v)
        report(rel(hf_reference.forward(again, inp), y) == 0.0, "%s: same seed, same model" % case)

    # Sharded checkpoints hold the same model as one file would.
    for case in ("llama:llama3", "falcon:40b"):
        f = folders[case]
        report(os.path.exists(os.path.join(f, "model.safetensors.index.json")), "%s: sharded" % case)
        one = with_tensors(f, os.path.join(args.work, "one"), lambda t: t)
        report(rel(hf_reference.forward(one, inputs[case]), outputs[case]) == 0.0,
               "%s: shards == one file" % case)

    # Prefix added (gpt2, bloom publish none) or removed (llama, bert).
    for case, prefix, add in (("gpt2", "transformer.", True), ("bloom", "transformer.", True),
                              ("llama:linear", "model.", False), ("bert", "bert.", False)):
        def ren(t, prefix=prefix, add=add):
            if add:
                return {prefix + k: a for k, a in t.items()}
            return {(k[len(prefix):] if k.startswith(prefix) else k): a for k, a in t.items()}
        g = with_tensors(folders[case], os.path.join(args.work, "prefix"), ren)
        report(rel(hf_reference.forward(g, inputs[case]), outputs[case]) == 0.0,
               "%s: prefix %s %s, same output" % (case, prefix, "added" if add else "removed"))

    # The features the tests rely on show in the output.
    for case, changes, why, *limit in SENSITIVE:
        g = with_config(folders[case], os.path.join(args.work, "changed"), **changes)
        r = rel(hf_reference.forward(g, inputs[case]), outputs[case])
        report(r > (limit[0] if limit else 1e-3), "%s: %s matters (relative change %.3g)" % (case, why, r))

    # Tensors a loader must read from the right place.
    def scaled(name, k):
        return lambda t: {n: (a * k if n == name else a) for n, a in t.items()}
    for case, name in (("bart", "final_logits_bias"), ("bert", "bert.embeddings.token_type_embeddings.weight"),
                       ("roberta", "roberta.embeddings.position_embeddings.weight"),
                       ("whisper", "model.encoder.embed_positions.weight"),
                       ("gptj", "lm_head.bias"), ("phi", "lm_head.bias")):
        g = with_tensors(folders[case], os.path.join(args.work, "scaled"), scaled(name, 0.0))
        r = rel(hf_reference.forward(g, inputs[case]), outputs[case])
        report(r > 1e-3, "%s: %s matters (relative change %.3g)" % (case, name, r))
    # ... and tensors it must ignore.
    for case, name in (("qwen2", "lm_head.weight"), ("gpt2", "h.0.attn.bias"),
                       ("bert", "cls.predictions.decoder.weight"), ("whisper", "model.decoder.embed_tokens.weight"),
                       ("t5:v1.0", "lm_head.weight"), ("bart", "lm_head.weight")):
        g = with_tensors(folders[case], os.path.join(args.work, "scaled"), scaled(name, 3.0))
        r = rel(hf_reference.forward(g, inputs[case]), outputs[case])
        report(r == 0.0, "%s: %s is not read (relative change %.3g)" % (case, name, r))

    # The llama3 case covers all three frequency bands of the scaling.
    with open(os.path.join(folders["llama:llama3"], "config.json")) as f:
        c = json.load(f)
    sc, hd = c["rope_scaling"], c["head_dim"]
    wl = 2 * math.pi * c["rope_theta"] ** (np.arange(0, hd, 2) / hd)
    old = sc["original_max_position_embeddings"]
    bands = {"high" if w < old / sc["high_freq_factor"] else "low" if w > old / sc["low_freq_factor"] else "medium"
             for w in wl}
    report(bands == {"high", "medium", "low"}, "llama:llama3: frequency bands %s" % sorted(bands))

    # ALiBi slopes as DSL.md states them.
    def dsl_slopes(h):
        n = 2 ** int(math.floor(math.log2(h)))
        s = [2 ** (-8 * (k + 1) / n) for k in range(n)]
        k = 0
        while len(s) < h:
            s.append(2 ** (-4 * (2 * k + 1) / n))
            k += 1
        return s
    worst = max(abs(a - b) for h in range(1, 33) for a, b in zip(hf_reference.alibi_slopes(h).tolist(), dsl_slopes(h)))
    report(worst < 1e-6, "ALiBi slopes for 1..32 heads match DSL.md (max difference %.3g)" % worst)

    # T5 buckets: exact below the half, logarithmic up to max_distance.
    import torch

    def dsl_bucket(r, bidirectional, nb, md):
        b = 0
        if bidirectional:
            nb //= 2
            if r > 0:
                b = nb
            r = abs(r)
        else:
            r = max(-r, 0)
        exact = nb // 2
        if r < exact:
            return b + r
        return b + min(nb - 1, exact + int(math.log(r / exact) / math.log(md / exact) * (nb - exact)))
    bad = 0
    for bi in (True, False):
        for nb, md in ((32, 128), (8, 16), (8, 128)):
            rel_pos = torch.arange(-200, 201)
            got = hf_reference.t5_bucket(rel_pos, bi, nb, md).tolist()
            bad += sum(g != dsl_bucket(r, bi, nb, md) for g, r in zip(got, rel_pos.tolist()))
    report(bad == 0, "T5 relative buckets match the T5 definition (%d differ)" % bad)

    print("%d checks failed" % len(FAILED) if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
