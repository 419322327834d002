//===- AttentionGenTest.cpp - MLIRGen of the attention features of v2 -----===//
//
// The attention features of DSL v2 as MLIRGen emits them, from ModelSpecs
// set in code (independently of Sema's spelling of the keys): RoPE
// frequency tables (partial, linear, llama3 against Hugging Face's
// formulas), ALiBi slopes, the per-stack T5 relative table, Q/K norms,
// out_bias and softcap.
//
//===----------------------------------------------------------------------===//

#include "AnalyzeModel.h"
#include "tfm/Frontend/MLIRGen.h"
#include "tfm/Frontend/Parser.h"
#include "tfm/Frontend/Sema.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

using namespace mlir;
using namespace mlir::tfm;
using mlir::tfm::test::analyzeOne;

namespace {

/// The attention ops of `spec`'s IR (null module: a failure).
std::vector<MultiHeadAttentionOp> attentions(MLIRContext &ctx,
                                             const ModelSpec &spec,
                                             OwningOpRef<ModuleOp> &module) {
  module = buildModule(ctx, spec, UnknownLoc::get(&ctx));
  std::vector<MultiHeadAttentionOp> ops;
  // The forward pass's (a decoder's KV-cache function has the same ones,
  // with caches: test/e2e/generate.test).
  if (module)
    if (auto forward = module->lookupSymbol<func::FuncOp>(spec.name))
      forward.walk([&](MultiHeadAttentionOp op) { ops.push_back(op); });
  return ops;
}

constexpr const char *kDecoder =
    "model m { arch = decoder; vocab = 20; context = 32; d_model = 32; "
    "layers = 2\n attention { heads = 4; kv_heads = 2 }\n norm { kind = "
    "rmsnorm } }\n";

TEST(AttentionGen, RopeTables) {
  ModelSpec spec = analyzeOne(kDecoder);
  EmbeddingSpec &e = spec.stacks[0].embedding;
  e.position = PositionEncoding::rope;
  e.ropeTheta = 500000.0;
  e.ropeDim = 6; // partial: 3 frequencies of head_dim 8
  e.ropeScaling = RopeScaling::linear;
  e.ropeFactor = 2.0;
  MLIRContext ctx;
  OwningOpRef<ModuleOp> m;
  auto ops = attentions(ctx, spec, m);
  ASSERT_EQ(ops.size(), 2u);
  ArrayRef<double> f = *ops[0].getRopeInvFreq();
  ASSERT_EQ(f.size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(f[i], std::pow(500000.0, -2.0 * i / 6) / 2.0, 1e-15);

  // llama3 (Hugging Face _compute_llama3_parameters): head_dim 8 with
  // theta 500000 has wavelengths 6.3, 167, 4443 and 118000;
  // original_context 512, low 1, high 4: kept, blended, divided, divided.
  e.ropeDim = 8;
  e.ropeScaling = RopeScaling::llama3;
  e.ropeFactor = 8.0;
  e.ropeLowFreqFactor = 1.0;
  e.ropeHighFreqFactor = 4.0;
  e.ropeOriginalContext = 512;
  ops = attentions(ctx, spec, m);
  ASSERT_EQ(ops.size(), 2u);
  f = *ops[0].getRopeInvFreq();
  ASSERT_EQ(f.size(), 4u);
  auto base = [](int i) { return std::pow(500000.0, -2.0 * i / 8); };
  EXPECT_DOUBLE_EQ(f[0], base(0));
  double wl = 2 * M_PI / base(1), smooth = (512.0 / wl - 1.0) / 3.0;
  EXPECT_NEAR(f[1], (1 - smooth) * base(1) / 8 + smooth * base(1), 1e-15);
  EXPECT_NEAR(f[2], base(2) / 8, 1e-18);
  EXPECT_NEAR(f[3], base(3) / 8, 1e-18);
}

TEST(AttentionGen, AlibiSoftcapOutBiasQkNorm) {
  ModelSpec spec = analyzeOne(kDecoder);
  spec.stacks[0].embedding.position = PositionEncoding::alibi;
  AttentionSpec &a = spec.stacks[0].attention;
  a.heads = 6;
  a.kvHeads = 2;
  a.headDim = 4;
  a.bias = true;
  a.outBias = false;
  a.qkNorm = true;
  a.softcap = 30.0;
  spec.stacks[0].norm.offset = 1.0;
  MLIRContext ctx;
  OwningOpRef<ModuleOp> m;
  auto ops = attentions(ctx, spec, m);
  ASSERT_EQ(ops.size(), 2u);
  MultiHeadAttentionOp op = ops[0];
  // 6 heads: the slopes of 4, then every other slope of 8.
  std::vector<double> want{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  ArrayRef<double> slopes = *op.getAlibiSlopes();
  EXPECT_EQ(std::vector<double>(slopes.begin(), slopes.end()), want);
  EXPECT_EQ(op.getBiases().size(), 3u);
  EXPECT_FALSE(op.getOutBias());
  EXPECT_EQ(op.getQkNorm().size(), 2u);
  EXPECT_EQ(*op.getQkNormKind(), NormKind::rmsnorm);
  EXPECT_EQ(op.getQkNormOffsetAttr().getValueAsDouble(), 1.0);
  EXPECT_EQ(op.getSoftcapAttr().getValueAsDouble(), 30.0);
  EXPECT_FALSE(op.getRopeInvFreq());
}

TEST(AttentionGen, RelativeTablePerStack) {
  ModelSpec spec = analyzeOne(
      "model t5 { arch = encoder_decoder; vocab = 20; context = 32; d_model "
      "= 16\n attention { heads = 2; bias = false; scale = 1 }\n encoder { "
      "layers = 2 }\n decoder { layers = 2 } }\n");
  for (StackSpec &s : spec.stacks) {
    s.embedding.position = PositionEncoding::relative;
    s.embedding.relativeBuckets = 8;
    s.embedding.relativeMaxDistance = 12;
  }
  MLIRContext ctx;
  OwningOpRef<ModuleOp> m;
  auto ops = attentions(ctx, spec, m);
  // Encoder self x2, decoder (self, cross) x2.
  ASSERT_EQ(ops.size(), 6u);
  std::set<std::string> tables;
  int cross = 0;
  for (MultiHeadAttentionOp op : ops) {
    if (!op.getRelative()) {
      ++cross; // cross-attention gets no position bias
      continue;
    }
    auto p = op.getRelative().getDefiningOp<ParamOp>();
    ASSERT_TRUE(p);
    tables.insert(p.getName().str());
    EXPECT_EQ(op.getRelativeMaxDistanceAttr().getInt(), 12);
    bool encoder = p.getName().starts_with("encoder.");
    EXPECT_EQ(op.getRelativeBidirectional(), encoder);
  }
  EXPECT_EQ(cross, 2);
  EXPECT_EQ(tables, (std::set<std::string>{"decoder.embed.relative.weight",
                                           "encoder.embed.relative.weight"}));
}

TEST(AttentionGen, RelativeBucketsAsT5) {
  // T5's _relative_position_bucket for 32 buckets, max_distance 128
  // (values from the PyTorch implementation).
  EXPECT_EQ(relativeBucket(0, 32, 128, true), 0);
  EXPECT_EQ(relativeBucket(3, 32, 128, true), 19);
  EXPECT_EQ(relativeBucket(-7, 32, 128, true), 7);
  EXPECT_EQ(relativeBucket(-8, 32, 128, true), 8);
  EXPECT_EQ(relativeBucket(-16, 32, 128, true), 10);
  EXPECT_EQ(relativeBucket(-127, 32, 128, true), 15);
  EXPECT_EQ(relativeBucket(500, 32, 128, true), 31);
  EXPECT_EQ(relativeBucket(5, 32, 128, false), 0);
  EXPECT_EQ(relativeBucket(-20, 32, 128, false), 17);
  EXPECT_EQ(relativeBucket(-1000, 32, 128, false), 31);
}

} // namespace
