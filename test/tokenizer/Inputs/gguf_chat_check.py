#!/usr/bin/python3
"""The chat templates of GGUF files, rendered by tfm-chat-template from the
file and by Python's Jinja2 (as test/chat/Inputs/compare.py configures it)
from the template this script reads out of the file itself, compared byte
for byte.

    gguf_chat_check.py CLI CONVERSATIONS.json FILE.gguf...

Every template of a file (tokenizer.chat_template and each
tokenizer.chat_template.NAME, which --name selects) over every
conversation, with bos_token and eos_token the text of the file's BOS and
EOS tokens: the first conversation rendered by tfm-chat-template from the
file, the others from the template written out to a file of its own (a
read of the vocabulary per rendering took 30 s in all). Prints "FILE: K of N renderings identical" per file; exit 1 on
any difference or a file without a template.
"""
import json
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "chat", "Inputs"))
import compare  # noqa: E402

SIZES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
         10: "Q", 11: "q", 12: "d"}


def read_kv(path):
    """The metadata of a GGUF file (versions 2 and 3) as a dict."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"GGUF":
        sys.exit("%s: not a GGUF file" % path)
    pos = 4
    version, _, n_kv = struct.unpack_from("<IQQ", data, pos)
    pos += 20
    if version not in (2, 3):
        sys.exit("%s: GGUF version %d" % (path, version))

    def string():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        s = data[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    def value(t):
        nonlocal pos
        if t == 8:
            return string()
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            return [value(et) for _ in range(n)]
        fmt = "<" + SIZES[t]
        (v,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v

    kv = {}
    for _ in range(n_kv):
        key = string()
        (t,) = struct.unpack_from("<I", data, pos)
        pos += 4
        kv[key] = value(t)
    return kv


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    cli, conversations_path, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(conversations_path, encoding="utf-8") as f:
        conversations = json.load(f)
    failed = False
    for path in files:
        kv = read_kv(path)
        tokens = kv.get("tokenizer.ggml.tokens", [])
        templates = [(None if k == "tokenizer.chat_template" else
                      k[len("tokenizer.chat_template."):], v)
                     for k, v in kv.items()
                     if k == "tokenizer.chat_template" or
                     k.startswith("tokenizer.chat_template.")]
        if not templates:
            print("error: %s has no tokenizer.chat_template" % path)
            failed = True
            continue
        total = ok = 0
        for name, source in templates:
            # The first conversation through the GGUF file itself (the
            # command line reads the template there, by --name); the others
            # through the same template written to a file of its own, which
            # spares a read of the whole vocabulary per rendering.
            with tempfile.NamedTemporaryFile("w", encoding="utf-8",
                                             suffix=".jinja",
                                             delete=False) as f:
                f.write(source)
                extracted = f.name
            for k, conv in enumerate(conversations):
                ctx = dict(conv["context"])
                for key, idkey in (("bos_token", "tokenizer.ggml.bos_token_id"),
                                   ("eos_token", "tokenizer.ggml.eos_token_id")):
                    i = kv.get(idkey)
                    if key not in ctx and i is not None and i < len(tokens):
                        ctx[key] = tokens[i]
                label = "%s%s / %s" % (os.path.basename(path),
                                       ":" + name if name else "", conv["name"])
                total += 1
                if (compare.compare(label, cli, source, path, ctx, name)
                        if k == 0 else
                        compare.compare(label, cli, source, extracted, ctx)):
                    ok += 1
            os.unlink(extracted)
        print("%s: %d of %d renderings identical" %
              (os.path.basename(path), ok, total))
        failed |= ok != total
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
