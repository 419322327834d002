//===- TokenizerTest.cpp - unit tests of the runtime's tokenizers ---------===//
//
// The corpus comparisons against independent implementations are lit tests
// (test/tokenizer); these check the C API itself: the BPE merge order and
// byte fallback on small hand-made files, added-token semantics, errors,
// and that every allocation failure is reported, never a crash.

#include "tfm/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" void tfm_fail_allocation_after(long n);

namespace {

std::string writeTokenizer(const char *name, const std::string &json) {
  std::string path = std::string(::testing::TempDir()) + "tfm_tok_" + name;
  FILE *f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  std::fwrite(json.data(), 1, json.size(), f);
  std::fclose(f);
  return path;
}

std::vector<int32_t> encode(const tfm_tokenizer *t, const std::string &text,
                            int flags = 0) {
  int32_t *ids = nullptr;
  size_t n = 0;
  EXPECT_EQ(tfm_tokenizer_encode(t, text.data(), text.size(), flags, &ids, &n),
            TFM_OK)
      << tfm_last_error();
  std::vector<int32_t> out(ids, ids + n);
  std::free(ids);
  return out;
}

std::string decode(const tfm_tokenizer *t, const std::vector<int32_t> &ids,
                   int skip = 0) {
  char *text = nullptr;
  size_t len = 0;
  EXPECT_EQ(tfm_tokenizer_decode(t, ids.data(), ids.size(), skip, &text, &len),
            TFM_OK)
      << tfm_last_error();
  std::string out(text ? text : "", len);
  std::free(text);
  return out;
}

// SentencePiece-style BPE: "▁" spaces, byte fallback, merges by rank (the
// lower rank wins even when it comes later in the word), <s> added.
const char *kBpe = R"({
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true},
    {"id": 1, "content": "<s>", "special": true},
    {"id": 2, "content": "</s>", "special": true},
    {"id": 12, "content": "<sep>", "special": false, "lstrip": true,
     "rstrip": true, "normalized": false},
    {"id": 13, "content": "bb", "single_word": true, "normalized": false}],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "\u2581"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true,
    "unk_token": "<unk>",
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, "a": 4, "b": 5,
              "c": 6, "ab": 7, "bc": 8, "\u2581a": 9, "<0xC3>": 10,
              "<0xA9>": 11},
    "merges": ["b c", "a b", "\u2581 a"]}
})";

TEST(Tokenizer, BpeMergesByRankAndFallsBackToBytes) {
  std::string path = writeTokenizer("bpe.json", kBpe);
  tfm_tokenizer *t;
  ASSERT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_OK) << tfm_last_error();
  EXPECT_STREQ(tfm_tokenizer_model_type(t), "BPE");
  EXPECT_EQ(tfm_tokenizer_vocab_size(t), 14);
  EXPECT_EQ(tfm_tokenizer_bos_id(t), 1);
  EXPECT_EQ(tfm_tokenizer_token_to_id(t, "bc"), 8);
  EXPECT_EQ(tfm_tokenizer_token_to_id(t, "<sep>"), 12);
  EXPECT_EQ(tfm_tokenizer_token_to_id(t, "zz"), -1);
  EXPECT_STREQ(tfm_tokenizer_id_to_token(t, 9), "\xE2\x96\x81"
                                                "a");
  // "▁abc": "b c" (rank 0) before "a b" (rank 1), then "▁ a".
  EXPECT_EQ(encode(t, "abc"), (std::vector<int32_t>{9, 8}));
  EXPECT_EQ(encode(t, "abc", TFM_TOKENIZE_ADD_SPECIAL),
            (std::vector<int32_t>{1, 9, 8}));
  // é is not in the vocabulary: its two bytes.
  EXPECT_EQ(encode(t, "\xC3\xA9"), (std::vector<int32_t>{3, 10, 11}));
  EXPECT_EQ(decode(t, {3, 10, 11}), "\xC3\xA9");
  // A lone byte token does not form UTF-8: U+FFFD.
  EXPECT_EQ(decode(t, {9, 10}), "a\xEF\xBF\xBD");
  // Special tokens split out before the normalizer; as text with the flag.
  EXPECT_EQ(encode(t, "a</s>b"), (std::vector<int32_t>{9, 2, 3, 5}));
  // (then <, /, s, > are outside the vocabulary and have no byte tokens: one
  // fused <unk>)
  EXPECT_EQ(encode(t, "a</s>", TFM_TOKENIZE_SPECIAL_AS_TEXT),
            (std::vector<int32_t>{9, 0}));
  // lstrip/rstrip take the spaces beside a token; it stays a token with the
  // flag (it is not special).
  EXPECT_EQ(encode(t, "a <sep> b"), (std::vector<int32_t>{9, 12, 3, 5}));
  EXPECT_EQ(encode(t, "a <sep> b", TFM_TOKENIZE_SPECIAL_AS_TEXT),
            (std::vector<int32_t>{9, 12, 3, 5}));
  // single_word: only where no letter, digit or '_' touches it.
  EXPECT_EQ(encode(t, "a bb"), (std::vector<int32_t>{9, 3, 13}));
  EXPECT_EQ(encode(t, "abb"), (std::vector<int32_t>{3, 7, 5}));
  EXPECT_EQ(encode(t, "a\xC3\xA9"
                      "bb"), /* é is a letter */
            (std::vector<int32_t>{9, 10, 11, 5, 5}));
  EXPECT_EQ(decode(t, {1, 9, 8}), "<s> abc");
  EXPECT_EQ(decode(t, {1, 9, 8}, 1), "abc");
  // Not UTF-8, and ids outside the vocabulary.
  int32_t *ids;
  size_t n;
  EXPECT_EQ(tfm_tokenizer_encode(t, "a\xFF", 2, 0, &ids, &n), TFM_ERR_ARGUMENT);
  EXPECT_STREQ(tfm_last_error(), "the text is not valid UTF-8 (byte 1, 0xFF)");
  char *text;
  int32_t bad = 14;
  EXPECT_EQ(tfm_tokenizer_decode(t, &bad, 1, 0, &text, nullptr),
            TFM_ERR_ARGUMENT);
  tfm_tokenizer_free(t);
}

TEST(Tokenizer, EmptyTextGivesOnlyTheSpecialTokens) {
  std::string path = writeTokenizer("bpe2.json", kBpe);
  tfm_tokenizer *t;
  ASSERT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_OK) << tfm_last_error();
  EXPECT_EQ(encode(t, ""), std::vector<int32_t>{});
  EXPECT_EQ(encode(t, "", TFM_TOKENIZE_ADD_SPECIAL), std::vector<int32_t>{1});
  EXPECT_EQ(decode(t, {}), "");
  tfm_tokenizer_free(t);
}

TEST(Tokenizer, EveryAllocationFailureIsReported) {
  std::string path = writeTokenizer("bpe3.json", kBpe);
  long n = 0;
  for (;; ++n) {
    ASSERT_LT(n, 5000);
    tfm_tokenizer *t = nullptr;
    tfm_fail_allocation_after(n);
    tfm_status s = tfm_tokenizer_load(path.c_str(), &t);
    int32_t *ids = nullptr;
    size_t count = 0;
    char *text = nullptr;
    if (s == TFM_OK)
      s = tfm_tokenizer_encode(t, "abc \xC3\xA9</s>", 10,
                               TFM_TOKENIZE_ADD_SPECIAL, &ids, &count);
    if (s == TFM_OK)
      s = tfm_tokenizer_decode(t, ids, count, 0, &text, nullptr);
    tfm_fail_allocation_after(-1);
    std::free(ids);
    std::free(text);
    tfm_tokenizer_free(t);
    if (s == TFM_OK)
      break;
    EXPECT_EQ(s, TFM_ERR_MEMORY)
        << "allocation " << n << ": " << tfm_last_error();
  }
  EXPECT_GT(n, 20);
}

TEST(Tokenizer, Unigram) {
  std::string path = writeTokenizer("unigram.json", R"({
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                      "prepend_scheme": "always"},
    "decoder": {"type": "Metaspace", "replacement": "\u2581",
                "prepend_scheme": "always"},
    "model": {"type": "Unigram", "unk_id": 0, "vocab": [
      ["<unk>", 0], ["\u2581", -1], ["\u2581ab", -3], ["\u2581a", -1],
      ["b", -1], ["c", -4], ["bc", -1.5]]}
  })");
  tfm_tokenizer *t;
  ASSERT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_OK) << tfm_last_error();
  // ▁a + bc (-2.5) beats ▁ab + c (-7) and ▁a + b + c (-6).
  EXPECT_EQ(encode(t, "abc"), (std::vector<int32_t>{3, 6}));
  // Unknown characters: one fused <unk>.
  EXPECT_EQ(encode(t, "axyb"), (std::vector<int32_t>{3, 0, 4}));
  EXPECT_EQ(decode(t, {3, 6, 1, 4}), "abc b");
  tfm_tokenizer_free(t);
}

// Found by fuzz-tokenizer: a Unigram byte_fallback run whose bytes lack
// <0xXX> tokens gave id -1 when there was no unk_id (each byte fell back to
// <unk> alone); as `tokenizers`, a run falls back to its bytes only when
// every byte has a token, else to one <unk>, and with no unk_id it is an
// error.
TEST(Tokenizer, UnigramByteFallbackNeedsEveryByteOrUnk) {
  std::string path = writeTokenizer("unigram-bytes.json", R"({
    "model": {"type": "Unigram", "byte_fallback": true, "vocab": [
      ["a", -1], ["<0x62>", -2], ["<0x78>", -2]]}})");
  tfm_tokenizer *t = nullptr;
  ASSERT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_OK) << tfm_last_error();
  EXPECT_EQ(encode(t, "abxa"), (std::vector<int32_t>{0, 1, 2, 0}));
  int32_t *ids = nullptr;
  size_t n = 0;
  EXPECT_EQ(tfm_tokenizer_encode(t, "abya", 4, 0, &ids, &n), TFM_ERR_ARGUMENT);
  EXPECT_EQ(ids, nullptr);
  EXPECT_NE(std::string(tfm_last_error()).find("no unk_id"), std::string::npos)
      << tfm_last_error();
  tfm_tokenizer_free(t);
  // With an unk_id, a run with a byte lacking a token is one <unk>.
  path = writeTokenizer("unigram-bytes-unk.json", R"({
    "model": {"type": "Unigram", "byte_fallback": true, "unk_id": 0,
              "vocab": [["<unk>", 0], ["a", -1], ["<0x62>", -2]]}})");
  ASSERT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_OK) << tfm_last_error();
  EXPECT_EQ(encode(t, "abya"), (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(encode(t, "aba"), (std::vector<int32_t>{1, 2, 1}));
  tfm_tokenizer_free(t);
}

// Found by fuzz-tokenizer: Viterbi took a position as unreached while its
// best score was -DBL_MAX, which a score of -DBL_MAX (or a sum overflowing
// to -inf) leaves it at, and backtracked from the end through from[] = -1.
// Scores that are not finite (1e999) are refused.
TEST(Tokenizer, UnigramScoresAtTheEdgesOfDouble) {
  std::string path = writeTokenizer("unigram-huge.json", R"({
    "model": {"type": "Unigram", "unk_id": 0, "vocab": [
      ["<unk>", 0], ["a", -1.7976931348623157e308],
      ["b", -1e308], ["ab", -1.5e308]]}})");
  tfm_tokenizer *t = nullptr;
  ASSERT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_OK) << tfm_last_error();
  EXPECT_EQ(encode(t, "a"), (std::vector<int32_t>{1}));
  EXPECT_EQ(encode(t, "ab"), (std::vector<int32_t>{3}));
  EXPECT_EQ(encode(t, "aab"), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(encode(t, "bbxa"), (std::vector<int32_t>{2, 2, 0, 1}));
  tfm_tokenizer_free(t);
  path = writeTokenizer("unigram-inf.json", R"({
    "model": {"type": "Unigram", "vocab": [["a", -1e999]]}})");
  EXPECT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_ERR_FORMAT);
  EXPECT_EQ(t, nullptr);
  EXPECT_NE(std::string(tfm_last_error()).find("not a finite number"),
            std::string::npos)
      << tfm_last_error();
}

// A SentencePiece ModelProto: the pieces (SentencePiece: 1 piece, 3 type;
// types 2 unknown, 3 control, 1 normal) of a Unigram model (trainer_spec:
// 3 model_type = 1).
std::string spmModel(const std::vector<std::pair<std::string, int>> &pieces) {
  std::string proto;
  for (const auto &[text, type] : pieces) {
    std::string piece =
        std::string("\x0a") + char(text.size()) + text + "\x18" + char(type);
    proto += std::string("\x0a") + char(piece.size()) + piece;
  }
  return proto + std::string("\x12\x02\x18\x01", 4);
}

// Found by fuzz-tokenizer: a .model whose piece starts with a NUL byte made
// libsentencepiece's trie builder (darts-clone, which takes the pieces as C
// strings) throw "zero-length key"; the exception crossed the bridge's C ABI
// and ended the process. The bridge catches, and refuses a piece holding a
// NUL byte anywhere.
TEST(Tokenizer, SentencePiecePieceWithNulIsAnError) {
  std::vector<std::pair<std::string, int>> pieces = {
      {"<unk>", 2}, {"<s>", 3}, {"</s>", 3}, {"a", 1}, {"\xe2\x96\x81", 1}};
  std::string path = writeTokenizer("spm-good.model", spmModel(pieces));
  tfm_tokenizer *t = nullptr;
  tfm_status s = tfm_tokenizer_load(path.c_str(), &t);
  if (s == TFM_ERR_IO)
    GTEST_SKIP() << tfm_last_error(); // no SentencePiece bridge
  ASSERT_EQ(s, TFM_OK) << tfm_last_error();
  EXPECT_EQ(encode(t, "aa"), (std::vector<int32_t>{4, 3, 3}));
  tfm_tokenizer_free(t);
  for (const char *bad : {"\0a", "a\0"}) {
    pieces.back().first = std::string(bad, 2);
    path = writeTokenizer("spm-nul.model", spmModel(pieces));
    t = nullptr;
    EXPECT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_ERR_FORMAT);
    EXPECT_EQ(t, nullptr);
    EXPECT_NE(std::string(tfm_last_error()).find(path), std::string::npos)
        << tfm_last_error();
  }
}

// The Precompiled normalizer on a hand-made charsmap: a darts-clone trie of
// 66 units holding one key, "A", whose replacement is "a". Per Hugging Face's
// grapheme rule, a cluster shorter than 6 bytes takes the replacement of the
// trie's shortest key that is a prefix of it (so "A" + U+0301 becomes "a",
// the accent dropped), a longer one is replaced character by character.
const char *kCharsmap =
    "CAEAAAAEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAABBBQAAAAAAgGEA";

TEST(Tokenizer, PrecompiledFollowsTheGraphemeRule) {
  std::string json = std::string(R"({"normalizer": {"type": "Precompiled",
      "precompiled_charsmap": ")") +
                     kCharsmap + R"("},
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "A": 2,
                "\u0301": 3}, "merges": []}})";
  std::string path = writeTokenizer("precompiled.json", json);
  tfm_tokenizer *t = nullptr;
  ASSERT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_OK) << tfm_last_error();
  EXPECT_EQ(encode(t, "AbA"), (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(encode(t, "A\xCC\x81"
                      "b"),
            (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(encode(t, "A\xCC\x81\xCC\x81\xCC\x81"),
            (std::vector<int32_t>{0, 3, 3, 3}));
  tfm_tokenizer_free(t);
}

TEST(Tokenizer, PrecompiledRejectsABadCharsmap) {
  std::string path = writeTokenizer("badmap.json", R"({"normalizer":
      {"type": "Precompiled", "precompiled_charsmap": "CAEAAAAE"},
      "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  tfm_tokenizer *t = nullptr;
  EXPECT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error()).find("is not a charsmap"),
            std::string::npos)
      << tfm_last_error();
}

// Found by fuzz-tokenizer: tokens and decoded text are bytes, NUL bytes
// included (they were copied as C strings, cut at the first NUL but kept
// at their full length, and read past the copy).
TEST(Tokenizer, TokensAndTextMayHoldNulBytes) {
  // Byte-level: "\u0100" stands for byte 0.
  std::string path = writeTokenizer("nul-bytelevel.json", R"({
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,
                      "use_regex": false},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"\u0100": 0, "a": 1, "b": 2,
              "\u0100a": 3}, "merges": ["\u0100 a"]}})");
  tfm_tokenizer *t = nullptr;
  ASSERT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_OK) << tfm_last_error();
  EXPECT_EQ(encode(t, std::string("\0ab", 3)), (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(decode(t, {0, 1, 2, 0, 3}), std::string("\0ab\0\0a", 6));
  tfm_tokenizer_free(t);
  // A vocabulary whose tokens hold NUL (not byte-level).
  path = writeTokenizer("nul-vocab.json", R"({
    "decoder": {"type": "Fuse"},
    "model": {"type": "BPE", "vocab": {"\u0000": 0, "b": 1,
              "\u0000b": 2, "\u0000b\u0000": 3},
              "merges": ["\u0000 b", "\u0000b \u0000"]}})");
  ASSERT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_OK) << tfm_last_error();
  EXPECT_EQ(encode(t, std::string("\0b\0\0b", 5)),
            (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(decode(t, {2, 0, 1}), std::string("\0b\0b", 4));
  tfm_tokenizer_free(t);
}

// A GGUF file's tokenizer, written byte by byte: SentencePiece-style BPE
// ("llama") by scores with <0xXX> byte tokens, a user-defined token, BOS
// added, and two chat templates.
struct Gguf {
  std::string bytes;
  uint64_t count = 0;
  void u32(uint32_t v) { bytes.append(reinterpret_cast<char *>(&v), 4); }
  void u64(uint64_t v) { bytes.append(reinterpret_cast<char *>(&v), 8); }
  void str(const std::string &s) {
    u64(s.size());
    bytes += s;
  }
  void key(const std::string &k, uint32_t type) {
    str(k);
    u32(type);
    ++count;
  }
  void string(const std::string &k, const std::string &v) {
    key(k, 8);
    str(v);
  }
  void uint(const std::string &k, uint32_t v) {
    key(k, 4);
    u32(v);
  }
  void boolean(const std::string &k, bool v) {
    key(k, 7);
    bytes += static_cast<char>(v);
  }
  void strings(const std::string &k, const std::vector<std::string> &v) {
    key(k, 9);
    u32(8);
    u64(v.size());
    for (const auto &s : v)
      str(s);
  }
  template <typename T>
  void array(const std::string &k, uint32_t type, const std::vector<T> &v) {
    key(k, 9);
    u32(type);
    u64(v.size());
    for (T x : v)
      bytes.append(reinterpret_cast<char *>(&x), sizeof x);
  }
  std::string file() {
    std::string h = "GGUF";
    uint32_t version = 3;
    uint64_t tensors = 0;
    h.append(reinterpret_cast<char *>(&version), 4);
    h.append(reinterpret_cast<char *>(&tensors), 8);
    h.append(reinterpret_cast<char *>(&count), 8);
    return h + bytes;
  }
};

std::string spmGguf(int badType = -1) {
  std::vector<std::string> tokens = {"<unk>",
                                     "<s>",
                                     "</s>",
                                     "\xE2\x96\x81",
                                     "a",
                                     "b",
                                     "\xE2\x96\x81"
                                     "a",
                                     "ab",
                                     "\xE2\x96\x81"
                                     "ab",
                                     "<|user|>"};
  std::vector<float> scores = {0, 0, 0, -1, -2, -3, -1.5f, -1.2f, -0.5f, 0};
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 4};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    tokens.push_back(name);
    scores.push_back(0);
    types.push_back(6);
  }
  if (badType >= 0)
    types[4] = badType;
  Gguf g;
  g.string("general.architecture", "llama");
  g.string("tokenizer.ggml.model", "llama");
  g.strings("tokenizer.ggml.tokens", tokens);
  g.array("tokenizer.ggml.scores", 6, scores);
  g.array("tokenizer.ggml.token_type", 5, types);
  g.uint("tokenizer.ggml.bos_token_id", 1);
  g.uint("tokenizer.ggml.eos_token_id", 2);
  g.uint("tokenizer.ggml.unknown_token_id", 0);
  g.boolean("tokenizer.ggml.add_bos_token", true);
  g.string("tokenizer.chat_template", "{{ bos_token }}chat");
  g.string("tokenizer.chat_template.tool_use", "tools");
  return g.file();
}

TEST(Tokenizer, GgufSentencePiece) {
  std::string path = writeTokenizer("spm.gguf", spmGguf());
  tfm_tokenizer *t = nullptr;
  ASSERT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_OK) << tfm_last_error();
  EXPECT_STREQ(tfm_tokenizer_model_type(t), "BPE");
  EXPECT_EQ(tfm_tokenizer_vocab_size(t), 266);
  EXPECT_EQ(tfm_tokenizer_bos_id(t), 1);
  EXPECT_EQ(tfm_tokenizer_eos_id(t), 2);
  EXPECT_EQ(tfm_tokenizer_token_to_id(t, "\xE2\x96\x81"
                                         "ab"),
            8);
  // " ab a" is "▁▁ab▁a": "ab" (-1.2) merges first, then "▁ab" (-0.5),
  // then "▁a"; a space goes in front after BOS and after a special token.
  EXPECT_EQ(encode(t, " ab a<|user|>b<s>", TFM_TOKENIZE_ADD_SPECIAL),
            (std::vector<int32_t>{1, 3, 8, 6, 9, 3, 5, 1}));
  // Raw: nothing added, control tokens are text (bytes: '<' 's' '>'), the
  // user-defined one still splits.
  EXPECT_EQ(
      encode(t, " ab a<|user|>b<s>", TFM_TOKENIZE_SPECIAL_AS_TEXT),
      (std::vector<int32_t>{3, 8, 6, 9, 3, 5, 10 + '<', 10 + 's', 10 + '>'}));
  EXPECT_EQ(encode(t, "", TFM_TOKENIZE_ADD_SPECIAL), (std::vector<int32_t>{1}));
  // Byte tokens decode to their bytes; the leading dummy space goes.
  EXPECT_EQ(decode(t, {6, 10 + 0xC3, 10 + 0xA9, 9, 3, 5}),
            "a\xC3\xA9<|user|> b");
  EXPECT_EQ(decode(t, {8, 2}, 1), "ab");
  EXPECT_STREQ(tfm_tokenizer_chat_template(t, nullptr), "{{ bos_token }}chat");
  EXPECT_STREQ(tfm_tokenizer_chat_template(t, "tool_use"), "tools");
  EXPECT_EQ(tfm_tokenizer_chat_template(t, "rag"), nullptr);
  int32_t bad = 266;
  char *text = nullptr;
  EXPECT_EQ(tfm_tokenizer_decode(t, &bad, 1, 0, &text, nullptr),
            TFM_ERR_ARGUMENT);
  tfm_tokenizer_free(t);
}

TEST(Tokenizer, GgufErrorsNameTheFileAndKey) {
  std::string path = writeTokenizer("bad.gguf", spmGguf(7));
  tfm_tokenizer *t = nullptr;
  EXPECT_EQ(tfm_tokenizer_load(path.c_str(), &t), TFM_ERR_FORMAT);
  EXPECT_EQ(t, nullptr);
  EXPECT_NE(std::string(tfm_last_error())
                .find("bad.gguf: tokenizer.ggml.token_type[4]: bad token "
                      "type 7"),
            std::string::npos)
      << tfm_last_error();
}

TEST(Tokenizer, GgufAllocationFailuresAreReported) {
  std::string path = writeTokenizer("spm2.gguf", spmGguf());
  long n = 0;
  for (;; ++n) {
    ASSERT_LT(n, 20000);
    tfm_tokenizer *t = nullptr;
    tfm_fail_allocation_after(n);
    tfm_status s = tfm_tokenizer_load(path.c_str(), &t);
    int32_t *ids = nullptr;
    size_t count = 0;
    char *text = nullptr;
    if (s == TFM_OK)
      s = tfm_tokenizer_encode(t, " ab a<|user|>b\xC3\xA9", 16,
                               TFM_TOKENIZE_ADD_SPECIAL, &ids, &count);
    if (s == TFM_OK)
      s = tfm_tokenizer_decode(t, ids, count, 0, &text, nullptr);
    tfm_fail_allocation_after(-1);
    std::free(ids);
    std::free(text);
    tfm_tokenizer_free(t);
    if (s == TFM_OK)
      break;
    EXPECT_EQ(s, TFM_ERR_MEMORY)
        << "allocation " << n << ": " << tfm_last_error();
  }
  EXPECT_GT(n, 20);
}

} // namespace
