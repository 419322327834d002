"""Checks a model executable's --prompt against its other flags.

    check_prompt.py EXE TOKENIZER PROMPT TMPDIR

--tokenize gives the ids; the same ids as an .npy --input must give the same
argmax of the last position as --prompt does; and what --prompt prints must
be the prompt followed by the text that token adds, as --detokenize says.
"""
import os
import re
import struct
import subprocess
import sys

exe, tokenizer, prompt, tmpdir = sys.argv[1:5]


def run(*args):
    r = subprocess.run([exe, *args], capture_output=True)
    if r.returncode:
        sys.exit("%s %s failed:\n%s" % (exe, " ".join(args), r.stderr.decode()))
    return r.stdout.decode("utf-8"), r.stderr.decode("utf-8")


ids = [int(x) for x in run("--tokenizer", tokenizer, "--tokenize", prompt)[0].split()]
header = "{'descr': '<i4', 'fortran_order': False, 'shape': (1, %d), }" % len(ids)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
npy = os.path.join(tmpdir, "prompt-ids.npy")
with open(npy, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<%di" % len(ids), *ids))

argmax = re.compile(r"argmax of the last row: (\d+)")
by_input = int(argmax.search(run("--random-weights", "1", "--input", npy)[0]).group(1))
text, info = run("--random-weights", "1", "--tokenizer", tokenizer, "--prompt", prompt)
by_prompt = int(argmax.search(info).group(1))
if by_input != by_prompt:
    sys.exit("--prompt gave next token %d, --input of the same ids %d" % (by_prompt, by_input))
before = run("--tokenizer", tokenizer, "--detokenize", " ".join(map(str, ids)))[0][:-1]
after = run("--tokenizer", tokenizer, "--detokenize", " ".join(map(str, ids + [by_input])))[0][:-1]
expected = prompt + after[len(before):] + "\n"
if not after.startswith(before) or text != expected:
    sys.exit("--prompt printed %r, expected %r" % (text, expected))
print("next token %d: %r" % (by_prompt, text))
