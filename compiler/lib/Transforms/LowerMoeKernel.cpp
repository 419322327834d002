//===- LowerMoeKernel.cpp - tfm.moe_kernel as sparse expert GEMMs ---------===//
//
// tfm.moe_kernel: output[m] = sum over e of weights[m, e] * ffn_e(input[m]),
// where a row runs only the experts of nonzero weight (tfm.route's chosen
// ones). The buffer form becomes:
//
//   1. a counting sort of the (row, expert) pairs of nonzero weight by
//      expert: each expert's count, their exclusive prefix sums (each
//      expert's first slot), then each pair's slot, rows in order;
//   2. the rows gathered into their slots (rows in parallel): each expert's
//      rows are contiguous;
//   3. for each expert with rows, its GEMMs over its rows only, through
//      tfm.linear_kernel on the expert's panels of the packed stacks (the
//      same register-tiled kernel, f32, bf16 pairs or int8 quads): up, then
//      gate with the activation and the product with up in its epilogue,
//      then down. The experts with rows are the tasks of one parallel loop
//      (each expert's GEMMs run on one thread), so that a layer forks once
//      rather than once a GEMM. An expert no row chose is never read:
//      decode reads the active experts' bytes only;
//   4. each row's sum of its experts' outputs times their weights, in
//      expert order (rows in parallel).
//
// The linear kernels it creates are lowered by the same pass.
//
//===----------------------------------------------------------------------===//

#include "CpuKernelBuilders.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::cpu;

namespace {

/// The [e] element of `stack` ([E, ...]): a subview of rank one less.
Value expertOf(OpBuilder &b, Location loc, Value stack, Value e) {
  auto t = cast<MemRefType>(stack.getType());
  int64_t rank = t.getRank();
  SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)), sizes,
      strides(rank, b.getIndexAttr(1));
  offsets[0] = e;
  sizes.push_back(b.getIndexAttr(1));
  for (int64_t i = 1; i < rank; ++i)
    sizes.push_back(b.getIndexAttr(t.getDimSize(i)));
  auto type = memref::SubViewOp::inferRankReducedResultType(
      t.getShape().drop_front(), t, offsets, sizes, strides);
  return memref::SubViewOp::create(b, loc, cast<MemRefType>(type), stack,
                                   offsets, sizes, strides);
}

/// Rows [first, first + count) of `m` [R, C].
Value rowsOf(OpBuilder &b, Location loc, Value m, Value first, Value count) {
  auto t = cast<MemRefType>(m.getType());
  SmallVector<OpFoldResult> offsets{first, b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes{count, b.getIndexAttr(t.getDimSize(1))};
  SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
  auto type = memref::SubViewOp::inferResultType(t, offsets, sizes, strides);
  return memref::SubViewOp::create(b, loc, cast<MemRefType>(type), m, offsets,
                                   sizes, strides);
}

/// A parallel loop over [0, n), kept parallel (OpenMP).
void parallelFor(OpBuilder &b, Location loc, Value n,
                 function_ref<void(OpBuilder &, Location, Value)> body) {
  auto par =
      scf::ParallelOp::create(b, loc, ValueRange{cIdx(b, loc, 0)},
                              ValueRange{n}, ValueRange{cIdx(b, loc, 1)},
                              [&](OpBuilder &pb, Location pl, ValueRange ivs) {
                                body(pb, pl, ivs[0]);
                                scf::ReduceOp::create(pb, pl);
                              });
  markKeepParallel(par);
}

/// dst[r, :] = src[s, :] (`scale` null), scale * src[s, :], or (with
/// `accumulate`) dst[r, :] + scale * src[s, :], over `cols` columns, 16 at
/// a time with a masked tail; `src` null: zeros.
void rowUpdate(OpBuilder &b, Location loc, Value dst, Value r, Value src,
               Value s, int64_t cols, Value scale, bool accumulate) {
  auto vt = VectorType::get({16}, b.getF32Type());
  auto mt = VectorType::get({16}, b.getI1Type());
  Value zero = arith::ConstantOp::create(
      b, loc, vt, DenseElementsAttr::get(vt, b.getF32FloatAttr(0)));
  Value scaleV =
      scale ? vector::BroadcastOp::create(b, loc, vt, scale) : Value();
  auto chunk = [&](OpBuilder &cb, Location cl, Value col, Value mask) {
    auto load = [&](Value m, Value row) -> Value {
      if (!mask)
        return vector::LoadOp::create(cb, cl, vt, m, ValueRange{row, col});
      return vector::MaskedLoadOp::create(cb, cl, vt, m, ValueRange{row, col},
                                          mask, zero);
    };
    Value v = src ? load(src, s) : zero;
    if (scaleV)
      v = accumulate ? vector::FMAOp::create(cb, cl, v, scaleV, load(dst, r))
                     : arith::MulFOp::create(cb, cl, v, scaleV).getResult();
    if (!mask)
      vector::StoreOp::create(cb, cl, v, dst, ValueRange{r, col});
    else
      vector::MaskedStoreOp::create(cb, cl, dst, ValueRange{r, col}, mask, v);
  };
  int64_t whole = cols / 16, rest = cols % 16;
  forRange(b, loc, cIdx(b, loc, 0), cIdx(b, loc, whole * 16), cIdx(b, loc, 16),
           [&](OpBuilder &fb, Location fl, Value col) {
             chunk(fb, fl, col, Value());
           });
  if (rest) {
    Value mask = vector::CreateMaskOp::create(b, loc, mt,
                                              ValueRange{cIdx(b, loc, rest)});
    chunk(b, loc, cIdx(b, loc, whole * 16), mask);
  }
}

struct LowerMoeKernel : OpRewritePattern<MoeKernelOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MoeKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureBufferSemantics())
      return b.notifyMatchFailure(op, "not bufferized yet");
    Location loc = op.getLoc();
    Value x = op.getInput(), w = op.getWeights(), out = op.getOutput();
    auto upT = cast<MemRefType>(op.getUpP().getType());
    int64_t experts = upT.getDimSize(0);
    int64_t d = cast<MemRefType>(x.getType()).getDimSize(1);
    int64_t f = op.getHidden();
    Value c0 = cIdx(b, loc, 0), c1 = cIdx(b, loc, 1);
    Value m = dim(b, loc, x, 0);
    Value e = cIdx(b, loc, experts);
    auto idxT = b.getIndexType();
    auto f32 = b.getF32Type();

    // 1. Counting sort: counts, first slots, each pair's slot (-1: none).
    Value counts =
        memref::AllocaOp::create(b, loc, MemRefType::get({experts + 1}, idxT));
    forRange(b, loc, c0, cIdx(b, loc, experts + 1), c1,
             [&](OpBuilder &fb, Location fl, Value i) {
               memref::StoreOp::create(fb, fl, cIdx(fb, fl, 0), counts, i);
             });
    Value slotOf = memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic, experts}, idxT),
        ValueRange{m});
    auto chosen = [&](OpBuilder &fb, Location fl, Value row, Value ex) {
      Value v = memref::LoadOp::create(fb, fl, w, ValueRange{row, ex});
      return arith::CmpFOp::create(fb, fl, arith::CmpFPredicate::UNE, v,
                                   cF32(fb, fl, 0.0));
    };
    forRange(b, loc, c0, m, c1, [&](OpBuilder &rb, Location rl, Value row) {
      forRange(rb, rl, c0, e, c1, [&](OpBuilder &fb, Location fl, Value ex) {
        Value on = chosen(fb, fl, row, ex);
        Value n = memref::LoadOp::create(fb, fl, counts, ValueRange{ex});
        Value n1 = arith::AddIOp::create(fb, fl, n, cIdx(fb, fl, 1));
        memref::StoreOp::create(fb, fl,
                                arith::SelectOp::create(fb, fl, on, n1, n),
                                counts, ValueRange{ex});
      });
    });
    // first[e] = sum of counts before e; first[E] = all slots.
    Value first =
        memref::AllocaOp::create(b, loc, MemRefType::get({experts + 1}, idxT));
    auto prefix = scf::ForOp::create(
        b, loc, c0, cIdx(b, loc, experts + 1), c1, ValueRange{c0},
        [&](OpBuilder &fb, Location fl, Value i, ValueRange acc) {
          memref::StoreOp::create(fb, fl, acc[0], first, ValueRange{i});
          Value n = memref::LoadOp::create(fb, fl, counts, ValueRange{i});
          scf::YieldOp::create(
              fb, fl, ValueRange{arith::AddIOp::create(fb, fl, acc[0], n)});
        });
    Value total = prefix.getResult(0);
    // Slots in row order within each expert: next[e] starts at first[e].
    Value next =
        memref::AllocaOp::create(b, loc, MemRefType::get({experts}, idxT));
    forRange(b, loc, c0, e, c1, [&](OpBuilder &fb, Location fl, Value i) {
      memref::StoreOp::create(
          fb, fl, memref::LoadOp::create(fb, fl, first, ValueRange{i}), next,
          ValueRange{i});
    });
    Value rowOf = memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic}, idxT),
        ValueRange{total});
    forRange(b, loc, c0, m, c1, [&](OpBuilder &rb, Location rl, Value row) {
      forRange(rb, rl, c0, e, c1, [&](OpBuilder &fb, Location fl, Value ex) {
        Value on = chosen(fb, fl, row, ex);
        auto ifOp = scf::IfOp::create(fb, fl, TypeRange{idxT}, on,
                                      /*withElseRegion=*/true);
        {
          OpBuilder::InsertionGuard g(fb);
          fb.setInsertionPointToStart(ifOp.thenBlock());
          Value s = memref::LoadOp::create(fb, fl, next, ValueRange{ex});
          memref::StoreOp::create(
              fb, fl, arith::AddIOp::create(fb, fl, s, cIdx(fb, fl, 1)), next,
              ValueRange{ex});
          memref::StoreOp::create(fb, fl, row, rowOf, ValueRange{s});
          scf::YieldOp::create(fb, fl, ValueRange{s});
          fb.setInsertionPointToStart(ifOp.elseBlock());
          scf::YieldOp::create(fb, fl, ValueRange{cIdx(fb, fl, -1)});
        }
        memref::StoreOp::create(fb, fl, ifOp.getResult(0), slotOf,
                                ValueRange{row, ex});
      });
    });

    // 2. The rows gathered into their slots.
    auto dyn = ShapedType::kDynamic;
    Value xs =
        memref::AllocOp::create(b, loc, MemRefType::get({dyn, d}, f32),
                                ValueRange{total}, b.getI64IntegerAttr(64));
    parallelFor(b, loc, total, [&](OpBuilder &pb, Location pl, Value s) {
      Value row = memref::LoadOp::create(pb, pl, rowOf, ValueRange{s});
      rowUpdate(pb, pl, xs, s, x, row, d, Value(), false);
    });

    // 3. Each expert's GEMMs over its rows.
    Value hs =
        memref::AllocOp::create(b, loc, MemRefType::get({dyn, f}, f32),
                                ValueRange{total}, b.getI64IntegerAttr(64));
    Value ys =
        memref::AllocOp::create(b, loc, MemRefType::get({dyn, d}, f32),
                                ValueRange{total}, b.getI64IntegerAttr(64));
    auto biases = op.getBiases();
    bool gated = op.getGateP() != nullptr;
    Activation act = op.getActivation();
    MLIRContext *ctx = b.getContext();
    // The experts with rows, in order; then one task per such expert, its
    // three GEMMs on the thread that takes it (serial linear kernels): a
    // parallel loop per layer rather than per GEMM, and decode's few
    // chosen experts spread over the threads.
    Value active =
        memref::AllocaOp::create(b, loc, MemRefType::get({experts}, idxT));
    Value numActive =
        scf::ForOp::create(
            b, loc, c0, e, c1, ValueRange{c0},
            [&](OpBuilder &fb, Location fl, Value ex, ValueRange acc) {
              Value n = memref::LoadOp::create(fb, fl, counts, ValueRange{ex});
              Value any = arith::CmpIOp::create(
                  fb, fl, arith::CmpIPredicate::ugt, n, cIdx(fb, fl, 0));
              memref::StoreOp::create(fb, fl, ex, active, ValueRange{acc[0]});
              Value next = arith::SelectOp::create(
                  fb, fl, any,
                  arith::AddIOp::create(fb, fl, acc[0], cIdx(fb, fl, 1)),
                  acc[0]);
              scf::YieldOp::create(fb, fl, ValueRange{next});
            })
            .getResult(0);
    UnitAttr serial = b.getUnitAttr();
    auto linear = [&](OpBuilder &fb, Location fl, Value in, Value wp,
                      Value bias, Value mul, Value outRows, ActivationAttr a) {
      auto k = LinearKernelOp::create(fb, fl, TypeRange{}, in, wp, bias, mul,
                                      Value(), outRows, a);
      k->setAttr(LinearKernelOp::kSerialAttrName, serial);
    };
    parallelFor(b, loc, numActive, [&](OpBuilder &fb, Location fl, Value i) {
      Value ex = memref::LoadOp::create(fb, fl, active, ValueRange{i});
      Value n = memref::LoadOp::create(fb, fl, counts, ValueRange{ex});
      Value at = memref::LoadOp::create(fb, fl, first, ValueRange{ex});
      Value a = rowsOf(fb, fl, xs, at, n);
      Value h = rowsOf(fb, fl, hs, at, n);
      Value y = rowsOf(fb, fl, ys, at, n);
      auto biasOf = [&](unsigned i) -> Value {
        return biases.empty() ? Value() : expertOf(fb, fl, biases[i], ex);
      };
      Value up = expertOf(fb, fl, op.getUpP(), ex);
      if (gated) {
        std::optional<Activation> upAct = getUpActivation(act);
        linear(fb, fl, a, up, biasOf(0), Value(), h,
               upAct ? ActivationAttr::get(ctx, *upAct) : ActivationAttr());
        Value gate = expertOf(fb, fl, op.getGateP(), ex);
        linear(fb, fl, a, gate, biasOf(1), h, h,
               ActivationAttr::get(ctx, getGateActivation(act)));
      } else {
        linear(fb, fl, a, up, biasOf(0), Value(), h,
               ActivationAttr::get(ctx, act));
      }
      Value down = expertOf(fb, fl, op.getDownP(), ex);
      linear(fb, fl, h, down, biasOf(biases.empty() ? 0 : biases.size() - 1),
             Value(), y, ActivationAttr());
    });

    // 4. Each row's weighted sum of its experts, in expert order.
    parallelFor(b, loc, m, [&](OpBuilder &pb, Location pl, Value row) {
      rowUpdate(pb, pl, out, row, Value(), Value(), d, Value(), false);
      forRange(pb, pl, c0, e, c1, [&](OpBuilder &fb, Location fl, Value ex) {
        Value s = memref::LoadOp::create(fb, fl, slotOf, ValueRange{row, ex});
        Value on = arith::CmpIOp::create(fb, fl, arith::CmpIPredicate::sge, s,
                                         cIdx(fb, fl, 0));
        auto ifOp = scf::IfOp::create(fb, fl, TypeRange{}, on, false);
        OpBuilder::InsertionGuard g(fb);
        fb.setInsertionPointToStart(ifOp.thenBlock());
        Value wt = memref::LoadOp::create(fb, fl, w, ValueRange{row, ex});
        rowUpdate(fb, fl, out, row, ys, s, d, wt, /*accumulate=*/true);
      });
    });
    for (Value buf : {slotOf, rowOf, xs, hs, ys})
      memref::DeallocOp::create(b, loc, buf);
    b.eraseOp(op);
    return success();
  }
};

} // namespace

void cpu::populateLowerMoeKernelPattern(RewritePatternSet &patterns) {
  patterns.add<LowerMoeKernel>(patterns.getContext());
}
