#!/usr/bin/env python3
"""tfm.rope with partial rotation (R < D) and frequency tables, geometric
(no or linear scaling: exp of a line) and not (llama3: a select chain), in
both pair styles, compiled by tfmc, run from C and compared with PyTorch
written from DSL.md. usage: rope_tables.py WORKDIR TFMC CC CFLAGS LIBS"""
import os
import subprocess
import sys

import torch

# One thread: the reference models are small, and the suite runs two
# tests at once (more threads spin and wait more than they compute).
torch.set_num_threads(1)

work, tfmc, cc, cflags, libs = sys.argv[1:6]
H, T, D = 2, 23, 10
g = torch.Generator().manual_seed(3)
x = torch.randn(1, H, T, D, generator=g)
tables = {
    "geometric": [10000.0 ** (-2.0 * i / 6) / 2.0 for i in range(3)],  # R = 6, linear factor 2
    "llama3": [1.0, 0.25, 0.004],                                    # not geometric
}


def rope(x, inv, style):
    r = 2 * len(inv)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * torch.tensor(inv, dtype=torch.float64)[None]
    cos, sin = ang.cos().float(), ang.sin().float()
    xr, rest = x[..., :r], x[..., r:]
    if style == "half":
        cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
        rot = torch.cat([-xr[..., r // 2:], xr[..., : r // 2]], -1)
    else:
        cos, sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
        rot = torch.stack([-xr[..., 1::2], xr[..., 0::2]], -1).reshape(xr.shape)
    return torch.cat([xr * cos + rot * sin, rest], -1)


ty = "tensor<1x%dx%dx%dxf32>" % (H, T, D)
flat = ", ".join("%.9gf" % v for v in x.flatten().tolist())
driver = """
#include "rope.h"
#include <stdio.h>
static float x[] = {%s}, o[%d];
int main(void) {
  tfm_tensor in[1] = {{x, 0, 4, {1, %d, %d, %d}}};
  tfm_tensor out = {o, 0, 4, {1, %d, %d, %d}};
  if (rope_forward(0, in, &out) != 0) return 1;
  for (int i = 0; i < %d; ++i) printf("%%.9g\\n", o[i]);
  return 0;
}
""" % (flat, H * T * D, H, T, D, H, T, D, H * T * D)
worst = 0.0
for tname, inv in tables.items():
    for style in ("half", "interleaved"):
        d = os.path.join(work, tname + "-" + style)
        os.makedirs(d, exist_ok=True)
        src = ("func.func @rope(%%x: %s) -> %s {\n"
               "  %%y = tfm.rope %%x {inv_freq = array<f64: %s>, style = #tfm.rope_style<%s>} : %s\n"
               "  return %%y : %s\n}\n") % (ty, ty, ", ".join(repr(v) for v in inv), style, ty, ty)
        open(os.path.join(d, "rope.mlir"), "w").write(src)
        subprocess.run([tfmc, os.path.join(d, "rope.mlir"), "-c", "-o", os.path.join(d, "rope.o")], check=True)
        open(os.path.join(d, "main.c"), "w").write(driver)
        subprocess.run(" ".join([cc, cflags, "-I" + d, os.path.join(d, "main.c"), os.path.join(d, "rope.o"),
                                 libs, "-o", os.path.join(d, "main")]), shell=True, check=True)
        ours = [float(v) for v in subprocess.run([os.path.join(d, "main")], check=True,
                                                 capture_output=True, text=True).stdout.split()]
        ref = rope(x, inv, style).flatten().tolist()
        err = max(abs(a - b) for a, b in zip(ours, ref)) / max(abs(v) for v in ref)
        print("%s %s: %.3g" % (tname, style, err))
        worst = max(worst, err)
print("%s: worst %.3g (relative to PyTorch)" % ("PASS" if worst <= 1e-5 else "FAIL", worst))
sys.exit(0 if worst <= 1e-5 else 1)
