#!/usr/bin/env python3
"""Tensor parallelism end to end: a model of tp.tfm compiled for one process
and with --tensor-parallel N, run on the same random weights and inputs, the
N ranks under mpirun; their outputs must agree.

    check_tp.py --tfmc TFMC --mpirun MPIRUN --work DIR --ranks 2,4 MODEL...

MODEL is a model of tp.tfm, or FILE.tfm:MODEL.

For each model and N it prints
    PASS MODEL np=N forward: max |tp - one| / max |one| = ...
and for models with an LM head also a greedy generation of 12 tokens
(ids identical, every step's logits within the tolerance, 1e-5 relative to
the largest logit). Exits 1 if any check fails.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# The tests run as root in CI; Open MPI refuses that unless told.
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
TFM = os.path.join(HERE, "tp.tfm")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s" % (" ".join(cmd), r.returncode,
                                                  (r.stdout + r.stderr)[-3000:]))
    return r.stdout


def compare(name, one, tp, tol):
    if one.shape != tp.shape:
        return False, "%s: shape %s, one process %s" % (name, list(tp.shape), list(one.shape))
    scale = float(np.max(np.abs(one))) or 1.0
    err = float(np.max(np.abs(tp.astype(np.float64) - one)))
    ok = bool(np.isfinite(tp).all()) and err <= tol * scale
    return ok, "%s: max |tp - one| / max |one| = %.3g" % (name, err / scale)


def inputs_for(desc, work, rng):
    """Random inputs (batch 2, lengths 9 and 6 where the model pads)."""
    files = []
    for t in desc["inputs"]:
        path = os.path.join(work, t["name"] + ".npy")
        if t["usage"] == "tokens":
            arr = rng.integers(0, desc["vocab"], size=(2, 9)).astype(np.int32)
        elif t["usage"] == "lengths":
            arr = np.array([9, 6], dtype=np.int32)
        else:
            raise RuntimeError("no input of role %s in this test" % t["usage"])
        np.save(path, arr)
        files += ["--input", "%s=%s" % (t["name"], path)]
    return files


def check_model(spec, args):
    tfm, _, model = spec.rpartition(":")
    tfm = tfm or TFM
    results = []
    work = os.path.join(args.work, model)
    os.makedirs(work, exist_ok=True)
    desc = json.loads(run([args.tfmc, tfm, "--model", model, "--emit=json"]))
    rng = np.random.default_rng(7)
    inputs = inputs_for(desc, work, rng)
    generates = desc["output"]["kind"] == "lm_head"
    exes = {}
    for n in [1] + args.ranks:
        exes[n] = os.path.join(work, "%s-np%d" % (model, n))
        extra = ["--tensor-parallel", str(n)] if n > 1 else []
        run([args.tfmc, tfm, "--model", model, "-o", exes[n]] + extra)

    def launch(n, argv):
        if n == 1:
            return [exes[1]] + argv
        return shlex.split(args.mpirun) + ["-np", str(n), exes[n]] + argv

    weights = ["--random-weights", "5", "--threads", "1"]
    outs = {}
    for n in [1] + args.ranks:
        out = os.path.join(work, "y-np%d.npy" % n)
        run(launch(n, weights + inputs + ["--output", out]))
        outs[n] = np.load(out)
    for n in args.ranks:
        ok, msg = compare("forward", outs[1], outs[n], args.tol)
        results.append((ok, "%s np=%d %s" % (model, n, msg)))
    if not generates:
        return results

    # Greedy generation: the tokens input as the prompt (the source of an
    # encoder-decoder), 12 tokens.
    prompt = [a for a in inputs if a.startswith("tokens=") or a.startswith("src=")]
    gen = {}
    for n in [1] + args.ranks:
        ids = os.path.join(work, "ids-np%d.npy" % n)
        logits = os.path.join(work, "logits-np%d.npy" % n)
        argv = weights + ["--input", prompt[0], "--generate", "12",
                          "--output", ids, "--logits", logits]
        run(launch(n, argv))
        gen[n] = (np.load(ids), np.load(logits))
    for n in args.ranks:
        same = np.array_equal(gen[1][0], gen[n][0])
        ok, msg = compare("generate logits", gen[1][1], gen[n][1], args.tol)
        results.append((ok and same, "%s np=%d generate: ids %s; %s" % (
            model, n, "identical" if same else "DIFFER %s vs %s" % (
                gen[n][0].tolist(), gen[1][0].tolist()), msg)))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--tfmc", required=True)
    ap.add_argument("--mpirun", required=True, help="the launcher, without -np")
    ap.add_argument("--work", required=True)
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    args.ranks = [int(r) for r in args.ranks.split(",")]
    failed = 0
    for spec in args.models:
        try:
            results = check_model(spec, args)
        except Exception as e:  # one broken model must not hide the others
            results = [(False, "%s: %s: %s" % (spec, type(e).__name__, e))]
        for ok, msg in results:
            print("%s %s" % ("PASS" if ok else "FAIL", msg), flush=True)
            failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
