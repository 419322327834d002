//===- SaveWeightsTest.cpp - tfm_model_save_weights
//-------------------------===//
//
// The weights a model holds saved as GGUF and read back by the same model:
// every entry of the parameter table byte for byte, whatever its form (f32,
// bf16 pairs of packed panels, a weight's ggml rows read in place from the
// saved file's mapping); what cannot be saved is refused with the file
// named. (gguf/save-weights.test runs compiled models end to end.)
//
//===----------------------------------------------------------------------===//
#include "tfm/ggml_blocks.h"
#include "tfm/runtime.h"

extern "C" {
#include "internal.h"
}

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string tempPath(const char *name) {
  return std::string(::testing::TempDir()) + "tfm_save_" + name;
}

int32_t noForward(void *const *, const tfm_tensor *, tfm_tensor *) { return 0; }

// "w" [5, 6] packed in panels of 4 as bf16 pairs (with `quads`, as int8
// quads instead); "m" [3, 32] in ggml rows (Q8_0); "v" [6] plain f32.
std::string description(bool quads) {
  std::string w = quads
                      ? R"({"name":"w","index":0,"panel":4,"int8_quads":true})"
                      : R"({"name":"w","index":0,"panel":4,"bf16_pairs":true})";
  return R"({"name":"saver","vocab":4,"context":3,"parameter_count":228,)"
         R"("ggml_quantize":"q8_0",)"
         R"("parameters":[{"name":"w","shape":[5,6],"synthetic":"normal"},)"
         R"({"name":"m","shape":[3,32],"synthetic":"normal"},)"
         R"({"name":"v","shape":[6],"synthetic":"ones"}],)"
         R"("abi_params":[)" +
         w +
         R"(,{"name":"m","index":1,"panel":0,"ggml":"rows"},)"
         R"({"name":"m","index":1,"panel":0,"ggml":"type"},)"
         R"({"name":"v","index":2,"panel":0}],)"
         R"("inputs":[{"name":"tokens","dtype":"int32","shape":["B","T"],)"
         R"("usage":"tokens"}],)"
         R"("outputs":[{"name":"out","dtype":"float32","shape":["B","T",1]}]})";
}

// A safetensors file of w, m and v with values that bf16 and Q8_0 round.
std::string writeCheckpoint() {
  std::vector<float> values(30 + 96 + 6);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f) * 1.2345f;
  std::string header =
      R"({"w":{"dtype":"F32","shape":[5,6],"data_offsets":[0,120]},)"
      R"("m":{"dtype":"F32","shape":[3,32],"data_offsets":[120,504]},)"
      R"("v":{"dtype":"F32","shape":[6],"data_offsets":[504,528]}})";
  while (header.size() % 8)
    header += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char *>(values.data()),
             values.size() * sizeof(float));
  std::string path = tempPath("in.safetensors");
  FILE *f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  std::fwrite(out.data(), 1, out.size(), f);
  std::fclose(f);
  return path;
}

// Bytes of table entry `a` of model `m`.
size_t entryBytes(const tfm_model *m, size_t a) {
  const tfm_abi_desc &abi = m->desc.abi[a];
  const tfm_param_desc &p = m->desc.params[abi.index];
  if (abi.ggml == TFM_ABI_GGML_TYPE)
    return 4;
  if (abi.ggml == TFM_ABI_GGML_ROWS) {
    int32_t type = *static_cast<const int32_t *>(m->weights.table[a + 1]);
    return static_cast<size_t>(p.shape[0] *
                               tfm_ggml_blocks_row_bytes(type, p.shape[1]));
  }
  size_t numel = static_cast<size_t>(tfm_weights_numel(&m->desc, a));
  return numel * (abi.bf16_pairs ? 2 : 4);
}

TEST(SaveWeights, ReadsBackEveryEntryByteForByte) {
  std::string json = description(false), in = writeCheckpoint();
  std::string out = tempPath("saved.gguf");
  std::remove(out.c_str());
  tfm_model *a, *b;
  ASSERT_EQ(tfm_model_create(json.c_str(), noForward, &a), TFM_OK)
      << tfm_last_error();
  // Nothing loaded: nothing to save, and no file made.
  EXPECT_EQ(tfm_model_save_weights(a, out.c_str()), TFM_ERR_ARGUMENT);
  EXPECT_NE(std::string(tfm_last_error()).find("no weights to save"),
            std::string::npos);
  EXPECT_EQ(std::fopen(out.c_str(), "rb"), nullptr);
  ASSERT_EQ(tfm_model_load_weights(a, in.c_str()), TFM_OK) << tfm_last_error();
  ASSERT_EQ(tfm_model_save_weights(a, out.c_str()), TFM_OK) << tfm_last_error();
  ASSERT_EQ(tfm_model_create(json.c_str(), noForward, &b), TFM_OK);
  ASSERT_EQ(tfm_model_load_weights(b, out.c_str()), TFM_OK) << tfm_last_error();
  ASSERT_EQ(a->weights.count, 4u);
  ASSERT_EQ(b->weights.count, 4u);
  EXPECT_EQ(*static_cast<const int32_t *>(a->weights.table[2]),
            TFM_GGML_BLOCKS_Q8_0);
  for (size_t i = 0; i < a->weights.count; ++i) {
    size_t bytes = entryBytes(a, i);
    ASSERT_EQ(bytes, entryBytes(b, i)) << i;
    EXPECT_EQ(std::memcmp(a->weights.table[i], b->weights.table[i], bytes), 0)
        << "entry " << i;
  }
  // The Q8_0 rows are read where they lie in the saved file's mapping.
  EXPECT_EQ(b->weights.host[1], nullptr);
  EXPECT_NE(b->weights.mapped, nullptr);
  // The input is never written over, nor is the saved file while it is
  // read.
  EXPECT_EQ(tfm_model_save_weights(a, in.c_str()), TFM_ERR_ARGUMENT);
  EXPECT_NE(std::string(tfm_last_error()).find(in + ": the weights were read"),
            std::string::npos);
  EXPECT_EQ(tfm_model_save_weights(b, out.c_str()), TFM_ERR_ARGUMENT);
  // Saved again from the saved file: the same file.
  std::string again = tempPath("again.gguf");
  ASSERT_EQ(tfm_model_save_weights(b, again.c_str()), TFM_OK)
      << tfm_last_error();
  auto slurp = [](const std::string &path) {
    std::string s;
    FILE *f = std::fopen(path.c_str(), "rb");
    char buf[4096];
    size_t n;
    while (f && (n = std::fread(buf, 1, sizeof buf, f)) > 0)
      s.append(buf, n);
    if (f)
      std::fclose(f);
    return s;
  };
  EXPECT_EQ(slurp(out), slurp(again));
  EXPECT_FALSE(slurp(out).empty());
  tfm_model_destroy(a);
  tfm_model_destroy(b);
}

TEST(SaveWeights, RefusesInt8Quads) {
  std::string json = description(true), in = writeCheckpoint();
  std::string out = tempPath("quads.gguf");
  std::remove(out.c_str());
  tfm_model *m;
  ASSERT_EQ(tfm_model_create(json.c_str(), noForward, &m), TFM_OK)
      << tfm_last_error();
  ASSERT_EQ(tfm_model_load_weights(m, in.c_str()), TFM_OK) << tfm_last_error();
  EXPECT_EQ(tfm_model_save_weights(m, out.c_str()), TFM_ERR_ARGUMENT);
  EXPECT_NE(std::string(tfm_last_error())
                .find(out + ": cannot save parameter 'w': its int8 quads"),
            std::string::npos)
      << tfm_last_error();
  EXPECT_EQ(std::fopen(out.c_str(), "rb"), nullptr);
  tfm_model_destroy(m);
}

} // namespace
