#!/usr/bin/python3
"""Whole-model CPU forward passes, batch 1, f32: tfm against PyTorch 1.13 and
ONNX Runtime (npm onnxruntime-node), measured in one run, with the machine's
FMA peak (bench/fma_peak.c) measured in the same run as the ceiling.

usage: /usr/bin/python3 bench/models_bench.py [--cases gpt2-128,bert-512-pad,...]
         [--runs 10] [--threads 2] [--json OUT.json] [--work DIR] [--keep]
         [--tfmc build/bin/tfmc] [--opset 14] [--no-ort] [--no-snapshot]

Cases (--cases, comma-separated; default all, in this order):
  gpt2-128, gpt2-512       models/gpt2-small.tfm, T tokens, logits of every position
  bert-128, bert-512       models/bert-base.tfm, T tokens, no padding
  bert-128-pad,            the same with 3/4 of the T tokens real: BERT's
  bert-512-pad             `lengths` input (attention { padding = true }) says
                           96 / 384; keys past it are masked out
  vit-224                  models/vit-b16.tfm, one 224x224 image, class logits
  llama1b-128              the LLaMA-shaped ~1B model of bench/generate_bench.py
                           (peers/llama/make_gguf.py preset llama1b: Llama-3.2-1B
                           shape, 16 layers, d 2048, GQA 32/8, SwiGLU 8192, vocab
                           128256, tied head), T=128, logits of every position

Padding: bert-base.tfm's executable takes `lengths` as a required input, so
the unpadded BERT cases give lengths = T (nothing masked) and the padded ones
lengths = 3T/4; PyTorch and ONNX Runtime run the same graph with the same
`lengths` input (the reference model's key mask). The padded rows are still
computed by every peer (their queries attend to the real keys), as the
reference does, and compared. The GFLOP/s of a padded case count the useful
work only (the 3T/4 real tokens: linear layers on 3T/4 rows, attention over
(3T/4)^2 pairs), so they are comparable with the unpadded case's.

FLOPs: 2 x rows x (the layers' weight matrices) + attention 4 x H x hd x
(query, key) pairs (causal: T(T+1)/2 pairs) + the head (LM head on every
position; ViT: the patch projection on 196 patches, the classifier on the
class token). Embedding look-ups and element-wise work are not counted.

Each model gets random weights (test/e2e/reference.py: reference.Model,
reference.randomize(seed 0), written as canonical safetensors); tfm runs
them through `tfmc MODEL -o exe` and `exe --weights --bench N` (its own
median of N after a warm-up), PyTorch runs reference.Model (median of N
after 3 warm-ups, torch.no_grad, torch.set_num_threads), ONNX Runtime runs
torch.onnx.export of reference.Model at the case's fixed shapes
(bench/ort_run.js: median of N after 3 warm-ups). Every peer gets the same
inputs (files). tfm's and ONNX Runtime's outputs are compared with
PyTorch's: max |x - torch| / max |torch|.

Peers at their best, as bench/gpt2_bench.py: PyTorch under
OMP_WAIT_POLICY=PASSIVE (TOOLCHAIN.md), tfm with libomp's default policy.
Each measurement records `foreign cores` (generate_bench.py's probe: the CPU
time of every other process over it, in cores, from /proc/stat); the table
shows them, so that a figure taken while other jobs ran can be told apart.

The FMA peak: bench/fma_peak.c run at the start and at the end of the run;
the peak used for "% FMA peak" is --threads x the FMA rate of one core per
CPU-second (zmm; ymm on a CPU without AVX-512), which other jobs on the
machine do not lower; its wall-clock figure on --threads threads is printed
beside it (equal on a quiet machine).

tfmc and its runtime are copied to WORK/tfm-snapshot first (--no-snapshot:
use --tfmc in place), since build/ may be rebuilt while this runs. An ONNX
export that fails (torch 1.13) or an ONNX Runtime run that fails is
reported as "n/a" with the reason; a tfm failure likewise. The 1B model's
weights (5 GB) and ONNX export (5 GB) are written under --work and deleted
after its case unless --keep; with --keep and the same --work, a later run
reuses the ONNX exports (the 1B export takes minutes), not the weights.
Memory: the 1B case peaks at about 12 GB in this process (the export).
"""
import argparse
import datetime
import gc
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: PyTorch's best
import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import reference  # noqa: E402
from gpt2_bench import median_time, tfm_env  # noqa: E402
from generate_bench import PEER_DIR, cpu_snap, foreign_cores  # noqa: E402

ORT_MODULE = os.path.join(HERE, "node_env", "node_modules", "onnxruntime-node")

MODELS = {
    "gpt2": os.path.join(ROOT, "models", "gpt2-small.tfm"),
    "bert": os.path.join(ROOT, "models", "bert-base.tfm"),
    "vit": os.path.join(ROOT, "models", "vit-b16.tfm"),
    "llama1b": None,  # written by llama1b_tfm()
}

# name -> (model, T, real tokens as a fraction of T or None)
CASES = {
    "gpt2-128": ("gpt2", 128, None),
    "gpt2-512": ("gpt2", 512, None),
    "bert-128": ("bert", 128, None),
    "bert-512": ("bert", 512, None),
    "bert-128-pad": ("bert", 128, 0.75),
    "bert-512-pad": ("bert", 512, 0.75),
    "vit-224": ("vit", None, None),
    "llama1b-128": ("llama1b", 128, None),
}

# The llama1b preset of peers/llama/make_gguf.py (the model generate_bench.py
# runs), used when that file is not there.
LLAMA1B_TFM = """\
# The LLaMA-shaped ~1B model of bench/generate_bench.py (make_gguf.py preset llama1b).
model llama1b_random {
  arch    = decoder
  vocab   = 128256
  context = 2048
  d_model = 2048
  layers  = 16
  dtype   = f32
  embedding { position = rope(theta = 500000, style = half); tie_output = true }
  attention { heads = 32; kv_heads = 8; mask = causal; bias = false }
  ffn       { hidden = 8192; activation = swiglu; bias = false }
  norm      { kind = rmsnorm; placement = pre; eps = 1e-5 }
}
"""


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def llama1b_tfm(work):
    """The .tfm of generate_bench.py's llama1b: written by make_gguf.py's own
    tfm_text() from its preset when peers/llama is there, else LLAMA1B_TFM."""
    text, source = LLAMA1B_TFM, "bench/models_bench.py (copy of make_gguf.py preset llama1b)"
    try:
        sys.path.insert(0, PEER_DIR)
        import make_gguf  # noqa: E402
        argv, sys.argv = sys.argv, ["make_gguf.py", "--model", "llama1b", "--dtype", "f32"]
        try:
            text = make_gguf.tfm_text(make_gguf.PRESETS["llama1b"], "llama1b", "f32", 0)
        finally:
            sys.argv = argv
        source = "peers/llama/make_gguf.py preset llama1b"
    except Exception as e:  # noqa: BLE001
        log("llama1b: make_gguf.py not usable (%s); using the built-in copy" % e)
    finally:
        if sys.path and sys.path[0] == PEER_DIR:
            sys.path.pop(0)
    path = os.path.join(work, "llama1b.tfm")
    with open(path, "w") as f:
        f.write(text)
    return path, source


# ---------------------------------------------------------------------------------------------
# the machine
def cpu_model():
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if ":" in line:
                k, v = (x.strip() for x in line.split(":", 1))
                info.setdefault(k, v)
            elif not line.strip() and info:
                break
    return dict(model=info.get("model name", "?"), family=info.get("cpu family"),
                model_no=info.get("model"), cpus=os.cpu_count(),
                avx512="avx512f" in info.get("flags", "").split())


def build_fma_peak(work):
    exe = os.path.join(work, "fma_peak")
    cc = shutil.which("clang-22") or "cc"
    subprocess.run([cc, "-O2", "-mavx2", "-mfma", "-pthread",
                    os.path.join(HERE, "fma_peak.c"), "-o", exe], check=True)
    return exe


def fma_peak(exe, reps=3):
    out = subprocess.run([exe, str(reps)], capture_output=True, text=True, check=True).stdout
    peaks = {m.group(1) + m.group(2): float(m.group(3))
             for m in re.finditer(r"(zmm|ymm) (\d) threads? ([\d.]+)", out)}
    for w in ("zmm", "ymm"):
        peaks[w + "cpu"] = float(re.search(w + r" per CPU-second ([\d.]+)", out).group(1))
    return peaks


# ---------------------------------------------------------------------------------------------
# FLOPs
def case_flops(spec, rows, causal_pairs):
    """Useful FLOPs of one forward pass over `rows` positions (see the docstring)."""
    st = spec["stacks"][-1]
    a = st["attention"]
    prefix = st["prefix"] + "layers."
    mats = sum(p["shape"][0] * p["shape"][1] for p in spec["parameters"]
               if len(p["shape"]) == 2 and p["name"].startswith(prefix))
    flops = 2 * rows * mats
    pairs = rows * (rows + 1) // 2 if causal_pairs else rows * rows
    flops += st["layers"] * 4 * a["heads"] * a["head_dim"] * pairs
    out = spec["output"]
    d = spec["d_model"]
    if out["kind"] == "lm_head":
        flops += 2 * rows * d * spec["vocab"]
    params = {p["name"]: p["shape"] for p in spec["parameters"]}
    if "patch.weight" in params:
        s = params["patch.weight"]
        g = spec["input"]["size"] // spec["input"]["patch"]
        flops += 2 * g * g * s[0] * s[1]
    if "classifier.weight" in params:
        s = params["classifier.weight"]
        flops += 2 * (1 if out.get("pool") == "cls" else rows) * s[0] * s[1]
    return flops


# ---------------------------------------------------------------------------------------------
# peers
def snapshot_tfmc(tfmc, work):
    """tfmc links ../lib/{libtfm_runtime.a,libtfm_tokenizer.a,tfm_main.o} next
    to its bin/: copy the four (build/ may be rebuilt while this runs). Waits a little for a
    rebuild in progress to put them back."""
    snap = os.path.join(work, "tfm-snapshot")
    src_lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(tfmc))), "lib")
    files = [(tfmc, "bin/tfmc")] + [(os.path.join(src_lib, f), "lib/" + f) for f in
                                    ("libtfm_runtime.a", "libtfm_tokenizer.a", "tfm_main.o")]
    for _ in range(60):
        if all(os.path.exists(s) for s, _ in files):
            break
        log("waiting for %s (build in progress?)" % [s for s, _ in files if not os.path.exists(s)])
        time.sleep(5)
    mtimes = {}
    for src, dst in files:
        os.makedirs(os.path.dirname(os.path.join(snap, dst)), exist_ok=True)
        shutil.copy2(src, os.path.join(snap, dst))
        mtimes[dst] = datetime.datetime.fromtimestamp(os.path.getmtime(src)).isoformat(timespec="seconds")
    return os.path.join(snap, "bin", "tfmc"), mtimes


BENCH_RE = re.compile(r"bench: median ([\d.]+) ms")


def run_tfm(exe, weights, inputs, threads, runs, out_path):
    cmd = [exe, "--weights", weights, "--threads", str(threads), "--bench", str(runs),
           "--output", out_path]
    for name, path in inputs.items():
        cmd += ["--input", "%s=%s" % (name, path)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=tfm_env())
    m = BENCH_RE.search(r.stdout + r.stderr)
    if r.returncode or not m:
        raise RuntimeError("tfm exited %d: %s" % (r.returncode, (r.stdout + r.stderr).strip()[-600:]))
    return float(m.group(1))


class DictInputs(torch.nn.Module):
    """reference.Model takes a dict; torch.onnx.export passes positional inputs."""

    def __init__(self, model, names):
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *args):
        return self.model(dict(zip(self.names, args)))


def export_onnx(model, inputs, path, opset):
    names = list(inputs)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(DictInputs(model, names).eval(), tuple(inputs[n] for n in names), path,
                          input_names=names, output_names=["output"], opset_version=opset)


def run_ort(onnx_path, inputs, threads, runs, work):
    """inputs: name -> np array (all int32 or all float32). Returns (median ms, first output)."""
    dtypes = {a.dtype for a in inputs.values()}
    if len(dtypes) != 1 or next(iter(dtypes)) not in (np.int32, np.float32):
        raise RuntimeError("ort_run.js takes inputs of one dtype, int32 or float32: %s" % dtypes)
    dtype = "int32" if next(iter(dtypes)) == np.int32 else "float32"
    args = []
    for name, a in inputs.items():
        raw = os.path.join(work, "ort-in-%s.bin" % name)
        np.ascontiguousarray(a).tofile(raw)
        args.append("%s=%s@%s" % (name, "x".join(map(str, a.shape)), raw))
    out = os.path.join(work, "ort-out.bin")
    if os.path.exists(out):
        os.remove(out)
    r = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), onnx_path, dtype, str(threads),
                        str(runs)] + args, capture_output=True, text=True,
                       env=dict(os.environ, ORT_MODULE=ORT_MODULE, ORT_OUTPUT=out))
    if r.returncode:
        raise RuntimeError("onnxruntime-node exited %d: %s" % (r.returncode, r.stderr.strip()[-600:]))
    ms = json.loads(r.stdout.strip().splitlines()[-1])["median_ms"]
    return ms, np.fromfile(out, dtype=np.float32)


def rel_diff(x, expected):
    x = np.asarray(x, dtype=np.float64).reshape(expected.shape)
    if not np.isfinite(x).all():
        return float("inf")
    return float(np.max(np.abs(x - expected)) / np.max(np.abs(expected)))


def short(e, n=200):
    s = " ".join(str(e).split())
    return s if len(s) <= n else "..." + s[-n:]


# ---------------------------------------------------------------------------------------------
def case_inputs(spec, T, frac):
    """The case's inputs (numpy) and its rows of real positions."""
    inputs = {}
    rows = T
    for inp in spec["inputs"]:
        name = inp["name"]
        if name == "tokens":
            inputs[name] = ((np.arange(T, dtype=np.int64) * 7919 + 1) % spec["vocab"]).astype(
                np.int32).reshape(1, T)
        elif name == "lengths":
            n = int(round(T * frac)) if frac else T
            inputs[name] = np.array([n], dtype=np.int32)
            rows = n
        elif name == "pixels":
            shape = [1] + inp["shape"][1:]
            inputs[name] = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            g = spec["input"]["size"] // spec["input"]["patch"]
            rows = g * g + (1 if spec["stacks"][-1]["embedding"]["cls_token"] else 0)
        else:
            raise RuntimeError("no data for input %r" % name)
    return inputs, rows


def bench_model(mname, cases, args, tfmc, work, fma_exe, report):
    path = MODELS[mname]
    if mname == "llama1b":
        path, source = llama1b_tfm(work)
        report["llama1b_source"] = source
    spec = json.loads(subprocess.run([tfmc, path, "--emit=json"], check=True, capture_output=True,
                                     text=True).stdout)
    log("[%s] %s: %.1fM parameters; reference model, random weights" % (
        mname, os.path.relpath(path, ROOT) if path.startswith(ROOT) else path,
        spec["parameter_count"] / 1e6))
    t0 = time.perf_counter()
    torch.manual_seed(0)
    model = reference.Model(spec)
    reference.randomize(model, 0)
    model.eval()
    weights = os.path.join(work, mname + ".safetensors")
    reference.write_safetensors(weights, reference.canonical_state(model, spec))
    log("[%s] weights written in %.0f s" % (mname, time.perf_counter() - t0))

    results = {}
    # PyTorch (and the ONNX export) first, then free the model: the 1B model
    # would otherwise sit in memory beside tfm's and ONNX Runtime's copies.
    for cname in cases:
        _, T, frac = CASES[cname]
        inputs, rows = case_inputs(spec, T, frac)
        causal = spec["stacks"][-1]["attention"].get("mask") == "causal"
        res = dict(case=cname, model=mname, T=T, rows=rows, real_tokens=int(inputs["lengths"][0])
                   if "lengths" in inputs else None,
                   flops=case_flops(spec, rows, causal))
        cdir = os.path.join(work, cname)
        os.makedirs(cdir, exist_ok=True)
        res["input_files"] = {}
        for n, a in inputs.items():
            p = os.path.join(cdir, n + ".npy")
            np.save(p, a)
            res["input_files"][n] = p
        tin = {n: torch.from_numpy(a) for n, a in inputs.items()}
        with torch.no_grad():
            expected = model(tin).numpy().astype(np.float64)
            snap = cpu_snap()
            res["torch_ms"] = 1e3 * median_time(lambda: model(tin), args.runs)
            res["torch_foreign_cores"] = round(foreign_cores(snap, cpu_snap()), 2)
        np.save(os.path.join(cdir, "expected.npy"), expected.astype(np.float32))
        log("[%s] PyTorch %.1f ms" % (cname, res["torch_ms"]))
        res["onnx"] = os.path.join(cdir, "onnx", "model.onnx")
        if args.no_ort:
            res["ort_error"] = "not run (--no-ort)"
        elif not os.path.isdir(ORT_MODULE):
            res["ort_error"] = "onnxruntime-node not installed under bench/node_env"
        else:
            # --keep: an export from an earlier run with the same --work is reused when
            # the model, the shapes, the opset and reference.py are the same.
            with open(reference.__file__, "rb") as f:
                key = hashlib.sha1(json.dumps(
                    [spec, args.opset, {n: list(a.shape) for n, a in inputs.items()}],
                    sort_keys=True).encode() + f.read()).hexdigest()
            keyfile = os.path.join(os.path.dirname(res["onnx"]), "key")
            t0 = time.perf_counter()
            try:
                if args.keep and os.path.exists(keyfile) and open(keyfile).read() == key:
                    log("[%s] ONNX export of an earlier run reused" % cname)
                else:
                    shutil.rmtree(os.path.dirname(res["onnx"]), ignore_errors=True)
                    export_onnx(model, tin, res["onnx"], args.opset)
                    with open(keyfile, "w") as f:
                        f.write(key)
                    res["onnx_export_s"] = round(time.perf_counter() - t0, 1)
                    log("[%s] ONNX export in %.0f s" % (cname, res["onnx_export_s"]))
            except Exception as e:  # noqa: BLE001 - reported, not fatal
                res["ort_error"] = "torch.onnx.export failed: " + short(e)
                log("[%s] %s" % (cname, res["ort_error"]))
        results[cname] = res
        results[cname]["_inputs"] = inputs
        results[cname]["_expected"] = expected
    model = None  # frees it (the 1B model's 5 GB)
    gc.collect()

    # tfm
    exe = os.path.join(work, mname + "-tfm")
    t0 = time.perf_counter()
    r = subprocess.run([tfmc, path, "-o", exe], capture_output=True, text=True)
    compile_s = time.perf_counter() - t0
    tfm_error = None if r.returncode == 0 else "tfmc exited %d: %s" % (r.returncode, short(r.stderr, 400))
    if tfm_error:
        log("[%s] %s" % (mname, tfm_error))
    else:
        log("[%s] tfmc compile %.0f s" % (mname, compile_s))
    for cname in cases:
        res = results[cname]
        res["tfm_compile_s"] = round(compile_s, 1)
        cdir = os.path.join(work, cname)
        if tfm_error:
            res["tfm_error"] = tfm_error
        else:
            out = os.path.join(cdir, "tfm-out.npy")
            try:
                snap = cpu_snap()
                res["tfm_ms"] = run_tfm(exe, weights, res["input_files"], args.threads, args.runs, out)
                res["tfm_foreign_cores"] = round(foreign_cores(snap, cpu_snap()), 2)
                res["tfm_rel_diff"] = rel_diff(np.load(out), res["_expected"])
                log("[%s] tfm %.1f ms, max rel diff vs PyTorch %.2g" % (
                    cname, res["tfm_ms"], res["tfm_rel_diff"]))
            except Exception as e:  # noqa: BLE001
                res["tfm_error"] = short(e, 400)
                log("[%s] tfm failed: %s" % (cname, res["tfm_error"]))
        if "ort_error" not in res:
            try:
                snap = cpu_snap()
                res["ort_ms"], ort_out = run_ort(res["onnx"], res["_inputs"], args.threads, args.runs, cdir)
                res["ort_foreign_cores"] = round(foreign_cores(snap, cpu_snap()), 2)
                res["ort_rel_diff"] = rel_diff(ort_out, res["_expected"])
                log("[%s] ONNX Runtime %.1f ms, max rel diff vs PyTorch %.2g" % (
                    cname, res["ort_ms"], res["ort_rel_diff"]))
            except Exception as e:  # noqa: BLE001
                res["ort_error"] = short(e, 400)
                log("[%s] ONNX Runtime failed: %s" % (cname, res["ort_error"]))
        if not args.keep:
            shutil.rmtree(os.path.dirname(res.pop("onnx")), ignore_errors=True)
        del res["_inputs"], res["_expected"], res["input_files"]
        # the FMA peak beside each model's cases too (the machine's speed drifts)
    if not args.keep:
        os.remove(weights)
    report.setdefault("fma_runs", []).append(fma_peak(fma_exe))
    return [results[c] for c in cases]


# ---------------------------------------------------------------------------------------------
def fmt(x, f="%.1f"):
    return "n/a" if x is None else f % x


def markdown(report):
    L = []
    c = report["cpu"]
    pk = report["peak"]
    L.append("## Whole-model forward, CPU, batch 1, f32, %d threads, median of %d (%s)" % (
        report["threads"], report["runs"], report["date"]))
    L.append("")
    L.append("CPU: %s (family %s, model %s, %d CPUs). FMA peak (bench/fma_peak.c, %s, best of %d "
             "probes in this run): **%.1f GFLOP/s** for %d threads (%d x %.1f GFLOP per CPU-second of "
             "one core); wall-clock on %d threads %.1f GFLOP/s. Load average %.2f at the start, "
             "%.2f at the end." % (
                 c["model"], c["family"], c["model_no"], c["cpus"], pk["width"], pk["probes"],
                 pk["gflops"], report["threads"], report["threads"], pk["per_cpu_second"],
                 min(report["threads"], 2), pk["wall"], report["load"][0], report["load"][1]))
    L.append("PyTorch %s; ONNX Runtime %s (npm onnxruntime-node, opset %d export); tfm: %s." % (
        report["torch"], report["ort_version"], report["opset"], report["tfm"]))
    L.append("")
    L.append("| case | tfm ms | ORT ms | PyTorch ms | tfm GFLOP/s | % FMA peak | tfm/ORT speed | "
             "tfm/PyTorch speed | max rel diff vs PyTorch (tfm / ORT) | foreign cores (tfm / ORT / PyTorch) |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    notes = []
    for r in report["cases"]:
        t, o, p = r.get("tfm_ms"), r.get("ort_ms"), r.get("torch_ms")
        g = r["flops"] / t / 1e6 if t else None
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s / %s |" % (
            r["case"], fmt(t), fmt(o), fmt(p), fmt(g), fmt(100 * g / pk["gflops"] if g else None, "%.0f%%"),
            fmt(o / t if o and t else None, "%.2fx"), fmt(p / t if p and t else None, "%.2fx"),
            fmt(r.get("tfm_rel_diff"), "%.1e"), fmt(r.get("ort_rel_diff"), "%.1e"),
            fmt(r.get("tfm_foreign_cores"), "%.2f"), fmt(r.get("ort_foreign_cores"), "%.2f"),
            fmt(r.get("torch_foreign_cores"), "%.2f")))
        for k, who in (("tfm_error", "tfm"), ("ort_error", "ONNX Runtime")):
            if r.get(k):
                notes.append("%s: %s n/a: %s" % (r["case"], who, r[k]))
    L.append("")
    L.append("Speed ratios are peer ms / tfm ms (> 1: tfm is faster). GFLOP/s count the useful "
             "work (padded cases: the real tokens only); FLOPs per case: %s. Foreign cores: "
             "the CPU time of other processes over a peer's measurement, in cores (/proc/stat; "
             "tfm's and ORT's include their process start and weight load): above ~0.1 "
             "the figure was taken on a busy machine." % ", ".join(
                 "%s %.1f G" % (r["case"], r["flops"] / 1e9) for r in report["cases"]))
    for n in notes + report.get("notes", []):
        L.append("- " + n)
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated, of: " + ", ".join(CASES))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build", "bin", "tfmc"))
    ap.add_argument("--no-snapshot", action="store_true", help="run --tfmc in place")
    ap.add_argument("--opset", type=int, default=14, help="ONNX opset of the export")
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--work", default=None, help="default: a new folder under /tmp")
    ap.add_argument("--keep", action="store_true", help="keep weights and ONNX files under --work")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad:
        sys.exit("unknown case(s) %s; known: %s" % (", ".join(bad), ", ".join(CASES)))
    torch.set_num_threads(args.threads)
    work = args.work or tempfile.mkdtemp(prefix="tfm-models-")
    os.makedirs(work, exist_ok=True)
    t_start = time.monotonic()

    tfmc, mtimes = (args.tfmc, {}) if args.no_snapshot else snapshot_tfmc(args.tfmc, work)
    ort_version = "n/a"
    try:
        with open(os.path.join(ORT_MODULE, "package.json")) as f:
            ort_version = json.load(f)["version"]
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        commit, dirty = "?", ""
    report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "cpu": cpu_model(), "threads": args.threads, "runs": args.runs, "opset": args.opset,
              "torch": torch.__version__, "ort_version": ort_version,
              "tfm": "commit %s%s, tfmc built %s" % (commit, " + uncommitted changes" if dirty else "",
                                                     mtimes.get("bin/tfmc", "?")),
              "tfm_build_mtimes": mtimes, "work": work, "cases": [], "notes": []}
    load0 = os.getloadavg()
    log("CPU: %s; load %.2f; work %s" % (report["cpu"]["model"], load0[0], work))
    fma_exe = build_fma_peak(work)
    report["fma_runs"] = [fma_peak(fma_exe)]

    # one model at a time, its cases in the order given
    order = []
    for c in cases:
        if CASES[c][0] not in order:
            order.append(CASES[c][0])
    for mname in order:
        mcases = [c for c in cases if CASES[c][0] == mname]
        report["cases"] += bench_model(mname, mcases, args, tfmc, work, fma_exe, report)
        if args.json:
            with open(args.json + ".partial", "w") as f:
                json.dump(report, f, indent=1)
    report["cases"].sort(key=lambda r: cases.index(r["case"]))

    width = "zmm" if report["cpu"]["avx512"] else "ymm"
    n = min(args.threads, 2)
    report["peak"] = dict(width=width, probes=len(report["fma_runs"]),
                          per_cpu_second=max(p[width + "cpu"] for p in report["fma_runs"]),
                          wall=max(p[width + str(n)] for p in report["fma_runs"]))
    report["peak"]["gflops"] = args.threads * report["peak"]["per_cpu_second"]
    for r in report["cases"]:
        t = r.get("tfm_ms")
        r["tfm_gflops"] = r["flops"] / t / 1e6 if t else None
        r["tfm_pct_fma_peak"] = 100 * r["tfm_gflops"] / report["peak"]["gflops"] if t else None
        r["tfm_over_ort_speed"] = r["ort_ms"] / t if t and r.get("ort_ms") else None
        r["tfm_over_torch_speed"] = r["torch_ms"] / t if t and r.get("torch_ms") else None
        if r.get("tfm_rel_diff") is not None and not r["tfm_rel_diff"] <= 1e-4:
            report["notes"].append("%s: tfm differs from PyTorch by %.2g (relative): check it" % (
                r["case"], r["tfm_rel_diff"]))
    report["load"] = [load0[0], os.getloadavg()[0]]
    report["runtime_s"] = round(time.monotonic() - t_start, 1)
    report["notes"].append("run took %.0f s" % report["runtime_s"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        if os.path.exists(args.json + ".partial"):
            os.remove(args.json + ".partial")
    print(markdown(report))
    if args.json:
        log("wrote %s" % args.json)
    if not args.work and not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
