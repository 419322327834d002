#!/usr/bin/python3
"""Load generator for a compiled model's OpenAI-compatible server (issue 30, item 6).

usage: /usr/bin/python3 bench/serve_bench.py [--url http://127.0.0.1:PORT]
         [--exe EXE | --model llama1b | --model FILE.tfm[:NAME]] [--tfmc build/bin/tfmc]
         [--weights W | --random-weights SEED] [--tokenizer T] [--threads 2] [--parallel 8]
         [--ctx-size 4096] [--streams 8] [--decode 32] [--prompt 16] [--prefix 2000]
         [--ttft-reps 3] [--requests 48] [--concurrency 8] [--max-tokens 16]
         [--quiet-below 0.3] [--quiet-wait 60] [--work DIR] [--json OUT]

With --url it measures a server already running (its flags unknown: say them yourself); else it
starts one: EXE (--exe, or --model compiled with tfmc into --work) with `--serve --host 127.0.0.1
--port 0 --parallel P --ctx-size T --threads K` and the weights, and prints that command line
beside the figures. `--model llama1b` (the default) writes the LLaMA-3.2-1B shape that
../shared/peers/llama/make_gguf.py's `llama1b` preset has (16 layers, d 2048, 32 heads, 8 KV heads,
SwiGLU 8192, vocab 128256, RoPE theta 500000, tied head) with context 4096, random weights
(--random-weights 1: no file to make; --weights to use one).

The server needs a tokenizer (--tokenizer; for llama1b, by default, Llama-3.2's from the test
suite's npm peers, build/test/npm-peers). Prompts are token ids, greedy, through
POST /v1/completions:

1. Decode: one stream alone, then --streams streams started together, each a --prompt-token
   prompt (different ids per stream) and --decode tokens, streamed with logprobs 0 (so that each
   chunk lists its tokens). Decode tokens/s = the tokens of the chunks that arrive while every
   stream is past its first chunk and none has ended, over that window (prefills left out); for
   one stream, from its first chunk to its last. Also printed: all tokens over the wall time,
   and the ratio S streams / 1 stream.
2. Time to first token (the first streamed chunk) for a prompt of --prefix ids + 8 more, first
   uncached (a prefix never sent before), then cached (the same prefix, other 8 ids), --ttft-reps
   times with a new prefix each; medians and cached / uncached. /metrics's
   tfm_prefix_tokens_reused_total is read around each cached request.
3. Latency: --requests requests (prompts of 8 to 200 ids, --max-tokens tokens, not streamed) from
   --concurrency threads: p50 / p90 / p99 of the request latency, requests/s and tokens/s.

The CPU that other processes use during each measurement (/proc/stat, in cores, this script and
the server left out) is printed beside it (`foreign_cores`), as in bench/generate_bench.py: the
host is shared. Before each measurement the script waits up to --quiet-wait s for them to use
less than --quiet-below cores.
"""
import argparse
import http.client
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "serve", "Inputs"))
import serve_check as sc  # noqa: E402  (the test harness's Server and HTTP helpers)

HZ = os.sysconf("SC_CLK_TCK")
# The server needs a tokenizer (for its text); Llama-3.2's (128256 ids, the llama1b vocabulary)
# from the test suite's npm peers.
LLAMA32_TOKENIZER = os.path.join(ROOT, "build", "test", "npm-peers", "node_modules", "@lenml",
                                 "tokenizer-llama3_2", "models")

sys.path.insert(0, HERE)
import models_bench  # noqa: E402  (its LLaMA-1B description)

# models_bench.py's LLaMA-1B (make_gguf.py's llama1b preset) as `llama1b`, with a context of
# 4096 for the cached 2,000-token prefixes.
LLAMA1B = (models_bench.LLAMA1B_TFM.replace("model llama1b_random {", "model llama1b {")
           .replace("context = 2048", "context = 4096"))
assert "model llama1b {" in LLAMA1B and "context = 4096" in LLAMA1B


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cpu_snap():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    t = os.times()
    return time.monotonic(), busy / HZ, t.user + t.system + t.children_user + t.children_system


def foreign_cores(a, b):
    """Cores used by everything but this script and the server (snap's fourth field)."""
    wall = b[0] - a[0]
    own = (b[2] - a[2]) + (b[3] - a[3])
    return max(0.0, ((b[1] - a[1]) - own) / wall) if wall > 0 else 0.0


def snap(pid):
    """cpu_snap() and the server's CPU seconds (0 without its pid)."""
    s = cpu_snap()
    cpu = 0.0
    if pid:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / HZ
        except OSError:
            pass
    return s + (cpu,)


# ---------------------------------------------------------------------------
# Requests


class Target:
    def __init__(self, host, port, pid):
        self.host, self.port, self.pid = host, port, pid

    def stream(self, body, timeout=600):
        """A streamed completion (logprobs 0: each chunk lists its tokens):
        ([(arrival time, tokens in the chunk)], usage)."""
        body = dict(body, stream=True, stream_options={"include_usage": True}, logprobs=0)
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            t0 = time.monotonic()
            conn.request("POST", "/v1/completions", body=json.dumps(body),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                raise RuntimeError("status %d: %r" % (r.status, r.read()[:300]))
            times, usage = [], None
            while True:
                line = r.readline()
                if not line:
                    raise RuntimeError("the stream ended without [DONE]")
                if not line.startswith(b"data: "):
                    continue
                if line.strip() == b"data: [DONE]":
                    break
                e = json.loads(line[6:])
                if e.get("choices"):
                    lp = e["choices"][0].get("logprobs") or {}
                    times.append((time.monotonic() - t0, len(lp.get("tokens") or [])))
                if e.get("usage"):
                    usage = e["usage"]
            return times, usage
        finally:
            conn.close()

    def post(self, body, timeout=600):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request("POST", "/v1/completions", body=json.dumps(body),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                raise RuntimeError("status %d: %r" % (r.status, data[:300]))
            return json.loads(data)
        finally:
            conn.close()

    def metrics(self):
        return sc.metrics(self.port)


def ids(seed, n, vocab):
    """n token ids, different for every seed (ids 1000.. stay clear of special tokens)."""
    return [1000 + (seed * 1000003 + k * 7919) % (vocab - 2000) for k in range(n)]


def body(prompt, n):
    return {"prompt": prompt, "max_tokens": n, "temperature": 0}


def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def in_threads(fns):
    out = [None] * len(fns)
    barrier = threading.Barrier(len(fns))

    def go(k):
        barrier.wait()
        try:
            out[k] = fns[k]()
        except Exception as e:
            out[k] = e

    ts = [threading.Thread(target=go, args=(k,)) for k in range(len(fns))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for o in out:
        if isinstance(o, Exception):
            raise o
    return out


QUIET = {"below": 0.0, "wait": 0.0}


def wait_quiet(pid):
    """Waits (up to --quiet-wait s) until other processes use less than
    --quiet-below cores over a second."""
    t0 = time.monotonic()
    while QUIET["below"] > 0 and time.monotonic() - t0 < QUIET["wait"]:
        a = snap(pid)
        time.sleep(1.0)
        if foreign_cores(a, snap(pid)) < QUIET["below"]:
            break


def measured(tg, fn):
    wait_quiet(tg.pid)
    a = snap(tg.pid)
    t0 = time.monotonic()
    r = fn()
    wall = time.monotonic() - t0
    return r, wall, round(foreign_cores(a, snap(tg.pid)), 2)


def window_rate(streams):
    """Tokens/s of streams decoding together: the tokens of the chunks that
    arrive while every stream is past its first chunk and none has ended,
    over that window (chunks may arrive in bursts; a window averages them)."""
    start = max(ch[0][0] for ch in streams)
    end = min(ch[-1][0] for ch in streams)
    if end <= start:
        raise RuntimeError("the streams never decoded together (window %.3f s)" % (end - start))
    n = sum(k for ch in streams for t, k in ch if start < t <= end)
    return n / (end - start), end - start


def decode(tg, args, vocab, seed):
    def one(k):
        chunks, usage = tg.stream(body(ids(seed + k, args.prompt, vocab), args.decode))
        chunks = [c for c in chunks if c[1]]
        got = sum(c[1] for c in chunks)
        if got != usage["completion_tokens"] or len(chunks) < 2:
            raise RuntimeError("stream %d: %d tokens in %d chunks, usage says %d"
                               % (k, got, len(chunks), usage["completion_tokens"]))
        return chunks

    (single,), _, fc1 = measured(tg, lambda: [one(0)])
    many, wall, fc = measured(tg, lambda: in_threads([lambda k=k: one(1 + k)
                                                      for k in range(args.streams)]))
    r1, w1 = window_rate([single])
    total, w = window_rate(many)
    return {"single_tok_s": r1, "single_window_s": w1, "single_foreign_cores": fc1,
            "streams": args.streams, "total_tok_s": total, "window_s": w,
            "all_tokens_over_wall_tok_s": sum(c[1] for ch in many for c in ch) / wall,
            "ratio": total / r1, "foreign_cores": fc}


def ttft(tg, args, vocab):
    unc, cac, reused = [], [], []
    for rep in range(args.ttft_reps):
        prefix = ids(10_000 + rep * 17, args.prefix, vocab)
        a = prefix + ids(20_000 + rep, 8, vocab)
        b = prefix + ids(30_000 + rep, 8, vocab)
        (ta, _), _, fca = measured(tg, lambda: tg.stream(body(a, 2)))
        m0 = tg.metrics()
        (tb, _), _, fcb = measured(tg, lambda: tg.stream(body(b, 2)))
        m1 = tg.metrics()
        unc.append((ta[0][0], fca))
        cac.append((tb[0][0], fcb))
        reused.append(m1["tfm_prefix_tokens_reused_total"] - m0["tfm_prefix_tokens_reused_total"])
        log("  ttft rep %d: uncached %.3f s, cached %.3f s (%d tokens reused)"
            % (rep, ta[0][0], tb[0][0], reused[-1]))
    u = statistics.median(t for t, _ in unc)
    c = statistics.median(t for t, _ in cac)
    return {"prefix": args.prefix, "uncached_s": u, "cached_s": c, "ratio": c / u,
            "tokens_reused": reused, "foreign_cores": max(f for _, f in unc + cac)}


def latency(tg, args, vocab):
    lat = []
    toks = [0]
    lock = threading.Lock()
    nxt = [0]

    def worker():
        while True:
            with lock:
                k = nxt[0]
                if k >= args.requests:
                    return
                nxt[0] += 1
            p = ids(40_000 + k, 8 + (k * 37) % 193, vocab)
            t0 = time.monotonic()
            r = tg.post(body(p, args.max_tokens))
            dt = time.monotonic() - t0
            with lock:
                lat.append(dt)
                toks[0] += r["usage"]["completion_tokens"]

    def run():
        ts = [threading.Thread(target=worker) for _ in range(args.concurrency)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    _, wall, fc = measured(tg, run)
    if len(lat) != args.requests:
        raise RuntimeError("%d of %d requests answered" % (len(lat), args.requests))
    return {"requests": args.requests, "concurrency": args.concurrency,
            "max_tokens": args.max_tokens, "p50_s": pct(lat, 50), "p90_s": pct(lat, 90),
            "p99_s": pct(lat, 99), "requests_s": len(lat) / wall,
            "tokens_s": toks[0] / wall, "foreign_cores": fc}


def model_vocab(tfm_path, name):
    text = open(tfm_path).read()
    blocks = re.split(r"\bmodel\s+", text)
    for b in blocks[1:]:
        if name is None or b.startswith(name):
            m = re.search(r"\bvocab\s*=\s*(\d+)", b)
            if m:
                return int(m.group(1))
    raise SystemExit("%s: no vocab for model %s" % (tfm_path, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url")
    ap.add_argument("--exe")
    ap.add_argument("--model", default="llama1b", help="llama1b, or FILE.tfm[:NAME]")
    ap.add_argument("--vocab", type=int, help="the model's vocabulary (with --url or --exe)")
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build", "bin", "tfmc"))
    ap.add_argument("--weights")
    ap.add_argument("--random-weights", default="1")
    ap.add_argument("--tokenizer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--ctx-size", type=int, default=4096)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--prefix", type=int, default=2000)
    ap.add_argument("--ttft-reps", type=int, default=3)
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--quiet-below", type=float, default=0.3,
                    help="before each measurement wait for other processes to use fewer cores")
    ap.add_argument("--quiet-wait", type=float, default=60, help="... for at most this long (s)")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench-serve"))
    ap.add_argument("--json")
    args = ap.parse_args()
    QUIET.update(below=args.quiet_below, wait=args.quiet_wait)

    server = None
    flags = "(a server already running: its flags as started)"
    if args.url:
        m = re.match(r"http://([^:/]+):(\d+)", args.url)
        if not m:
            raise SystemExit("--url: expected http://HOST:PORT")
        if not args.vocab:
            raise SystemExit("--url needs --vocab")
        tg = Target(m.group(1), int(m.group(2)), None)
        vocab = args.vocab
    else:
        exe = args.exe
        if not exe:
            os.makedirs(args.work, exist_ok=True)
            if args.model == "llama1b":
                path, name = os.path.join(args.work, "llama1b.tfm"), "llama1b"
                with open(path, "w") as f:
                    f.write(LLAMA1B)
            else:
                path, _, name = args.model.partition(":")
                name = name or None
            exe = os.path.join(args.work, (name or "model") + "-serve")
            cmd = [args.tfmc, path, "-o", exe] + (["--model", name] if name else [])
            log("compile: " + " ".join(cmd))
            subprocess.run(cmd, check=True)
            vocab = args.vocab or model_vocab(path, name)
        else:
            if not args.vocab:
                raise SystemExit("--exe needs --vocab")
            vocab = args.vocab
        base = [exe] + (["--weights", args.weights] if args.weights
                        else ["--random-weights", args.random_weights])
        tokenizer = args.tokenizer
        if not tokenizer and args.model == "llama1b" and not args.exe:
            tokenizer = LLAMA32_TOKENIZER
            if not os.path.isdir(tokenizer):
                raise SystemExit("%s is missing: give --tokenizer, or install the test suite's "
                                 "npm peers (cmake --build build --target tfm-npm-peers)"
                                 % tokenizer)
        if tokenizer:
            base += ["--tokenizer", tokenizer]
        extra = ["--parallel", str(args.parallel), "--ctx-size", str(args.ctx_size),
                 "--threads", str(args.threads)]
        log("start: " + " ".join(base + extra))
        t0 = time.monotonic()
        server = sc.Server(base, extra, limit=600)
        log("  listening after %.1f s: %s" % (time.monotonic() - t0, server.match.group(0)))
        flags = " ".join(server.cmd)
        tg = Target(sc.HOST, server.port, server.proc.pid)
    try:
        # A warm-up request (first-touch of the weights, thread start).
        tg.post(body(ids(1, 8, vocab), 2))
        log("decode: 1 stream, then %d" % args.streams)
        dec = decode(tg, args, vocab, 100)
        log("ttft: %d-token prefix" % args.prefix)
        tt = ttft(tg, args, vocab)
        log("latency: %d requests from %d threads" % (args.requests, args.concurrency))
        lat = latency(tg, args, vocab)
        mt = tg.metrics()
    finally:
        if server:
            server.stop()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    git = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    report = {"when": when, "commit": git, "host": platform.node(), "cpus": os.cpu_count(),
              "server": flags, "decode": dec, "ttft": tt, "latency": lat,
              "kv_blocks_total": mt.get("tfm_kv_blocks_total")}
    print("serve_bench %s, tfm %s, %d CPUs" % (when, git, os.cpu_count()))
    print("server: %s" % flags)
    print("decode (%d-token prompts, %d tokens each, streamed):" % (args.prompt, args.decode))
    print("  1 stream:   %.2f tokens/s over %.2f s (foreign_cores %.2f)"
          % (dec["single_tok_s"], dec["single_window_s"], dec["single_foreign_cores"]))
    print("  %d streams: %.2f tokens/s total over the %.2f s all decode together (all tokens "
          "over the wall time, prefills included: %.2f) (foreign_cores %.2f)"
          % (dec["streams"], dec["total_tok_s"], dec["window_s"],
             dec["all_tokens_over_wall_tok_s"], dec["foreign_cores"]))
    print("  ratio %d streams / 1 stream: %.2fx (target >= 4x)" % (dec["streams"], dec["ratio"]))
    print("time to first token, %d-token prefix (median of %d):" % (tt["prefix"],
                                                                     args.ttft_reps))
    print("  uncached %.3f s, cached %.3f s: cached / uncached %.1f%% (target <= 20%%); "
          "tokens reused %s (foreign_cores %.2f)"
          % (tt["uncached_s"], tt["cached_s"], 100 * tt["ratio"], tt["tokens_reused"],
             tt["foreign_cores"]))
    print("latency, %d requests from %d threads, %d tokens each (not streamed):"
          % (lat["requests"], lat["concurrency"], lat["max_tokens"]))
    print("  p50 %.3f s, p90 %.3f s, p99 %.3f s; %.2f requests/s, %.1f tokens/s "
          "(foreign_cores %.2f)" % (lat["p50_s"], lat["p90_s"], lat["p99_s"],
                                    lat["requests_s"], lat["tokens_s"], lat["foreign_cores"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
