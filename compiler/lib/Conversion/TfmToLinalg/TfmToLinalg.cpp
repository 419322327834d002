//===- TfmToLinalg.cpp - tfm ops to linalg on tensors ---------------------===//
//
// Every primitive and fused tfm op becomes linalg/tensor IR on tensors with
// dynamic batch and sequence sizes. The two compute-heavy ops, tfm.linear and
// tfm.attention, become the destination-style kernel ops tfm.linear_kernel
// and tfm.attention_kernel, which One-Shot Bufferize turns into their buffer
// form (BufferizableOpInterface) and tfm-lower-kernels into hand-blocked
// vector code.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include <cmath>

namespace mlir::tfm {
#define GEN_PASS_DEF_CONVERTTFMTOLINALG
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;
using utils::IteratorType;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

Value dimOf(OpBuilder &b, Location loc, Value v, int64_t i) {
  return tensor::DimOp::create(b, loc, v, i);
}

/// tensor.empty of `type`, taking each dynamic size from `sources[i]`
/// (a tensor value and a dimension of it) for result dimension i.
Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type,
                  ArrayRef<std::pair<Value, int64_t>> sources) {
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      dyn.push_back(dimOf(b, loc, sources[i].first, sources[i].second));
  return tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType(),
                                 dyn);
}

/// tensor.empty shaped like `like`.
Value emptyLike(OpBuilder &b, Location loc, Value like) {
  auto t = tensorType(like);
  SmallVector<std::pair<Value, int64_t>> src;
  for (int64_t i = 0; i < t.getRank(); ++i)
    src.push_back({like, i});
  return emptyTensor(b, loc, t, src);
}

Value constF(OpBuilder &b, Location loc, Type t, double v) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, v));
}
Value constIdx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

arith::FastMathFlagsAttr reassoc(MLIRContext *ctx) {
  return arith::FastMathFlagsAttr::get(ctx, arith::FastMathFlags::reassoc |
                                                arith::FastMathFlags::contract);
}

using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// An all-parallel linalg.generic writing a tensor shaped like `init`;
/// `inputs` are read through `maps` (the output map is the identity).
Value generic(OpBuilder &b, Location loc, ValueRange inputs,
              ArrayRef<AffineMap> inputMaps, Value init, BodyFn body) {
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

/// Elementwise over same-shaped inputs.
Value elementwise(OpBuilder &b, Location loc, ValueRange inputs, BodyFn body) {
  int64_t rank = tensorType(inputs[0]).getRank();
  SmallVector<AffineMap> maps(inputs.size(), b.getMultiDimIdentityMap(rank));
  return generic(b, loc, inputs, maps, emptyLike(b, loc, inputs[0]), body);
}

/// Reduces `input` over dimension `axis` with `combine`, starting at `init`.
/// `pre` maps each element before combining (args: element, extra inputs).
Value reduce(
    OpBuilder &b, Location loc, Value input, int64_t axis, double initValue,
    ValueRange extra, ArrayRef<AffineMap> extraMaps,
    function_ref<Value(OpBuilder &, Location, Value acc, ValueRange args)>
        combine,
    Type accType = {}) {
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

/// `v` widened to f32 (reductions of f16/bf16 tensors accumulate in f32).
Value toF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}
/// f32 `v` narrowed to `elt`.
Value fromF32(OpBuilder &b, Location loc, Value v, Type elt) {
  if (elt.isF32())
    return v;
  return arith::TruncFOp::create(b, loc, elt, v);
}

/// The map from the full iteration space of rank `rank` dropping `axis`.
AffineMap dropDimMap(OpBuilder &b, int64_t rank, int64_t axis) {
  SmallVector<AffineExpr> exprs;
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis)
      exprs.push_back(b.getAffineDimExpr(i));
  return AffineMap::get(rank, 0, exprs, b.getContext());
}

/// Emits x[..., K] times the weight (packed as [P, K, W] in `weightP`, with
/// `n` real columns) plus bias, through tfm.linear_kernel.
Value emitLinear(OpBuilder &b, Location loc, Value x, Value weightP, int64_t n,
                 Value bias) {
  auto xt = tensorType(x);
  int64_t rank = xt.getRank();
  Type elt = xt.getElementType();
  Value x2 = x;
  if (rank != 2) {
    SmallVector<ReassociationIndices> re(2);
    for (int64_t i = 0; i < rank - 1; ++i)
      re[0].push_back(i);
    re[1].push_back(rank - 1);
    x2 = tensor::CollapseShapeOp::create(b, loc, x, re);
  }
  auto x2t = tensorType(x2);
  auto outType = RankedTensorType::get({x2t.getDimSize(0), n}, elt);
  Value init = emptyTensor(b, loc, outType, {{x2, 0}, {x2, 1}});
  Value res = LinearKernelOp::create(b, loc, TypeRange{outType}, x2, weightP,
                                     bias, init)
                  .getResult()[0];
  if (rank == 2)
    return res;
  SmallVector<int64_t> shape(xt.getShape());
  shape.back() = n;
  SmallVector<OpFoldResult> outShape;
  for (int64_t i = 0; i < rank - 1; ++i)
    outShape.push_back(xt.isDynamicDim(i) ? OpFoldResult(dimOf(b, loc, x, i))
                                          : b.getIndexAttr(xt.getDimSize(i)));
  outShape.push_back(b.getIndexAttr(n));
  SmallVector<ReassociationIndices> re(2);
  for (int64_t i = 0; i < rank - 1; ++i)
    re[0].push_back(i);
  re[1].push_back(rank - 1);
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(shape, elt), res, re, outShape);
}

/// Panel width of weights packed here (a weight that does not come packed
/// from tfm-cpu-abi, as in hand-written IR).
constexpr int64_t kPanel = 32;

/// The packed [P, K, W] form of a [N, K] weight: the packed parameter when
/// the weight is tfm.unpack_weight of one (tfm-cpu-abi), else packed here.
Value packedWeight(OpBuilder &b, Location loc, Value w) {
  if (auto up = w.getDefiningOp<UnpackWeightOp>())
    return up.getPacked();
  auto wt = tensorType(w);
  int64_t n = wt.getDimSize(0), k = wt.getDimSize(1);
  auto pt = RankedTensorType::get({(n + kPanel - 1) / kPanel, k, kPanel},
                                  wt.getElementType());
  Value init = tensor::EmptyOp::create(b, loc, pt.getShape(),
                                       pt.getElementType(), ValueRange{});
  return generic(
      b, loc, ValueRange{}, {}, init,
      [&](OpBuilder &nb, Location l, ValueRange) {
        Value p = linalg::IndexOp::create(nb, l, 0);
        Value kk = linalg::IndexOp::create(nb, l, 1);
        Value c = linalg::IndexOp::create(nb, l, 2);
        Value row = arith::AddIOp::create(
            nb, l, arith::MulIOp::create(nb, l, p, constIdx(nb, l, kPanel)), c);
        Value inside = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt,
                                             row, constIdx(nb, l, n));
        Value safe = arith::MinUIOp::create(nb, l, row, constIdx(nb, l, n - 1));
        Value v = tensor::ExtractOp::create(nb, l, w, ValueRange{safe, kk});
        return arith::SelectOp::create(nb, l, inside, v,
                                       constF(nb, l, wt.getElementType(), 0.0));
      });
}

Value transposeTensor(OpBuilder &b, Location loc, Value x,
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

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

struct LowerLinear : OpRewritePattern<LinearOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value wp = packedWeight(b, loc, op.getWeight());
    int64_t n = tensorType(op.getWeight()).getDimSize(0);
    b.replaceOp(op, emitLinear(b, loc, op.getInput(), wp, n, op.getBias()));
    return success();
  }
};

struct LowerAttention : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto rt = op.getType();
    Value q = op.getQuery(), v = op.getValue();
    Value init = emptyTensor(b, loc, rt, {{q, 0}, {q, 1}, {q, 2}, {v, 3}});
    // The kernel streams K^T ([B, KV, D, S]): one transposed copy of K.
    Value kt = transposeTensor(b, loc, op.getKey(), {0, 1, 3, 2});
    auto kernel = AttentionKernelOp::create(
        b, loc, TypeRange{rt}, q, kt, v, op.getLengths(), init,
        op.getMaskAttr(), op.getWindowAttr(), op.getScaleAttr());
    b.replaceOp(op, kernel.getResult()[0]);
    return success();
  }
};

template <typename OpTy, typename Fn>
struct LowerBinary : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &b) const override {
    b.replaceOp(op, elementwise(b, op.getLoc(),
                                ValueRange{op.getLhs(), op.getRhs()},
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

struct LowerScale : OpRewritePattern<ScaleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScaleOp op, PatternRewriter &b) const override {
    double f = op.getFactor().convertToDouble();
    b.replaceOp(op, elementwise(b, op.getLoc(), ValueRange{op.getInput()},
                                [&](OpBuilder &nb, Location l, ValueRange a) {
                                  return arith::MulFOp::create(
                                      nb, l, a[0],
                                      constF(nb, l, a[0].getType(), f));
                                }));
    return success();
  }
};

/// The scalar activation function `kind` of `x`.
Value activation(OpBuilder &b, Location l, Activation kind, Value x) {
  Type t = x.getType();
  auto c = [&](double v) { return constF(b, l, t, v); };
  switch (kind) {
  case Activation::relu:
    return arith::MaximumFOp::create(b, l, x, c(0.0));
  case Activation::gelu:
  case Activation::geglu: {
    Value e =
        math::ErfOp::create(b, l, arith::MulFOp::create(b, l, x, c(M_SQRT1_2)));
    return arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, x, c(0.5)),
                                 arith::AddFOp::create(b, l, e, c(1.0)));
  }
  case Activation::gelu_tanh: {
    Value x3 =
        arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, x, x), x);
    Value inner = arith::MulFOp::create(
        b, l, c(0.7978845608028654),
        arith::AddFOp::create(b, l, x,
                              arith::MulFOp::create(b, l, x3, c(0.044715))));
    Value th = math::TanhOp::create(b, l, inner);
    return arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, x, c(0.5)),
                                 arith::AddFOp::create(b, l, th, c(1.0)));
  }
  case Activation::silu:
  case Activation::swiglu: {
    Value e = math::ExpOp::create(b, l, arith::NegFOp::create(b, l, x));
    return arith::DivFOp::create(b, l, x,
                                 arith::AddFOp::create(b, l, e, c(1.0)));
  }
  }
  return x;
}

struct LowerActivation : OpRewritePattern<ActivationOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ActivationOp op,
                                PatternRewriter &b) const override {
    Activation kind = op.getKind();
    b.replaceOp(op, elementwise(b, op.getLoc(), ValueRange{op.getInput()},
                                [&](OpBuilder &nb, Location l, ValueRange a) {
                                  return activation(nb, l, kind, a[0]);
                                }));
    return success();
  }
};

struct LowerEmbed : OpRewritePattern<EmbedOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(EmbedOp op, PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value tokens = op.getTokens(), table = op.getTable();
    auto rt = op.getType();
    Value init =
        emptyTensor(b, loc, rt, {{tokens, 0}, {tokens, 1}, {table, 1}});
    double scale = op.getScale() ? std::sqrt(double(rt.getDimSize(2))) : 1.0;
    MLIRContext *ctx = b.getContext();
    AffineMap tokMap = AffineMap::get(
        3, 0, {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx)}, ctx);
    b.replaceOp(op, generic(b, loc, ValueRange{tokens}, {tokMap}, init,
                            [&](OpBuilder &nb, Location l, ValueRange a) {
                              Value id = arith::IndexCastOp::create(
                                  nb, l, nb.getIndexType(), a[0]);
                              Value d = linalg::IndexOp::create(nb, l, 2);
                              Value v = tensor::ExtractOp::create(
                                  nb, l, table, ValueRange{id, d});
                              if (scale != 1.0)
                                v = arith::MulFOp::create(
                                    nb, l, v,
                                    constF(nb, l, v.getType(), scale));
                              return v;
                            }));
    return success();
  }
};

struct LowerPositions : OpRewritePattern<PositionsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PositionsOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    int64_t d = tensorType(x).getDimSize(2);
    MLIRContext *ctx = b.getContext();
    if (op.getKind() == PositionKind::learned) {
      // table[0:T, :]
      Value table = op.getTable();
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

struct LowerNorm : OpRewritePattern<NormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NormOp op, PatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Value x = op.getInput();
    auto t = tensorType(x);
    int64_t rank = t.getRank(), axis = rank - 1;
    double d = double(t.getDimSize(axis));
    double eps = op.getEps().convertToDouble();
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
    SmallVector<Value> ins{x, sq, op.getWeight()};
    SmallVector<AffineMap> maps{id, rowMap, vecMap};
    if (layer) {
      ins.push_back(mean);
      maps.push_back(rowMap);
      ins.push_back(op.getBias());
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
                      v = arith::MulFOp::create(
                          nb, l, arith::MulFOp::create(nb, l, v, r),
                          toF32(nb, l, a[2]));
                      if (layer)
                        v = arith::AddFOp::create(nb, l, v, toF32(nb, l, a[4]));
                      return fromF32(nb, l, v, elt);
                    }));
    return success();
  }
};

struct LowerSoftmax : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Value x = op.getInput();
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

struct LowerMask : OpRewritePattern<MaskOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MaskOp op, PatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Value x = op.getInput();
    Type elt = tensorType(x).getElementType();
    Value tq = dimOf(b, loc, x, 2), tk = dimOf(b, loc, x, 3);
    Value offset = arith::SubIOp::create(b, loc, tk, tq);
    MaskKind kind = op.getKind();
    int64_t window = op.getWindowAttr() ? op.getWindowAttr().getInt() : 0;
    SmallVector<Value> ins{x};
    SmallVector<AffineMap> maps{b.getMultiDimIdentityMap(4)};
    if (Value len = op.getLengths()) {
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

struct LowerTranspose : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &b) const override {
    b.replaceOp(op, transposeTensor(b, op.getLoc(), op.getInput(),
                                    op.getPermutation()));
    return success();
  }
};

/// A packed weight read other than by a linear (a tied embedding reads the
/// plain copy, so this is rare): unpack it.
struct LowerUnpackWeight : OpRewritePattern<UnpackWeightOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(UnpackWeightOp op,
                                PatternRewriter &b) const override {
    if (!op->use_empty() && llvm::all_of(op->getUsers(), [](Operation *u) {
          return isa<LinearOp, PatchEmbedOp>(u);
        }))
      return b.notifyMatchFailure(op, "consumed by the linear kernels");
    Location loc = op.getLoc();
    Value p = op.getPacked();
    int64_t w = op.getPacked().getType().getDimSize(2);
    Value init =
        tensor::EmptyOp::create(b, loc, op.getType().getShape(),
                                op.getType().getElementType(), ValueRange{});
    b.replaceOp(
        op, generic(b, loc, ValueRange{}, {}, init,
                    [&](OpBuilder &nb, Location l, ValueRange) {
                      Value n = linalg::IndexOp::create(nb, l, 0);
                      Value k = linalg::IndexOp::create(nb, l, 1);
                      Value cw = constIdx(nb, l, w);
                      return tensor::ExtractOp::create(
                          nb, l, p,
                          ValueRange{arith::DivUIOp::create(nb, l, n, cw), k,
                                     arith::RemUIOp::create(nb, l, n, cw)});
                    }));
    return success();
  }
};

struct LowerSplitHeads : OpRewritePattern<SplitHeadsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SplitHeadsOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    auto xt = tensorType(x);
    auto rt = op.getType();
    int64_t h = rt.getDimSize(1), d = rt.getDimSize(3);
    auto expType = RankedTensorType::get(
        {xt.getDimSize(0), xt.getDimSize(1), h, d}, xt.getElementType());
    auto ofr = [&](int64_t i) -> OpFoldResult {
      return xt.isDynamicDim(i) ? OpFoldResult(dimOf(b, loc, x, i))
                                : b.getIndexAttr(xt.getDimSize(i));
    };
    Value e = tensor::ExpandShapeOp::create(
        b, loc, expType, x, SmallVector<ReassociationIndices>{{0}, {1}, {2, 3}},
        SmallVector<OpFoldResult>{ofr(0), ofr(1), b.getIndexAttr(h),
                                  b.getIndexAttr(d)});
    b.replaceOp(op, transposeTensor(b, loc, e, {0, 2, 1, 3}));
    return success();
  }
};

struct LowerMergeHeads : OpRewritePattern<MergeHeadsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MergeHeadsOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value t = transposeTensor(b, loc, op.getInput(), {0, 2, 1, 3});
    b.replaceOp(op, tensor::CollapseShapeOp::create(
                        b, loc, op.getType(), t,
                        SmallVector<ReassociationIndices>{{0}, {1}, {2, 3}}));
    return success();
  }
};

struct LowerRope : OpRewritePattern<RopeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RopeOp op, PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    int64_t d = op.getType().getDimSize(3);
    double lnTheta = std::log(op.getTheta().convertToDouble());
    bool half = op.getStyle() == RopeStyle::half;
    b.replaceOp(
        op, elementwise(
                b, loc, ValueRange{x},
                [&](OpBuilder &nb, Location l, ValueRange a) {
                  Type f64 = nb.getF64Type();
                  Value bi = linalg::IndexOp::create(nb, l, 0);
                  Value hi = linalg::IndexOp::create(nb, l, 1);
                  Value t = linalg::IndexOp::create(nb, l, 2);
                  Value j = linalg::IndexOp::create(nb, l, 3);
                  Value pair, partner, second;
                  if (half) {
                    Value hd = constIdx(nb, l, d / 2);
                    second = arith::CmpIOp::create(
                        nb, l, arith::CmpIPredicate::sge, j, hd);
                    Value lo = arith::SubIOp::create(nb, l, j, hd);
                    pair = arith::SelectOp::create(nb, l, second, lo, j);
                    partner = arith::SelectOp::create(
                        nb, l, second, lo, arith::AddIOp::create(nb, l, j, hd));
                  } else {
                    Value two = constIdx(nb, l, 2);
                    Value odd = arith::RemUIOp::create(nb, l, j, two);
                    second =
                        arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ne,
                                              odd, constIdx(nb, l, 0));
                    pair = arith::DivUIOp::create(nb, l, j, two);
                    Value even = arith::SubIOp::create(nb, l, j, odd);
                    partner = arith::SelectOp::create(
                        nb, l, second, even,
                        arith::AddIOp::create(nb, l, j, constIdx(nb, l, 1)));
                  }
                  auto toF = [&](Value i) {
                    return arith::SIToFPOp::create(
                        nb, l, f64,
                        arith::IndexCastOp::create(nb, l, nb.getI64Type(), i));
                  };
                  // angle = t * theta^(-2 pair / d)
                  Value freq = math::ExpOp::create(
                      nb, l,
                      arith::MulFOp::create(
                          nb, l, toF(pair),
                          constF(nb, l, f64, -2.0 * lnTheta / d)));
                  Value angle = arith::MulFOp::create(nb, l, toF(t), freq);
                  Type elt = a[0].getType();
                  Value c = arith::TruncFOp::create(
                      nb, l, elt, math::CosOp::create(nb, l, angle));
                  Value s = arith::TruncFOp::create(
                      nb, l, elt, math::SinOp::create(nb, l, angle));
                  Value other = tensor::ExtractOp::create(
                      nb, l, x, ValueRange{bi, hi, t, partner});
                  // first of a pair: x c - y s; second: x c + y s.
                  Value ys = arith::MulFOp::create(nb, l, other, s);
                  Value sys = arith::SelectOp::create(
                      nb, l, second, ys, arith::NegFOp::create(nb, l, ys));
                  return arith::AddFOp::create(
                      nb, l, arith::MulFOp::create(nb, l, a[0], c), sys);
                }));
    return success();
  }
};

struct LowerRepeatKv : OpRewritePattern<RepeatKvOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RepeatKvOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    int64_t r = op.getRepeatsAttr().getInt();
    auto rt = op.getType();
    Value init = emptyTensor(b, loc, rt, {{x, 0}, {x, 1}, {x, 2}, {x, 3}});
    b.replaceOp(op,
                generic(b, loc, ValueRange{}, {}, init,
                        [&](OpBuilder &nb, Location l, ValueRange) {
                          SmallVector<Value> idx;
                          for (int i = 0; i < 4; ++i)
                            idx.push_back(linalg::IndexOp::create(nb, l, i));
                          idx[1] = arith::DivUIOp::create(nb, l, idx[1],
                                                          constIdx(nb, l, r));
                          return tensor::ExtractOp::create(nb, l, x, idx);
                        }));
    return success();
  }
};

struct LowerMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Value lhs = op.getLhs(), rhs = op.getRhs();
    auto rt = op.getType();
    int64_t rank = rt.getRank(), nb = rank - 2;
    bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
    SmallVector<std::pair<Value, int64_t>> src;
    for (int64_t i = 0; i < nb; ++i)
      src.push_back({lhs, i});
    src.push_back({lhs, tl ? rank - 1 : rank - 2});
    src.push_back({rhs, tr ? rank - 2 : rank - 1});
    Value init = emptyTensor(b, loc, rt, src);
    Value zero = constF(b, loc, rt.getElementType(), 0.0);
    Value filled =
        linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{init})
            .getResult(0);
    // Loops: batch..., m, n, k.
    auto dim = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
    SmallVector<AffineExpr> batch;
    for (int64_t i = 0; i < nb; ++i)
      batch.push_back(dim(i));
    AffineExpr m = dim(nb), n = dim(nb + 1), k = dim(nb + 2);
    auto mk = [&](AffineExpr a, AffineExpr c) {
      SmallVector<AffineExpr> e(batch);
      e.push_back(a);
      e.push_back(c);
      return AffineMap::get(rank + 1, 0, e, ctx);
    };
    SmallVector<AffineMap> maps{tl ? mk(k, m) : mk(m, k),
                                tr ? mk(n, k) : mk(k, n), mk(m, n)};
    SmallVector<IteratorType> iters(rank + 1, IteratorType::parallel);
    iters.back() = IteratorType::reduction;
    auto fm = reassoc(ctx);
    auto g = linalg::GenericOp::create(
        b, loc, TypeRange{rt}, ValueRange{lhs, rhs}, ValueRange{filled}, maps,
        iters, [&](OpBuilder &bb, Location l, ValueRange a) {
          Value p = arith::MulFOp::create(bb, l, a[0], a[1], fm);
          linalg::YieldOp::create(
              bb, l, Value(arith::AddFOp::create(bb, l, a[2], p, fm)));
        });
    b.replaceOp(op, g.getResult(0));
    return success();
  }
};

struct LowerPatchEmbed : OpRewritePattern<PatchEmbedOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PatchEmbedOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value px = op.getPixels();
    auto pt = tensorType(px);
    int64_t c = pt.getDimSize(1), s = pt.getDimSize(2),
            p = op.getPatchAttr().getInt(), g = s / p;
    Type elt = pt.getElementType();
    auto bdim = [&]() -> OpFoldResult {
      return pt.isDynamicDim(0) ? OpFoldResult(dimOf(b, loc, px, 0))
                                : b.getIndexAttr(pt.getDimSize(0));
    };
    // [B, C, S, S] -> [B, C, G, P, G, P] -> [B, G, G, C, P, P] -> [B, G*G,
    // C*P*P]
    auto expType =
        RankedTensorType::get({pt.getDimSize(0), c, g, p, g, p}, elt);
    Value e = tensor::ExpandShapeOp::create(
        b, loc, expType, px,
        SmallVector<ReassociationIndices>{{0}, {1}, {2, 3}, {4, 5}},
        SmallVector<OpFoldResult>{bdim(), b.getIndexAttr(c), b.getIndexAttr(g),
                                  b.getIndexAttr(p), b.getIndexAttr(g),
                                  b.getIndexAttr(p)});
    Value t = transposeTensor(b, loc, e, {0, 2, 4, 1, 3, 5});
    Value flat = tensor::CollapseShapeOp::create(
        b, loc, t, SmallVector<ReassociationIndices>{{0}, {1, 2}, {3, 4, 5}});
    Value wp = packedWeight(b, loc, op.getWeight());
    int64_t n = tensorType(op.getWeight()).getDimSize(0);
    b.replaceOp(op, emitLinear(b, loc, flat, wp, n, op.getBias()));
    return success();
  }
};

struct LowerPrependToken : OpRewritePattern<PrependTokenOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PrependTokenOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = op.getInput(), tok = op.getToken();
    auto rt = op.getType();
    SmallVector<Value> dyn;
    if (rt.isDynamicDim(0))
      dyn.push_back(dimOf(b, loc, x, 0));
    if (rt.isDynamicDim(1))
      dyn.push_back(arith::AddIOp::create(b, loc, dimOf(b, loc, x, 1),
                                          constIdx(b, loc, 1)));
    Value init = tensor::EmptyOp::create(b, loc, rt.getShape(),
                                         rt.getElementType(), dyn);
    b.replaceOp(
        op, generic(b, loc, ValueRange{}, {}, init,
                    [&](OpBuilder &nb, Location l, ValueRange) {
                      Value bi = linalg::IndexOp::create(nb, l, 0);
                      Value t = linalg::IndexOp::create(nb, l, 1);
                      Value d = linalg::IndexOp::create(nb, l, 2);
                      Value zero = constIdx(nb, l, 0);
                      Value first = arith::CmpIOp::create(
                          nb, l, arith::CmpIPredicate::eq, t, zero);
                      Value prev = arith::SubIOp::create(
                          nb, l,
                          arith::MaxUIOp::create(nb, l, t, constIdx(nb, l, 1)),
                          constIdx(nb, l, 1));
                      Value fromX = tensor::ExtractOp::create(
                          nb, l, x, ValueRange{bi, prev, d});
                      Value fromTok =
                          tensor::ExtractOp::create(nb, l, tok, ValueRange{d});
                      return arith::SelectOp::create(nb, l, first, fromTok,
                                                     fromX);
                    }));
    return success();
  }
};

struct LowerPool : OpRewritePattern<PoolOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PoolOp op, PatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Value x = op.getInput();
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
    Value lengths = op.getLengths();
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

struct ConvertTfmToLinalgPass
    : mlir::tfm::impl::ConvertTfmToLinalgBase<ConvertTfmToLinalgPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateTfmToLinalgPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    WalkResult r = getOperation().walk([](Operation *op) {
      if (isa<TfmDialect>(op->getDialect()) &&
          !isa<LinearKernelOp, AttentionKernelOp>(op)) {
        op->emitError("convert-tfm-to-linalg could not lower this op");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void mlir::tfm::populateTfmToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerLinear, LowerAttention, LowerBinary<AddOp, AddFn>,
               LowerBinary<MulOp, MulFn>, LowerScale, LowerActivation,
               LowerEmbed, LowerPositions, LowerNorm, LowerSoftmax, LowerMask,
               LowerTranspose, LowerUnpackWeight, LowerSplitHeads,
               LowerMergeHeads, LowerRope, LowerRepeatKv, LowerMatmul,
               LowerPatchEmbed, LowerPrependToken, LowerPool>(
      patterns.getContext());
}
