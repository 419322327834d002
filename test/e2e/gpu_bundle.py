#!/usr/bin/env python3
"""Stages the cases of gpu.test for a machine with a GPU but no tfmc: each
RUN line's parity.py arguments are run here with --stage (compile, weights,
inputs and PyTorch's output in DIR/<case>), libomp is copied to DIR/lib,
and DIR/run.sh runs them all there with staged.py (numpy only).

usage: /usr/bin/python3 test/e2e/gpu_bundle.py DIR [--tfmc build/bin/tfmc]
then, on the GPU machine: sh DIR/run.sh
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--tfmc", default=os.path.join(
        os.path.dirname(os.path.dirname(HERE)), "build", "bin", "tfmc"))
    args = ap.parse_args()
    out = os.path.abspath(args.dir)
    os.makedirs(os.path.join(out, "lib"), exist_ok=True)
    shutil.copy("/usr/lib/llvm-22/lib/libomp.so.5", os.path.join(out, "lib"))
    shutil.copy(os.path.join(HERE, "staged.py"), out)
    groups, works = [], []
    for line in open(os.path.join(HERE, "gpu.test")):
        m = re.match(r"# RUN: %torch_python %S/parity.py (.*?) \| FileCheck", line)
        if not m:
            continue
        words = shlex.split(m.group(1).replace("%S", HERE).replace("%t", out))
        words[words.index("--tfmc") + 1] = args.tfmc
        works.append(os.path.relpath(words[words.index("--work") + 1], out))
        groups += (["--and"] if groups else []) + words + ["--stage"]
    r = subprocess.run([sys.executable, os.path.join(HERE, "parity.py")] + groups)
    with open(os.path.join(out, "run.sh"), "w") as f:
        f.write("#!/bin/sh\n# gpu.test's cases, staged by gpu_bundle.py.\n"
                'cd "$(dirname "$0")" && LD_LIBRARY_PATH=$PWD/lib${LD_LIBRARY_PATH:+:'
                '$LD_LIBRARY_PATH} exec python3 staged.py %s\n' % " ".join(works))
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
