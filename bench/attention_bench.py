#!/usr/bin/env python3
"""The fused attention alone: tfm's CPU kernel (compiled by tfmc from a
hand-written tfm.attention) against PyTorch 1.13 (matmul + softmax +
matmul) and ONNX Runtime (npm onnxruntime-node, com.microsoft
MultiHeadAttention), in one run, in GFLOP/s (4*B*H*T^2*D, halved when
causal), with the machine's FMA peak (bench/fma_peak.c, --threads x one
core's zmm FMA rate per CPU-second, measured in the same run) as the
ceiling.

usage: /usr/bin/python3 bench/attention_bench.py [--runs 5] [--threads 2]
       [--long]   (adds T = 16384 for tfm: peak memory against Q, K, V, O)
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def mlir(b, h, kv, d, causal, dtype="f32"):
    """A hand-written tfm.attention: q [b, h, T, d], k and v [b, kv, T, d] of
    `dtype` (bench/gpu_attention_bench.py compiles it for CUDA too)."""
    q = "tensor<%dx%dx?x%dx%s>" % (b, h, d, dtype)
    k = "tensor<%dx%dx?x%dx%s>" % (b, kv, d, dtype)
    mask = "causal" if causal else "none"
    return ("func.func @attn(%%q: %s, %%k: %s, %%v: %s) -> %s {\n"
            "  %%o = tfm.attention %%q, %%k, %%v {mask = #tfm.mask<%s>, scale = %r : f64}"
            " : (%s, %s, %s) -> %s\n  return %%o : %s\n}\n") % (
                q, k, k, q, mask, 1.0 / d ** 0.5, q, k, k, q, q)


def build(work, tfmc, b, h, kv, d, causal):
    src = os.path.join(work, "attn_%d_%d_%d_%d.mlir" % (h, kv, d, causal))
    open(src, "w").write(mlir(b, h, kv, d, causal))
    obj = src[:-5] + ".o"
    exe = src[:-5]
    subprocess.run([tfmc, src, "-c", "-o", obj], check=True)
    lib = os.path.join(ROOT, "build", "lib")
    subprocess.run(["cc", "-O2", "-I" + os.path.join(ROOT, "runtime", "include"),
                    os.path.join(HERE, "attention_driver.c"), obj,
                    os.path.join(lib, "libtfm_runtime.a"),
                    "/usr/lib/x86_64-linux-gnu/libjansson.a",
                    "-L/usr/lib/llvm-22/lib", "-lomp", "-Wl,-rpath,/usr/lib/llvm-22/lib",
                    "-lm", "-o", exe], check=True)
    return exe


def tfm_env(threads):
    """libomp's default wait policy for tfm (PASSIVE is PyTorch's best)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    env.pop("OMP_WAIT_POLICY", None)
    return env


def run_tfm(exe, b, h, kv, t, d, runs, threads):
    r = subprocess.run(["/usr/bin/time", "-f", "%M", exe, str(b), str(h), str(kv),
                        str(t), str(d), str(runs)], capture_output=True, text=True,
                       env=tfm_env(threads), check=True)
    return float(r.stdout.strip()), int(r.stderr.strip().splitlines()[-1]) * 1024


def run_torch(b, h, kv, t, d, causal, runs):
    q = torch.randn(b, h, t, d)
    k = torch.randn(b, kv, t, d)
    v = torch.randn(b, kv, t, d)
    mask = torch.triu(torch.full((t, t), float("-inf")), 1) if causal else None

    def f():
        kk, vv = k, v
        if kv != h:
            kk = k.repeat_interleave(h // kv, 1)
            vv = v.repeat_interleave(h // kv, 1)
        s = q @ kk.transpose(-1, -2) * (1.0 / d ** 0.5)
        if mask is not None:
            s = s + mask
        return torch.softmax(s, -1) @ vv
    with torch.no_grad():
        f()
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(ts)


def _varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num, value):
    """One protobuf field: an int as a varint, bytes/str length-delimited."""
    if isinstance(value, int):
        return _varint(num << 3) + _varint(value)
    if isinstance(value, str):
        value = value.encode()
    return _varint(num << 3 | 2) + _varint(len(value)) + value


def mha_onnx(b, t, h, d, causal):
    """The ONNX model of one com.microsoft MultiHeadAttention node over
    [B, T, H*D] q, k, v, encoded by hand (the `onnx` Python package is not
    a Debian package here): ModelProto{ir_version 8, opsets, graph}."""
    def value_info(name):
        dims = b"".join(_field(1, _field(1, x)) for x in (b, t, h * d))
        tensor = _field(1, 1) + _field(2, dims)  # elem_type FLOAT, shape
        return _field(1, name) + _field(2, _field(1, tensor))
    attr = lambda name, i: _field(1, name) + _field(3, i) + _field(20, 2)  # INT
    node = (b"".join(_field(1, n) for n in "qkv") + _field(2, "o") +
            _field(3, "mha") + _field(4, "MultiHeadAttention") +
            _field(5, attr("num_heads", h)) +
            _field(5, attr("unidirectional", 1 if causal else 0)) +
            _field(7, "com.microsoft"))
    graph = (_field(1, node) + _field(2, "mha") +
             b"".join(_field(11, value_info(n)) for n in "qkv") +
             _field(12, value_info("o")))
    return (_field(1, 8) + _field(8, _field(1, "") + _field(2, 17)) +
            _field(8, _field(1, "com.microsoft") + _field(2, 1)) + _field(7, graph))


def run_ort(work, b, h, t, d, causal, runs, threads):
    node_env = os.path.join(HERE, "node_env", "node_modules", "onnxruntime-node")
    if not os.path.isdir(node_env):
        return None
    hd = h * d
    path = os.path.join(work, "mha_%d_%d.onnx" % (t, causal))
    with open(path, "wb") as f:
        f.write(mha_onnx(b, t, h, d, causal))
    dims = "%dx%dx%d" % (b, t, hd)
    r = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), path, "float32",
                        str(threads), str(runs)] + ["%s=%s" % (n, dims) for n in "qkv"],
                       capture_output=True, text=True,
                       env=dict(os.environ, ORT_MODULE=node_env))
    if r.returncode != 0:
        print("onnxruntime:", r.stderr.strip()[-300:], file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])["median_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build", "bin", "tfmc"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--long", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = tempfile.mkdtemp(prefix="tfm-attn-")
    sys.path.insert(0, HERE)
    import models_bench  # noqa: E402
    peaks = models_bench.fma_peak(models_bench.build_fma_peak(work))
    peak = args.threads * peaks["zmmcpu"]

    configs = [(1, 12, 12, t, 64, c) for t in (512, 2048, 4096) for c in (False, True)]
    configs.append((1, 32, 8, 2048, 128, True))
    if args.long:
        configs = []
    print("fused attention, %d threads, median of %d, GFLOP/s; FMA peak %.0f GFLOP/s "
          "(%.0f measured on %d threads)" % (args.threads, args.runs, peak,
                                             peaks.get("zmm%d" % args.threads, 0),
                                             args.threads))
    print("%-28s %10s %10s %10s %8s %8s %8s" % ("B H KV T D mask", "tfm", "PyTorch",
                                                 "ORT", "xTorch", "xORT", "%peak"))
    results = {}
    for (b, h, kv, t, d, causal) in configs:
        exe = build(work, args.tfmc, b, h, kv, d, causal)
        flops = 4 * b * h * t * t * d / (2 if causal else 1)
        ms, _ = run_tfm(exe, b, h, kv, t, d, args.runs, args.threads)
        tm = run_torch(b, h, kv, t, d, causal, args.runs)
        om = run_ort(work, b, h, t, d, causal, args.runs, args.threads) if kv == h else None
        g = lambda x: flops / x / 1e6 if x else float("nan")
        results[(t, causal, h)] = ms
        print("%-28s %10.1f %10.1f %10s %7.2fx %7s %7.0f%%" % (
            "%d %d %d %d %d %s" % (b, h, kv, t, d, "causal" if causal else "none"),
            g(ms), g(tm), "%.1f" % g(om) if om else "n/a", tm / ms,
            "%.2fx" % (om / ms) if om else "n/a", 100 * g(ms) / peak))
    if (4096, True, 12) in results and (4096, False, 12) in results:
        print("causal vs non-causal at T=4096: %.2fx faster" % (
            results[(4096, False, 12)] / results[(4096, True, 12)]))
    if args.long:
        b, h, t, d = 1, 12, 16384, 64
        exe = build(work, args.tfmc, b, h, h, d, False)
        ms, peak = run_tfm(exe, b, h, h, t, d, 1, args.threads)
        io = 4 * b * h * t * d * 4
        print("T=16384 H=12 D=64: %.0f ms, peak RSS %.0f MiB = %.2fx the %.0f MiB of "
              "Q, K, V and O (a score matrix would be %.0f GiB)" % (
                  ms, peak / 2**20, peak / io, io / 2**20, b * h * t * t * 4 / 2**30))


if __name__ == "__main__":
    main()
