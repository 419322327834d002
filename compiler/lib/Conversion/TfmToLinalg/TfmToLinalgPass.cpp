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

namespace mlir::tfm {
#define GEN_PASS_DEF_CONVERTTFMTOLINALG
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::populateTfmToLinalgConversionPatterns(
    RewritePatternSet &patterns) {
  populateTfmElementwiseToLinalgPatterns(patterns);
  populateTfmDataMovementToLinalgPatterns(patterns);
  populateTfmKernelOpsToLinalgPatterns(patterns);
}

void mlir::tfm::populateTfmToLinalgConversionTarget(ConversionTarget &target) {
  target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                         math::MathDialect, tensor::TensorDialect,
                         scf::SCFDialect>();
  target.addIllegalDialect<TfmDialect>();
  target.addLegalOp<LinearKernelOp, AttentionKernelOp, AllReduceKernelOp,
                    AllGatherKernelOp, TpRankOp>();
  target.addDynamicallyLegalOp<UnpackWeightOp>(
      linalg_lowering::isFoldedIntoKernel);
}

namespace {

struct ConvertTfmToLinalgPass
    : mlir::tfm::impl::ConvertTfmToLinalgBase<ConvertTfmToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    populateTfmToLinalgConversionTarget(target);
    RewritePatternSet patterns(ctx);
    populateTfmToLinalgConversionPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    // The linears that read a packed weight through tfm.unpack_weight now
    // take it directly.
    getOperation().walk([](UnpackWeightOp op) {
      if (op->use_empty())
        op->erase();
    });
  }
};

} // namespace
