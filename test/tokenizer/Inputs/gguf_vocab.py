#!/usr/bin/env python3
"""Writes small GGUF tokenizer files byte by byte (standard library only).

    gguf_vocab.py KIND OUT.gguf

KIND is `spm` (a valid SentencePiece-style vocabulary with a chat
template), `bpe` (a valid byte-level BPE one), or a broken variant of
them: `no-tokenizer` (no tokenizer.* keys), `scores-length` (fewer scores
than tokens), `types-length`, `bad-type` (a token type 9), `unknown-model`,
`unknown-pre`, `unsupported-pre` (kimi-k2), `no-merges` (gpt2 without
tokenizer.ggml.merges), `duplicate-token`, `tokens-not-strings`,
`scores-type` (an array of strings).
"""
import struct
import sys

UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9


def s(text):
    b = text.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def value(kind, v):
    if kind == UINT32:
        return struct.pack("<I", v)
    if kind == INT32:
        return struct.pack("<i", v)
    if kind == FLOAT32:
        return struct.pack("<f", v)
    if kind == BOOL:
        return struct.pack("<B", 1 if v else 0)
    if kind == STRING:
        return s(v)
    elem, items = v
    return (struct.pack("<IQ", elem, len(items)) +
            b"".join(value(elem, x) for x in items))


def write(path, kvs):
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for key, kind, v in kvs:
        out += s(key) + struct.pack("<I", kind) + value(kind, v)
    with open(path, "wb") as f:
        f.write(out)


SPM_TOKENS = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "\u2581a",
              "ab", "\u2581ab", "<|user|>"] + ["<0x%02X>" % b for b in range(256)]
SPM_SCORES = [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -1.5, -1.2, -0.5, 0.0] + \
    [0.0] * 256
SPM_TYPES = [2, 3, 3, 1, 1, 1, 1, 1, 1, 4] + [6] * 256

# GPT-2's bytes as characters, for a byte-level vocabulary.
def byte_chars():
    printable = list(range(33, 127)) + list(range(161, 173)) + \
        list(range(174, 256))
    out, n = {}, 0
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def spm(extra=None, drop=()):
    kvs = [("general.architecture", STRING, "llama"),
           ("tokenizer.ggml.model", STRING, "llama"),
           ("tokenizer.ggml.tokens", ARRAY, (STRING, SPM_TOKENS)),
           ("tokenizer.ggml.scores", ARRAY, (FLOAT32, SPM_SCORES)),
           ("tokenizer.ggml.token_type", ARRAY, (INT32, SPM_TYPES)),
           ("tokenizer.ggml.bos_token_id", UINT32, 1),
           ("tokenizer.ggml.eos_token_id", UINT32, 2),
           ("tokenizer.ggml.unknown_token_id", UINT32, 0),
           ("tokenizer.ggml.add_bos_token", BOOL, True),
           ("tokenizer.chat_template", STRING,
            "{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}"),
           ("tokenizer.chat_template.tool_use", STRING, "tools: {{ tools }}")]
    kvs = [kv for kv in kvs if kv[0] not in drop]
    for k, kind, v in extra or []:
        kvs = [kv for kv in kvs if kv[0] != k] + [(k, kind, v)]
    return kvs


def bpe(extra=None, drop=()):
    bc = byte_chars()
    tokens = [bc[b] for b in range(256)] + ["\u0120a", "ab", "\u0120ab",
                                             "<|endoftext|>"]
    merges = ["\u0120 a", "a b", "\u0120a b"]
    types = [1] * 259 + [3]
    kvs = [("general.architecture", STRING, "gpt2"),
           ("tokenizer.ggml.model", STRING, "gpt2"),
           ("tokenizer.ggml.pre", STRING, "gpt-2"),
           ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
           ("tokenizer.ggml.token_type", ARRAY, (INT32, types)),
           ("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
           ("tokenizer.ggml.bos_token_id", UINT32, 259),
           ("tokenizer.ggml.eos_token_id", UINT32, 259)]
    kvs = [kv for kv in kvs if kv[0] not in drop]
    for k, kind, v in extra or []:
        kvs = [kv for kv in kvs if kv[0] != k] + [(k, kind, v)]
    return kvs


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    kind, path = sys.argv[1], sys.argv[2]
    table = {
        "spm": lambda: spm(),
        "bpe": lambda: bpe(),
        "no-tokenizer": lambda: [("general.architecture", STRING, "llama"),
                                 ("llama.block_count", UINT32, 1)],
        "scores-length": lambda: spm([("tokenizer.ggml.scores", ARRAY,
                                       (FLOAT32, SPM_SCORES[:-1]))]),
        "types-length": lambda: spm([("tokenizer.ggml.token_type", ARRAY,
                                      (INT32, SPM_TYPES + [1]))]),
        "bad-type": lambda: spm([("tokenizer.ggml.token_type", ARRAY,
                                  (INT32, SPM_TYPES[:4] + [9] +
                                   SPM_TYPES[5:]))]),
        "unknown-model": lambda: spm([("tokenizer.ggml.model", STRING,
                                       "sentencepiece2")]),
        "unknown-pre": lambda: bpe([("tokenizer.ggml.pre", STRING,
                                     "no-such-pre")]),
        "unsupported-pre": lambda: bpe([("tokenizer.ggml.pre", STRING,
                                         "kimi-k2")]),
        "no-merges": lambda: bpe(drop=("tokenizer.ggml.merges",)),
        "duplicate-token": lambda: spm([("tokenizer.ggml.tokens", ARRAY,
                                         (STRING, SPM_TOKENS[:5] + ["a"] +
                                          SPM_TOKENS[6:]))]),
        "tokens-not-strings": lambda: spm([("tokenizer.ggml.tokens", ARRAY,
                                            (INT32, list(range(266))))]),
        "scores-type": lambda: spm([("tokenizer.ggml.scores", ARRAY,
                                     (STRING, ["x"] * 266))]),
    }
    if kind not in table:
        sys.exit("unknown kind %s" % kind)
    write(path, table[kind]())


if __name__ == "__main__":
    main()
