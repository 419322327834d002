#!/usr/bin/env python3
"""tfm's fused GPU attention (tfm.attention compiled by `tfmc --target=cuda`)
against PyTorch's scaled_dot_product_attention on the same GPU, in one run,
in TFLOP/s (4*B*H*T^2*D, halved when causal), with the error of each against
an f32 reference on the same rounded inputs.

Two steps, because the GPU machine has no LLVM: `build DIR` (here: compiles
one object per configuration with tfmc and links it with
bench/attention_cuda_driver.c; needs build/bin/tfmc and ptxas) and `run DIR`
(on the GPU machine: PyTorch with CUDA, numpy; libomp.so.5 is copied into
DIR/lib by build).

usage: /usr/bin/python3 bench/gpu_attention_bench.py build DIR
       python3 bench/gpu_attention_bench.py run DIR [--runs 10] [--quick]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import attention_bench  # noqa: E402  (its tfm.attention source)

# (dtype, heads, kv heads, head dim, causal): T varies at run time.
CONFIGS = [(dt, h, kv, d, c)
           for dt in ("f16", "bf16")
           for (h, kv, d) in ((16, 16, 128), (32, 8, 128), (16, 16, 64))
           for c in (True, False)] + [("f32", 16, 16, 128, True)]
LENGTHS = (1024, 4096, 16384)


def tag(dt, h, kv, d, causal):
    return "attn_%s_h%d_kv%d_d%d_%s" % (dt, h, kv, d, "causal" if causal else "full")


def build(out):
    tfmc = os.path.join(ROOT, "build", "bin", "tfmc")
    os.makedirs(os.path.join(out, "lib"), exist_ok=True)
    shutil.copy("/usr/lib/llvm-22/lib/libomp.so.5", os.path.join(out, "lib"))
    for cfg in CONFIGS:
        name = tag(*cfg)
        src = os.path.join(out, name + ".mlir")
        with open(src, "w") as f:
            dt, h, kv, d, causal = cfg
            f.write(attention_bench.mlir(1, h, kv, d, causal, dt))
        obj = os.path.join(out, name + ".o")
        subprocess.run([tfmc, src, "--target=cuda", "-c", "-o", obj], check=True)
        subprocess.run(["cc", "-O2", "-I" + os.path.join(ROOT, "runtime", "include"),
                        os.path.join(HERE, "attention_cuda_driver.c"), obj,
                        os.path.join(ROOT, "build", "lib", "libtfm_runtime.a"),
                        "/usr/lib/x86_64-linux-gnu/libjansson.a",
                        "-L/usr/lib/llvm-22/lib", "-lomp", "-Wl,-rpath,$ORIGIN/lib",
                        "-lm", "-ldl", "-lpthread", "-o", os.path.join(out, name)],
                       check=True)
        os.remove(obj)
        print("built", name)


def run(out, runs, quick):
    import torch
    import torch.nn.functional as F
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(0)
    print("GPU: %s, %d SMs; PyTorch %s, CUDA %s" % (
        props.name, props.multi_processor_count, torch.__version__,
        torch.version.cuda))
    print("PyTorch: F.scaled_dot_product_attention(q, k, v, is_causal, "
          "enable_gqa) on [B, H, T, D] CUDA tensors, default backend choice")
    print("times: median of %d after a warm-up; tfm's includes its K "
          "transpose, its scratch allocation and a stream synchronize" % runs)
    tmp = os.path.join(out, "tmp")
    os.makedirs(tmp, exist_ok=True)
    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
    rows = []
    print("%-34s %6s %10s %10s %9s %9s %7s %9s %9s" % (
        "config", "T", "tfm ms", "torch ms", "tfm TF/s", "torch TF/s",
        "ratio", "tfm err", "torch err"))
    for cfg in CONFIGS:
        dt, h, kv, d, causal = cfg
        exe = os.path.join(out, tag(*cfg))
        lengths = LENGTHS
        if quick or dt == "f32" or (h, kv, d) != (16, 16, 128):
            lengths = (4096,)
        for t in lengths:
            g = torch.Generator(device=dev).manual_seed(t)
            q = torch.randn(1, h, t, d, device=dev, generator=g).to(dtypes[dt])
            k = torch.randn(1, kv, t, d, device=dev, generator=g).to(dtypes[dt])
            v = torch.randn(1, kv, t, d, device=dev, generator=g).to(dtypes[dt])
            prefix = os.path.join(tmp, "x")
            for ext, x in (("q", q), ("k", k), ("v", v)):
                raw = x.view(torch.int16) if x.element_size() == 2 else x
                raw.cpu().numpy().tofile(prefix + "." + ext)
            esize = q.element_size()
            n = runs if t < 16384 else max(3, runs // 2)
            try:
                r = subprocess.run([exe, "1", str(h), str(kv), str(t), str(d),
                                    str(esize), str(n), prefix],
                                   capture_output=True, text=True, timeout=120)
                ok = r.returncode == 0
                msg = r.stderr.strip()[-500:]
            except subprocess.TimeoutExpired:
                ok, msg = False, "timed out"
            tfm_ms = float(r.stdout.strip()) if ok else float("nan")

            def sdpa():
                return F.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, enable_gqa=kv != h)
            ref_out = sdpa()
            for _ in range(3):
                sdpa()
            torch.cuda.synchronize()
            ts = []
            for _ in range(runs):
                e0 = torch.cuda.Event(enable_timing=True)
                e1 = torch.cuda.Event(enable_timing=True)
                e0.record()
                sdpa()
                e1.record()
                e1.synchronize()
                ts.append(e0.elapsed_time(e1))
            torch_ms = statistics.median(ts)
            # f32 reference on the same rounded inputs.
            rep = h // kv
            kf = k.float().repeat_interleave(rep, 1)
            vf = v.float().repeat_interleave(rep, 1)
            ref = torch.empty(1, h, t, d, device=dev)
            for i in range(0, h, 4):  # a few heads at a time: T^2 scores
                s = q[:, i:i + 4].float() @ kf[:, i:i + 4].transpose(-1, -2) / d ** 0.5
                if causal:
                    s.masked_fill_(torch.ones(t, t, device=dev, dtype=torch.bool).triu(1),
                                   float("-inf"))
                ref[:, i:i + 4] = torch.softmax(s, -1) @ vf[:, i:i + 4]
                del s
            scale = ref.abs().max().item()
            torch_err = (ref_out.float() - ref).abs().max().item() / scale
            if ok:
                import numpy as np
                o = np.fromfile(prefix + ".o", dtype=np.int16 if esize == 2 else np.float32)
                o = torch.from_numpy(o).to(dev)
                o = (o.view(dtypes[dt]) if esize == 2 else o).reshape(1, h, t, d)
                tfm_err = (o.float() - ref).abs().max().item() / scale
            else:
                tfm_err = float("nan")
            flops = 4.0 * h * t * t * d / (2 if causal else 1)
            row = {"config": tag(*cfg), "T": t, "tfm_ms": tfm_ms,
                   "torch_ms": torch_ms, "tfm_tflops": flops / tfm_ms / 1e9,
                   "torch_tflops": flops / torch_ms / 1e9,
                   "tfm_err": tfm_err, "torch_err": torch_err,
                   "error": None if ok else msg}
            rows.append(row)
            print("%-34s %6d %10.3f %10.3f %9.1f %9.1f %7.3f %9.2e %9.2e" % (
                row["config"], t, tfm_ms, torch_ms, row["tfm_tflops"],
                row["torch_tflops"], torch_ms / tfm_ms, tfm_err, torch_err))
            if not ok:
                print("  tfm failed: " + msg)
            sys.stdout.flush()
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    shutil.rmtree(tmp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["build", "run"])
    ap.add_argument("dir")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.step == "build":
        build(args.dir)
    else:
        run(args.dir, args.runs, args.quick)


if __name__ == "__main__":
    main()
