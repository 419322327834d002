#!/usr/bin/env python3
"""Imports every real config of this folder in its transformers 4 form and
in the form transformers 5 saves it (test/hf/v5_config.py), and prints
SAME NAME when both give the same model (the .tfm from its `model` line on;
the header lists the fields each form holds), DIFF NAME with both texts
otherwise.

    compare_forms.py TFMC INPUTS WORK
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "hf"))
import v5_config  # noqa: E402


def model_text(tfmc, folder):
    r = subprocess.run([tfmc, "import", folder], capture_output=True, text=True)
    if r.returncode != 0:
        return "exit %d: %s" % (r.returncode, r.stderr)
    return r.stdout[r.stdout.index("\nmodel ") + 1:]


def main():
    tfmc, inputs, work = sys.argv[1:4]
    failed = 0
    for name in sorted(os.listdir(inputs)):
        v4 = os.path.join(inputs, name)
        if not os.path.isfile(os.path.join(v4, "config.json")):
            continue
        # Same folder name, so the model has the same name.
        v5 = os.path.join(work, "v5", name)
        os.makedirs(v5, exist_ok=True)
        with open(os.path.join(v4, "config.json")) as f:
            cfg = json.load(f)
        with open(os.path.join(v5, "config.json"), "w") as f:
            json.dump(v5_config.to_v5(cfg), f, indent=2)
        a, b = model_text(tfmc, v4), model_text(tfmc, v5)
        if a == b and not a.startswith("exit"):
            print("SAME", name)
        else:
            failed += 1
            print("DIFF", name, "\n--- transformers 4 form:\n" + a + "\n--- transformers 5 form:\n" + b)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
