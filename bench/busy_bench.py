#!/usr/bin/python3
"""Threads on a busy machine (issue 13, item 5): GPT-2 small (random
weights, batch 1, 2 threads) forward at T=128 (median of --bench runs) and
decode (median ms/token of 32 steps after 128 tokens), on an idle machine
and with one core taken by another process (a busy loop), with tfm's wait
policy and with libomp's (KMP_BLOCKTIME: how long a thread spins after a
parallel region before it sleeps) set to 0, 1 ms and its default, 200 ms.

usage: /usr/bin/python3 bench/busy_bench.py [--tfmc build/bin/tfmc]
         [--work /tmp/tfm-busy] [--rounds 3] [--md OUT.md]

The conditions are interleaved round by round; each figure is the median
over rounds. `foreign` is the CPU time of other processes during the idle
measurements (cores), read from /proc/stat, so that a contaminated idle
figure is visible.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

FWD_RE = re.compile(r"median ([\d.]+) ms")
GEN_RE = re.compile(r"decode (\d+) steps: median ([\d.]+) ms/token")


def cpu_total():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]  # busy jiffies (not idle, not iowait)


def self_jiffies():
    t = os.times()
    return (t.user + t.system + t.children_user + t.children_system) * os.sysconf("SC_CLK_TCK")


def run(exe, what, env):
    base = [exe, "--random-weights", "1", "--threads", "2"]
    if what == "forward":
        r = subprocess.run(base + ["--random-input", "1,128", "--bench", "5"],
                           capture_output=True, text=True, env=env)
        m = FWD_RE.search(r.stdout + r.stderr)
    else:
        r = subprocess.run(base + ["--random-input", "1,128", "--generate", "33",
                                   "--bench-generate"],
                           capture_output=True, text=True, env=env)
        m = GEN_RE.search(r.stderr)
    if r.returncode or not m:
        sys.exit("failed: %s %s\n%s" % (what, r.returncode, r.stderr[-600:]))
    return float(m.group(1 if what == "forward" else 2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build/bin/tfmc"))
    ap.add_argument("--work", default="/tmp/tfm-busy")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--md", default=None)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    exe = os.path.join(args.work, "gpt2")
    subprocess.run([args.tfmc, os.path.join(ROOT, "models/gpt2-small.tfm"), "-o", exe],
                   check=True)
    policies = {"tfm's default": {}, "KMP_BLOCKTIME=0 (sleep at once)": {"KMP_BLOCKTIME": "0"},
                "KMP_BLOCKTIME=1 (spin 1 ms)": {"KMP_BLOCKTIME": "1"},
                "KMP_BLOCKTIME=200 (libomp's default)": {"KMP_BLOCKTIME": "200"}}
    res = {}
    foreign = []
    for rnd in range(args.rounds):
        for load in ("idle", "one core busy"):
            hog = None
            if load != "idle":
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                time.sleep(0.5)
            for name, extra in policies.items():
                env = dict(os.environ)
                env.pop("KMP_BLOCKTIME", None)
                env.pop("OMP_WAIT_POLICY", None)
                env.update(extra)
                for what in ("forward", "decode"):
                    a, s = cpu_total(), self_jiffies()
                    t0 = time.time()
                    ms = run(exe, what, env)
                    if hog is None:
                        dt = time.time() - t0
                        other = (cpu_total() - a) - (self_jiffies() - s)
                        foreign.append(max(0.0, other / os.sysconf("SC_CLK_TCK") / dt))
                    res.setdefault((load, name, what), []).append(ms)
            if hog:
                hog.kill()
                hog.wait()
        print("round %d done" % (rnd + 1), file=sys.stderr)
    lines = ["| condition | wait policy | forward T=128 (ms) | decode (ms/token) |",
             "| --- | --- | ---: | ---: |"]
    for load in ("idle", "one core busy"):
        for name in policies:
            f = statistics.median(res[(load, name, "forward")])
            d = statistics.median(res[(load, name, "decode")])
            lines.append("| %s | %s | %.1f | %.2f |" % (load, name, f, d))
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    lines.append("")
    lines.append("%s, %d cores, %s; GPT-2 small, batch 1, 2 threads; median of %d rounds; "
                 "foreign CPU during idle runs: max %.2f cores" % (
                     cpu, os.cpu_count(), time.strftime("%Y-%m-%d"), args.rounds,
                     max(foreign) if foreign else 0.0))
    text = "\n".join(lines)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
