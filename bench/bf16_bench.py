#!/usr/bin/env python3
"""bf16 and int8 weights against f32 on one model: the same .tfm compiled
with `dtype = f32`, with `dtype = bf16` (linear weights kept in bf16 and
multiplied with vdpbf16ps where the CPU has AVX512_BF16), and with
`dtype = f32` and --quantize=int8 (linear weights in int8 with per-column
scales, activations quantized per row, vpdpbusd where the CPU has
AVX512_VNNI); the same f32 safetensors (rounded or quantized at load),
prefill of P tokens and greedy decode, batch 1. Rounds interleave the
builds; medians are printed, with the greedy tokens of each against f32's
(bf16 and int8 may pick other tokens after a near tie).

usage: /usr/bin/python3 bench/bf16_bench.py MODEL.tfm WEIGHTS.safetensors
       [--prompt 128] [--decode 32] [--rounds 3] [--threads 2]
(bench/generate_bench.py writes the LLaMA-shaped 1B model and its weights
to /tmp/tfm-genbench/models/llama1b-f32.{tfm,safetensors}.)
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GEN_RE = re.compile(r"generate: prefill (\d+) x (\d+) tokens in ([\d.]+) ms \(([\d.]+) tokens/s\); "
                    r"decode (\d+) steps: median ([\d.]+) ms/token")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("weights")
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build", "bin", "tfmc"))
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tfm-bf16-")
    src = open(args.model).read()
    if not re.search(r"\bdtype\s*=\s*f32\b", src):
        sys.exit("bf16_bench: %s must say `dtype = f32`" % args.model)
    exes = {}
    for dt in ("f32", "bf16"):
        path = os.path.join(work, "m-%s.tfm" % dt)
        open(path, "w").write(re.sub(r"\bdtype\s*=\s*f32\b", "dtype = " + dt, src))
        exes[dt] = os.path.join(work, "m-" + dt)
        subprocess.run([args.tfmc, path, "-o", exes[dt]], check=True)
    exes["int8"] = os.path.join(work, "m-int8")
    subprocess.run([args.tfmc, os.path.join(work, "m-f32.tfm"), "--quantize=int8", "-o",
                    exes["int8"]], check=True)
    ir = subprocess.run([args.tfmc, os.path.join(work, "m-bf16.tfm"), "--emit=loops"],
                        check=True, capture_output=True, text=True).stdout
    dot = "x86vector.avx512.dot" in ir
    ir8 = subprocess.run([args.tfmc, os.path.join(work, "m-f32.tfm"), "--quantize=int8",
                          "--emit=loops"], check=True, capture_output=True, text=True).stdout
    vnni = "vpdpbusd" in ir8
    vocab = int(re.search(r"\bvocab\s*=\s*(\d+)", src).group(1))
    toks = (np.arange(args.prompt, dtype=np.int64) * 7919 % min(vocab, 1000)).astype(np.int32)
    tpath = os.path.join(work, "tokens.npy")
    np.save(tpath, toks.reshape(1, -1))
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    res = {dt: {"prefill": [], "decode": [], "ids": None} for dt in exes}
    for _ in range(args.rounds):
        for dt, exe in exes.items():
            out = os.path.join(work, "ids-%s.npy" % dt)
            r = subprocess.run([exe, "--weights", args.weights, "--input", "tokens=" + tpath,
                                "--generate", str(args.decode + 1), "--bench-generate",
                                "--threads", str(args.threads), "--output", out],
                               capture_output=True, text=True, env=env)
            g = GEN_RE.search(r.stderr)
            if r.returncode or not g:
                sys.exit("%s failed: %s" % (dt, r.stderr[-800:]))
            res[dt]["prefill"].append(float(g.group(4)))
            res[dt]["decode"].append(float(g.group(6)))
            res[dt]["ids"] = np.load(out)[0].tolist()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("bf16 and int8 vs f32: %s, %s, batch 1, %d threads, medians of %d rounds" % (
        os.path.basename(args.model), cpu, args.threads, args.rounds))
    print("bf16 build uses vdpbf16ps: %s" % ("yes" if dot else "no (f32 fallback)"))
    print("int8 build uses vpdpbusd: %s" % ("yes" if vnni else "no (f32 fallback)"))
    print("| weights | prefill %d (tokens/s) | decode (ms/token) |" % args.prompt)
    print("| --- | ---: | ---: |")
    med = {dt: (statistics.median(v["prefill"]), statistics.median(v["decode"])) for dt, v in res.items()}
    for dt in exes:
        print("| %s | %.1f | %.1f |" % (dt, med[dt][0], med[dt][1]))
    for dt in ("bf16", "int8"):
        print("%s / f32 speed: prefill %.2fx, decode %.2fx" % (
            dt, med[dt][0] / med["f32"][0], med["f32"][1] / med[dt][1]))
        same = sum(a == b for a, b in zip(res["f32"]["ids"], res[dt]["ids"]))
        print("%s greedy tokens equal to f32's: %d of %d" % (dt, same, len(res["f32"]["ids"])))


if __name__ == "__main__":
    main()
