//===- ExpandShapeToCast.cpp - expand_shape of buffers as casts -----------===//
//
// tfm-expand-shape-to-cast: memref.expand_shape of an identity-layout
// buffer becomes a memref.reinterpret_cast with row-major strides (LLVM 22's
// expand-strided-metadata crashes on expand_shape ops that split one
// dynamic dimension into several), and memref.alloca_scope ops without
// allocas are inlined.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"
#include "tfm/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMEXPANDSHAPETOCAST
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

struct ExpandShapeToCast : OpRewritePattern<memref::ExpandShapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::ExpandShapeOp op,
                                PatternRewriter &b) const override {
    MemRefType src = op.getSrcType(), dst = op.getResultType();
    if (!src.getLayout().isIdentity() || !dst.getLayout().isIdentity())
      return b.notifyMatchFailure(op, "not a contiguous buffer");
    Location loc = op.getLoc();
    SmallVector<OpFoldResult> sizes = op.getMixedOutputShape();
    SmallVector<OpFoldResult> strides(sizes.size());
    OpFoldResult stride = b.getIndexAttr(1);
    for (int64_t i = int64_t(sizes.size()) - 1; i >= 0; --i) {
      strides[i] = stride;
      std::optional<int64_t> cs = getConstantIntValue(stride);
      std::optional<int64_t> cz = getConstantIntValue(sizes[i]);
      if (cs && cz)
        stride = b.getIndexAttr(*cs * *cz);
      else
        stride = arith::MulIOp::create(
                     b, loc, getValueOrCreateConstantIndexOp(b, loc, stride),
                     getValueOrCreateConstantIndexOp(b, loc, sizes[i]))
                     .getResult();
    }
    b.replaceOpWithNewOp<memref::ReinterpretCastOp>(
        op, dst, op.getSrc(), b.getIndexAttr(0), sizes, strides);
    return success();
  }
};

/// convert-scf-to-openmp wraps each loop body in memref.alloca_scope, which
/// must stay single-block; one without allocas is inlined before scf-to-cf.
struct InlineAllocaFreeScope : OpRewritePattern<memref::AllocaScopeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::AllocaScopeOp op,
                                PatternRewriter &b) const override {
    if (op.getNumResults() != 0)
      return failure();
    bool hasAlloca = false;
    op.getBodyRegion().walk([&](memref::AllocaOp alloca) {
      if (alloca->getParentOfType<memref::AllocaScopeOp>() == op)
        hasAlloca = true;
    });
    if (hasAlloca)
      return b.notifyMatchFailure(op, "scope holds allocas");
    Block &body = op.getBodyRegion().front();
    b.eraseOp(body.getTerminator());
    b.inlineBlockBefore(&body, op);
    b.eraseOp(op);
    return success();
  }
};

struct TfmExpandShapeToCastPass
    : mlir::tfm::impl::TfmExpandShapeToCastBase<TfmExpandShapeToCastPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateExpandShapeToCastPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::tfm::populateExpandShapeToCastPatterns(RewritePatternSet &patterns) {
  patterns.add<ExpandShapeToCast, InlineAllocaFreeScope>(patterns.getContext());
}
