//===- GgufTest.cpp - the GGUF reader (runtime/src/gguf.c) ----------------===//
//
// GGUF files written here byte by byte, as ggml's docs/gguf.md lays them
// out (versions 2 and 3, metadata of every value type with nested arrays,
// F32, F16, Q8_0 and Q4_K tensors, the default and a custom alignment), read
// back exactly; one test per class of bad file, each checking that the
// message names the problem and where; allocation failures; and the GGUF
// files of llama.cpp on this machine when there are any.
//
//===----------------------------------------------------------------------===//

#include "tfm/runtime.h"

extern "C" {
#include "gguf.h"
#include "internal.h"
}

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <glob.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

/// Little-endian encodings.
struct Bytes {
  std::string b;
  Bytes &u8(uint8_t v) {
    b.push_back(static_cast<char>(v));
    return *this;
  }
  Bytes &le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      u8(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Bytes &u32(uint32_t v) { return le(v, 4); }
  Bytes &u64(uint64_t v) { return le(v, 8); }
  Bytes &f32(float f) {
    uint32_t v;
    std::memcpy(&v, &f, 4);
    return u32(v);
  }
  Bytes &f64(double f) {
    uint64_t v;
    std::memcpy(&v, &f, 8);
    return u64(v);
  }
  Bytes &str(const std::string &s) {
    u64(s.size());
    b += s;
    return *this;
  }
  Bytes &raw(const std::string &s) {
    b += s;
    return *this;
  }
};

enum : uint32_t {
  U8 = 0,
  I8,
  U16,
  I16,
  U32,
  I32,
  F32,
  BOOL,
  STR,
  ARR,
  U64,
  I64,
  F64
};

struct Tensor {
  std::string name;
  std::vector<int64_t> dims;
  uint32_t type;
  std::string data;
  uint64_t offset = UINT64_MAX; // UINT64_MAX: the next aligned offset
};

/// A GGUF file: a header, key/value pairs (each the key and the encoded type
/// and value), tensor infos, padding and the data.
struct Gguf {
  uint32_t version = 3;
  uint64_t alignment = 32;
  std::vector<std::pair<std::string, std::string>> kv;
  std::vector<Tensor> tensors;
  int64_t nTensors = -1, nKv = -1; // -1: the real counts
  size_t truncate = 0;             // bytes cut from the end

  Gguf &add(const std::string &key, uint32_t type, const Bytes &value) {
    kv.push_back({key, Bytes().u32(type).raw(value.b).b});
    return *this;
  }
  Gguf &tensor(const std::string &name, std::vector<int64_t> dims,
               uint32_t type, size_t bytes) {
    std::string data(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i)
      data[i] = static_cast<char>(i * 7 + name.size());
    tensors.push_back({name, std::move(dims), type, data});
    return *this;
  }

  std::string build() const {
    Bytes f;
    f.raw("GGUF").u32(version);
    f.u64(nTensors >= 0 ? nTensors : tensors.size());
    f.u64(nKv >= 0 ? nKv : kv.size());
    for (const auto &[k, v] : kv)
      f.str(k).raw(v);
    std::vector<uint64_t> offsets;
    uint64_t at = 0;
    for (const Tensor &t : tensors) {
      // A tensor at an offset of its own does not move the next ones.
      uint64_t off = t.offset != UINT64_MAX ? t.offset : at;
      offsets.push_back(off);
      if (t.offset == UINT64_MAX) {
        at = off + t.data.size();
        at += (alignment - at % alignment) % alignment;
      }
      f.str(t.name).u32(t.dims.size());
      for (int64_t d : t.dims)
        f.u64(static_cast<uint64_t>(d));
      f.u32(t.type).u64(off);
    }
    if (!tensors.empty()) {
      while (f.b.size() % alignment)
        f.u8(0);
      size_t start = f.b.size();
      f.b.resize(start + at, '\0');
      for (size_t i = 0; i < tensors.size(); ++i)
        if (offsets[i] <= at && tensors[i].data.size() <= at - offsets[i])
          std::memcpy(&f.b[start + offsets[i]], tensors[i].data.data(),
                      tensors[i].data.size());
    }
    f.b.resize(f.b.size() - std::min(truncate, f.b.size()));
    return f.b;
  }
};

class GgufTest : public ::testing::Test {
protected:
  std::string path;
  tfm_gguf *g = nullptr;

  void SetUp() override {
    path =
        ::testing::TempDir() + "tfm-gguf-" + std::to_string(getpid()) + ".gguf";
  }
  void TearDown() override {
    tfm_gguf_close(g);
    std::remove(path.c_str());
  }

  tfm_status open(const std::string &bytes) {
    tfm_gguf_close(g);
    g = nullptr;
    std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
    return tfm_gguf_open(path.c_str(), &g);
  }

  /// The file must be refused with a message holding each of `parts`.
  void refused(const std::string &bytes, std::vector<std::string> parts) {
    ASSERT_EQ(open(bytes), TFM_ERR_FORMAT) << parts[0];
    EXPECT_EQ(g, nullptr);
    std::string msg = tfm_last_error();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const std::string &p : parts)
      EXPECT_NE(msg.find(p), std::string::npos)
          << "'" << p << "' not in: " << msg;
  }
};

std::string view(const tfm_gguf_value *v) {
  const char *s;
  size_t n;
  EXPECT_EQ(tfm_gguf_value_string(v, &s, &n), TFM_OK) << tfm_last_error();
  return std::string(s, n);
}

/// Metadata of every type, nested arrays included.
Gguf everyType() {
  Gguf f;
  f.add("general.architecture", STR, Bytes().str("llama"))
      .add("u8", U8, Bytes().u8(200))
      .add("i8", I8, Bytes().u8(0x80))
      .add("u16", U16, Bytes().le(65535, 2))
      .add("i16", I16, Bytes().le(0xFFFE, 2))
      .add("u32", U32, Bytes().u32(4000000000u))
      .add("i32", I32, Bytes().u32(static_cast<uint32_t>(-7)))
      .add("f32", F32, Bytes().f32(1.5f))
      .add("bool", BOOL, Bytes().u8(1))
      .add("u64", U64, Bytes().u64(UINT64_MAX))
      .add("i64", I64, Bytes().u64(static_cast<uint64_t>(INT64_MIN)))
      .add("f64", F64, Bytes().f64(-2.25))
      .add("empty", STR, Bytes().str(""))
      .add("nul", STR, Bytes().str(std::string("a\0b", 3)))
      .add("ints", ARR, Bytes().u32(I32).u64(3).u32(1).u32(2).u32(-3))
      .add("tokens", ARR, Bytes().u32(STR).u64(3).str("<s>").str("").str("é"))
      .add("none", ARR, Bytes().u32(F32).u64(0))
      .add("bools", ARR, Bytes().u32(BOOL).u64(2).u8(0).u8(1))
      .add("nested", ARR,
           Bytes()
               .u32(ARR)
               .u64(3)
               .u32(U8)
               .u64(2)
               .u8(1)
               .u8(2)
               .u32(STR)
               .u64(2)
               .str("x")
               .str("yz")
               .u32(ARR)
               .u64(1)
               .u32(STR)
               .u64(1)
               .str("deep"));
  return f;
}

TEST_F(GgufTest, ReadsEveryValueType) {
  for (uint32_t version : {2u, 3u}) {
    Gguf f = everyType();
    f.version = version;
    ASSERT_EQ(open(f.build()), TFM_OK) << tfm_last_error();
    EXPECT_EQ(tfm_gguf_version(g), version);
    EXPECT_EQ(tfm_gguf_alignment(g), 32u);
    EXPECT_EQ(tfm_gguf_num_tensors(g), 0u);
    EXPECT_EQ(tfm_gguf_data_offset(g), 0u);
    ASSERT_EQ(tfm_gguf_num_kv(g), f.kv.size());
    for (size_t i = 0; i < f.kv.size(); ++i) {
      EXPECT_EQ(tfm_gguf_key(g, i), f.kv[i].first);
      EXPECT_EQ(tfm_gguf_find(g, f.kv[i].first.c_str()),
                tfm_gguf_kv_value(g, i));
    }
    EXPECT_EQ(tfm_gguf_find(g, "missing"), nullptr);

    const char *s;
    size_t n;
    ASSERT_EQ(tfm_gguf_get_string(g, "general.architecture", &s, &n), TFM_OK);
    EXPECT_EQ(std::string(s, n), "llama");
    EXPECT_EQ(view(tfm_gguf_find(g, "empty")), "");
    EXPECT_EQ(view(tfm_gguf_find(g, "nul")), std::string("a\0b", 3));

    int64_t x;
    auto geti = [&](const char *key) {
      EXPECT_EQ(tfm_gguf_get_int(g, key, INT64_MIN, INT64_MAX, &x), TFM_OK)
          << tfm_last_error();
      return x;
    };
    EXPECT_EQ(geti("u8"), 200);
    EXPECT_EQ(geti("i8"), -128);
    EXPECT_EQ(geti("u16"), 65535);
    EXPECT_EQ(geti("i16"), -2);
    EXPECT_EQ(geti("u32"), 4000000000);
    EXPECT_EQ(geti("i32"), -7);
    EXPECT_EQ(geti("i64"), INT64_MIN);
    uint64_t u;
    ASSERT_EQ(tfm_gguf_value_uint(tfm_gguf_find(g, "u64"), &u), TFM_OK);
    EXPECT_EQ(u, UINT64_MAX);
    double d;
    ASSERT_EQ(tfm_gguf_get_float(g, "f32", &d), TFM_OK);
    EXPECT_EQ(d, 1.5);
    ASSERT_EQ(tfm_gguf_get_float(g, "f64", &d), TFM_OK);
    EXPECT_EQ(d, -2.25);
    int b;
    ASSERT_EQ(tfm_gguf_get_bool(g, "bool", &b), TFM_OK);
    EXPECT_EQ(b, 1);

    tfm_gguf_value a;
    ASSERT_EQ(tfm_gguf_get_array(g, "ints", TFM_GGUF_INT32, &a), TFM_OK);
    ASSERT_EQ(a.count, 3u);
    int32_t raw[3];
    std::memcpy(raw, tfm_gguf_array_data(&a), sizeof raw);
    EXPECT_EQ(raw[2], -3);
    for (uint64_t i = 0; i < 3; ++i) {
      tfm_gguf_value e = tfm_gguf_array_at(&a, i);
      ASSERT_EQ(tfm_gguf_value_int(&e, -10, 10, &x), TFM_OK);
      EXPECT_EQ(x, raw[i]);
    }
    ASSERT_EQ(tfm_gguf_get_array(g, "tokens", TFM_GGUF_STRING, &a), TFM_OK);
    ASSERT_EQ(a.count, 3u);
    EXPECT_EQ(tfm_gguf_array_data(&a), nullptr);
    tfm_gguf_value e = tfm_gguf_array_at(&a, 0);
    EXPECT_EQ(view(&e), "<s>");
    e = tfm_gguf_array_at(&a, 1);
    EXPECT_EQ(view(&e), "");
    e = tfm_gguf_array_at(&a, 2);
    EXPECT_EQ(view(&e), "é");
    ASSERT_EQ(tfm_gguf_get_array(g, "none", TFM_GGUF_FLOAT32, &a), TFM_OK);
    EXPECT_EQ(a.count, 0u);
    ASSERT_EQ(tfm_gguf_get_array(g, "bools", TFM_GGUF_BOOL, &a), TFM_OK);
    e = tfm_gguf_array_at(&a, 1);
    ASSERT_EQ(tfm_gguf_value_bool(&e, &b), TFM_OK);
    EXPECT_EQ(b, 1);

    ASSERT_EQ(tfm_gguf_get_array(g, "nested", TFM_GGUF_ARRAY, &a), TFM_OK);
    ASSERT_EQ(a.count, 3u);
    tfm_gguf_value a0 = tfm_gguf_array_at(&a, 0);
    uint64_t count;
    ASSERT_EQ(tfm_gguf_value_array(&a0, TFM_GGUF_UINT8, &count), TFM_OK);
    ASSERT_EQ(count, 2u);
    e = tfm_gguf_array_at(&a0, 1);
    ASSERT_EQ(tfm_gguf_value_int(&e, 0, 255, &x), TFM_OK);
    EXPECT_EQ(x, 2);
    tfm_gguf_value a1 = tfm_gguf_array_at(&a, 1);
    ASSERT_EQ(tfm_gguf_value_array(&a1, TFM_GGUF_STRING, &count), TFM_OK);
    e = tfm_gguf_array_at(&a1, 1);
    EXPECT_EQ(view(&e), "yz");
    tfm_gguf_value a2 = tfm_gguf_array_at(&a, 2);
    ASSERT_EQ(tfm_gguf_value_array(&a2, TFM_GGUF_ARRAY, &count), TFM_OK);
    tfm_gguf_value inner = tfm_gguf_array_at(&a2, 0);
    ASSERT_EQ(tfm_gguf_value_array(&inner, TFM_GGUF_STRING, &count), TFM_OK);
    e = tfm_gguf_array_at(&inner, 0);
    EXPECT_EQ(view(&e), "deep");
  }
}

TEST_F(GgufTest, TypedReadsNameTheProblem) {
  ASSERT_EQ(open(everyType().build()), TFM_OK) << tfm_last_error();
  int64_t x;
  EXPECT_EQ(tfm_gguf_get_int(g, "u8", 0, 100, &x), TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error()).find("'u8' is 200, outside [0, 100]"),
            std::string::npos)
      << tfm_last_error();
  EXPECT_EQ(tfm_gguf_get_int(g, "u64", INT64_MIN, INT64_MAX, &x),
            TFM_ERR_FORMAT);
  EXPECT_EQ(tfm_gguf_get_int(g, "i8", 0, 10, &x), TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error()).find("is -128, outside"),
            std::string::npos);
  uint64_t u;
  EXPECT_EQ(tfm_gguf_value_uint(tfm_gguf_find(g, "i32"), &u), TFM_ERR_FORMAT);
  EXPECT_EQ(tfm_gguf_get_int(g, "f32", 0, 10, &x), TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error())
                .find("'f32' is a float32, not an "
                      "integer"),
            std::string::npos)
      << tfm_last_error();
  double d;
  EXPECT_EQ(tfm_gguf_get_float(g, "u8", &d), TFM_ERR_FORMAT);
  const char *s;
  size_t n;
  EXPECT_EQ(tfm_gguf_get_string(g, "ints", &s, &n), TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error())
                .find("'ints' is a array, not a "
                      "string"),
            std::string::npos)
      << tfm_last_error();
  EXPECT_EQ(tfm_gguf_get_string(g, "missing.key", &s, &n), TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error())
                .find("no metadata key "
                      "'missing.key'"),
            std::string::npos);
  tfm_gguf_value a;
  EXPECT_EQ(tfm_gguf_get_array(g, "ints", TFM_GGUF_STRING, &a), TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error())
                .find("an array of int32, not of "
                      "string"),
            std::string::npos)
      << tfm_last_error();
  ASSERT_EQ(tfm_gguf_get_array(g, "ints", TFM_GGUF_TYPE_COUNT, &a), TFM_OK);
  tfm_gguf_value e = tfm_gguf_array_at(&a, 2);
  EXPECT_EQ(tfm_gguf_value_int(&e, 0, 10, &x), TFM_ERR_FORMAT);
  EXPECT_NE(std::string(tfm_last_error()).find("'ints' element 2 is -3"),
            std::string::npos)
      << tfm_last_error();
}

/// The tensors of ReadsTensors: F32 [3, 2], F16 [5], Q8_0 [64, 2] (2 blocks
/// of 34 bytes a row), Q4_K [256, 1, 2] (one block of 144 bytes a row).
Gguf withTensors(uint32_t version, uint64_t alignment) {
  Gguf f;
  f.version = version;
  f.alignment = alignment;
  f.add("general.architecture", STR, Bytes().str("gpt2"));
  if (alignment != 32)
    f.add("general.alignment", U32, Bytes().u32(alignment));
  f.tensor("token_embd.weight", {3, 2}, TFM_GGML_F32, 24)
      .tensor("output_norm.bias", {5}, TFM_GGML_F16, 10)
      .tensor("blk.0.attn_q.weight", {64, 2}, TFM_GGML_Q8_0, 136)
      .tensor("blk.0.ffn_up.weight", {256, 1, 2}, TFM_GGML_Q4_K, 288);
  return f;
}

TEST_F(GgufTest, ReadsTensors) {
  for (auto [version, alignment] : {std::pair<uint32_t, uint64_t>{3, 32},
                                    {2, 32},
                                    {3, 64},
                                    {2, 256},
                                    {3, 1}}) {
    Gguf f = withTensors(version, alignment);
    std::string bytes = f.build();
    ASSERT_EQ(open(bytes), TFM_OK) << tfm_last_error();
    EXPECT_EQ(tfm_gguf_version(g), version);
    EXPECT_EQ(tfm_gguf_alignment(g), alignment);
    uint64_t start = tfm_gguf_data_offset(g);
    EXPECT_EQ(start % alignment, 0u);
    ASSERT_EQ(tfm_gguf_num_tensors(g), f.tensors.size());
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      const Tensor &want = f.tensors[i];
      const tfm_gguf_tensor *t = tfm_gguf_tensor_at(g, i);
      EXPECT_EQ(tfm_gguf_find_tensor(g, want.name.c_str()), t);
      EXPECT_EQ(t->name, want.name);
      EXPECT_EQ(t->type, static_cast<int32_t>(want.type));
      ASSERT_EQ(t->n_dims, want.dims.size());
      for (int d = 0; d < TFM_GGUF_MAX_DIMS; ++d)
        EXPECT_EQ(t->ne[d],
                  d < static_cast<int>(want.dims.size()) ? want.dims[d] : 1);
      EXPECT_EQ(t->bytes, want.data.size());
      EXPECT_EQ(t->offset % alignment, 0u);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % alignment, 0u);
      EXPECT_EQ(std::string(static_cast<const char *>(t->data), t->bytes),
                want.data);
      EXPECT_EQ(bytes.substr(t->offset, t->bytes), want.data);
    }
    EXPECT_EQ(tfm_gguf_find_tensor(g, "blk.1.attn_q.weight"), nullptr);
  }
}

TEST_F(GgufTest, TypeTraits) {
  const char *name;
  int64_t block, bytes;
  struct {
    int32_t type;
    const char *name;
    int64_t block, bytes;
  } known[] = {{0, "f32", 1, 4},       {1, "f16", 1, 2},
               {2, "q4_0", 32, 18},    {8, "q8_0", 32, 34},
               {12, "q4_K", 256, 144}, {13, "q5_K", 256, 176},
               {14, "q6_K", 256, 210}, {30, "bf16", 1, 2}};
  for (auto &k : known) {
    ASSERT_TRUE(tfm_ggml_type_info(k.type, &name, &block, &bytes));
    EXPECT_STREQ(name, k.name);
    EXPECT_EQ(block, k.block);
    EXPECT_EQ(bytes, k.bytes);
  }
  for (int32_t removed : {-1, 4, 5, 31, 32, 33, 36, 37, 38, 43, 1000})
    EXPECT_FALSE(tfm_ggml_type_info(removed, &name, &block, &bytes)) << removed;
}

TEST_F(GgufTest, ZeroElementTensor) {
  // llama.cpp's reader accepts a dimension of 0: no bytes.
  Gguf f;
  f.tensor("empty", {0, 4}, TFM_GGML_F32, 0).tensor("a", {8}, TFM_GGML_F32, 32);
  ASSERT_EQ(open(f.build()), TFM_OK) << tfm_last_error();
  EXPECT_EQ(tfm_gguf_tensor_at(g, 0)->bytes, 0u);
}

TEST_F(GgufTest, RefusesBadHeaders) {
  refused("", {"byte 0: not a GGUF file"});
  refused("GGML\3\0\0\0", {"byte 0: not a GGUF file", "GGML"});
  Gguf f;
  f.version = 1;
  refused(f.build(), {"byte 4: GGUF version 1 is not supported"});
  f.version = 4;
  refused(f.build(), {"byte 4: unsupported GGUF version 4"});
  f.version = 0x03000000;
  refused(f.build(), {"byte 4:", "big-endian"});
  f.version = 3;
  refused(f.build().substr(0, 12),
          {"byte 8: the file ends inside the header's tensor count"});
  f.nTensors = INT64_C(1) << 40;
  refused(f.build(), {"byte 8: 1099511627776 tensors cannot fit"});
  f.nTensors = -1;
  f.nKv = -1;
  Gguf k = everyType();
  k.nKv = static_cast<int64_t>(UINT64_MAX >> 1);
  refused(k.build(), {"byte 16:", "metadata entries cannot fit"});
  k.nKv = k.kv.size() + 1;
  refused(k.build(), {"the file ends inside a metadata key"});
}

TEST_F(GgufTest, RefusesBadMetadata) {
  auto one = [](const std::string &key, uint32_t type, const Bytes &value) {
    Gguf f;
    f.add("general.architecture", STR, Bytes().str("llama"));
    f.add(key, type, value);
    return f.build();
  };
  // The second key at byte 24 + 8 + 20 + 4 + 8 + 5 = 69, its value at 82.
  refused(one("s", STR, Bytes().u64(1000).raw("abc")),
          {"byte 82: a string value is 1000 bytes long, past the end of the "
           "file (3 bytes left)"});
  refused(one("s", STR, Bytes().u64(UINT64_MAX)), {"past the end"});
  refused(one("", U8, Bytes().u8(0)), {"byte 69: metadata key 1 is empty"});
  refused(one(std::string("a\0b", 3), U8, Bytes().u8(0)),
          {"byte 69: a metadata key holds a NUL byte"});
  refused(one("t", 13, Bytes().u8(0)),
          {"byte 78: metadata 't': unknown value type 13"});
  refused(one("t", 0xFFFFFFFF, Bytes()), {"unknown value type 4294967295"});
  refused(one("b", BOOL, Bytes().u8(2)),
          {"metadata 'b': boolean value 2 is not 0 or 1"});
  refused(one("b", ARR, Bytes().u32(BOOL).u64(3).u8(0).u8(1).u8(7)),
          {"metadata 'b': boolean element 2 is 7"});
  refused(one("a", ARR, Bytes().u32(77).u64(0)),
          {"metadata 'a': unknown array element type 77"});
  refused(one("a", ARR, Bytes().u32(U32).u64(UINT64_MAX / 2)),
          {"metadata 'a': an array of 9223372036854775807 elements does not "
           "fit"});
  refused(one("a", ARR, Bytes().u32(STR).u64(1000).str("x")),
          {"an array of 1000 elements does not fit"});
  refused(one("a", ARR, Bytes().u32(STR).u64(2).str("x").u64(5).raw("ab")),
          {"a string value is 5 bytes long, past the end"});
  refused(one("a", ARR, Bytes().u32(I32).u64(2).u32(1)),
          {"an array of 2 elements does not fit"});
  refused(one("f", F64, Bytes().u32(0)),
          {"the file ends inside a metadata value"});
  refused(one("a", ARR, Bytes().u32(U8)),
          {"the file ends inside an array's length"});
  // Arrays nested TFM_GGUF_MAX_DEPTH deep.
  Bytes deep;
  for (int i = 0; i < TFM_GGUF_MAX_DEPTH; ++i)
    deep.u32(ARR).u64(1);
  deep.u32(U8).u64(0);
  refused(one("d", ARR, deep), {"metadata 'd': arrays nested deeper than 16"});
  // One level less is fine.
  Bytes ok;
  for (int i = 0; i < TFM_GGUF_MAX_DEPTH - 2; ++i)
    ok.u32(ARR).u64(1);
  ok.u32(U8).u64(0);
  ASSERT_EQ(open(one("d", ARR, ok)), TFM_OK) << tfm_last_error();

  Gguf dup;
  dup.add("general.architecture", STR, Bytes().str("llama"))
      .add("x", U8, Bytes().u8(1))
      .add("general.architecture", STR, Bytes().str("qwen2"));
  refused(dup.build(), {"byte 83: duplicate metadata key "
                        "'general.architecture' (first at byte 24)"});
}

TEST_F(GgufTest, RefusesBadAlignment) {
  Gguf f = withTensors(3, 32);
  f.add("general.alignment", U64, Bytes().u64(64));
  refused(f.build(), {"general.alignment is a uint64, not a uint32"});
  for (uint32_t bad : {0u, 3u, 48u, 0x80000001u}) {
    Gguf h = withTensors(3, 32);
    h.add("general.alignment", U32, Bytes().u32(bad));
    refused(h.build(), {"general.alignment " + std::to_string(bad) +
                        " is not a power of two"});
  }
}

TEST_F(GgufTest, RefusesBadTensorInfos) {
  auto with = [](Tensor t) {
    Gguf f;
    f.add("general.architecture", STR, Bytes().str("llama"));
    f.tensor("first", {4}, TFM_GGML_F32, 16);
    f.tensors.push_back(t);
    return f.build();
  };
  // The first tensor info at byte 24 + 45 (the metadata), the second at
  // 69 + 8 + 5 + 4 + 8 + 4 + 8 = 106.
  refused(with({"w", {1, 1, 1, 1, 1}, TFM_GGML_F32, ""}),
          {"byte 106: tensor 'w' has 5 dimensions (at most 4)"});
  refused(with({"w", {4, -3}, TFM_GGML_F32, ""}),
          {"tensor 'w' has a negative dimension -3 (dimension 1)"});
  refused(with({"w", {4}, 4, ""}), {"tensor 'w' has unknown ggml type 4"});
  refused(with({"w", {4}, 43, ""}), {"tensor 'w' has unknown ggml type 43"});
  refused(with({"w", {4}, 0xFFFFFFFF, ""}), {"unknown ggml type 4294967295"});
  refused(with({"w", {48, 2}, TFM_GGML_Q8_0, ""}),
          {"tensor 'w' of type q8_0 has rows of 48 elements, not a multiple "
           "of the type's block of 32"});
  refused(with({"w", {256 * 3 + 128}, TFM_GGML_Q4_K, ""}),
          {"not a multiple of the type's block of 256"});
  refused(with({"w", {INT64_C(1) << 40, INT64_C(1) << 30}, TFM_GGML_F32, ""}),
          {"tensor 'w' of shape [1099511627776, 1073741824, 1, 1] has too "
           "many elements"});
  refused(with({"w", {INT64_C(1) << 62}, TFM_GGML_F32, ""}),
          {"has too many elements"});
  // No elements, but dimensions whose product overflows (ne[1] * ne[2]
  // would: a row count computed from them), as the GGUF fuzzer found.
  refused(
      with({"w", {0, INT64_C(1) << 53, INT64_C(1) << 48}, TFM_GGML_F32, ""}),
      {"tensor 'w' of shape [0, 9007199254740992, 281474976710656, 1] "
       "has too many elements"});
  refused(with({std::string(64, 'n'), {4}, TFM_GGML_F32, ""}),
          {"tensor 1's name", "is 64 bytes long (at most 63)"});
  refused(with({std::string("a\0b", 3), {4}, TFM_GGML_F32, ""}),
          {"a tensor name holds a NUL byte"});
  refused(with({"first", {4}, TFM_GGML_F32, std::string(16, 'x')}),
          {"byte 106: duplicate tensor name 'first' (first at byte 69)"});
  Gguf f;
  f.tensor(std::string(20, 'w'), {4}, TFM_GGML_F32, 16);
  std::string cut = f.build();
  cut.resize(24 + 8 + 20 + 4 + 8 + 2);
  refused(cut, {"the file ends inside a tensor's type"});
}

TEST_F(GgufTest, RefusesBadTensorData) {
  Gguf f = withTensors(3, 32);
  f.tensors[1].offset = 40;
  refused(f.build(), {"tensor 'output_norm.bias' has offset 40, not a "
                      "multiple of the alignment 32"});
  f = withTensors(3, 64);
  f.tensors[1].offset = 32;
  refused(f.build(), {"offset 32, not a multiple of the alignment 64"});
  f = withTensors(3, 32);
  f.tensors[2].offset = 0;
  refused(f.build(), {"tensor 'blk.0.attn_q.weight' (data bytes 0 to 136) "
                      "overlaps tensor 'token_embd.weight' (data bytes 0 "
                      "to 24)"});
  f = withTensors(3, 32);
  f.tensors[3].offset = 1 << 20;
  refused(f.build(), {"tensor 'blk.0.ffn_up.weight' (288 bytes at offset "
                      "1048576 of the data",
                      "goes past the end of the file"});
  f = withTensors(3, 32);
  f.tensors[3].offset = UINT64_MAX - 63;
  refused(f.build(), {"goes past the end of the file"});
  f = withTensors(3, 32);
  f.truncate = 1;
  refused(f.build(), {"tensor 'blk.0.ffn_up.weight'", "goes past the end"});
  // The infos end at byte 57: the padding to 64 is cut short.
  Gguf one;
  one.tensor("z", {0}, TFM_GGML_F32, 0);
  std::string z = one.build();
  ASSERT_EQ(z.size(), 64u);
  refused(z.substr(0, 63), {"byte 57: the file ends before its tensor data "
                            "(which starts at byte 64"});
}

TEST_F(GgufTest, AllocationFailures) {
  std::string bytes = everyType().build();
  Gguf t = withTensors(3, 64);
  for (const std::string &file : {bytes, t.build()}) {
    std::ofstream(path, std::ios::binary).write(file.data(), file.size());
    int n = 0;
    for (;; ++n) {
      ASSERT_LT(n, 1000);
      tfm_fail_allocation_after(n);
      tfm_status s = tfm_gguf_open(path.c_str(), &g);
      tfm_fail_allocation_after(-1);
      if (s == TFM_OK)
        break;
      EXPECT_EQ(s, TFM_ERR_MEMORY) << n << ": " << tfm_last_error();
      EXPECT_EQ(g, nullptr);
    }
    EXPECT_GT(n, 3);
    tfm_gguf_close(g);
    g = nullptr;
  }
}

TEST_F(GgufTest, RefusesMissingFile) {
  EXPECT_EQ(tfm_gguf_open("/nonexistent/x.gguf", &g), TFM_ERR_IO);
  EXPECT_NE(std::string(tfm_last_error()).find("/nonexistent/x.gguf"),
            std::string::npos);
}

std::vector<std::string> globFiles(const char *pattern) {
  std::vector<std::string> out;
  glob_t gl;
  if (glob(pattern, 0, nullptr, &gl) == 0)
    for (size_t i = 0; i < gl.gl_pathc; ++i)
      out.push_back(gl.gl_pathv[i]);
  globfree(&gl);
  return out;
}

/// llama.cpp's vocab-only files and the GGUF models written by its tools,
/// when this machine has them (the llama peer's setup.sh, bench/genbench).
TEST_F(GgufTest, ReadsLlamaCppFiles) {
  std::vector<std::string> files =
      globFiles(TFM_SOURCE_DIR "/../shared/peers/llama/build/llama.cpp/"
                               "models/ggml-vocab-*.gguf");
  for (const std::string &f : globFiles("/tmp/tfm-genbench/models/*.gguf"))
    files.push_back(f);
  if (files.empty())
    GTEST_SKIP() << "no GGUF files of llama.cpp on this machine";
  for (const std::string &file : files) {
    SCOPED_TRACE(file);
    tfm_gguf *h = nullptr;
    ASSERT_EQ(tfm_gguf_open(file.c_str(), &h), TFM_OK) << tfm_last_error();
    const char *s;
    size_t n;
    ASSERT_EQ(tfm_gguf_get_string(h, "general.architecture", &s, &n), TFM_OK)
        << tfm_last_error();
    EXPECT_GT(n, 0u);
    ASSERT_EQ(tfm_gguf_get_string(h, "tokenizer.ggml.model", &s, &n), TFM_OK)
        << tfm_last_error();
    std::string model(s, n);
    EXPECT_TRUE(model == "gpt2" || model == "llama" || model == "bert" ||
                model == "t5" || model == "rwkv" || model == "plamo2" ||
                model == "gemma4")
        << model;
    tfm_gguf_value tokens;
    ASSERT_EQ(tfm_gguf_get_array(h, "tokenizer.ggml.tokens", TFM_GGUF_STRING,
                                 &tokens),
              TFM_OK)
        << tfm_last_error();
    EXPECT_GT(tokens.count, 100u);
    tfm_gguf_value last = tfm_gguf_array_at(&tokens, tokens.count - 1);
    EXPECT_EQ(tfm_gguf_value_string(&last, &s, &n), TFM_OK);
    for (size_t i = 0; i < tfm_gguf_num_tensors(h); ++i) {
      const tfm_gguf_tensor *t = tfm_gguf_tensor_at(h, i);
      EXPECT_EQ(t->offset % tfm_gguf_alignment(h), 0u) << t->name;
    }
    if (file.find("gpt2-f32") != std::string::npos) {
      const tfm_gguf_tensor *t = tfm_gguf_find_tensor(h, "token_embd.weight");
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->type, TFM_GGML_F32);
      EXPECT_EQ(t->n_dims, 2u);
      EXPECT_EQ(static_cast<uint64_t>(t->ne[1]), tokens.count);
      EXPECT_EQ(t->bytes, static_cast<uint64_t>(t->ne[0] * t->ne[1] * 4));
    }
    tfm_gguf_close(h);
  }
}

} // namespace
