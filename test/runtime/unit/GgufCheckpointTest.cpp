//===- GgufCheckpointTest.cpp - GGUF files as checkpoints -----------------===//
//
// A GGUF file given to tfm_weights_load (runtime/src/checkpoint.c,
// weights.c): its tensors bound by name as a safetensors file's, in
// row-major shape (ggml's ne reversed), every ggml type the runtime
// converts turned into the f32 values ggml's dequantization gives; under
// canonical names and through sources that name GGUF tensors (a "gguf"
// checkpoint layout, no base-model prefixes); with a safetensors file
// beside it; the ggml form of each tensor (tfm_bound_ggml); and the errors,
// which name the file and the tensor.
//
//===----------------------------------------------------------------------===//

#include "tfm/packed_layout.h"
#include "tfm/runtime.h"

extern "C" {
#include "checkpoint.h"
#include "ggml_quants.h"
#include "internal.h"
}

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Shape = std::vector<int64_t>;

/// A tensor of a test GGUF file: its row-major shape (the file gets ggml's
/// ne, reversed), ggml type and raw bytes.
struct GgufTensor {
  std::string name;
  Shape shape;
  int32_t type;
  std::string bytes;
};

struct Writer {
  std::string b;
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      b.push_back(char(v >> (8 * i)));
  }
  void str(const std::string &s) {
    le(s.size(), 8);
    b += s;
  }
  void pad(size_t align) {
    while (b.size() % align)
      b.push_back('\0');
  }
};

/// An integer metadata value: its key, GGUF value type and value.
struct IntKey {
  std::string key;
  uint32_t type; // 2: uint16, 5: int32
  int64_t value;
};

/// A GGUF v3 file (default alignment 32) with general.architecture, the
/// integer keys `ints` and `tensors`, as ggml's docs/gguf.md lays it out.
void writeGguf(const std::string &path, const std::vector<GgufTensor> &tensors,
               const std::vector<IntKey> &ints = {}) {
  Writer w;
  w.b = "GGUF";
  w.le(3, 4);
  w.le(tensors.size(), 8);
  w.le(1 + ints.size(), 8);
  w.str("general.architecture");
  w.le(8, 4); // string
  w.str("tfm-test");
  for (const IntKey &k : ints) {
    w.str(k.key);
    w.le(k.type, 4);
    w.le(uint64_t(k.value), k.type == 2 ? 2 : 4);
  }
  uint64_t offset = 0;
  for (const GgufTensor &t : tensors) {
    w.str(t.name);
    w.le(t.shape.size(), 4);
    for (size_t d = t.shape.size(); d-- > 0;)
      w.le(uint64_t(t.shape[d]), 8);
    w.le(uint32_t(t.type), 4);
    w.le(offset, 8);
    offset += (t.bytes.size() + 31) / 32 * 32;
  }
  w.pad(32);
  for (const GgufTensor &t : tensors) {
    w.b += t.bytes;
    w.pad(32);
  }
  std::ofstream(path, std::ios::binary) << w.b;
}

std::string raw(const void *p, size_t n) {
  return std::string(static_cast<const char *>(p), n);
}

/// Values that are exact in f16 and bf16, all different.
std::vector<float> values(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = std::ldexp(float((i * 37 + seed * 11) % 61) - 30.0f, -5);
  return v;
}

GgufTensor f32(const std::string &name, const Shape &shape,
               const std::vector<float> &v) {
  return {name, shape, TFM_GGML_F32, raw(v.data(), 4 * v.size())};
}

GgufTensor f16(const std::string &name, const Shape &shape,
               const std::vector<float> &v) {
  std::string bytes;
  for (float x : v) {
    uint16_t h = tfm_f32_to_f16(x);
    bytes += raw(&h, 2);
  }
  return {name, shape, TFM_GGML_F16, bytes};
}

GgufTensor q8_0(const std::string &name, const Shape &shape,
                const std::vector<float> &v) {
  std::string bytes(v.size() / 32 * 34, '\0');
  tfm_ggml_quantize_row_q8_0(v.data(), bytes.data(), int64_t(v.size()));
  return {name, shape, TFM_GGML_Q8_0, bytes};
}

/// Deterministic bytes as blocks of `type` for `n` values, with f16 scales
/// that keep the values finite.
GgufTensor blocks(const std::string &name, const Shape &shape, int32_t type) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::string bytes(tfm_ggml_row_bytes(type, n), '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = char((i * 131 + 7) % 251);
  int64_t block, size;
  tfm_ggml_type_info(type, nullptr, &block, &size);
  // The f16 scales small normals (0x2C00 = 1/16): Q4_K's d and dmin at the
  // block's start, Q6_K's d at its end.
  for (size_t at = 0; at < bytes.size(); at += size_t(size)) {
    size_t d = type == TFM_GGML_Q6_K ? at + 208 : at;
    bytes[d] = 0x00;
    bytes[d + 1] = 0x2C;
    if (type == TFM_GGML_Q4_K) {
      bytes[at + 2] = 0x00;
      bytes[at + 3] = 0x28;
    }
  }
  return {name, shape, type, bytes};
}

std::vector<float> dequantized(const GgufTensor &t) {
  int64_t n = 1;
  for (int64_t d : t.shape)
    n *= d;
  std::vector<float> out(n);
  EXPECT_EQ(tfm_ggml_dequantize(t.type, t.bytes.data(), out.data(), n), TFM_OK)
      << tfm_last_error();
  return out;
}

std::string tempPath(const std::string &name) {
  return std::string(::testing::TempDir()) + "tfm_ggufckpt_" + name;
}

std::string shapeJson(const Shape &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

struct Param {
  std::string name;
  Shape shape;
  std::string source; // JSON, or empty: canonical
  int panel = 0;
};

/// A description of `ps`; `checkpoint` is the "checkpoint" object or empty
/// (canonical names).
std::string describe(const std::vector<Param> &ps,
                     const std::string &checkpoint) {
  std::string params, abi;
  for (size_t i = 0; i < ps.size(); ++i) {
    const Param &p = ps[i];
    params += (i ? "," : "") + std::string("{\"name\":\"") + p.name +
              "\",\"shape\":" + shapeJson(p.shape) +
              ",\"synthetic\":\"normal\"";
    if (!p.source.empty())
      params += ",\"source\":" + p.source;
    params += "}";
    abi += (i ? "," : "") + std::string("{\"name\":\"") + p.name +
           "\",\"index\":" + std::to_string(i) +
           ",\"panel\":" + std::to_string(p.panel) + "}";
  }
  return std::string("{\"name\":\"g\",\"vocab\":10,\"context\":8,") +
         "\"parameter_count\":1," +
         (checkpoint.empty() ? "" : "\"checkpoint\":" + checkpoint + ",") +
         "\"parameters\":[" + params + "],\"abi_params\":[" + abi +
         "],\"inputs\":[{\"name\":\"tokens\",\"dtype\":\"int32\","
         "\"shape\":[\"B\",\"T\"],\"usage\":\"tokens\"}],"
         "\"outputs\":[{\"name\":\"y\",\"dtype\":\"float32\","
         "\"shape\":[\"B\",\"T\",10]}]}";
}

const char *kGgufLlama =
    R"({"format":"gguf","arch":"llama","prefixes":[],"ignore":["rope_freqs.weight"]})";

std::string source(const std::string &tensor, const Shape &shape,
                   const std::string &transform = "copy",
                   const std::string &more = "") {
  return R"({"transform":")" + transform + R"(","tensor":")" + tensor +
         R"(","base":false,"shape":)" + shapeJson(shape) + more + "}";
}

struct Loaded {
  tfm_description d{};
  tfm_weights w{};
  std::string warnings;
  ~Loaded() {
    tfm_weights_destroy(&w);
    tfm_description_free(&d);
  }
};

tfm_status load(const std::string &json, const std::vector<std::string> &paths,
                Loaded &l) {
  tfm_status s = tfm_description_parse(json.c_str(), &l.d);
  if (s != TFM_OK)
    return s;
  if ((s = tfm_weights_init(&l.w, l.d.num_abi)) != TFM_OK)
    return s;
  std::vector<const char *> p;
  for (const std::string &x : paths)
    p.push_back(x.c_str());
  char *warnings = nullptr;
  s = tfm_weights_load(&l.w, &l.d, p.data(), p.size(), &warnings);
  if (warnings)
    l.warnings = warnings;
  std::free(warnings);
  return s;
}

std::vector<float> host(const Loaded &l, size_t i) {
  return std::vector<float>(l.w.host[i],
                            l.w.host[i] + tfm_weights_numel(&l.d, i));
}

std::vector<float> packed(const std::vector<float> &w, int64_t n, int64_t k,
                          int panel) {
  std::vector<float> out(tfm_packed_numel(TFM_PACKING_F32, n, k, panel), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j)
      out[tfm_packed_index(TFM_PACKING_F32, i, j, k, panel)] = w[i * k + j];
  return out;
}

/// Tensors under canonical names in F32, F16, Q8_0, Q4_K and Q6_K: each
/// parameter holds what ggml's dequantization gives, plain and packed.
TEST(GgufCheckpoint, CanonicalNames) {
  std::vector<float> emb = values(6 * 64, 1), norm = values(64, 2),
                     q = values(5 * 64, 3);
  GgufTensor k4 = blocks("layers.0.ffn.up.weight", {3, 256}, TFM_GGML_Q4_K);
  GgufTensor k6 = blocks("layers.0.ffn.down.weight", {2, 256}, TFM_GGML_Q6_K);
  GgufTensor wq = q8_0("layers.0.attn.q.weight", {5, 64}, q);
  std::string path = tempPath("canonical.gguf");
  writeGguf(path, {f32("embed.weight", {6, 64}, emb),
                   f16("layers.0.norm.weight", {64}, norm), wq, k4, k6});
  for (int panel : {0, 16}) {
    Loaded l;
    ASSERT_EQ(load(describe({{"embed.weight", {6, 64}, ""},
                             {"layers.0.norm.weight", {64}, ""},
                             {"layers.0.attn.q.weight", {5, 64}, "", panel},
                             {"layers.0.ffn.up.weight", {3, 256}, "", panel},
                             {"layers.0.ffn.down.weight", {2, 256}, ""}},
                            ""),
                   {path}, l),
              TFM_OK)
        << tfm_last_error();
    EXPECT_EQ(l.warnings, "");
    EXPECT_EQ(host(l, 0), emb);
    EXPECT_EQ(host(l, 1), norm);
    std::vector<float> wantQ = dequantized(wq), wantUp = dequantized(k4);
    EXPECT_EQ(host(l, 2), panel ? packed(wantQ, 5, 64, panel) : wantQ);
    EXPECT_EQ(host(l, 3), panel ? packed(wantUp, 3, 256, panel) : wantUp);
    EXPECT_EQ(host(l, 4), dequantized(k6));
    // Q8_0 is a quantization: not the values it was made from.
    EXPECT_NE(wantQ, q);
  }
}

/// Sources that name GGUF tensors: copied, transposed, and rows of a fused
/// tensor (row map); a tensor nothing reads is a warning unless ignored;
/// no prefix is tried.
TEST(GgufCheckpoint, GgufLayout) {
  std::vector<float> qkv = values(12 * 32, 4), out = values(32 * 16, 5);
  GgufTensor fused = q8_0("blk.0.attn_qkv.weight", {12, 32}, qkv);
  std::string path = tempPath("layout.gguf");
  writeGguf(path, {fused, f32("blk.0.attn_output.weight", {32, 16}, out),
                   f32("rope_freqs.weight", {4}, values(4, 6)),
                   f32("blk.0.extra.weight", {2}, values(2, 7))});
  std::vector<float> all = dequantized(fused);
  Loaded l;
  ASSERT_EQ(load(describe({{"layers.0.attn.k.weight",
                            {4, 32},
                            source("blk.0.attn_qkv.weight", {12, 32}, "rows",
                                   R"(,"offset":4,"block":4,"stride":4)")},
                           {"layers.0.attn.o.weight",
                            {16, 32},
                            source("blk.0.attn_output.weight", {32, 16},
                                   "transpose")}},
                          kGgufLlama),
                 {path}, l),
            TFM_OK)
      << tfm_last_error();
  EXPECT_EQ(host(l, 0),
            std::vector<float>(all.begin() + 4 * 32, all.begin() + 8 * 32));
  std::vector<float> t(16 * 32);
  for (int i = 0; i < 32; ++i)
    for (int j = 0; j < 16; ++j)
      t[j * 32 + i] = out[i * 16 + j];
  EXPECT_EQ(host(l, 1), t);
  EXPECT_EQ(l.warnings, "1 tensor of the checkpoint is not used by model "
                        "'g': 'blk.0.extra.weight'");

  // A source naming "model.blk..." does not find "blk...", nor the other
  // way round: GGUF names are taken as they are.
  Loaded m;
  EXPECT_EQ(load(describe({{"x",
                            {16, 32},
                            source("model.blk.0.attn_output.weight", {32, 16},
                                   "transpose")}},
                          kGgufLlama),
                 {path}, m),
            TFM_ERR_MISMATCH);
  EXPECT_NE(std::string(tfm_last_error())
                .find("missing tensor 'model.blk.0.attn_output.weight' for "
                      "parameter 'x' [16, 32]"),
            std::string::npos)
      << tfm_last_error();
}

/// A GGUF file and a safetensors file in one load; a name in both is an
/// error naming both files.
TEST(GgufCheckpoint, BesideSafetensors) {
  std::string gguf = tempPath("beside.gguf"),
              st = tempPath("beside.safetensors");
  std::vector<float> a = values(32, 8), b = values(4, 9);
  writeGguf(gguf, {q8_0("a.weight", {1, 32}, a)});
  std::string header = "{\"b.weight\":{\"dtype\":\"F32\",\"shape\":[4],"
                       "\"data_offsets\":[0,16]}}";
  while (header.size() % 8)
    header += ' ';
  std::string len(8, '\0');
  len[0] = char(header.size());
  std::ofstream(st, std::ios::binary) << len << header << raw(b.data(), 16);
  Loaded l;
  ASSERT_EQ(
      load(describe({{"a.weight", {1, 32}, ""}, {"b.weight", {4}, ""}}, ""),
           {gguf, st}, l),
      TFM_OK)
      << tfm_last_error();
  EXPECT_EQ(host(l, 1), b);

  std::string twice = tempPath("twice.gguf");
  writeGguf(twice, {f32("b.weight", {4}, b)});
  Loaded m;
  EXPECT_EQ(load(describe({{"b.weight", {4}, ""}}, ""), {twice, st}, m),
            TFM_ERR_MISMATCH);
  EXPECT_NE(std::string(tfm_last_error())
                .find("tensor 'b.weight' is in both " + twice + " and " + st),
            std::string::npos)
      << tfm_last_error();
}

/// Missing, unexpected, mis-shaped and unconvertible tensors: every one
/// reported, naming the files and the tensor.
TEST(GgufCheckpoint, Errors) {
  std::string path = tempPath("errors.gguf");
  writeGguf(path, {f32("a.weight", {4, 32}, values(128, 1)),
                   blocks("b.weight", {2, 256}, 16), // IQ2_XXS
                   f32("c.weight", {3}, values(3, 2))});
  Loaded l;
  EXPECT_EQ(load(describe({{"a.weight", {32, 4}, ""},
                           {"b.weight", {2, 256}, ""},
                           {"d.weight", {5}, ""}},
                          ""),
                 {path}, l),
            TFM_ERR_MISMATCH);
  std::string msg = tfm_last_error();
  for (const std::string &want :
       {path + ": the weights do not match model 'g':",
        std::string("tensor 'a.weight' has shape [4, 32], expected [32, 4]"),
        std::string("tensor 'b.weight' has ggml type iq2_xxs, which the "
                    "runtime does not convert"),
        std::string("missing tensor 'd.weight' [5]"),
        std::string("unexpected tensor 'c.weight'")})
    EXPECT_NE(msg.find(want), std::string::npos) << want << "\n" << msg;

  // A bad GGUF file: the reader's error, naming the file.
  std::string bad = tempPath("bad.gguf");
  std::ofstream(bad, std::ios::binary) << std::string("GGUF\x01\0\0\0", 8);
  Loaded m;
  EXPECT_EQ(load(describe({{"a.weight", {4, 32}, ""}}, ""), {bad}, m),
            TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error()).find(bad), std::string::npos)
      << tfm_last_error();
}

/// tfm_bound_ggml: a GGUF tensor's type, blocks and rows as the file
/// holds them; none for a safetensors tensor.
TEST(GgufCheckpoint, GgmlForm) {
  std::string path = tempPath("form.gguf");
  GgufTensor k4 = blocks("w", {3, 512}, TFM_GGML_Q4_K);
  writeGguf(path, {f32("n", {7}, values(7, 1)), k4});
  tfm_checkpoint c;
  const char *paths[] = {path.c_str()};
  ASSERT_EQ(tfm_checkpoint_open(paths, 1, &c), TFM_OK) << tfm_last_error();
  const tfm_bound *b = tfm_checkpoint_find(&c, "w");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->view->rank, 2);
  EXPECT_EQ(b->view->shape[0], 3);
  EXPECT_EQ(b->view->shape[1], 512);
  EXPECT_EQ(b->view->dtype, TFM_GGML_DTYPE(TFM_GGML_Q4_K));
  tfm_ggml_view v;
  ASSERT_TRUE(tfm_bound_ggml(b, &v));
  EXPECT_EQ(v.type, TFM_GGML_Q4_K);
  EXPECT_EQ(v.rows, 3);
  EXPECT_EQ(v.cols, 512);
  EXPECT_EQ(v.row_bytes, 288u);
  EXPECT_EQ(std::memcmp(v.data, k4.bytes.data(), k4.bytes.size()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % 32, 0u);
  tfm_checkpoint_close(&c);
}

int32_t firstParam(void *const *params, const tfm_tensor *inputs,
                   tfm_tensor *output) {
  // output[b, t, :] = params[0][token, :10].
  const float *table = static_cast<const float *>(params[0]);
  const int32_t *tok = static_cast<const int32_t *>(inputs[0].data);
  float *out = static_cast<float *>(output->data);
  int64_t n = inputs[0].shape[0] * inputs[0].shape[1];
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < 10; ++j)
      out[i * 10 + j] = table[tok[i] * 32 + j];
  return 0;
}

/// Through the C API: tfm_model_load_weights of one GGUF file, the model
/// run on its dequantized table, and --info naming the layout and each
/// parameter's GGUF tensor.
TEST(GgufCheckpoint, ModelApi) {
  std::vector<float> emb = values(10 * 32, 3);
  GgufTensor table = q8_0("token_embd.weight", {10, 32}, emb);
  std::string path = tempPath("api.gguf");
  writeGguf(path, {table});
  std::string json = describe({{"embed.tokens.weight",
                                {10, 32},
                                source("token_embd.weight", {10, 32})}},
                              kGgufLlama);
  tfm_model *m;
  ASSERT_EQ(tfm_model_create(json.c_str(), firstParam, &m), TFM_OK)
      << tfm_last_error();
  ASSERT_EQ(tfm_model_load_weights(m, path.c_str()), TFM_OK)
      << tfm_last_error();
  int32_t tokens[2] = {7, 2};
  tfm_tensor in{};
  in.dtype = TFM_I32;
  in.rank = 2;
  in.shape[0] = 1;
  in.shape[1] = 2;
  in.data = tokens;
  tfm_tensor out{};
  ASSERT_EQ(tfm_model_run(m, &in, &out), TFM_OK) << tfm_last_error();
  std::vector<float> want = dequantized(table);
  for (int t = 0; t < 2; ++t)
    for (int j = 0; j < 10; ++j)
      EXPECT_EQ(static_cast<float *>(out.data)[t * 10 + j],
                want[tokens[t] * 32 + j]);
  tfm_tensor_free(&out);
  char *text = nullptr;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  tfm_model_print_info(m, f);
  std::fclose(f);
  std::string info(text, size);
  std::free(text);
  EXPECT_NE(info.find("checkpoint: GGUF llama layout (llama.cpp's tensor "
                      "names)"),
            std::string::npos)
      << info;
  EXPECT_NE(info.find("<- token_embd.weight [10, 32]"), std::string::npos)
      << info;
  tfm_model_destroy(m);
}

/// A GGUF file split as llama.cpp's gguf-split writes it: the first shard
/// opens the others by name (PREFIX-0000k-of-0000N.gguf) and their tensors
/// bind as one file's; a later shard alone, a missing or misnumbered shard,
/// a first shard not named so and a wrong tensor count are errors naming
/// the files.
TEST(GgufCheckpoint, SplitFiles) {
  std::string dir = tempPath("split");
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto shard = [&](int no, int count) {
    char name[64];
    std::snprintf(name, sizeof name, "/m-%05d-of-%05d.gguf", no + 1, count);
    return dir + name;
  };
  std::vector<float> a = values(32, 1), b = values(64, 2), c = values(4, 3);
  auto keys = [](int no, int count, int total) {
    std::vector<IntKey> k = {{"split.no", 2, no}, {"split.count", 2, count}};
    if (total >= 0)
      k.push_back({"split.tensors.count", 5, total});
    return k;
  };
  writeGguf(shard(0, 3), {f32("a.weight", {1, 32}, a)}, keys(0, 3, 3));
  writeGguf(shard(1, 3), {q8_0("b.weight", {2, 32}, b)}, keys(1, 3, 3));
  writeGguf(shard(2, 3), {f32("c.weight", {4}, c)}, keys(2, 3, 3));
  std::string json = describe({{"a.weight", {1, 32}, ""},
                               {"b.weight", {2, 32}, ""},
                               {"c.weight", {4}, ""}},
                              "");
  {
    Loaded l;
    ASSERT_EQ(load(json, {shard(0, 3)}, l), TFM_OK) << tfm_last_error();
    EXPECT_EQ(host(l, 0), a);
    EXPECT_EQ(host(l, 1), dequantized(q8_0("b", {2, 32}, b)));
    EXPECT_EQ(host(l, 2), c);
  }
  {
    // Every shard named, in any order: each is opened once.
    Loaded l;
    ASSERT_EQ(load(json, {shard(2, 3), shard(0, 3), shard(1, 3)}, l), TFM_OK)
        << tfm_last_error();
    EXPECT_EQ(host(l, 2), c);
  }
  auto fails = [&](const std::vector<std::string> &paths,
                   const std::string &want) {
    Loaded l;
    EXPECT_NE(load(json, paths, l), TFM_OK);
    EXPECT_NE(std::string(tfm_last_error()).find(want), std::string::npos)
        << want << "\n"
        << tfm_last_error();
  };
  fails({shard(1, 3)},
        shard(1, 3) + ": shard 2 of 3 of a split GGUF file: give the first "
                      "shard (...-00001-of-00003.gguf)");
  // A misnumbered shard.
  writeGguf(shard(2, 3), {f32("c.weight", {4}, c)}, keys(1, 3, 3));
  fails({shard(0, 3)}, shard(2, 3) +
                           ": split.no 1 and split.count 3, expected 2 and "
                           "3 (shard 3 of 3 named by " +
                           shard(0, 3) + ")");
  // A missing shard.
  std::remove(shard(2, 3).c_str());
  fails({shard(0, 3)}, shard(2, 3) +
                           ": cannot open the weights file (a "
                           "shard named by " +
                           shard(0, 3) + ")");
  // The tensors in all.
  writeGguf(shard(2, 3), {f32("c.weight", {4}, c)}, keys(2, 3, 3));
  writeGguf(shard(0, 3), {f32("a.weight", {1, 32}, a)}, keys(0, 3, 4));
  fails({shard(0, 3)}, shard(0, 3) + ": split.tensors.count is 4, but its 3 "
                                     "shards hold 3 tensors");
  // A first shard whose name does not give the others'.
  std::string odd = dir + "/odd.gguf";
  writeGguf(odd, {f32("a.weight", {1, 32}, a)}, keys(0, 3, 3));
  fails({odd}, odd + ": the first shard of a GGUF split in 3 (split.count), "
                     "but its name does not end in '-00001-of-00003.gguf'");
}

GgufTensor bf16(const std::string &name, const Shape &shape,
                const std::vector<float> &v) {
  std::string bytes;
  for (float x : v) {
    uint16_t h = tfm_f32_to_bf16(x);
    bytes += raw(&h, 2);
  }
  return {name, shape, TFM_GGML_BF16, bytes};
}

/// A source's "parts" (llama.cpp's attn_k_b and attn_v_b of DeepSeek's
/// kv_b): the tensor [G * (n_0 + n_1), C] read from the pieces when the
/// file has no tensor of its name, part 0 [G, C, n_0] transposed and part 1
/// [G, n_1, C] as stored, in F32, F16, BF16 or Q8_0 (dequantized first),
/// plain and packed; the whole tensor read as before; and the errors: both
/// forms, a part missing or mis-shaped, neither form.
TEST(GgufCheckpoint, Parts) {
  const int64_t G = 2, n0 = 64, n1 = 3, C = 32;
  // kv[g * (n0 + n1) + r][c]: r < n0 from k [g][c][r], else v [g][r - n0][c].
  std::vector<float> kv = values(G * (n0 + n1) * C, 4);
  std::vector<float> k(G * C * n0), v(G * n1 * C);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t r = 0; r < n0; ++r)
        k[(g * C + c) * n0 + r] = kv[(g * (n0 + n1) + r) * C + c];
      for (int64_t r = 0; r < n1; ++r)
        v[(g * n1 + r) * C + c] = kv[(g * (n0 + n1) + n0 + r) * C + c];
    }
  Shape whole = {G * (n0 + n1), C}, kShape = {G, C, n0}, vShape = {G, n1, C};
  std::string parts = R"(,"parts":[{"tensor":"blk.0.attn_k_b.weight",)"
                      R"("shape":)" +
                      shapeJson(kShape) +
                      R"(,"transpose":true},{"tensor":"blk.0.attn_v_b.weight",)"
                      R"("shape":)" +
                      shapeJson(vShape) + "}]";
  std::string src = source("blk.0.attn_kv_b.weight", whole, "copy", parts);
  auto json = [&](int panel) {
    return describe({{"layers.0.attn.kv_b.weight", whole, src, panel}},
                    kGgufLlama);
  };
  std::string path = tempPath("parts.gguf");
  using Make = GgufTensor (*)(const std::string &, const Shape &,
                              const std::vector<float> &);
  for (Make make : {&f32, &f16, &bf16, &q8_0}) {
    GgufTensor kt = make("blk.0.attn_k_b.weight", kShape, k);
    GgufTensor vt = make("blk.0.attn_v_b.weight", vShape, v);
    writeGguf(path, {kt, vt});
    // What the file's values are (Q8_0 rounds them).
    std::vector<float> dk = dequantized(kt), dv = dequantized(vt);
    std::vector<float> want(kv.size());
    for (int64_t g = 0; g < G; ++g)
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t r = 0; r < n0; ++r)
          want[(g * (n0 + n1) + r) * C + c] = dk[(g * C + c) * n0 + r];
        for (int64_t r = 0; r < n1; ++r)
          want[(g * (n0 + n1) + n0 + r) * C + c] = dv[(g * n1 + r) * C + c];
      }
    if (make != &q8_0)
      EXPECT_EQ(want, kv); // exact in f16 and bf16
    for (int panel : {0, 16}) {
      Loaded l;
      ASSERT_EQ(load(json(panel), {path}, l), TFM_OK) << tfm_last_error();
      EXPECT_EQ(l.warnings, "");
      EXPECT_EQ(host(l, 0),
                panel ? packed(want, G * (n0 + n1), C, panel) : want);
    }
  }
  // Tensor parallelism (two ranks, a head each): each rank assembles its
  // block of rows from the parts.
  writeGguf(path, {f32("blk.0.attn_k_b.weight", kShape, k),
                   f32("blk.0.attn_v_b.weight", vShape, v)});
  for (int rank = 0; rank < 2; ++rank) {
    std::string sharded = describe(
        {{"layers.0.attn.kv_b.weight", {n0 + n1, C}, src}}, kGgufLlama);
    for (auto [from, to] :
         {std::pair<std::string, std::string>{
              "\"parameter_count\":1,",
              "\"parameter_count\":1,\"tensor_parallel\":2,"},
          {"\"synthetic\":\"normal\"",
           "\"synthetic\":\"normal\",\"shard\":{\"axis\":0,\"full\":" +
               std::to_string(G * (n0 + n1)) + "}"}})
      sharded.replace(sharded.find(from), from.size(), to);
    Loaded l;
    ASSERT_EQ(tfm_description_parse(sharded.c_str(), &l.d), TFM_OK)
        << tfm_last_error();
    l.d.tp_rank = rank;
    ASSERT_EQ(tfm_weights_init(&l.w, l.d.num_abi), TFM_OK);
    const char *paths[] = {path.c_str()};
    char *warnings = nullptr;
    ASSERT_EQ(tfm_weights_load(&l.w, &l.d, paths, 1, &warnings), TFM_OK)
        << tfm_last_error();
    std::free(warnings);
    EXPECT_EQ(host(l, 0),
              std::vector<float>(kv.begin() + rank * (n0 + n1) * C,
                                 kv.begin() + (rank + 1) * (n0 + n1) * C));
  }
  // The tensor whole: read as it is.
  writeGguf(path, {q8_0("blk.0.attn_kv_b.weight", whole, kv)});
  {
    Loaded l;
    ASSERT_EQ(load(json(0), {path}, l), TFM_OK) << tfm_last_error();
    EXPECT_EQ(host(l, 0),
              dequantized(q8_0("blk.0.attn_kv_b.weight", whole, kv)));
  }
  auto fails = [&](const std::vector<GgufTensor> &tensors,
                   const std::string &want) {
    writeGguf(path, tensors);
    Loaded l;
    EXPECT_EQ(load(json(0), {path}, l), TFM_ERR_MISMATCH);
    EXPECT_NE(std::string(tfm_last_error()).find(want), std::string::npos)
        << want << "\n"
        << tfm_last_error();
  };
  GgufTensor kt = f32("blk.0.attn_k_b.weight", kShape, k),
             vt = f32("blk.0.attn_v_b.weight", vShape, v);
  fails({f32("blk.0.attn_kv_b.weight", whole, kv), kt, vt},
        "tensor 'blk.0.attn_kv_b.weight' and its parts "
        "'blk.0.attn_k_b.weight' and 'blk.0.attn_v_b.weight' are all in the "
        "checkpoint: it is stored whole or in parts, not both (for parameter "
        "'layers.0.attn.kv_b.weight' [134, 32])");
  fails({kt}, "missing tensor 'blk.0.attn_v_b.weight' [2, 3, 32], part 2 of "
              "2 of 'blk.0.attn_kv_b.weight' [134, 32], whose other parts "
              "are in the checkpoint (for parameter "
              "'layers.0.attn.kv_b.weight' [134, 32])");
  // Not transposed, as the unsplit rows are.
  fails({f32("blk.0.attn_k_b.weight", {G, n0, C}, k), vt},
        "tensor 'blk.0.attn_k_b.weight' has shape [2, 64, 32], expected [2, "
        "32, 64] (part 1 of 2 of 'blk.0.attn_kv_b.weight' [134, 32], for "
        "parameter 'layers.0.attn.kv_b.weight' [134, 32])");
  fails({kt, blocks("blk.0.attn_v_b.weight", vShape, 9)}, // Q8_1
        "tensor 'blk.0.attn_v_b.weight' has ggml type q8_1, which the "
        "runtime does not convert");
  fails({f32("other.weight", {1}, {0.0f})},
        "missing tensor 'blk.0.attn_kv_b.weight' (or its parts "
        "'blk.0.attn_k_b.weight' and 'blk.0.attn_v_b.weight') for parameter "
        "'layers.0.attn.kv_b.weight' [134, 32]");
}

/// "parts" is checked when the description is read: entries of [G, n, C]
/// (or [G, C, n] transposed) sharing G that make up a matrix source.
TEST(GgufCheckpoint, PartsDescription) {
  auto error = [](const std::string &parts, const Shape &whole = {6, 4}) {
    tfm_description d;
    std::string json = describe(
        {{"w", whole, source("w", whole, "copy", ",\"parts\":" + parts)}},
        kGgufLlama);
    tfm_status s = tfm_description_parse(json.c_str(), &d);
    if (s == TFM_OK) {
      tfm_description_free(&d);
      return std::string("(accepted)");
    }
    return std::string(tfm_last_error());
  };
  EXPECT_EQ(error(R"([{"tensor":"a","shape":[2,4,1],"transpose":true},)"
                  R"({"tensor":"b","shape":[2,2,4]}])"),
            "(accepted)");
  EXPECT_NE(error("[]").find("'parts' of the source of parameter 'w' has 0 "
                             "entries; expected 1 to 4"),
            std::string::npos);
  EXPECT_NE(error(R"([{"tensor":"a","shape":[2,4,1]}])")
                .find("'shape' of part 0 of the source of parameter 'w' is "
                      "not [G, n, 4] with the G of part 0"),
            std::string::npos);
  EXPECT_NE(error(R"([{"tensor":"a","shape":[2,1,4]},)"
                  R"({"tensor":"b","shape":[3,2,4]}])")
                .find("'shape' of part 1"),
            std::string::npos);
  EXPECT_NE(error(R"([{"tensor":"a","shape":[2,1,4]}])")
                .find("the parts of the source of parameter 'w' make 2 x 1 "
                      "rows, not the 6 of its tensor"),
            std::string::npos);
  EXPECT_NE(error(R"([{"shape":[2,3,4]}])")
                .find("part 0 of the source of parameter 'w' lacks the field "
                      "'tensor'"),
            std::string::npos);
  EXPECT_NE(error(R"([{"tensor":"a","shape":[6,4]}])", {24})
                .find("has 'parts' but its tensor is not one matrix"),
            std::string::npos);
}

} // namespace
