#!/usr/bin/env python3
"""Checks that the committed generated docs equal what the build generates.

    docs_current.py COMMITTED_DIR GENERATED_DIR NAME...

For each NAME (Dialect.md, Passes.md), COMMITTED_DIR/NAME must equal
GENERATED_DIR/NAME, which the build's tfm-docs target writes from the
TableGen files (add_mlir_doc). On a difference it prints a unified diff and
how to refresh the committed files, and exits 1.
"""
import difflib
import os
import sys


def main(argv):
    committed, generated, names = argv[1], argv[2], argv[3:]
    stale = []
    for name in names:
        gen_path = os.path.join(generated, name)
        doc_path = os.path.join(committed, name)
        if not os.path.exists(gen_path):
            print(f"error: {gen_path} is missing: build the target tfm-docs "
                  "(part of every build) first", file=sys.stderr)
            return 1
        with open(gen_path, encoding="utf-8") as f:
            want = f.read().splitlines(keepends=True)
        have = []
        if os.path.exists(doc_path):
            with open(doc_path, encoding="utf-8") as f:
                have = f.read().splitlines(keepends=True)
        if have != want:
            sys.stdout.writelines(difflib.unified_diff(
                have, want, fromfile=doc_path, tofile=gen_path))
            stale.append(name)
    if stale:
        gen_dir = os.path.abspath(generated)
        build = os.path.dirname(gen_dir)
        names = " and ".join("docs/" + n for n in stale)
        verb = "differs" if len(stale) == 1 else "differ"
        print(f"error: {names} {verb} from what the TableGen files generate "
              "(diff above). Refresh with:\n"
              f"  cmake --build {build} --target tfm-docs && "
              f"cp {' '.join(os.path.join(gen_dir, n) for n in stale)} "
              f"{os.path.abspath(committed)}/", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
