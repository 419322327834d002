#!/usr/bin/env python3
"""Compiles three spellings of causal attention (tfm.mask, an additive -inf
bias, a select under a constant condition) with tfmc and checks that they
compute the same output. usage: spellings.py WORKDIR TFMC CC CFLAGS LIBS"""
import os
import subprocess
import sys

work, tfmc, cc, cflags, libs = sys.argv[1:6]
T = 6
causal_bias = [[0.0 if j <= i else "0xFF800000" for j in range(T)] for i in range(T)]
keep = [["true" if j <= i else "false" for j in range(T)] for i in range(T)]
fmt = lambda rows: "[" + ", ".join("[" + ", ".join(str(x) for x in r) + "]" for r in rows) + "]"
ty = "tensor<1x2x%dx8xf32>" % T
st = "tensor<1x2x%dx%dxf32>" % (T, T)
head = ("func.func @attn(%%q: %s, %%k: %s, %%v: %s) -> %s {\n"
        "  %%s = tfm.matmul %%q, %%k {transpose_rhs} : (%s, %s) -> %s\n") % (ty, ty, ty, ty, ty, ty, st)
tail = ("  %%p = tfm.softmax %%m {axis = 3 : i64} : %s\n"
        "  %%o = tfm.matmul %%p, %%v : (%s, %s) -> %s\n  return %%o : %s\n}\n") % (st, st, ty, ty, ty)
bias2 = "[[" + fmt(causal_bias) + ", " + fmt(causal_bias) + "]]"  # [1, 2, T, T]
keep2 = "[[" + fmt(keep) + ", " + fmt(keep) + "]]"
srcs = {
    "canonical": head + "  %%m = tfm.mask %%s {kind = #tfm.mask<causal>} : (%s) -> %s\n" % (st, st) + tail,
    "bias": head + "  %%b = arith.constant dense<%s> : %s\n  %%m = tfm.add %%s, %%b : %s\n" % (
        bias2.replace("'", ""), st, st) + tail,
    "select": head + ("  %%c = arith.constant dense<%s> : tensor<1x2x%dx%dxi1>\n"
                      "  %%n = arith.constant dense<-1.0e30> : %s\n"
                      "  %%m = arith.select %%c, %%s, %%n : tensor<1x2x%dx%dxi1>, %s\n") % (
        keep2, T, T, st, T, T, st) + tail,
}
driver = r'''
#include "attn.h"
#include <stdio.h>
int main(void) {
  float q[96], k[96], v[96], o[96];
  for (int i = 0; i < 96; ++i) { q[i] = (i % 7) * 0.3f - 1; k[i] = (i % 5) * 0.2f - 0.4f; v[i] = (i % 11) * 0.1f; }
  tfm_tensor in[3] = {{q, 0, 4, {1, 2, 6, 8}}, {k, 0, 4, {1, 2, 6, 8}}, {v, 0, 4, {1, 2, 6, 8}}};
  tfm_tensor out = {o, 0, 4, {1, 2, 6, 8}};
  attn_forward(0, in, &out);
  for (int i = 0; i < 96; ++i) printf("%.9g\n", o[i]);
  return 0;
}
'''
outs = {}
for name, src in srcs.items():
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "attn.mlir"), "w").write(src)
    fused = subprocess.run([tfmc, os.path.join(d, "attn.mlir"), "--emit=tfm-fused"],
                           check=True, capture_output=True, text=True).stdout
    assert "tfm.attention" in fused, name + " was not fused"
    subprocess.run([tfmc, os.path.join(d, "attn.mlir"), "-c", "-o", os.path.join(d, "attn.o")], check=True)
    open(os.path.join(d, "main.c"), "w").write(driver)
    subprocess.run(" ".join([cc, cflags, "-I" + d, os.path.join(d, "main.c"), os.path.join(d, "attn.o"),
                             libs, "-o", os.path.join(d, "main")]), shell=True, check=True)
    outs[name] = [float(x) for x in subprocess.run([os.path.join(d, "main")], check=True,
                                                   capture_output=True, text=True).stdout.split()]
diff = max(abs(a - b) for n in ("bias", "select") for a, b in zip(outs["canonical"], outs[n]))
print("canonical == bias == select: max difference %g" % diff)
