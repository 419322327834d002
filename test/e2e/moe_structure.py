#!/usr/bin/env python3
"""Structural checks of the compiled mixture of experts (language v3),
independent of the PyTorch reference's own MoE code:

  * one-expert: a model with one expert, top 1 (and `normalize`), computes
    exactly the dense ffn: the same weights under the dense names give the
    same logits (within 1e-6 of max |logits|);
  * every-tensor: in a model with experts, changing any one stored tensor
    (router, each expert stack, the shared expert and its gate, every other
    parameter) changes the logits; likewise in a model with latent
    attention (the query latent, its norm and up projection, the KV latent
    and its norm, kv_b, the output projection);
  * unchosen: changing the weights of an expert that no token chose
    changes nothing (the kernel runs only the chosen experts), while
    changing a chosen one does.

Prints PASS or FAIL lines; exits 1 on failure.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL %s exited %d\n%s%s" % (os.path.basename(cmd[0]),
                                           r.returncode, r.stdout, r.stderr))
        sys.exit(1)
    return r


def build(tfmc, tfm, model, work):
    os.makedirs(work, exist_ok=True)
    spec = json.loads(run([tfmc, tfm, "--model", model, "--emit=json"]).stdout)
    exe = os.path.join(work, model)
    run([tfmc, tfm, "--model", model, "-o", exe])
    return spec, exe


def forward(exe, work, state, tokens, tag):
    w = os.path.join(work, tag + ".safetensors")
    reference.write_safetensors(w, state)
    inp = os.path.join(work, "tokens.npy")
    np.save(inp, tokens)
    out = os.path.join(work, tag + ".npy")
    run([exe, "--weights", w, "--input", "tokens=" + inp, "--output", out,
         "--threads", "2"])
    return np.load(out)


def random_state(spec, seed):
    torch.manual_seed(seed)
    model = reference.Model(spec)
    reference.randomize(model, seed)
    return reference.canonical_state(model, spec), model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tfm")
    ap.add_argument("--tfmc", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    failed = False
    rng = np.random.default_rng(0)

    # One expert, top 1: the dense ffn.
    spec, exe = build(args.tfmc, args.tfm, "one", args.work)
    dspec, dexe = build(args.tfmc, args.tfm, "one_dense", args.work)
    state, _ = random_state(spec, 1)
    dense = {}
    for name, t in state.items():
        if ".ffn.experts." in name:
            dense[name.replace(".experts.", ".")] = t[0]
        elif ".ffn.router." not in name:
            dense[name] = t
    if set(dense) != {p["name"] for p in dspec["parameters"]}:
        print("FAIL one-expert: the dense model's parameters differ")
        return 1
    tokens = rng.integers(0, spec["vocab"], size=(2, 7)).astype(np.int32)
    a = forward(exe, args.work, state, tokens, "one")
    b = forward(dexe, args.work, dense, tokens, "one_dense")
    err = float(np.abs(a - b).max() / np.abs(b).max())
    ok = err <= 1e-6
    failed |= not ok
    print("%s one-expert: max |moe - dense| / max |dense| = %.3g" %
          ("PASS" if ok else "FAIL", err))

    # Every stored tensor of a model with experts matters, and of a model
    # with latent attention (each of its projections and norms).
    for which in ("mla", "qwen2moe"):
        spec, exe = build(args.tfmc, args.tfm, which, args.work)
        state, model = random_state(spec, 2)
        tokens = rng.integers(0, spec["vocab"], size=(2, 9)).astype(np.int32)
        base = forward(exe, args.work, state, tokens, "base")
        dead = []
        for name in sorted(state):
            changed = dict(state)
            # Not a uniform shift (which a selection bias ignores).
            t = state[name]
            changed[name] = t + 0.5 * torch.linspace(
                -1, 1, t.numel(), dtype=t.dtype).reshape(t.shape)
            out = forward(exe, args.work, changed, tokens, "changed")
            if np.array_equal(out, base):
                dead.append(name)
        ok = not dead
        failed |= not ok
        print("%s every-tensor %s: %d of %d tensors change the logits%s" %
              ("PASS" if ok else "FAIL", which, len(state) - len(dead),
               len(state), "; unused: " + ", ".join(dead) if dead else ""))

    # An expert no token chose is not read; a chosen one is: one token,
    # which chooses K of the experts.
    tokens = tokens[:1, :1]
    base = forward(exe, args.work, state, tokens, "base")
    layer = next(i for i in range(spec["stacks"][0]["layers"])
                 if reference.is_sparse(spec["stacks"][0]["ffn"], i))
    hidden = {}

    def capture(_module, inputs, _output):
        hidden["x"] = inputs[0]
    ffn = model.stacks[0].layers[layer].ffn
    handle = ffn.register_forward_hook(capture)
    with torch.no_grad():
        model({"tokens": torch.from_numpy(tokens).long()})
    handle.remove()
    k = spec["stacks"][0]["ffn"]["experts"]["per_token"]
    chosen = set(torch.topk(ffn.router(hidden["x"]), k, -1).indices.flatten()
                 .tolist())
    count = spec["stacks"][0]["ffn"]["experts"]["count"]
    idle = [e for e in range(count) if e not in chosen]
    name = "layers.%d.ffn.experts.up.weight" % layer
    results = []
    for e, want_change in ((idle[0] if idle else None, False),
                           (min(chosen), True)):
        if e is None:
            continue
        changed = dict(state)
        t = state[name].clone()
        t[e] += 1.0
        changed[name] = t
        out = forward(exe, args.work, changed, tokens, "expert")
        results.append(want_change == (not np.array_equal(out, base)))
    ok = len(results) == 2 and all(results)
    failed |= not ok
    print("%s unchosen: expert %s of layer %d (chosen by no token) changes "
          "nothing, expert %d (chosen) changes the logits" %
          ("PASS" if ok else "FAIL", idle[0] if idle else "-", layer,
           min(chosen)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
