#!/usr/bin/python3
"""Text generation (issue 12, item 6): prefill tokens/s and decode ms/token,
batch 1, random weights, tfm against llama.cpp (F32 weights), PyTorch (its own
KV-cache loop) and ONNX Runtime (a graph with past key/values exported from
PyTorch), measured in one run, plus the machine's memory bandwidth (bench/
membw.c) as decode's limit.

usage: /usr/bin/python3 bench/generate_bench.py [--quick] [--models gpt2,llama1b]
         [--peers tfm,llama,torch,ort] [--threads 2] [--reps R] [--work DIR]
         [--json OUT.json] [--md OUT.md]

  --quick   GPT-2 only, 2 rounds: for trying things (~3 min on an idle box)
  default   GPT-2 and the LLaMA-shaped 1B model (~20 min; the 1B files are
            10 GB under --work, default /tmp/tfm-genbench)

Models come from ../shared/peers/llama/make_gguf.py (its setup.sh must have
been run; it is called from there): one random-weight model as GGUF for
llama.cpp and as safetensors under the canonical names plus the `.tfm` that
tfmc compiles, so tfm and llama.cpp run the very same weights. PyTorch and
ONNX Runtime load the same safetensors.

Measurements (batch 1, --threads threads, fixed prompt tokens
token(i) = (1 + 7919 i) % vocab, the same for every peer):
  prefill P=128, P=512   tokens/s of one prefill (last position's logits)
  decode after 512       median ms/token of 128 single-token steps
  decode at 4096         median ms/token of 32 steps after a 4096-token
                         prompt, against decode after 512 (GPT-2 has 1024
                         learned positions: its 4096 figure comes from the
                         same model made with 4608 positions, `gpt2-c4608`)
The peers are interleaved round by round (tfm, llama.cpp, PyTorch per round;
decode speed drifts on this host between runs, so only interleaved figures
are compared) and ONNX Runtime runs its rounds in one process.

Contamination: the box has 2 cores and other jobs. Before each measurement
the script waits (up to --quiet-wait s) until other processes use less than
--quiet-below cores, then records `foreign_cores` (CPU time of everything
but this script and its children, /proc/stat, in cores) over the
measurement, and measures again (up to --retries times) if it was above.
Every figure carries its foreign_cores; the table flags those above the
threshold.

Peers at their best: PyTorch under OMP_WAIT_POLICY=PASSIVE (TOOLCHAIN.md),
tfm and llama.cpp with their own thread pools' defaults (tfm's threads sleep at once after
a parallel region, llama.cpp's spin); llama.cpp as its users run it: its default F16 KV
cache (--llama-kv; tfm's cache is F32, so llama.cpp reads half the cache bytes) and its
default flash attention (auto -> on; --llama-fa). The settings are printed beside the
figures. Decode's bandwidth limit: the bytes of weights read per
token (every parameter once, the tied embedding once as the LM head, learned
positions one row) over membw's best read bandwidth; the fraction reached is
limit / measured (and, beside it, with the KV cache bytes read at that
context added).
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: PyTorch's best
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEER_DIR = os.path.normpath(os.path.join(ROOT, "..", "shared", "peers", "llama"))
HZ = os.sysconf("SC_CLK_TCK")

TARGETS = {"decode_vs_llama": 1.0, "bw_fraction": 0.80, "prefill_vs_llama": 1.0,
           "long_vs_512": 1.5}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# contamination probe
def cpu_snap():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]  # user nice system irq softirq steal
    t = os.times()
    return time.monotonic(), busy / HZ, t.user + t.system + t.children_user + t.children_system


def foreign_cores(a, b):
    wall = b[0] - a[0]
    return max(0.0, ((b[1] - a[1]) - (b[2] - a[2])) / wall) if wall > 0 else 0.0


class Quiet:
    def __init__(self, below, wait, retries):
        self.below, self.wait, self.retries = below, wait, retries
        self.waited_total = 0.0

    def wait_quiet(self):
        t0 = time.monotonic()
        while time.monotonic() - t0 < self.wait:
            a = cpu_snap()
            time.sleep(1.0)
            if foreign_cores(a, cpu_snap()) < self.below:
                break
        w = time.monotonic() - t0
        self.waited_total += w
        return w

    def measure(self, fn, what):
        """fn() -> dict; adds foreign_cores, attempts, waited_s. Redoes a contaminated one."""
        waited, best = 0.0, None
        for attempt in range(1, self.retries + 2):
            if self.below > 0:
                waited += self.wait_quiet()
            a = cpu_snap()
            r = fn()
            fc = foreign_cores(a, cpu_snap())
            r.update(foreign_cores=round(fc, 3), attempts=attempt, waited_s=round(waited, 1))
            if best is None or fc < best["foreign_cores"]:
                best = r
            if self.below <= 0 or fc < self.below:
                break
            log("  %s: foreign_cores=%.2f%s" % (what, fc, ", measuring again" if attempt <= self.retries else ""))
        return best


# ---------------------------------------------------------------------------------------------
# models (peers/llama/make_gguf.py)
def tok_at(i, vocab):
    return (1 + 7919 * i) % vocab


def read_safetensors(path, keep=True):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    meta = header.pop("__metadata__", {})
    if not keep:
        return header, meta, None
    data = np.fromfile(path, dtype=np.uint8, offset=8 + n)
    tensors = {}
    for name, e in header.items():
        assert e["dtype"] == "F32", (name, e["dtype"])
        b0, b1 = e["data_offsets"]
        tensors[name] = torch.from_numpy(data[b0:b1].view(np.float32).reshape(e["shape"]))
    return header, meta, tensors


def make_model(preset, name, context, work):
    out = os.path.join(work, "models")
    base = os.path.join(out, name + "-f32")
    if not all(os.path.exists(base + ext) for ext in (".gguf", ".safetensors", ".tfm")):
        log("make_gguf.py --model %s --name %s%s" % (preset, name, " --context %d" % context if context else ""))
        cmd = ["/usr/bin/python3", "make_gguf.py", "--model", preset, "--name", name, "--dtype", "f32",
               "--safetensors", "--out", out]
        if context:
            cmd += ["--context", str(context)]
        subprocess.run(cmd, cwd=PEER_DIR, check=True, stdout=subprocess.DEVNULL)
    header, meta, _ = read_safetensors(base + ".safetensors", keep=False)
    cfg = json.loads(meta["config"])
    n_params = sum(int(np.prod(e["shape"])) for e in header.values())
    # bytes read per decode step: every parameter once, except learned positions (one row)
    read = n_params
    if "embed.positions.weight" in header:
        s = header["embed.positions.weight"]["shape"]
        read -= s[0] * s[1] - s[1]
    hd = cfg["d"] // cfg["heads"]
    return dict(name=name, preset=preset, base=base, cfg=cfg, n_params=n_params,
                weight_bytes=4 * read, kv_bytes_per_token=2 * cfg["layers"] * cfg["kv_heads"] * hd * 4,
                head_dim=hd)


# ---------------------------------------------------------------------------------------------
# tfm
def tfm_env():
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)  # tfm sets its own wait policy (forward.c)
    return env


def tfm_compile(tfmc, m, work):
    exe = os.path.join(work, m["name"] + "-tfm")
    t0 = time.perf_counter()
    subprocess.run([tfmc, m["base"] + ".tfm", "-o", exe], check=True)
    return exe, time.perf_counter() - t0


GEN_RE = re.compile(r"generate: prefill (\d+) x (\d+) tokens in ([\d.]+) ms \(([\d.]+) tokens/s\); "
                    r"decode (\d+) steps: median ([\d.]+) ms/token")


def tfm_run(exe, m, P, N, threads, work):
    toks = np.array([[tok_at(i, m["cfg"]["vocab"]) for i in range(P)]], dtype=np.int32)
    tpath = os.path.join(work, "tokens-%s-%d.npy" % (m["name"], P))
    if not os.path.exists(tpath):
        np.save(tpath, toks)
    out = os.path.join(work, "ids-%s-%d.npy" % (m["name"], P))
    t0 = time.perf_counter()
    r = subprocess.run([exe, "--weights", m["base"] + ".safetensors", "--input", "tokens=" + tpath,
                        "--generate", str(N + 1), "--bench-generate", "--threads", str(threads),
                        "--output", out], capture_output=True, text=True, env=tfm_env())
    wall = time.perf_counter() - t0
    g = GEN_RE.search(r.stderr)
    if r.returncode or not g:
        raise RuntimeError("tfm failed (rc %d): %s" % (r.returncode, r.stderr[-800:]))
    res = dict(prefill_ms=float(g.group(3)), process_s=round(wall, 2))
    if N > 0:
        res["decode_ms"] = float(g.group(6))
        res["ids"] = np.load(out)[0].tolist()
    return res


# ---------------------------------------------------------------------------------------------
# llama.cpp (peers/llama, called from there)
LLAMA_RE = re.compile(r"^peer=llama\.cpp .*$", re.M)


LLAMA_KV = "f16"  # --llama-kv: llama.cpp's default KV-cache type


def llama_run(m, prompts, N, threads, reps, fa, warmup=1):
    exe = os.path.join(PEER_DIR, "build", "llama_bench")
    cmd = [exe, "-m", m["base"] + ".gguf", "-t", str(threads), "-p", ",".join(map(str, prompts)),
           "-n", str(N), "-r", str(reps), "--kv", LLAMA_KV, "--fa", fa, "--warmup", str(warmup)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=PEER_DIR)
    if r.returncode:
        raise RuntimeError("llama_bench failed (rc %d): %s" % (r.returncode, r.stderr[-800:]))
    res = {"lines": []}
    for line in LLAMA_RE.findall(r.stdout):
        kv = dict(x.split("=", 1) for x in line.split() if "=" in x)
        res["lines"].append(line)
        P = int(kv["P"])
        if kv["kind"] == "prefill":
            res["prefill_ms_%d" % P] = float(kv["median_ms"])
        else:
            res["decode_ms_%d" % P] = float(kv["median_ms"])
        res["llama_foreign_cores"] = max(res.get("llama_foreign_cores", 0.0), float(kv["foreign_cores"]))
    banner = [x for x in r.stdout.splitlines() if x.startswith("# llama.cpp")]
    res["banner"] = banner[0] if banner else ""
    return res


# ---------------------------------------------------------------------------------------------
# PyTorch: the model from the safetensors, with a KV cache
class TorchLM(torch.nn.Module):
    """GPT-2 (pre-LN, learned positions, GELU-tanh, biases) or LLaMA (RMSNorm, RoPE half
    style, SwiGLU, GQA), tied head. forward(tokens [1, T], past_k, past_v [L, 1, kvh, S, hd])
    -> (logits of the last position [1, vocab], present_k, present_v [L, 1, kvh, S+T, hd]):
    the concatenating past/present form, used for the ONNX export. The PyTorch peer's own
    loop uses step() with preallocated caches written in place (its faster form)."""

    def __init__(self, cfg, tensors):
        super().__init__()
        self.cfg = cfg
        self.gpt2 = cfg["arch"] == "gpt2"
        self.L, self.d, self.H, self.KV = cfg["layers"], cfg["d"], cfg["heads"], cfg["kv_heads"]
        self.hd = self.d // self.H
        self.eps = cfg["eps"]
        for k, v in tensors.items():
            self.register_buffer(k.replace(".", "__"), v, persistent=False)
        if not self.gpt2:
            inv = 1.0 / (cfg["theta"] ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))
            self.register_buffer("inv_freq", inv.float(), persistent=False)

    def w(self, name):
        return getattr(self, name.replace(".", "__"))

    def norm(self, x, name):
        if self.gpt2:
            return F.layer_norm(x, (self.d,), self.w(name + ".weight"), self.w(name + ".bias"), self.eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w(name + ".weight")

    def lin(self, x, name):
        return F.linear(x, self.w(name + ".weight"), self.w(name + ".bias") if self.gpt2 else None)

    def rope(self, x, pos):  # x [1, h, T, hd], pos [T]
        f = pos.float()[:, None] * self.inv_freq[None, :]
        cos, sin = torch.cat([f.cos(), f.cos()], -1), torch.cat([f.sin(), f.sin()], -1)
        x1, x2 = x[..., : self.hd // 2], x[..., self.hd // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def attend(self, q, k, v, S):
        """q [1, H, T, hd]; k, v [1, KV, S+T, hd] (positions 0..S+T-1); causal from S on."""
        T = q.shape[2]
        G = self.H // self.KV
        q = q.reshape(1, self.KV, G * T, self.hd)
        s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / self.hd ** 0.5)  # [1, KV, G*T, S+T]
        if T > 1:
            j = torch.arange(S + T)
            i = torch.arange(T) + S
            mask = (j[None, :] > i[:, None])  # [T, S+T]
            s = s.reshape(1, self.KV, G, T, S + T).masked_fill(mask, float("-inf")).reshape(
                1, self.KV, G * T, S + T)
        p = torch.softmax(s, -1)
        return torch.matmul(p, v).reshape(1, self.H, T, self.hd)

    def layers(self, tokens, S, kv_fn):
        T = tokens.shape[1]
        pos = torch.arange(T) + S
        x = F.embedding(tokens, self.w("embed.tokens.weight"))
        if self.gpt2:
            x = x + F.embedding(pos, self.w("embed.positions.weight"))[None]
        for li in range(self.L):
            p = "layers.%d." % li
            h = self.norm(x, p + "attn_norm")
            q = self.lin(h, p + "attn.q").view(1, T, self.H, self.hd).transpose(1, 2)
            k = self.lin(h, p + "attn.k").view(1, T, self.KV, self.hd).transpose(1, 2)
            v = self.lin(h, p + "attn.v").view(1, T, self.KV, self.hd).transpose(1, 2)
            if not self.gpt2:
                q, k = self.rope(q, pos), self.rope(k, pos)
            k_all, v_all = kv_fn(li, k, v)
            a = self.attend(q, k_all, v_all, S).transpose(1, 2).reshape(1, T, self.d)
            x = x + self.lin(a, p + "attn.o")
            h = self.norm(x, p + "ffn_norm")
            if self.gpt2:
                h = self.lin(F.gelu(self.lin(h, p + "ffn.up"), approximate="tanh"), p + "ffn.down")
            else:
                h = self.lin(F.silu(self.lin(h, p + "ffn.gate")) * self.lin(h, p + "ffn.up"), p + "ffn.down")
            x = x + h
        x = self.norm(x[:, -1], "final_norm")  # last position only (llama.cpp and tfm do the same)
        return F.linear(x, self.w("embed.tokens.weight"))

    def forward(self, tokens, past_k, past_v):
        S = past_k.shape[3]
        ks, vs = [], []

        def kv(li, k, v):
            ks.append(torch.cat([past_k[li], k], 2))
            vs.append(torch.cat([past_v[li], v], 2))
            return ks[-1], vs[-1]
        logits = self.layers(tokens, S, kv)
        return logits, torch.stack(ks), torch.stack(vs)

    def new_cache(self, max_len):
        return (torch.zeros(self.L, 1, self.KV, max_len, self.hd),
                torch.zeros(self.L, 1, self.KV, max_len, self.hd))

    def step(self, tokens, cache, S):
        ck, cv = cache
        T = tokens.shape[1]

        def kv(li, k, v):
            ck[li, :, :, S:S + T] = k
            cv[li, :, :, S:S + T] = v
            return ck[li, :, :, :S + T], cv[li, :, :, :S + T]
        return self.layers(tokens, S, kv)


def torch_run(model, vocab, P, N):
    toks = torch.tensor([[tok_at(i, vocab) for i in range(P + N)]], dtype=torch.long)
    with torch.no_grad():
        cache = model.new_cache(P + N)
        t0 = time.perf_counter()
        logits = model.step(toks[:, :P], cache, 0)
        pre = (time.perf_counter() - t0) * 1e3
        ids, steps = [int(logits.argmax())], []
        for s in range(N):
            t0 = time.perf_counter()
            logits = model.step(toks[:, P + s:P + s + 1], cache, P + s)
            steps.append((time.perf_counter() - t0) * 1e3)
    res = dict(prefill_ms=pre)
    if N:
        res["decode_ms"] = statistics.median(steps)
    res["first_id"] = ids[0]
    return res


# ---------------------------------------------------------------------------------------------
# ONNX Runtime
def export_onnx(m, path):
    """In a child process (frees the memory the export takes): TorchLM with past/present."""
    code = ("import sys; sys.argv=['x']; sys.path.insert(0, %r); import generate_bench as g; "
            "g._export(%r, %r)" % (HERE, json.dumps(m), path))
    r = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("torch.onnx.export failed: " + r.stderr[-1500:])


def _export(mjson, path):
    m = json.loads(mjson)
    _, _, tensors = read_safetensors(m["base"] + ".safetensors")
    model = TorchLM(m["cfg"], tensors).eval()
    L, KV, hd = m["cfg"]["layers"], m["cfg"]["kv_heads"], m["head_dim"]
    ex = (torch.tensor([[1, 2]], dtype=torch.long), torch.zeros(L, 1, KV, 3, hd), torch.zeros(L, 1, KV, 3, hd))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(model, ex, path, input_names=["tokens", "past_k", "past_v"],
                          output_names=["logits", "present_k", "present_v"],
                          dynamic_axes={"tokens": {1: "T"}, "past_k": {3: "S"}, "past_v": {3: "S"},
                                        "present_k": {3: "ST"}, "present_v": {3: "ST"}},
                          opset_version=14)


def ort_run(onnx_path, m, P, N, reps, threads):
    node_mod = os.path.join(HERE, "node_env", "node_modules", "onnxruntime-node")
    c = m["cfg"]
    r = subprocess.run(["node", os.path.join(HERE, "ort_generate.js"), onnx_path, str(threads), str(P),
                        str(N), str(reps), str(c["layers"]), str(c["kv_heads"]), str(m["head_dim"]),
                        str(c["vocab"])], capture_output=True, text=True,
                       env=dict(os.environ, ORT_MODULE=node_mod))
    if r.returncode:
        raise RuntimeError("onnxruntime-node failed: " + r.stderr[-800:])
    j = json.loads(r.stdout.strip().splitlines()[-1])
    res = dict(prefill_ms=statistics.median(j["prefill_ms"]), load_ms=j["load_ms"])
    if N:
        res["decode_ms"] = statistics.median(j["decode_ms"])
    return res


# ---------------------------------------------------------------------------------------------
def membw(work, reps, quiet):
    exe = os.path.join(work, "membw")
    subprocess.run(["cc", "-O3", "-march=native", "-fopenmp", os.path.join(HERE, "membw.c"), "-o", exe],
                   check=True)

    def go():
        r = subprocess.run([exe, "--json", "--reps", str(reps), "--threads", "1,2"], check=True,
                           capture_output=True, text=True)
        return json.loads(r.stdout)
    return quiet.measure(go, "membw")


def cpu_info():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    kv = dict((a.strip(), b.strip()) for a, b in (x.split(":", 1) for x in out.splitlines() if ":" in x))
    return dict(model=kv.get("Model name"), cpus=kv.get("CPU(s)"), family=kv.get("CPU family"),
                model_no=kv.get("Model"), l3=kv.get("L3 cache"), hypervisor=kv.get("Hypervisor vendor"),
                avx512="avx512f" in kv.get("Flags", ""), mem_gb=round(os.sysconf("SC_PAGE_SIZE")
                                                                     * os.sysconf("SC_PHYS_PAGES") / 1e9, 1))


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------------------------------------
def bench_model(m, args, quiet, work, out, long_model=None):
    name = m["name"]
    R = args.reps
    res = {"model": name, "n_params": m["n_params"], "weight_bytes": m["weight_bytes"],
           "kv_bytes_per_token": m["kv_bytes_per_token"], "rounds": []}
    peers = args.peers
    exe = None
    if "tfm" in peers:
        exe, cs = tfm_compile(args.tfmc, m, work)
        res["tfm_compile_s"] = round(cs, 1)
    tmodel = None
    if "torch" in peers:
        _, _, tensors = read_safetensors(m["base"] + ".safetensors")
        tmodel = TorchLM(m["cfg"], tensors).eval()
        torch_run(tmodel, m["cfg"]["vocab"], 32, 4)  # warm-up
    for rnd in range(R):
        row = {}
        log("[%s] round %d/%d" % (name, rnd + 1, R))
        if "tfm" in peers:
            row["tfm_p128"] = quiet.measure(lambda: tfm_run(exe, m, 128, 0, args.threads, work), "tfm P128")
            row["tfm_p512"] = quiet.measure(lambda: tfm_run(exe, m, 512, args.decode, args.threads, work),
                                            "tfm P512")
            log("  tfm  prefill128 %.1f ms, prefill512 %.1f ms, decode %.3f ms/token (fc %.2f)" % (
                row["tfm_p128"]["prefill_ms"], row["tfm_p512"]["prefill_ms"], row["tfm_p512"]["decode_ms"],
                row["tfm_p512"]["foreign_cores"]))
        if "llama" in peers:
            # two runs: decoding after the 128-token prompt too would double llama.cpp's time
            row["llama"] = quiet.measure(lambda: llama_run(m, [128], 0, args.threads, 1, args.llama_fa),
                                         "llama.cpp P128")
            d = quiet.measure(lambda: llama_run(m, [512], args.decode, args.threads, 1, args.llama_fa),
                              "llama.cpp P512")
            row["llama"]["foreign_cores"] = max(row["llama"]["foreign_cores"], d.pop("foreign_cores"))
            row["llama"]["lines"] += d.pop("lines")
            row["llama"].update((k, v) for k, v in d.items() if k.startswith(("prefill", "decode")))
            log("  llama prefill128 %.1f ms, prefill512 %.1f ms, decode %.3f ms/token (fc %.2f)" % (
                row["llama"]["prefill_ms_128"], row["llama"]["prefill_ms_512"], row["llama"]["decode_ms_512"],
                row["llama"]["foreign_cores"]))
        if tmodel is not None:
            row["torch_p128"] = quiet.measure(lambda: torch_run(tmodel, m["cfg"]["vocab"], 128, 0), "torch P128")
            row["torch_p512"] = quiet.measure(lambda: torch_run(tmodel, m["cfg"]["vocab"], 512, args.decode),
                                              "torch P512")
            log("  torch prefill128 %.1f ms, prefill512 %.1f ms, decode %.3f ms/token (fc %.2f)" % (
                row["torch_p128"]["prefill_ms"], row["torch_p512"]["prefill_ms"], row["torch_p512"]["decode_ms"],
                row["torch_p512"]["foreign_cores"]))
        res["rounds"].append(row)
    # greedy agreement: tfm's first generated id vs PyTorch's argmax after the same prompt
    if "tfm" in peers and tmodel is not None:
        res["first_token_agrees"] = (res["rounds"][0]["tfm_p512"]["ids"][0]
                                     == res["rounds"][0]["torch_p512"]["first_id"])
    for row in res["rounds"]:
        if "tfm_p512" in row:
            row["tfm_p512"].pop("ids", None)
    del tmodel
    if "ort" in peers and (m["preset"] == "gpt2" or args.ort_llama):
        onnx_path = os.path.join(work, "onnx", name, "model.onnx")
        try:
            if not os.path.exists(onnx_path):
                log("[%s] torch.onnx.export" % name)
                t0 = time.perf_counter()
                export_onnx(m, onnx_path)
                res["ort_export_s"] = round(time.perf_counter() - t0, 1)
            res["ort_p128"] = quiet.measure(lambda: ort_run(onnx_path, m, 128, 0, R, args.threads), "ort P128")
            res["ort_p512"] = quiet.measure(lambda: ort_run(onnx_path, m, 512, args.decode, R, args.threads),
                                            "ort P512")
            log("  ort  prefill128 %.1f ms, prefill512 %.1f ms, decode %.3f ms/token (fc %.2f)" % (
                res["ort_p128"]["prefill_ms"], res["ort_p512"]["prefill_ms"], res["ort_p512"]["decode_ms"],
                res["ort_p512"]["foreign_cores"]))
        except Exception as e:  # reported, not fatal
            res["ort_error"] = str(e)[-1500:]
            log("  ort failed: " + res["ort_error"][-600:])
    elif "ort" in peers:
        res["ort_error"] = "not run for %s (pass --ort-llama)" % name
    # decode at 4096 tokens of context
    lm = long_model or m
    if args.long and lm is not None:
        lg = {"model": lm["name"], "P": args.long}
        if "tfm" in peers:
            lexe = exe if lm is m else tfm_compile(args.tfmc, lm, work)[0]
            lg["tfm"] = quiet.measure(lambda: tfm_run(lexe, lm, args.long, args.long_decode, args.threads, work),
                                      "tfm P%d" % args.long)
            lg["tfm"].pop("ids", None)
            log("  tfm  decode at %d: %.3f ms/token" % (args.long, lg["tfm"]["decode_ms"]))
        if "llama" in peers and args.long_llama:
            lg["llama"] = quiet.measure(lambda: llama_run(lm, [args.long], args.long_decode, args.threads, 1,
                                                          args.llama_fa, warmup=0), "llama.cpp P%d" % args.long)
            log("  llama decode at %d: %.3f ms/token" % (args.long, lg["llama"]["decode_ms_%d" % args.long]))
        if "torch" in peers and (m["preset"] == "gpt2" or args.long_torch):
            _, _, tensors = read_safetensors(lm["base"] + ".safetensors")
            tm = TorchLM(lm["cfg"], tensors).eval()
            lg["torch"] = quiet.measure(lambda: torch_run(tm, lm["cfg"]["vocab"], args.long, args.long_decode),
                                        "torch P%d" % args.long)
            log("  torch decode at %d: %.3f ms/token" % (args.long, lg["torch"]["decode_ms"]))
            del tm
        res["long"] = lg
    return res


def summarize(res, bw_gbps):
    """Medians over rounds, ratios, bandwidth fractions."""
    rounds = res["rounds"]
    s = {}

    def pick(key, field):
        return med([r[key][field] for r in rounds if key in r and field in r[key]])

    def fc(keys):
        vals = [r[k]["foreign_cores"] for r in rounds for k in keys if k in r]
        return max(vals) if vals else None
    s["tfm"] = dict(p128=pick("tfm_p128", "prefill_ms"), p512=pick("tfm_p512", "prefill_ms"),
                    dec=pick("tfm_p512", "decode_ms"), fc=fc(["tfm_p128", "tfm_p512"]))
    s["llama"] = dict(p128=pick("llama", "prefill_ms_128"), p512=pick("llama", "prefill_ms_512"),
                      dec=pick("llama", "decode_ms_512"), fc=fc(["llama"]))
    s["torch"] = dict(p128=pick("torch_p128", "prefill_ms"), p512=pick("torch_p512", "prefill_ms"),
                      dec=pick("torch_p512", "decode_ms"), fc=fc(["torch_p128", "torch_p512"]))
    if "ort_p512" in res:
        s["ort"] = dict(p128=res["ort_p128"]["prefill_ms"], p512=res["ort_p512"]["prefill_ms"],
                        dec=res["ort_p512"]["decode_ms"],
                        fc=max(res["ort_p128"]["foreign_cores"], res["ort_p512"]["foreign_cores"]))
    limit_ms = res["weight_bytes"] / (bw_gbps * 1e9) * 1e3
    kv_ms = res["kv_bytes_per_token"] * (512 + 64) / (bw_gbps * 1e9) * 1e3  # mean context of the 128 steps
    for p, v in s.items():
        if v.get("dec"):
            v["bw_fraction"] = limit_ms / v["dec"]
            v["bw_fraction_with_kv"] = (limit_ms + kv_ms) / v["dec"]
            v["implied_gbps"] = res["weight_bytes"] / (v["dec"] * 1e-3) / 1e9
    s["limit_ms"] = limit_ms
    s["limit_kv_ms"] = limit_ms + kv_ms
    t = s["tfm"]
    ratios = {}
    for p in ("llama", "torch", "ort"):
        if p in s and t.get("dec") and s[p].get("dec"):
            ratios[p] = dict(prefill128=s[p]["p128"] / t["p128"], prefill512=s[p]["p512"] / t["p512"],
                             decode=s[p]["dec"] / t["dec"])  # > 1: tfm faster
    s["speedup_tfm_over"] = ratios
    lg = res.get("long")
    if lg:
        P = lg["P"]
        for p in ("tfm", "llama", "torch"):
            if p in lg and s.get(p, {}).get("dec"):
                d = lg[p].get("decode_ms") or lg[p].get("decode_ms_%d" % P)
                s[p]["dec_long"] = d
                s[p]["long_over_512"] = d / s[p]["dec"]
                s[p]["fc_long"] = lg[p]["foreign_cores"]
    return s


def fmt(x, f="%.1f"):
    return "—" if x is None else f % x


def markdown(report):
    L = []
    c = report["cpu"]
    bw = report["membw"]
    L.append("## Generation, batch 1, %d threads, random weights, F32 (%s)" % (report["threads"], report["date"]))
    L.append("")
    L.append("CPU: %s (family %s model %s, %s CPUs, L3 %s, %s), %s GB RAM. Memory bandwidth (bench/membw.c, "
             "%d streams x %d MB, best of %d): read %.1f GB/s (1 thread %.1f; one stream, one accumulator "
             "%.1f), copy %.1f, copy with streaming stores %.1f GB/s (2 threads); foreign_cores %.2f." % (
                 c["model"], c["family"], c["model_no"], c["cpus"], c["l3"], c["hypervisor"] or "bare metal",
                 c["mem_gb"], bw["streams"], bw["mb_per_array"], bw["reps"], bw["gbps"]["2"]["read"],
                 bw["gbps"]["1"]["read"], bw["gbps"]["2"]["read1"], bw["gbps"]["2"]["copy"],
                 bw["gbps"]["2"]["copy_nt"], bw["foreign_cores"]))
    L.append("Bandwidth used for the limits: %.1f GB/s (%s)." % (report["bw_gbps"], report["bw_source"]))
    L.append("")
    L.append("Peer settings: llama.cpp `--kv %s --fa %s` (its defaults are f16 and auto = on), "
             "%d threads; ONNX Runtime intraOpNumThreads %d, graphOptimizationLevel all; "
             "PyTorch OMP_WAIT_POLICY=PASSIVE. tfm's KV cache is F32." % (
                 report.get("llama_kv", "f16"), report.get("llama_fa", "auto"), report["threads"],
                 report["threads"]))
    L.append("")
    L.append("| model | peer | prefill 128 tok/s | prefill 512 tok/s | decode after 512 ms/token | "
             "of BW limit (weights / +KV) | decode at %d ms/token | at %d / at 512 | max foreign_cores |"
             % (report["long"], report["long"]))
    L.append("|---|---|---|---|---|---|---|---|---|")
    names = {"tfm": "tfm", "llama": "llama.cpp (F32 weights, %s KV)" % report.get("llama_kv", "f16"), "torch": "PyTorch 1.13", "ort": "ONNX Runtime 1.30"}
    for r in report["models"]:
        s = r["summary"]
        for p in ("tfm", "llama", "torch", "ort"):
            v = s.get(p)
            if not v or v.get("p128") is None:
                continue
            fcs = [x for x in (v.get("fc"), v.get("fc_long")) if x is not None]
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["model"], names[p], fmt(128e3 / v["p128"]), fmt(512e3 / v["p512"]), fmt(v.get("dec"), "%.2f"),
                "%.0f%% / %.0f%%" % (100 * v["bw_fraction"], 100 * v["bw_fraction_with_kv"]) if v.get("dec") else "—",
                fmt(v.get("dec_long"), "%.2f"), fmt(v.get("long_over_512"), "%.2fx"),
                fmt(max(fcs) if fcs else None, "%.2f")))
        L.append("| %s | *limit* | | | %.2f (weights) / %.2f (+KV) | 100%% | | | |" % (
            r["model"], s["limit_ms"], s["limit_kv_ms"]))
    L.append("")
    L.append("Speed-ups of tfm (peer time / tfm time; > 1 means tfm is faster) and the issue's targets:")
    L.append("")
    L.append("| model | vs | prefill 128 | prefill 512 | decode | target |")
    L.append("|---|---|---|---|---|---|")
    for r in report["models"]:
        for p, q in r["summary"]["speedup_tfm_over"].items():
            tgt = ""
            if p == "llama":
                ok_p = min(q["prefill128"], q["prefill512"]) >= 1.0
                ok_d = q["decode"] >= 1.0
                tgt = "prefill >= llama.cpp: %s; decode no slower: %s" % (
                    "met" if ok_p else "MISSED", "met" if ok_d else "MISSED")
            L.append("| %s | %s | %.2fx | %.2fx | %.2fx | %s |" % (r["model"], names[p], q["prefill128"],
                                                                   q["prefill512"], q["decode"], tgt))
    L.append("")
    for r in report["models"]:
        t = r["summary"]["tfm"]
        if t.get("dec"):
            L.append("- %s: tfm decode reaches %.0f%% of the weights/bandwidth limit (target 80%%: %s); "
                     "with the KV cache counted %.0f%%; implied %.1f GB/s." % (
                         r["model"], 100 * t["bw_fraction"], "met" if t["bw_fraction"] >= 0.8 else "MISSED",
                         100 * t["bw_fraction_with_kv"], t["implied_gbps"]))
        if t.get("long_over_512"):
            L.append("- %s: tfm decode at %d tokens of context is %.2fx its decode after 512 (target <= 1.5x: %s)%s." % (
                r["model"], report["long"], t["long_over_512"], "met" if t["long_over_512"] <= 1.5 else "MISSED",
                " (measured on %s)" % r["long"]["model"] if r.get("long", {}).get("model") != r["model"] else ""))
        if "first_token_agrees" in r:
            L.append("- %s: tfm's first greedy token after the 512-token prompt %s PyTorch's." % (
                r["model"], "equals" if r["first_token_agrees"] else "DIFFERS FROM"))
        if r.get("ort_error"):
            L.append("- %s: ONNX Runtime: %s" % (r["model"], r["ort_error"].strip().splitlines()[-1][:300]))
    for n in report.get("notes", []):
        L.append("- " + n)
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--models", default=None, help="gpt2,llama1b (default: both; --quick: gpt2)")
    ap.add_argument("--peers", default="tfm,llama,torch,ort")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=None, help="rounds (default 3; --quick 2)")
    ap.add_argument("--decode", type=int, default=128, help="decode steps after the 512-token prompt")
    ap.add_argument("--long", type=int, default=4096, help="context for the long decode (0: skip)")
    ap.add_argument("--long-decode", type=int, default=32)
    ap.add_argument("--no-long-llama", dest="long_llama", action="store_false",
                    help="skip llama.cpp at --long context (its 1B prefill of 4096 takes ~1 min)")
    ap.add_argument("--long-torch", action="store_true", help="PyTorch at --long context for the 1B model too")
    ap.add_argument("--ort-llama", action="store_true", help="ONNX Runtime for the 1B model too (exports 5 GB)")
    ap.add_argument("--llama-fa", default="auto", choices=["auto", "on", "off"])
    ap.add_argument("--llama-kv", default="f16", choices=["f16", "f32"],
                    help="llama.cpp's KV-cache type (default f16, llama.cpp's own default)")
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build", "bin", "tfmc"))
    ap.add_argument("--work", default="/tmp/tfm-genbench")
    ap.add_argument("--json", default=None, help="default: WORK/generate.json")
    ap.add_argument("--md", default=None, help="default: WORK/generate.md")
    ap.add_argument("--quiet-below", type=float, default=0.15)
    ap.add_argument("--quiet-wait", type=float, default=60)
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--membw-reps", type=int, default=10)
    args = ap.parse_args()
    global LLAMA_KV
    LLAMA_KV = args.llama_kv
    print("# peer settings: llama.cpp --kv %s --fa %s (its defaults: f16, auto = on), threads %d; "
          "ONNX Runtime intraOpNumThreads %d, graphOptimizationLevel all; PyTorch "
          "OMP_WAIT_POLICY=PASSIVE" % (args.llama_kv, args.llama_fa, args.threads, args.threads),
          flush=True)
    args.models = (args.models or ("gpt2" if args.quick else "gpt2,llama1b")).split(",")
    args.peers = args.peers.split(",")
    if args.reps is None:
        args.reps = 2 if args.quick else 3
    if args.quick:
        args.membw_reps = 5
        args.long_decode = 16
    work = args.work
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(args.threads)
    if "llama" in args.peers and not os.path.exists(os.path.join(PEER_DIR, "build", "llama_bench")):
        sys.exit("llama.cpp peer not built: run %s/setup.sh" % PEER_DIR)
    quiet = Quiet(args.quiet_below, args.quiet_wait, args.retries)
    t_start = time.monotonic()
    tfm_build = {}
    if "tfm" in args.peers:
        # A snapshot of tfmc and its runtime (tfmc links ../lib/libtfm_*.a): the build
        # folder may be rebuilt while this runs.
        snap = os.path.join(work, "tfm-snapshot")
        src_bin = os.path.dirname(os.path.abspath(args.tfmc))
        src_lib = os.path.join(os.path.dirname(src_bin), "lib")
        for d in ("bin", "lib"):
            os.makedirs(os.path.join(snap, d), exist_ok=True)
        for src, dst in [(args.tfmc, "bin/tfmc")] + [(os.path.join(src_lib, f), "lib/" + f) for f in
                                                     ("libtfm_runtime.a", "libtfm_tokenizer.a", "tfm_main.o")]:
            shutil.copy2(src, os.path.join(snap, dst))
            tfm_build[dst] = datetime.datetime.fromtimestamp(os.path.getmtime(src)).isoformat(timespec="seconds")
        args.tfmc = os.path.join(snap, "bin", "tfmc")

    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "threads": args.threads, "llama_kv": args.llama_kv, "llama_fa": args.llama_fa,
              "long": args.long, "cpu": cpu_info(), "host": platform.node(), "quick": args.quick,
              "torch": torch.__version__, "args": {k: v for k, v in vars(args).items()}, "models": [],
              "notes": [], "tfm_build_mtimes": tfm_build}
    try:
        report["tfm_commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                              capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    log("CPU: %s; load %s" % (report["cpu"]["model"], open("/proc/loadavg").read().strip()))
    bw = membw(work, args.membw_reps, quiet)
    report["membw"] = bw
    log("membw: %s" % json.dumps(bw["gbps"]))
    report["bw_gbps"] = max(bw["gbps"][str(args.threads)]["read"], bw["gbps"]["1"]["read"])
    report["bw_source"] = "membw read, best of 1 and %d threads" % args.threads

    for name in args.models:
        if name == "gpt2":
            m = make_model("gpt2", "gpt2", None, work)
            lm = make_model("gpt2", "gpt2-c4608", 4608, work) if args.long else None
        elif name == "llama1b":
            m = make_model("llama1b", "llama1b", args.long + 512 if args.long > 2048 else None, work)
            lm = m
        else:
            sys.exit("unknown model " + name)
        r = bench_model(m, args, quiet, work, report, long_model=lm)
        report["models"].append(r)
        with open((args.json or os.path.join(work, "generate.json")) + ".partial", "w") as f:
            json.dump(report, f, indent=1, default=float)  # raw rounds so far, in case of a kill
    report["gpt2_long_note"] = ("GPT-2 has 1024 learned positions; its decode at %d is measured on gpt2-c4608 "
                                "(the same model with 4608 positions)" % args.long)
    if "ort" in args.peers:
        report["notes"].append("ONNX Runtime runs the plain past/present graph: the whole KV cache leaves and "
                               "re-enters the session every step (no IO binding in onnxruntime-node for CPU); "
                               "not run at %d context." % args.long)
    # membw again at the end: the bandwidth limit is the best of both (the box is shared; a
    # contaminated probe underestimates the limit and flatters the fractions)
    bw2 = membw(work, args.membw_reps, quiet)
    report["membw_end"] = bw2
    log("membw (end): %s" % json.dumps(bw2["gbps"]))
    best2 = max(bw2["gbps"][str(args.threads)]["read"], bw2["gbps"]["1"]["read"])
    report["notes"].append("membw read %.1f GB/s at the start (foreign_cores %.2f), %.1f at the end (%.2f); "
                           "the limits use the larger" % (report["bw_gbps"], bw["foreign_cores"], best2,
                                                           bw2["foreign_cores"]))
    if best2 > report["bw_gbps"]:
        report["bw_gbps"] = best2
        report["bw_source"] = "membw read at the end, best of 1 and %d threads" % args.threads
    for r in report["models"]:
        r["summary"] = summarize(r, report["bw_gbps"])
        # a decode may imply more bandwidth than membw measured (contaminated probe): say so
        for p in ("llama", "tfm", "torch", "ort"):
            g = r["summary"].get(p, {}).get("implied_gbps")
            if g and g > report["bw_gbps"]:
                report["notes"].append("%s's %s decode implies %.1f GB/s, above membw's %.1f GB/s" % (
                    p, r["model"], g, report["bw_gbps"]))
    report["waited_for_quiet_s"] = round(quiet.waited_total, 1)
    report["runtime_s"] = round(time.monotonic() - t_start, 1)
    report["notes"].append("runtime %.0f s, of which %.0f s waiting for a quiet machine; load at the end: %s" % (
        report["runtime_s"], quiet.waited_total, open("/proc/loadavg").read().strip()))
    js = args.json or os.path.join(work, "generate.json")
    md = args.md or os.path.join(work, "generate.md")
    with open(js, "w") as f:
        json.dump(report, f, indent=1, default=float)
    text = markdown(report)
    with open(md, "w") as f:
        f.write(text)
    print(text)
    log("wrote %s and %s" % (md, js))


if __name__ == "__main__":
    main()
