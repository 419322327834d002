//===- ParallelizeOuter.cpp - keep only outer loops parallel --------------===//
//
// convert-linalg-to-parallel-loops makes every parallel dimension an
// scf.parallel dimension. For OpenMP only the outer dimensions should be
// distributed: the innermost dimension must stay a plain loop so that LLVM
// vectorizes it, a parallel loop nested in another one gains nothing, and a
// one-dimensional loop (over a bias vector, say) is not worth a fork.
// Loops marked tfm.keep_parallel (the kernels' own distribution) are kept.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMPARALLELIZEOUTER
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Replaces the multi-dimensional `op` by an scf.parallel over all but its
/// innermost dimension around an scf.for over that one.
void serializeInnermost(RewriterBase &rw, scf::ParallelOp op) {
  Location loc = op.getLoc();
  rw.setInsertionPoint(op);
  auto outer = scf::ParallelOp::create(rw, loc, op.getLowerBound().drop_back(),
                                       op.getUpperBound().drop_back(),
                                       op.getStep().drop_back());
  rw.setInsertionPoint(outer.getBody()->getTerminator());
  auto inner =
      scf::ForOp::create(rw, loc, op.getLowerBound().back(),
                         op.getUpperBound().back(), op.getStep().back());
  SmallVector<Value> ivs(outer.getInductionVars());
  ivs.push_back(inner.getInductionVar());
  rw.eraseOp(op.getBody()->getTerminator());
  rw.inlineBlockBefore(op.getBody(), inner.getBody()->getTerminator(), ivs);
  rw.eraseOp(op);
}

struct TfmParallelizeOuterPass
    : mlir::tfm::impl::TfmParallelizeOuterBase<TfmParallelizeOuterPass> {
  void runOnOperation() override {
    SmallVector<scf::ParallelOp> loops;
    getOperation().walk([&](scf::ParallelOp op) { loops.push_back(op); });
    IRRewriter rewriter(&getContext());
    auto keepParallel = getContext()
                            .getLoadedDialect<TfmDialect>()
                            ->getKeepParallelAttrHelper();
    // Outer loops first (walk is post-order): process in reverse. The bodies
    // move, so the inner loops stay valid (and are then nested).
    for (scf::ParallelOp op : llvm::reverse(loops)) {
      if (op.getNumResults() != 0 || keepParallel.isAttrPresent(op))
        continue;
      bool nested = op->getParentOfType<scf::ParallelOp>() != nullptr;
      if (nested || op.getNumLoops() == 1)
        (void)scf::parallelForToNestedFors(rewriter, op);
      else
        serializeInnermost(rewriter, op);
    }
  }
};

} // namespace
