//===- ExpandMath.cpp - polynomial exp, tanh and erf ----------------------===//
//
// tfm-expand-math: math.exp, math.tanh and math.erf (scalar or vector)
// become the polynomial approximations of upstream's math dialect, so that
// they vectorize instead of becoming libm calls per lane.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"
#include "tfm/Transforms/Transforms.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMEXPANDMATH
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

struct TfmExpandMathPass
    : mlir::tfm::impl::TfmExpandMathBase<TfmExpandMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateExpandMathPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::tfm::populateExpandMathPatterns(RewritePatternSet &patterns) {
  populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
    return name == "math.exp" || name == "math.tanh" || name == "math.erf";
  });
}
