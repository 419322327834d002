#!/usr/bin/env python3
"""Runs `tfmc import` on mutated versions of the config.json files under a
folder: each mutation replaces one field (or one field of rope_scaling) with
a value of another type or an extreme one, drops it, or cuts the file short.
tfmc must exit 0 or 1 (never crash) and, on exit 1, write nothing to stdout.
Prints a summary for FileCheck."""

import argparse
import json
import os
import random
import subprocess
import sys

VALUES = [None, True, False, 0, -1, 1, 3, 2**31, 2**62, 1e300, -1e-300, 0.5,
          "", "gelu", "yarn", "x" * 1000, [], [1, 2], {}, {"type": "linear"},
          {"rope_type": "llama3", "factor": "8"}]


def mutations(text, rng):
    cfg = json.loads(text)
    keys = list(cfg)
    key = rng.choice(keys)
    kind = rng.randrange(4)
    if kind == 0:
        cfg[key] = rng.choice(VALUES)
    elif kind == 1:
        del cfg[key]
    elif kind == 2:
        cfg["rope_scaling"] = {"rope_type": rng.choice(["linear", "llama3", "default", 3]),
                               rng.choice(["factor", "low_freq_factor", "high_freq_factor",
                                           "original_max_position_embeddings", "z"]):
                                   rng.choice(VALUES)}
    else:
        return text[: rng.randrange(len(text))]
    return json.dumps(cfg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tfmc")
    ap.add_argument("inputs")
    ap.add_argument("work")
    ap.add_argument("--count", type=int, default=500)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    configs = sorted(os.path.join(args.inputs, d, "config.json")
                     for d in os.listdir(args.inputs)
                     if os.path.exists(os.path.join(args.inputs, d, "config.json")))
    rng = random.Random(11)
    failed = 0
    for i in range(args.count):
        src = configs[i % len(configs)]
        text = mutations(open(src).read(), rng)
        path = os.path.join(args.work, "config.json")
        with open(path, "w") as f:
            f.write(text)
        r = subprocess.run([args.tfmc, "import", path], capture_output=True, text=True,
                           timeout=30)
        ok = r.returncode in (0, 1) and (r.returncode == 0 or r.stdout == "")
        if r.returncode == 0 and "model " not in r.stdout:
            ok = False
        if not ok:
            failed += 1
            keep = os.path.join(args.work, "failed-%d.json" % i)
            with open(keep, "w") as f:
                f.write(text)
            print("FAILED (exit %d): %s from %s" % (r.returncode, keep, src))
            print(r.stderr[-2000:])
    print("ran %d mutations" % args.count)
    print("%d passed, %d failed" % (args.count - failed, failed))


if __name__ == "__main__":
    sys.exit(main())
