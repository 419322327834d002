#!/usr/bin/python3
"""Multi-head latent attention (issue 28, item 6): the KV cache of a DeepSeek-V2-Lite-shaped model
holds the latent, and decode at 4,096 tokens of context stays within 1.3x of decode at 512.

The model (written here as a .tfm, random weights, f32): DeepSeek-V2-Lite's layer as published
(d_model 2048; attention: 16 heads, head_dim 192 = 128 unrotated + rope_dim 64, value_dim 128,
kv_rank 512, the query projected directly; mixture of experts: experts of 1408 units, top 6, two
shared experts (shared_hidden 2816), the first layer dense with 10944 units), with --layers layers
(default 4 of its 27) and --experts routed experts (default 16 of its 64: the same 6 run per token,
so a decode step reads the same active bytes per layer; fewer only keep the file small) and a
vocabulary of --vocab (default 32000 of its 102400: a smaller LM head weighs the attention's share
of a step more, not less).

Measured (batch 1, --threads threads, prompt token(i) = (1 + 7919 i) % vocab):
  KV-cache bytes per token    what the compiled model's sessions allocate (`--info`), against the
                              latent size layers x (kv_rank + rope_dim) x 4 bytes and against what
                              per-head keys and values would take, layers x heads x (head_dim +
                              value_dim) x 4
  decode after P = 512, 4096  median ms/token of --decode single-token steps after the P-token
                              prompt (`--bench-generate`), the median over --reps rounds, each
                              round one process per P, P = 512 and 4096 interleaved
  ratio                       decode(4096) / decode(512), the target at most 1.3

Contamination as generate_bench.py (its Quiet class): each measurement waits for other processes
to use less than --quiet-below cores, records foreign_cores over it, and is taken again (up to
--retries times) when above.

usage: /usr/bin/python3 bench/mla_bench.py [--layers 4] [--experts 16] [--vocab 32000]
         [--threads 2] [--reps 3] [--decode 16] [--contexts 512,4096] [--work DIR] [--json OUT]
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate_bench as gb  # noqa: E402  (Quiet, cpu_info, membw, log, tfm_env, GEN_RE)
import numpy as np  # noqa: E402

log = gb.log
TARGET = 1.3

SHAPE = dict(d_model=2048, heads=16, head_dim=192, rope_dim=64, value_dim=128, kv_rank=512,
             expert_hidden=1408, per_token=6, shared_hidden=2816, dense_hidden=10944)


def write_tfm(path, layers, experts, vocab, context):
    s = SHAPE
    text = f"""# DeepSeek-V2-Lite's layer (bench/mla_bench.py): {layers} layers, {experts} experts
model v2lite {{ arch = decoder; vocab = {vocab}; context = {context}; d_model = {s['d_model']}; layers = {layers}
  embedding {{ position = rope(theta = 10000, style = interleaved) }}
  attention {{ heads = {s['heads']}; head_dim = {s['head_dim']}; kv_rank = {s['kv_rank']}; rope_dim = {s['rope_dim']}
              value_dim = {s['value_dim']} }}
  ffn {{ hidden = {s['dense_hidden']}; activation = swiglu; bias = false; experts = {experts}
        experts_per_token = {s['per_token']}; expert_hidden = {s['expert_hidden']}; router = softmax
        shared_hidden = {s['shared_hidden']}; first_dense = 1 }}
  norm {{ kind = rmsnorm; eps = 1e-6 }} }}
"""
    with open(path, "w") as f:
        f.write(text)


INFO_RE = re.compile(r"KV cache: (\d+) bytes per token \((\d+) layers x (\d+) x (\d+) x (\d+) f32: (.*)\)")


def run_decode(exe, P, N, threads, vocab, work):
    tpath = os.path.join(work, "tokens-%d.npy" % P)
    if not os.path.exists(tpath):
        np.save(tpath, np.array([[gb.tok_at(i, vocab) for i in range(P)]], dtype=np.int32))
    t0 = time.perf_counter()
    r = subprocess.run([exe, "--random-weights", "1", "--input", "tokens=" + tpath, "--generate", str(N + 1),
                        "--bench-generate", "--threads", str(threads), "--output",
                        os.path.join(work, "ids.npy")], capture_output=True, text=True, env=gb.tfm_env())
    g = gb.GEN_RE.search(r.stderr)
    if r.returncode or not g:
        raise RuntimeError("tfm failed (rc %d): %s" % (r.returncode, r.stderr[-800:]))
    return dict(prefill_ms=float(g.group(3)), decode_ms=float(g.group(6)),
                process_s=round(time.perf_counter() - t0, 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--decode", type=int, default=16)
    ap.add_argument("--contexts", default="512,4096")
    ap.add_argument("--tfmc", default=os.path.join(gb.ROOT, "build", "bin", "tfmc"))
    ap.add_argument("--work", default="/tmp/tfm-mlabench")
    ap.add_argument("--quiet-below", type=float, default=0.15)
    ap.add_argument("--quiet-wait", type=float, default=60)
    ap.add_argument("--retries", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    contexts = [int(x) for x in args.contexts.split(",")]
    quiet = gb.Quiet(args.quiet_below, args.quiet_wait, args.retries)
    report = dict(date=datetime.date.today().isoformat(), cpu=gb.cpu_info(), threads=args.threads,
                  layers=args.layers, experts=args.experts, vocab=args.vocab, shape=SHAPE)
    log("CPU: %s, %s CPUs" % (report["cpu"]["model"], report["cpu"]["cpus"]))

    src = os.path.join(args.work, "v2lite.tfm")
    exe = os.path.join(args.work, "v2lite")
    write_tfm(src, args.layers, args.experts, args.vocab, max(contexts) + args.decode + 8)
    t0 = time.perf_counter()
    subprocess.run([args.tfmc, src, "-o", exe], check=True)
    report["compile_s"] = round(time.perf_counter() - t0, 1)

    # The cache a session allocates per token, as the model says.
    info = subprocess.run([exe, "--info"], capture_output=True, text=True).stdout
    m = INFO_RE.search(info)
    if not m:
        raise RuntimeError("no KV cache line in --info:\n" + info)
    s = SHAPE
    kv = dict(bytes_per_token=int(m.group(1)), caches_per_layer=int(m.group(3)), what=m.group(6),
              latent_bytes=args.layers * (s["kv_rank"] + s["rope_dim"]) * 4,
              per_head_bytes=args.layers * s["heads"] * (s["head_dim"] + s["value_dim"]) * 4)
    report["kv_cache"] = kv
    log("KV cache: %d bytes/token (latent size %d; per-head K and V would be %d, %.1fx)"
        % (kv["bytes_per_token"], kv["latent_bytes"], kv["per_head_bytes"],
           kv["per_head_bytes"] / kv["bytes_per_token"]))

    rounds = []
    for r in range(args.reps):
        row = {}
        for P in contexts:
            row[P] = quiet.measure(lambda: run_decode(exe, P, args.decode, args.threads, args.vocab,
                                                      args.work), "decode P=%d" % P)
            log("round %d P=%d: decode %.1f ms/token, prefill %.0f ms (foreign_cores %.2f)"
                % (r + 1, P, row[P]["decode_ms"], row[P]["prefill_ms"], row[P]["foreign_cores"]))
        rounds.append(row)
    report["rounds"] = [{str(k): v for k, v in row.items()} for row in rounds]
    dec = {P: gb.med([row[P]["decode_ms"] for row in rounds]) for P in contexts}
    pre = {P: gb.med([row[P]["prefill_ms"] for row in rounds]) for P in contexts}
    report["decode_ms"] = {str(P): dec[P] for P in contexts}
    report["prefill_ms"] = {str(P): pre[P] for P in contexts}
    lo, hi = contexts[0], contexts[-1]
    ratio = dec[hi] / dec[lo]
    report["ratio"] = round(ratio, 3)
    report["target"] = TARGET
    report["met"] = ratio <= TARGET and kv["bytes_per_token"] == kv["latent_bytes"]
    print("\n## Multi-head latent attention, %s (%d threads)\n" % (report["date"], args.threads))
    print("DeepSeek-V2-Lite's layer, %d layers, %d experts (6 + 2 shared per token), vocabulary %d, f32"
          % (args.layers, args.experts, args.vocab))
    print("\n| measure | figure |\n| --- | --- |")
    print("| KV cache per token | %d bytes (latent: %d; per-head K and V: %d) |"
          % (kv["bytes_per_token"], kv["latent_bytes"], kv["per_head_bytes"]))
    for P in contexts:
        print("| decode after %d tokens | %.1f ms/token (prefill %.1f s) |" % (P, dec[P], pre[P] / 1000))
    print("| decode %d / decode %d | %.2fx (target <= %.1fx: %s) |"
          % (hi, lo, ratio, TARGET, "met" if ratio <= TARGET else "MISSED"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
