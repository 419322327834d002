//===- FuseEpilogues.cpp - fold elementwise consumers into linears --------===//
//
// tfm-fuse-epilogues: the elementwise ops that read a tfm.linear (and only
// they read it) become its epilogue, y = act(x W^T + b) * mul + residual:
//
//   tfm.activation(linear)      -> linear {activation}       (FFN up)
//   tfm.mul(linear, m)          -> linear mul m              (gated FFN)
//   tfm.add(r, linear)          -> linear residual r         (residual)
//
// An op is folded only where the epilogue's order allows it: an activation
// into a linear with no epilogue yet, a product into one with neither a
// product nor a residual, a residual into one without a residual.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"
#include "tfm/Transforms/Transforms.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMFUSEEPILOGUES
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The linear that defines `v` when `v` is its only use.
LinearOp soleLinear(Value v) {
  auto lin = v.getDefiningOp<LinearOp>();
  return lin && lin->hasOneUse() ? lin : LinearOp();
}

/// Replaces `op` by a copy of `lin` with the epilogue parts given (the
/// others kept from `lin`), and erases `lin`.
void replaceWithLinear(PatternRewriter &b, Operation *op, LinearOp lin,
                       ActivationAttr activation, Value mul, Value residual) {
  auto fused =
      LinearOp::create(b, op->getLoc(), lin.getType(), lin.getInput(),
                       lin.getWeight(), lin.getBias(), mul ? mul : lin.getMul(),
                       residual ? residual : lin.getResidual(),
                       activation ? activation : lin.getActivationAttr());
  b.replaceOp(op, fused.getResult());
  b.eraseOp(lin);
}

struct FuseActivation : OpRewritePattern<ActivationOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ActivationOp op,
                                PatternRewriter &b) const override {
    LinearOp lin = soleLinear(op.getInput());
    if (!lin || lin.getActivation() || lin.getMul() || lin.getResidual())
      return b.notifyMatchFailure(op, "not the sole use of a plain linear");
    replaceWithLinear(b, op, lin, op.getKindAttr(), Value(), Value());
    return success();
  }
};

/// tfm.mul and tfm.add: `Mul` says which epilogue operand the other side
/// becomes.
template <typename OpTy, bool Mul>
struct FuseBinary : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &b) const override {
    // Either side; the right one first (a residual stream is usually the
    // left operand).
    for (auto [mine, other] : {std::pair{op.getRhs(), op.getLhs()},
                               std::pair{op.getLhs(), op.getRhs()}}) {
      LinearOp lin = soleLinear(mine);
      if (!lin || lin.getResidual() || (Mul && lin.getMul()) ||
          other.getType() != lin.getType())
        continue;
      replaceWithLinear(b, op, lin, ActivationAttr(), Mul ? other : Value(),
                        Mul ? Value() : other);
      return success();
    }
    return b.notifyMatchFailure(op, "no side is the sole use of a linear");
  }
};

struct TfmFuseEpiloguesPass
    : mlir::tfm::impl::TfmFuseEpiloguesBase<TfmFuseEpiloguesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseEpiloguesPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::tfm::populateFuseEpiloguesPatterns(RewritePatternSet &patterns) {
  patterns
      .add<FuseActivation, FuseBinary<MulOp, true>, FuseBinary<AddOp, false>>(
          patterns.getContext());
}
