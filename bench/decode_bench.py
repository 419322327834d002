#!/usr/bin/python3
"""Decode ms/token of GQA decoders (bench/decode-gqa.tfm) at 512 and 4096
positions of context, for one or more tfmc builds, interleaved round by
round: for comparing attention kernels (issue 12, item 2).

usage: /usr/bin/python3 bench/decode_bench.py --tfmc NAME=PATH [--tfmc ...]
         [--models gqa512,gqa1k] [--contexts 512,4096] [--threads 1,2]
         [--rounds 5] [--work DIR]

Each build compiles each model once; a measurement is one run of
`./model --random-weights 1 --random-input 1,P --generate N
--bench-generate --threads T` (prefill P tokens, then the median over the
decode steps). The figure reported is the median over rounds, with the
minimum beside it. The machine is shared: every measurement records the CPU
time other processes used meanwhile (`foreign` cores, /proc/stat), and the
summary gives its range.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HZ = os.sysconf("SC_CLK_TCK")
STEPS = {512: 48, 4096: 16}


def cpu_snap():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    t = os.times()
    return (time.monotonic(), busy / HZ,
            t.user + t.system + t.children_user + t.children_system)


def foreign_cores(a, b):
    wall = b[0] - a[0]
    return max(0.0, ((b[1] - a[1]) - (b[2] - a[2])) / wall) if wall > 0 else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tfmc", action="append", required=True,
                    help="NAME=PATH of a tfmc build (repeat to compare)")
    ap.add_argument("--models", default="gqa512,gqa1k")
    ap.add_argument("--contexts", default="512,4096")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", default="/tmp/tfm-decodebench")
    args = ap.parse_args()
    builds = [t.split("=", 1) for t in args.tfmc]
    models = args.models.split(",")
    contexts = [int(c) for c in args.contexts.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    os.makedirs(args.work, exist_ok=True)
    exe = {}
    for name, tfmc in builds:
        for m in models:
            exe[name, m] = os.path.join(args.work, "%s-%s" % (name, m))
            subprocess.run([tfmc, os.path.join(HERE, "decode-gqa.tfm"),
                            "--model", m, "-o", exe[name, m]], check=True)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    res = {}
    for r in range(args.rounds):
        for m in models:
            for p in contexts:
                for t in threads:
                    for name, _ in builds:
                        a = cpu_snap()
                        out = subprocess.run(
                            [exe[name, m], "--random-weights", "1",
                             "--random-input", "1,%d" % p, "--generate",
                             str(STEPS.get(p, 16)), "--bench-generate",
                             "--threads", str(t), "--output",
                             os.path.join(args.work, "ids.npy")],
                            capture_output=True, text=True, env=env,
                            check=True)
                        fc = foreign_cores(a, cpu_snap())
                        ms = float(re.search(r"median ([0-9.]+) ms/token",
                                             out.stderr).group(1))
                        key = (m, p, t, name)
                        res.setdefault(key, []).append((ms, fc))
                        print("round %d %s P=%d threads=%d %s: %.2f ms/token "
                              "(foreign %.2f cores)" % (r, m, p, t, name, ms, fc),
                              file=sys.stderr, flush=True)
    print("| model | context | threads | build | median ms/token | min | "
          "foreign cores |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for key in sorted(res):
        v = [x[0] for x in res[key]]
        f = [x[1] for x in res[key]]
        print("| %s | %d | %d | %s | %.2f | %.2f | %.1f-%.1f |" % (
            key + (statistics.median(v), min(v), min(f), max(f))))


if __name__ == "__main__":
    main()
