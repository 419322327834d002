#!/usr/bin/env python3
"""Stages the parity cases of gpu.test and gpu-features.test (or the tests
named with --test) for a machine with a GPU but no tfmc: each case of their
parity.py RUN lines (`--and` separates cases) is run here with --stage
(compile, weights, inputs and PyTorch's output in DIR/<case>), libomp is
copied to DIR/lib, and DIR/run.sh runs them all there with staged.py (numpy
only).

usage: /usr/bin/python3 test/e2e/gpu_bundle.py DIR [--tfmc build/bin/tfmc]
           [--test gpu.test --test gpu-features.test]
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


def run_lines(path):
    """The RUN commands of a lit test, continuation lines joined."""
    runs, cur = [], None
    for line in open(path):
        if not line.startswith("# RUN:"):
            continue
        body = line[len("# RUN:"):].strip()
        cont = body.endswith("\\")
        body = body[:-1].strip() if cont else body
        cur = body if cur is None else cur + " " + body
        if not cont:
            runs.append(cur)
            cur = None
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--tfmc", default=os.path.join(
        os.path.dirname(os.path.dirname(HERE)), "build", "bin", "tfmc"))
    ap.add_argument("--test", action="append",
                    help="a test of test/e2e to stage (repeatable)")
    args = ap.parse_args()
    out = os.path.abspath(args.dir)
    os.makedirs(os.path.join(out, "lib"), exist_ok=True)
    shutil.copy("/usr/lib/llvm-22/lib/libomp.so.5", os.path.join(out, "lib"))
    shutil.copy(os.path.join(HERE, "staged.py"), out)
    groups, works = [], []
    for test in args.test or ["gpu.test", "gpu-features.test"]:
        for run in run_lines(os.path.join(HERE, test)):
            m = re.match(r"%torch_python %S/parity.py (.*?) \| FileCheck", run)
            if not m:
                continue
            for case in m.group(1).split(" --and "):
                words = shlex.split(case.replace("%S", HERE).replace("%t", out))
                words[words.index("--tfmc") + 1] = args.tfmc
                works.append(os.path.relpath(words[words.index("--work") + 1], out))
                groups += (["--and"] if groups else []) + words + ["--stage"]
    r = subprocess.run([sys.executable, os.path.join(HERE, "parity.py")] + groups)
    with open(os.path.join(out, "run.sh"), "w") as f:
        f.write("#!/bin/sh\n# The staged cases, by gpu_bundle.py.\n"
                'cd "$(dirname "$0")" && LD_LIBRARY_PATH=$PWD/lib${LD_LIBRARY_PATH:+:'
                '$LD_LIBRARY_PATH} exec python3 staged.py %s\n' % " ".join(works))
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
