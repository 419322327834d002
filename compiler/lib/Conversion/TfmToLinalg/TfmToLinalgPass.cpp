//===- TfmToLinalgPass.cpp - the convert-tfm-to-linalg pass ---------------===//
//
// Every primitive and fused tfm op becomes linalg/tensor IR on tensors with
// dynamic batch and sequence sizes, or a destination-style kernel op; a tfm
// op left over is a conversion failure.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "TfmToLinalgUtils.h"

#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_CONVERTTFMTOLINALG
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::populateTfmToLinalgConversionPatterns(
    RewritePatternSet &patterns, int64_t panelWidth) {
  populateTfmElementwiseToLinalgPatterns(patterns);
  populateTfmDataMovementToLinalgPatterns(patterns);
  populateTfmKernelOpsToLinalgPatterns(patterns, panelWidth);
  populateTfmMoeToLinalgPatterns(patterns, panelWidth);
}

void mlir::tfm::populateTfmToLinalgConversionTarget(ConversionTarget &target) {
  target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                         math::MathDialect, tensor::TensorDialect,
                         scf::SCFDialect>();
  target.addIllegalDialect<TfmDialect>();
  target.addLegalOp<LinearKernelOp, GgmlLinearKernelOp, GgmlEmbedKernelOp,
                    NormKernelOp, AttentionKernelOp, AllReduceKernelOp,
                    AllGatherKernelOp, MoeKernelOp, TpRankOp>();
  target.addDynamicallyLegalOp<UnpackWeightOp>([](UnpackWeightOp op) {
    return linalg_lowering::isFoldedIntoKernel(op);
  });
  // A weight in ggml blocks only as a linear's weight: its kernel reads the
  // blocks (nothing lowers it otherwise).
  target.addDynamicallyLegalOp<GgmlWeightOp>([](GgmlWeightOp op) {
    return llvm::all_of(op->getUses(), [](OpOperand &use) {
      return isa<LinearOp, EmbedOp>(use.getOwner()) &&
             use.getOperandNumber() == 1;
    });
  });
}

namespace {

/// tensor.dim of a dynamic size of tensor.expand_shape is the size it was
/// expanded to (upstream's canonicalization does not look at output_shape
/// where a group has several dynamic sizes). Layers that start with the
/// expanded matrix of the linear before them then size their buffers with
/// the model's own sizes, as the first layer does, and share its outlined
/// function (tfm-outline-layers).
struct DimOfExpandShape : OpRewritePattern<tensor::DimOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::DimOp op,
                                PatternRewriter &b) const override {
    auto expand = op.getSource().getDefiningOp<tensor::ExpandShapeOp>();
    std::optional<int64_t> index = op.getConstantIndex();
    if (!expand || !index)
      return failure();
    OpFoldResult size = expand.getMixedOutputShape()[*index];
    auto value = dyn_cast<Value>(size);
    if (!value)
      return failure(); // static: folded to a constant upstream
    b.replaceOp(op, value);
    return success();
  }
};

struct ConvertTfmToLinalgPass
    : mlir::tfm::impl::ConvertTfmToLinalgBase<ConvertTfmToLinalgPass> {
  using ConvertTfmToLinalgBase::ConvertTfmToLinalgBase;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    populateTfmToLinalgConversionTarget(target);
    RewritePatternSet patterns(ctx);
    populateTfmToLinalgConversionPatterns(patterns, panelWidth);
    if (normKernels)
      populateTfmNormToKernelPatterns(patterns);
    if (transposedValues)
      populateTfmTransposedValueAttentionPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    // The linears that read a packed weight through tfm.unpack_weight now
    // take it directly.
    getOperation().walk([](Operation *op) {
      if (isa<UnpackWeightOp, GgmlWeightOp>(op) && op->use_empty())
        op->erase();
    });
    RewritePatternSet dims(ctx);
    dims.add<DimOfExpandShape>(ctx);
    // The linears' collapse of a norm's expanded rows folds to the rows.
    tensor::CollapseShapeOp::getCanonicalizationPatterns(dims, ctx);
    if (failed(applyPatternsGreedily(getOperation(), std::move(dims))))
      return signalPassFailure();
    // Then, with the linears reading the norms' rows directly, the norms
    // read only by linears of packed weights write the packed rows.
    if (normKernels) {
      RewritePatternSet pack(ctx);
      populateTfmPackNormForLinearsPatterns(pack);
      pack.add<DimOfExpandShape>(ctx);
      if (failed(applyPatternsGreedily(getOperation(), std::move(pack))))
        return signalPassFailure();
    }
  }
};

} // namespace
