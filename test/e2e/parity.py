#!/usr/bin/env python3
"""End-to-end parity: compile a .tfm model with tfmc, run it, compare with
the PyTorch reference (reference.py) on random weights and inputs.

Passes when max |ours - torch| <= tol * max |torch| (f32: tol = 1e-4).
Prints 'PASS' or 'FAIL' with the measured error; exits 1 on failure.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases  # noqa: E402
import staged  # noqa: E402
import reference  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("tfm")
    ap.add_argument("--model", default=None)
    ap.add_argument("--tfmc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=7)
    ap.add_argument("--src-seq", type=int, default=None)
    ap.add_argument("--lengths", default=None, help="comma list, per batch")
    ap.add_argument("--weights-dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tfmc-arg", action="append", default=[])
    ap.add_argument("--no-types", action="store_true",
                    help="leave the optional 'types' input out")
    ap.add_argument("--router-margin", type=float, default=0.0,
                    help="fail unless every routing choice of the reference "
                    "wins by this much (relative): a case computed in f16 or "
                    "bf16 is well posed only where rounding cannot flip one")
    ap.add_argument("--stage", action="store_true",
                    help="compile and write the inputs, the PyTorch output "
                    "and case.json in --work, but do not run the model: "
                    "staged.py runs it later, on another machine")
    args = ap.parse_args(argv)

    os.makedirs(args.work, exist_ok=True)
    sel = ["--model", args.model] if args.model else []
    spec = json.loads(subprocess.run(
        [args.tfmc, args.tfm, "--emit=json"] + sel, check=True,
        capture_output=True, text=True).stdout)
    torch.manual_seed(args.seed)
    model = reference.Model(spec)
    reference.randomize(model, args.seed)
    reference.round_weights(model, args.weights_dtype)
    model.eval()
    state = reference.canonical_state(model, spec)
    expected_names = {p["name"] for p in spec["parameters"]}
    if set(state) != expected_names:
        print("FAIL reference parameters differ from tfmc's table:",
              sorted(set(state) ^ expected_names))
        return 1
    weights = os.path.join(args.work, "weights.safetensors")
    reference.write_safetensors(weights, state, args.weights_dtype)

    rng = np.random.default_rng(args.seed)
    b, t = args.batch, args.seq
    s = args.src_seq or t
    inputs = {}
    for inp in spec["inputs"]:
        name = inp["name"]
        if name in ("tokens", "tgt"):
            inputs[name] = rng.integers(0, spec["vocab"], (b, t), dtype=np.int32)
        elif name == "src":
            inputs[name] = rng.integers(0, spec["vocab"], (b, s), dtype=np.int32)
        elif name == "pixels":
            shape = [b] + inp["shape"][1:]
            inputs[name] = rng.standard_normal(shape).astype(np.float32)
        elif name == "features":
            inputs[name] = rng.standard_normal(
                (b, t, spec["d_model"])).astype(np.float32)
        elif name == "types":
            if args.no_types:
                continue  # left out: the model uses zeros
            inputs[name] = rng.integers(0, inp["range"], (b, t), dtype=np.int32)
        elif name.endswith("lengths"):
            limit = s if name == "src_lengths" else t
            if args.lengths:
                vals = [min(int(v), limit) for v in args.lengths.split(",")]
            else:
                vals = list(rng.integers(1, limit + 1, b))
            inputs[name] = np.array(vals[:b], dtype=np.int32)
    reference.ROUTER_GAPS.clear()
    with torch.no_grad():
        expected = model({k: torch.from_numpy(v) for k, v in inputs.items()}).numpy()
    if reference.ROUTER_GAPS and min(reference.ROUTER_GAPS) < args.router_margin:
        print("FAIL ill-posed case: a routing choice wins by %.3g (relative), "
              "less than --router-margin %g: take another --seed" % (
                  min(reference.ROUTER_GAPS), args.router_margin))
        return 1

    exe = os.path.join(args.work, "model")
    r = subprocess.run([args.tfmc, args.tfm, "-o", exe] + sel + args.tfmc_arg,
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL tfmc exited %d\n%s" % (r.returncode, r.stderr[-3000:]))
        return 1
    # Paths in the command are relative to the work directory, so that a
    # staged case runs wherever the directory is copied.
    cmd = ["./model", "--weights", "weights.safetensors",
           "--threads", str(args.threads), "--output", "out.npy"]
    for name, arr in inputs.items():
        np.save(os.path.join(args.work, name + ".npy"), arr)
        cmd += ["--input", "%s=%s.npy" % (name, name)]
    case = {"name": spec["name"], "cmd": cmd, "tol": args.tol}
    if args.stage:
        np.save(os.path.join(args.work, "expected.npy"), expected)
        with open(os.path.join(args.work, "case.json"), "w") as f:
            json.dump(case, f)
        print("STAGED %s in %s" % (spec["name"], args.work))
        return 0
    return staged.check(args.work, case, expected)


if __name__ == "__main__":
    sys.exit(cases.run(main))
