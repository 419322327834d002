//===- CpuKernelBuilders.cpp - building blocks of the CPU kernels ---------===//

#include "CpuKernelBuilders.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::cpu;

void cpu::markKeepParallel(scf::ParallelOp par) {
  TfmDialect::KeepParallelAttrHelper(par.getContext())
      .setAttr(par, UnitAttr::get(par.getContext()));
}

SmallVector<Value> cpu::rowIndices(OpBuilder &b, Location loc, Value from,
                                   Value row) {
  int64_t rank = cast<MemRefType>(from.getType()).getRank();
  SmallVector<Value> idx(rank - 1);
  for (int64_t i = rank - 2; i > 0; --i) {
    Value d = dim(b, loc, from, i);
    idx[i] = arith::RemUIOp::create(b, loc, row, d);
    row = arith::DivUIOp::create(b, loc, row, d);
  }
  idx[0] = row;
  return idx;
}

Value cpu::selectByIndex(OpBuilder &b, Location loc, Value idx,
                         ArrayRef<double> values) {
  Value r = cF32(b, loc, values.back());
  for (int64_t i = int64_t(values.size()) - 2; i >= 0; --i) {
    Value is = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, idx,
                                     cIdx(b, loc, i));
    r = arith::SelectOp::create(b, loc, is, cF32(b, loc, values[i]), r);
  }
  return r;
}

void cpu::forRange(OpBuilder &b, Location loc, Value lb, Value ub, Value step,
                   function_ref<void(OpBuilder &, Location, Value)> body) {
  scf::ForOp::create(b, loc, lb, ub, step, ValueRange{},
                     [&](OpBuilder &fb, Location fl, Value i, ValueRange) {
                       body(fb, fl, i);
                       scf::YieldOp::create(fb, fl);
                     });
}

void cpu::forChunks(OpBuilder &b, Location loc, int64_t chunks,
                    function_ref<void(OpBuilder &, Location, Value)> body) {
  scf::ForOp::create(b, loc, cIdx(b, loc, 0), cIdx(b, loc, chunks),
                     cIdx(b, loc, 1), ValueRange{},
                     [&](OpBuilder &cb, Location cl, Value c, ValueRange) {
                       body(cb, cl, c);
                       scf::YieldOp::create(cb, cl);
                     });
}

Packing cpu::packingOf(Value buf) {
  return NormKernelOp::packingOf(
      cast<ShapedType>(buf.getType()).getElementType());
}

namespace {

/// Calls `body(col, mask)` for the chunks of 16 columns of a row of `k`:
/// whole chunks, then one masked chunk for the rest (null mask for whole
/// ones).
void forChunksOf16(
    OpBuilder &b, Location loc, int64_t k,
    function_ref<void(OpBuilder &, Location, Value, Value)> body) {
  int64_t whole = k / 16, rest = k % 16;
  forRange(b, loc, cIdx(b, loc, 0), cIdx(b, loc, whole * 16), cIdx(b, loc, 16),
           [&](OpBuilder &fb, Location fl, Value col) {
             body(fb, fl, col, Value());
           });
  if (rest) {
    auto maskT = VectorType::get({16}, b.getI1Type());
    Value mask = vector::CreateMaskOp::create(b, loc, maskT,
                                              ValueRange{cIdx(b, loc, rest)});
    body(b, loc, cIdx(b, loc, whole * 16), mask);
  }
}

} // namespace

void cpu::storePackedRow(OpBuilder &b, Location loc, RowChunk chunk, int64_t k,
                         Value out, Value row) {
  Packing packing = packingOf(out);
  SmallVector<Value> outRow = rowIndices(b, loc, out, row);
  auto at = [&](Value col) {
    SmallVector<Value> idx(outRow);
    idx.push_back(col);
    return idx;
  };
  Type f32 = b.getF32Type();
  auto f32V = VectorType::get({16}, f32);
  auto i1V = VectorType::get({16}, b.getI1Type());
  // The lanes of the chunk at `col` to store: past K up to the packed
  // row's padding too (the chunk gives 0 there); an int8 row's scale
  // follows (tfm/packed_layout.h).
  int64_t padded =
      tfm_packed_input_values(static_cast<tfm_packing>(packing), k);
  auto storeMask = [&](OpBuilder &sb, Location sl, Value col, Value mask) {
    if (!mask)
      return mask;
    Value n = arith::SubIOp::create(sb, sl, cIdx(sb, sl, padded), col);
    return Value(vector::CreateMaskOp::create(sb, sl, i1V, ValueRange{n}));
  };
  auto store = [&](OpBuilder &sb, Location sl, Value v, Value col, Value mask) {
    if (mask)
      vector::MaskedStoreOp::create(sb, sl, out, at(col), mask, v);
    else
      vector::StoreOp::create(sb, sl, v, out, at(col));
  };
  if (packing != Packing::Int8Quads) {
    forChunksOf16(b, loc, k,
                  [&](OpBuilder &fb, Location fl, Value col, Value mask) {
                    Value v = chunk(fb, fl, col, mask);
                    if (packing == Packing::Bf16Pairs)
                      v = arith::TruncFOp::create(
                          fb, fl, VectorType::get({16}, fb.getBF16Type()), v);
                    store(fb, fl, v, col, storeMask(fb, fl, col, mask));
                  });
    return;
  }
  Value zeroV = arith::ConstantOp::create(
      b, loc, f32V, DenseElementsAttr::get(f32V, b.getF32FloatAttr(0)));
  // max |x| over the row (masked lanes are 0).
  int64_t whole = k / 16;
  auto vmax = scf::ForOp::create(
      b, loc, cIdx(b, loc, 0), cIdx(b, loc, whole * 16), cIdx(b, loc, 16),
      ValueRange{zeroV},
      [&](OpBuilder &fb, Location fl, Value col, ValueRange acc) {
        Value v = chunk(fb, fl, col, Value());
        scf::YieldOp::create(
            fb, fl,
            ValueRange{arith::MaxNumFOp::create(
                fb, fl, acc[0], math::AbsFOp::create(fb, fl, v))});
      });
  Value mv = vmax.getResult(0);
  if (k % 16) {
    Value mask = vector::CreateMaskOp::create(b, loc, i1V,
                                              ValueRange{cIdx(b, loc, k % 16)});
    Value v = chunk(b, loc, cIdx(b, loc, whole * 16), mask);
    mv = arith::MaxNumFOp::create(b, loc, mv, math::AbsFOp::create(b, loc, v));
  }
  Value mx =
      vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXNUMF, mv);
  Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, mx,
                                         cF32(b, loc, 0.0));
  Value scale = arith::DivFOp::create(b, loc, mx, cF32(b, loc, 127.0));
  Value inv = arith::SelectOp::create(
      b, loc, positive, arith::DivFOp::create(b, loc, cF32(b, loc, 127.0), mx),
      cF32(b, loc, 0.0));
  auto i32V = VectorType::get({16}, b.getI32Type());
  forChunksOf16(
      b, loc, k, [&](OpBuilder &fb, Location fl, Value col, Value mask) {
        auto splat = [&](Value s) {
          return vector::BroadcastOp::create(fb, fl, f32V, s);
        };
        // round(x / scale) + 128, clamped to 1..255 (|x| <= max gives
        // -127..127; the clamp only guards rounding).
        Value q = math::RoundEvenOp::create(
            fb, fl,
            arith::MulFOp::create(fb, fl, chunk(fb, fl, col, mask),
                                  splat(inv)));
        q = arith::MinNumFOp::create(fb, fl, q, splat(cF32(fb, fl, 127.0)));
        q = arith::MaxNumFOp::create(fb, fl, q, splat(cF32(fb, fl, -127.0)));
        Value u = arith::AddIOp::create(
            fb, fl, arith::FPToSIOp::create(fb, fl, i32V, q),
            vector::BroadcastOp::create(
                fb, fl, i32V, arith::ConstantIntOp::create(fb, fl, 128, 32)));
        Value bytes = arith::TruncIOp::create(
            fb, fl, VectorType::get({16}, fb.getI8Type()), u);
        store(fb, fl, bytes, col, storeMask(fb, fl, col, mask));
      });
  Value bits = vector::BitCastOp::create(
      b, loc, VectorType::get({4}, b.getI8Type()),
      vector::BroadcastOp::create(b, loc, VectorType::get({1}, f32), scale));
  vector::StoreOp::create(b, loc, bits, out, at(cIdx(b, loc, padded)));
}
