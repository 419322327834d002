//===- FuseAttention.cpp - softmax(Q K^T s + M) V to tfm.attention --------===//
//
// The pattern is rooted at the P V matmul and walks up through the softmax,
// the mask and the scale to the Q K^T matmul. Accepted spellings:
//   - scale on the scores (tfm.scale before or after the mask) and/or folded
//     into Q (tfm.scale on Q); the factors multiply;
//   - K transposed by the matmul flag or by an explicit tfm.transpose of its
//     last two dimensions;
//   - the mask as tfm.mask (causal, sliding window, key lengths);
//   - K and V repeated for grouped-query attention (tfm.repeat_kv), which is
//     fused away: tfm.attention reads the shared heads.
// Anything else (softmax over another axis, transposed V, a mask after the
// softmax, ...) is left alone and still computes the right answer.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMFUSEATTENTION
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Strips a tfm.repeat_kv, returning its input and the repeat count.
std::pair<Value, int64_t> stripRepeat(Value v) {
  if (auto rep = v.getDefiningOp<RepeatKvOp>())
    return {rep.getInput(), rep.getRepeatsAttr().getInt()};
  return {v, 1};
}

struct FuseAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp pv,
                                PatternRewriter &b) const override {
    if (pv.getTransposeLhs() || pv.getTransposeRhs())
      return b.notifyMatchFailure(pv, "P or V is transposed");
    if (pv.getType().getRank() != 4)
      return b.notifyMatchFailure(pv, "not [B, H, T, D]");
    auto softmax = pv.getLhs().getDefiningOp<SoftmaxOp>();
    if (!softmax || softmax.getAxisAttr().getInt() != 3)
      return b.notifyMatchFailure(pv, "P is not a softmax over the keys");

    // Scores: [scale] [mask] [scale] (Q K^T).
    double scale = 1.0;
    MaskOp mask;
    Value s = softmax.getInput();
    for (int step = 0; step < 3; ++step) {
      if (auto sc = s.getDefiningOp<ScaleOp>()) {
        double f = sc.getFactor().convertToDouble();
        // -inf * f stays -inf only for f > 0.
        if (mask && f <= 0.0)
          return b.notifyMatchFailure(pv, "non-positive scale after mask");
        scale *= f;
        s = sc.getInput();
        continue;
      }
      if (auto m = s.getDefiningOp<MaskOp>()) {
        if (mask)
          return b.notifyMatchFailure(pv, "two masks");
        mask = m;
        s = m.getInput();
        continue;
      }
      break;
    }
    auto qk = s.getDefiningOp<MatmulOp>();
    if (!qk || qk.getTransposeLhs())
      return b.notifyMatchFailure(pv, "scores are not Q K^T");
    Value q = qk.getLhs(), k = qk.getRhs();
    if (!qk.getTransposeRhs()) {
      auto tr = k.getDefiningOp<TransposeOp>();
      if (!tr || tr.getPermutation() != ArrayRef<int64_t>{0, 1, 3, 2})
        return b.notifyMatchFailure(pv, "K is not transposed");
      k = tr.getInput();
    }
    while (auto sc = q.getDefiningOp<ScaleOp>()) {
      scale *= sc.getFactor().convertToDouble();
      q = sc.getInput();
    }
    if (mask && scale <= 0.0)
      return b.notifyMatchFailure(pv, "non-positive scale with a mask");
    auto [k0, kRep] = stripRepeat(k);
    auto [v0, vRep] = stripRepeat(pv.getRhs());
    if (kRep != vRep) {
      // Only one of them is repeated: keep the repeat on neither side.
      k0 = k;
      v0 = pv.getRhs();
    }

    MaskKind kind = mask ? mask.getKind() : MaskKind::none;
    auto attn = AttentionOp::create(
        b, pv.getLoc(), pv.getType(), q, k0, v0,
        mask ? mask.getLengths() : Value(),
        MaskKindAttr::get(b.getContext(), kind),
        mask ? mask.getWindowAttr() : IntegerAttr(),
        b.getF64FloatAttr(scale));
    b.replaceOp(pv, attn.getResult());
    return success();
  }
};

struct TfmFuseAttentionPass
    : mlir::tfm::impl::TfmFuseAttentionBase<TfmFuseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseAttentionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::tfm::populateFuseAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseAttention>(patterns.getContext());
}
