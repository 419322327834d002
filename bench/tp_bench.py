#!/usr/bin/python3
"""Tensor parallelism (issue 15): 1, 2 and 4 ranks under mpirun, one thread
each, against one process with the same total threads, on a LLaMA-shaped
model (d 1024, 8 layers, 16 heads over 4 KV heads, SwiGLU 2816, vocabulary
32000: 155 M parameters, 620 MB in f32) read from a safetensors file.

For each configuration: prefill of 128 tokens (tokens/s) and decode of 32
tokens after it (median ms/token), from the executable's --bench-generate
(best of --reps runs), and the peak RSS of every rank (/usr/bin/time),
against the weights' size / N. Also the all-reduce of one token's hidden
state (d floats) as the ranks see it: the decode time of N ranks minus the
weights' share is what the 2 x layers all-reduces per token cost.

    /usr/bin/python3 bench/tp_bench.py [--work DIR] [--reps 3]
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = """model tp { arch = decoder; vocab = 32000; context = 1024; d_model = 1024; layers = 8
  embedding { position = rope(theta = 10000) }
  attention { heads = 16; kv_heads = 4; bias = false }
  ffn { hidden = 2816; activation = swiglu; bias = false }
  norm { kind = rmsnorm; eps = 1e-5 } }
"""
GEN_RE = re.compile(r"prefill (\d+) x (\d+) tokens in ([\d.]+) ms \(([\d.]+) tokens/s\); "
                    r"decode (\d+) steps: median ([\d.]+) ms/token")
RSS_RE = re.compile(r"^rss_kb=(\d+)$", re.M)


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        raise RuntimeError("%s exited %d:\n%s" % (" ".join(cmd), r.returncode,
                                                  (r.stdout + r.stderr)[-2000:]))
    return r


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, a in tensors:
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for _, a in tensors:
            f.write(np.ascontiguousarray(a, dtype=np.float32).tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/tfm-tpbench")
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build", "bin", "tfmc"))
    ap.add_argument("--mpirun", default="mpirun --oversubscribe --bind-to none")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--decode", type=int, default=32)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    tfm = os.path.join(args.work, "tp.tfm")
    with open(tfm, "w") as f:
        f.write(MODEL)
    exes = {}
    for n in (1, 2, 4):
        exes[n] = os.path.join(args.work, "tp-np%d" % n)
        sh([args.tfmc, tfm, "-o", exes[n]] + (["--tensor-parallel", str(n)] if n > 1 else []))
    desc = json.loads(sh([args.tfmc, tfm, "--emit=json"]).stdout)
    weights = os.path.join(args.work, "tp.safetensors")
    nbytes = sum(4 * int(np.prod(p["shape"])) for p in desc["parameters"])
    if not os.path.exists(weights) or os.path.getsize(weights) < nbytes:
        rng = np.random.default_rng(0)
        tensors = []
        for p in desc["parameters"]:
            shape = tuple(p["shape"])
            a = (np.ones(shape, np.float32) if p["synthetic"] == "ones" else
                 (rng.standard_normal(shape, dtype=np.float32) * 0.02))
            tensors.append((p["name"], a))
        write_safetensors(weights, tensors)
    tokens = os.path.join(args.work, "prompt.npy")
    np.save(tokens, (np.arange(args.prompt, dtype=np.int32) * 7919 % 32000).reshape(1, -1))

    def run(ranks, threads):
        base = ["/usr/bin/time", "-f", "rss_kb=%M", exes[ranks], "--weights", weights,
                "--input", "tokens=" + tokens, "--generate", str(args.decode + 1),
                "--bench-generate", "--threads", str(threads)]
        cmd = base if ranks == 1 else shlex.split(args.mpirun) + ["-np", str(ranks)] + base
        r = sh(cmd, env=env)
        g = GEN_RE.search(r.stderr)
        if not g:
            raise RuntimeError("no figures:\n" + r.stderr[-2000:])
        rss = [int(x) for x in RSS_RE.findall(r.stderr)]
        return dict(prefill_tps=float(g.group(4)), decode_ms=float(g.group(6)),
                    rss_mb=[round(x / 1024, 1) for x in rss])

    configs = []
    for n in (1, 2, 4):
        configs.append(("%d process, %d thread%s" % (1, n, "s" if n > 1 else ""), 1, n))
        if n > 1:
            configs.append(("%d ranks, 1 thread each" % n, n, 1))
    # Rounds interleave the configurations, so that the machine's drift (its
    # memory bandwidth varies from minute to minute on a shared host) falls
    # on all of them; each figure is the median over rounds.
    runs = {c: [] for c in configs}
    for _ in range(args.reps):
        for c in configs:
            runs[c].append(run(c[1], c[2]))
    rows = []
    for c in configs:
        rs = runs[c]
        rows.append(c + (dict(prefill_tps=statistics.median(r["prefill_tps"] for r in rs),
                              decode_ms=statistics.median(r["decode_ms"] for r in rs),
                              rss_mb=rs[-1]["rss_mb"],
                              decode_all=[r["decode_ms"] for r in rs]),))
    cpu = "unknown"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    print("## Tensor parallelism, %s (%s, %d CPUs)\n" % (
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), cpu,
        os.cpu_count()))
    print("Model: d 1024, 8 layers, 16 heads / 4 KV heads, SwiGLU 2816, vocabulary 32000; "
          "%.0f MB of f32 weights from safetensors; prefill %d tokens, decode %d (median of %d interleaved rounds)."
          "\n" % (nbytes / 1e6, args.prompt, args.decode, args.reps))
    print("| configuration | prefill tokens/s | decode ms/token | peak RSS per rank MB | weights / N MB |")
    print("|---|---:|---:|---|---:|")
    for label, ranks, threads, r in rows:
        print("| %s | %.1f | %.2f | %s | %.0f |" % (
            label, r["prefill_tps"], r["decode_ms"], ", ".join("%.0f" % x for x in r["rss_mb"]),
            nbytes / 1e6 / ranks))
    with open(os.path.join(args.work, "tp.json"), "w") as f:
        json.dump(dict(rows=[dict(label=l, ranks=n, threads=t, **r) for l, n, t, r in rows],
                       weights_mb=nbytes / 1e6, cpu=cpu, host=platform.node()), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
