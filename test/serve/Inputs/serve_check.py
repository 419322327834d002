#!/usr/bin/env python3
"""Checks a compiled model's OpenAI-compatible server (`./m ... --serve`).

    serve_check.py [--scenario NAME ...] [--run SHELL_COMMAND]
                   [--chat-prompt FILE] [--exe-tokenize TOKENIZER] -- EXE ARGS...

Each scenario starts its own server, `EXE ARGS... --serve --host 127.0.0.1
--port 0` plus the flags that scenario needs, reads the port from the line
`serve: listening on http://HOST:PORT (model NAME, N parallel, ctx T)` on
its stderr, waits for GET /health to answer 200, runs, and kills the server
whatever happens (every wait is bounded; loopback only). It prints one line
per scenario, `NAME: ok ...` (what was checked, nothing that varies between
runs), or `NAME: FAIL ...` with the server's stderr, and exits 1 if any
failed. `--run CMD` starts a server with the port in $PORT and the base URL
in $TFM_SERVE_URL (http://127.0.0.1:PORT), runs CMD under sh, and exits
with its status.

Scenarios (test/serve/*.test run them all):
  basic, sampling, utf8     api.test: the endpoints, streaming, logprobs, stop, seeds
  concurrent, load, prefix, prefix-load
                            concurrency.test: outputs under load equal solo runs
  bad, nul, methods, slow, slow-headers, cut, cut-nonstream, queue, queue-burst, sigterm
                            errors.test: bad requests and clients (a byte a second in
                            the body or the headers), 405, cancelling (streamed and
                            not), 503, SIGTERM

Requests are greedy (temperature 0) unless a scenario says otherwise: the
server promises that a greedy output is the same whatever else runs at the
same time, so every output under concurrency is compared with the output of
the same request sent alone.

Python standard library only (/usr/bin/python3).
"""

import argparse
import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

HOST = "127.0.0.1"
LISTEN_RE = re.compile(
    r"^serve: listening on http://([^:/\s]+):(\d+) \(model (.*), (\d+) parallel, "
    r"ctx (\d+)\)$")

# Words for prompts of chosen lengths (each a token or two for a BPE).
WORDS = ("the quick brown fox jumps over lazy dog while seven bright stars "
         "watch from a quiet river bank near old stone bridge where children "
         "play music and sing songs about summer rain falling on green hills "
         "under silver clouds").split()


def prompt_of(i, n):
    """A prompt of n words, different for every i."""
    return " ".join(WORDS[(i * 7 + k * (i % 5 + 1)) % len(WORDS)] for k in range(n))


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


# ---------------------------------------------------------------------------
# The server process


STARTED = []
CTX = [0]  # the context of the latest server


class Server:
    """A server started with --port 0; stop() (or leaving a `with` block)
    kills it if it still runs."""

    def __init__(self, cmd, extra, wait_health=True, limit=120):
        STARTED.append(self)
        self.cmd = list(cmd) + ["--serve", "--host", HOST, "--port", "0"] + list(extra)
        self.lines = []
        self.listening = threading.Event()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.port = None
        try:
            self._start(wait_health, limit)
        except BaseException:
            self.stop()
            raise

    def _start(self, wait_health, limit):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.listening.wait(0.1):
                break
            if self.proc.poll() is not None:
                self.reader.join(5)
                raise Failure("the server exited with status %d before listening: %s"
                              % (self.proc.returncode, self.stderr()))
        else:
            raise Failure("no listening line on the server's stderr in %d s" % limit)
        m = self.match
        check(m.group(1) == HOST, "listening on %s, not %s" % (m.group(1), HOST))
        self.port = int(m.group(2))
        check(self.port > 0, "listening on port 0")
        self.model_name = m.group(3)
        self.parallel = int(m.group(4))
        self.ctx = int(m.group(5))
        CTX[0] = self.ctx
        if wait_health:
            self.wait_health(limit)

    def _read(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            m = LISTEN_RE.match(line)
            if m and not self.listening.is_set():
                self.match = m
                self.listening.set()

    def wait_health(self, limit=120):
        deadline = time.monotonic() + limit
        last = None
        while time.monotonic() < deadline:
            try:
                r = request(self.port, "GET", "/health", timeout=5)
                last = r.status
                if r.status == 200:
                    check(r.json() == {"status": "ok"},
                          "GET /health: %r, expected {\"status\": \"ok\"}" % r.data)
                    return
                check(r.status == 503, "GET /health: status %d while loading, "
                      "expected 503 then 200" % r.status)
            except (OSError, http.client.HTTPException) as e:
                last = e
            if self.proc.poll() is not None:
                raise Failure("the server exited with status %d" % self.proc.returncode)
            time.sleep(0.05)
        raise Failure("GET /health did not answer 200 in %d s (last: %r)" % (limit, last))

    def alive(self):
        return self.proc.poll() is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        self.reader.join(5)

    def stderr(self):
        return "\n".join(self.lines[-60:])


# ---------------------------------------------------------------------------
# HTTP


class Response:
    def __init__(self, status, headers, data, elapsed):
        self.status = status
        self.headers = headers
        self.data = data
        self.elapsed = elapsed

    def json(self):
        try:
            return json.loads(self.data)
        except ValueError:
            raise Failure("not JSON (status %d): %r" % (self.status, self.data[:300]))


def request(port, method, path, body=None, raw=None, headers=None, timeout=60):
    """One request on a new connection; body is JSON-encoded, raw sent as is."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    t0 = time.monotonic()
    try:
        h = {"Connection": "close"}
        if body is not None:
            raw = json.dumps(body).encode()
        if raw is not None:
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        conn.request(method, path, body=raw, headers=h)
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data,
                        time.monotonic() - t0)
    finally:
        conn.close()


def post(port, path, body, timeout=120):
    r = request(port, "POST", path, body, timeout=timeout)
    check(r.status == 200, "POST %s %s: status %d: %r" % (path, short(body), r.status,
                                                           r.data[:400]))
    return r.json()


def short(body):
    s = json.dumps(body)
    return s if len(s) < 160 else s[:160] + "..."


def parse_sse(data, what):
    """The events of a whole SSE body: `data: JSON\\n\\n`..., `data: [DONE]\\n\\n`."""
    check(data.endswith(b"data: [DONE]\n\n"),
          "%s: the stream does not end with 'data: [DONE]\\n\\n': ...%r" % (what, data[-80:]))
    parts = data.split(b"\n\n")
    check(parts[-1] == b"", "%s: bytes after the last event" % what)
    events = []
    for p in parts[:-2]:
        check(p.startswith(b"data: ") and b"\n" not in p,
              "%s: an event that is not one 'data: ' line: %r" % (what, p[:200]))
        try:
            events.append(json.loads(p[6:]))
        except ValueError:
            raise Failure("%s: an event that is not JSON: %r" % (what, p[:200]))
    check(parts[-2] == b"data: [DONE]", "%s: [DONE] is not alone" % what)
    return events


def stream(port, path, body, timeout=120):
    """A whole streamed response: (events, response)."""
    r = request(port, "POST", path, body, timeout=timeout)
    check(r.status == 200, "POST %s %s: status %d: %r" % (path, short(body), r.status,
                                                           r.data[:400]))
    ctype = r.headers.get("content-type", "")
    check(ctype.split(";")[0].strip() == "text/event-stream",
          "stream %s: Content-Type %r, expected text/event-stream" % (path, ctype))
    return parse_sse(r.data, "POST %s %s" % (path, short(body))), r


def metrics(port):
    r = request(port, "GET", "/metrics", timeout=30)
    check(r.status == 200, "GET /metrics: status %d" % r.status)
    out = {}
    for line in r.data.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        check(m, "GET /metrics: not Prometheus text: %r" % line)
        out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


METRICS = ["tfm_requests_total", "tfm_requests_failed_total", "tfm_prompt_tokens_total",
           "tfm_generated_tokens_total", "tfm_requests_running", "tfm_requests_waiting",
           "tfm_kv_blocks_in_use", "tfm_kv_blocks_allocated", "tfm_kv_blocks_total",
           "tfm_prefix_cache_hits_total", "tfm_prefix_tokens_reused_total",
           "tfm_prefix_shared_total", "tfm_requests_cancelled_total"]


def wait_metric(port, name, pred, limit=20):
    """/metrics once `pred(value of name)` holds (bounded). A gauge is
    published by the engine after its step, so a response may reach the
    client a moment before the gauge counts its request as ended."""
    deadline = time.monotonic() + limit
    while True:
        m = metrics(port)
        if pred(m[name]):
            return m
        if time.monotonic() > deadline:
            raise Failure("/metrics %s stayed %g for %d s" % (name, m[name], limit))
        time.sleep(0.05)


# ---------------------------------------------------------------------------
# Requests and their checks


def cmpl_body(prompt, max_tokens, **kw):
    b = {"model": "any", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    b.update(kw)
    return b


def chat_body(content, max_tokens, **kw):
    b = {"model": "any", "messages": [{"role": "user", "content": content}],
         "max_tokens": max_tokens, "temperature": 0}
    b.update(kw)
    return b


def core_usage(u):
    """usage's three counts (prompt_tokens_details.cached_tokens depends on
    what ran before)."""
    return {k: u[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}


def check_usage(u, what, max_tokens=None):
    check(isinstance(u, dict), "%s: no usage object" % what)
    for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
        check(isinstance(u.get(k), int) and u[k] >= 0, "%s: usage.%s is %r" % (what, k, u.get(k)))
    check(u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"],
          "%s: usage.total_tokens %d != %d + %d" % (what, u["total_tokens"], u["prompt_tokens"],
                                                   u["completion_tokens"]))
    check(u["prompt_tokens"] > 0, "%s: usage.prompt_tokens is 0" % what)
    if max_tokens is not None:
        check(u["completion_tokens"] <= max_tokens, "%s: %d completion tokens past max_tokens %d"
              % (what, u["completion_tokens"], max_tokens))


def check_finish(reason, u, max_tokens, what):
    check(reason in ("stop", "length"), "%s: finish_reason %r" % (what, reason))
    if reason == "length":
        # max_tokens reached, or the context full.
        check(u["completion_tokens"] == max_tokens or u["total_tokens"] == CTX[0],
              "%s: finish_reason length after %d tokens, max_tokens %d, ctx %d"
              % (what, u["completion_tokens"], max_tokens, CTX[0]))


def run_cmpl(port, prompt, max_tokens, **kw):
    """A non-streamed completion, checked: (text, finish_reason, usage)."""
    body = cmpl_body(prompt, max_tokens, **kw)
    what = "POST /v1/completions %s" % short(body)
    r = post(port, "/v1/completions", body)
    check(r.get("object") == "text_completion", "%s: object %r" % (what, r.get("object")))
    check(isinstance(r.get("id"), str) and r["id"], "%s: no id" % what)
    check(isinstance(r.get("created"), int), "%s: created %r" % (what, r.get("created")))
    check(isinstance(r.get("model"), str), "%s: model %r" % (what, r.get("model")))
    ch = r.get("choices")
    check(isinstance(ch, list) and len(ch) == 1, "%s: choices %r" % (what, ch))
    c = ch[0]
    check(c.get("index") == 0 and isinstance(c.get("text"), str), "%s: choice %r" % (what, c))
    check_usage(r.get("usage"), what, max_tokens)
    check_finish(c.get("finish_reason"), r["usage"], max_tokens, what)
    return c["text"], c["finish_reason"], core_usage(r["usage"]), r


def run_chat(port, content, max_tokens, **kw):
    body = chat_body(content, max_tokens, **kw)
    what = "POST /v1/chat/completions %s" % short(body)
    r = post(port, "/v1/chat/completions", body)
    check(r.get("object") == "chat.completion", "%s: object %r" % (what, r.get("object")))
    check(isinstance(r.get("id"), str) and r["id"], "%s: no id" % what)
    check(isinstance(r.get("created"), int), "%s: created %r" % (what, r.get("created")))
    ch = r.get("choices")
    check(isinstance(ch, list) and len(ch) == 1, "%s: choices %r" % (what, ch))
    c = ch[0]
    msg = c.get("message")
    check(isinstance(msg, dict) and msg.get("role") == "assistant"
          and isinstance(msg.get("content"), str), "%s: message %r" % (what, msg))
    check_usage(r.get("usage"), what, max_tokens)
    check_finish(c.get("finish_reason"), r["usage"], max_tokens, what)
    return msg["content"], c["finish_reason"], core_usage(r["usage"]), r


def run_stream(port, api, prompt, max_tokens, include_usage=True, **kw):
    """A streamed request, its framing checked: (text, finish_reason, usage or None)."""
    chat = api == "chat"
    body = (chat_body if chat else cmpl_body)(prompt, max_tokens, stream=True, **kw)
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    path = "/v1/chat/completions" if chat else "/v1/completions"
    what = "POST %s %s" % (path, short(body))
    events, _ = stream(port, path, body)
    check(events, "%s: no events before [DONE]" % what)
    usage = None
    if include_usage:
        last = events.pop()
        check(last.get("choices") == [], "%s: the usage chunk has choices %r"
              % (what, last.get("choices")))
        usage = last.get("usage")
        check_usage(usage, what + " (usage chunk)", max_tokens)
    check(events, "%s: no content chunks" % what)
    obj = "chat.completion.chunk" if chat else "text_completion"
    ids = set()
    text = []
    reasons = []
    for k, e in enumerate(events):
        check(e.get("object") == obj, "%s: chunk %d object %r, expected %r"
              % (what, k, e.get("object"), obj))
        ids.add(e.get("id"))
        check(e.get("usage") is None, "%s: chunk %d carries usage before the last" % (what, k))
        ch = e.get("choices")
        check(isinstance(ch, list) and len(ch) == 1 and ch[0].get("index") == 0,
              "%s: chunk %d choices %r" % (what, k, ch))
        c = ch[0]
        if chat:
            d = c.get("delta")
            check(isinstance(d, dict), "%s: chunk %d has no delta" % (what, k))
            if k == 0:
                check(d.get("role") == "assistant",
                      "%s: the first chunk's delta.role is %r" % (what, d.get("role")))
            else:
                check("role" not in d or d["role"] == "assistant",
                      "%s: chunk %d delta.role %r" % (what, k, d.get("role")))
            piece = d.get("content")
            check(piece is None or isinstance(piece, str), "%s: delta.content %r" % (what, piece))
            text.append(piece or "")
        else:
            check(isinstance(c.get("text"), str), "%s: chunk %d text %r" % (what, k, c.get("text")))
            text.append(c["text"])
        reasons.append(c.get("finish_reason"))
    check(len(ids) == 1 and None not in ids, "%s: chunk ids %r" % (what, ids))
    check(all(r is None for r in reasons[:-1]),
          "%s: finish_reason before the last chunk: %r" % (what, reasons))
    reason = reasons[-1]
    check(reason in ("stop", "length"), "%s: the last chunk's finish_reason is %r" % (what, reason))
    if usage:
        check_finish(reason, usage, max_tokens, what)
        usage = core_usage(usage)
    return "".join(text), reason, usage


def tokenize(port, text, add_special=False):
    r = post(port, "/tokenize", {"content": text, "add_special": add_special})
    toks = r.get("tokens")
    check(isinstance(toks, list) and all(isinstance(t, int) for t in toks),
          "POST /tokenize %r: %r" % (text, r))
    return toks


def detokenize(port, tokens):
    r = post(port, "/detokenize", {"tokens": tokens})
    check(isinstance(r.get("content"), str), "POST /detokenize: %r" % r)
    return r["content"]


# long_prompt's finds, by model command and length: the scenarios of one
# run start servers of the same model, whose greedy output is the same.
LONG_PROMPTS = {}


def long_prompt(port, minimum, i=3):
    """A completion prompt whose greedy output runs to max_tokens (no EOS)."""
    server = next(s for s in reversed(STARTED) if s.port == port)
    key = (tuple(server.cmd[:server.cmd.index("--serve")]), minimum, i)
    if key in LONG_PROMPTS:
        return LONG_PROMPTS[key]
    for j in range(40):
        p = prompt_of(i + j, 6)
        _, reason, _, _ = run_cmpl(port, p, minimum)
        if reason == "length":
            LONG_PROMPTS[key] = p
            return p
    raise Failure("no prompt of 40 runs %d tokens without stopping" % minimum)


# ---------------------------------------------------------------------------
# Scenarios: each takes the server command and returns a summary line.


def sc_basic(cmd, opts):
    with Server(cmd, ["--model-name", "tfm-test"]) as s:
        p = s.port
        check(s.model_name == "tfm-test", "listening line names model %r" % s.model_name)
        r = request(p, "GET", "/v1/models")
        check(r.status == 200, "GET /v1/models: status %d" % r.status)
        m = r.json()
        check(m.get("object") == "list" and isinstance(m.get("data"), list)
              and len(m["data"]) == 1, "GET /v1/models: %r" % m)
        d = m["data"][0]
        check(d.get("id") == "tfm-test" and d.get("object") == "model",
              "GET /v1/models: %r" % d)
        # Completions: the same text streamed and not, from a string prompt and
        # from its token ids.
        prompt = "The capital of France is"
        text, reason, u, r = run_cmpl(p, prompt, 12)
        check(r["model"] == "tfm-test", "completion model %r" % r["model"])
        ids = tokenize(p, prompt, add_special=True)
        check(u["prompt_tokens"] == len(ids), "prompt_tokens %d, /tokenize gives %d ids"
              % (u["prompt_tokens"], len(ids)))
        t2, r2, u2, _ = run_cmpl(p, ids, 12)
        check((t2, r2, u2) == (text, reason, u), "prompt as ids: %r, as text: %r"
              % ((t2, r2, u2), (text, reason, u)))
        st, sr, su = run_stream(p, "cmpl", prompt, 12)
        check((st, sr, su) == (text, reason, u), "streamed %r, not streamed %r"
              % ((st, sr, su), (text, reason, u)))
        st, sr, _ = run_stream(p, "cmpl", prompt, 12, include_usage=False)
        check((st, sr) == (text, reason), "streamed without usage %r" % st)
        # Chat.
        ctext, creason, cu, _ = run_chat(p, "Say something.", 12)
        st, sr, su = run_stream(p, "chat", "Say something.", 12)
        check((st, sr, su) == (ctext, creason, cu), "chat streamed %r, not %r"
              % ((st, sr, su), (ctext, creason, cu)))
        st, sr, _ = run_stream(p, "chat", "Say something.", 12, include_usage=False)
        check((st, sr) == (ctext, creason), "chat streamed without usage %r" % st)
        if opts.chat_prompt:
            # The rendered chat template (tfm-chat-template) as a completion
            # prompt: the same tokens, the same output. The template writes
            # the BOS token itself where the model has one: nothing added.
            with open(opts.chat_prompt, encoding="utf-8") as f:
                rendered = f.read()
            ids = tokenize(p, rendered, add_special=False)
            check(cu["prompt_tokens"] == len(ids), "chat prompt_tokens %d, the rendered "
                  "template has %d" % (cu["prompt_tokens"], len(ids)))
            t3, r3, u3, _ = run_cmpl(p, ids, 12)
            check((t3, r3) == (ctext, creason), "chat %r, the rendered template as "
                  "a completion %r" % (ctext, t3))
        # max_tokens defaults to 16 for completions.
        b = {"prompt": prompt, "temperature": 0}
        r = post(p, "/v1/completions", b)
        check(r["usage"]["completion_tokens"] == 16 or r["choices"][0]["finish_reason"] == "stop",
              "default max_tokens: %r" % r["usage"])
        # /health, /tokenize and /detokenize.
        text = "Hello, world! Ünïcödé 你好 🙂 tabs\tand\nlines"
        toks = tokenize(p, text)
        check(detokenize(p, toks) == text, "detokenize(tokenize(%r)) = %r"
              % (text, detokenize(p, toks)))
        if opts.exe_tokenize:
            out = subprocess.run([cmd[0], "--tokenizer", opts.exe_tokenize, "--raw",
                                  "--tokenize", text], capture_output=True, timeout=60)
            check(out.returncode == 0, "%s --raw --tokenize: %r" % (cmd[0], out.stderr))
            want = [int(x) for x in out.stdout.split()]
            check(toks == want, "/tokenize %r, the executable's --raw --tokenize %r"
                  % (toks, want))
        m = wait_metric(p, "tfm_requests_running", lambda v: v == 0)
        missing = [n for n in METRICS if n not in m]
        check(not missing, "GET /metrics lacks %s" % ", ".join(missing))
        check(m["tfm_kv_blocks_total"] > 0 and m["tfm_requests_running"] == 0
              and m["tfm_requests_waiting"] == 0, "GET /metrics at rest: %r" % m)
        return "completions, chat, streams, models, tokenize round trip, metrics"


def sc_sampling(cmd, opts):
    with Server(cmd, []) as s:
        p = s.port
        prompt = prompt_of(2, 8)
        ref, reason, u, _ = run_cmpl(p, prompt, 24)
        # logprobs: the greedy token is the most likely of the top N.
        text, _, u2, r = run_cmpl(p, prompt, 24, logprobs=3)
        check(text == ref, "logprobs changed the text")
        lp = r["choices"][0].get("logprobs")
        check(isinstance(lp, dict), "completions logprobs: %r" % lp)
        toks, tlp, top = lp.get("tokens"), lp.get("token_logprobs"), lp.get("top_logprobs")
        check(isinstance(toks, list) and len(toks) == u2["completion_tokens"],
              "logprobs.tokens %r for %d tokens" % (toks, u2["completion_tokens"]))
        check(isinstance(tlp, list) and len(tlp) == len(toks) and isinstance(top, list)
              and len(top) == len(toks), "logprobs shapes: %r" % lp)
        for k in range(len(toks)):
            check(isinstance(top[k], dict) and 1 <= len(top[k]) <= 3,
                  "top_logprobs[%d] = %r" % (k, top[k]))
            check(tlp[k] <= 0 and tlp[k] >= max(top[k].values()) - 1e-4,
                  "greedy token %d: logprob %r below the top %r" % (k, tlp[k], top[k]))
        # Chat logprobs.
        ctext, _, cu, r = run_chat(p, "hi", 10, logprobs=True, top_logprobs=2)
        lp = r["choices"][0].get("logprobs")
        content = lp.get("content") if isinstance(lp, dict) else None
        check(isinstance(content, list) and len(content) == cu["completion_tokens"],
              "chat logprobs: %r" % lp)
        for e in content:
            check(isinstance(e.get("token"), str) and isinstance(e.get("logprob"), (int, float))
                  and isinstance(e.get("top_logprobs"), list) and len(e["top_logprobs"]) == 2,
                  "chat logprobs entry %r" % e)
            check(e["logprob"] >= max(t["logprob"] for t in e["top_logprobs"]) - 1e-4,
                  "chat greedy token below its top_logprobs: %r" % e)
        # stop: the text up to the first match of a string from the output.
        check(len(ref) >= 6, "the reference text is too short for stop: %r" % ref)
        stop = ref[3:6]
        want = ref[:ref.index(stop)]
        text, reason, _, _ = run_cmpl(p, prompt, 24, stop=[stop, "@@never@@"])
        check((text, reason) == (want, "stop"), "stop %r: %r (%s), expected %r (stop)"
              % (stop, text, reason, want))
        text, reason, _, _ = run_cmpl(p, prompt, 24, stop=stop)
        check((text, reason) == (want, "stop"), "stop as a string %r: %r" % (stop, text))
        st, sr, _ = run_stream(p, "cmpl", prompt, 24, stop=stop)
        check((st, sr) == (want, "stop"), "streamed stop %r: %r" % (stop, st))
        # Sampling with a seed is repeatable.
        a, _, _, _ = run_cmpl(p, prompt, 24, temperature=0.9, top_p=0.9, top_k=40, seed=7)
        b, _, _, _ = run_cmpl(p, prompt, 24, temperature=0.9, top_p=0.9, top_k=40, seed=7)
        check(a == b, "seed 7 twice: %r and %r" % (a, b))
        return "logprobs, top_logprobs, stop, seeded sampling"


def sc_utf8(cmd, opts):
    """Sampled text over the whole vocabulary (temperature 1.5: many tokens
    that are part of a UTF-8 character, many characters split across
    tokens), streamed and not: the same text, a seed being repeatable. (A
    piece streamed before the token that completes its last character would
    carry U+FFFD where the whole text has the character.)"""
    with Server(cmd, []) as s:
        p = s.port
        multibyte = 0
        for k in range(24):
            api = ("cmpl", "chat")[k % 2]
            prompt = prompt_of(k, 3 + k % 7)
            kw = dict(temperature=1.5, seed=1000 + k)
            f = run_cmpl if api == "cmpl" else run_chat
            text, reason, u, _ = f(p, prompt, 40, **kw)
            st, sr, su = run_stream(p, api, prompt, 40, **kw)
            check((st, sr, su) == (text, reason, u), "%s seed %d: streamed %r, not streamed %r"
                  % (api, 1000 + k, (st, sr, su), (text, reason, u)))
            multibyte += sum(1 for c in text if ord(c) > 127)
        check(multibyte > 0, "no text with a character past ASCII")
        return "sampled multibyte text streamed as not"


def in_threads(fns, limit=300):
    """Runs the functions at once (a barrier first); their results or Failure."""
    n = len(fns)
    barrier = threading.Barrier(n)
    out = [None] * n

    def go(k):
        try:
            barrier.wait(60)
            out[k] = ("ok", fns[k]())
        except Exception as e:  # reported below
            out[k] = ("err", "%s: %s" % (type(e).__name__, e))

    ts = [threading.Thread(target=go, args=(k,), daemon=True) for k in range(n)]
    for t in ts:
        t.start()
    deadline = time.monotonic() + limit
    for t in ts:
        t.join(max(0.1, deadline - time.monotonic()))
    check(all(not t.is_alive() for t in ts), "threads still running after %d s" % limit)
    return out


def sc_concurrent(cmd, opts):
    with Server(cmd, ["--parallel", "4"]) as s:
        p = s.port
        lengths = [1, 3, 7, 12, 20, 33, 50, 75, 2, 5, 9, 16, 27, 40, 60, 90]
        jobs = []
        for i, n in enumerate(lengths):
            api = ("cmpl", "chat")[i % 2]
            streamed = i % 4 >= 2
            jobs.append((api, streamed, prompt_of(i, n), 20 + i))
        solo = []
        for api, _, prompt, mt in jobs:
            f = run_cmpl if api == "cmpl" else run_chat
            t, r, u, _ = f(p, prompt, mt)
            solo.append((t, r, u))
        check(len(set(x[0] for x in solo)) > 1, "every prompt gave the same text")

        def job(k):
            api, streamed, prompt, mt = jobs[k]
            if streamed:
                return run_stream(p, api, prompt, mt)
            f = run_cmpl if api == "cmpl" else run_chat
            return f(p, prompt, mt)[:3]

        out = in_threads([lambda k=k: job(k) for k in range(len(jobs))])
        bad = [k for k in range(len(jobs)) if out[k] != ("ok", solo[k])]
        check(not bad, "differ from their solo runs: %s" % "; ".join(
            "#%d %s (%d words): %r, solo %r" % (k, jobs[k][0], lengths[k], out[k], solo[k])
            for k in bad[:4]))
        # Seeded sampling too is its solo run's, beside greedy requests.
        kw = dict(temperature=0.9, top_p=0.95, top_k=50)
        sampled = [(prompt_of(k, 5 + k), 100 + k) for k in range(6)]
        solo = [run_cmpl(p, q, 20, seed=sd, **kw)[:3] for q, sd in sampled]
        g = run_cmpl(p, "greedy one", 30)[:3]
        out = in_threads([lambda q=q, sd=sd: run_cmpl(p, q, 20, seed=sd, **kw)[:3]
                          for q, sd in sampled] + [lambda: run_cmpl(p, "greedy one", 30)[:3]])
        check(out[-1] == ("ok", g), "a greedy request beside sampled ones: %r, solo %r"
              % (out[-1], g))
        bad = [k for k in range(len(sampled)) if out[k] != ("ok", solo[k])]
        check(not bad, "seeded sampling at once differs from solo: %s" % "; ".join(
            "seed %d: %r, solo %r" % (sampled[k][1], out[k], solo[k]) for k in bad[:3]))
        wait_metric(p, "tfm_requests_running", lambda v: v == 0)
        return "16 of 16 concurrent outputs identical to their solo runs; seeded sampling too"


def sc_load(cmd, opts):
    with Server(cmd, ["--parallel", "8", "--queue", "64"]) as s:
        p = s.port
        kinds = [("cmpl", False), ("chat", False), ("cmpl", True), ("chat", True)]
        refs = {}
        for i in range(12):
            for api in ("cmpl", "chat"):
                prompt = prompt_of(100 + i, 2 + 5 * i)
                mt = 4 + (i * 3) % 13
                f = run_cmpl if api == "cmpl" else run_chat
                t, r, u, _ = f(p, prompt, mt)
                refs[(api, i)] = (t, r, u)
        m0 = metrics(p)
        n = 500
        lock = threading.Lock()
        results = [None] * n
        nxt = [0]

        def worker():
            while True:
                with lock:
                    k = nxt[0]
                    if k >= n:
                        return
                    nxt[0] += 1
                api, streamed = kinds[k % 4]
                i = (k * 5) % 12
                prompt = prompt_of(100 + i, 2 + 5 * i)
                mt = 4 + (i * 3) % 13
                try:
                    if streamed:
                        got = run_stream(p, api, prompt, mt)
                    else:
                        f = run_cmpl if api == "cmpl" else run_chat
                        got = f(p, prompt, mt)[:3]
                    results[k] = ("ok", got, refs[(api, i)])
                except Exception as e:
                    results[k] = ("err", "%s: %s" % (type(e).__name__, e), refs[(api, i)])

        ts = [threading.Thread(target=worker, daemon=True) for _ in range(32)]
        for t in ts:
            t.start()
        deadline = time.monotonic() + 400
        for t in ts:
            t.join(max(0.1, deadline - time.monotonic()))
        check(all(not t.is_alive() for t in ts), "500 requests not done in 400 s")
        lost = [k for k in range(n) if results[k] is None]
        check(not lost, "%d requests have no result" % len(lost))
        bad = [k for k in range(n) if results[k][0] != "ok" or results[k][1] != results[k][2]]
        check(not bad, "%d of %d wrong: %s" % (len(bad), n, "; ".join(
            "#%d %r, expected %r" % (k, results[k][1], results[k][2]) for k in bad[:3])))
        m1 = wait_metric(p, "tfm_requests_running", lambda v: v == 0)
        check(m1["tfm_requests_waiting"] == 0, "requests waiting: %g" % m1["tfm_requests_waiting"])
        check(m1["tfm_requests_total"] - m0["tfm_requests_total"] == n,
              "tfm_requests_total grew by %g for %d requests"
              % (m1["tfm_requests_total"] - m0["tfm_requests_total"], n))
        check(m1["tfm_requests_failed_total"] == m0["tfm_requests_failed_total"],
              "tfm_requests_failed_total grew")
        ptoks = sum(results[k][1][2]["prompt_tokens"] for k in range(n))
        gtoks = sum(results[k][1][2]["completion_tokens"] for k in range(n))
        dp = m1["tfm_prompt_tokens_total"] - m0["tfm_prompt_tokens_total"]
        dg = m1["tfm_generated_tokens_total"] - m0["tfm_generated_tokens_total"]
        check(dp == ptoks, "tfm_prompt_tokens_total grew by %g, usage says %d" % (dp, ptoks))
        check(dg == gtoks, "tfm_generated_tokens_total grew by %g, usage says %d" % (dg, gtoks))
        return "500 of 500 requests from 32 threads identical to their solo runs; metrics agree"


def error_of(r, status, what):
    check(r.status == status, "%s: status %d, expected %d: %r" % (what, r.status, status,
                                                                r.data[:300]))
    e = r.json().get("error")
    check(isinstance(e, dict) and isinstance(e.get("message"), str) and e["message"]
          and isinstance(e.get("type"), str), "%s: error object %r" % (what, r.data[:300]))
    return e


def send_large(port, path, size, limit=30):
    """A POST with a body of `size` bytes, written while watching for a reply:
    the status, or None if the server closed without one."""
    s = socket.create_connection((HOST, port), timeout=limit)
    try:
        s.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\nConnection: close\r\n\r\n" % (path, HOST, size)).encode())
        piece = b"[" + b"1," * 32767 + b"1]"
        sent, reply = 0, b""
        s.setblocking(False)
        deadline = time.monotonic() + limit
        closed = False
        while time.monotonic() < deadline:
            rd, wr, _ = select.select([s], [s] if sent < size else [], [], 0.5)
            if rd:
                try:
                    chunk = s.recv(65536)
                except (ConnectionResetError, BlockingIOError):
                    chunk = b""
                if not chunk:
                    closed = True
                    break
                reply += chunk
                if b"\r\n\r\n" in reply:
                    break
            if wr:
                try:
                    sent += s.send(piece[:size - sent])
                except (BrokenPipeError, ConnectionResetError):
                    sent = size
        if not reply and not closed:
            return "timeout"
        m = re.match(rb"HTTP/1\.[01] (\d{3})", reply)
        return int(m.group(1)) if m else None
    finally:
        s.close()


def sc_bad(cmd, opts):
    with Server(cmd, []) as s:
        p = s.port
        ctx = s.ctx
        good = lambda: run_cmpl(p, "still serving", 4)[:3]
        ref = good()
        e = error_of(request(p, "POST", "/v1/completions", raw=b'{"prompt": "hi", '),
                     400, "malformed JSON")
        check(e["type"] == "invalid_request_error", "malformed JSON: type %r" % e["type"])
        error_of(request(p, "POST", "/v1/completions", raw=b"[1, 2]"), 400, "a JSON array body")
        error_of(request(p, "POST", "/v1/completions", raw=b""), 400, "an empty body")
        error_of(request(p, "POST", "/v1/completions", cmpl_body("hi", "x")), 400,
                 "max_tokens \"x\"")
        error_of(request(p, "POST", "/v1/completions", cmpl_body("hi", -1)), 400,
                 "max_tokens -1")
        error_of(request(p, "POST", "/v1/completions", cmpl_body(12, 4)), 400, "prompt 12")
        error_of(request(p, "POST", "/v1/completions", {"max_tokens": 4}), 400, "no prompt")
        error_of(request(p, "POST", "/v1/completions", cmpl_body([1, "a"], 4)), 400,
                 "prompt [1, \"a\"]")
        error_of(request(p, "POST", "/v1/completions", cmpl_body([10 ** 9], 4)), 400,
                 "a token id past the vocabulary")
        error_of(request(p, "POST", "/v1/completions", cmpl_body("hi", 4, temperature="hot")),
                 400, "temperature \"hot\"")
        error_of(request(p, "POST", "/v1/completions", cmpl_body("hi", 4, stream="yes")),
                 400, "stream \"yes\"")
        error_of(request(p, "POST", "/v1/chat/completions",
                         {"messages": {"role": "user", "content": "hi"}, "max_tokens": 4}),
                 400, "messages not a list")
        error_of(request(p, "POST", "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": 5}], "max_tokens": 4}),
                 400, "message content 5")
        error_of(request(p, "POST", "/v1/chat/completions",
                         {"messages": ["hi"], "max_tokens": 4}), 400, "a message not an object")
        error_of(request(p, "POST", "/detokenize", {"tokens": "1 2"}), 400, "tokens \"1 2\"")
        error_of(request(p, "POST", "/tokenize", {"content": 7}), 400, "content 7")
        # A prompt past the context.
        ids = tokenize(p, " ".join(WORDS * (ctx // len(WORDS) + 2)))
        check(len(ids) > ctx, "the long prompt has %d tokens, ctx %d" % (len(ids), ctx))
        e = error_of(request(p, "POST", "/v1/completions", cmpl_body(ids[:ctx + 5], 4)), 400,
                     "a prompt of ctx + 5 tokens")
        error_of(request(p, "POST", "/v1/chat/completions",
                         chat_body(" ".join(WORDS * (ctx // len(WORDS) + 2)), 4)), 400,
                 "a chat past the context")
        # A huge max_tokens: clamped to the context, or refused.
        r = request(p, "POST", "/v1/completions", cmpl_body("hi", 10 ** 12))
        if r.status == 200:
            u = r.json()["usage"]
            check(u["total_tokens"] <= ctx, "max_tokens 1e12: %r past ctx %d" % (u, ctx))
            huge = "clamped"
        else:
            error_of(r, 400, "max_tokens 1e12")
            huge = "refused"
        r = request(p, "POST", "/v1/completions", cmpl_body("hi", 10 ** 6))
        if r.status == 200:
            u = r.json()["usage"]
            check(u["total_tokens"] <= ctx and r.json()["choices"][0]["finish_reason"] in
                  ("length", "stop"), "max_tokens 1e6: %r past ctx %d" % (u, ctx))
            huge += ", 1e6 clamped"
        else:
            error_of(r, 400, "max_tokens 1e6")
            huge += ", 1e6 refused"
        # Unknown paths and methods.
        error_of(request(p, "GET", "/v1/nothing"), 404, "GET /v1/nothing")
        error_of(request(p, "POST", "/nothing", {"a": 1}), 404, "POST /nothing")
        r = request(p, "GET", "/v1/completions")
        check(r.status == 405, "GET /v1/completions: status %d, expected 405" % r.status)
        error_of(request(p, "GET", "/tokenize"), 405, "GET /tokenize")
        # A 10 MB body.
        st = send_large(p, "/v1/completions", 10 * 1024 * 1024)
        check(st == 413, "a 10 MB body: %s, expected 413" % st)
        check(good() == ref, "a request after the bad ones differs")
        check(s.alive(), "the server died")
        wait_metric(p, "tfm_requests_running", lambda v: v == 0)
        return "malformed JSON, wrong types, past the context, huge max_tokens (%s), " \
            "404, 405, 413; still serving" % huge


def sc_methods(cmd, opts):
    """A method a path does not take is 405, whichever the path."""
    with Server(cmd, []) as s:
        p = s.port
        for method, path in [("GET", "/v1/completions"), ("GET", "/v1/chat/completions"),
                             ("GET", "/tokenize"), ("GET", "/detokenize"),
                             ("POST", "/v1/models"), ("POST", "/health"), ("POST", "/metrics"),
                             ("PUT", "/v1/completions"), ("DELETE", "/v1/models")]:
            body = {} if method in ("POST", "PUT") else None
            r = request(p, method, path, body)
            error_of(r, 405, "%s %s" % (method, path))
            want = "POST" if path in ("/v1/completions", "/v1/chat/completions", "/tokenize",
                                      "/detokenize") else "GET"
            allow = [m.strip() for m in r.headers.get("allow", "").split(",")]
            check(want in allow and method not in allow,
                  "%s %s: Allow %r" % (method, path, r.headers.get("allow")))
        return "405 with Allow for a method a path does not take"


def sc_nul(cmd, opts):
    """A NUL character (\\u0000) in a JSON string is valid JSON: /tokenize and
    /detokenize take it and give it back."""
    with Server(cmd, []) as s:
        p = s.port
        text = "a\u0000b"
        ids = post(p, "/tokenize", {"content": text})["tokens"]
        back = post(p, "/detokenize", {"tokens": ids})["content"]
        check(back == text, "/detokenize of /tokenize of %r gave %r" % (text, back))
        return "a NUL inside a JSON string round-trips"


def slow_client(port, mode, result, limit=20):
    """Sends a request one byte a second; result[0] is the seconds until the
    server closed the connection (or answered), None past the limit."""
    body = json.dumps(cmpl_body("slow", 2)).encode()
    head = ("POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (HOST, len(body))).encode()
    if mode == "headers":
        fast, slow = b"", head + body
    else:
        fast, slow = head + body[:2], body[2:]
    t0 = time.monotonic()
    s = socket.create_connection((HOST, port), timeout=5)
    try:
        s.sendall(fast)
        for k in range(len(slow)):
            if time.monotonic() - t0 > limit:
                result[0] = None
                return
            try:
                s.send(slow[k:k + 1])
            except OSError:
                result[0] = ("closed", time.monotonic() - t0)
                return
            rd, _, _ = select.select([s], [], [], 1.0)
            if rd:
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                m = re.match(rb"HTTP/1\.[01] (\d{3})", data)
                result[0] = ("status %s" % m.group(1).decode() if m else "closed",
                             time.monotonic() - t0)
                return
        result[0] = ("sent everything", time.monotonic() - t0)
    finally:
        s.close()


def sc_slow(cmd, opts, modes=("body",) * 4):
    """Clients that send a byte a second (their body, or with modes
    "headers" their headers too) are dropped by --timeout 3, while other
    requests are served."""
    with Server(cmd, ["--timeout", "3"]) as s:
        p = s.port
        ref = run_cmpl(p, "meanwhile", 6)[:3]
        res = [[None] for _ in modes]
        ts = [threading.Thread(target=slow_client, args=(p, m, r), daemon=True)
              for m, r in zip(modes, res)]
        for t in ts:
            t.start()
        time.sleep(0.5)
        worst = 0.0
        for _ in range(8):
            t0 = time.monotonic()
            check(run_cmpl(p, "meanwhile", 6)[:3] == ref, "a request beside slow clients differs")
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.1)
        check(worst < 2.8, "a request took %.2f s beside slow clients (--timeout 3)" % worst)
        for t in ts:
            t.join(30)
        for m, r in zip(modes, res):
            check(r[0] is not None, "a client sending its %s a byte a second was not "
                  "dropped in 20 s (--timeout 3)" % m)
            how, secs = r[0]
            check(how == "closed" or how.startswith("status 4"),
                  "a slow client (%s): %s" % (m, how))
            check(secs < 10, "a slow client (%s) dropped after %.1f s, --timeout 3" % (m, secs))
        check(s.alive(), "the server died")
        check(run_cmpl(p, "meanwhile", 6)[:3] == ref, "a request after slow clients differs")
        return "%d clients sending their %s a byte a second dropped; others served meanwhile" \
            % (len(modes), " and ".join(sorted(set(modes))))


def sc_slow_headers(cmd, opts):
    return sc_slow(cmd, opts, ("headers", "body", "headers", "body"))


def sc_cut(cmd, opts):
    with Server(cmd, []) as s:
        p = s.port
        # A long stream (to near the end of the context), so that it still
        # runs when the client goes.
        n = s.ctx - 40
        prompt = long_prompt(p, n)
        m0 = metrics(p)
        body = cmpl_body(prompt, n, stream=True)
        conn = http.client.HTTPConnection(HOST, p, timeout=30)
        conn.request("POST", "/v1/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        sock = conn.sock
        r = conn.getresponse()
        check(r.status == 200, "stream: status %d" % r.status)
        events = 0
        while events < 2:
            line = r.readline()
            check(line, "the stream ended after %d events" % events)
            if line.startswith(b"data: "):
                events += 1
        during = metrics(p)
        check(during["tfm_requests_running"] == 1, "running while streaming: %g"
              % during["tfm_requests_running"])
        check(during["tfm_kv_blocks_in_use"] > m0["tfm_kv_blocks_in_use"],
              "KV blocks in use %g while streaming, %g before"
              % (during["tfm_kv_blocks_in_use"], m0["tfm_kv_blocks_in_use"]))
        sock.shutdown(socket.SHUT_RDWR)
        r.close()
        conn.close()
        wait_metric(p, "tfm_requests_running", lambda v: v == 0)
        m1 = wait_metric(p, "tfm_requests_cancelled_total",
                         lambda v: v == m0["tfm_requests_cancelled_total"] + 1)
        gen = m1["tfm_generated_tokens_total"] - m0["tfm_generated_tokens_total"]
        check(gen < n, "the cut stream generated all its %d tokens" % n)
        check(m1["tfm_kv_blocks_in_use"] < during["tfm_kv_blocks_in_use"]
              or m1["tfm_kv_blocks_in_use"] <= m0["tfm_kv_blocks_in_use"],
              "KV blocks in use %g after the cut, %g while streaming, %g before"
              % (m1["tfm_kv_blocks_in_use"], during["tfm_kv_blocks_in_use"],
                 m0["tfm_kv_blocks_in_use"]))
        # The blocks are free again: a request as long still runs whole.
        check(run_cmpl(p, prompt, n)[1] == "length", "a request after the cut")
        # Clients gone before their first token (in the prefill of a long
        # prompt) are cancelled too.
        ids = tokenize(p, " ".join(WORDS * (s.ctx // len(WORDS) + 2)))[:s.ctx - 200]
        raw = json.dumps(cmpl_body(ids, 190, stream=True)).encode()
        m0 = metrics(p)
        for _ in range(3):
            c = socket.create_connection((HOST, p), timeout=10)
            c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                      b"application/json\r\nContent-Length: %d\r\n\r\n" % len(raw) + raw)
            time.sleep(0.01)
            c.close()
        m1 = wait_metric(p, "tfm_requests_cancelled_total",
                         lambda v: v == m0["tfm_requests_cancelled_total"] + 3)
        m1 = wait_metric(p, "tfm_requests_running", lambda v: v == 0)
        check(m1["tfm_requests_failed_total"] == m0["tfm_requests_failed_total"],
              "cancelled requests counted as failed")
        return "a stream cut after 2 chunks is cancelled and frees its KV blocks; " \
            "clients gone during prefill too"


def sc_cut_nonstream(cmd, opts):
    """A client that leaves before its non-streamed answer cancels its
    request: the generation stops well before its max_tokens."""
    with Server(cmd, []) as s:
        p = s.port
        n = s.ctx - 40
        prompt = long_prompt(p, n)
        t0 = time.monotonic()
        run_cmpl(p, prompt, n)
        whole = time.monotonic() - t0
        m0 = metrics(p)
        raw = json.dumps(cmpl_body(prompt, n)).encode()
        c = socket.create_connection((HOST, p), timeout=10)
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nContent-Length: %d\r\n\r\n" % len(raw) + raw)
        wait_metric(p, "tfm_requests_running", lambda v: v == 1)
        c.close()
        m1 = wait_metric(p, "tfm_requests_running", lambda v: v == 0, limit=60)
        gen = m1["tfm_generated_tokens_total"] - m0["tfm_generated_tokens_total"]
        check(m1["tfm_requests_cancelled_total"] == m0["tfm_requests_cancelled_total"] + 1
              and gen < n, "a non-streamed request whose client left ran on: %g of %d tokens "
              "(%.1f s for all of them), cancelled +%g" % (
                  gen, n, whole,
                  m1["tfm_requests_cancelled_total"] - m0["tfm_requests_cancelled_total"]))
        return "a non-streamed request whose client left is cancelled"


def sc_queue(cmd, opts):
    """--parallel 1 --queue 1: one request runs, one waits, the others get 503
    with Retry-After. The requests go one after another, each once /metrics
    shows the one before it running or waiting, so that what is running and
    what is waiting does not depend on when the engine takes a request from
    the queue."""
    with Server(cmd, ["--parallel", "1", "--queue", "1"]) as s:
        p = s.port
        n = s.ctx - 40
        prompt = long_prompt(p, n)
        ref = run_cmpl(p, prompt, n)[:3]
        out = [None, None]

        def send(k):
            try:
                out[k] = request(p, "POST", "/v1/completions", cmpl_body(prompt, n), timeout=300)
            except Exception as e:
                out[k] = e

        t0 = threading.Thread(target=send, args=(0,), daemon=True)
        t0.start()
        wait_metric(p, "tfm_requests_running", lambda v: v == 1)
        t1 = threading.Thread(target=send, args=(1,), daemon=True)
        t1.start()
        m = wait_metric(p, "tfm_requests_waiting", lambda v: v == 1)
        check(m["tfm_requests_running"] == 1, "running %g" % m["tfm_requests_running"])
        for k in range(2):
            r = request(p, "POST", "/v1/completions", cmpl_body(prompt, n))
            error_of(r, 503, "a third request with 1 running and 1 waiting")
            ra = r.headers.get("retry-after")
            check(ra is not None and ra.strip().isdigit() and int(ra) > 0,
                  "503 without a Retry-After of seconds: %r" % r.headers)
        t0.join(300)
        t1.join(300)
        for k, r in enumerate(out):
            check(isinstance(r, Response) and r.status == 200, "request %d: %r" % (k, r))
            c = r.json()
            got = (c["choices"][0]["text"], c["choices"][0]["finish_reason"],
                   core_usage(c["usage"]))
            check(got == ref, "the %s request differs from its solo run"
                  % ("running", "waiting")[k])
        m = wait_metric(p, "tfm_requests_running", lambda v: v == 0)
        check(m["tfm_requests_waiting"] == 0, "queue not empty after")
        return "--parallel 1 --queue 1: one runs, one waits, more get 503 with Retry-After"


def sc_queue_burst(cmd, opts):
    """4 requests at once with --parallel 1 --queue 1: 2 served, 2 refused."""
    with Server(cmd, ["--parallel", "1", "--queue", "1"]) as s:
        p = s.port
        n = s.ctx - 40
        prompt = long_prompt(p, n)
        out = in_threads([lambda: request(p, "POST", "/v1/completions", cmpl_body(prompt, n),
                                          timeout=300)] * 4)
        check(all(o[0] == "ok" for o in out), "requests failed: %r" % out)
        st = sorted(o[1].status for o in out)
        check(st == [200, 200, 503, 503], "--parallel 1 --queue 1, 4 at once: statuses %r, "
              "expected 2 served and 2 refused" % st)
        return "4 at once: 2 served, 2 refused"


def sc_connect_burst(cmd, opts, n=64):
    """64 clients connecting while the server cannot accept (stopped with
    SIGSTOP, as a busy machine would hold it): the kernel queues their
    connections for the listening socket, and each POST is answered once
    the server runs again, none reset or left without an answer. (With
    cpp-httplib's backlog of 5, the kernel answered the connections past it
    with SYN cookies and reset those whose body came in a segment after the
    headers, as in the concurrency test's failure on a busy machine.)"""
    with Server(cmd, []) as s:
        p = s.port
        os.kill(s.proc.pid, signal.SIGSTOP)
        try:
            out = [None] * n
            connected = threading.Semaphore(0)

            def client(k):
                try:
                    sock = socket.create_connection((HOST, p), timeout=60)
                    # As http.client sends a POST: no Nagle, the headers and
                    # the body in segments of their own.
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    connected.release()
                    with sock:
                        body = json.dumps({"content": "burst %d" % k}).encode()
                        sock.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\n"
                                     b"Content-Type: application/json\r\n"
                                     b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                                     % len(body))
                        time.sleep(0.05)
                        sock.sendall(body)
                        data = b""
                        while True:
                            b = sock.recv(65536)
                            if not b:
                                break
                            data += b
                    out[k] = data.split(b"\r\n", 1)[0].decode("latin-1")
                except Exception as e:  # reported below
                    connected.release()
                    out[k] = "%s: %s" % (type(e).__name__, e)

            ts = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(n)]
            for t in ts:
                t.start()
            # Each connected (or 5 s: a connection the kernel does not queue
            # waits for its SYN's retry), and its request sent.
            deadline = time.monotonic() + 5
            for _ in range(n):
                connected.acquire(timeout=max(0.01, deadline - time.monotonic()))
            time.sleep(0.5)
        finally:
            os.kill(s.proc.pid, signal.SIGCONT)
        for t in ts:
            t.join(90)
        bad = ["#%d: %r" % (k, o) for k, o in enumerate(out) if o != "HTTP/1.1 200 OK"]
        check(not bad, "%d of %d clients connecting at once not answered 200: %s"
              % (len(bad), n, "; ".join(bad[:4])))
        return "%d clients connecting at once while the server was stopped: each answered" % n


def sc_sigterm(cmd, opts):
    with Server(cmd, []) as s:
        p = s.port
        n = s.ctx - 40
        prompt = long_prompt(p, n)
        ref = run_cmpl(p, prompt, n)[:3]
        body = cmpl_body(prompt, n, stream=True, stream_options={"include_usage": True})
        conn = http.client.HTTPConnection(HOST, p, timeout=60)
        conn.request("POST", "/v1/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        check(r.status == 200, "stream: status %d" % r.status)
        first = r.readline() + r.readline()
        check(first.startswith(b"data: "), "first event %r" % first)
        s.proc.send_signal(signal.SIGTERM)
        # New requests are refused (no connection, or an error status) while
        # the running one finishes.
        time.sleep(0.3)
        refused = False
        try:
            r2 = request(p, "POST", "/v1/completions", cmpl_body("late", 2), timeout=10)
            refused = r2.status >= 500
        except (OSError, http.client.HTTPException):
            refused = True
        check(refused, "a request after SIGTERM was served")
        rest = r.read()
        conn.close()
        events = parse_sse(first + rest, "the stream across SIGTERM")
        usage = core_usage(events[-1]["usage"])
        text = "".join(e["choices"][0]["text"] for e in events[:-1])
        got = (text, events[-2]["choices"][0]["finish_reason"], usage)
        check(got == ref, "the stream across SIGTERM: %r, solo %r" % (got, ref))
        try:
            rc = s.proc.wait(30)
        except subprocess.TimeoutExpired:
            raise Failure("the server did not exit in 30 s after SIGTERM")
        s.reader.join(5)
        check(rc == 0, "exit status %d after SIGTERM" % rc)
        check("serve: stopped" in s.lines, "no 'serve: stopped' line")
        return "SIGTERM: the running stream finished whole, new requests refused, exit 0"


def sc_prefix(cmd, opts):
    with Server(cmd, []) as s:
        p = s.port
        base = " ".join(prompt_of(50 + k, 10) for k in range(20))
        run_cmpl(p, base + " first", 8)
        m0 = metrics(p)
        b = run_cmpl(p, base + " second", 8)
        m1 = metrics(p)
        check(m1["tfm_prefix_cache_hits_total"] == m0["tfm_prefix_cache_hits_total"] + 1,
              "no prefix cache hit for a shared prefix")
        reused = m1["tfm_prefix_tokens_reused_total"] - m0["tfm_prefix_tokens_reused_total"]
        shared = len(tokenize(p, base))
        check(0 < reused <= shared, "%g tokens reused of a %d-token shared prefix"
              % (reused, shared))
        cached = (b[3]["usage"].get("prompt_tokens_details") or {}).get("cached_tokens")
        check(cached == reused, "usage.prompt_tokens_details.cached_tokens %r, /metrics says "
              "%g tokens reused" % (cached, reused))
        s2 = Server(cmd, [])
        try:
            solo = run_cmpl(s2.port, base + " second", 8)
        finally:
            s2.stop()
        check(b[:3] == solo[:3], "a prefix-cached request differs from a fresh server's")
        return "a shared prefix is reused, the output unchanged"


def sc_http10(cmd, opts):
    """An HTTP/1.0 client (no chunked transfer encoding): a stream comes as
    plain server-sent events, the connection closed at its end, and equals
    the HTTP/1.1 client's stream; a non-streamed answer has its length."""
    with Server(cmd, []) as s:
        p = s.port
        body = json.dumps(cmpl_body(prompt_of(11, 5), 6, stream=True)).encode()
        want, _ = stream(p, "/v1/completions", cmpl_body(prompt_of(11, 5), 6, stream=True))

        def raw(data):
            c = socket.create_connection((HOST, p), timeout=30)
            c.sendall(b"POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(data) + data)
            got = b""
            while True:  # to the close (bounded by the socket's timeout)
                part = c.recv(65536)
                if not part:
                    break
                got += part
            c.close()
            head, _, rest = got.partition(b"\r\n\r\n")
            return head.decode("latin-1"), rest

        head, rest = raw(body)
        check(head.startswith("HTTP/1.") and " 200 " in head.split("\r\n")[0],
              "HTTP/1.0 stream: %r" % head[:60])
        check("chunked" not in head.lower(), "HTTP/1.0 stream sent chunked: %r" % head)
        check(rest.startswith(b"data: ") and rest.endswith(b"data: [DONE]\n\n"),
              "HTTP/1.0 stream body: %r" % rest[:80])
        got = parse_sse(rest, "HTTP/1.0 stream")
        strip = lambda evs: [{k: v for k, v in e.items() if k not in ("id", "created")}
                             if isinstance(e, dict) else e for e in evs]
        check(strip(got) == strip(want), "HTTP/1.0 stream %r, HTTP/1.1 stream %r"
              % (got[:2], want[:2]))
        head, rest = raw(json.dumps(cmpl_body(prompt_of(11, 5), 6)).encode())
        length = re.search(r"(?im)^content-length:\s*(\d+)", head)
        check(length and int(length.group(1)) == len(rest),
              "HTTP/1.0 answer: %r, %d bytes" % (head, len(rest)))
        return "HTTP/1.0: a plain event stream closed at its end, equal to HTTP/1.1's"


def sc_seq2seq(cmd, opts):
    """An encoder-decoder: the prompt is the source, the completion the
    target. Four requests at once (each encoded into its own sequence, the
    targets decoded together) each give the text the executable's own
    --prompt ... --generate gives, greedy; a source as long as the context
    is taken, a longer one refused."""
    prompts = ["translate English to German: hello world", "summarize: the cat sat",
               "a b c d e f g", "question: why is the sky blue?"]
    refs = []
    for q in prompts:
        out = subprocess.run(list(cmd) + ["--prompt", q, "--generate", "10"],
                             capture_output=True, timeout=120)
        check(out.returncode == 0, "%s --prompt: %r" % (cmd[0], out.stderr[-300:]))
        refs.append(out.stdout.decode().rstrip("\n"))
    with Server(cmd, []) as s:
        p = s.port
        got = in_threads([lambda q=q: run_cmpl(p, q, 10)[0] for q in prompts])
        for q, g, r in zip(prompts, got, refs):
            check(g == ("ok", r), "source %r: the server's %r, the executable's %r"
                  % (q, g, r))
        ids = tokenize(p, " ".join(WORDS * 40))
        run_cmpl(p, ids[:s.ctx], 2)
        r = request(p, "POST", "/v1/completions", cmpl_body(ids[:s.ctx + 1], 2))
        check(r.status == 400, "a source past the context: status %d" % r.status)
        return "%d sources served together, each target the executable's" % len(prompts)


def sc_prefix_running(cmd, opts):
    """A request whose prompt shares whole prefill chunks with a request
    still running takes that request's KV blocks (tfm_session_share: the
    blocks counted, not copied) and gives a fresh server's output; the
    running one is unchanged; the paged cache's gauges add up."""
    base = " ".join(prompt_of(700 + k, 12) for k in range(24))
    first, second = base + " one", base + " two"
    with Server(cmd, []) as s:
        shared = len(tokenize(s.port, base))
        # The first runs long (to the context's end, no EOS wanted).
        long_tokens = 1024 - shared - 8
        solo_first = run_cmpl(s.port, first, long_tokens)[:3]
    with Server(cmd, []) as s:
        solo_second = run_cmpl(s.port, second, 24)[:3]
    with Server(cmd, ["--parallel", "2"]) as s:
        p = s.port
        check(shared > 256, "the shared prefix is shorter than 2 chunks")
        m0 = metrics(p)
        check(m0["tfm_kv_blocks_in_use"] == 0 and m0["tfm_kv_blocks_total"] > 0,
              "an idle server holds %g of %g KV blocks" % (m0["tfm_kv_blocks_in_use"],
                                                          m0["tfm_kv_blocks_total"]))
        res = {}

        def long_first():
            res["first"] = run_cmpl(p, first, long_tokens)

        t = threading.Thread(target=long_first, daemon=True)
        t.start()
        wait_metric(p, "tfm_generated_tokens_total",
                    lambda v: v > m0["tfm_generated_tokens_total"])
        got = run_cmpl(p, second, 24)
        m1 = metrics(p)
        t.join(120)
        check("first" in res, "the long request did not end")
        check(m1["tfm_prefix_shared_total"] == m0["tfm_prefix_shared_total"] + 1,
              "the second request did not share the running one's blocks "
              "(tfm_prefix_shared_total %g)" % m1["tfm_prefix_shared_total"])
        reused = m1["tfm_prefix_tokens_reused_total"] - m0["tfm_prefix_tokens_reused_total"]
        check(256 <= reused <= shared, "%g tokens reused of a %d-token shared prefix"
              % (reused, shared))
        check(got[:3] == solo_second, "the sharing request differs from a fresh server's")
        check(res["first"][:3] == solo_first, "the running request differs from a fresh "
              "server's")
        m2 = wait_metric(p, "tfm_requests_running", lambda v: v == 0)
        check(0 < m2["tfm_kv_blocks_in_use"] <= m2["tfm_kv_blocks_allocated"]
              <= m2["tfm_kv_blocks_total"],
              "KV blocks held %g, allocated %g, at most %g"
              % (m2["tfm_kv_blocks_in_use"], m2["tfm_kv_blocks_allocated"],
                 m2["tfm_kv_blocks_total"]))
        return "a running request's prefix blocks shared (%d tokens), both outputs " \
            "a fresh server's" % reused


def sc_prefix_load(cmd, opts):
    """Prompts that share long prefixes (several whole prefill chunks), 96
    requests from 16 threads: each output is the one a fresh server gives
    the prompt (nothing cached), and prefixes were reused."""
    bases = [" ".join(prompt_of(200 + b * 31 + k, 12) for k in range(30)) for b in range(2)]
    prompts = [bases[k % 2] + " " + prompt_of(300 + k, 1 + k) for k in range(8)]
    refs = []
    for k, q in enumerate(prompts):
        with Server(cmd, []) as s:
            api = ("cmpl", "chat")[k % 2]
            refs.append(((run_cmpl if api == "cmpl" else run_chat)(s.port, q, 12)[:3], api))
    with Server(cmd, ["--parallel", "6"]) as s:
        p = s.port
        check(len(tokenize(p, bases[0])) > 256, "the shared prefix is shorter than 2 chunks")
        m0 = metrics(p)
        n = 96

        def job(k):
            i = (k * 3) % len(prompts)
            ref, api = refs[i]
            if k % 3 == 0:
                got = run_stream(p, api, prompts[i], 12)
            else:
                got = (run_cmpl if api == "cmpl" else run_chat)(p, prompts[i], 12)[:3]
            check(got == ref, "prompt %d (%s): %r, a fresh server's %r" % (i, api, got, ref))
            return True

        out = []
        lock = threading.Lock()
        nxt = [0]

        def worker():
            while True:
                with lock:
                    k = nxt[0]
                    if k >= n:
                        return
                    nxt[0] += 1
                try:
                    job(k)
                    r = "ok"
                except Exception as e:
                    r = "%s: %s" % (type(e).__name__, e)
                with lock:
                    out.append(r)

        ts = [threading.Thread(target=worker, daemon=True) for _ in range(16)]
        for t in ts:
            t.start()
        deadline = time.monotonic() + 300
        for t in ts:
            t.join(max(0.1, deadline - time.monotonic()))
        check(len(out) == n, "%d of %d requests done" % (len(out), n))
        bad = [r for r in out if r != "ok"]
        check(not bad, "%d of %d wrong: %s" % (len(bad), n, "; ".join(bad[:3])))
        m1 = metrics(p)
        check(m1["tfm_prefix_cache_hits_total"] > m0["tfm_prefix_cache_hits_total"],
              "no prefix reused")
        return "%d requests sharing prefixes identical to a fresh server's outputs" % n


SCENARIOS = {"basic": sc_basic, "sampling": sc_sampling, "utf8": sc_utf8, "concurrent": sc_concurrent,
             "load": sc_load, "bad": sc_bad, "slow": sc_slow, "methods": sc_methods, "nul": sc_nul,
             "slow-headers": sc_slow_headers, "cut": sc_cut,
             "cut-nonstream": sc_cut_nonstream,
             "queue": sc_queue, "queue-burst": sc_queue_burst,
             "connect-burst": sc_connect_burst, "sigterm": sc_sigterm, "prefix": sc_prefix,
             "prefix-load": sc_prefix_load, "prefix-running": sc_prefix_running,
             "http10": sc_http10, "seq2seq": sc_seq2seq}


def run_command(cmd, shell_cmd):
    with Server(cmd, []) as s:
        env = dict(os.environ, PORT=str(s.port),
                   TFM_SERVE_URL="http://%s:%d" % (HOST, s.port))
        # In a process group of its own: past the limit the shell and what
        # it started (node, curl) are killed together, so that none is left
        # holding the test's output open.
        proc = subprocess.Popen(["sh", "-c", shell_cmd], env=env, start_new_session=True)
        try:
            proc.wait(300)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            print("serve_check: the command ran past 300 s", file=sys.stderr)
            return 1
        if not s.alive():
            print("serve_check: the server died:\n" + s.stderr(), file=sys.stderr)
            return 1
        return proc.returncode


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        print("usage: serve_check.py [--scenario NAME ...] [--run CMD] -- EXE ARGS...",
              file=sys.stderr)
        return 2
    cut = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", action="append", default=[], choices=sorted(SCENARIOS))
    ap.add_argument("--run")
    ap.add_argument("--chat-prompt", help="the chat template rendered for [{user: "
                    "'Say something.'}] with add_generation_prompt (tfm-chat-template)")
    ap.add_argument("--exe-tokenize", metavar="TOKENIZER",
                    help="compare /tokenize with EXE --tokenizer TOKENIZER --raw --tokenize")
    opts = ap.parse_args(argv[:cut])
    cmd = argv[cut + 1:]
    if opts.run:
        return run_command(cmd, opts.run)
    failed = 0
    for name in opts.scenario:
        t0 = time.monotonic()
        try:
            what = SCENARIOS[name](cmd, opts)
            print("%s: ok: %s" % (name, what), flush=True)
            print("  (%s: %.1f s)" % (name, time.monotonic() - t0), file=sys.stderr)
        except Exception as e:
            failed += 1
            why = str(e) if isinstance(e, Failure) else "%s: %s" % (type(e).__name__, e)
            print("%s: FAIL: %s" % (name, why), flush=True)
            if STARTED:
                print("the server's stderr (%s):\n%s" % (" ".join(STARTED[-1].cmd),
                                                         STARTED[-1].stderr()), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        for server in STARTED:  # none should be left; whatever happened, none is
            server.stop()
    sys.exit(rc)
