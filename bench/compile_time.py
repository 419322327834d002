#!/usr/bin/env python3
"""Compile time of tfmc: the wall time of `tfmc MODEL.tfm -o MODEL` (front
end, MLIR pipeline, LLVM O3, machine code, link) for each model, median of
--runs, with the stage breakdown that `--mlir-timing` reports.

usage: python3 bench/compile_time.py [--tfmc build/bin/tfmc] [--runs 3]
       [models/gpt2-small.tfm models/llama3-8b.tfm ...]
Run it on an idle machine: the figures are wall-clock seconds.
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STAGES = ["front end", "MLIR pipeline to loops", "MLIR pipeline to llvm-mlir",
          "translate to LLVM IR", "LLVM O3", "machine code", "link"]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def compile_once(tfmc, model, out, timing):
    cmd = [tfmc, model, "-o", out]
    if timing:
        cmd.append("--mlir-timing")
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"tfmc failed on {model}:\n{proc.stderr}")
    stages = {}
    for name in STAGES:
        # "   5.0986 ( 30.8%)    5.0986 ( 31.4%)  LLVM O3"
        m = re.search(r"^\s*([0-9.]+) \(\s*[0-9.]+%\).*?  " + re.escape(name)
                      + r"$", proc.stderr, re.M)
        if m:
            stages[name] = float(m.group(1))
    return wall, stages


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build/bin/tfmc"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("models", nargs="*",
                    default=[os.path.join(ROOT, "models/gpt2-small.tfm"),
                             os.path.join(ROOT, "models/llama3-8b.tfm")])
    args = ap.parse_args()
    print(f"# tfmc compile time, {cpu_model()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"| model | wall s (median of {args.runs}) | "
          + " | ".join(STAGES) + " |")
    print("|---|---:|" + "---:|" * len(STAGES))
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            out = os.path.join(tmp, "model")
            walls = [compile_once(args.tfmc, model, out, False)[0]
                     for _ in range(args.runs)]
            _, stages = compile_once(args.tfmc, model, out, True)
            name = os.path.splitext(os.path.basename(model))[0]
            cells = " | ".join(f"{stages.get(s, 0):.2f}" for s in STAGES)
            print(f"| {name} | {statistics.median(walls):.2f} | {cells} |")


if __name__ == "__main__":
    main()
