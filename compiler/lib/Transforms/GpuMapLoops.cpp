//===- GpuMapLoops.cpp - parallel loops to GPU kernels --------------------===//
//
// tfm-gpu-map-loops: every outermost scf.parallel of a host function
// becomes a gpu.launch over its linearized iteration space, and the
// function's buffers become device buffers.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"

#include "GpuKernelBuilders.h"

#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMGPUMAPLOOPS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::kernels;

namespace {

/// Replaces `par` (and the parallel loops nested in it) by a gpu.launch of
/// 256-thread blocks over its linearized iteration space.
LogicalResult mapToLaunch(scf::ParallelOp par) {
  if (par.getNumResults() != 0)
    return par.emitOpError("with reductions cannot run on the GPU yet");
  // Inner parallel loops run sequentially within a thread.
  SmallVector<scf::ParallelOp> nested;
  par.getBody()->walk([&](scf::ParallelOp p) { nested.push_back(p); });
  IRRewriter rewriter(par.getContext());
  for (scf::ParallelOp p : nested)
    if (failed(scf::parallelForToNestedFors(rewriter, p)))
      return p.emitOpError("with reductions cannot run on the GPU yet");

  ImplicitLocOpBuilder b(par.getLoc(), par);
  KB k{b};
  constexpr int64_t threads = 256;
  SmallVector<Value> trips;
  Value total = k.c(1);
  for (auto [lb, ub, st] :
       llvm::zip(par.getLowerBound(), par.getUpperBound(), par.getStep())) {
    Value n = arith::CeilDivUIOp::create(b, k.max(k.sub(ub, lb), k.c(0)), st);
    trips.push_back(n);
    total = arith::MulIOp::create(b, total, n);
  }
  // At least one block (a grid of 0 is a launch error); the threads past
  // the iteration space do nothing.
  Value blocks =
      k.max(arith::CeilDivUIOp::create(b, total, k.c(threads)), k.c(1));
  launch(
      b, {blocks, k.c(1), k.c(1)}, {threads, 1, 1}, {}, [&](gpu::LaunchOp l) {
        Value id = k.add(k.mul(l.getBlockIds().x, threads), l.getThreadIds().x);
        auto inside = scf::IfOp::create(b, k.lt(id, total), false);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(inside.thenBlock());
        IRMapping map;
        Value rest = id;
        for (int64_t i = trips.size() - 1; i >= 0; --i) {
          Value idx = arith::RemUIOp::create(b, rest, trips[i]);
          rest = arith::DivUIOp::create(b, rest, trips[i]);
          Value iv = k.add(par.getLowerBound()[i],
                           arith::MulIOp::create(b, idx, par.getStep()[i]));
          map.map(par.getInductionVars()[i], iv);
        }
        for (Operation &op : par.getBody()->without_terminator())
          b.clone(op, map);
      });
  par.erase();
  return success();
}

struct TfmGpuMapLoopsPass
    : mlir::tfm::impl::TfmGpuMapLoopsBase<TfmGpuMapLoopsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<scf::ParallelOp> outer;
    func.walk([&](scf::ParallelOp p) {
      if (!p->getParentOfType<scf::ParallelOp>() &&
          !p->getParentOfType<gpu::LaunchOp>())
        outer.push_back(p);
    });
    for (scf::ParallelOp p : outer)
      if (failed(mapToLaunch(p)))
        return signalPassFailure();

    // Buffers live on the device.
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if (isa<memref::AllocOp, memref::DeallocOp, memref::GetGlobalOp>(op) &&
          !op->getParentOfType<gpu::LaunchOp>())
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        auto g = gpu::AllocOp::create(b, loc, alloc.getType(), Type(),
                                      ValueRange{}, alloc.getDynamicSizes(),
                                      alloc.getSymbolOperands());
        alloc.replaceAllUsesWith(g.getMemref());
        alloc.erase();
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(b, loc, Type(), ValueRange{},
                               dealloc.getMemref());
        dealloc.erase();
      } else if (auto global = dyn_cast<memref::GetGlobalOp>(op)) {
        // A constant table: copy it to a device buffer at its use.
        auto type = cast<MemRefType>(global.getType());
        auto dev = gpu::AllocOp::create(b, loc, type, Type(), ValueRange{},
                                        ValueRange{}, ValueRange{});
        b.setInsertionPointAfter(global);
        auto copy = gpu::MemcpyOp::create(b, loc, Type(), ValueRange{},
                                          dev.getMemref(), global);
        global.getResult().replaceAllUsesExcept(dev.getMemref(), copy);
        dev->moveBefore(copy);
      }
    }

    // Nothing may touch device memory on the host.
    WalkResult res = func.walk([&](Operation *op) {
      if (op->getParentOfType<gpu::LaunchOp>() || isa<gpu::LaunchOp>(op))
        return WalkResult::skip();
      if (isa<memref::LoadOp, memref::StoreOp, vector::LoadOp, vector::StoreOp,
              vector::TransferReadOp, vector::TransferWriteOp, memref::CopyOp>(
              op) ||
          isa<linalg::LinalgOp>(op) || isa<scf::ParallelOp>(op)) {
        op->emitOpError("accesses device memory on the host");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (res.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
