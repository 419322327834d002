#!/usr/bin/env python3
"""Attention with the DSL v2 score modifiers (softcap, ALiBi, a T5 relative
bias table, mask) spelled as primitive tfm ops with grouped K/V, compiled by
tfmc fused (tfm.attention, the flash kernel) and unfused
(--no-attention-fusion), run from C, and both compared with PyTorch written
from DSL.md. usage: score_modifiers.py WORKDIR TFMC CC CFLAGS LIBS MASK BIDIR"""
import math
import os
import subprocess
import sys

import torch

# One thread: the reference models are small, and the suite runs two
# tests at once (more threads spin and wait more than they compute).
torch.set_num_threads(1)

work, tfmc, cc, cflags, libs, mask, bidir = sys.argv[1:8]
bidir = bidir == "1"
H, KV, T, D, NB, MD = 4, 2, 37, 8, 8, 6
scale, cap = 0.35, 2.0
slopes = [2.0 ** (-8.0 * (h + 1) / H) for h in range(H)]
g = torch.Generator().manual_seed(1)
table = torch.randn(NB, H, generator=g)
q = torch.randn(1, H, T, D, generator=g)
k = torch.randn(1, KV, T, D, generator=g)
v = torch.randn(1, KV, T, D, generator=g)


def bucket(rel):
    n, out = NB, torch.zeros_like(rel)
    if bidir:
        n //= 2
        out += (rel > 0).long() * n
        rel = rel.abs()
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    exact = n // 2
    large = exact + (torch.log(rel.float() / exact) / math.log(MD / exact) * (n - exact)).long()
    large = torch.min(large, torch.full_like(large, n - 1))
    return out + torch.where(rel < exact, rel, large)


kr, vr = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
s = q @ kr.transpose(-1, -2) * scale
s = cap * torch.tanh(s / cap)
i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
s = s + torch.tensor(slopes)[:, None, None] * (j - i).float()
s = s + table[bucket(j - i)].permute(2, 0, 1)
if mask == "causal":
    s = s.masked_fill(j > i, float("-inf"))
ref = (torch.softmax(s, -1) @ vr).flatten().tolist()

ty = lambda h: "tensor<1x%dx%dx%dxf32>" % (h, T, D)
st = "tensor<1x%dx%dx%dxf32>" % (H, T, T)
tab = "[" + ", ".join("[" + ", ".join("%.9g" % x for x in r) + "]" for r in table.tolist()) + "]"
src = f"""func.func @attn(%q: {ty(H)}, %k: {ty(KV)}, %v: {ty(KV)}) -> {ty(H)} {{
  %t = arith.constant dense<{tab}> : tensor<{NB}x{H}xf32>
  %k4 = tfm.repeat_kv %k {{repeats = {H // KV} : i64}} : ({ty(KV)}) -> {ty(H)}
  %v4 = tfm.repeat_kv %v {{repeats = {H // KV} : i64}} : ({ty(KV)}) -> {ty(H)}
  %s = tfm.matmul %q, %k4 {{transpose_rhs}} : ({ty(H)}, {ty(H)}) -> {st}
  %ss = tfm.scale %s {{factor = {scale} : f64}} : {st}
  %c = tfm.softcap %ss {{cap = {cap} : f64}} : {st}
  %a = tfm.alibi %c {{slopes = array<f64: {", ".join(repr(x) for x in slopes)}>}} : {st}
  %r = tfm.relative_bias %a, %t {{max_distance = {MD} : i64{", bidirectional" if bidir else ""}}} : ({st}, tensor<{NB}x{H}xf32>) -> {st}
"""
if mask == "causal":
    src += f"  %m = tfm.mask %r {{kind = #tfm.mask<causal>}} : ({st}) -> {st}\n"
else:
    src += f"  %m = tfm.scale %r {{factor = 1.0 : f64}} : {st}\n"
src += f"""  %p = tfm.softmax %m {{axis = 3 : i64}} : {st}
  %o = tfm.matmul %p, %v4 : ({st}, {ty(H)}) -> {ty(H)}
  return %o : {ty(H)}
}}
"""
flat = lambda t: ", ".join("%.9gf" % x for x in t.flatten().tolist())
driver = f"""
#include "attn.h"
#include <stdio.h>
static float q[] = {{{flat(q)}}}, k[] = {{{flat(k)}}}, v[] = {{{flat(v)}}}, o[{H * T * D}];
int main(void) {{
  tfm_tensor in[3] = {{{{q, 0, 4, {{1, {H}, {T}, {D}}}}}, {{k, 0, 4, {{1, {KV}, {T}, {D}}}}}, {{v, 0, 4, {{1, {KV}, {T}, {D}}}}}}};
  tfm_tensor out = {{o, 0, 4, {{1, {H}, {T}, {D}}}}};
  if (attn_forward(0, in, &out) != 0) return 1;
  for (int i = 0; i < {H * T * D}; ++i) printf("%.9g\\n", o[i]);
  return 0;
}}
"""
errs = {}
for name, extra in (("fused", []), ("unfused", ["--no-attention-fusion"])):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "attn.mlir"), "w").write(src)
    ir = subprocess.run([tfmc, os.path.join(d, "attn.mlir"), "--emit=tfm-fused"] + extra,
                        check=True, capture_output=True, text=True).stdout
    assert ("tfm.attention " in ir) == (name == "fused"), name + ": unexpected fusion"
    subprocess.run([tfmc, os.path.join(d, "attn.mlir"), "-c", "-o", os.path.join(d, "attn.o")] + extra,
                   check=True)
    open(os.path.join(d, "main.c"), "w").write(driver)
    subprocess.run(" ".join([cc, cflags, "-I" + d, os.path.join(d, "main.c"), os.path.join(d, "attn.o"),
                             libs, "-o", os.path.join(d, "main")]), shell=True, check=True)
    ours = [float(x) for x in subprocess.run([os.path.join(d, "main")], check=True,
                                             capture_output=True, text=True).stdout.split()]
    errs[name] = max(abs(a - b) for a, b in zip(ours, ref)) / max(abs(x) for x in ref)
ok = all(e <= 1e-5 for e in errs.values())
print("%s: fused %.3g, unfused %.3g (relative to PyTorch)" % ("PASS" if ok else "FAIL", errs["fused"], errs["unfused"]))
sys.exit(0 if ok else 1)
