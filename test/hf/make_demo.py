#!/usr/bin/env python3
"""Writes a demo Hugging Face model folder for the README's set-up:

    python3 test/hf/make_demo.py demo-llama
    tfmc import demo-llama -o demo.tfm
    tfmc demo.tfm -o demo
    ./demo --weights demo-llama --prompt "Hello"

The folder is the small LLaMA-3.1-style model of the tests (2 layers,
d_model 64, grouped-query attention, rope_type llama3, random weights, a
sharded safetensors checkpoint with model.safetensors.index.json) and a
byte-level BPE `tokenizer.json` in Hugging Face's format whose 256 tokens are
the 256 bytes (GPT-2's byte-to-unicode alphabet, no merges), so that every
text encodes: token id = byte value ("Hello" -> 72 101 108 108 111). The
weights are random: the output is noise, the flow is real.

    make_demo.py FOLDER [--type TYPE[:VARIANT]] [--seed N]

With --type, any model of hf_models.CASES is written instead (the tokenizer
is added only where the vocabulary has 256 entries).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_models  # noqa: E402


def bytes_to_unicode():
    """GPT-2's map from bytes to printable characters."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def byte_tokenizer():
    alphabet = bytes_to_unicode()
    vocab = {alphabet[b]: b for b in range(256)}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                          "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True,
                           "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True,
                    "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("--type", default="llama:llama3")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    mt, variant = hf_models.split_case(args.type)
    try:
        cfg = hf_models.make(mt, args.folder, args.seed, variant)
    except ValueError as e:
        print("make_demo.py: %s" % e, file=sys.stderr)
        return 1
    if cfg.get("vocab_size") == 256:
        with open(os.path.join(args.folder, "tokenizer.json"), "w") as f:
            json.dump(byte_tokenizer(), f, indent=2, ensure_ascii=False)
            f.write("\n")
        with open(os.path.join(args.folder, "tokenizer_config.json"), "w") as f:
            json.dump({"add_bos_token": False, "add_eos_token": False,
                       "clean_up_tokenization_spaces": False,
                       "model_max_length": cfg.get("max_position_embeddings", 64),
                       "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=2)
            f.write("\n")
    print("wrote %s (%s) to %s" % (args.type, ", ".join(sorted(os.listdir(args.folder))), args.folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
