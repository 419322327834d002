//===- GpuGemmKernels.cpp - tfm.linear_kernel as a tiled GPU GEMM ---------===//
//
// 64x64 output tiles (one weight panel per block column), K in steps of 32
// staged in shared memory: tensor-core mma.sync for f16/bf16, an 8x4
// register block per thread for f32. The bias is added and the tile stored
// where it lies inside the output.
//
//===----------------------------------------------------------------------===//

#include "GpuKernelBuilders.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::kernels;

namespace {

/// Output rows and reduction steps per thread block, threads per block.
constexpr int64_t bm = 64, bk = 32, threads = 128;

/// Stages A[m0 .. m0+63][k0 .. k0+31] into sA[row][k] and the panel's
/// rows k0 .. k0+31 into sB, as [n][k] (`transposed`) or [k][n].
void stage(ImplicitLocOpBuilder &b, Value tid, Value a, Value w, Value p,
           Value m0, Value k0, Value sA, Value sB, bool transposed) {
  KB k{b};
  Type elt = cast<MemRefType>(sA.getType()).getElementType();
  Value m = k.dim(a, 0), kk = k.dim(a, 1);
  Value mLast = k.sub(m, k.c(1)), kLast = k.sub(kk, k.c(1));
  forEachElement(b, tid, bm * bk, threads, [&](Value e) {
    Value r = k.div(e, bk), c = k.rem(e, bk);
    Value row = k.add(m0, r), col = k.add(k0, c);
    Value ok = k.andI(k.lt(row, m), k.lt(col, kk));
    Value v = k.loadOrZero(a, {k.min(row, mLast), k.min(col, kLast)}, ok, elt);
    memref::StoreOp::create(b, v, sA, ValueRange{r, c});
  });
  forEachElement(b, tid, bk * kGpuPanel, threads, [&](Value e) {
    Value r = k.div(e, kGpuPanel), c = k.rem(e, kGpuPanel);
    Value row = k.add(k0, r);
    Value v = k.loadOrZero(w, {p, k.min(row, kLast), c}, k.lt(row, kk), elt);
    memref::StoreOp::create(b, v, sB,
                            transposed ? ValueRange{c, r} : ValueRange{r, c});
  });
}

/// Adds the bias, applies the rest of the epilogue and stores element
/// (row, col) when inside.
void epilogue(ImplicitLocOpBuilder &b, LinearKernelOp lin, Value row, Value col,
              Value v) {
  KB k{b};
  Value out = lin.getOutput();
  Value ok = k.andI(k.lt(row, k.dim(out, 0)), k.lt(col, k.dim(out, 1)));
  auto ifOp = scf::IfOp::create(b, ok, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  if (Value bias = lin.getBias())
    v = k.fadd(v, k.loadF32(bias, {col}));
  if (auto act = lin.getActivation())
    v = buildActivation(b, b.getLoc(), *act, v);
  if (Value mul = lin.getMul())
    v = arith::MulFOp::create(b, v, k.loadF32(mul, {row, col}));
  if (Value residual = lin.getResidual())
    v = k.fadd(v, k.loadF32(residual, {row, col}));
  k.storeAs(v, out, {row, col});
}

} // namespace

void kernels::emitLinearMma(ImplicitLocOpBuilder &b, LinearKernelOp op) {
  KB k{b};
  Value a = op.getInput(), w = op.getWeightP();
  Type elt = cast<MemRefType>(op.getOutput().getType()).getElementType();
  MemRefType sAT = sharedType({bm, bk + 8}, elt);
  MemRefType sBT = sharedType({kGpuPanel, bk + 8}, elt);
  Value rowsGrid = arith::CeilDivUIOp::create(b, k.dim(a, 0), k.c(bm));
  launch(
      b, {k.dim(w, 0), rowsGrid, k.c(1)}, {threads, 1, 1}, {sAT, sBT},
      [&](gpu::LaunchOp l) {
        Value sA = l.getWorkgroupAttributions()[0];
        Value sB = l.getWorkgroupAttributions()[1];
        Value tid = l.getThreadIds().x, p = l.getBlockIds().x;
        Value m0 = k.mul(l.getBlockIds().y, bm);
        Value warp = k.div(tid, 32), lane = k.rem(tid, 32);
        Value g = k.div(lane, 4), t2 = k.mul(k.rem(lane, 4), 2);
        const int64_t nTiles = kGpuPanel / 8;
        SmallVector<Value> init(nTiles * 4, k.f(0.0));
        auto loop = scf::ForOp::create(
            b, k.c(0), k.dim(a, 1), k.c(bk), init,
            [&](OpBuilder &nb, Location loc, Value k0, ValueRange acc) {
              ImplicitLocOpBuilder ib(loc, nb);
              KB kb{ib};
              gpu::BarrierOp::create(ib);
              stage(ib, tid, a, w, p, m0, k0, sA, sB, /*transposed=*/true);
              gpu::BarrierOp::create(ib);
              SmallVector<Value> next(acc.begin(), acc.end());
              Value ra = kb.add(kb.mul(warp, 16), g), rb = kb.add(ra, 8);
              for (int64_t kk = 0; kk < bk / 16; ++kk) {
                Value col = kb.add(t2, kk * 16), col8 = kb.add(col, 8);
                SmallVector<Value> fa{
                    pair(ib, sA, {ra, col}), pair(ib, sA, {rb, col}),
                    pair(ib, sA, {ra, col8}), pair(ib, sA, {rb, col8})};
                for (int64_t nt = 0; nt < nTiles; ++nt) {
                  Value n = kb.add(g, nt * 8);
                  SmallVector<Value> c(next.begin() + nt * 4,
                                       next.begin() + nt * 4 + 4);
                  c = mma(ib, elt, fa,
                          {pair(ib, sB, {n, col}), pair(ib, sB, {n, col8})}, c);
                  std::copy(c.begin(), c.end(), next.begin() + nt * 4);
                }
              }
              scf::YieldOp::create(ib, next);
            });
        Value rowA = k.add(k.add(m0, k.mul(warp, 16)), g);
        for (int64_t nt = 0; nt < nTiles; ++nt)
          for (int64_t e = 0; e < 4; ++e) {
            Value row = k.add(rowA, e < 2 ? 0 : 8);
            Value col = k.add(k.add(k.mul(p, kGpuPanel), t2), nt * 8 + (e & 1));
            epilogue(b, op, row, col, loop.getResult(nt * 4 + e));
          }
      });
}

void kernels::emitLinearSimt(ImplicitLocOpBuilder &b, LinearKernelOp op) {
  KB k{b};
  Value a = op.getInput(), w = op.getWeightP();
  Type f32 = b.getF32Type();
  constexpr int64_t tr = 8, tc = 4; // outputs per thread
  MemRefType sAT = sharedType({bm, bk + 1}, f32);
  MemRefType sBT = sharedType({bk, kGpuPanel}, f32);
  Value rowsGrid = arith::CeilDivUIOp::create(b, k.dim(a, 0), k.c(bm));
  launch(
      b, {k.dim(w, 0), rowsGrid, k.c(1)}, {threads, 1, 1}, {sAT, sBT},
      [&](gpu::LaunchOp l) {
        Value sA = l.getWorkgroupAttributions()[0];
        Value sB = l.getWorkgroupAttributions()[1];
        Value tid = l.getThreadIds().x, p = l.getBlockIds().x;
        Value m0 = k.mul(l.getBlockIds().y, bm);
        Value tx = k.rem(tid, kGpuPanel / tc), ty = k.div(tid, kGpuPanel / tc);
        SmallVector<Value> init(tr * tc, k.f(0.0));
        auto loop = scf::ForOp::create(
            b, k.c(0), k.dim(a, 1), k.c(bk), init,
            [&](OpBuilder &nb, Location loc, Value k0, ValueRange acc) {
              ImplicitLocOpBuilder ib(loc, nb);
              KB kb{ib};
              gpu::BarrierOp::create(ib);
              stage(ib, tid, a, w, p, m0, k0, sA, sB, /*transposed=*/false);
              gpu::BarrierOp::create(ib);
              auto inner = scf::ForOp::create(
                  ib, kb.c(0), kb.c(bk), kb.c(1), acc,
                  [&](OpBuilder &nb2, Location l2, Value kc, ValueRange c) {
                    ImplicitLocOpBuilder jb(l2, nb2);
                    KB kj{jb};
                    SmallVector<Value> av, bv, next;
                    for (int64_t r = 0; r < tr; ++r)
                      av.push_back(memref::LoadOp::create(
                          jb, sA, ValueRange{kj.add(kj.mul(ty, tr), r), kc}));
                    for (int64_t cc = 0; cc < tc; ++cc)
                      bv.push_back(memref::LoadOp::create(
                          jb, sB, ValueRange{kc, kj.add(kj.mul(tx, tc), cc)}));
                    for (int64_t r = 0; r < tr; ++r)
                      for (int64_t cc = 0; cc < tc; ++cc)
                        next.push_back(kj.fma(av[r], bv[cc], c[r * tc + cc]));
                    scf::YieldOp::create(jb, next);
                  });
              scf::YieldOp::create(ib, inner.getResults());
            });
        for (int64_t r = 0; r < tr; ++r)
          for (int64_t cc = 0; cc < tc; ++cc) {
            Value row = k.add(k.add(m0, k.mul(ty, tr)), r);
            Value col = k.add(k.add(k.mul(p, kGpuPanel), k.mul(tx, tc)), cc);
            epilogue(b, op, row, col, loop.getResult(r * tc + cc));
          }
      });
}
