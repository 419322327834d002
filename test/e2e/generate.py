#!/usr/bin/env python3
"""Generation parity: a compiled decoder's --generate (prefill + decode over
its KV cache) against a PyTorch loop that recomputes the whole prefix at
every step (reference.py's model on the same random weights).

An encoder-decoder takes the prompts as its sources and generates the
target from --decoder-start; PyTorch recomputes encoder and decoder at every
step.

Checks, for B prompts of length T and N generated tokens:
  * greedy tokens identical to PyTorch's, for every sequence;
  * the logits of every step within tol * max|logits| of PyTorch's;
  * the same logits from the model's own full forward pass (prefill +
    decode == forward);
  * sampling with a seed is reproducible (same seed: same ids; the ids
    differ from greedy's);
Prints PASS or FAIL with the measured errors; exits 1 on failure.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases  # noqa: E402
import reference  # noqa: E402


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL %s exited %d\n%s%s" % (os.path.basename(cmd[0]),
                                           r.returncode, r.stdout,
                                           r.stderr[-3000:]))
        sys.exit(1)
    return r


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("tfm")
    ap.add_argument("--model", default=None)
    ap.add_argument("--tfmc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=5)
    ap.add_argument("--generate", type=int, default=32)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--decoder-start", type=int, default=None)
    ap.add_argument("--tokenizer", default=None,
                    help="also generate text from --prompt-text: the text "
                    "streamed must be the ids' text (encoder-decoders)")
    ap.add_argument("--prompt-text", default="Hello world, how are you?")
    ap.add_argument("--kv-cache", default=None, choices=["f16", "bf16"],
                    help="compile with tfmc --kv-cache: PyTorch rounds the "
                    "self-attention keys and values to it (decoders)")
    ap.add_argument("--unrounded-reference", action="store_true",
                    help="with --kv-cache, PyTorch does not round (the "
                    "check that the rounding is what the tolerance sees)")
    args = ap.parse_args(argv)

    os.makedirs(args.work, exist_ok=True)
    sel = ["--model", args.model] if args.model else []
    spec = json.loads(run([args.tfmc, args.tfm, "--emit=json"] + sel).stdout)
    reference.KV_ROUND = None if args.unrounded_reference else {
        None: None, "f16": torch.float16, "bf16": torch.bfloat16}[args.kv_cache]
    torch.manual_seed(args.seed)
    model = reference.Model(spec)
    reference.randomize(model, args.seed)
    model.eval()
    weights = os.path.join(args.work, "weights.safetensors")
    reference.write_safetensors(weights, reference.canonical_state(model, spec))

    rng = np.random.default_rng(args.seed)
    b, t, n = args.batch, args.seq, args.generate
    prompts = rng.integers(0, spec["vocab"], (b, t), dtype=np.int32)
    prompt_path = os.path.join(args.work, "prompts.npy")
    np.save(prompt_path, prompts)

    encdec = spec["arch"] == "encoder_decoder"
    if encdec and args.kv_cache:
        # reference.Attention cannot tell the encoder's self-attention
        # (no cache) from the decoder's.
        print("FAIL --kv-cache is for decoders here")
        return 1
    start = args.decoder_start if args.decoder_start is not None else 0
    exe = os.path.join(args.work, "model")
    kv = ["--kv-cache=" + args.kv_cache] if args.kv_cache else []
    run([args.tfmc, args.tfm, "-o", exe] + sel + kv)
    base = [exe, "--weights", weights, "--threads", str(args.threads),
            "--input", ("src=" if encdec else "tokens=") + prompt_path,
            "--generate", str(n)]
    if args.decoder_start is not None:
        base += ["--decoder-start", str(args.decoder_start)]
    ids_path = os.path.join(args.work, "ids.npy")
    logits_path = os.path.join(args.work, "logits.npy")
    run(base + ["--output", ids_path, "--logits", logits_path])
    ours = np.load(ids_path)
    ours_logits = np.load(logits_path).astype(np.float64)
    if ours.shape != (b, n) or ours_logits.shape != (b, n, spec["vocab"]):
        print("FAIL shapes %s and %s, expected %s and %s" % (
            ours.shape, ours_logits.shape, (b, n), (b, n, spec["vocab"])))
        return 1

    # PyTorch: the whole prefix again at every step, greedy.
    expected = np.zeros((b, n), dtype=np.int32)
    expected_logits = np.zeros((b, n, spec["vocab"]))
    with torch.no_grad():
        for i in range(b):
            prompt = torch.from_numpy(prompts[i:i + 1].astype(np.int64))
            seq = torch.tensor([[start]]) if encdec else prompt
            for k in range(n):
                inputs = {"src": prompt, "tgt": seq} if encdec else {
                    "tokens": seq}
                row = model(inputs)[0, -1].double()
                expected_logits[i, k] = row.numpy()
                nxt = int(torch.argmax(row))
                expected[i, k] = nxt
                seq = torch.cat([seq, torch.tensor([[nxt]])], 1)
    scale = float(np.max(np.abs(expected_logits)))
    err = float(np.max(np.abs(ours_logits - expected_logits)))
    same = bool((ours == expected).all())
    ok = same and err <= args.tol * scale

    # The model's own forward pass over prompt + generated tokens.
    out_path = os.path.join(args.work, "forward.npy")
    full_path = os.path.join(args.work, "full.npy")
    if encdec:
        full = np.concatenate([np.full((b, 1), start), ours[:, :-1]],
                              1).astype(np.int32)
        np.save(full_path, full)
        cmd = [exe, "--weights", weights, "--threads", str(args.threads),
               "--input", "src=" + prompt_path, "--input", "tgt=" + full_path,
               "--output", out_path]
        for st, name, length in ((0, "src_lengths", t), (1, "tgt_lengths", n)):
            if spec["stacks"][st]["attention"].get("padding"):
                p = os.path.join(args.work, name + ".npy")
                np.save(p, np.full((b,), length, dtype=np.int32))
                cmd += ["--input", name + "=" + p]
        run(cmd)
        fwd = np.load(out_path).astype(np.float64)
    else:
        full = np.concatenate([prompts, ours[:, :-1]], 1).astype(np.int32)
        np.save(full_path, full)
        run([exe, "--weights", weights, "--threads", str(args.threads),
             "--input", "tokens=" + full_path, "--output", out_path])
        fwd = np.load(out_path).astype(np.float64)[:, t - 1:]
    ferr = float(np.max(np.abs(fwd - ours_logits)))
    ok = ok and ferr <= args.tol * scale

    # Sampling: reproducible with a seed.
    samp = []
    for rep in range(2):
        p = os.path.join(args.work, "sampled%d.npy" % rep)
        run(base + ["--output", p, "--temperature", "1.5", "--top-k", "50",
                    "--top-p", "0.95", "--seed", "7"])
        samp.append(np.load(p))
    reproducible = bool((samp[0] == samp[1]).all())
    sampled_differs = bool((samp[0] != ours).any())
    ok = ok and reproducible and sampled_differs

    # Text in, text out: what --prompt streams is the text of the ids that
    # the same source gives through --input (up to EOS).
    text_note = ""
    if args.tokenizer:
        tok = [exe, "--weights", weights, "--tokenizer", args.tokenizer]
        ids = [int(x) for x in run(tok + ["--tokenize", args.prompt_text])
               .stdout.split()]
        src_path = os.path.join(args.work, "text_src.npy")
        np.save(src_path, np.array([ids], dtype=np.int32))
        sample = ["--generate", str(n), "--temperature", "1", "--seed", "3"]
        streamed = run(tok + ["--prompt", args.prompt_text] + sample).stdout
        gen_path = os.path.join(args.work, "text_ids.npy")
        run([exe, "--weights", weights, "--input", "src=" + src_path,
             "--output", gen_path] + sample)
        gen = [int(x) for x in np.load(gen_path)[0]]
        eos = int(run(tok + ["--tokenize", "</s>"]).stdout.split()[0])
        if eos in gen:
            gen = gen[:gen.index(eos)]
        expected_text = run(tok + ["--detokenize", " ".join(map(str, gen))]
                            ).stdout
        text_ok = streamed == expected_text and len(streamed.strip()) > 0
        ok = ok and text_ok
        text_note = "; text %s the ids' (%d characters)" % (
            "equal to" if text_ok else "DIFFERS from", len(streamed.strip()))
        if not text_ok:
            print("streamed %r\nexpected %r" % (streamed, expected_text))

    print("%s %s: %d x %d prompt, %d tokens: tokens %s PyTorch's; logits "
          "max |ours - torch| = %.3g (relative %.3g), vs own forward %.3g "
          "(relative %.3g), tolerance %g; sampling %s, %s greedy" % (
              "PASS" if ok else "FAIL", spec["name"], b, t, n,
              "equal" if same else "DIFFER from", err, err / scale, ferr,
              ferr / scale, args.tol,
              "reproducible" if reproducible else "NOT reproducible",
              "differs from" if sampled_differs else "SAME AS") + text_note)
    if not same:
        print("ours:\n%s\ntorch:\n%s" % (ours, expected))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(cases.run(main))
