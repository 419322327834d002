#!/usr/bin/env python3
"""GPT-2 small forward, T=128, batch 1, both cores: tfm against PyTorch 1.13
and ONNX Runtime (npm onnxruntime-node), measured in one run, plus the
machine's sgemm GFLOP/s (OpenBLAS through torch.mm) as the ceiling.

usage: /usr/bin/python3 bench/gpt2_bench.py [--tfmc build/bin/tfmc]
       [--runs 20] [--threads 2] [--seq 128]
Peers: PyTorch under OMP_WAIT_POLICY=PASSIVE (its best here, see
TOOLCHAIN.md), tfm with libomp's default policy (its best); ONNX Runtime
needs `npm install` of onnxruntime-node under
bench/node_env (ONNXRUNTIME_NODE_INSTALL=skip).
"""
import argparse
import json
import os
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
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import reference  # noqa: E402


def tfm_env():
    """tfm's executables run with libomp's default (spinning) wait policy;
    PASSIVE, which PyTorch needs here, costs them a wake-up per parallel
    region. Each peer runs at its best."""
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    return env


def median_time(fn, runs):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


class TokensOnly(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, tokens):
        return self.m({"tokens": tokens})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build", "bin", "tfmc"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "gpt2-small.tfm"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = tempfile.mkdtemp(prefix="tfm-bench-")

    spec = json.loads(subprocess.run([args.tfmc, args.model, "--emit=json"],
                                     check=True, capture_output=True, text=True).stdout)
    model = reference.Model(spec)
    reference.randomize(model, 0)
    model.eval()
    weights = os.path.join(work, "w.safetensors")
    reference.write_safetensors(weights, reference.canonical_state(model, spec))
    tokens = (np.arange(args.seq, dtype=np.int32) * 7919 % 1000).reshape(1, -1)
    np.save(os.path.join(work, "tokens.npy"), tokens)

    # tfm
    exe = os.path.join(work, "gpt2")
    t0 = time.perf_counter()
    subprocess.run([args.tfmc, args.model, "-o", exe], check=True)
    compile_s = time.perf_counter() - t0
    out = subprocess.run([exe, "--weights", weights, "--input",
                          "tokens=" + os.path.join(work, "tokens.npy"),
                          "--threads", str(args.threads), "--bench", str(args.runs),
                          "--output", os.path.join(work, "out.npy")],
                         check=True, capture_output=True, text=True,
                         env=tfm_env()).stdout
    tfm_ms = float(out.split("bench: median ")[1].split(" ms")[0])

    # PyTorch
    tt = torch.from_numpy(tokens)
    with torch.no_grad():
        expected = model({"tokens": tt}).numpy()
        torch_ms = 1e3 * median_time(lambda: model({"tokens": tt}), args.runs)
    ours = np.load(os.path.join(work, "out.npy"))
    rel = float(np.max(np.abs(ours - expected)) / np.max(np.abs(expected)))

    # ONNX Runtime
    ort_ms = None
    node_env = os.path.join(HERE, "node_env", "node_modules", "onnxruntime-node")
    if os.path.isdir(node_env):
        onnx_path = os.path.join(work, "gpt2.onnx")
        torch.onnx.export(TokensOnly(model), (tt,), onnx_path, input_names=["tokens"],
                          output_names=["logits"], opset_version=14)
        r = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), onnx_path, "int32",
                            str(args.threads), str(args.runs), "tokens=1x%d" % args.seq],
                           capture_output=True, text=True,
                           env=dict(os.environ, ORT_MODULE=node_env))
        if r.returncode == 0:
            ort_ms = json.loads(r.stdout.strip().splitlines()[-1])["median_ms"]
        else:
            print("onnxruntime failed:", r.stderr[-500:], file=sys.stderr)

    # sgemm ceiling (OpenBLAS through torch.mm), and the model's FLOPs.
    a = torch.randn(2048, 2048)
    b = torch.randn(2048, 2048)
    gemm_s = median_time(lambda: torch.mm(a, b), 10)
    gemm_gflops = 2 * 2048 ** 3 / gemm_s / 1e9
    n_layer_params = sum(p["shape"][0] * p["shape"][1] for p in spec["parameters"]
                         if len(p["shape"]) == 2 and "embed" not in p["name"])
    flops = 2 * args.seq * (n_layer_params + spec["vocab"] * spec["d_model"])

    print("GPT-2 small forward, batch 1, T=%d, %d threads (median of %d)" % (
        args.seq, args.threads, args.runs))
    print("  %-26s %9s %9s %8s" % ("", "ms", "GFLOP/s", "vs tfm"))
    rows = [("tfm (tfmc, this build)", tfm_ms), ("PyTorch 1.13", torch_ms)]
    if ort_ms is not None:
        rows.append(("ONNX Runtime (npm)", ort_ms))
    for name, ms in rows:
        print("  %-26s %9.1f %9.1f %7.2fx" % (name, ms, flops / ms / 1e6, ms / tfm_ms))
    print("  sgemm 2048^3 (OpenBLAS): %.0f GFLOP/s; tfm reaches %.0f%% of it" % (
        gemm_gflops, 100 * flops / tfm_ms / 1e6 / gemm_gflops))
    print("  tfm vs torch: max relative difference %.2g; tfmc compile %.1f s" % (rel, compile_s))


if __name__ == "__main__":
    main()
