#!/usr/bin/python3
"""GGUF files (issue 29, item 5): prefill tokens/s and decode ms/token of the same GGUF file run by
tfm (`tfmc import FILE.gguf`, compiled, `--weights FILE.gguf`: the file's blocks multiplied as they
are, tfm.ggml_linear_kernel) and by llama.cpp (../shared/peers/llama's llama_bench, its default
settings: KV cache f16, flash attention auto = on), batch 1, measured in the same run, rounds
interleaving the peers; plus a correctness check of each file before the timings.

usage: /usr/bin/python3 bench/gguf_bench.py [--model llama1b] [--types f16,q8_0,q4_k_m]
         [--threads 2] [--rounds 3] [--decode 32] [--prompts 128,512] [--work DIR]
         [--quiet-below 0.15] [--quiet-wait 60] [--retries 1] [--no-check] [--json OUT] [--md OUT]

Models: ../shared/peers/llama/make_gguf.py writes them (`--model llama1b --dtype f32,f16,q8_0,q4_k_m`:
the Llama-3.2-1B shape with random weights; Q4_K_M is llama.cpp's own quantizer's mix, Q4_K and
Q6_K). They are read from the peer's build/models (--models overrides).

Check (--no-check skips it): tfm's logits at every position of a 128-token prompt against
llama.cpp's (`--all-logits --kv f32 --fa off`), rel = max |diff| / max |llama.cpp| per position; the
top tokens compared wherever llama.cpp's gap between its first two logits exceeds 5% of its max
|logit| (the issue's bound: llama.cpp quantizes activations to 8 bits inside its quantized dot
products, tfm keeps them f32).

Bytes per decode token: every tensor of the file once (its own type), the token embedding one
row; implied bandwidth = bytes / decode time, against bench/membw.c's read bandwidth (the larger of
the start and the end of the run). Contamination: generate_bench.py's Quiet (wait for other
processes to use less than --quiet-below cores, measure again if they used more); every figure
carries the largest foreign_cores of its measurements.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate_bench as gb  # noqa: E402
import moe_bench as mb  # noqa: E402

PEER_DIR = gb.PEER_DIR


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def tok_ids(P, vocab):
    return np.array([[gb.tok_at(i, vocab) for i in range(P)]], dtype=np.int32)


def compile_model(tfmc, gguf, work, name):
    tfm = os.path.join(work, name + ".tfm")
    exe = os.path.join(work, name)
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(tfmc):
        subprocess.run([tfmc, "import", gguf, "-o", tfm], check=True)
        t0 = time.perf_counter()
        subprocess.run([tfmc, tfm, "-o", exe], check=True)
        log("  compiled %s in %.1f s" % (name, time.perf_counter() - t0))
    return exe


def vocab_of(gguf):
    return mb.gguf_tensors(gguf)["token_embd.weight"][1][0]


def tfm_time(exe, gguf, vocab, P, N, threads, work):
    tpath = os.path.join(work, "tokens-%d-%d.npy" % (vocab, P))
    if not os.path.exists(tpath):
        np.save(tpath, tok_ids(P, vocab))
    out = os.path.join(work, "ids.npy")
    r = subprocess.run([exe, "--weights", gguf, "--input", "tokens=" + tpath, "--generate", str(N + 1),
                        "--bench-generate", "--threads", str(threads), "--output", out],
                       capture_output=True, text=True, env=gb.tfm_env())
    g = gb.GEN_RE.search(r.stderr)
    if r.returncode or not g:
        raise RuntimeError("tfm failed (rc %d): %s" % (r.returncode, r.stderr[-800:]))
    return dict(prefill_ms=float(g.group(3)), decode_ms=float(g.group(6)))


def llama_time(gguf, prompts, N, threads):
    exe = os.path.join(PEER_DIR, "build", "llama_bench")
    cmd = [exe, "-m", gguf, "-t", str(threads), "-p", ",".join(map(str, prompts)), "-n", str(N),
           "-r", "1", "--warmup", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=PEER_DIR)
    if r.returncode:
        raise RuntimeError("llama_bench failed (rc %d): %s" % (r.returncode, r.stderr[-800:]))
    res = {"cmd": " ".join(cmd[1:])}
    for line in gb.LLAMA_RE.findall(r.stdout):
        kv = dict(x.split("=", 1) for x in line.split() if "=" in x)
        key = ("prefill_ms_%s" if kv["kind"] == "prefill" else "decode_ms_%s") % kv["P"]
        res[key] = float(kv["median_ms"])
        res["settings"] = "kv=%s threads=%s" % (kv.get("kv"), kv.get("threads"))
    banner = [x for x in r.stdout.splitlines() if x.startswith("# llama.cpp")]
    res["banner"] = banner[0] if banner else ""
    return res


def check(exe, gguf, vocab, threads, work, P=128):
    tpath = os.path.join(work, "check-tokens.npy")
    ids = tok_ids(P, vocab)
    np.save(tpath, ids)
    out = os.path.join(work, "check-tfm.npy")
    subprocess.run([exe, "--weights", gguf, "--input", "tokens=" + tpath, "--output", out,
                    "--threads", str(threads)], check=True, capture_output=True, env=gb.tfm_env())
    dump = os.path.join(work, "check-llama.npy")
    subprocess.run([os.path.join(PEER_DIR, "build", "llama_bench"), "-m", gguf, "-t", str(threads),
                    "-p", str(P), "-n", "1", "-r", "1", "--kv", "f32", "--fa", "off", "--all-logits",
                    "--dump-logits", dump], check=True, capture_output=True, cwd=PEER_DIR)
    got = np.load(out)[0].astype(np.float64)
    ref = np.load(dump)[:P].astype(np.float64)
    rel = np.abs(got - ref).max(-1) / np.abs(ref).max(-1)
    srt = np.sort(ref, -1)
    gap = (srt[:, -1] - srt[:, -2]) / np.abs(ref).max(-1)
    clear = gap > 0.05
    agree = (got.argmax(-1) == ref.argmax(-1))
    return dict(rel_max=float(rel.max()), rel_median=float(np.median(rel)),
                top_agree=int(agree.sum()), positions=P, clear=int(clear.sum()),
                top_agree_clear=int((agree & clear).sum()))


def run(args):
    work = args.work
    os.makedirs(work, exist_ok=True)
    quiet = gb.Quiet(args.quiet_below, args.quiet_wait, args.retries)
    report = dict(date=datetime.datetime.now().isoformat(timespec="seconds"), cpu=gb.cpu_info(),
                  threads=args.threads, model=args.model, prompts=args.prompts, decode=args.decode,
                  types={})
    log("membw ...")
    report["membw_start"] = gb.membw(work, 3, quiet)
    files = {}
    for t in args.types:
        gguf = os.path.join(args.models, "%s-%s.gguf" % (args.model, t))
        exe = compile_model(args.tfmc, gguf, work, "%s_%s" % (args.model, t))
        total, by_type = mb.decode_bytes_gguf(gguf, 1, 1)
        files[t] = (gguf, exe, vocab_of(gguf))
        report["types"][t] = dict(file=gguf, decode_bytes=total,
                                  tensor_types={k: v for k, v in by_type.items()}, rounds=[])
        if args.check:
            log("check %s ..." % t)
            report["types"][t]["check"] = check(exe, gguf, files[t][2], args.threads, work)
            log("  %s" % report["types"][t]["check"])
    for rnd in range(args.rounds):
        for t in args.types:
            gguf, exe, vocab = files[t]
            r = {}
            for P in args.prompts:
                m = quiet.measure(lambda: tfm_time(exe, gguf, vocab, P, args.decode, args.threads, work),
                                  "tfm %s P=%d" % (t, P))
                r["tfm_prefill_ms_%d" % P] = m["prefill_ms"]
                r["tfm_decode_ms_%d" % P] = m["decode_ms"]
                r["tfm_foreign_cores_%d" % P] = m["foreign_cores"]
            m = quiet.measure(lambda: llama_time(gguf, args.prompts, args.decode, args.threads),
                              "llama.cpp %s" % t)
            for k, v in m.items():
                r["llama_" + k] = v
            log("round %d %s: %s" % (rnd, t, {k: v for k, v in r.items() if "ms" in k}))
            report["types"][t]["rounds"].append(r)
    report["membw_end"] = gb.membw(work, 3, quiet)
    return report


def summarize(report):
    bw = max(max(x["gbps"]["1"]["read"], x["gbps"][str(report["threads"])]["read"])
             for x in (report["membw_start"], report["membw_end"]))
    rows = []
    for t, d in report["types"].items():
        for P in report["prompts"]:
            def med(key):
                xs = [r[key] for r in d["rounds"] if key in r]
                return float(np.median(xs)) if xs else None
            tp, tdec = med("tfm_prefill_ms_%d" % P), med("tfm_decode_ms_%d" % P)
            lp, ldec = med("llama_prefill_ms_%d" % P), med("llama_decode_ms_%d" % P)
            fc = max([r.get("tfm_foreign_cores_%d" % P, 0) for r in d["rounds"]] +
                     [r.get("llama_foreign_cores", 0) for r in d["rounds"]] + [0])
            rows.append(dict(type=t, P=P, tfm_prefill_tok_s=P * 1000 / tp, llama_prefill_tok_s=P * 1000 / lp,
                             prefill_ratio=lp / tp, tfm_decode_ms=tdec, llama_decode_ms=ldec,
                             decode_ratio=ldec / tdec, bytes=d["decode_bytes"],
                             tfm_gbps=d["decode_bytes"] / tdec / 1e6,
                             llama_gbps=d["decode_bytes"] / ldec / 1e6,
                             tfm_of_bw=d["decode_bytes"] / tdec / 1e6 / bw if bw else None,
                             foreign_cores=fc))
    return bw, rows


def markdown(report):
    bw, rows = summarize(report)
    c = report["cpu"]
    out = ["GGUF files (%s, %s): %s, %s CPUs; %d threads; %d decode steps; membw read %.1f GB/s"
           % (report["model"], report["date"], c.get("model"), c.get("cpus"), report["threads"],
              report["decode"], bw), "",
           "| type | P | tfm prefill tok/s | llama.cpp prefill tok/s | tfm / llama.cpp | tfm decode ms | "
           "llama.cpp decode ms | llama.cpp / tfm | bytes / token | tfm GB/s (of membw) | llama.cpp GB/s | "
           "max foreign_cores |", "|" + "---|" * 12]
    for r in rows:
        out.append("| %s | %d | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx | %.0f MB | %.1f (%.0f%%) | %.1f | %.2f |"
                   % (r["type"], r["P"], r["tfm_prefill_tok_s"], r["llama_prefill_tok_s"], r["prefill_ratio"],
                      r["tfm_decode_ms"], r["llama_decode_ms"], r["decode_ratio"], r["bytes"] / 1e6,
                      r["tfm_gbps"], 100 * (r["tfm_of_bw"] or 0), r["llama_gbps"], r["foreign_cores"]))
    out.append("")
    for t, d in report["types"].items():
        if "check" in d:
            k = d["check"]
            out.append("- %s: logits vs llama.cpp (--kv f32 --fa off) max rel %.4f (median %.4f); top token "
                       "%d/%d positions, %d/%d where llama.cpp's top-2 gap > 5%%; tensor types %s"
                       % (t, k["rel_max"], k["rel_median"], k["top_agree"], k["positions"],
                          k["top_agree_clear"], k["clear"],
                          ", ".join("%s %.0f MB" % (a, b / 1e6) for a, b in d["tensor_types"].items())))
        for r in d["rounds"][:1]:
            out.append("- llama.cpp %s: `%s` (%s; %s)" % (t, r.get("llama_cmd", ""), r.get("llama_settings", ""),
                                                         r.get("llama_banner", "")))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="llama1b")
    ap.add_argument("--types", default="f16,q8_0,q4_k_m", type=lambda s: s.split(","))
    ap.add_argument("--models", default=os.path.join(PEER_DIR, "build", "models"))
    ap.add_argument("--tfmc", default=os.path.join(HERE, "..", "build", "bin", "tfmc"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--prompts", default=[128, 512], type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--work", default="/tmp/tfm-ggufbench")
    ap.add_argument("--quiet-below", type=float, default=0.15)
    ap.add_argument("--quiet-wait", type=float, default=60)
    ap.add_argument("--retries", type=int, default=1)
    ap.add_argument("--no-check", dest="check", action="store_false")
    ap.add_argument("--json")
    ap.add_argument("--md")
    args = ap.parse_args()
    report = run(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    md = markdown(report)
    if args.md:
        with open(args.md, "w") as f:
            f.write(md)
    print(md)


if __name__ == "__main__":
    main()
