#!/usr/bin/env python3
"""Peak memory per rank under tensor parallelism: a 212 MB model (d 768,
4 layers, FFN 2048, vocabulary 16000, untied head) read from a safetensors
file by one process and by N ranks; each rank must hold about 1/N of the
weights:

    peak RSS of a rank <= weights / N + (peak RSS of one process - weights) + 32 MB

(the second term is what one process needs besides its weights: code,
libraries, activations). A rank that read or kept the whole tensors would
exceed it by about weights x (1 - 1/N).

    rss_check.py --tfmc TFMC --mpirun MPIRUN --work DIR [--ranks 2,4]
    rss_check.py --child EXE ARGS...   (runs EXE, prints its peak RSS)
"""
import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys

import numpy as np

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

MODEL = """model mem { arch = decoder; vocab = 16000; context = 64; d_model = 768; layers = 4
  embedding { position = rope(theta = 10000) }
  attention { heads = 12; kv_heads = 4; bias = false }
  ffn { hidden = 2048; activation = swiglu; bias = false }
  norm { kind = rmsnorm } }
"""
RSS_RE = re.compile(r"^rss_kb=(\d+)$", re.M)


def child(argv):
    r = subprocess.run(argv)
    print("rss_kb=%d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, flush=True)
    return r.returncode


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit("%s exited %d:\n%s" % (" ".join(cmd), r.returncode,
                                                (r.stdout + r.stderr)[-3000:]))
    return r.stdout


def write_safetensors(path, desc):
    rng = np.random.default_rng(0)
    header, offset, arrays = {}, 0, []
    for p in desc["parameters"]:
        shape = tuple(p["shape"])
        a = (np.ones(shape, np.float32) if p["synthetic"] == "ones"
             else rng.standard_normal(shape, dtype=np.float32) * 0.02)
        header[p["name"]] = {"dtype": "F32", "shape": list(shape),
                             "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        arrays.append(a)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for a in arrays:
            f.write(a.tobytes())
    return offset


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tfmc", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--ranks", default="2,4")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    tfm = os.path.join(args.work, "mem.tfm")
    with open(tfm, "w") as f:
        f.write(MODEL)
    desc = json.loads(sh([args.tfmc, tfm, "--emit=json"]))
    weights = os.path.join(args.work, "mem.safetensors")
    nbytes = write_safetensors(weights, desc)
    tokens = os.path.join(args.work, "tokens.npy")
    np.save(tokens, np.arange(16, dtype=np.int32).reshape(1, 16) * 997 % 16000)
    ranks = [int(r) for r in args.ranks.split(",")]
    me = [sys.executable, os.path.abspath(__file__), "--child"]
    rss = {}
    for n in [1] + ranks:
        exe = os.path.join(args.work, "mem-np%d" % n)
        sh([args.tfmc, tfm, "-o", exe] + (["--tensor-parallel", str(n)] if n > 1 else []))
        run = me + [exe, "--weights", weights, "--input", "tokens=" + tokens,
                    "--threads", "1", "--output", os.path.join(args.work, "y%d.npy" % n)]
        cmd = run if n == 1 else shlex.split(args.mpirun) + ["-np", str(n)] + run
        rss[n] = [int(x) / 1024 for x in RSS_RE.findall(sh(cmd))]
        if len(rss[n]) != n:
            raise SystemExit("expected %d RSS figures, got %s" % (n, rss[n]))
    mb = nbytes / 2**20
    rest = rss[1][0] - mb
    print("one process: peak RSS %.0f MB, weights %.0f MB" % (rss[1][0], mb))
    failed = 0
    for n in ranks:
        limit = mb / n + rest + 32
        ok = max(rss[n]) <= limit
        failed += not ok
        print("%s np=%d: peak RSS per rank %s MB (weights / %d = %.0f MB; limit %.0f MB)" % (
            "PASS" if ok else "FAIL", n, ", ".join("%.0f" % x for x in rss[n]), n, mb / n, limit))
    y1 = np.load(os.path.join(args.work, "y1.npy"))
    for n in ranks:
        yn = np.load(os.path.join(args.work, "y%d.npy" % n))
        err = float(np.max(np.abs(yn - y1))) / float(np.max(np.abs(y1)))
        ok = err <= 1e-5
        failed += not ok
        print("%s np=%d: max |tp - one| / max |one| = %.3g" % ("PASS" if ok else "FAIL", n, err))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
