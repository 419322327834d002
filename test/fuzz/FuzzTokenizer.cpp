//===- FuzzTokenizer.cpp - the tokenizer loaders, encode and decode -------===//
//
// tfm_tokenizer_load on files written from the input, then encode and decode
// through the loaded tokenizer. The input is
//
//   MODE FLAGS PART ("\n\x1d\n" PART)*
//
// MODE % 5 picks the files the parts are, in order:
//   0: tokenizer.json                     (loaded by the file's path)
//   1: tokenizer.json, tokenizer_config.json    (loaded by the folder)
//   2: vocab.json, merges.txt, tokenizer_config.json (by the folder; an
//      empty third part: no tokenizer_config.json)
//   3: a SentencePiece .model (through the bridge library)
//   4: a GGUF file (its tokenizer.* keys, tokenizer_gguf.c)
// and the part after the files is the text. FLAGS: bits 0-1 are the encode
// flags, bit 2 skip_special for decode. The text is encoded, its ids decoded,
// and the text's bytes, read as little-endian 16-bit numbers, decoded as ids
// too (every id from -1 to the vocabulary's size and a little past it).
// `fuzz-seeds` writes seeds from the tokenizer tests' files
// (test/fuzz/seeds.py).
//
//===----------------------------------------------------------------------===//

#include "FuzzFile.h"

#include "tfm/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <vector>

static const std::string_view kSeparator("\n\x1d\n", 3);

static const std::string &fuzzDir() {
  static const std::string dir = [] {
    std::string d = fuzzFilePath("-tokenizer");
    mkdir(d.c_str(), 0700);
    return d;
  }();
  return dir;
}

/// Writes `part` to DIR/NAME, or removes DIR/NAME when `part` is null.
static bool put(const char *name, const std::string_view *part) {
  std::string path = fuzzDir() + "/" + name;
  if (!part) {
    std::remove(path.c_str());
    return true;
  }
  return writeFuzzFile(path, reinterpret_cast<const uint8_t *>(part->data()),
                       part->size());
}

static void exercise(const tfm_tokenizer *t, std::string_view text, int flags) {
  int64_t size = tfm_tokenizer_vocab_size(t);
  (void)tfm_tokenizer_model_type(t);
  (void)tfm_tokenizer_bos_id(t);
  (void)tfm_tokenizer_eos_id(t);
  std::string token(text.substr(0, 64));
  int32_t id = tfm_tokenizer_token_to_id(t, token.c_str());
  if (id >= 0 && !tfm_tokenizer_id_to_token(t, id))
    std::abort(); // a token's id has a token
  for (int32_t probe :
       {int32_t(-1), int32_t(0), int32_t(size - 1), int32_t(size)})
    (void)tfm_tokenizer_id_to_token(t, probe);

  int32_t *ids = nullptr;
  size_t n = 0;
  if (tfm_tokenizer_encode(t, text.data(), text.size(), flags & 3, &ids, &n) ==
      TFM_OK) {
    for (size_t i = 0; i < n; ++i)
      if (ids[i] < 0 || ids[i] >= size)
        std::abort(); // encode gives ids of the vocabulary
    char *out = nullptr;
    size_t len = 0;
    if (tfm_tokenizer_decode(t, ids, n, (flags >> 2) & 1, &out, &len) ==
            TFM_OK &&
        std::strlen(out) > len)
      std::abort();
    std::free(out);
  }
  std::free(ids);

  // Arbitrary id sequences, in range and just outside it.
  std::vector<int32_t> any;
  uint32_t span = size > 0 && size < INT32_MAX - 2 ? uint32_t(size) + 2 : 2;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    uint32_t v = uint8_t(text[i]) | uint32_t(uint8_t(text[i + 1])) << 8;
    any.push_back(int32_t(v % span) - 1);
  }
  char *out = nullptr;
  size_t len = 0;
  (void)tfm_tokenizer_decode(t, any.data(), any.size(), (flags >> 2) & 1, &out,
                             &len);
  std::free(out);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  int mode = data[0] % 5, flags = data[1];
  std::string_view rest(reinterpret_cast<const char *>(data) + 2, size - 2);
  std::vector<std::string_view> parts;
  for (;;) {
    size_t at = rest.find(kSeparator);
    parts.push_back(rest.substr(0, at));
    if (at == std::string_view::npos)
      break;
    rest.remove_prefix(at + kSeparator.size());
  }
  static const size_t numFiles[] = {1, 2, 3, 1, 1};
  size_t files = numFiles[mode];
  if (parts.size() < files)
    return 0;
  auto part = [&](size_t i) {
    return i < files && !(mode == 2 && i == 2 && parts[i].empty()) ? &parts[i]
                                                                   : nullptr;
  };
  std::string_view text =
      parts.size() > files ? parts[files] : std::string_view();

  std::string path;
  bool ok = true;
  if (mode == 3) {
    ok = put("tokenizer.json", nullptr) &&
         put("tokenizer_config.json", nullptr) && put("fuzz.model", part(0));
    path = fuzzDir() + "/fuzz.model";
  } else if (mode == 4) {
    ok = put("fuzz.gguf", part(0));
    path = fuzzDir() + "/fuzz.gguf";
  } else if (mode == 2) {
    ok = put("tokenizer.json", nullptr) && put("vocab.json", part(0)) &&
         put("merges.txt", part(1)) && put("tokenizer_config.json", part(2));
    path = fuzzDir();
  } else {
    ok = put("tokenizer.json", part(0)) &&
         put("tokenizer_config.json", mode == 1 ? part(1) : nullptr);
    path = mode == 0 ? fuzzDir() + "/tokenizer.json" : fuzzDir();
  }
  if (!ok)
    return 0;
  tfm_tokenizer *t = nullptr;
  if (tfm_status s = tfm_tokenizer_load(path.c_str(), &t); s != TFM_OK) {
    // Every failure says why, naming the file (out of memory aside).
    if (t || (s != TFM_ERR_MEMORY &&
              !std::strstr(tfm_last_error(), fuzzDir().c_str())))
      std::abort();
    return 0;
  }
  exercise(t, text, flags);
  tfm_tokenizer_free(t);
  return 0;
}
