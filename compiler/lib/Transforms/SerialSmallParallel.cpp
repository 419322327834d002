//===- SerialSmallParallel.cpp - fork only for enough work ----------------===//
//
// A parallel loop over a decode step's one row, or over a few rows of a
// small model, costs more to fork and join than it computes: libomp wakes
// or spins up the other threads for nothing. Each omp.parallel around an
// omp.wsloop gets an `if` clause that forks only for at least two
// iterations and an estimated work of at least min-work operations,
// computed at run time from the sizes that are dynamic.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMSERIALSMALLPARALLEL
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// An estimate of operations: `constant` plus, where the estimate is
/// dynamic, the run-time index `value`.
struct Work {
  int64_t constant = 0;
  Value value;
};

/// Builds the estimates of the body of one parallel region, with the
/// arithmetic it needs placed before that region.
class Estimator {
public:
  Estimator(omp::ParallelOp region) : region(region), b(region) {}

  /// Removes what the estimate built (where it failed).
  void discard() {
    for (Operation *op : llvm::reverse(created))
      op->erase();
    created.clear();
  }

  /// An operation before the region, kept for discard().
  template <typename OpT, typename... Args>
  Value make(Args &&...args) {
    auto op = OpT::create(b, region.getLoc(), std::forward<Args>(args)...);
    created.push_back(op);
    return op;
  }

  /// The work of `block` (its operations and the loops inside them), or
  /// failure where it cannot be told.
  FailureOr<Work> ofBlock(Block &block) {
    Work sum;
    for (Operation &op : block) {
      FailureOr<Work> w = ofOp(op);
      if (failed(w))
        return failure();
      sum = add(sum, *w);
    }
    return sum;
  }

  /// The iterations of a loop from lb to ub by step (each a value from
  /// outside the region), or failure.
  FailureOr<Work> trips(Value lb, Value ub, Value step) {
    if (!outside(lb) || !outside(ub) || !outside(step))
      return failure();
    if (std::optional<APInt> n = constantTripCount(
            lb, ub, step, /*isSigned=*/true,
            [](Value, Value, bool) { return std::optional<APSInt>(); }))
      return Work{n->getSExtValue(), Value()};
    Value diff = make<arith::SubIOp>(ub, lb);
    diff = make<arith::MaxSIOp>(diff, constant(0));
    return Work{0, make<arith::CeilDivUIOp>(diff, step)};
  }

  Work mul(Work x, Work y) {
    if (!x.value && !y.value)
      return Work{x.constant * y.constant, Value()};
    return Work{0, make<arith::MulIOp>(materialize(x), materialize(y))};
  }

  Value materialize(Work w) {
    if (!w.value)
      return constant(w.constant);
    if (w.constant == 0)
      return w.value;
    return make<arith::AddIOp>(w.value, constant(w.constant));
  }

  Value constant(int64_t c) { return make<arith::ConstantIndexOp>(c); }

  /// Whether `w` is at least `bound`: a constant where `w` is one.
  Value atLeast(Work w, int64_t bound) {
    if (!w.value)
      return make<arith::ConstantIntOp>(int64_t(w.constant >= bound), 1);
    return make<arith::CmpIOp>(arith::CmpIPredicate::uge, materialize(w),
                               constant(bound));
  }

private:
  bool outside(Value v) {
    return !region->isAncestor(v.getParentRegion()->getParentOp());
  }

  /// The constant parts add up as constants: a body's many operations
  /// beside one dynamic loop cost one addition at run time, not one each.
  Work add(Work x, Work y) {
    Value v = x.value && y.value ? make<arith::AddIOp>(x.value, y.value)
                                 : (x.value ? x.value : y.value);
    return Work{x.constant + y.constant, v};
  }

  Work max(Work x, Work y) {
    if (!x.value && !y.value)
      return Work{std::max(x.constant, y.constant), Value()};
    return Work{0, make<arith::MaxUIOp>(materialize(x), materialize(y))};
  }

  FailureOr<Work> ofOp(Operation &op) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      FailureOr<Work> n =
          trips(loop.getLowerBound(), loop.getUpperBound(), loop.getStep());
      FailureOr<Work> body = ofBlock(*loop.getBody());
      if (failed(n) || failed(body))
        return failure();
      return mul(*n, *body);
    }
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      FailureOr<Work> then = ofBlock(*branch.thenBlock());
      if (failed(then))
        return failure();
      if (!branch.elseBlock())
        return *then;
      FailureOr<Work> other = ofBlock(*branch.elseBlock());
      if (failed(other))
        return failure();
      return max(*then, *other);
    }
    if (auto scope = dyn_cast<memref::AllocaScopeOp>(op))
      return ofBlock(scope.getBodyRegion().front());
    if (op.getNumRegions() != 0 || isa<CallOpInterface>(op))
      return failure();
    return Work{1, Value()};
  }

  omp::ParallelOp region;
  OpBuilder b;
  SmallVector<Operation *> created;
};

struct TfmSerialSmallParallelPass
    : mlir::tfm::impl::TfmSerialSmallParallelBase<TfmSerialSmallParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([&](omp::ParallelOp region) {
      if (region.getIfExpr())
        return;
      // The region as convert-scf-to-openmp makes it: a worksharing loop,
      // beside nothing but constants and allocas.
      omp::WsloopOp ws;
      for (Operation &op : region.getRegion().front()) {
        if (auto w = dyn_cast<omp::WsloopOp>(op)) {
          if (ws)
            return;
          ws = w;
        }
      }
      if (!ws)
        return;
      auto nest = dyn_cast<omp::LoopNestOp>(ws.getWrappedLoop());
      if (!nest || nest.getRegion().getBlocks().size() != 1)
        return;
      Estimator estimate(region);
      Work iterations{1, Value()};
      for (auto [lb, ub, step] :
           llvm::zip(nest.getLoopLowerBounds(), nest.getLoopUpperBounds(),
                     nest.getLoopSteps())) {
        FailureOr<Work> n = estimate.trips(lb, ub, step);
        if (failed(n))
          return estimate.discard();
        iterations = estimate.mul(iterations, *n);
      }
      FailureOr<Work> body = estimate.ofBlock(nest.getRegion().front());
      if (failed(body))
        return estimate.discard();
      Work total = estimate.mul(iterations, *body);
      // Static sizes decide it here: enough work keeps the region as it
      // is, too little gets `if(false)`.
      if (!iterations.value && !total.value) {
        estimate.discard();
        if (iterations.constant >= 2 && total.constant >= minWork)
          return;
        OpBuilder b(region);
        region.getIfExprMutable().assign(
            arith::ConstantIntOp::create(b, region.getLoc(), 0, 1));
        return;
      }
      Value fork = estimate.make<arith::AndIOp>(
          estimate.atLeast(iterations, 2), estimate.atLeast(total, minWork));
      region.getIfExprMutable().assign(fork);
    });
  }
};

} // namespace
