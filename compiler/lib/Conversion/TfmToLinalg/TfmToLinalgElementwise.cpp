//===- TfmToLinalgElementwise.cpp - elementwise tfm ops to linalg ---------===//
//
// Arithmetic, activations, positional encodings, RoPE and masks become
// all-parallel linalg.generic ops; norms, softmax and mean pooling add
// reductions that accumulate in f32 whatever the element type.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "TfmToLinalgUtils.h"

#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::linalg_lowering;

namespace {

template <typename OpTy, typename Fn>
struct LowerBinary : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  using OpAdaptor = typename OpConversionPattern<OpTy>::OpAdaptor;
  LogicalResult matchAndRewrite(OpTy op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    b.replaceOp(op, elementwise(b, op.getLoc(),
                                ValueRange{adaptor.getLhs(), adaptor.getRhs()},
                                [](OpBuilder &nb, Location l, ValueRange a) {
                                  return Fn::build(nb, l, a[0], a[1]);
                                }));
    return success();
  }
};
struct AddFn {
  static Value build(OpBuilder &b, Location l, Value x, Value y) {
    return arith::AddFOp::create(b, l, x, y);
  }
};
struct MulFn {
  static Value build(OpBuilder &b, Location l, Value x, Value y) {
    return arith::MulFOp::create(b, l, x, y);
  }
};

struct LowerClip : OpConversionPattern<ClipOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ClipOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    double c = op.getLimit().convertToDouble();
    b.replaceOp(op, elementwise(b, op.getLoc(), ValueRange{adaptor.getInput()},
                                [&](OpBuilder &nb, Location l, ValueRange a) {
                                  Type t = a[0].getType();
                                  Value hi = arith::MinimumFOp::create(
                                      nb, l, a[0], constF(nb, l, t, c));
                                  return arith::MaximumFOp::create(
                                      nb, l, hi, constF(nb, l, t, -c));
                                }));
    return success();
  }
};

struct LowerScale : OpConversionPattern<ScaleOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ScaleOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    double f = op.getFactor().convertToDouble();
    b.replaceOp(op, elementwise(b, op.getLoc(), ValueRange{adaptor.getInput()},
                                [&](OpBuilder &nb, Location l, ValueRange a) {
                                  return arith::MulFOp::create(
                                      nb, l, a[0],
                                      constF(nb, l, a[0].getType(), f));
                                }));
    return success();
  }
};

struct LowerActivation : OpConversionPattern<ActivationOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ActivationOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Activation kind = op.getKind();
    b.replaceOp(op, elementwise(b, op.getLoc(), ValueRange{adaptor.getInput()},
                                [&](OpBuilder &nb, Location l, ValueRange a) {
                                  return buildActivation(nb, l, kind, a[0]);
                                }));
    return success();
  }
};

struct LowerPositions : OpConversionPattern<PositionsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PositionsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    int64_t d = tensorType(x).getDimSize(2);
    MLIRContext *ctx = b.getContext();
    Value positions = adaptor.getPositions();
    if (positions && op.getKind() == PositionKind::learned) {
      // Row t of sequence b reads table[positions[b] + t] (clamped: the
      // runtime checks that sequences fit the context).
      Value table = adaptor.getTable();
      int64_t rows = tensorType(table).getDimSize(0);
      b.replaceOp(op,
                  elementwise(b, loc, ValueRange{x},
                              [&](OpBuilder &nb, Location l, ValueRange a) {
                                Value bi = linalg::IndexOp::create(nb, l, 0);
                                Value t = linalg::IndexOp::create(nb, l, 1);
                                Value j = linalg::IndexOp::create(nb, l, 2);
                                Value p = arith::AddIOp::create(
                                    nb, l, t, positionOf(nb, l, positions, bi));
                                p = arith::MinSIOp::create(
                                    nb, l, p, constIdx(nb, l, rows - 1));
                                Value e = tensor::ExtractOp::create(
                                    nb, l, table, ValueRange{p, j});
                                return arith::AddFOp::create(nb, l, a[0], e);
                              }));
      return success();
    }
    if (op.getKind() == PositionKind::learned) {
      // table[0:T, :]
      Value table = adaptor.getTable();
      auto tt = tensorType(table);
      SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), b.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes{OpFoldResult(dimOf(b, loc, x, 1)),
                                      b.getIndexAttr(tt.getDimSize(1))};
      SmallVector<OpFoldResult> strides{b.getIndexAttr(1), b.getIndexAttr(1)};
      Value slice = tensor::ExtractSliceOp::create(b, loc, table, offsets,
                                                   sizes, strides);
      AffineMap tmap = AffineMap::get(
          3, 0, {getAffineDimExpr(1, ctx), getAffineDimExpr(2, ctx)}, ctx);
      b.replaceOp(op, generic(b, loc, ValueRange{x, slice},
                              {b.getMultiDimIdentityMap(3), tmap},
                              emptyLike(b, loc, x),
                              [](OpBuilder &nb, Location l, ValueRange a) {
                                return arith::AddFOp::create(nb, l, a[0], a[1]);
                              }));
      return success();
    }
    // PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(...), in f64.
    b.replaceOp(
        op, elementwise(
                b, loc, ValueRange{x},
                [&](OpBuilder &nb, Location l, ValueRange a) {
                  Type f64 = nb.getF64Type();
                  Value p = linalg::IndexOp::create(nb, l, 1);
                  if (positions)
                    p = arith::AddIOp::create(
                        nb, l, p,
                        positionOf(nb, l, positions,
                                   linalg::IndexOp::create(nb, l, 0)));
                  Value j = linalg::IndexOp::create(nb, l, 2);
                  Value two = constIdx(nb, l, 2);
                  Value odd = arith::RemUIOp::create(nb, l, j, two);
                  Value even = arith::SubIOp::create(nb, l, j, odd);
                  auto toF = [&](Value i) {
                    Value i64 =
                        arith::IndexCastOp::create(nb, l, nb.getI64Type(), i);
                    return arith::SIToFPOp::create(nb, l, f64, i64);
                  };
                  Value expo = arith::MulFOp::create(
                      nb, l, toF(even),
                      constF(nb, l, f64, -std::log(10000.0) / d));
                  Value angle = arith::MulFOp::create(
                      nb, l, toF(p), math::ExpOp::create(nb, l, expo));
                  Value s = math::SinOp::create(nb, l, angle);
                  Value c = math::CosOp::create(nb, l, angle);
                  Value isOdd = arith::CmpIOp::create(
                      nb, l, arith::CmpIPredicate::ne, odd, constIdx(nb, l, 0));
                  Value pe = arith::SelectOp::create(nb, l, isOdd, c, s);
                  pe = arith::TruncFOp::create(nb, l, a[0].getType(), pe);
                  return arith::AddFOp::create(nb, l, a[0], pe);
                }));
    return success();
  }
};

struct LowerNorm : OpConversionPattern<NormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(NormOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Value x = adaptor.getInput();
    auto t = tensorType(x);
    int64_t rank = t.getRank(), axis = rank - 1;
    double d = double(t.getDimSize(axis));
    double eps = op.getEps().convertToDouble();
    double offset = op.getOffset().convertToDouble();
    Type elt = t.getElementType();
    auto fm = reassoc(ctx);
    AffineMap id = b.getMultiDimIdentityMap(rank);
    AffineMap rowMap = dropDimMap(b, rank, axis);
    AffineMap vecMap = AffineMap::get(rank, 0, {b.getAffineDimExpr(axis)}, ctx);
    bool layer = op.getKind() == NormKind::layernorm;
    // Statistics accumulate in f32 whatever the element type.
    Type f32 = b.getF32Type();
    Value mean;
    if (layer)
      mean = reduce(
          b, loc, x, axis, 0.0, {}, {},
          [&](OpBuilder &nb, Location l, Value acc, ValueRange a) {
            return arith::AddFOp::create(nb, l, acc, toF32(nb, l, a[0]), fm);
          },
          f32);
    // Sum of squares (of x - mean for layernorm).
    Value sq = reduce(
        b, loc, x, axis, 0.0, layer ? ValueRange{mean} : ValueRange{},
        layer ? ArrayRef<AffineMap>{rowMap} : ArrayRef<AffineMap>{},
        [&](OpBuilder &nb, Location l, Value acc, ValueRange a) {
          Value v = toF32(nb, l, a[0]);
          if (layer)
            v = arith::SubFOp::create(
                nb, l, v,
                arith::MulFOp::create(nb, l, a[1],
                                      constF(nb, l, f32, 1.0 / d)));
          return arith::AddFOp::create(
              nb, l, acc, arith::MulFOp::create(nb, l, v, v, fm), fm);
        },
        f32);
    SmallVector<Value> ins{x, sq, adaptor.getWeight()};
    SmallVector<AffineMap> maps{id, rowMap, vecMap};
    if (layer) {
      ins.push_back(mean);
      maps.push_back(rowMap);
      ins.push_back(adaptor.getBias());
      maps.push_back(vecMap);
    }
    b.replaceOp(
        op, generic(b, loc, ins, maps, emptyLike(b, loc, x),
                    [&](OpBuilder &nb, Location l, ValueRange a) {
                      Value v = toF32(nb, l, a[0]);
                      if (layer)
                        v = arith::SubFOp::create(
                            nb, l, v,
                            arith::MulFOp::create(nb, l, a[3],
                                                  constF(nb, l, f32, 1.0 / d)));
                      Value var = arith::AddFOp::create(
                          nb, l,
                          arith::MulFOp::create(nb, l, a[1],
                                                constF(nb, l, f32, 1.0 / d)),
                          constF(nb, l, f32, eps));
                      Value r = math::RsqrtOp::create(nb, l, var);
                      Value w = toF32(nb, l, a[2]);
                      if (offset != 0.0)
                        w = arith::AddFOp::create(nb, l, w,
                                                  constF(nb, l, f32, offset));
                      v = arith::MulFOp::create(
                          nb, l, arith::MulFOp::create(nb, l, v, r), w);
                      if (layer)
                        v = arith::AddFOp::create(nb, l, v, toF32(nb, l, a[4]));
                      return fromF32(nb, l, v, elt);
                    }));
    return success();
  }
};

struct LowerSoftmax : OpConversionPattern<SoftmaxOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SoftmaxOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Value x = adaptor.getInput();
    auto t = tensorType(x);
    int64_t rank = t.getRank(), axis = op.getAxisAttr().getInt();
    Type elt = t.getElementType();
    AffineMap id = b.getMultiDimIdentityMap(rank);
    AffineMap rowMap = dropDimMap(b, rank, axis);
    Value ninf = constF(b, loc, elt, -INFINITY);
    Value max = reduce(b, loc, x, axis, -INFINITY, {}, {},
                       [&](OpBuilder &nb, Location l, Value acc, ValueRange a) {
                         return arith::MaximumFOp::create(nb, l, acc, a[0]);
                       });
    // Attention sinks: head h's logit (dimension 1 of the scores) joins
    // every row of the head, in the max and in the sum.
    Value sinks = adaptor.getSinks();
    AffineMap rowId = b.getMultiDimIdentityMap(rank - 1);
    AffineMap headOfRow =
        AffineMap::get(rank - 1, 0, b.getAffineDimExpr(1), b.getContext());
    if (sinks)
      max = generic(b, loc, ValueRange{max, sinks}, {rowId, headOfRow},
                    emptyLike(b, loc, max),
                    [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                      return arith::MaximumFOp::create(nb, l, a[0], a[1]);
                    });
    // e = exp(x - max), or 0 for a row that is all -inf.
    Value e =
        generic(b, loc, ValueRange{x, max}, {id, rowMap}, emptyLike(b, loc, x),
                [&](OpBuilder &nb, Location l, ValueRange a) {
                  Value allMasked = arith::CmpFOp::create(
                      nb, l, arith::CmpFPredicate::OEQ, a[1], ninf);
                  Value ex = math::ExpOp::create(
                      nb, l, arith::SubFOp::create(nb, l, a[0], a[1]));
                  return arith::SelectOp::create(nb, l, allMasked,
                                                 constF(nb, l, elt, 0.0), ex);
                });
    auto fm = reassoc(ctx);
    Value sum = reduce(
        b, loc, e, axis, 0.0, {}, {},
        [&](OpBuilder &nb, Location l, Value acc, ValueRange a) {
          return arith::AddFOp::create(nb, l, acc, toF32(nb, l, a[0]), fm);
        },
        b.getF32Type());
    if (sinks)
      sum = generic(b, loc, ValueRange{sum, sinks, max},
                    {rowId, headOfRow, rowId}, emptyLike(b, loc, sum),
                    [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                      Value d = arith::SubFOp::create(nb, l, toF32(nb, l, a[1]),
                                                      toF32(nb, l, a[2]));
                      return arith::AddFOp::create(
                          nb, l, a[0], math::ExpOp::create(nb, l, d));
                    });
    b.replaceOp(
        op,
        generic(b, loc, ValueRange{e, sum}, {id, rowMap}, emptyLike(b, loc, x),
                [&](OpBuilder &nb, Location l, ValueRange a) {
                  Value zero = arith::CmpFOp::create(
                      nb, l, arith::CmpFPredicate::OEQ, a[1],
                      constF(nb, l, a[1].getType(), 0.0));
                  Value q = fromF32(
                      nb, l,
                      arith::DivFOp::create(nb, l, toF32(nb, l, a[0]), a[1]),
                      elt);
                  return arith::SelectOp::create(nb, l, zero,
                                                 constF(nb, l, elt, 0.0), q);
                }));
    return success();
  }
};

struct LowerMask : OpConversionPattern<MaskOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MaskOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Value x = adaptor.getInput();
    Type elt = tensorType(x).getElementType();
    Value tq = dimOf(b, loc, x, 2), tk = dimOf(b, loc, x, 3);
    Value offset = arith::SubIOp::create(b, loc, tk, tq);
    MaskKind kind = op.getKind();
    int64_t window = op.getWindowAttr() ? op.getWindowAttr().getInt() : 0;
    SmallVector<Value> ins{x};
    SmallVector<AffineMap> maps{b.getMultiDimIdentityMap(4)};
    if (Value len = adaptor.getLengths()) {
      ins.push_back(len);
      maps.push_back(AffineMap::get(4, 0, {getAffineDimExpr(0, ctx)}, ctx));
    }
    b.replaceOp(
        op,
        generic(b, loc, ins, maps, emptyLike(b, loc, x),
                [&](OpBuilder &nb, Location l, ValueRange a) {
                  Value i = linalg::IndexOp::create(nb, l, 2);
                  Value j = linalg::IndexOp::create(nb, l, 3);
                  Value pos = arith::AddIOp::create(nb, l, i, offset);
                  Value masked =
                      arith::ConstantIntOp::create(nb, l, nb.getI1Type(), 0);
                  if (kind != MaskKind::none)
                    masked = arith::CmpIOp::create(
                        nb, l, arith::CmpIPredicate::sgt, j, pos);
                  if (kind == MaskKind::sliding) {
                    // keys j <= pos - window are masked.
                    Value lo = arith::SubIOp::create(nb, l, pos,
                                                     constIdx(nb, l, window));
                    masked = arith::OrIOp::create(
                        nb, l, masked,
                        arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sle,
                                              j, lo));
                  }
                  if (a.size() == 3) {
                    Value len = arith::IndexCastOp::create(
                        nb, l, nb.getIndexType(), a[1]);
                    masked = arith::OrIOp::create(
                        nb, l, masked,
                        arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sge,
                                              j, len));
                  }
                  return arith::SelectOp::create(
                      nb, l, masked, constF(nb, l, elt, -INFINITY), a[0]);
                }));
    return success();
  }
};

struct LowerRope : OpConversionPattern<RopeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RopeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    Value positions = adaptor.getPositions();
    ArrayRef<double> invFreq = op.getInvFreq();
    int64_t n = int64_t(invFreq.size()), r = 2 * n;
    bool half = op.getStyle() == RopeStyle::half;
    std::optional<double> scale;
    if (auto attr = op.getScaleAttr())
      scale = attr.getValueAsDouble();
    Type f64 = b.getF64Type();
    // A geometric table (no scaling, or linear) is exp(i * log(ratio)) times
    // the first entry; any other (llama3) is read by a select chain.
    double ratio = n > 1 && invFreq[0] > 0.0 ? invFreq[1] / invFreq[0] : 1.0;
    bool geometric = invFreq[0] > 0.0;
    for (int64_t i = 0; i < n && geometric; ++i)
      geometric = std::abs(invFreq[0] * std::pow(ratio, double(i)) -
                           invFreq[i]) <= 1e-12 * invFreq[i];
    b.replaceOp(
        op,
        elementwise(
            b, loc, ValueRange{x},
            [&](OpBuilder &nb, Location l, ValueRange a) {
              Value bi = linalg::IndexOp::create(nb, l, 0);
              Value hi = linalg::IndexOp::create(nb, l, 1);
              Value t = linalg::IndexOp::create(nb, l, 2);
              Value j = linalg::IndexOp::create(nb, l, 3);
              // Dimensions r.. pass through; they read a valid pair.
              Value rotated = arith::CmpIOp::create(
                  nb, l, arith::CmpIPredicate::slt, j, constIdx(nb, l, r));
              Value jr =
                  arith::MinUIOp::create(nb, l, j, constIdx(nb, l, r - 1));
              Value pair, partner, second;
              if (half) {
                Value hd = constIdx(nb, l, n);
                second = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sge,
                                               jr, hd);
                Value lo = arith::SubIOp::create(nb, l, jr, hd);
                pair = arith::SelectOp::create(nb, l, second, lo, jr);
                partner = arith::SelectOp::create(
                    nb, l, second, lo, arith::AddIOp::create(nb, l, jr, hd));
              } else {
                Value two = constIdx(nb, l, 2);
                Value odd = arith::RemUIOp::create(nb, l, jr, two);
                second = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ne,
                                               odd, constIdx(nb, l, 0));
                pair = arith::DivUIOp::create(nb, l, jr, two);
                Value even = arith::SubIOp::create(nb, l, jr, odd);
                partner = arith::SelectOp::create(
                    nb, l, second, even,
                    arith::AddIOp::create(nb, l, jr, constIdx(nb, l, 1)));
              }
              // angle = t * inv_freq[pair]
              Value freq;
              if (geometric) {
                Value pf = arith::SIToFPOp::create(
                    nb, l, f64,
                    arith::IndexCastOp::create(nb, l, nb.getI64Type(), pair));
                freq = arith::MulFOp::create(
                    nb, l, constF(nb, l, f64, invFreq[0]),
                    math::ExpOp::create(
                        nb, l,
                        arith::MulFOp::create(
                            nb, l, pf, constF(nb, l, f64, std::log(ratio)))));
              } else {
                freq = selectByIndex(nb, l, pair, invFreq, f64);
              }
              Value p = t;
              if (positions)
                p = arith::AddIOp::create(nb, l, t,
                                          positionOf(nb, l, positions, bi));
              Value tf = arith::SIToFPOp::create(
                  nb, l, f64,
                  arith::IndexCastOp::create(nb, l, nb.getI64Type(), p));
              Value angle = arith::MulFOp::create(nb, l, tf, freq);
              Type elt = a[0].getType();
              Value c64 = math::CosOp::create(nb, l, angle);
              Value s64 = math::SinOp::create(nb, l, angle);
              if (scale) {
                Value k = constF(nb, l, f64, *scale);
                c64 = arith::MulFOp::create(nb, l, c64, k);
                s64 = arith::MulFOp::create(nb, l, s64, k);
              }
              Value c = arith::TruncFOp::create(nb, l, elt, c64);
              Value s = arith::TruncFOp::create(nb, l, elt, s64);
              Value other = tensor::ExtractOp::create(
                  nb, l, x, ValueRange{bi, hi, t, partner});
              // first of a pair: x c - y s; second: x c + y s.
              Value ys = arith::MulFOp::create(nb, l, other, s);
              Value sys = arith::SelectOp::create(
                  nb, l, second, ys, arith::NegFOp::create(nb, l, ys));
              Value rot = arith::AddFOp::create(
                  nb, l, arith::MulFOp::create(nb, l, a[0], c), sys);
              return arith::SelectOp::create(nb, l, rotated, rot, a[0]);
            }));
    return success();
  }
};

struct LowerSoftcap : OpConversionPattern<SoftcapOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SoftcapOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    double cap = op.getCap().convertToDouble();
    b.replaceOp(op, elementwise(b, op.getLoc(), ValueRange{adaptor.getInput()},
                                [&](OpBuilder &nb, Location l, ValueRange a) {
                                  Type f32 = nb.getF32Type();
                                  Value v = arith::MulFOp::create(
                                      nb, l, toF32(nb, l, a[0]),
                                      constF(nb, l, f32, 1.0 / cap));
                                  v = arith::MulFOp::create(
                                      nb, l, math::TanhOp::create(nb, l, v),
                                      constF(nb, l, f32, cap));
                                  return fromF32(nb, l, v, a[0].getType());
                                }));
    return success();
  }
};

/// The relative position j - (i + S - T) of the current score [b, h, i, j]
/// of `scores` (inside a linalg.generic over it).
Value scoreDistance(OpBuilder &b, Location l, Value offset) {
  Value i = linalg::IndexOp::create(b, l, 2);
  Value j = linalg::IndexOp::create(b, l, 3);
  return arith::SubIOp::create(b, l, j, arith::AddIOp::create(b, l, i, offset));
}

struct LowerAlibi : OpConversionPattern<AlibiOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AlibiOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    ArrayRef<double> slopes = op.getSlopes();
    Value offset =
        arith::SubIOp::create(b, loc, dimOf(b, loc, x, 3), dimOf(b, loc, x, 2));
    b.replaceOp(op, elementwise(b, loc, ValueRange{x},
                                [&](OpBuilder &nb, Location l, ValueRange a) {
                                  Value h = linalg::IndexOp::create(nb, l, 1);
                                  Value slope = selectByIndex(nb, l, h, slopes,
                                                              nb.getF32Type());
                                  Value dist = indexToF32(
                                      nb, l, scoreDistance(nb, l, offset));
                                  Value v = math::FmaOp::create(
                                      nb, l, slope, dist, toF32(nb, l, a[0]));
                                  return fromF32(nb, l, v, a[0].getType());
                                }));
    return success();
  }
};

struct LowerRelativeBias : OpConversionPattern<RelativeBiasOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RelativeBiasOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput(), table = adaptor.getTable();
    int64_t buckets = tensorType(table).getDimSize(0);
    int64_t m = op.getMaxDistance();
    bool bidirectional = op.getBidirectional();
    Value offset =
        arith::SubIOp::create(b, loc, dimOf(b, loc, x, 3), dimOf(b, loc, x, 2));
    b.replaceOp(op, elementwise(b, loc, ValueRange{x},
                                [&](OpBuilder &nb, Location l, ValueRange a) {
                                  Value h = linalg::IndexOp::create(nb, l, 1);
                                  Value bucket = relativeBucketOf(
                                      nb, l, scoreDistance(nb, l, offset),
                                      buckets, m, bidirectional);
                                  Value bias = tensor::ExtractOp::create(
                                      nb, l, table, ValueRange{bucket, h});
                                  return arith::AddFOp::create(nb, l, a[0],
                                                               bias);
                                }));
    return success();
  }
};

struct LowerPool : OpConversionPattern<PoolOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PoolOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Value x = adaptor.getInput();
    auto xt = tensorType(x);
    Type elt = xt.getElementType();
    if (op.getKind() == PoolKind::cls) {
      SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), b.getIndexAttr(0),
                                        b.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes{
          xt.isDynamicDim(0) ? OpFoldResult(dimOf(b, loc, x, 0))
                             : b.getIndexAttr(xt.getDimSize(0)),
          b.getIndexAttr(1), b.getIndexAttr(xt.getDimSize(2))};
      SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
      b.replaceOp(op, tensor::ExtractSliceOp::create(b, loc, op.getType(), x,
                                                     offsets, sizes, strides));
      return success();
    }
    Value lengths = adaptor.getLengths();
    Value tlen = dimOf(b, loc, x, 1);
    SmallVector<Value> extra;
    SmallVector<AffineMap> extraMaps;
    if (lengths) {
      extra.push_back(lengths);
      extraMaps.push_back(
          AffineMap::get(3, 0, {getAffineDimExpr(0, ctx)}, ctx));
    }
    auto fm = reassoc(ctx);
    // The sum over tokens accumulates in f32 whatever the element type.
    Type f32 = b.getF32Type();
    Value sum = reduce(
        b, loc, x, 1, 0.0, extra, extraMaps,
        [&](OpBuilder &nb, Location l, Value acc, ValueRange a) {
          Value v = toF32(nb, l, a[0]);
          if (a.size() > 1) {
            Value t = linalg::IndexOp::create(nb, l, 1);
            Value len =
                arith::IndexCastOp::create(nb, l, nb.getIndexType(), a[1]);
            Value in =
                arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt, t, len);
            v = arith::SelectOp::create(nb, l, in, v, constF(nb, l, f32, 0.0));
          }
          return arith::AddFOp::create(nb, l, acc, v, fm);
        },
        f32);
    SmallVector<Value> ins{sum};
    SmallVector<AffineMap> maps{b.getMultiDimIdentityMap(2)};
    if (lengths) {
      ins.push_back(lengths);
      maps.push_back(AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx));
    }
    Value init = emptyTensor(
        b, loc, RankedTensorType::get(tensorType(sum).getShape(), elt),
        {{sum, 0}, {sum, 1}});
    b.replaceOp(
        op,
        generic(
            b, loc, ins, maps, init,
            [&](OpBuilder &nb, Location l, ValueRange a) {
              Value n;
              if (a.size() > 2) {
                Value len = arith::MaxSIOp::create(
                    nb, l, a[1],
                    arith::ConstantIntOp::create(nb, l, a[1].getType(), 1));
                n = arith::SIToFPOp::create(nb, l, f32, len);
              } else {
                n = arith::SIToFPOp::create(
                    nb, l, f32,
                    arith::IndexCastOp::create(nb, l, nb.getI64Type(), tlen));
              }
              return fromF32(nb, l, arith::DivFOp::create(nb, l, a[0], n), elt);
            }));
    return success();
  }
};

} // namespace

void mlir::tfm::populateTfmElementwiseToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerBinary<AddOp, AddFn>, LowerBinary<MulOp, MulFn>, LowerScale,
               LowerActivation, LowerPositions, LowerNorm, LowerSoftmax,
               LowerMask, LowerClip, LowerRope, LowerSoftcap, LowerAlibi,
               LowerRelativeBias, LowerPool>(patterns.getContext());
}
