//===- TfmToLinalgUtils.cpp - tfm-to-linalg helpers -----------------------===//

#include "TfmToLinalgUtils.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::linalg_lowering;
using utils::IteratorType;

RankedTensorType linalg_lowering::tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

Value linalg_lowering::dimOf(OpBuilder &b, Location loc, Value v, int64_t i) {
  return tensor::DimOp::create(b, loc, v, i);
}

Value linalg_lowering::emptyTensor(
    OpBuilder &b, Location loc, RankedTensorType type,
    ArrayRef<std::pair<Value, int64_t>> sources) {
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      dyn.push_back(dimOf(b, loc, sources[i].first, sources[i].second));
  return tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType(),
                                 dyn);
}

Value linalg_lowering::emptyLike(OpBuilder &b, Location loc, Value like) {
  auto t = tensorType(like);
  SmallVector<std::pair<Value, int64_t>> src;
  for (int64_t i = 0; i < t.getRank(); ++i)
    src.push_back({like, i});
  return emptyTensor(b, loc, t, src);
}

Value linalg_lowering::constF(OpBuilder &b, Location loc, Type t, double v) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, v));
}
Value linalg_lowering::constIdx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

arith::FastMathFlagsAttr linalg_lowering::reassoc(MLIRContext *ctx) {
  return arith::FastMathFlagsAttr::get(ctx, arith::FastMathFlags::reassoc |
                                                arith::FastMathFlags::contract);
}

Value linalg_lowering::generic(OpBuilder &b, Location loc, ValueRange inputs,
                               ArrayRef<AffineMap> inputMaps, Value init,
                               BodyFn body) {
  int64_t rank = tensorType(init).getRank();
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(b.getMultiDimIdentityMap(rank));
  SmallVector<IteratorType> iters(rank, IteratorType::parallel);
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, args));
      });
  return op.getResult(0);
}

Value linalg_lowering::elementwise(OpBuilder &b, Location loc,
                                   ValueRange inputs, BodyFn body) {
  int64_t rank = tensorType(inputs[0]).getRank();
  SmallVector<AffineMap> maps(inputs.size(), b.getMultiDimIdentityMap(rank));
  return generic(b, loc, inputs, maps, emptyLike(b, loc, inputs[0]), body);
}

Value linalg_lowering::reduce(
    OpBuilder &b, Location loc, Value input, int64_t axis, double initValue,
    ValueRange extra, ArrayRef<AffineMap> extraMaps,
    function_ref<Value(OpBuilder &, Location, Value acc, ValueRange args)>
        combine,
    Type accType) {
  auto t = tensorType(input);
  if (!accType)
    accType = t.getElementType();
  int64_t rank = t.getRank();
  SmallVector<int64_t> shape;
  SmallVector<std::pair<Value, int64_t>> src;
  SmallVector<AffineExpr> outExprs;
  for (int64_t i = 0; i < rank; ++i) {
    if (i == axis)
      continue;
    shape.push_back(t.getDimSize(i));
    src.push_back({input, i});
    outExprs.push_back(b.getAffineDimExpr(i));
  }
  auto outType = RankedTensorType::get(shape, accType);
  Value empty = emptyTensor(b, loc, outType, src);
  Value filled = linalg::FillOp::create(
                     b, loc, ValueRange{constF(b, loc, accType, initValue)},
                     ValueRange{empty})
                     .getResult(0);
  SmallVector<AffineMap> maps{b.getMultiDimIdentityMap(rank)};
  maps.append(extraMaps.begin(), extraMaps.end());
  maps.push_back(AffineMap::get(rank, 0, outExprs, b.getContext()));
  SmallVector<IteratorType> iters(rank, IteratorType::parallel);
  iters[axis] = IteratorType::reduction;
  SmallVector<Value> ins{input};
  ins.append(extra.begin(), extra.end());
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{outType}, ins, ValueRange{filled}, maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(
            nb, nloc, combine(nb, nloc, args.back(), args.drop_back()));
      });
  return op.getResult(0);
}

Value linalg_lowering::toF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}
Value linalg_lowering::fromF32(OpBuilder &b, Location loc, Value v, Type elt) {
  if (elt.isF32())
    return v;
  return arith::TruncFOp::create(b, loc, elt, v);
}

AffineMap linalg_lowering::dropDimMap(OpBuilder &b, int64_t rank,
                                      int64_t axis) {
  SmallVector<AffineExpr> exprs;
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis)
      exprs.push_back(b.getAffineDimExpr(i));
  return AffineMap::get(rank, 0, exprs, b.getContext());
}

Value linalg_lowering::transposeTensor(OpBuilder &b, Location loc, Value x,
                                       ArrayRef<int64_t> perm) {
  auto t = tensorType(x);
  SmallVector<int64_t> shape;
  SmallVector<std::pair<Value, int64_t>> src;
  for (int64_t p : perm) {
    shape.push_back(t.getDimSize(p));
    src.push_back({x, p});
  }
  Value init = emptyTensor(
      b, loc, RankedTensorType::get(shape, t.getElementType()), src);
  return linalg::TransposeOp::create(b, loc, x, init, perm).getResult()[0];
}

/// The reassociation of [..., C] (rank `rank` >= 2) into [rows, C].
static SmallVector<ReassociationIndices> rowsAndColumns(int64_t rank) {
  SmallVector<ReassociationIndices> re(2);
  for (int64_t i = 0; i < rank - 1; ++i)
    re[0].push_back(i);
  re[1].push_back(rank - 1);
  return re;
}

/// `x` [..., C] as the matrix [rows, C] (`x` itself when 2-D).
Value linalg_lowering::asMatrix(OpBuilder &b, Location loc, Value x) {
  int64_t rank = tensorType(x).getRank();
  if (rank == 2)
    return x;
  return tensor::CollapseShapeOp::create(b, loc, x, rowsAndColumns(rank));
}

/// The matrix `m` [rows, n] in the leading dimensions of `like` [..., C]:
/// [..., n] (`m` itself when `like` is 2-D).
Value linalg_lowering::withLeadingDimsOf(OpBuilder &b, Location loc, Value m,
                                         Value like, int64_t n) {
  auto lt = tensorType(like);
  int64_t rank = lt.getRank();
  if (rank == 2)
    return m;
  SmallVector<int64_t> shape(lt.getShape());
  shape.back() = n;
  SmallVector<OpFoldResult> outShape;
  for (int64_t i = 0; i < rank - 1; ++i)
    outShape.push_back(lt.isDynamicDim(i) ? OpFoldResult(dimOf(b, loc, like, i))
                                          : b.getIndexAttr(lt.getDimSize(i)));
  outShape.push_back(b.getIndexAttr(n));
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(shape, lt.getElementType()), m,
      rowsAndColumns(rank), outShape);
}

Value linalg_lowering::packedWeight(OpBuilder &b, Location loc, Value w,
                                    Value converted, int64_t kPanel) {
  if (auto up = w.getDefiningOp<UnpackWeightOp>())
    return up.getPacked();
  auto wt = tensorType(converted);
  int64_t rank = wt.getRank();
  int64_t n = wt.getDimSize(rank - 2), k = wt.getDimSize(rank - 1);
  SmallVector<int64_t> shape(wt.getShape().drop_back(2));
  shape.append({(n + kPanel - 1) / kPanel, k, kPanel});
  Value init =
      tensor::EmptyOp::create(b, loc, shape, wt.getElementType(), ValueRange{});
  return generic(
      b, loc, ValueRange{}, {}, init,
      [&](OpBuilder &nb, Location l, ValueRange) {
        // [..., p, kk, c] reads row p * kPanel + c of [..., N, K].
        SmallVector<Value> idx;
        for (int64_t i = 0; i + 2 < rank; ++i)
          idx.push_back(linalg::IndexOp::create(nb, l, i));
        Value p = linalg::IndexOp::create(nb, l, rank - 2);
        Value kk = linalg::IndexOp::create(nb, l, rank - 1);
        Value c = linalg::IndexOp::create(nb, l, rank);
        Value row = arith::AddIOp::create(
            nb, l, arith::MulIOp::create(nb, l, p, constIdx(nb, l, kPanel)), c);
        Value inside = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt,
                                             row, constIdx(nb, l, n));
        idx.push_back(
            arith::MinUIOp::create(nb, l, row, constIdx(nb, l, n - 1)));
        idx.push_back(kk);
        Value v = tensor::ExtractOp::create(nb, l, converted, idx);
        return arith::SelectOp::create(nb, l, inside, v,
                                       constF(nb, l, wt.getElementType(), 0.0));
      });
}

//===----------------------------------------------------------------------===//
// Patterns

bool linalg_lowering::isFoldedIntoKernel(UnpackWeightOp op) {
  // Only as a linear's weight (not as its input or epilogue operand), or
  // an expert stack.
  return llvm::all_of(op->getUses(), [](OpOperand &use) {
    Operation *u = use.getOwner();
    if (auto m = dyn_cast<MoeExpertsOp>(u))
      return use.get() == m.getUpWeight() || use.get() == m.getGateWeight() ||
             use.get() == m.getDownWeight();
    return (isa<LinearOp>(u) && use.getOperandNumber() == 1) ||
           isa<PatchEmbedOp>(u);
  });
}

Value linalg_lowering::selectByIndex(OpBuilder &b, Location loc, Value idx,
                                     ArrayRef<double> values, Type elt) {
  Value r = constF(b, loc, elt, values.back());
  for (int64_t i = int64_t(values.size()) - 2; i >= 0; --i) {
    Value is = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, idx,
                                     constIdx(b, loc, i));
    r = arith::SelectOp::create(b, loc, is, constF(b, loc, elt, values[i]), r);
  }
  return r;
}

Value linalg_lowering::relativeBucketOf(OpBuilder &b, Location loc, Value rel,
                                        int64_t buckets, int64_t maxDistance,
                                        bool bidirectional) {
  using P = arith::CmpIPredicate;
  int64_t n = bidirectional ? buckets / 2 : buckets, exact = n / 2;
  Value zero = constIdx(b, loc, 0);
  // The distance: |rel| (bidirectional) or max(-rel, 0).
  Value neg = arith::SubIOp::create(b, loc, zero, rel);
  Value m = bidirectional ? arith::MaxSIOp::create(b, loc, rel, neg)
                          : arith::MaxSIOp::create(b, loc, neg, zero);
  // Logarithmic buckets: exact + the number of boundaries m has reached.
  Value large = constIdx(b, loc, exact);
  int64_t prev = exact;
  for (int64_t d = exact; d <= maxDistance; ++d) {
    int64_t bucket = relativeBucket(-d, buckets, maxDistance, bidirectional);
    for (; prev < bucket; ++prev) {
      Value reached =
          arith::CmpIOp::create(b, loc, P::sge, m, constIdx(b, loc, d));
      large = arith::AddIOp::create(
          b, loc, large,
          arith::IndexCastOp::create(
              b, loc, b.getIndexType(),
              arith::ExtUIOp::create(b, loc, b.getI64Type(), reached)));
    }
  }
  Value small =
      arith::CmpIOp::create(b, loc, P::slt, m, constIdx(b, loc, exact));
  Value r = arith::SelectOp::create(b, loc, small, m, large);
  if (bidirectional) {
    Value pos = arith::CmpIOp::create(b, loc, P::sgt, rel, zero);
    r = arith::SelectOp::create(
        b, loc, pos, arith::AddIOp::create(b, loc, r, constIdx(b, loc, n)), r);
  }
  return r;
}

Value linalg_lowering::indexToF32(OpBuilder &b, Location loc, Value i) {
  return arith::SIToFPOp::create(
      b, loc, b.getF32Type(),
      arith::IndexCastOp::create(b, loc, b.getI64Type(), i));
}

Value linalg_lowering::positionOf(OpBuilder &b, Location loc, Value positions,
                                  Value batch) {
  Value p = tensor::ExtractOp::create(b, loc, positions, ValueRange{batch});
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), p);
}
