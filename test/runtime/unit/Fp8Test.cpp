//===- Fp8Test.cpp - FP8 weights with block scales, dequantized at load ---===//
//
// Block-scaled FP8 as DeepSeek-V3 publishes its linear weights
// (runtime/src/weights.c, a source's "fp8_block"): an F8_E4M3 tensor [N, K]
// (or a stack [E, N, K]) and beside it "<name>_scale_inv" [ceil(N / rows),
// ceil(K / cols)], the weight being fp8(q[n][k]) * scale_inv[n / rows][k /
// cols]. The 8-bit formats are checked on every byte against the OCP
// definition written here with ldexp; the weights against the same
// definition computed here, on sizes that are not multiples of the blocks,
// with blocks that are not square, plain, packed and sharded, stacked and
// one tensor per expert, scales in F32 or BF16 and in another file; and
// the errors, which name the tensors.
//
//===----------------------------------------------------------------------===//

#include "tfm/packed_layout.h"
#include "tfm/runtime.h"

extern "C" {
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

std::string shapeJson(const Shape &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

/// e4m3fn by its definition: (-1)^s (m / 8) 2^-6 at exponent 0, (-1)^s (1 +
/// m / 8) 2^(e - 7) otherwise; S.1111.111 is NaN and there is no infinity.
double e4m3(uint8_t b) {
  int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7)
    return NAN;
  double mag =
      e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

/// e5m2 by its definition: IEEE-like with bias 15, 2 mantissa bits.
double e5m2(uint8_t b) {
  int s = b >> 7, e = (b >> 2) & 31, m = b & 3;
  double mag;
  if (e == 31)
    mag = m ? NAN : INFINITY;
  else
    mag = e == 0 ? std::ldexp(m / 4.0, -14) : std::ldexp(1 + m / 4.0, e - 15);
  return s ? -mag : mag;
}

bool sameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0; // -0 is not 0
}

TEST(Fp8, E4m3EveryByte) {
  for (int b = 0; b < 256; ++b) {
    float got = tfm_f8e4m3_to_f32(uint8_t(b)), want = float(e4m3(uint8_t(b)));
    EXPECT_TRUE(sameFloat(got, want))
        << "byte 0x" << std::hex << b << ": " << got << ", expected " << want;
  }
  // Landmarks of the format.
  EXPECT_EQ(tfm_f8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(tfm_f8e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(tfm_f8e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(tfm_f8e4m3_to_f32(0x08), 0x1p-6f);
  EXPECT_EQ(tfm_f8e4m3_to_f32(0x01), 0x1p-9f);
  EXPECT_EQ(tfm_f8e4m3_to_f32(0x07), 7 * 0x1p-9f);
  EXPECT_TRUE(std::signbit(tfm_f8e4m3_to_f32(0x80)));
  EXPECT_TRUE(std::isnan(tfm_f8e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(tfm_f8e4m3_to_f32(0xff)));
  EXPECT_TRUE(std::isfinite(tfm_f8e4m3_to_f32(0x78))); // 256: no infinity
}

TEST(Fp8, E5m2EveryByte) {
  for (int b = 0; b < 256; ++b) {
    float got = tfm_f8e5m2_to_f32(uint8_t(b)), want = float(e5m2(uint8_t(b)));
    EXPECT_TRUE(sameFloat(got, want))
        << "byte 0x" << std::hex << b << ": " << got << ", expected " << want;
  }
  EXPECT_EQ(tfm_f8e5m2_to_f32(0x7b), 57344.0f);
  EXPECT_EQ(tfm_f8e5m2_to_f32(0x7c), INFINITY);
  EXPECT_EQ(tfm_f8e5m2_to_f32(0x01), 0x1p-16f);
}

/// A tensor of a test checkpoint: its safetensors dtype and raw bytes.
struct Stored {
  std::string name, dtype;
  Shape shape;
  std::string bytes;
};

Stored f32(const std::string &name, const Shape &shape,
           const std::vector<float> &v) {
  return {name, "F32", shape,
          std::string(reinterpret_cast<const char *>(v.data()), 4 * v.size())};
}

/// BF16 of values that are bf16 already (their high halves).
Stored bf16(const std::string &name, const Shape &shape,
            const std::vector<float> &v) {
  std::string bytes;
  for (float x : v) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    EXPECT_EQ(bits & 0xffff, 0u) << x << " is not a bf16 value";
    uint16_t h = uint16_t(bits >> 16);
    bytes.append(reinterpret_cast<const char *>(&h), 2);
  }
  return {name, "BF16", shape, bytes};
}

Stored fp8(const std::string &name, const Shape &shape,
           const std::vector<uint8_t> &q, const char *dtype = "F8_E4M3") {
  return {name, dtype, shape, std::string(q.begin(), q.end())};
}

std::string tempPath(const std::string &name) {
  return std::string(::testing::TempDir()) + "tfm_fp8_" + name;
}

void writeSafetensors(const std::string &path,
                      const std::vector<Stored> &tensors) {
  std::string header = "{", data;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Stored &t = tensors[k];
    size_t begin = data.size();
    data += t.bytes;
    header += (k ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"" +
              t.dtype + "\",\"shape\":" + shapeJson(t.shape) +
              ",\"data_offsets\":[" + std::to_string(begin) + "," +
              std::to_string(data.size()) + "]}";
  }
  header += "}";
  while (header.size() % 8)
    header += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << out << header << data;
}

/// A parameter of a test description: its local shape, optional shard,
/// source (JSON text) and ABI panel.
struct Param {
  std::string name;
  Shape shape;
  std::string source;
  int panel = 0;
  int axis = -1;
  int64_t full = 0;
};

std::string describe(const std::vector<Param> &ps, int ranks = 1) {
  std::string params, abi;
  for (size_t i = 0; i < ps.size(); ++i) {
    const Param &p = ps[i];
    params += (i ? "," : "") + std::string("{\"name\":\"") + p.name +
              "\",\"shape\":" + shapeJson(p.shape) +
              ",\"synthetic\":\"normal\",\"source\":" + p.source;
    if (p.axis >= 0)
      params += ",\"shard\":{\"axis\":" + std::to_string(p.axis) +
                ",\"full\":" + std::to_string(p.full) + "}";
    params += "}";
    abi += (i ? "," : "") + std::string("{\"name\":\"") + p.name +
           "\",\"index\":" + std::to_string(i) +
           ",\"panel\":" + std::to_string(p.panel) + "}";
  }
  return std::string("{\"name\":\"fp8\",\"vocab\":10,\"context\":8,") +
         "\"parameter_count\":1,\"tensor_parallel\":" + std::to_string(ranks) +
         ",\"checkpoint\":{\"format\":\"huggingface\",\"type\":\"t\","
         "\"prefixes\":[\"model.\"],\"ignore\":[]},\"parameters\":[" +
         params + "],\"abi_params\":[" + abi +
         "],\"inputs\":[{\"name\":\"tokens\",\"dtype\":\"int32\","
         "\"shape\":[\"B\",\"T\"],\"usage\":\"tokens\"}],"
         "\"outputs\":[{\"name\":\"y\",\"dtype\":\"float32\","
         "\"shape\":[\"B\",\"T\",10]}]}";
}

/// A source reading `tensor` [shape] with `transform`, in FP8 blocks of
/// `rows` x `cols`; `more` adds fields.
std::string source(const std::string &tensor, const Shape &shape, int64_t rows,
                   int64_t cols, const std::string &transform = "copy",
                   const std::string &more = "") {
  return R"({"transform":")" + transform + R"(","tensor":")" + tensor +
         R"(","shape":)" + shapeJson(shape) + more + R"(,"fp8_block":[)" +
         std::to_string(rows) + "," + std::to_string(cols) + "]}";
}

struct Loaded {
  tfm_description d{};
  tfm_weights w{};
  ~Loaded() {
    tfm_weights_destroy(&w);
    tfm_description_free(&d);
  }
};

::testing::AssertionResult load(const std::string &json,
                                const std::vector<std::string> &paths,
                                Loaded &l, int rank = 0) {
  if (tfm_description_parse(json.c_str(), &l.d) != TFM_OK)
    return ::testing::AssertionFailure() << tfm_last_error();
  l.d.tp_rank = rank;
  if (tfm_weights_init(&l.w, l.d.num_abi) != TFM_OK)
    return ::testing::AssertionFailure() << tfm_last_error();
  std::vector<const char *> p;
  for (const std::string &s : paths)
    p.push_back(s.c_str());
  char *warnings = nullptr;
  if (tfm_weights_load(&l.w, &l.d, p.data(), p.size(), &warnings) != TFM_OK)
    return ::testing::AssertionFailure() << tfm_last_error();
  ::testing::AssertionResult ok = ::testing::AssertionSuccess();
  if (warnings)
    ok = ::testing::AssertionFailure() << "warnings: " << warnings;
  std::free(warnings);
  return ok;
}

std::vector<float> host(const Loaded &l, size_t i) {
  return std::vector<float>(l.w.host[i],
                            l.w.host[i] + tfm_weights_numel(&l.d, i));
}

/// Deterministic FP8 bytes, NaN (S.1111.111) left out so that the values
/// compare equal.
std::vector<uint8_t> bytes(int64_t n, int seed) {
  std::vector<uint8_t> q(n);
  for (int64_t i = 0; i < n; ++i) {
    q[i] = uint8_t((i * 73 + seed * 29 + (i >> 7) * 11) % 256);
    if ((q[i] & 0x7f) == 0x7f)
      q[i] = 0x3f;
  }
  return q;
}

/// Scales that are bf16 values (so that F32 and BF16 copies agree), all
/// different.
std::vector<float> scales(int64_t n, int seed) {
  std::vector<float> s(n);
  for (int64_t i = 0; i < n; ++i)
    s[i] = std::ldexp(1.0f + float((i + seed) % 16) / 16.0f, -int(i % 11));
  return s;
}

/// The weights [stacks, n, k] of `q` and their scales [stacks, ceil(n / r),
/// ceil(k / c)], by the definition: each element times its block's scale,
/// an f32 product.
std::vector<float> dequantize(const std::vector<uint8_t> &q,
                              const std::vector<float> &s, int64_t stacks,
                              int64_t n, int64_t k, int64_t r, int64_t c) {
  int64_t nb = (n + r - 1) / r, kb = (k + c - 1) / c;
  std::vector<float> w;
  for (int64_t e = 0; e < stacks; ++e)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        w.push_back(float(e4m3(q[(e * n + i) * k + j])) *
                    s[(e * nb + i / r) * kb + j / c]);
  return w;
}

/// [n, k] transposed.
std::vector<float> transpose(const std::vector<float> &w, int64_t n,
                             int64_t k) {
  std::vector<float> t(w.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j)
      t[j * n + i] = w[i * k + j];
  return t;
}

std::vector<float> packed(const std::vector<float> &w, int64_t stacks,
                          int64_t n, int64_t k, int panel) {
  int64_t per = tfm_packed_numel(TFM_PACKING_F32, n, k, panel);
  std::vector<float> out(stacks * per, 0.0f);
  for (int64_t e = 0; e < stacks; ++e)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        out[e * per + tfm_packed_index(TFM_PACKING_F32, i, j, k, panel)] =
            w[(e * n + i) * k + j];
  return out;
}

/// A weight [130, 200] in blocks of 128 x 128 (scales [2, 2]: the last
/// blocks partial on both axes) and in blocks of 32 x 64 (scales [5, 4]:
/// rows and columns not interchangeable); plain, packed and sharded over 2
/// ranks; its scales F32 in another file, or BF16; read transposed; and a
/// BF16 re-upload of a weight whose source allows FP8, read as stored.
TEST(Fp8, BlockScaledWeights) {
  const int64_t n = 130, k = 200;
  std::vector<uint8_t> q = bytes(n * k, 1);
  std::vector<float> s128 = scales(2 * 2, 3), s32 = scales(5 * 4, 5);
  std::vector<float> plain(n * k);
  for (int64_t i = 0; i < n * k; ++i)
    plain[i] = std::ldexp(float(i % 97) - 48.0f, -4); // bf16 values
  std::string values = tempPath("values.safetensors"),
              others = tempPath("scales.safetensors");
  writeSafetensors(
      values, {fp8("model.a.weight", {n, k}, q), fp8("b.weight", {n, k}, q),
               fp8("c.weight", {n, k}, q), fp8("t.weight", {k, n}, q),
               bf16("r.weight", {n, k}, plain)});
  writeSafetensors(others, {f32("model.a.weight_scale_inv", {2, 2}, s128),
                            f32("b.weight_scale_inv", {5, 4}, s32),
                            bf16("c.weight_scale_inv", {5, 4}, s32),
                            f32("t.weight_scale_inv", {2, 2}, s128)});
  std::vector<float> a = dequantize(q, s128, 1, n, k, 128, 128),
                     b = dequantize(q, s32, 1, n, k, 32, 64);
  // t.weight is stored [k, n] = [200, 130]: its blocks are of that matrix.
  std::vector<float> t =
      transpose(dequantize(q, s128, 1, k, n, 128, 128), k, n);
  for (int ranks : {1, 2}) {
    for (int panel : {0, 16}) {
      int axis = ranks > 1 ? 0 : -1;
      int64_t local = n / ranks;
      std::vector<Param> ps = {
          {"a",
           {local, k},
           source("a.weight", {n, k}, 128, 128),
           panel,
           axis,
           n},
          {"b", {local, k}, source("b.weight", {n, k}, 32, 64), panel, axis, n},
          {"c", {local, k}, source("c.weight", {n, k}, 32, 64), panel, axis, n},
          {"t",
           {local, k},
           source("t.weight", {k, n}, 128, 128, "transpose"),
           panel,
           axis,
           n},
          {"r",
           {local, k},
           source("r.weight", {n, k}, 128, 128),
           panel,
           axis,
           n},
      };
      std::vector<const std::vector<float> *> whole = {&a, &b, &b, &t, &plain};
      std::string json = describe(ps, ranks);
      for (int rank = 0; rank < ranks; ++rank) {
        Loaded l;
        ASSERT_TRUE(load(json, {values, others}, l, rank));
        for (size_t i = 0; i < ps.size(); ++i) {
          const std::vector<float> &w = *whole[i];
          std::vector<float> want(w.begin() + rank * local * k,
                                  w.begin() + (rank + 1) * local * k);
          if (panel)
            want = packed(want, 1, local, k, panel);
          EXPECT_EQ(host(l, i), want) << ps[i].name << ", rank " << rank
                                      << " of " << ranks << ", panel " << panel;
        }
      }
    }
  }
  // --info names the scales.
  Loaded l;
  ASSERT_EQ(tfm_description_parse(
                describe({{"a", {n, k}, source("a.weight", {n, k}, 128, 64)}})
                    .c_str(),
                &l.d),
            TFM_OK)
      << tfm_last_error();
  char text[512];
  tfm_source_describe(&l.d.params[0].source, &l.d.params[0], text, sizeof text);
  EXPECT_STREQ(text, "a.weight [130, 200] (or FP8 in blocks of [128, 64] "
                     "scaled by a.weight_scale_inv, dequantized)");
}

/// The experts of a mixture: a stack [E, N, K] with scales [E, ceil(N /
/// rows), ceil(K / cols)], read with a row map within each expert, and one
/// tensor per expert (DeepSeek-V3's experts.{e}.gate_proj) each with its
/// scales; an F8_E5M2 stack reads the same way, also copied as one tensor.
TEST(Fp8, ExpertStacks) {
  const int64_t e = 3, n = 40, k = 72, r = 16, c = 32;
  const int64_t nb = 3, kb = 3; // ceil(40 / 16), ceil(72 / 32)
  // The fused stack [E, 2N, K] (gate rows, then up rows): 5 row blocks.
  std::vector<uint8_t> stack = bytes(e * 2 * n * k, 2);
  std::vector<float> stackScales = scales(e * 5 * kb, 7);
  std::vector<Stored> files = {
      fp8("gu", {e, 2 * n, k}, stack),
      f32("gu_scale_inv", {e, 5, kb}, stackScales),
  };
  std::vector<std::vector<uint8_t>> each;
  std::vector<std::vector<float>> eachScales;
  std::vector<float> perExpert;
  for (int64_t x = 0; x < e; ++x) {
    each.push_back(bytes(n * k, 10 + int(x)));
    eachScales.push_back(scales(nb * kb, 20 + int(x)));
    files.push_back(fp8("experts." + std::to_string(x) + ".up.weight", {n, k},
                        each.back()));
    files.push_back(f32("experts." + std::to_string(x) + ".up.weight_scale_inv",
                        {nb, kb}, eachScales.back()));
    std::vector<float> w =
        dequantize(each.back(), eachScales.back(), 1, n, k, r, c);
    perExpert.insert(perExpert.end(), w.begin(), w.end());
  }
  // An F8_E5M2 stack [E, N, K] with BF16 scales.
  std::vector<uint8_t> q52 = bytes(e * n * k, 4);
  for (uint8_t &b : q52)
    if ((b & 0x7c) == 0x7c)
      b = 0x3c; // no infinities or NaNs
  std::vector<float> s52 = scales(e * nb * kb, 9);
  files.push_back(fp8("dn", {e, n, k}, q52, "F8_E5M2"));
  files.push_back(bf16("dn_scale_inv", {e, nb, kb}, s52));
  std::string path = tempPath("experts.safetensors");
  writeSafetensors(path, files);

  // The whole stack dequantized, then each expert's rows n..2n-1 (up).
  std::vector<float> whole = dequantize(stack, stackScales, e, 2 * n, k, r, c);
  std::vector<float> up;
  for (int64_t x = 0; x < e; ++x)
    up.insert(up.end(), whole.begin() + (x * 2 * n + n) * k,
              whole.begin() + (x * 2 * n + 2 * n) * k);
  std::vector<float> down;
  for (int64_t i = 0; i < e * n * k; ++i) {
    int64_t x = i / (n * k), row = i / k % n, col = i % k;
    down.push_back(float(e5m2(q52[i])) *
                   s52[(x * nb + row / r) * kb + col / c]);
  }
  std::string stacked = R"(,"experts":3,"per_expert":false)";
  for (int panel : {0, 8}) {
    std::vector<Param> ps = {
        {"up",
         {e, n, k},
         source("gu", {e, 2 * n, k}, r, c, "rows",
                R"(,"offset":40,"block":40,"stride":0)" + stacked),
         panel},
        {"each",
         {e, n, k},
         source("experts.{e}.up.weight", {n, k}, r, c, "copy",
                R"(,"experts":3,"per_expert":true)"),
         panel},
        {"down",
         {e, n, k},
         source("dn", {e, n, k}, r, c, "copy", stacked),
         panel},
        // The same stack as one tensor (GraniteMoE's output_linear).
        {"copy", {e, n, k}, source("dn", {e, n, k}, r, c), panel},
    };
    Loaded l;
    ASSERT_TRUE(load(describe(ps), {path}, l));
    std::vector<const std::vector<float> *> want = {&up, &perExpert, &down,
                                                    &down};
    for (size_t i = 0; i < ps.size(); ++i)
      EXPECT_EQ(host(l, i), panel ? packed(*want[i], e, n, k, panel) : *want[i])
          << ps[i].name << ", panel " << panel;
  }
}

/// Every problem of an FP8 tensor is named, all in one message: missing
/// scales, scales of the wrong shape or dtype, a scale that is not finite,
/// an expert's missing scales, and an FP8 tensor where the source has no
/// blocks.
TEST(Fp8, ErrorsNameTheTensors) {
  const int64_t n = 130, k = 200;
  std::vector<uint8_t> q = bytes(n * k, 1);
  std::vector<float> good = scales(4, 0), nan = good;
  nan[3] = NAN;
  std::vector<uint8_t> u8(4);
  std::string path = tempPath("bad.safetensors");
  writeSafetensors(path, {fp8("model.m.weight", {n, k}, q),
                          fp8("s.weight", {n, k}, q),
                          f32("s.weight_scale_inv", {2, 1}, {1, 2}),
                          fp8("d.weight", {n, k}, q),
                          {"d.weight_scale_inv", "U8", {2, 2}, "\1\2\3\4"},
                          fp8("x.weight", {n, k}, q),
                          f32("x.weight_scale_inv", {2, 2}, nan),
                          fp8("e.0.weight", {n, k}, q),
                          f32("e.0.weight_scale_inv", {2, 2}, good),
                          fp8("e.1.weight", {n, k}, q),
                          fp8("plain.weight", {n, k}, q)});
  std::string plainSource =
      R"({"transform":"copy","tensor":"plain.weight","shape":[130,200]})";
  std::vector<Param> ps = {
      {"pm", {n, k}, source("m.weight", {n, k}, 128, 128)},
      {"ps", {n, k}, source("s.weight", {n, k}, 128, 128)},
      {"pd", {n, k}, source("d.weight", {n, k}, 128, 128)},
      {"px", {n, k}, source("x.weight", {n, k}, 128, 128)},
      {"pe",
       {2, n, k},
       source("e.{e}.weight", {n, k}, 128, 128, "copy",
              R"(,"experts":2,"per_expert":true)")},
      {"pp", {n, k}, plainSource},
  };
  Loaded l;
  EXPECT_FALSE(load(describe(ps), {path}, l));
  std::string error = tfm_last_error();
  for (const char *line :
       {"\n  tensor 'model.m.weight' F8_E4M3 [130, 200] has no "
        "'model.m.weight_scale_inv' beside it (its scales, one per block of "
        "[128, 128], for parameter 'pm')",
        "\n  tensor 's.weight_scale_inv' has shape [2, 1], expected [2, 2] "
        "(the scales of 's.weight' [130, 200], one per block of [128, 128], "
        "for parameter 'ps')",
        "\n  tensor 'd.weight_scale_inv' has dtype U8, expected F32, BF16 or "
        "F16 (the block scales of 'd.weight', for parameter 'pd')",
        "\n  tensor 'x.weight_scale_inv' holds the scale nan at [1, 1] (the "
        "scales of 'x.weight' must be finite, for parameter 'px')",
        "\n  tensor 'e.1.weight' F8_E4M3 [130, 200] has no "
        "'e.1.weight_scale_inv' beside it (its scales, one per block of "
        "[128, 128], for parameter 'pe')",
        "\n  tensor 'plain.weight' has dtype F8_E4M3, expected F32, F16 or "
        "BF16 (FP8 is read, with its block scales, for the linear weights "
        "of a model compiled for a checkpoint quantized so)"})
    EXPECT_NE(error.find(line), std::string::npos)
        << "message: " << error << "\nexpected: " << line;
  EXPECT_EQ(error.find("e.0.weight"), std::string::npos) << error;
}

/// "fp8_block" is two sizes, on a weight [N, K] or a stack [E, N, K], not
/// with MXFP4; its errors name the source.
TEST(Fp8, DescriptionChecks) {
  auto error = [](const std::string &src, const Shape &shape = {4, 6}) {
    tfm_description d{};
    std::string json = describe({{"p", shape, src}});
    if (tfm_description_parse(json.c_str(), &d) == TFM_OK) {
      tfm_description_free(&d);
      return std::string("(accepted)");
    }
    return std::string(tfm_last_error());
  };
  const std::string head = R"({"transform":"copy","tensor":"w","shape":[4,6])";
  EXPECT_EQ(error(head + R"(,"fp8_block":[128,128]})"), "(accepted)");
  EXPECT_NE(error(head + R"(,"fp8_block":[128]})")
                .find("'fp8_block' of the source of parameter 'p' has 1 "
                      "entries; expected 2"),
            std::string::npos);
  EXPECT_NE(error(head + R"(,"fp8_block":[128,0]})")
                .find("entry 1 of 'fp8_block' of the source of parameter 'p' "
                      "is not a size of at least 1"),
            std::string::npos);
  EXPECT_NE(error(head + R"(,"fp8_block":"128x128"})")
                .find("'fp8_block' of the source of parameter 'p' must be an "
                      "array, not a string"),
            std::string::npos);
  EXPECT_NE(error(R"({"transform":"copy","tensor":"b","shape":[4],)"
                  R"("fp8_block":[128,128]})",
                  {4})
                .find("the source of parameter 'p' has 'fp8_block' but its "
                      "tensor is not a weight [N, K] or a stack of them "
                      "[experts, N, K]"),
            std::string::npos);
  EXPECT_NE(error(R"({"transform":"transpose","tensor":"gu","shape":[2,6,4],)"
                  R"("experts":2,"mxfp4":true,"fp8_block":[128,128]})",
                  {2, 4, 6})
                .find("(it has 'mxfp4')"),
            std::string::npos);
  EXPECT_EQ(error(R"({"transform":"copy","tensor":"u.{e}","shape":[4,6],)"
                  R"("experts":2,"per_expert":true,"fp8_block":[128,128]})",
                  {2, 4, 6}),
            "(accepted)");
}

} // namespace
