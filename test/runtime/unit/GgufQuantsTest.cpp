//===- GgufQuantsTest.cpp - ggml's block types (runtime/src/ggml_quants.c) ===//
//
// Hand-built blocks of every type with the values their layout gives; and
// llama.cpp's own quantizer and dequantizer: test/runtime/Inputs/gguf holds,
// per type, rows llama.cpp v0.5.0 quantized and its dequantization of them
// (make_inputs.py says how they were made), which must come out bit for
// bit; the Q8_0, Q4_0, Q4_K, Q5_K and Q6_K reference quantizers must write
// llama.cpp's bytes.
//
//===----------------------------------------------------------------------===//

#include "tfm/ggml_blocks.h"
#include "tfm/runtime.h"

extern "C" {
#include "ggml_quants.h"
#include "gguf.h"
#include "internal.h"
#include "weights_ggml.h"
}

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr int32_t kIq4Nl = 20, kIq4Xs = 23;

/// A block of `size` bytes, filled in by the test.
struct Block {
  std::vector<uint8_t> b;
  explicit Block(size_t size) : b(size, 0) {}
  void half(size_t at, uint16_t h) {
    b[at] = static_cast<uint8_t>(h);
    b[at + 1] = static_cast<uint8_t>(h >> 8);
  }
  std::vector<float> dequantize(int32_t type, int64_t n) const {
    std::vector<float> out(n, -1234.0f);
    EXPECT_EQ(tfm_ggml_dequantize(type, b.data(), out.data(), n), TFM_OK)
        << tfm_last_error();
    return out;
  }
};

// f16 encodings used below.
constexpr uint16_t kHalfOne = 0x3C00, kHalfTwo = 0x4000, kHalfHalf = 0x3800,
                   kHalfMinusOne = 0xBC00, kHalfQuarter = 0x3400;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(GgmlQuants, RowBytes) {
  EXPECT_EQ(tfm_ggml_row_bytes(TFM_GGML_F32, 7), 28u);
  EXPECT_EQ(tfm_ggml_row_bytes(TFM_GGML_BF16, 3), 6u);
  EXPECT_EQ(tfm_ggml_row_bytes(TFM_GGML_Q8_0, 64), 68u);
  EXPECT_EQ(tfm_ggml_row_bytes(TFM_GGML_Q4_K, 512), 288u);
  EXPECT_EQ(tfm_ggml_row_bytes(TFM_GGML_Q6_K, 256), 210u);
  EXPECT_EQ(tfm_ggml_row_bytes(kIq4Xs, 256), 136u);
  EXPECT_EQ(tfm_ggml_row_bytes(TFM_GGML_Q8_0, 33), 0u); // not whole blocks
  EXPECT_EQ(tfm_ggml_row_bytes(4, 32), 0u);             // removed type
  EXPECT_EQ(tfm_ggml_row_bytes(-1, 32), 0u);
  // A row of a tensor with no elements may be as long as the header says:
  // its bytes are counted without overflowing (the fuzzer's UBSan finding).
  EXPECT_EQ(tfm_ggml_row_bytes(TFM_GGML_F16, int64_t{1} << 62),
            size_t{1} << 63);
  EXPECT_EQ(tfm_ggml_row_bytes(TFM_GGML_F32, (int64_t{1} << 62) + 3), 0u);
}

TEST(GgmlQuants, Refused) {
  float out[256];
  uint8_t zeros[256] = {0};
  // IQ2_XXS: a known type the runtime does not convert.
  EXPECT_FALSE(tfm_ggml_can_dequantize(16));
  EXPECT_EQ(tfm_ggml_dequantize(16, zeros, out, 256), TFM_ERR_ARGUMENT);
  EXPECT_NE(std::string(tfm_last_error()).find("iq2_xxs"), std::string::npos)
      << tfm_last_error();
  EXPECT_EQ(tfm_ggml_dequantize(99, zeros, out, 32), TFM_ERR_ARGUMENT);
  EXPECT_EQ(tfm_ggml_dequantize(TFM_GGML_Q4_0, zeros, out, 48),
            TFM_ERR_ARGUMENT);
  EXPECT_NE(std::string(tfm_last_error())
                .find("48 elements of ggml type q4_0 "
                      "are not whole blocks of 32"),
            std::string::npos)
      << tfm_last_error();
  for (int32_t t : {0, 1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 30})
    EXPECT_TRUE(tfm_ggml_can_dequantize(t)) << t;
}

TEST(GgmlQuants, Floats) {
  Block f16(8);
  f16.half(0, kHalfMinusOne);
  f16.half(2, 0x0001); // the smallest subnormal, 2^-24
  f16.half(4, 0x7C00); // infinity
  f16.half(6, 0xFE01); // a NaN with a payload, kept
  std::vector<float> y = f16.dequantize(TFM_GGML_F16, 4);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], std::ldexp(1.0f, -24));
  EXPECT_EQ(y[2], INFINITY);
  EXPECT_EQ(bits(y[3]), 0xFFC02000u);
  Block bf(4);
  bf.half(0, 0x3FC0); // 1.5
  bf.half(2, 0xC2F7); // -123.5
  y = bf.dequantize(TFM_GGML_BF16, 2);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -123.5f);
  Block f(8);
  float v[2] = {3.25f, -0.0f};
  std::memcpy(f.b.data(), v, 8);
  y = f.dequantize(TFM_GGML_F32, 2);
  EXPECT_EQ(y[0], 3.25f);
  EXPECT_EQ(bits(y[1]), 0x80000000u);
}

TEST(GgmlQuants, Q4_0AndQ4_1) {
  // Q4_0: d, then byte j holds element j (low nibble) and j + 16 (high),
  // each q - 8. Two blocks: the second starts at byte 18, unaligned.
  Block b(36);
  b.half(0, kHalfHalf);
  b.b[2] = 0xF0;     // element 0: 0 - 8, element 16: 15 - 8
  b.b[2 + 5] = 0x9A; // element 5: 10 - 8, element 21: 9 - 8
  b.half(18, kHalfTwo);
  b.b[20 + 15] = 0x08; // block 2, element 15: 0; element 31: -8
  std::vector<float> y = b.dequantize(TFM_GGML_Q4_0, 64);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[5], 1.0f);
  EXPECT_EQ(y[21], 0.5f);
  EXPECT_EQ(y[1], -4.0f); // nibble 0
  EXPECT_EQ(y[32 + 15], 0.0f);
  EXPECT_EQ(y[32 + 31], -16.0f);
  // Q4_1: d, m, then the nibbles: q * d + m.
  Block c(20);
  c.half(0, kHalfHalf);
  c.half(2, kHalfMinusOne);
  c.b[4 + 3] = 0x5F;
  y = c.dequantize(TFM_GGML_Q4_1, 32);
  EXPECT_EQ(y[3], 6.5f);  // 15 * 0.5 - 1
  EXPECT_EQ(y[19], 1.5f); // 5 * 0.5 - 1
  EXPECT_EQ(y[0], -1.0f);
}

TEST(GgmlQuants, Q5_0AndQ5_1) {
  // Q5_0: d, qh (bit j: the fifth bit of element j), nibbles; q - 16.
  Block b(22);
  b.half(0, kHalfOne);
  b.b[2] = 0x01;     // element 0's fifth bit
  b.b[2 + 2] = 0x02; // bit 17: element 17's
  b.b[6] = 0x3F;     // element 0: 15 | 16, element 16: 3
  b.b[6 + 1] = 0x21; // element 1: 1, element 17: 2 | 16
  std::vector<float> y = b.dequantize(TFM_GGML_Q5_0, 32);
  EXPECT_EQ(y[0], 15.0f);   // 31 - 16
  EXPECT_EQ(y[16], -13.0f); // 3 - 16
  EXPECT_EQ(y[1], -15.0f);
  EXPECT_EQ(y[17], 2.0f); // 18 - 16
  // Q5_1: d, m, qh, nibbles: q * d + m.
  Block c(24);
  c.half(0, kHalfQuarter);
  c.half(2, kHalfOne);
  c.b[4 + 3] = 0x80;  // bit 31: element 31's fifth bit
  c.b[8 + 15] = 0x40; // element 15: 0, element 31: 4 | 16
  y = c.dequantize(TFM_GGML_Q5_1, 32);
  EXPECT_EQ(y[15], 1.0f);
  EXPECT_EQ(y[31], 6.0f); // 20 * 0.25 + 1
}

TEST(GgmlQuants, Q8_0) {
  Block b(34);
  b.half(0, kHalfQuarter);
  b.b[2] = 0x81;  // -127
  b.b[33] = 0x7F; // 127
  b.b[10] = 0x04;
  std::vector<float> y = b.dequantize(TFM_GGML_Q8_0, 32);
  EXPECT_EQ(y[0], -31.75f);
  EXPECT_EQ(y[31], 31.75f);
  EXPECT_EQ(y[8], 1.0f);
  EXPECT_EQ(y[1], 0.0f);
}

TEST(GgmlQuants, Q2_K) {
  // scales[16] (scale low nibble, min high), qs[64], d, dmin. Values of
  // 128 are 4 shifts of 32 bytes; each 16 values have their scale.
  Block b(84);
  b.half(80, kHalfHalf);    // d
  b.half(82, kHalfOne);     // dmin
  b.b[0] = 0x23;            // values 0-15: scale 3, min 2
  b.b[3] = 0x15;            // values 48-63 (shift 2, bytes 16-31): 5, 1
  b.b[15] = 0x0F;           // values 240-255: (second half) 15, 0
  b.b[16 + 0] = 0x03;       // value 0: 3
  b.b[16 + 17] = 0x0C;      // shift 2 of byte 17: value 32 + 16 + 1 = 49: 3
  b.b[16 + 32 + 31] = 0xC0; // shift 6 of byte 31 of the second half: 255
  std::vector<float> y = b.dequantize(TFM_GGML_Q2_K, 256);
  EXPECT_EQ(y[0], 2.5f);    // 0.5 * 3 * 3 - 2
  EXPECT_EQ(y[1], -2.0f);   // 0 - 2
  EXPECT_EQ(y[49], 6.5f);   // 0.5 * 5 * 3 - 1
  EXPECT_EQ(y[255], 22.5f); // 0.5 * 15 * 3
}

TEST(GgmlQuants, Q3_K) {
  // hmask[32], qs[64], scales[12] (16 6-bit values, minus 32), d. The
  // value is (2 low bits) - (4 unless its hmask bit is set).
  Block b(110);
  b.half(108, kHalfOne);
  // Scale 0: low 4 bits in byte 0's low nibble, high 2 in byte 8's bits
  // 0-1; scale 8: byte 0's high nibble, byte 8's bits 4-5.
  b.b[96 + 0] = 0x5 | 0x3 << 4;
  b.b[96 + 8] = 0x2 | 0x1 << 4; // scale 0 = 0x25 = 37, scale 8 = 0x13 = 19
  b.b[32 + 0] = 0x01;           // value 0: low bits 1
  b.b[0] = 0x01;                // value 0: high bit set (no - 4)
  b.b[32 + 1] = 0x02;           // value 1: 2 - 4 (hmask clear)
  // Value 128 (the second half, shift 0, byte 0 of qs + 32) has scale 8.
  b.b[32 + 32] = 0x03;
  b.b[0] |= 0x10; // hmask bit 4 of byte 0: value 128's
  std::vector<float> y = b.dequantize(TFM_GGML_Q3_K, 256);
  EXPECT_EQ(y[0], 5.0f);     // (37 - 32) * 1
  EXPECT_EQ(y[1], -10.0f);   // 5 * (2 - 4)
  EXPECT_EQ(y[2], -20.0f);   // 5 * (0 - 4)
  EXPECT_EQ(y[128], -39.0f); // (19 - 32) * 3
}

/// Q4_K / Q5_K scale bytes: 8 6-bit scales and mins (get_scale_min_k4).
void kScales(Block &b, size_t at, const uint8_t sc[8], const uint8_t m[8]) {
  for (int j = 0; j < 4; ++j) {
    b.b[at + j] = static_cast<uint8_t>((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
    b.b[at + j + 4] = static_cast<uint8_t>((m[j] & 63) | (m[j + 4] >> 4) << 6);
    b.b[at + j + 8] =
        static_cast<uint8_t>((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
}

TEST(GgmlQuants, Q4_K) {
  // d, dmin, scales[12], qs[128]: 32 bytes hold 64 values, low nibbles
  // first; sub-block j of 32 values has scale sc[j] and min m[j].
  Block b(144);
  b.half(0, kHalfHalf);
  b.half(2, kHalfQuarter);
  const uint8_t sc[8] = {1, 2, 3, 4, 63, 40, 17, 33};
  const uint8_t m[8] = {0, 5, 9, 13, 62, 21, 48, 1};
  kScales(b, 4, sc, m);
  b.b[16 + 0] = 0x3F;       // value 0: 15, value 32: 3
  b.b[16 + 96 + 31] = 0xA7; // value 192 + 31: 7, value 255: 10
  std::vector<float> y = b.dequantize(TFM_GGML_Q4_K, 256);
  EXPECT_EQ(y[0], 7.5f);          // 0.5 * 1 * 15 - 0
  EXPECT_EQ(y[32], 3.0f - 1.25f); // 0.5 * 2 * 3 - 0.25 * 5
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[64], -2.25f); // -0.25 * 9
  EXPECT_EQ(y[223], 0.5f * 17 * 7 - 0.25f * 48);
  EXPECT_EQ(y[255], 0.5f * 33 * 10 - 0.25f * 1);
  EXPECT_EQ(y[128], -0.25f * 62); // scale 63, min 62, q 0
}

TEST(GgmlQuants, Q5_K) {
  // d, dmin, scales[12], qh[32], qs[128]: qh bit 2i / 2i+1 of byte l is
  // the fifth bit of value l of sub-block 2i / 2i+1.
  Block b(176);
  b.half(0, kHalfOne);
  b.half(2, kHalfOne);
  const uint8_t sc[8] = {2, 1, 1, 1, 1, 1, 1, 3};
  const uint8_t m[8] = {1, 0, 0, 0, 0, 0, 0, 7};
  kScales(b, 4, sc, m);
  b.b[16 + 0] = 0x01;       // value 0's fifth bit
  b.b[16 + 31] = 0x80;      // value 255 (sub-block 7, l = 31)
  b.b[48 + 0] = 0x02;       // value 0: 2 | 16
  b.b[48 + 96 + 31] = 0xF0; // value 255: 15 | 16
  std::vector<float> y = b.dequantize(TFM_GGML_Q5_K, 256);
  EXPECT_EQ(y[0], 35.0f); // 2 * 18 - 1
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[255], 86.0f); // 3 * 31 - 7
}

TEST(GgmlQuants, Q6_K) {
  // ql[128], qh[64], scales[16] (int8), d; value = d * scale * (q - 32),
  // the 128 values of each half from 64 ql bytes and 32 qh bytes.
  Block b(210);
  b.half(208, kHalfHalf);
  b.b[192 + 0] = 4;                        // values 0-15
  b.b[192 + 6] = static_cast<uint8_t>(-3); // values 96-111
  b.b[192 + 15] = 127;                     // values 240-255 (half 2)
  b.b[0] = 0x0F | 0x20;                    // value 0 low 4: 15; value 64 low: 2
  b.b[128] = 0x03 | 0xC0;    // value 0 high: 3 (q = 63); value 96 high: 3
  b.b[32] = 0x50;            // value 96 low: 5
  b.b[64 + 63] = 0xA0;       // half 2, value 96 + 31 = 255 low: 10
  b.b[128 + 32 + 31] = 0x40; // half 2, l = 31: value 255 high: 1
  std::vector<float> y = b.dequantize(TFM_GGML_Q6_K, 256);
  EXPECT_EQ(y[0], 62.0f);   // 0.5 * 4 * 31
  EXPECT_EQ(y[96], -31.5f); // 0.5 * -3 * ((5 | 48) - 32)
  EXPECT_EQ(y[1], -64.0f);  // 0.5 * 4 * -32
  EXPECT_EQ(y[255], 0.5f * 127 * ((10 | 16) - 32));
}

TEST(GgmlQuants, Iq4) {
  // IQ4_NL: d, then nibbles indexing the 16 non-linear levels.
  Block b(18);
  b.half(0, kHalfHalf);
  b.b[2] = 0xF0; // element 0: level 0 (-127), element 16: 15 (113)
  std::vector<float> y = b.dequantize(kIq4Nl, 32);
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 56.5f);
  // IQ4_XS: d, scales_h (2 high bits each), scales_l[4] (nibbles), qs[128]:
  // block ib of 32 has scale ls - 32.
  Block c(136);
  c.half(0, kHalfOne);
  c.b[2] = 0x02;          // block 0: high bits 2 -> ls = 32 + low
  c.b[3] = 0xC0;          // block 7: high bits 3
  c.b[4] = 0x05;          // block 0 low: 5 -> 37 - 32 = 5
  c.b[7] = 0xF0;          // block 7 low: 15 -> 63 - 32 = 31
  c.b[8] = 0x98;          // element 0: level 8 (1), element 16: 9 (13)
  c.b[8 + 7 * 16] = 0x07; // block 7, element 0: level 7 (-10)
  y = c.dequantize(kIq4Xs, 256);
  EXPECT_EQ(y[0], 5.0f);
  EXPECT_EQ(y[16], 65.0f);
  EXPECT_EQ(y[224], -310.0f);
  EXPECT_EQ(y[32], 4064.0f); // block 1: ls 0 -> -32, level 0 (-127)
}

TEST(GgmlQuants, QuantizeByHand) {
  // Q8_0: d = max|x| / 127, q = round(x / d), halves away from zero.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = -2.5f;
  x[2] = 0.5f;
  uint8_t q[34];
  tfm_ggml_quantize_row_q8_0(x.data(), q, 32);
  EXPECT_EQ(q[0] | q[1] << 8, kHalfOne);
  EXPECT_EQ(static_cast<int8_t>(q[2]), 127);
  EXPECT_EQ(static_cast<int8_t>(q[3]), -3);
  EXPECT_EQ(static_cast<int8_t>(q[4]), 1);
  // A zero block: d = 0, q = 0.
  std::vector<float> zeros(32, 0.0f);
  tfm_ggml_quantize_row_q8_0(zeros.data(), q, 32);
  for (uint8_t v : q)
    EXPECT_EQ(v, 0);
  // Q4_0: d = (the value of largest magnitude) / -8.
  x.assign(32, 0.0f);
  x[0] = -8.0f;
  x[16] = 8.0f;
  x[1] = 3.0f;
  uint8_t q4[18];
  tfm_ggml_quantize_row_q4_0(x.data(), q4, 32);
  EXPECT_EQ(q4[0] | q4[1] << 8, kHalfOne);
  EXPECT_EQ(q4[2], 0x00 | 15 << 4); // -8 -> 0; 8 -> 16, clamped to 15
  EXPECT_EQ(q4[3], 11 | 8 << 4);    // d = 1: 3 -> 11, 0 -> 8
}

/// One file of test/runtime/Inputs/gguf (make_inputs.py).
struct LlamaFile {
  tfm_gguf *g = nullptr;
  const tfm_gguf_tensor *source = nullptr, *quantized = nullptr,
                        *dequantized = nullptr;
  explicit LlamaFile(const std::string &type) {
    std::string path =
        TFM_SOURCE_DIR "/test/runtime/Inputs/gguf/quants-" + type + ".gguf";
    EXPECT_EQ(tfm_gguf_open(path.c_str(), &g), TFM_OK) << tfm_last_error();
    if (!g)
      return;
    source = tfm_gguf_find_tensor(g, "source");
    quantized = tfm_gguf_find_tensor(g, "quantized");
    dequantized = tfm_gguf_find_tensor(g, "dequantized");
  }
  ~LlamaFile() { tfm_gguf_close(g); }
  bool ok() const { return source && quantized && dequantized; }
};

class LlamaCpp : public ::testing::TestWithParam<const char *> {};

// llama.cpp's dequantization of what its quantizer wrote, bit for bit,
// converted row by row.
TEST_P(LlamaCpp, DequantizesAsLlamaCpp) {
  LlamaFile f(GetParam());
  ASSERT_TRUE(f.ok());
  const tfm_gguf_tensor *q = f.quantized, *want = f.dequantized;
  ASSERT_EQ(want->type, TFM_GGML_F32);
  ASSERT_EQ(q->ne[0], want->ne[0]);
  ASSERT_EQ(q->ne[1], want->ne[1]);
  int64_t k = q->ne[0], rows = q->ne[1];
  size_t row = tfm_ggml_row_bytes(q->type, k);
  ASSERT_EQ(row * rows, q->bytes);
  std::vector<float> got(k);
  size_t differ = 0;
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(tfm_ggml_dequantize(q->type, (const char *)q->data + r * row,
                                  got.data(), k),
              TFM_OK)
        << tfm_last_error();
    const float *w = (const float *)want->data + r * k;
    for (int64_t i = 0; i < k; ++i)
      if (bits(got[i]) != bits(w[i]) && differ++ < 5)
        ADD_FAILURE() << GetParam() << " row " << r << " element " << i << ": "
                      << got[i] << ", llama.cpp " << w[i];
  }
  EXPECT_EQ(differ, 0u);
  // The rows are not trivial: some differ from the source (quantized), and
  // the awkward rows gave distinct values.
  EXPECT_EQ(tfm_ggml_dequantize(q->type, q->data, got.data(), k), TFM_OK);
  EXPECT_NE(got[300], got[600]);
}

INSTANTIATE_TEST_SUITE_P(Types, LlamaCpp,
                         ::testing::Values("f16", "bf16", "q4_0", "q4_1",
                                           "q5_0", "q5_1", "q8_0", "q2_k",
                                           "q3_k", "q4_k", "q5_k", "q6_k",
                                           "iq4_nl", "iq4_xs"));

// The reference quantizers write llama.cpp's bytes for the same rows.
TEST(GgmlQuants, QuantizesAsLlamaCpp) {
  for (const char *type : {"q8_0", "q4_0", "q4_k", "q5_k", "q6_k"}) {
    LlamaFile f(type);
    ASSERT_TRUE(f.ok());
    int64_t k = f.source->ne[0], rows = f.source->ne[1];
    std::vector<uint8_t> got(f.quantized->bytes);
    size_t row = tfm_ggml_row_bytes(f.quantized->type, k);
    ASSERT_EQ(row * rows, f.quantized->bytes) << type;
    void (*quantize)(const float *, void *, int64_t) =
        f.quantized->type == TFM_GGML_Q8_0   ? tfm_ggml_quantize_row_q8_0
        : f.quantized->type == TFM_GGML_Q4_0 ? tfm_ggml_quantize_row_q4_0
        : f.quantized->type == TFM_GGML_Q4_K ? tfm_ggml_quantize_row_q4_K
        : f.quantized->type == TFM_GGML_Q5_K ? tfm_ggml_quantize_row_q5_K
        : f.quantized->type == TFM_GGML_Q6_K ? tfm_ggml_quantize_row_q6_K
                                             : nullptr;
    ASSERT_NE(quantize, nullptr) << type;
    for (int64_t r = 0; r < rows; ++r)
      quantize((const float *)f.source->data + r * k, got.data() + r * row, k);
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != ((const uint8_t *)f.quantized->data)[i] && differ++ < 5)
        ADD_FAILURE() << type << " byte " << i << ": " << int(got[i])
                      << ", llama.cpp "
                      << int(((const uint8_t *)f.quantized->data)[i]);
    EXPECT_EQ(differ, 0u) << type;
  }
}

// The description's "ggml_quantize" (tfmc --quantize=q8_0|q4_0|q4_k|q5_k|
// q6_k) names the type; anything else is refused.
TEST(GgmlQuants, DescriptionNamesTheType) {
  const std::string head = R"({"name":"m","arch":"decoder","vocab":4,)"
                           R"("context":2,"ggml_quantize":)";
  const std::string tail =
      R"(,"parameter_count":4,"parameters":[)"
      R"({"name":"embed.tokens.weight","shape":[4,1],"type":"float32",)"
      R"("synthetic":"normal"}],)"
      R"("abi_params":[{"name":"embed.tokens.weight","index":0,"panel":0}],)"
      R"("inputs":[{"name":"tokens","dtype":"int32","shape":["B","T"],)"
      R"("usage":"tokens"}],)"
      R"("outputs":[{"name":"logits","dtype":"float32","shape":["B","T",4],)"
      R"("usage":"logits"}]})";
  const std::pair<const char *, int32_t> names[] = {
      {"q8_0", TFM_GGML_BLOCKS_Q8_0},
      {"q4_0", TFM_GGML_BLOCKS_Q4_0},
      {"q4_k", TFM_GGML_BLOCKS_Q4_K},
      {"q5_k", TFM_GGML_BLOCKS_Q5_K},
      {"q6_k", TFM_GGML_BLOCKS_Q6_K}};
  for (const auto &[name, type] : names) {
    tfm_description d;
    std::string json = head + "\"" + name + "\"" + tail;
    ASSERT_EQ(tfm_description_parse(json.c_str(), &d), TFM_OK)
        << tfm_last_error();
    EXPECT_EQ(d.ggml_quantize, type) << name;
    tfm_description_free(&d);
  }
  for (const char *bad : {"\"q4_K\"", "\"q3_k\"", "8"}) {
    tfm_description d;
    std::string json = head + bad + tail;
    EXPECT_EQ(tfm_description_parse(json.c_str(), &d), TFM_ERR_FORMAT);
    EXPECT_NE(std::string(tfm_last_error())
                  .find("'ggml_quantize' must be \"q8_0\", \"q4_0\", "
                        "\"q4_k\", \"q5_k\" or \"q6_k\""),
              std::string::npos)
        << tfm_last_error();
  }
}

// Rows the requested type cannot hold whole: a K-quant on rows that are not
// whole super-blocks of 256 falls back to Q8_0 (as llama.cpp's quantizer
// does from Q6_K), rows not of whole blocks of 32 to F32.
TEST(GgmlQuants, FallsBackWhereRowsAreNotWholeBlocks) {
  for (int32_t k :
       {TFM_GGML_BLOCKS_Q4_K, TFM_GGML_BLOCKS_Q5_K, TFM_GGML_BLOCKS_Q6_K}) {
    EXPECT_EQ(tfm_ggml_quantize_type(k, 512), k);
    EXPECT_EQ(tfm_ggml_quantize_type(k, 96), TFM_GGML_BLOCKS_Q8_0);
    EXPECT_EQ(tfm_ggml_quantize_type(k, 40), TFM_GGML_BLOCKS_F32);
  }
  EXPECT_EQ(tfm_ggml_quantize_type(TFM_GGML_BLOCKS_Q4_0, 96),
            TFM_GGML_BLOCKS_Q4_0);
  EXPECT_EQ(tfm_ggml_quantize_type(TFM_GGML_BLOCKS_Q8_0, 40),
            TFM_GGML_BLOCKS_F32);
  EXPECT_EQ(tfm_ggml_quantize_type(-1, 256), TFM_GGML_BLOCKS_F32);

  // The rows as each type stores them: the quantizer's bytes row by row.
  auto rowsOf = [](int32_t quantize, int64_t n, int64_t k, int32_t *type) {
    float *v = static_cast<float *>(std::malloc(sizeof(float) * n * k));
    for (int64_t i = 0; i < n * k; ++i)
      v[i] = std::sin(0.37f * float(i)) * (1.0f + float(i % 7));
    std::vector<float> copy(v, v + n * k);
    void *rows = tfm_ggml_rows_of(v, n, k, quantize, type);
    return std::make_pair(rows, copy);
  };
  int32_t type = -1;
  auto [q6, x6] = rowsOf(TFM_GGML_BLOCKS_Q6_K, 3, 512, &type);
  EXPECT_EQ(type, TFM_GGML_BLOCKS_Q6_K);
  std::vector<uint8_t> want(2 * 210);
  tfm_ggml_quantize_row_q6_K(x6.data() + 2 * 512, want.data(), 512);
  EXPECT_EQ(std::memcmp((uint8_t *)q6 + 2 * 420, want.data(), 420), 0);
  std::free(q6);
  auto [q8, x8] = rowsOf(TFM_GGML_BLOCKS_Q4_K, 3, 96, &type);
  EXPECT_EQ(type, TFM_GGML_BLOCKS_Q8_0);
  want.assign(3 * 34, 0);
  tfm_ggml_quantize_row_q8_0(x8.data() + 96, want.data(), 96);
  EXPECT_EQ(std::memcmp((uint8_t *)q8 + 102, want.data(), 102), 0);
  std::free(q8);
  auto [f, xf] = rowsOf(TFM_GGML_BLOCKS_Q5_K, 2, 40, &type);
  EXPECT_EQ(type, TFM_GGML_BLOCKS_F32);
  EXPECT_EQ(std::memcmp(f, xf.data(), sizeof(float) * 80), 0);
  std::free(f);
}

// Large matrices are quantized over several threads, row by row: the same
// bytes as one row at a time.
TEST(GgmlQuants, QuantizesRowsInParallel) {
  int threads = tfm_get_threads();
  tfm_set_threads(3);
  const int64_t n = 1001, k = 1024; // 3 ranges of 333 or 334 rows
  float *v = static_cast<float *>(std::malloc(sizeof(float) * n * k));
  for (int64_t i = 0; i < n * k; ++i)
    v[i] = std::sin(0.61f * float(i)) * (1.0f + float(i % 13));
  std::vector<float> x(v, v + n * k);
  int32_t type = -1;
  uint8_t *rows = static_cast<uint8_t *>(
      tfm_ggml_rows_of(v, n, k, TFM_GGML_BLOCKS_Q4_K, &type));
  tfm_set_threads(threads);
  ASSERT_NE(rows, nullptr);
  EXPECT_EQ(type, TFM_GGML_BLOCKS_Q4_K);
  std::vector<uint8_t> want(4 * 144);
  size_t differ = 0;
  for (int64_t r = 0; r < n; ++r) {
    tfm_ggml_quantize_row_q4_K(x.data() + r * k, want.data(), k);
    differ += std::memcmp(rows + r * 576, want.data(), 576) != 0;
  }
  EXPECT_EQ(differ, 0u);
  std::free(rows);
}

} // namespace
