#!/usr/bin/env python3
"""compare.py WHAT REF.npy OUT.npy TOL: prints "ok WHAT" when max |out - ref|
<= TOL max |ref|, else the relative difference, exit status 1."""
import sys

import numpy as np

what, ref, out, tol = sys.argv[1], np.load(sys.argv[2]), np.load(sys.argv[3]), float(sys.argv[4])
rel = float(np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max())
if ref.shape != out.shape or not rel <= tol:
    print("FAIL %s: shapes %s %s, max |out - ref| / max |ref| = %.3g > %g"
          % (what, ref.shape, out.shape, rel, tol))
    sys.exit(1)
print("ok %s %.2g" % (what, rel))
