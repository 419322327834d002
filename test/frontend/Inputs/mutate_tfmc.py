#!/usr/bin/env python3
"""Feeds mutated versions of the files in models/ through tfmc.

Mutations: byte flips, random bytes, truncations, duplicated and deleted
spans, digit runs, deep nesting, very long lines. Fails if any run exits with
a status other than 0 or 1 (a crash or an assertion) or takes longer than
the time limit. Deterministic for a given seed.

usage: mutate_tfmc.py TFMC MODELS_DIR WORK_DIR [--count N] [--seed S]
"""
import argparse
import concurrent.futures
import os
import random
import subprocess
import sys
import tempfile
import time

def mutate(rng, data):
    kind = rng.randrange(10)
    n = len(data)
    if n == 0:
        return data, "empty"
    if kind == 0:  # flip bits in a few bytes
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b), "bitflip"
    if kind == 1:  # random bytes anywhere (binary garbage, NUL, non-UTF-8)
        b = bytearray(data)
        for _ in range(rng.randint(1, 16)):
            b[rng.randrange(n)] = rng.randrange(256)
        return bytes(b), "randbytes"
    if kind == 2:  # truncate
        return data[: rng.randrange(n)], "truncate"
    if kind == 3:  # duplicate a span
        i = rng.randrange(n)
        j = min(n, i + rng.randint(1, 200))
        k = rng.randrange(n)
        return data[:k] + data[i:j] + data[k:], "duplicate"
    if kind == 4:  # delete a span
        i = rng.randrange(n)
        j = min(n, i + rng.randint(1, 100))
        return data[:i] + data[j:], "delete"
    if kind == 5:  # grow a number (overflow, huge sizes)
        digits = [i for i, c in enumerate(data) if chr(c).isdigit()]
        if not digits:
            return data, "nodigits"
        i = rng.choice(digits)
        return data[:i] + b"9" * rng.randint(1, 30) + data[i:], "bignum"
    if kind == 6:  # deep nesting of parentheses or sections
        depth = rng.choice([50, 500, 20000])
        if rng.randrange(2):
            ins = b"x = " + b"(" * depth + b"1" + b")" * rng.randrange(depth + 1) + b"\n"
        else:
            ins = b"attention { " * depth + b"}" * rng.randrange(depth + 1) + b"\n"
        k = rng.randrange(n)
        return data[:k] + ins + data[k:], "nesting"
    if kind == 7:  # a very long line
        k = rng.randrange(n)
        filler = rng.choice([b"a", b"1", b"#", b" ", b"(", b"+1"])
        return data[:k] + filler * 100000 + data[k:], "longline"
    if kind == 8:  # swap two lines
        lines = data.split(b"\n")
        if len(lines) > 2:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines), "swaplines"
    # replace a word by another word of the language
    words = [b"model", b"arch", b"decoder", b"encoder", b"rope", b"sliding", b"(",
             b")", b"{", b"}", b"=", b";", b"*", b"/", b"-", b"0", b"1e-5",
             b"true", b"heads", b"d_model", b"encoder_decoder", b"image",
             b"cross_attention", b"layers", b"classifier"]
    k = rng.randrange(n)
    return data[:k] + rng.choice(words) + data[k + rng.randrange(8):], "word"

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tfmc")
    ap.add_argument("models")
    ap.add_argument("work")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1.0)
    args = ap.parse_args()

    os.makedirs(args.work, exist_ok=True)
    sources = sorted(f for f in os.listdir(args.models) if f.endswith(".tfm"))
    originals = [open(os.path.join(args.models, f), "rb").read() for f in sources]
    rng = random.Random(args.seed)
    jobs = []
    for i in range(args.count):
        src = rng.randrange(len(originals))
        data, kind = originals[src], ""
        for _ in range(rng.randint(1, 3)):
            data, k = mutate(rng, data)
            kind += k + "+"
        path = os.path.join(args.work, "m%05d.tfm" % i)
        with open(path, "wb") as f:
            f.write(data)
        emit = ["--emit=tfm", "--emit=json", "--emit=ast", "--emit=tokens"][i % 4]
        jobs.append((path, sources[src], kind.rstrip("+"), emit))

    # The limit is on CPU time (user + system of the tfmc process), which
    # measures the work a mutation causes; wall time also counts the waits
    # of a machine busy with other tests (lit runs suites side by side), and
    # made this test flaky. A wall-clock limit of 30 x still catches hangs.
    def run(job):
        path, src, kind, emit = job
        with tempfile.TemporaryFile() as errf:
            p = subprocess.Popen([args.tfmc, path, emit, "-o", os.devnull],
                                 stdout=subprocess.DEVNULL, stderr=errf)
            deadline = time.monotonic() + args.timeout * 30
            while True:
                pid, status, usage = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    p.kill()
                    pid, status, usage = os.wait4(p.pid, 0)
                    p.returncode = "timeout"
                    break
                time.sleep(0.005)
            if p.returncode != "timeout":
                p.returncode = os.waitstatus_to_exitcode(status)
            errf.seek(0)
            err = errf.read()[-400:].decode("utf-8", "replace")
        return job, p.returncode, usage.ru_utime + usage.ru_stime, err

    failures, slowest, codes = [], (0.0, ""), {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        for job, rc, dt, err in ex.map(run, jobs):
            codes[rc] = codes.get(rc, 0) + 1
            if dt > slowest[0]:
                slowest = (dt, job[0])
            if rc not in (0, 1) or dt > args.timeout:
                failures.append((job, rc, dt, err))
            else:
                os.remove(job[0])
    print("ran %d mutations: exit codes %s; slowest %.3f s of CPU (%s)" % (
        len(jobs), dict(sorted(codes.items(), key=str)), slowest[0], slowest[1]))
    for (path, src, kind, emit), rc, dt, err in failures[:20]:
        print("FAIL %s (from %s, %s, %s): exit %s in %.3fs\n%s" % (path, src, kind, emit, rc, dt, err))
    print("%d passed, %d failed" % (len(jobs) - len(failures), len(failures)))
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
