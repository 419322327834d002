#!/usr/bin/env python3
"""compare.py WHAT REF.npy OUT.npy TOL [MEDIAN_TOL]: prints "ok WHAT" when, for
every row (the last axis: a position's logits), max |out - ref| <= TOL max
|ref|, and, given MEDIAN_TOL, the median of those row figures is within it;
otherwise the figures and exit status 1."""
import sys

import numpy as np

what, ref, out, tol = sys.argv[1], np.load(sys.argv[2]), np.load(sys.argv[3]), float(sys.argv[4])
median_tol = float(sys.argv[5]) if len(sys.argv) > 5 else None
if ref.shape != out.shape:
    print("FAIL %s: shapes %s %s" % (what, ref.shape, out.shape))
    sys.exit(1)
rows = (np.abs(out.astype(np.float64) - ref).max(-1) / np.abs(ref).max(-1)).ravel()
rel, med = float(rows.max()), float(np.median(rows))
if not rel <= tol or (median_tol is not None and not med <= median_tol):
    print("FAIL %s: max |out - ref| / max |ref| = %.3g (limit %g), median over rows %.3g (limit %s)"
          % (what, rel, tol, med, median_tol))
    sys.exit(1)
print("ok %s %.2g" % (what, rel))
