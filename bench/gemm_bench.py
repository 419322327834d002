#!/usr/bin/env python3
"""tfm's CPU GEMM alone, against the machine's FMA peak measured in the same
run (bench/fma_peak.c): a hand-written `tfm.linear` of an [M, K] input by an
[N, K] weight compiled by `tfmc -c` and called by bench/gemm_driver.c
(median of the calls' times), at M = 1, 64, 128, 512 and K x N =
768 x 3072, 3072 x 768, 768 x 768. Hand-written IR has no parameters, so
the weight is an input that comes packed in panels of two vectors, as the
runtime packs a model's weights at load (`tfm.unpack_weight` of it hands
the panels straight to the kernel); the timed call also copies the [M, N]
result into the caller's buffer (the artifact's ABI: a result is
materialized into the output), which costs about 3% of a GEMM at M = 512.

Rounds interleave every configuration (and every compiler given with
--tfmc) and the figures are the median and the best over rounds: the
machine's speed drifts and other jobs share it, so the load average is
printed with the results. The limit is the FMA rate of one core per
CPU-second (which a busy machine does not lower) times the threads.

usage: /usr/bin/python3 bench/gemm_bench.py [--rounds 5] [--threads 2]
       [--tfmc LABEL=PATH ...] [--cpu x86-64-v3] [--ms 1,64,128,512]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHAPES = [(768, 3072), (3072, 768), (768, 768)]


def mlir(k, n, panel):
    x = "tensor<?x%dxf32>" % k
    y = "tensor<?x%dxf32>" % n
    w = "tensor<%dx%dxf32>" % (n, k)
    wp = "tensor<%dx%dx%dxf32>" % (-(-n // panel), k, panel)
    return ("func.func @gemm(%%x: %s, %%wp: %s) -> %s {\n"
            "  %%w = tfm.unpack_weight %%wp : %s -> %s\n"
            "  %%y = tfm.linear %%x, %%w : (%s, %s) -> %s\n"
            "  return %%y : %s\n}\n") % (x, wp, y, wp, w, x, w, y, y)


def build(work, label, tfmc, k, n, cpu, panel):
    src = os.path.join(work, "gemm_%s_%d_%d.mlir" % (label, k, n))
    open(src, "w").write(mlir(k, n, panel))
    obj = src[:-5] + ".o"
    exe = src[:-5]
    subprocess.run([tfmc, src, "-c", "-o", obj] + (["--cpu=" + cpu] if cpu else []),
                   check=True)
    lib = os.path.join(ROOT, "build", "lib")
    subprocess.run(["cc", "-O2", "-I" + os.path.join(ROOT, "runtime", "include"),
                    os.path.join(HERE, "gemm_driver.c"), obj,
                    os.path.join(lib, "libtfm_runtime.a"),
                    "/usr/lib/x86_64-linux-gnu/libjansson.a",
                    "-L/usr/lib/llvm-22/lib", "-lomp", "-Wl,-rpath,/usr/lib/llvm-22/lib",
                    "-lm", "-o", exe], check=True)
    return exe


def fma_peak(work):
    exe = os.path.join(work, "fma_peak")
    if not os.path.exists(exe):
        subprocess.run(["cc", "-O2", "-mavx2", "-mfma", "-pthread",
                        os.path.join(HERE, "fma_peak.c"), "-o", exe], check=True)
    out = subprocess.run([exe, "1"], capture_output=True, text=True, check=True).stdout
    peaks = {m.group(1) + m.group(2): float(m.group(3))
             for m in re.finditer(r"(zmm|ymm) (\d) threads? ([\d.]+)", out)}
    for w in ("zmm", "ymm"):
        peaks[w + "cpu"] = float(re.search(w + r" per CPU-second ([\d.]+)", out).group(1))
    return peaks


def run_gemm(exe, m, k, n, panel, runs, threads):
    r = subprocess.run([exe, str(m), str(k), str(n), str(panel), str(runs), str(threads)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("%s failed (%d): %s" % (exe, r.returncode, r.stderr.strip()[-500:]))
    return float(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tfmc", action="append", default=[],
                    help="LABEL=PATH of a tfmc to measure (repeatable); "
                         "default tfm=build/bin/tfmc")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ms", default="1,64,128,512")
    ap.add_argument("--cpu", default="", help="tfmc --cpu (x86-64-v3: AVX2)")
    ap.add_argument("--seconds", type=float, default=0.25,
                    help="time of one --bench call (sets its run count)")
    args = ap.parse_args()
    tfmcs = [t.split("=", 1) for t in args.tfmc] or [
        ("tfm", os.path.join(ROOT, "build", "bin", "tfmc"))]
    ms = [int(m) for m in args.ms.split(",")]
    work = tempfile.mkdtemp(prefix="tfm-gemm-")
    panel = 16 if args.cpu == "x86-64-v3" else 32  # 2 vectors (CpuPipeline.cpp)
    exes = {}
    for label, tfmc in tfmcs:
        for k, n in SHAPES:
            exes[(label, k, n)] = build(work, label, tfmc, k, n, args.cpu, panel)

    load0 = os.getloadavg()
    times = {}
    peaks = []
    runs = {}
    for rnd in range(args.rounds):
        peaks.append(fma_peak(work))
        for k, n in SHAPES:
            for m in ms:
                for label, _ in tfmcs:
                    exe = exes[(label, k, n)]
                    key = (label, m, k, n)
                    if key not in runs:  # calibrate: about --seconds a call
                        t = run_gemm(exe, m, k, n, panel, 3, args.threads)
                        runs[key] = max(5, min(500, int(args.seconds * 1e3 / t)))
                    times.setdefault(key, []).append(
                        run_gemm(exe, m, k, n, panel, runs[key], args.threads))
        print("round %d/%d done, load %.2f" % (rnd + 1, args.rounds, os.getloadavg()[0]),
              file=sys.stderr)
    load1 = os.getloadavg()

    width = "ymm" if args.cpu == "x86-64-v3" else "zmm"
    peak = statistics.median(p[width + str(min(args.threads, 2))] for p in peaks)
    peak1 = statistics.median(p[width + "1"] for p in peaks)
    peak_cpu = statistics.median(p[width + "cpu"] for p in peaks)
    print("FMA peak (bench/fma_peak.c, %s, median of %d): %.1f GFLOP/s with %d threads, "
          "%.1f with 1; %.1f GFLOP per CPU-second"
          % (width, len(peaks), peak, min(args.threads, 2), peak1, peak_cpu))
    print("load average %.2f at the start, %.2f at the end; %d threads, median of %d rounds"
          % (load0[0], load1[0], args.threads, args.rounds))
    print()
    # The limit: threads x one core's FMA rate per CPU-second, which a busy
    # machine does not lower (fma_peak's own 2-thread wall figure falls when
    # another job holds a core).
    limit = peak_cpu * min(args.threads, 2)
    print("limit for %d threads: %.1f GFLOP/s; median and best of the rounds' wall-clock "
          "GFLOP/s (the driver's median of a call's runs), %% of the limit"
          % (args.threads, limit))
    print()
    head = "| M | K | N |" + "".join(" %s median | %% | %s best | %% |" % (l, l)
                                     for l, _ in tfmcs)
    print(head)
    print("|" + "---:|" * (3 + 4 * len(tfmcs)))
    for k, n in SHAPES:
        for m in ms:
            row = "| %d | %d | %d |" % (m, k, n)
            for label, _ in tfmcs:
                flop = 2.0 * m * k * n
                walls = times[(label, m, k, n)]
                g = flop / (statistics.median(walls) * 1e6)
                best = flop / (min(walls) * 1e6)
                row += " %.1f | %.0f%% | %.1f | %.0f%% |" % (g, 100 * g / limit, best,
                                                           100 * best / limit)
            print(row)


if __name__ == "__main__":
    main()
