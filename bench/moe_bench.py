#!/usr/bin/python3
"""Mixture of experts (issue 28, item 6): prefill tokens/s and decode ms/token of a
Qwen3-30B-A3B-shaped model (peers/llama's `qwen3moe` preset: 12 layers, d 1024, 16 / 4 heads of
64, q/k norms, 64 experts of 512, top 8, renormalized, vocab 32000, untied head; 1.3 B parameters,
249 M active), batch 1, random weights, tfm against llama.cpp measured in the same run:

  tfm f32                      against llama.cpp F32  GGUF
  tfm --quantize=int8          against llama.cpp Q8_0 GGUF (without AVX512_VNNI tfm's int8 build
                               keeps f32 weights, with a warning; the report says which it was)

usage: /usr/bin/python3 bench/moe_bench.py [--model qwen3moe] [--threads 2] [--reps 3]
         [--decode 64] [--peers tfm,llama] [--variants f32,int8] [--work DIR]
         [--tfm-source auto|import|canonical] [--no-check] [--quiet-below 0.15]
         [--quiet-wait 60] [--retries 2] [--wait-budget 600] [--json OUT] [--md OUT]
       /usr/bin/python3 bench/moe_bench.py --from-json WORK/moe.json   (the tables again)

  --model qwen3moe-tiny   the correctness check alone on the tiny preset (seconds)
  default                 check + 3 rounds: ~12 min on a quiet box (each tfm process loads 5.2 GB)

Models come from ../shared/peers/llama/make_gguf.py (its setup.sh must have been run):
`--model qwen3moe --dtype f32,q8_0 --hf --out WORK/models` writes the GGUF files for llama.cpp and
the very same weights as a Hugging Face folder (qwen3_moe, three shards). tfm reads that folder:
with `--tfm-source import` (or `auto` where `tfmc import` knows qwen3_moe) through
`tfmc import FOLDER -o MODEL.tfm`, whose `checkpoint = huggingface(type = qwen3_moe)` reads the
shards as they are; with `canonical` (`auto`'s fallback) through a description written here from
config.json (write_tfm) and a safetensors file under tfm's canonical names, the experts stacked
(convert_hf: `mlp.experts.e.{gate,up,down}_proj` -> `ffn.experts.{gate,up,down}.weight`
[E, F, D] / [E, D, F]), written once under WORK/models.

Correctness, before the timings (--no-check skips it): tfm's logits for P + 1 = 129 prompt tokens
(one forward, every position) against llama.cpp's with `--kv f32 --fa off` (which matches the
PyTorch reference to 5e-7, peers/llama/README.md) at positions P-1 and P, and, on the tiny preset,
against ../shared/peers/llama/ref_moe.py's float64 forward at every position plus 32 greedy tokens
of tfm's KV-cache generation (each generated token = the reference's argmax with tfm's tokens as
the prefix). rel = max |diff| / max |ref| per position.

Measurements (batch 1, --threads threads, prompt token(i) = (1 + 7919 i) % vocab for every peer):
  prefill P=128, P=512    tokens/s of one prefill (last position's logits)
  decode after 128 / 512  median ms/token of --decode single-token steps after the P-token prompt
Rounds interleave the peers (tfm f32, llama.cpp F32, tfm int8, llama.cpp Q8_0 in each round;
where `--quantize=int8` writes the very same executable as the f32 build, as on a CPU without
AVX512_VNNI, it is measured once and its row repeats the f32 figures); each figure is the median
over the rounds whose measurement had foreign_cores below --quiet-below (over all rounds, marked
contaminated, where none had), with the count of those beside it. tfm: one process per (variant, P) measurement
(`--bench-generate`: the prefill, then --decode steps); llama.cpp: bench/../peers' llama_bench,
one process per (dtype, round) with `-p 128,512 -n DECODE -r 1 --warmup 1`, its DEFAULT settings
(`--kv f16 --fa auto`; auto = on on this CPU) unless --llama-kv / --llama-fa say otherwise.

Contamination: as generate_bench.py (its Quiet class): before each measurement wait (up to
--quiet-wait s) for other processes to use less than --quiet-below cores, record
`foreign_cores` over the measurement, measure again (up to --retries times) if it was above,
keep the least contaminated. --wait-budget bounds the total waiting of the whole run: past it,
measurements are taken at once and not repeated, and every figure carries its foreign_cores.

Bytes per decode token: every weight a decode step reads, from the files' own tensor types:
everything but the token embedding (one row), the expert stacks at K/E = 8/64 (the chosen
experts), router, norms and LM head in full. The implied bandwidth is bytes / decode time,
against bench/membw.c's read bandwidth measured at the start and at the end of the run (the larger).
"""
import argparse
import datetime
import filecmp
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate_bench as gb  # noqa: E402  (Quiet, membw, cpu_info, llama_run, log, ...)
import numpy as np  # noqa: E402

ROOT = gb.ROOT
PEER_DIR = gb.PEER_DIR
log = gb.log

TARGETS = {"decode_vs_llama": 1.0, "prefill_vs_llama": 1.5}


# ---------------------------------------------------------------------------------------------
# files
def read_st_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h, 8 + n


def hf_tensors(folder):
    """name -> (file, dtype, shape, absolute byte offset, nbytes) over the folder's shards"""
    idx = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) \
        else ["model.safetensors"]
    out = {}
    for fn in files:
        path = os.path.join(folder, fn)
        h, base = read_st_header(path)
        for name, e in h.items():
            b0, b1 = e["data_offsets"]
            out[name] = (path, e["dtype"], e["shape"], base + b0, b1 - b0)
    return out


GGML_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 8: ("Q8_0", 32, 34), 12: ("Q4_K", 256, 144),
              14: ("Q6_K", 256, 210), 30: ("BF16", 1, 2)}


def gguf_tensors(path):
    """name -> (type name, numpy-order shape, bytes) from a GGUF file's tensor table"""
    with open(path, "rb") as f:
        data = f.read(16 << 20)  # the header and tensor table (vocab strings included) fit

    pos = 0

    def rd(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def rstr():
        nonlocal pos
        n = rd("Q")
        s = data[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s
    sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def rval(t):
        if t == 8:
            return rstr()
        if t == 9:
            et, n = rd("I"), rd("Q")
            return [rval(et) for _ in range(n)]
        return rd(sizes[t])
    assert data[:4] == b"GGUF", path
    pos = 4
    rd("I")
    nt, nkv = rd("Q"), rd("Q")
    for _ in range(nkv):
        rstr()
        rval(rd("I"))
    out = {}
    for _ in range(nt):
        name = rstr()
        nd = rd("I")
        ne = [rd("Q") for _ in range(nd)]
        t = rd("I")
        rd("Q")
        tn, blk, bb = GGML_TYPES[t]
        n = int(np.prod(ne))
        out[name] = (tn, ne[::-1], n // blk * bb)
    return out


def decode_bytes_gguf(path, K, E):
    """bytes one decode step reads from the GGUF's weights: the embedding one row, experts K/E"""
    total, by_type = 0, {}
    for name, (tn, shape, nb) in gguf_tensors(path).items():
        if name == "token_embd.weight":
            nb = nb // shape[0]
        elif "_exps." in name:
            nb = nb * K // E
        total += nb
        by_type[tn] = by_type.get(tn, 0) + nb
    return total, by_type


# ---------------------------------------------------------------------------------------------
# models
def make_models(preset, work):
    out = os.path.join(work, "models")
    need = [os.path.join(out, preset + "-f32.gguf"), os.path.join(out, preset + "-f32-hf", "config.json"),
            os.path.join(out, preset + "-q8_0.gguf")]
    if not all(os.path.exists(p) for p in need):
        log("make_gguf.py --model %s --dtype f32,q8_0 --hf --out %s (qwen3moe: ~3 min, 12 GB)" % (preset, out))
        subprocess.run(["/usr/bin/python3", "make_gguf.py", "--model", preset, "--dtype", "f32,q8_0", "--hf",
                        "--out", out], cwd=PEER_DIR, check=True, stdout=subprocess.DEVNULL)
    return dict(name=preset, f32_gguf=need[0], hf=os.path.dirname(need[1]), q8_gguf=need[2],
                cfg=json.load(open(need[1])))


def write_tfm(cfg, path, name, folder):
    """tfm's description of a qwen3_moe config.json, key by key (modeling_qwen3_moe.py)"""
    assert cfg["model_type"] == "qwen3_moe", cfg["model_type"]
    if cfg.get("rope_scaling"):
        raise ValueError("rope_scaling is not handled here")
    sparse_every = cfg.get("decoder_sparse_step", 1)
    if cfg.get("mlp_only_layers"):
        raise ValueError("mlp_only_layers is not handled here")
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    text = """# Written by bench/moe_bench.py from %(folder)s/config.json (model_type qwen3_moe);
# weights: the canonical safetensors convert_hf() writes beside it.
model %(name)s {
  arch    = decoder
  vocab   = %(vocab)d
  context = %(ctx)d
  d_model = %(d)d
  layers  = %(L)d
  dtype   = f32
  embedding { position = rope(theta = %(theta)r, style = half); tie_output = %(tie)s }
  attention { heads = %(H)d; kv_heads = %(KV)d; head_dim = %(hd)d; qk_norm = true; bias = %(abias)s }
  ffn       { hidden = %(inter)d; activation = swiglu; bias = false
              experts = %(E)d; experts_per_token = %(K)d; expert_hidden = %(F)d; normalize = %(norm)s%(sparse)s }
  norm      { kind = rmsnorm; placement = pre; eps = %(eps)r }
}
""" % dict(folder=folder, name=name.replace("-", "_"),
           vocab=cfg["vocab_size"], ctx=cfg["max_position_embeddings"], d=cfg["hidden_size"],
           L=cfg["num_hidden_layers"], theta=float(cfg.get("rope_theta", 10000.0)),
           tie="true" if cfg.get("tie_word_embeddings") else "false", H=cfg["num_attention_heads"],
           KV=cfg.get("num_key_value_heads") or cfg["num_attention_heads"], hd=hd,
           abias="true" if cfg.get("attention_bias") else "false", inter=cfg["intermediate_size"],
           E=cfg["num_experts"], K=cfg["num_experts_per_tok"], F=cfg["moe_intermediate_size"],
           norm="true" if cfg.get("norm_topk_prob") else "false",
           sparse="; sparse_every = %d" % sparse_every if sparse_every != 1 else "", eps=cfg["rms_norm_eps"])
    with open(path, "w") as f:
        f.write(text)


def canonical_plan(cfg, src):
    """[(canonical name, shape, [(file, offset, nbytes), ...])] in the order tfmc lists them"""
    L, E = cfg["num_hidden_layers"], cfg["num_experts"]
    plan = []

    def one(cn, hn):
        path, dt, shape, off, nb = src[hn]
        assert dt == "F32", (hn, dt)
        plan.append((cn, shape, [(path, off, nb)]))

    def stack(cn, fmt):
        parts = [src[fmt % e] for e in range(E)]
        assert all(p[1] == "F32" and p[2] == parts[0][2] for p in parts), cn
        plan.append((cn, [E] + parts[0][2], [(p[0], p[3], p[4]) for p in parts]))
    one("embed.tokens.weight", "model.embed_tokens.weight")
    for i in range(L):
        p, q = "model.layers.%d." % i, "layers.%d." % i
        one(q + "attn_norm.weight", p + "input_layernorm.weight")
        for x in "qkvo":
            one(q + "attn.%s.weight" % x, p + "self_attn.%s_proj.weight" % x)
        one(q + "attn.q_norm.weight", p + "self_attn.q_norm.weight")
        one(q + "attn.k_norm.weight", p + "self_attn.k_norm.weight")
        one(q + "ffn_norm.weight", p + "post_attention_layernorm.weight")
        one(q + "ffn.router.weight", p + "mlp.gate.weight")
        for x in ("up", "gate", "down"):
            stack(q + "ffn.experts.%s.weight" % x, p + "mlp.experts.%d." + x + "_proj.weight")
    one("final_norm.weight", "model.norm.weight")
    if not cfg.get("tie_word_embeddings"):
        one("lm_head.weight", "lm_head.weight")
    return plan


def convert_hf(folder, out):
    """the HF folder's tensors under tfm's canonical names, experts stacked, one safetensors file
    (streamed: never more than one expert tensor in memory)"""
    cfg = json.load(open(os.path.join(folder, "config.json")))
    plan = canonical_plan(cfg, hf_tensors(folder))
    header, off = {}, 0
    for cn, shape, parts in plan:
        nb = sum(p[2] for p in parts)
        header[cn] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + nb]}
        off += nb
    header["__metadata__"] = {"source": "bench/moe_bench.py convert_hf(%s)" % folder}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    tmp = out + ".tmp"
    files = {}
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for cn, shape, parts in plan:
            for path, o, nb in parts:
                src = files.get(path) or files.setdefault(path, open(path, "rb"))
                src.seek(o)
                while nb:
                    chunk = src.read(min(nb, 64 << 20))
                    f.write(chunk)
                    nb -= len(chunk)
    for s in files.values():
        s.close()
    os.replace(tmp, out)


def tfm_model(m, tfmc, work, source):
    """(the .tfm, the --weights path, how): tfmc import where it knows qwen3_moe, else canonical"""
    d = os.path.join(work, "models")
    name = m["name"]
    if source in ("auto", "import"):
        path = os.path.join(d, name + "-import.tfm")
        r = subprocess.run([tfmc, "import", m["hf"], "-o", path], capture_output=True, text=True)
        if r.returncode == 0:
            return path, m["hf"], "tfmc import %s (checkpoint = huggingface(type = qwen3_moe))" % m["hf"]
        msg = (r.stderr or r.stdout).strip().splitlines()
        if source == "import":
            sys.exit("tfmc import failed: %s" % "\n".join(msg[-5:]))
        log("tfmc import: %s; writing the canonical description and weights instead" % (msg[-1] if msg else "?"))
        m.setdefault("notes", []).append("tfmc import did not take the folder (%s): hand-written description "
                                         "and canonical weights" % (msg[-1][:160] if msg else "?"))
    path = os.path.join(d, name + "-f32.tfm")
    st = os.path.join(d, name + "-f32.safetensors")
    write_tfm(m["cfg"], path, name, m["hf"])
    if not os.path.exists(st) or os.path.getmtime(st) < os.path.getmtime(os.path.join(m["hf"], "config.json")):
        log("converting %s -> %s" % (m["hf"], st))
        t0 = time.perf_counter()
        convert_hf(m["hf"], st)
        log("  %.0f s" % (time.perf_counter() - t0))
    return path, st, "hand-written .tfm (bench/moe_bench.py write_tfm) + canonical safetensors (convert_hf)"


def tfm_compile(tfmc, src, exe, quantize):
    cmd = [tfmc, src, "-o", exe] + (["--quantize=int8"] if quantize else [])
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("tfmc failed: " + r.stderr[-1500:])
    return time.perf_counter() - t0, [x for x in r.stderr.splitlines() if "warning" in x]


def tok_ids(P, vocab):
    return np.array([[gb.tok_at(i, vocab) for i in range(P)]], dtype=np.int32)


def tfm_run(exe, weights, vocab, P, N, threads, work):
    tpath = os.path.join(work, "moe-tokens-%d-%d.npy" % (vocab, P))
    if not os.path.exists(tpath):
        np.save(tpath, tok_ids(P, vocab))
    out = os.path.join(work, "moe-ids.npy")
    t0 = time.perf_counter()
    r = subprocess.run([exe, "--weights", weights, "--input", "tokens=" + tpath, "--generate", str(N + 1),
                        "--bench-generate", "--threads", str(threads), "--output", out],
                       capture_output=True, text=True, env=gb.tfm_env())
    wall = time.perf_counter() - t0
    g = gb.GEN_RE.search(r.stderr)
    if r.returncode or not g:
        raise RuntimeError("tfm failed (rc %d): %s" % (r.returncode, r.stderr[-800:]))
    res = dict(prefill_ms=float(g.group(3)), process_s=round(wall, 2))
    if N > 0:
        res["decode_ms"] = float(g.group(6))
    return res


# ---------------------------------------------------------------------------------------------
# correctness
def rel_rows(got, ref):
    return np.abs(got - ref).max(-1) / np.abs(ref).max(-1)


def check(m, exe, weights, threads, work, tiny):
    """tfm's logits vs llama.cpp (--kv f32 --fa off) at P-1, P; on tiny models also vs ref_moe.py"""
    vocab, P = m["cfg"]["vocab_size"], 128
    toks = tok_ids(P + 1, vocab)
    tpath = os.path.join(work, "moe-check-tokens.npy")
    np.save(tpath, toks)
    lg = os.path.join(work, "moe-check-tfm.npy")
    r = subprocess.run([exe, "--weights", weights, "--input", "tokens=" + tpath, "--threads", str(threads),
                        "--output", lg], capture_output=True, text=True, env=gb.tfm_env())
    if r.returncode:
        raise RuntimeError("tfm forward failed: " + r.stderr[-800:])
    tfm = np.load(lg)[0].astype(np.float64)  # [P+1, vocab]
    res = {}
    dump = os.path.join(work, "moe-check-llama.npy")
    r = subprocess.run([os.path.join(PEER_DIR, "build", "llama_bench"), "-m", m["f32_gguf"], "-t", str(threads),
                        "-p", str(P), "-n", "1", "-r", "1", "--kv", "f32", "--fa", "off", "--dump-logits", dump],
                       capture_output=True, text=True, cwd=PEER_DIR)
    if r.returncode:
        raise RuntimeError("llama_bench --dump-logits failed: " + r.stderr[-800:])
    lt = np.load(dump[:-4] + ".tokens.npy").reshape(-1)
    assert (lt == toks[0]).all(), "llama_bench's tokens differ from tfm's"
    ll = np.load(dump).astype(np.float64)
    rr = rel_rows(tfm[[P - 1, P]], ll)
    res["vs_llama_f32"] = dict(rel_p_minus_1=float(rr[0]), rel_p=float(rr[1]),
                               argmax_same=int((tfm[[P - 1, P]].argmax(-1) == ll.argmax(-1)).sum()),
                               settings="--kv f32 --fa off")
    log("  check: tfm vs llama.cpp (KV f32, FA off) rel %.2e / %.2e at P-1 / P, top token %d/2" % (
        rr[0], rr[1], res["vs_llama_f32"]["argmax_same"]))
    if tiny:
        sys.path.insert(0, PEER_DIR)
        import ref_moe
        import torch
        cfg, tensors = ref_moe.load_hf(m["hf"])
        W = ref_moe.Weights(tensors, torch.float64)
        with torch.no_grad():
            ref = ref_moe.forward(cfg, W, toks[0], list(range(P + 1)), ref_moe.Moe()).numpy()
        rr = rel_rows(tfm, ref)
        res["vs_ref_moe"] = dict(rel_max=float(rr.max()), rel_median=float(np.median(rr)), worst_pos=int(rr.argmax()),
                                 argmax_same="%d/%d" % ((tfm.argmax(-1) == ref.argmax(-1)).sum(), P + 1))
        log("  check: tfm vs ref_moe.py (f64), all %d positions: rel max %.2e (median %.2e), top token %s" % (
            P + 1, rr.max(), np.median(rr), res["vs_ref_moe"]["argmax_same"]))
        # greedy generation through tfm's KV cache vs the reference's argmax on tfm's prefix
        G = 32
        ids = os.path.join(work, "moe-check-ids.npy")
        glg = os.path.join(work, "moe-check-glogits.npy")
        tp = os.path.join(work, "moe-check-prompt.npy")
        np.save(tp, toks[:, :P])
        r = subprocess.run([exe, "--weights", weights, "--input", "tokens=" + tp, "--threads", str(threads),
                            "--generate", str(G), "--output", ids, "--logits", glg],
                           capture_output=True, text=True, env=gb.tfm_env())
        if r.returncode:
            raise RuntimeError("tfm --generate failed: " + r.stderr[-800:])
        gen = np.load(ids).reshape(-1)[-G:]
        seq = np.concatenate([toks[0, :P], gen])
        with torch.no_grad():
            ref = ref_moe.forward(cfg, W, seq, list(range(P - 1, P + G - 1)), ref_moe.Moe()).numpy()
        same = int((ref.argmax(-1) == gen).sum())
        gl = np.load(glg).reshape(G, -1).astype(np.float64)
        rg = rel_rows(gl, ref)
        res["greedy"] = dict(tokens=G, same=same, rel_max=float(rg.max()))
        log("  check: %d greedy tokens (tfm KV cache): %d equal the reference's argmax; logits rel max %.2e" % (
            G, same, rg.max()))
    return res


# ---------------------------------------------------------------------------------------------
def run(args):
    work = args.work
    os.makedirs(work, exist_ok=True)
    if "llama" in args.peers and not os.path.exists(os.path.join(PEER_DIR, "build", "llama_bench")):
        sys.exit("llama.cpp peer not built: run %s/setup.sh" % PEER_DIR)
    gb.LLAMA_KV = args.llama_kv
    quiet = gb.Quiet(args.quiet_below, args.quiet_wait, args.retries)
    budget = {"left": args.wait_budget}
    wait_quiet = quiet.wait_quiet

    def bounded_wait():  # stop waiting for quiet once the run's waiting budget is spent
        if budget["left"] <= 0:
            if quiet.retries:  # a retry without a wait measures the same busy box again
                log("  the run's wait budget (%d s) is spent: measuring at once, no retries" % args.wait_budget)
                quiet.retries = 0
            return 0.0
        w0 = quiet.wait
        quiet.wait = min(quiet.wait, budget["left"])
        w = wait_quiet()
        quiet.wait = w0
        budget["left"] -= w
        return w
    quiet.wait_quiet = bounded_wait
    t_start = time.monotonic()
    tiny = args.model.endswith("-tiny")
    m = make_models(args.model, work)
    cfg = m["cfg"]
    K, E = cfg["num_experts_per_tok"], cfg["num_experts"]

    # a snapshot of tfmc and its runtime (the build folder may be rebuilt while this runs)
    snap = os.path.join(work, "tfm-snapshot-moe")
    src_bin = os.path.dirname(os.path.abspath(args.tfmc))
    src_lib = os.path.join(os.path.dirname(src_bin), "lib")
    tfm_build = {}
    for dd in ("bin", "lib"):
        os.makedirs(os.path.join(snap, dd), exist_ok=True)
    lock = None
    if os.path.exists(args.build_lock):  # the build folder's users build under this lock: copy between builds
        import fcntl
        lock = open(args.build_lock)
        t0 = time.monotonic()
        fcntl.flock(lock, fcntl.LOCK_EX)
        if time.monotonic() - t0 > 1:
            log("waited %.0f s for %s (a build was running)" % (time.monotonic() - t0, args.build_lock))
    for src, dst in [(args.tfmc, "bin/tfmc")] + [(os.path.join(src_lib, f), "lib/" + f) for f in
                                                 ("libtfm_runtime.a", "libtfm_tokenizer.a", "tfm_main.o")]:
        shutil.copy2(src, os.path.join(snap, dst))
        tfm_build[dst] = datetime.datetime.fromtimestamp(os.path.getmtime(src)).isoformat(timespec="seconds")
    if lock:
        lock.close()
    tfmc = os.path.join(snap, "bin", "tfmc")

    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "threads": args.threads,
              "llama_kv": args.llama_kv, "llama_fa": args.llama_fa, "model": m["name"], "cpu": gb.cpu_info(),
              "host": platform.node(), "args": vars(args), "tfm_build_mtimes": tfm_build, "notes": [],
              "config": {k: cfg[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                             "num_key_value_heads", "head_dim", "num_experts", "num_experts_per_tok",
                                             "moe_intermediate_size", "vocab_size") if k in cfg}}
    with open("/proc/cpuinfo") as f:
        flags = next((ln for ln in f if ln.startswith("flags")), "")
    report["cpu"]["avx512_flags"] = sorted({x for x in flags.split() if x.startswith("avx512")})
    report["cpu"]["vnni"] = "avx512_vnni" in flags.split()
    report["tfm_commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.split("\n")
    report["tfm_dirty_files"] = len([x for x in dirty if x.strip()])
    log("CPU: %s; AVX-512: %s; load %s" % (report["cpu"]["model"], " ".join(report["cpu"]["avx512_flags"]) or "none",
                                           open("/proc/loadavg").read().strip()))

    src, weights, how = tfm_model(m, tfmc, work, args.tfm_source)
    report["tfm_source"] = how
    report["notes"] += m.get("notes", [])
    exes = {}
    for v in args.variants:
        exe = os.path.join(work, "%s-%s-tfm" % (m["name"], v))
        cs, warns = tfm_compile(tfmc, src, exe, v == "int8")
        exes[v] = exe
        report["tfm_compile_s_" + v] = round(cs, 1)
        if warns:
            report["tfm_warnings_" + v] = warns
            log("  tfmc (%s): %s" % (v, " | ".join(warns)))
    report["tfm_measured_as"] = {}
    if "int8" in exes and "f32" in exes and filecmp.cmp(exes["int8"], exes["f32"], shallow=False):
        report["tfm_measured_as"]["int8"] = "f32"
        report["notes"].append("tfmc --quantize=int8 wrote the very same executable as without it (byte for byte) on "
                               "this CPU: the tfm int8 row repeats the tfm f32 measurements")
        log("  the int8 executable is the f32 one, byte for byte: measured once")
    if "int8" in exes and not report["cpu"]["vnni"]:
        report["notes"].append("this CPU has no AVX512_VNNI: tfm's --quantize=int8 build keeps f32 weights (tfmc: %s); "
                               "its figures are f32 figures, read 4 bytes a weight" % "; ".join(
                                   report.get("tfm_warnings_int8", ["no warning printed"]))[:400])

    # bytes per decode token
    by = {}
    by["f32"], by["f32_by_type"] = decode_bytes_gguf(m["f32_gguf"], K, E)
    by["q8_0"], by["q8_0_by_type"] = decode_bytes_gguf(m["q8_gguf"], K, E)
    by["tfm_int8"] = by["f32"] if not report["cpu"]["vnni"] else None
    nparams = sum(int(np.prod(s)) for _, s, _ in gguf_tensors(m["f32_gguf"]).values())
    report["params"] = nparams
    report["decode_bytes"] = by
    log("decode reads %.0f MB (F32) / %.0f MB (Q8_0) of weights a token" % (by["f32"] / 1e6, by["q8_0"] / 1e6))

    if not args.no_check and "tfm" in args.peers:
        log("[check] %s" % m["name"])
        report["check"] = check(m, exes.get("f32") or next(iter(exes.values())), weights, args.threads, work, tiny)
        if "int8" in exes and not report["cpu"]["vnni"]:
            # same f32 weights: its logits must be the f32 build's
            lg = os.path.join(work, "moe-check-int8.npy")
            r = subprocess.run([exes["int8"], "--weights", weights, "--input",
                                "tokens=" + os.path.join(work, "moe-check-tokens.npy"), "--threads",
                                str(args.threads), "--output", lg], capture_output=True, text=True, env=gb.tfm_env())
            if r.returncode == 0:
                a, b = np.load(lg), np.load(os.path.join(work, "moe-check-tfm.npy"))
                report["check"]["int8_build_vs_f32_build_max_abs"] = float(np.abs(a - b).max())
                log("  check: int8 build vs f32 build max |diff| %.3g" % report["check"][
                    "int8_build_vs_f32_build_max_abs"])
    if tiny:
        report["runtime_s"] = round(time.monotonic() - t_start, 1)
        return report

    bw = gb.membw(work, args.membw_reps, quiet)
    report["membw"] = bw
    log("membw: %s (foreign_cores %.2f)" % (json.dumps(bw["gbps"]), bw["foreign_cores"]))

    rounds = []
    llama_files = {"f32": m["f32_gguf"], "int8": m["q8_gguf"]}
    for rnd in range(args.reps):
        log("[%s] round %d/%d" % (m["name"], rnd + 1, args.reps))
        row = {}
        for v in args.variants:
            if "tfm" in args.peers and v not in report["tfm_measured_as"]:
                for P in (128, 512):
                    key = "tfm_%s_p%d" % (v, P)
                    row[key] = quiet.measure(lambda: tfm_run(exes[v], weights, cfg["vocab_size"], P, args.decode,
                                                             args.threads, work), key)
                    log("  tfm %-4s P=%d: prefill %.1f tok/s, decode %.2f ms/token (fc %.2f, %s s)" % (
                        v, P, P * 1e3 / row[key]["prefill_ms"], row[key]["decode_ms"], row[key]["foreign_cores"],
                        row[key]["process_s"]))
            if "llama" in args.peers:
                key = "llama_%s" % v
                lm = {"base": llama_files[v][:-5]}
                row[key] = quiet.measure(lambda: gb.llama_run(lm, [128, 512], args.decode, args.threads, 1,
                                                              args.llama_fa), key)
                x = row[key]
                log("  llama.cpp %s: prefill %.1f / %.1f tok/s, decode %.2f / %.2f ms/token (fc %.2f)" % (
                    "F32" if v == "f32" else "Q8_0", 128e3 / x["prefill_ms_128"], 512e3 / x["prefill_ms_512"],
                    x["decode_ms_128"], x["decode_ms_512"], x["foreign_cores"]))
        rounds.append(row)
        report["rounds"] = rounds
        with open((args.json or os.path.join(work, "moe.json")) + ".partial", "w") as f:
            json.dump(report, f, indent=1, default=float)

    bw2 = gb.membw(work, args.membw_reps, quiet)
    report["membw_end"] = bw2
    log("membw (end): %s (foreign_cores %.2f)" % (json.dumps(bw2["gbps"]), bw2["foreign_cores"]))
    t = str(args.threads)
    b1 = max(bw["gbps"][t]["read"], bw["gbps"]["1"]["read"])
    b2 = max(bw2["gbps"][t]["read"], bw2["gbps"]["1"]["read"])
    report["bw_gbps"] = max(b1, b2)
    report["notes"].append("membw read %.1f GB/s at the start (foreign_cores %.2f), %.1f at the end (%.2f); the "
                           "bandwidth figures use the larger" % (b1, bw["foreign_cores"], b2, bw2["foreign_cores"]))
    report["summary"] = summarize(report, args)
    report["waited_for_quiet_s"] = round(quiet.waited_total, 1)
    report["runtime_s"] = round(time.monotonic() - t_start, 1)
    report["notes"].append("runtime %.0f s, of which %.0f s waiting for a quiet machine (budget %d s); load at the "
                           "end: %s" % (report["runtime_s"], quiet.waited_total, args.wait_budget,
                                        open("/proc/loadavg").read().strip()))
    return report


def summarize(report, args):
    """medians over the rounds of the measurements taken with foreign_cores below --quiet-below
    (all of them, flagged, where none was); the count of those used beside each figure"""
    rounds = report["rounds"]
    by = report["decode_bytes"]
    bw = report["bw_gbps"]
    below = args.quiet_below
    s = {}

    def fc_of(x):
        return max(x["foreign_cores"], x.get("llama_foreign_cores", 0.0))

    def col(key, fields):
        ms = [r[key] for r in rounds if key in r]
        clean = [x for x in ms if fc_of(x) < below]
        use = clean or ms
        out = {f: (statistics.median([x[f] for x in use]) if use else None) for f in fields}
        out["n"] = "%d/%d" % (len(clean), len(ms))
        out["fc"] = max(fc_of(x) for x in use) if use else None
        out["contaminated"] = not clean
        return out
    for v in args.variants:
        tv = report.get("tfm_measured_as", {}).get(v, v)
        a = col("tfm_%s_p128" % tv, ["prefill_ms", "decode_ms"])
        b = col("tfm_%s_p512" % tv, ["prefill_ms", "decode_ms"])
        t = dict(p128=a["prefill_ms"], d128=a["decode_ms"], p512=b["prefill_ms"], d512=b["decode_ms"],
                 n="%s, %s" % (a["n"], b["n"]), fc=max(x for x in (a["fc"], b["fc"]) if x is not None)
                 if a["fc"] is not None else None, contaminated=a["contaminated"] or b["contaminated"],
                 bytes=by["f32"] if v == "f32" or by.get("tfm_int8") else None)
        c = col("llama_%s" % v, ["prefill_ms_128", "prefill_ms_512", "decode_ms_128", "decode_ms_512"])
        ll = dict(p128=c["prefill_ms_128"], p512=c["prefill_ms_512"], d128=c["decode_ms_128"],
                  d512=c["decode_ms_512"], n=c["n"], fc=c["fc"], contaminated=c["contaminated"],
                  bytes=by["f32"] if v == "f32" else by["q8_0"])
        for x in (t, ll):
            if x["bytes"]:
                for d in ("d128", "d512"):
                    if x[d]:
                        x["gbps_" + d] = x["bytes"] / (x[d] * 1e-3) / 1e9
                        x["bw_frac_" + d] = x["gbps_" + d] / bw
        ratio = {}
        if t["p128"] and ll["p128"]:
            ratio = dict(prefill128=ll["p128"] / t["p128"], prefill512=ll["p512"] / t["p512"],
                         decode128=ll["d128"] / t["d128"], decode512=ll["d512"] / t["d512"])
        s[v] = dict(tfm=t, llama=ll, speedup=ratio)
    return s


fmt = gb.fmt


def markdown(report):
    L = []
    c = report["cpu"]
    cf = report["config"]
    L.append("### Mixture of experts, qwen3moe, batch 1, %d threads, random weights (%s, `bench/moe_bench.py`)" % (
        report["threads"], report["date"]))
    L.append("")
    L.append("Model: peers/llama's `qwen3moe` preset (Qwen3-30B-A3B's shape scaled down): %d layers, d %d, %d / %d "
             "heads of %d with q/k norms, %d experts of %d, top %d renormalized, vocab %d, untied head; %.1f M "
             "parameters. tfm reads it through %s." % (
                 cf["num_hidden_layers"], cf["hidden_size"], cf["num_attention_heads"], cf["num_key_value_heads"],
                 cf.get("head_dim", 0), cf["num_experts"], cf["moe_intermediate_size"], cf["num_experts_per_tok"],
                 cf["vocab_size"], report["params"] / 1e6, report["tfm_source"]))
    L.append("")
    L.append("CPU: %s (family %s model %s, %s CPUs, L3 %s, %s), %s GB RAM; AVX-512: %s. tfm commit %s, tfmc built %s." % (
        c["model"], c["family"], c["model_no"], c["cpus"], c["l3"], c["hypervisor"] or "bare metal", c["mem_gb"],
        ", ".join(c["avx512_flags"]) or "none (AVX2 only)", report.get("tfm_commit", "?") + (
            " + uncommitted changes in %d files" % report["tfm_dirty_files"] if report.get("tfm_dirty_files") else ""),
        report["tfm_build_mtimes"].get("bin/tfmc")))
    if "membw" in report:
        b, b2 = report["membw"], report["membw_end"]
        L.append("Memory bandwidth (bench/membw.c read, 2 threads / 1 thread): %.1f / %.1f GB/s at the start "
                 "(foreign_cores %.2f), %.1f / %.1f at the end (%.2f); the bandwidth fractions use %.1f GB/s." % (
                     b["gbps"]["2"]["read"], b["gbps"]["1"]["read"], b["foreign_cores"], b2["gbps"]["2"]["read"],
                     b2["gbps"]["1"]["read"], b2["foreign_cores"], report["bw_gbps"]))
    L.append("")
    L.append("Peer settings: llama.cpp v0.5.0 (`../shared/peers/llama`, `llama_bench -t %d -p 128,512 -n %d -r 1 "
             "--warmup 1 --kv %s --fa %s`: its defaults, F16 KV cache and flash attention auto = on), one process per "
             "round and dtype; tfm one process per measurement (`--bench-generate --threads %d`), F32 KV cache. "
             "%d interleaved rounds; each figure is the median over the rounds whose measurement had foreign_cores "
             "below %.2f (the column *quiet measurements used* counts them: for tfm the P=128 and the P=512 "
             "process; where none was quiet, all rounds, marked contaminated); decode = median ms/token of %d "
             "steps after the prompt." % (
                 report["threads"], report["args"]["decode"], report["llama_kv"], report["llama_fa"],
                 report["threads"], report["args"]["reps"], report["args"]["quiet_below"], report["args"]["decode"]))
    banner = next((r[k]["banner"] for r in report.get("rounds", []) for k in r if k.startswith("llama_")
                   and r[k].get("banner")), "")
    if banner:
        L.append("llama.cpp's banner: `%s` (the CPU backend ggml chose for this CPU)." % banner.lstrip("# ").split(
            " libdir=")[0])
    L.append("")
    ck = report.get("check")
    if ck:
        x = ck["vs_llama_f32"]
        L.append("Correctness: tfm's logits against llama.cpp's (`--kv f32 --fa off`) after 128 prompt tokens: rel "
                 "%.1e (position P-1) / %.1e (P), top token %d of 2 the same." % (
                     x["rel_p_minus_1"], x["rel_p"], x["argmax_same"]))
        if "int8_build_vs_f32_build_max_abs" in ck:
            L.append("The `--quantize=int8` build's logits differ from the f32 build's by at most %.2g." %
                     ck["int8_build_vs_f32_build_max_abs"])
        L.append("")
    L.append("| weights | peer | prefill 128 tok/s | prefill 512 tok/s | decode after 128 ms/token | decode after 512 "
             "ms/token | bytes read / token | implied GB/s (after 128 / 512) | of membw read | quiet measurements "
             "used | max foreign_cores |")
    L.append("|---|---|---:|---:|---:|---:|---:|---|---|---|---:|")
    s = report["summary"]
    names = {"f32": ("tfm f32", "llama.cpp F32"), "int8": ("tfm `--quantize=int8`%s" % (
        " (f32 weights: no AVX512_VNNI)" if not c.get("vnni") else ""), "llama.cpp Q8_0")}
    for v, r in s.items():
        for who, x in (("tfm", r["tfm"]), ("llama", r["llama"])):
            nm = names[v][0 if who == "tfm" else 1]
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s%s |" % (
                "F32" if v == "f32" else "8-bit", nm, fmt(x["p128"] and 128e3 / x["p128"]),
                fmt(x["p512"] and 512e3 / x["p512"]), fmt(x["d128"], "%.2f"), fmt(x["d512"], "%.2f"),
                "%.0f MB" % (x["bytes"] / 1e6) if x["bytes"] else "—",
                "%s / %s" % (fmt(x.get("gbps_d128")), fmt(x.get("gbps_d512"))),
                "%s / %s" % (fmt(x.get("bw_frac_d128") and 100 * x["bw_frac_d128"], "%.0f%%"),
                             fmt(x.get("bw_frac_d512") and 100 * x["bw_frac_d512"], "%.0f%%")),
                x["n"], fmt(x["fc"], "%.2f"), " (contaminated)" if x["contaminated"] else ""))
    L.append("")
    L.append("tfm against llama.cpp (llama.cpp time / tfm time; > 1: tfm faster) and the issue's targets "
             "(decode no slower: >= 1.0; prefill at least 1.5x):")
    L.append("")
    L.append("| weights | prefill 128 | prefill 512 | decode after 128 | decode after 512 | targets |")
    L.append("|---|---:|---:|---:|---:|---|")
    for v, r in s.items():
        q = r["speedup"]
        if not q:
            continue
        okp = min(q["prefill128"], q["prefill512"]) >= TARGETS["prefill_vs_llama"]
        okd = min(q["decode128"], q["decode512"]) >= TARGETS["decode_vs_llama"]
        L.append("| %s | %.2fx | %.2fx | %.2fx | %.2fx | prefill >= 1.5x: %s; decode no slower: %s |" % (
            names[v][0] + " vs " + names[v][1], q["prefill128"], q["prefill512"], q["decode128"], q["decode512"],
            "met" if okp else "MISSED", "met" if okd else "MISSED"))
    L.append("")
    by = report["decode_bytes"]
    L.append("- Bytes a decode token reads (weights; the KV cache adds %.1f MB at 512 tokens for tfm's F32 cache): "
             "F32 %.0f MB (%s), Q8_0 %.0f MB (%s): every tensor but the token embedding (one row), the expert "
             "stacks at %d/%d." % (
                 2 * report["config"]["num_hidden_layers"] * report["config"]["num_key_value_heads"]
                 * report["config"].get("head_dim", 64) * 4 * 512 / 1e6,
                 by["f32"] / 1e6, ", ".join("%s %.0f" % (k, v / 1e6) for k, v in sorted(by["f32_by_type"].items())),
                 by["q8_0"] / 1e6, ", ".join("%s %.0f" % (k, v / 1e6) for k, v in sorted(by["q8_0_by_type"].items())),
                 report["config"]["num_experts_per_tok"], report["config"]["num_experts"]))
    for n in report["notes"]:
        L.append("- " + n)
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3moe", choices=["qwen3moe", "qwen3moe-tiny"])
    ap.add_argument("--peers", default="tfm,llama")
    ap.add_argument("--variants", default="f32,int8", help="tfm f32 vs llama.cpp F32, tfm int8 vs llama.cpp Q8_0")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--decode", type=int, default=64, help="decode steps after each prompt")
    ap.add_argument("--tfm-source", default="auto", choices=["auto", "import", "canonical"])
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--llama-fa", default="auto", choices=["auto", "on", "off"])
    ap.add_argument("--llama-kv", default="f16", choices=["f16", "f32"])
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build", "bin", "tfmc"))
    ap.add_argument("--build-lock", default="/tmp/tfm-build.lock",
                    help="flock held by whoever rebuilds the build folder: tfmc is copied while holding it")
    ap.add_argument("--work", default="/tmp/tfm-genbench")
    ap.add_argument("--json", default=None, help="default: WORK/moe.json")
    ap.add_argument("--md", default=None, help="default: WORK/moe.md")
    ap.add_argument("--quiet-below", type=float, default=0.15)
    ap.add_argument("--quiet-wait", type=float, default=60)
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--wait-budget", type=float, default=600, help="total seconds of waiting for quiet in the run")
    ap.add_argument("--membw-reps", type=int, default=10)
    ap.add_argument("--from-json", metavar="JSON", help="only write the tables again from a saved run's JSON")
    args = ap.parse_args()
    if args.from_json:
        report = json.load(open(args.from_json))
        saved = argparse.Namespace(**report["args"])
        saved.quiet_below = args.quiet_below
        report["summary"] = summarize(report, saved)
        print(markdown(report))
        return
    args.peers = args.peers.split(",")
    args.variants = args.variants.split(",")
    print("# peer settings: llama.cpp --kv %s --fa %s (its defaults: f16, auto = on), threads %d" % (
        args.llama_kv, args.llama_fa, args.threads), flush=True)
    report = run(args)
    js = args.json or os.path.join(args.work, "moe.json")
    with open(js, "w") as f:
        json.dump(report, f, indent=1, default=float)
    if "summary" in report:
        text = markdown(report)
        md = args.md or os.path.join(args.work, "moe.md")
        with open(md, "w") as f:
            f.write(text)
        print(text)
        log("wrote %s and %s" % (md, js))
    else:
        print(json.dumps(report.get("check", {}), indent=1))
        log("wrote %s" % js)


if __name__ == "__main__":
    main()
