//===- ExpandShapeToCast.cpp - expand_shape of buffers as casts -----------===//
//
// tfm-expand-shape-to-cast: memref.expand_shape of an identity-layout
// buffer becomes a memref.reinterpret_cast with row-major strides (LLVM 22's
// expand-strided-metadata crashes on expand_shape ops that split one
// dynamic dimension into several), and memref.alloca_scope ops are inlined
// (their allocas freed by a stack save and restore around the body).
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"
#include "tfm/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
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
/// must stay single-block; it is inlined before scf-to-cf. A scope whose
/// allocas all sit in its body (a task's scratch buffers, at the top of a
/// parallel loop's body) frees them at its end: the stack pointer is saved
/// before the body and restored after it (llvm.intr.stacksave and
/// stackrestore, what memref-to-llvm would emit), so that the stack does
/// not grow with every iteration of the loop that the body becomes.
struct InlineAllocaScope : OpRewritePattern<memref::AllocaScopeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::AllocaScopeOp op,
                                PatternRewriter &b) const override {
    if (op.getNumResults() != 0)
      return failure();
    Block &body = op.getBodyRegion().front();
    bool hasAlloca = false, nested = false;
    op.getBodyRegion().walk([&](memref::AllocaOp alloca) {
      if (alloca->getParentOfType<memref::AllocaScopeOp>() != op)
        return;
      hasAlloca = true;
      nested |= alloca->getBlock() != &body;
    });
    if (nested)
      return b.notifyMatchFailure(op, "an alloca inside a nested region");
    Location loc = op.getLoc();
    Value saved;
    if (hasAlloca) {
      b.setInsertionPoint(op);
      saved = LLVM::StackSaveOp::create(
          b, loc, LLVM::LLVMPointerType::get(b.getContext()));
    }
    Operation *terminator = body.getTerminator();
    b.eraseOp(terminator);
    b.inlineBlockBefore(&body, op);
    if (hasAlloca) {
      b.setInsertionPoint(op);
      LLVM::StackRestoreOp::create(b, loc, saved);
    }
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
  patterns.add<ExpandShapeToCast, InlineAllocaScope>(patterns.getContext());
}
