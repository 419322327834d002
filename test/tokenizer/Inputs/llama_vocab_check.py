#!/usr/bin/env python3
"""llama.cpp's tokenizer tests (tests/test-tokenizer-0.cpp) against tfm.

    llama_vocab_check.py MODELS NAME... (--tool TFM_TOKENIZE | --exe MODEL_EXE)

For each NAME, MODELS/ggml-vocab-NAME.gguf is the vocabulary and its .inp
and .out files the cases, read as test-tokenizer-0.cpp reads them: the
inputs are separated by "\\n__ggml_vocab_test__\\n", each output line holds
the expected ids separated by spaces (add_special = false, parse_special =
false). --tool runs every case of a file through one `tfm-tokenize --plain
--special-as-text VOCAB --corpus`; --exe runs the cases through a compiled
model's `--tokenizer VOCAB --raw --tokenize TEXT --tokenize TEXT ...`. Prints "NAME: K/N cases"
per file, and every failing case with its input, the expected and the given
ids; exits 1 on any failure or a missing file (saying how to get them).
"""
import os
import subprocess
import sys
import tempfile

SEP = "\n__ggml_vocab_test__\n"


def read_cases(base):
    with open(base + ".inp", "rb") as f:
        raw = f.read().decode("utf-8")
    with open(base + ".out", encoding="utf-8") as f:
        out = f.read().split("\n")
    if out and out[-1] == "":
        out.pop()  # getline: no line after the last newline
    inp = []
    pos = 0
    while pos < len(raw):
        nxt = raw.find(SEP, pos)
        if nxt < 0:
            inp.append(raw[pos:])
            break
        inp.append(raw[pos:nxt])
        pos = nxt + len(SEP)
    if len(inp) != len(out):
        sys.exit("%s: %d inputs but %d outputs" % (base, len(inp), len(out)))
    cases = {}  # a std::map in the C++: the last of equal inputs counts
    for text, ids in zip(inp, out):
        cases[text] = [int(x) for x in ids.strip().split(" ") if x != ""]
    return cases


def escape(text):
    return (text.replace("\\", "\\\\").replace("\n", "\\n")
            .replace("\t", "\\t").replace("\r", "\\r"))


def run_tool(tool, vocab, texts):
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt",
                                     delete=False) as f:
        for t in texts:
            f.write(escape(t) + "\n")
        corpus = f.name
    try:
        p = subprocess.run([tool, "--plain", "--special-as-text", vocab,
                            "--corpus", corpus], capture_output=True)
    finally:
        os.unlink(corpus)
    if p.returncode != 0:
        sys.exit("%s: tfm-tokenize failed (exit %d): %s" %
                 (vocab, p.returncode, p.stderr.decode("utf-8", "replace")))
    return ids_of(p.stdout, vocab, len(texts))


def ids_of(stdout, vocab, n):
    """The ids of `n` texts printed a line each."""
    lines = stdout.decode("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != n:
        sys.exit("%s: %d lines of ids for %d texts" % (vocab, len(lines), n))
    return [[int(x) for x in l.split()] for l in lines]


def run_exe(exe, vocab, texts):
    # One run for many texts (--tokenize is repeatable: a line of ids per
    # text), in batches that keep the command line short.
    got = []
    i = 0
    while i < len(texts):
        batch, size = [], 0
        while i < len(texts):
            size += len(texts[i].encode("utf-8")) + 16
            if batch and size > 100000:
                break
            batch.append(texts[i])
            i += 1
        cmd = [exe, "--tokenizer", vocab, "--raw"]
        for t in batch:
            cmd += ["--tokenize", t]
        p = subprocess.run(cmd, capture_output=True)
        if p.returncode != 0:
            sys.exit("%s: %s failed (exit %d) on %d texts from %r: %s" %
                     (vocab, exe, p.returncode, len(batch), batch[0],
                      p.stderr.decode("utf-8", "replace")))
        got += ids_of(p.stdout, vocab, len(batch))
    return got


def main():
    args = sys.argv[1:]
    if len(args) < 4 or args[-2] not in ("--tool", "--exe"):
        sys.exit(__doc__)
    models, names, mode, prog = args[0], args[1:-2], args[-2], args[-1]
    failed = 0
    for name in names:
        base = os.path.join(models, "ggml-vocab-%s.gguf" % name)
        for suffix in ("", ".inp", ".out"):
            if not os.path.isfile(base + suffix):
                sys.exit("error: %s is missing: llama.cpp's vocabulary files "
                         "come from the npm package node-llama-cpp (its "
                         "llama/gitRelease.bundle); run ctest (fixture "
                         "tfm-npm-peers) or `cmake --build BUILD --target "
                         "tfm-npm-peers` to fetch them" % (base + suffix))
        cases = read_cases(base)
        texts = list(cases)
        got = (run_tool if mode == "--tool" else run_exe)(prog, base, texts)
        ok = 0
        for text, ids in zip(texts, got):
            if ids == cases[text]:
                ok += 1
            else:
                failed += 1
                print("%s: FAIL %r\n  expected %s\n  got      %s" %
                      (name, text, " ".join(map(str, cases[text])),
                       " ".join(map(str, ids))))
        print("%s: %d/%d cases" % (name, ok, len(texts)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
