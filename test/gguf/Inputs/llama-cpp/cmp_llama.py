#!/usr/bin/python3
"""Compares tfm's logits [1, T, V] of one file with llama.cpp's [T, V] and
with the float64 forward passes of ref_llama.py [1, T, V]:

    cmp_llama.py NAME TFM.npy LLAMA.npy TOL REF.npy REF_TOL [REF8.npy [REF8_TOL]]
    cmp_llama.py NAME TFM.npy - - REF.npy REF_TOL [REF8.npy [REF8_TOL]]
        (no llama.cpp: generated steps)

Passes when
  - max |tfm - llama.cpp| <= TOL max |llama.cpp| at every position;
  - the top token is the same at every position where llama.cpp's first
    two logits are more than TOL max |llama.cpp| apart;
  - tfm keeps the activations f32: max |tfm - REF| <= REF_TOL max |REF|;
    or, for a file whose quantized matrices tfm may multiply in integers
    with activations rounded to 8 bits as llama.cpp does (REF8.npy given:
    ref_llama.py --act8 Q8_0,Q4_0,Q4_K,Q5_K,Q6_K), tfm is within REF_TOL of REF8 at most
    positions (the median position's largest difference): at the others an
    activation that lies on a rounding boundary rounds the other way in
    float64, a jump of 1/254 of its block's largest value (up to ~1e-2 of
    the largest logit here). With REF8_TOL instead: within REF8_TOL of REF8
    at every position (a long prompt or generated steps, where one such
    jump early on reaches every later position through attention).
Prints the figures and PASS or FAIL (exit status 1).
"""
import sys

import numpy as np


def rel(a, b):
    return np.abs(a - b).max(-1) / np.abs(b).max()


name, tfm = sys.argv[1], np.load(sys.argv[2])[0].astype(np.float64)
ref, ref_tol = np.load(sys.argv[5])[0], float(sys.argv[6])
if tfm.shape != ref.shape:
    sys.exit(f"{name}: shape {tfm.shape}, the reference's {ref.shape}")
ok, line = True, f"{name}: {tfm.shape[0]} positions"
if sys.argv[3] != "-":
    llama, tol = np.load(sys.argv[3]), float(sys.argv[4])
    if llama.shape != tfm.shape:
        sys.exit(f"{name}: shape {tfm.shape}, llama.cpp's {llama.shape}")
    scale = np.abs(llama).max()
    diff = np.abs(tfm - llama).max() / scale
    top2 = np.sort(llama, -1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > tol * scale
    same = tfm.argmax(-1) == llama.argmax(-1)
    ok = diff <= tol and bool(same[clear].all())
    line = (f"{name} vs llama.cpp {diff:.2e} (tol {tol:g}), top token {int(same[clear].sum())}"
            f"/{int(clear.sum())} where llama.cpp's gap > tol ({int(same.sum())}/{len(same)} in all)")
exact = rel(tfm, ref).max()
line += f", vs float64 {exact:.2e} (tol {ref_tol:g})"
if exact > ref_tol and len(sys.argv) > 7:
    by_pos = rel(tfm, np.load(sys.argv[7])[0])
    near = int((by_pos <= ref_tol).sum())
    line += (f"; 8-bit activations: vs float64 with Q8_0 activations {near}/{len(by_pos)}"
             f" positions within tol, median {np.median(by_pos):.1e}, max {by_pos.max():.1e}")
    if len(sys.argv) > 8:
        ok = ok and by_pos.max() <= float(sys.argv[8])
        line += f" (tol {float(sys.argv[8]):g} at every position)"
    else:
        ok = ok and np.median(by_pos) <= ref_tol
else:
    ok = ok and exact <= ref_tol
print(line, "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
