#!/usr/bin/env python3
"""compare.py WHAT REF.npy OUT.npy TOL [MEDIAN_TOL]: prints "ok WHAT" when, for
every row (the last axis: a position's logits), max |out - ref| <= TOL max
|ref|, and, given MEDIAN_TOL, the median of those row figures is within it;
otherwise the figures and exit status 1.

compare.py --list FILE: the same for each line "WHAT REF.npy OUT.npy TOL
[MEDIAN_TOL]" of FILE, in order, in one process (numpy is imported once);
exit status 1 if any fails (every line is still checked)."""
import sys

import numpy as np


def compare(what, ref_path, out_path, tol, median_tol=None):
    ref, out = np.load(ref_path), np.load(out_path)
    tol = float(tol)
    median_tol = float(median_tol) if median_tol is not None else None
    if ref.shape != out.shape:
        print("FAIL %s: shapes %s %s" % (what, ref.shape, out.shape))
        return False
    rows = (np.abs(out.astype(np.float64) - ref).max(-1) / np.abs(ref).max(-1)).ravel()
    rel, med = float(rows.max()), float(np.median(rows))
    if not rel <= tol or (median_tol is not None and not med <= median_tol):
        print("FAIL %s: max |out - ref| / max |ref| = %.3g (limit %g), median over rows %.3g (limit %s)"
              % (what, rel, tol, med, median_tol))
        return False
    print("ok %s %.2g" % (what, rel))
    return True


if sys.argv[1] == "--list":
    with open(sys.argv[2]) as f:
        lines = [l.split() for l in f if l.strip()]
    if not lines:
        sys.exit("compare.py: %s lists no comparisons" % sys.argv[2])
    results = [compare(*l) for l in lines]
    sys.exit(0 if all(results) else 1)
sys.exit(0 if compare(*sys.argv[1:6]) else 1)
