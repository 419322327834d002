//===- PackedLayoutTest.cpp - packed weights: runtime, header, verifiers --===//
//
// tfm/packed_layout.h describes how a linear weight is packed in panels
// (f32, bf16 pairs, int8 quads); the runtime packs by it (weights.c) and
// the dialect's verifiers accept its shapes (tfm.unpack_weight,
// tfm.linear_kernel, tfm.norm_kernel). These tests pin the header to a few
// worked examples, pack random weights with the runtime's function and check
// every element against the header's formulas, and parse ops of the
// header's shapes, and of shapes next to them, to check that the verifiers
// accept those and only those. A change to one of the three fails here.
//
//===----------------------------------------------------------------------===//

#include "tfm/packed_layout.h"

#include "tfm/Dialect/TfmDialect.h"
#include "tfm/Dialect/TfmOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

// The runtime's packing (runtime/src/weights.c), under test.
extern "C" {
void *tfm_pack_weight(const float *w, int64_t n, int64_t k, int32_t panel,
                      tfm_packing packing);
}

using namespace mlir;

namespace {

constexpr tfm_packing kPackings[] = {TFM_PACKING_F32, TFM_PACKING_BF16_PAIRS,
                                     TFM_PACKING_INT8_QUADS};

/// Weight sizes [n, k] and panel widths: whole and partial panels, K a
/// multiple of the words or not, one column, one input.
struct Case {
  int64_t n, k, panel;
};
constexpr Case kCases[] = {{70, 16, 32}, {64, 7, 32}, {33, 15, 16},
                           {1, 1, 16},   {5, 13, 4},  {32, 4, 32},
                           {100, 37, 8}, {16, 64, 16}};

const char *packingName(tfm_packing p) {
  return p == TFM_PACKING_F32          ? "f32"
         : p == TFM_PACKING_BF16_PAIRS ? "bf16 pairs"
                                       : "int8 quads";
}

/// The element type of a weight packed as `p` in IR.
const char *packedElt(tfm_packing p) {
  return p == TFM_PACKING_F32          ? "f32"
         : p == TFM_PACKING_BF16_PAIRS ? "bf16"
                                       : "i8";
}

/// f32 to bf16, rounded to nearest even (finite values).
uint16_t toBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

/// A random weight [n, k] in [-1, 1]; column 1 (when there is one beyond
/// the first) is zero, so that a zero scale is checked too.
std::vector<float> randomWeight(int64_t n, int64_t k, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> w(n * k);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      w[r * k + c] = n > 1 && r == 1 ? 0.0f : dist(gen);
  return w;
}

// The layout itself, by hand: W [70, 16] in panels of 32.
TEST(PackedLayout, WorkedExamples) {
  // f32: [3, 16, 32]; (33, 5) in panel 1, row 5, column 1.
  EXPECT_EQ(tfm_packed_panels(70, 32), 3);
  EXPECT_EQ(tfm_packed_rows(TFM_PACKING_F32, 16), 16);
  EXPECT_EQ(tfm_packed_row_width(TFM_PACKING_F32, 32), 32);
  EXPECT_EQ(tfm_packed_numel(TFM_PACKING_F32, 70, 16, 32), 3 * 16 * 32);
  EXPECT_EQ(tfm_packed_index(TFM_PACKING_F32, 33, 5, 16, 32),
            (1 * 16 + 5) * 32 + 1);
  // bf16 pairs: [3, 8, 64]; (33, 5) in pair 2, half 1 of column 1.
  EXPECT_EQ(tfm_packed_rows(TFM_PACKING_BF16_PAIRS, 16), 8);
  EXPECT_EQ(tfm_packed_row_width(TFM_PACKING_BF16_PAIRS, 32), 64);
  EXPECT_EQ(tfm_packed_index(TFM_PACKING_BF16_PAIRS, 33, 5, 16, 32),
            (1 * 8 + 2) * 64 + 2 * 1 + 1);
  EXPECT_EQ(tfm_packed_rows(TFM_PACKING_BF16_PAIRS, 15), 8);
  // int8 quads: [3, 4 + 2, 128]; (33, 5) in quad 1, byte 1 of column 1;
  // column 33's scale and sum in rows 4 and 5 of panel 1.
  EXPECT_EQ(tfm_packed_rows(TFM_PACKING_INT8_QUADS, 16), 6);
  EXPECT_EQ(tfm_packed_row_width(TFM_PACKING_INT8_QUADS, 32), 128);
  EXPECT_EQ(tfm_packed_index(TFM_PACKING_INT8_QUADS, 33, 5, 16, 32),
            (1 * 6 + 1) * 128 + 4 * 1 + 1);
  EXPECT_EQ(tfm_packed_scale_offset(1, 16, 32), 4 * 128 + 4);
  EXPECT_EQ(tfm_packed_sum_offset(1, 16, 32), 5 * 128 + 4);
  EXPECT_EQ(tfm_packed_rows(TFM_PACKING_INT8_QUADS, 13), 6);
  // Back from the shape: W and the steps over K.
  EXPECT_EQ(tfm_packed_panel_of(TFM_PACKING_INT8_QUADS, 128), 32);
  EXPECT_EQ(tfm_packed_steps_of(TFM_PACKING_INT8_QUADS, 6), 4);
  EXPECT_EQ(tfm_packed_steps_of(TFM_PACKING_BF16_PAIRS, 8), 8);
  // Rows of A for K = 15: as is, 16 bf16, 16 bytes and the scale.
  EXPECT_EQ(tfm_packed_input_columns(TFM_PACKING_F32, 15), 15);
  EXPECT_EQ(tfm_packed_input_columns(TFM_PACKING_BF16_PAIRS, 15), 16);
  EXPECT_EQ(tfm_packed_input_values(TFM_PACKING_INT8_QUADS, 15), 16);
  EXPECT_EQ(tfm_packed_input_columns(TFM_PACKING_INT8_QUADS, 15), 20);
}

// The runtime packs every element where the header says, pads with zeros,
// and writes int8 quads' scales and sums where the header says.
TEST(PackedLayout, RuntimePackingMatchesHeader) {
  unsigned seed = 1;
  for (const Case &c : kCases) {
    std::vector<float> w = randomWeight(c.n, c.k, seed++);
    for (tfm_packing p : kPackings) {
      SCOPED_TRACE(llvm::formatv("W [{0}, {1}] in panels of {2}, {3}", c.n, c.k,
                                 c.panel, packingName(p))
                       .str());
      int64_t numel = tfm_packed_numel(p, c.n, c.k, c.panel);
      void *packed =
          tfm_pack_weight(w.data(), c.n, c.k, static_cast<int32_t>(c.panel), p);
      ASSERT_NE(packed, nullptr);
      // Every element the layout places, exactly once.
      std::vector<bool> placed(numel);
      auto place = [&](int64_t at, int64_t size) {
        for (int64_t i = at; i < at + size; ++i) {
          ASSERT_LT(i, numel);
          ASSERT_FALSE(placed[i]) << "element " << i << " placed twice";
          placed[i] = true;
        }
      };
      for (int64_t n = 0; n < c.n; ++n) {
        float max = 0.0f;
        for (int64_t kk = 0; kk < c.k; ++kk)
          max = std::fmax(max, std::fabs(w[n * c.k + kk]));
        float inv = max > 0.0f ? 127.0f / max : 0.0f;
        int32_t sum = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          int64_t at = tfm_packed_index(p, n, kk, c.k, c.panel);
          float x = w[n * c.k + kk];
          if (p == TFM_PACKING_F32) {
            ASSERT_EQ(static_cast<float *>(packed)[at], x) << n << ", " << kk;
          } else if (p == TFM_PACKING_BF16_PAIRS) {
            ASSERT_EQ(static_cast<uint16_t *>(packed)[at], toBf16(x))
                << n << ", " << kk;
          } else {
            float q =
                std::fmin(127.0f, std::fmax(-127.0f, std::nearbyint(x * inv)));
            ASSERT_EQ(static_cast<int8_t *>(packed)[at], static_cast<int8_t>(q))
                << n << ", " << kk;
            sum += static_cast<int32_t>(q);
          }
          place(at, 1);
        }
        if (p != TFM_PACKING_INT8_QUADS)
          continue;
        // The column's scale and sum x 128, in its panel's last two rows.
        int64_t base = n / c.panel * tfm_packed_panel_numel(p, c.k, c.panel);
        int64_t scaleAt =
                    base + tfm_packed_scale_offset(n % c.panel, c.k, c.panel),
                sumAt = base + tfm_packed_sum_offset(n % c.panel, c.k, c.panel);
        float scale;
        int32_t sum128;
        std::memcpy(&scale, static_cast<char *>(packed) + scaleAt, 4);
        std::memcpy(&sum128, static_cast<char *>(packed) + sumAt, 4);
        EXPECT_EQ(scale, max / 127.0f) << "column " << n;
        EXPECT_EQ(sum128, 128 * sum) << "column " << n;
        place(scaleAt, 4);
        place(sumAt, 4);
      }
      // The rest is padding: zero.
      size_t eltSize = p == TFM_PACKING_F32          ? 4
                       : p == TFM_PACKING_BF16_PAIRS ? 2
                                                     : 1;
      std::vector<char> zero(eltSize, 0);
      for (int64_t i = 0; i < numel; ++i)
        if (!placed[i])
          ASSERT_EQ(std::memcmp(static_cast<char *>(packed) + i * eltSize,
                                zero.data(), eltSize),
                    0)
              << "padding element " << i;
      std::free(packed);
    }
  }
}

/// Parses `body` (ops at the top level, values from an unregistered
/// "test.value") and says whether it verifies; the diagnostics in `errors`.
class VerifierTest : public ::testing::Test {
protected:
  VerifierTest() {
    ctx.allowUnregisteredDialects();
    ctx.getOrLoadDialect<tfm::TfmDialect>();
  }

  bool verifies(const std::string &body) {
    errors.clear();
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      errors += d.str() + "\n";
      return success();
    });
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(body, ParserConfig(&ctx));
    return static_cast<bool>(module);
  }

  MLIRContext ctx;
  std::string errors;
};

std::string shape3(int64_t p, int64_t r, int64_t x, const char *elt) {
  return llvm::formatv("{0}x{1}x{2}x{3}", p, r, x, elt).str();
}

/// tfm.unpack_weight of a [p, r, x] weight to [n, k] f32.
std::string unpackIR(const std::string &packed, int64_t n, int64_t k) {
  return llvm::formatv(
             "%p = \"test.value\"() : () -> tensor<{0}>\n"
             "%w = tfm.unpack_weight %p : tensor<{0}> -> tensor<{1}x{2}xf32>\n",
             packed, n, k)
      .str();
}

/// tfm.linear_kernel of `input` ([?, cols] of `inElt`) by a [p, r, x]
/// weight into [?, n] f32, on buffers.
std::string linearIR(int64_t cols, const char *inElt, const std::string &w,
                     int64_t n) {
  return llvm::formatv(
             "%x = \"test.value\"() : () -> memref<?x{0}x{1}>\n"
             "%w = \"test.value\"() : () -> memref<{2}>\n"
             "%y = \"test.value\"() : () -> memref<?x{3}xf32>\n"
             "tfm.linear_kernel ins(%x, %w : memref<?x{0}x{1}>, memref<{2}>) "
             "outs(%y : memref<?x{3}xf32>)\n",
             cols, inElt, w, n)
      .str();
}

// tfm.unpack_weight and tfm.linear_kernel accept a weight of the header's
// shape, and not one with a panel, a row or (for words) an element more or
// less.
TEST_F(VerifierTest, WeightShapesAreTheHeaders) {
  for (const Case &c : kCases) {
    for (tfm_packing p : kPackings) {
      SCOPED_TRACE(llvm::formatv("W [{0}, {1}] in panels of {2}, {3}", c.n, c.k,
                                 c.panel, packingName(p))
                       .str());
      const char *elt = packedElt(p);
      int64_t panels = tfm_packed_panels(c.n, c.panel),
              rows = tfm_packed_rows(p, c.k),
              width = tfm_packed_row_width(p, c.panel);
      std::string good = shape3(panels, rows, width, elt);
      EXPECT_TRUE(verifies(unpackIR(good, c.n, c.k))) << errors;
      EXPECT_TRUE(verifies(linearIR(c.k, "f32", good, c.n))) << errors;
      std::vector<std::string> bad = {shape3(panels + 1, rows, width, elt),
                                      shape3(panels, rows + 1, width, elt),
                                      shape3(panels, rows - 1, width, elt)};
      if (panels > 1)
        bad.push_back(shape3(panels - 1, rows, width, elt));
      if (p != TFM_PACKING_F32)
        bad.push_back(shape3(panels, rows, width + 1, elt));
      for (const std::string &s : bad) {
        EXPECT_FALSE(verifies(unpackIR(s, c.n, c.k))) << s;
        EXPECT_FALSE(verifies(linearIR(c.k, "f32", s, c.n))) << s;
      }
    }
  }
}

// A row of A packed for bf16 pairs or int8 quads (what tfm.norm_kernel
// writes, what tfm.linear_kernel reads) has the header's columns.
TEST_F(VerifierTest, PackedRowsAreTheHeaders) {
  using Packing = tfm::NormKernelOp::Packing;
  for (const Case &c : kCases) {
    for (tfm_packing p : kPackings) {
      SCOPED_TRACE(llvm::formatv("K = {0}, {1}", c.k, packingName(p)).str());
      int64_t cols = tfm_packed_input_columns(p, c.k);
      EXPECT_EQ(tfm::NormKernelOp::packedColumns(static_cast<Packing>(p), c.k),
                cols);
      const char *elt = packedElt(p);
      auto norm = [&](int64_t out) {
        return llvm::formatv(
                   "%x = \"test.value\"() : () -> memref<?x{0}xf32>\n"
                   "%g = \"test.value\"() : () -> memref<{0}xf32>\n"
                   "%y = \"test.value\"() : () -> memref<?x{1}x{2}>\n"
                   "tfm.norm_kernel ins(%x, %g : memref<?x{0}xf32>, "
                   "memref<{0}xf32>) outs(%y : memref<?x{1}x{2}>) "
                   "{{kind = #tfm.norm<rmsnorm>, eps = 1.0e-06 : f64}\n",
                   c.k, out, elt)
            .str();
      };
      EXPECT_TRUE(verifies(norm(cols))) << errors;
      EXPECT_FALSE(verifies(norm(cols + 1)));
      if (p == TFM_PACKING_F32)
        continue;
      std::string w =
          shape3(tfm_packed_panels(c.n, c.panel), tfm_packed_rows(p, c.k),
                 tfm_packed_row_width(p, c.panel), elt);
      EXPECT_TRUE(verifies(linearIR(cols, elt, w, c.n))) << errors;
      EXPECT_FALSE(verifies(linearIR(cols + 1, elt, w, c.n)));
      EXPECT_FALSE(verifies(linearIR(cols - 1, elt, w, c.n)));
    }
  }
}

} // namespace
