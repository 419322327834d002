"""SentencePiece models for the tokenizer tests, made and run by Debian's
python3-sentencepiece (the library itself, an implementation tfm did not
write).

  spm_tool.py train CORPUS PREFIX (unigram|bpe) NORMALIZATION VOCAB_SIZE [t5]
      trains PREFIX.model (t5: T5's special ids, pad 0, eos 1, unk 2, no bos;
      otherwise unk 0, bos 1, eos 2)
  spm_tool.py convert MODEL OUT_DIR [t5]
      writes OUT_DIR/tokenizer.json as Hugging Face's convert_slow_tokenizer
      does (SpmConverter; t5: T5Converter, with 2 <extra_id_N> tokens and
      "$A </s>"), plus a tokenizer_config.json
  spm_tool.py encode MODEL CORPUS
      prints sentencepiece's ids for every line of CORPUS (escapes as in
      js_ids.js: \\n, \\t, \\r, \\\\)
  spm_tool.py decode MODEL IDS_FILE
      prints sentencepiece's text for every line of ids
  spm_tool.py compare A B [LINE,...]
      the lines of two id files are equal, except exactly the listed ones
      (1-based), which must differ

The .model file is a protobuf (sentencepiece_model.proto); python's protobuf
is not needed: the few fields the conversion reads are read from the wire
format here.
"""
import base64
import json
import os
import re
import struct
import sys

import sentencepiece as spm


def unescape(line):
    table = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
    return re.sub(r"\\(.)", lambda m: table.get(m.group(1), "\\" + m.group(1)), line)


def corpus_lines(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [unescape(line) for line in lines]


def varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def fields(data):
    """(field number, wire type, value) for each field of a message."""
    pos = 0
    while pos < len(data):
        key, pos = varint(data, pos)
        wire = key & 7
        if wire == 0:
            value, pos = varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError("unsupported wire type %d" % wire)
        yield key >> 3, wire, value


def read_model(path):
    """The parts of ModelProto the converter reads."""
    with open(path, "rb") as f:
        data = f.read()
    model = {"pieces": [], "model_type": 1, "unk_id": 0, "unk_piece": "<unk>",
             "byte_fallback": False, "charsmap": b""}
    for field, wire, value in fields(data):
        if field == 1:  # pieces
            piece = {"piece": "", "score": 0.0, "type": 1}
            for f, w, v in fields(value):
                if f == 1:
                    piece["piece"] = v.decode("utf-8")
                elif f == 2:
                    piece["score"] = struct.unpack("<f", v)[0]
                elif f == 3:
                    piece["type"] = v
            model["pieces"].append(piece)
        elif field == 2:  # trainer_spec
            for f, w, v in fields(value):
                if f == 3:
                    model["model_type"] = v
                elif f == 40:
                    model["unk_id"] = v
                elif f == 45:
                    model["unk_piece"] = v.decode("utf-8")
                elif f == 35:
                    model["byte_fallback"] = bool(v)
        elif field == 3:  # normalizer_spec
            for f, w, v in fields(value):
                if f == 2:
                    model["charsmap"] = v
    return model


def generate_merges(vocab, vocab_scores):
    """transformers' generate_merges, ordered by the pieces' scores."""
    scores = dict(vocab_scores)
    merges = []
    for merge, piece_score in scores.items():
        local = []
        for index in range(1, len(merge)):
            left, right = merge[:index], merge[index:]
            if left in vocab and right in vocab:
                local.append((left, right, piece_score))
        local = sorted(local, key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges = sorted(merges, key=lambda val: (val[2], len(val[0]), len(val[1])), reverse=True)
    return [[left, right] for left, right, _ in merges]


def convert(model_path, out_dir, t5):
    m = read_model(model_path)
    vocab_scores = [(p["piece"], p["score"]) for p in m["pieces"]]
    extra = ["<extra_id_%d>" % i for i in range(1, -1, -1)] if t5 else []
    if t5:  # T5Converter.vocab
        vocab_scores += [(e, 0.0) for e in extra]
    if m["model_type"] == 1:
        model = {"type": "Unigram", "unk_id": m["unk_id"],
                 "vocab": [[p, s] for p, s in vocab_scores], "byte_fallback": False}
    elif m["model_type"] == 2:
        vocab = {p: i for i, (p, _) in enumerate(vocab_scores)}
        model = {"type": "BPE", "dropout": None, "unk_token": m["unk_piece"],
                 "continuing_subword_prefix": None, "end_of_word_suffix": None,
                 "fuse_unk": True, "byte_fallback": False, "ignore_merges": False,
                 "vocab": vocab, "merges": generate_merges(vocab, vocab_scores)}
    else:
        sys.exit("spm_tool.py: model type %d cannot be converted" % m["model_type"])
    # Control pieces are special added tokens, user-defined ones plain added
    # tokens; T5's <extra_id_N> are special too.
    added = [{"id": i, "content": p["piece"], "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": p["type"] == 3}
             for i, p in enumerate(m["pieces"]) if p["type"] in (3, 4)]
    added += [{"id": len(m["pieces"]) + k, "content": e, "single_word": False,
               "lstrip": False, "rstrip": False, "normalized": False, "special": True}
              for k, e in enumerate(extra)]
    normalizers = [{"type": "Strip", "strip_left": False, "strip_right": True},
                   {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"}]
    if m["charsmap"]:
        normalizers.insert(0, {"type": "Precompiled",
                               "precompiled_charsmap": base64.b64encode(m["charsmap"]).decode()})
    # As tokenizers 0.15 wrote it: add_prefix_space, which transformers.js
    # reads, beside prepend_scheme and split, which later versions write.
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True,
                 "prepend_scheme": "always", "split": True}
    post = None
    if t5:
        eos = next(i for i, p in enumerate(m["pieces"]) if p["piece"] == "</s>")
        post = {"type": "TemplateProcessing",
                "single": [{"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "</s>", "type_id": 0}},
                         {"Sequence": {"id": "B", "type_id": 0}},
                         {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                "special_tokens": {"</s>": {"id": "</s>", "ids": [eos], "tokens": ["</s>"]}}}
    tokenizer = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                 "normalizer": {"type": "Sequence", "normalizers": normalizers},
                 "pre_tokenizer": metaspace, "post_processor": post, "decoder": metaspace,
                 "model": model}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
    config = {"tokenizer_class": "T5Tokenizer", "eos_token": "</s>", "unk_token": "<unk>",
              "pad_token": "<pad>"} if t5 else {"tokenizer_class": "PreTrainedTokenizerFast"}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "train" and len(argv) in (7, 8):
        corpus, prefix, kind, norm, size = argv[2:7]
        ids = dict(pad_id=0, eos_id=1, unk_id=2, bos_id=-1) if argv[7:] == ["t5"] else {}
        spm.SentencePieceTrainer.train(
            input=corpus, model_prefix=prefix, model_type=kind, vocab_size=int(size),
            normalization_rule_name=norm, character_coverage=1.0, hard_vocab_limit=False,
            num_threads=1, minloglevel=2, **ids)
    elif cmd == "convert" and len(argv) in (4, 5):
        convert(argv[2], argv[3], argv[4:] == ["t5"])
    elif cmd == "encode" and len(argv) == 4:
        sp = spm.SentencePieceProcessor(model_file=argv[2])
        for line in corpus_lines(argv[3]):
            print(" ".join(str(i) for i in sp.encode(line)))
    elif cmd == "decode" and len(argv) == 4:
        sp = spm.SentencePieceProcessor(model_file=argv[2])
        with open(argv[3]) as f:
            for line in f.read().split("\n")[:-1]:
                text = sp.decode([int(x) for x in line.split()])
                print(text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
                      .replace("\r", "\\r"))
    elif cmd == "compare" and len(argv) in (4, 5):
        with open(argv[2]) as f:
            a = f.read().split("\n")
        with open(argv[3]) as f:
            b = f.read().split("\n")
        expected = {int(x) for x in argv[4].split(",")} if argv[4:] else set()
        if len(a) != len(b):
            sys.exit("compare: %d lines against %d" % (len(a), len(b)))
        bad = [i + 1 for i in range(len(a)) if (a[i] != b[i]) != (i + 1 in expected)]
        for n in bad:
            print("line %d: %s:\n  %s\n  %s" % (n, "differs" if n not in expected
                                                 else "was expected to differ", a[n - 1], b[n - 1]))
        if bad:
            sys.exit(1)
        print("%d lines agree, %d differ as expected" % (len(a) - len(expected), len(expected)))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
