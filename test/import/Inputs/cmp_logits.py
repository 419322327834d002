#!/usr/bin/python3
"""Compares tfm's logits [1, T, V] with llama.cpp's [T, V] (or another
[1, T, V]): the largest
difference relative to the largest |logit| of llama.cpp must be below TOL,
and the top token must agree at every position.

    cmp_logits.py TFM.npy LLAMA.npy TOL
"""
import sys

import numpy as np

got = np.load(sys.argv[1])[0]
ref = np.load(sys.argv[2])
if ref.ndim == 3:
    ref = ref[0]
tol = float(sys.argv[3])
if got.shape != ref.shape:
    sys.exit(f"shape {got.shape}, expected {ref.shape}")
rel = float(np.abs(got - ref).max() / np.abs(ref).max())
agree = int((got.argmax(-1) == ref.argmax(-1)).sum())
print(f"rel {rel:.2e} top {agree}/{ref.shape[0]}",
      "PASS" if rel < tol and agree == ref.shape[0] else "FAIL")
sys.exit(0 if rel < tol and agree == ref.shape[0] else 1)
