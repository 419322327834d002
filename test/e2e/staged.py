#!/usr/bin/env python3
"""Runs parity cases that `parity.py --stage` prepared, and compares each
output with the PyTorch output saved beside it (numpy only: the machine
that runs them needs neither tfmc nor PyTorch, only the staged directories,
which hold the compiled model, its weights, inputs and expected output).

usage: staged.py DIR... ; prints PASS or FAIL per case, exits 1 on a failure.
"""
import json
import os
import subprocess
import sys

import numpy as np


def check(work, case, expected, timeout=None):
    """Runs case["cmd"] in `work` and compares out.npy with `expected`:
    PASS when max |ours - expected| <= tol * max |expected|."""
    try:
        r = subprocess.run(case["cmd"], cwd=work, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print("FAIL %s: the model ran past %d s" % (case["name"], timeout))
        return 1
    if r.returncode != 0:
        print("FAIL model exited %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
        return 1
    ours = np.load(os.path.join(work, "out.npy"))
    if ours.shape != expected.shape:
        print("FAIL shape %s, expected %s" % (ours.shape, expected.shape))
        return 1
    tol = case["tol"]
    err = float(np.max(np.abs(ours.astype(np.float64) - expected)))
    scale = float(np.max(np.abs(expected)))
    ok = bool(np.isfinite(ours).all()) and err <= tol * scale
    print("%s %s: shape %s, max |ours - torch| = %.3g, max |torch| = %.3g, "
          "relative %.3g (tolerance %g)" % (
              "PASS" if ok else "FAIL", case["name"], list(ours.shape), err,
              scale, err / scale if scale else err, tol))
    return 0 if ok else 1


def main(argv):
    failed = 0
    for work in argv:
        with open(os.path.join(work, "case.json")) as f:
            case = json.load(f)
        expected = np.load(os.path.join(work, "expected.npy"))
        print("%s: " % work, end="")
        sys.stdout.flush()
        failed += check(work, case, expected, timeout=300)
        sys.stdout.flush()
    print("%d of %d staged cases passed" % (len(argv) - failed, len(argv)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
