#!/usr/bin/env python3
"""End to end from a Hugging Face model folder, as a user runs it:

    hf_models.py writes FOLDER (config.json + safetensors as published)
    tfmc import FOLDER -o m.tfm
    tfmc m.tfm -o m
    ./m --weights FOLDER --input NAME=x.npy ... --output y.npy

and compares y with hf_reference.forward(FOLDER, inputs) (PyTorch, from the
Hugging Face equations): PASS when max |y - ref| <= tol * max |ref|
(tol = 1e-4). Prints PASS/FAIL per case with the error; exits 1 if any
case fails.

Every case also imports the config in the form transformers 5 saves it
(v5_config.py) and requires the same model (the .tfm from its `model`
line on). With --form v5 the folder itself holds that form (the reference
is computed from the transformers 4 form first), so the whole path runs on
it.

    run_hf.py --tfmc tfmc --work DIR CASE [CASE...]     (CASE = TYPE[:VARIANT])
    run_hf.py --tfmc tfmc --work DIR --all
"""
import argparse
import json
import os
import resource
import shlex
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_models  # noqa: E402
import hf_reference  # noqa: E402
import v5_config  # noqa: E402

MEMORY_LIMIT = 8 << 30  # address space of each tfmc / model run


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limited, **kw)


def model_text(tfm):
    """The model of a written .tfm, without the header comment."""
    return tfm[tfm.find("\nmodel ") + 1:]


def run_case(case, args):
    mt, variant = hf_models.split_case(case)
    work = os.path.join(args.work, case.replace(":", "-"))
    folder = os.path.join(work, "hf-model")
    os.makedirs(work, exist_ok=True)
    hf_models.make(mt, folder, args.seed, variant)
    inputs = hf_models.make_inputs(mt, folder, args.batch, args.seq, args.seed)
    expected = hf_reference.forward(folder, inputs)
    config = os.path.join(folder, "config.json")
    with open(config) as f:
        v4 = json.load(f)
    if args.form == "v5":
        with open(config, "w") as f:
            json.dump(v5_config.to_v5(v4), f, indent=2)

    tfm = os.path.join(work, "m.tfm")
    r = run([args.tfmc, "import", folder, "-o", tfm])
    if r.returncode != 0:
        return False, "tfmc import exited %d\n%s" % (r.returncode, (r.stdout + r.stderr)[-3000:])
    # The other form, in a folder of the same name (the model's name).
    other = os.path.join(work, "other", "hf-model")
    os.makedirs(other, exist_ok=True)
    with open(os.path.join(other, "config.json"), "w") as f:
        json.dump(v4 if args.form == "v5" else v5_config.to_v5(v4), f, indent=2)
    r = run([args.tfmc, "import", other])
    with open(tfm) as f:
        text = f.read()
    if r.returncode != 0 or model_text(r.stdout) != model_text(text):
        return False, "the transformers %s form gives another model:\n%s%s" % (
            "4" if args.form == "v5" else "5", r.stdout, r.stderr[-3000:])
    exe = os.path.join(work, "m")
    r = run([args.tfmc, tfm, "-o", exe] + args.tfmc_arg)
    if r.returncode != 0:
        return False, "tfmc exited %d\n%s" % (r.returncode, (r.stdout + r.stderr)[-3000:])
    out = os.path.join(work, "y.npy")
    cmd = shlex.split(args.launcher) + [exe, "--weights", folder, "--threads", str(args.threads),
                                        "--output", out]
    for name, arr in inputs.items():
        path = os.path.join(work, name + ".npy")
        np.save(path, arr)
        cmd += ["--input", "%s=%s" % (name, path)]
    r = run(cmd)
    if r.returncode != 0:
        return False, "model exited %d\n%s" % (r.returncode, (r.stdout + r.stderr)[-3000:])
    ours = np.load(out)
    if ours.shape != expected.shape:
        return False, "output shape %s, expected %s" % (list(ours.shape), list(expected.shape))
    err = float(np.max(np.abs(ours.astype(np.float64) - expected)))
    scale = float(np.max(np.abs(expected)))
    ok = bool(np.isfinite(ours).all()) and err <= args.tol * scale
    return ok, "shape %s, max |tfm - torch| = %.3g, max |torch| = %.3g, relative %.3g (tolerance %g)" % (
        list(ours.shape), err, scale, err / scale if scale else err, args.tol)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--all", action="store_true", help="every case of hf_models.CASES")
    ap.add_argument("--tfmc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--form", choices=["v4", "v5"], default="v4",
                    help="the config.json of the folder as transformers 4 or 5 saves it")
    ap.add_argument("--tfmc-arg", action="append", default=[])
    ap.add_argument("--launcher", default="",
                    help="runs the model (e.g. 'mpirun -np 2' with --tfmc-arg=--tensor-parallel=2)")
    args = ap.parse_args()
    cases = hf_models.CASES if args.all else args.cases
    if not cases:
        ap.error("give cases or --all")
    failed = 0
    for case in cases:
        try:
            ok, msg = run_case(case, args)
        except Exception as e:  # a broken case must not hide the others
            ok, msg = False, "%s: %s" % (type(e).__name__, e)
        print("%s %s: %s" % ("PASS" if ok else "FAIL", case, msg), flush=True)
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
