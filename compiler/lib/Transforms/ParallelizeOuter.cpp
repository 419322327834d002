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

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMPARALLELIZEOUTER
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Replaces `op` by an scf.parallel over its first `numParallel` dimensions
/// (none: no parallel loop) around scf.for loops over the others.
void splitParallel(scf::ParallelOp op, unsigned numParallel) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  unsigned n = op.getNumLoops();
  SmallVector<Value> ivs(n);
  Block *body = nullptr;
  OpBuilder inner(op.getContext());
  if (numParallel > 0) {
    auto par = scf::ParallelOp::create(
        b, loc, op.getLowerBound().take_front(numParallel),
        op.getUpperBound().take_front(numParallel),
        op.getStep().take_front(numParallel));
    for (unsigned i = 0; i < numParallel; ++i)
      ivs[i] = par.getInductionVars()[i];
    body = par.getBody();
    inner.setInsertionPoint(body->getTerminator());
  } else {
    inner.setInsertionPoint(op);
  }
  for (unsigned i = numParallel; i < n; ++i) {
    auto loop = scf::ForOp::create(inner, loc, op.getLowerBound()[i],
                                   op.getUpperBound()[i], op.getStep()[i]);
    ivs[i] = loop.getInductionVar();
    inner.setInsertionPoint(loop.getBody()->getTerminator());
  }
  // Move the body (without its scf.reduce terminator).
  Block *old = op.getBody();
  Operation *insertBefore = &*inner.getInsertionPoint();
  for (unsigned i = 0; i < n; ++i)
    old->getArgument(i).replaceAllUsesWith(ivs[i]);
  auto &ops = old->getOperations();
  insertBefore->getBlock()->getOperations().splice(
      insertBefore->getIterator(), ops, ops.begin(), std::prev(ops.end()));
  op.erase();
}

struct TfmParallelizeOuterPass
    : mlir::tfm::impl::TfmParallelizeOuterBase<TfmParallelizeOuterPass> {
  void runOnOperation() override {
    SmallVector<scf::ParallelOp> loops;
    getOperation().walk([&](scf::ParallelOp op) { loops.push_back(op); });
    // Outer loops first (walk is post-order): process in reverse.
    for (scf::ParallelOp op : llvm::reverse(loops)) {
      if (op.getNumResults() != 0 || op->hasAttr("tfm.keep_parallel"))
        continue;
      bool nested = op->getParentOfType<scf::ParallelOp>() != nullptr;
      unsigned n = op.getNumLoops();
      if (nested || n == 1)
        splitParallel(op, 0);
      else
        splitParallel(op, n - 1);
    }
  }
};

} // namespace
