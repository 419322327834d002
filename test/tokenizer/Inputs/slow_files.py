"""Writes the files of a Hugging Face "slow" byte-level BPE tokenizer
(vocab.json, merges.txt, tokenizer_config.json) with the content of a
tokenizer.json, as save_pretrained of GPT2Tokenizer / Qwen2Tokenizer would.

  slow_files.py TOKENIZER_JSON OUT_DIR TOKENIZER_CLASS

The added tokens go to tokenizer_config.json's added_tokens_decoder, not to
vocab.json (as Qwen2's published files have them).
"""
import json
import os
import sys

src, out, klass = sys.argv[1:4]
with open(src, encoding="utf-8") as f:
    tok = json.load(f)
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
    json.dump(tok["model"]["vocab"], f, ensure_ascii=False)
with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
    f.write("#version: 0.2\n")
    for m in tok["model"]["merges"]:
        f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
decoder = {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                            "single_word", "special")}
           for a in tok.get("added_tokens", [])}
with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump({"tokenizer_class": klass, "added_tokens_decoder": decoder,
               "bos_token": None, "eos_token": "<|endoftext|>"}, f, ensure_ascii=False)
