//===- TfmToLinalgMoe.cpp - mixture-of-experts ops to linalg and kernels --===//
//
// tfm.route becomes linalg reductions (the row's maximum, each expert's rank
// among the row's logits, the sums of the softmax) and elementwise ops, which
// run on CPUs and GPUs alike; tfm.row_scale an elementwise op; and
// tfm.moe_experts (CPU) the destination-style tfm.moe_kernel, which reads
// the experts' weights packed as tfm.linear_kernel's and which
// tfm-lower-kernels lowers to the sparse kernel.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "TfmToLinalgUtils.h"

#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::linalg_lowering;
using utils::IteratorType;

namespace {

struct LowerRoute : OpConversionPattern<RouteOp> {
  using OpConversionPattern::OpConversionPattern;

  /// The rank of each entry of `v` [.., N] (f32) in its row, or with
  /// `group` > 0 in its group of `group` consecutive entries: the entries
  /// before it, a larger value or an equal one at a lower index
  /// (torch.topk's order), as f32.
  static Value rankOf(OpBuilder &b, Location loc, Value v, int64_t group) {
    auto t = tensorType(v);
    int64_t rank = t.getRank(), axis = rank - 1;
    MLIRContext *ctx = b.getContext();
    Type f32 = b.getF32Type();
    SmallVector<AffineExpr> at, other;
    for (int64_t i = 0; i < rank; ++i) {
      at.push_back(b.getAffineDimExpr(i));
      other.push_back(b.getAffineDimExpr(i == axis ? rank : i));
    }
    SmallVector<std::pair<Value, int64_t>> dims;
    for (int64_t i = 0; i < rank; ++i)
      dims.push_back({v, i});
    Value zeros = linalg::FillOp::create(b, loc, constF(b, loc, f32, 0.0),
                                         emptyTensor(b, loc, t, dims))
                      .getResult(0);
    SmallVector<IteratorType> iters(rank, IteratorType::parallel);
    iters.push_back(IteratorType::reduction);
    return linalg::GenericOp::create(
               b, loc, TypeRange{t}, ValueRange{v, v}, ValueRange{zeros},
               ArrayRef<AffineMap>{AffineMap::get(rank + 1, 0, at, ctx),
                                   AffineMap::get(rank + 1, 0, other, ctx),
                                   AffineMap::get(rank + 1, 0, at, ctx)},
               iters,
               [&](OpBuilder &nb, Location nl, ValueRange a) {
                 using P = arith::CmpFPredicate;
                 Value e = linalg::IndexOp::create(nb, nl, axis);
                 Value e2 = linalg::IndexOp::create(nb, nl, rank);
                 Value larger =
                     arith::CmpFOp::create(nb, nl, P::OGT, a[1], a[0]);
                 Value tie = arith::AndIOp::create(
                     nb, nl, arith::CmpFOp::create(nb, nl, P::OEQ, a[1], a[0]),
                     arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::ult,
                                           e2, e));
                 Value before = arith::OrIOp::create(nb, nl, larger, tie);
                 if (group > 0) {
                   Value g = constIdx(nb, nl, group);
                   before = arith::AndIOp::create(
                       nb, nl, before,
                       arith::CmpIOp::create(
                           nb, nl, arith::CmpIPredicate::eq,
                           arith::DivUIOp::create(nb, nl, e, g),
                           arith::DivUIOp::create(nb, nl, e2, g)));
                 }
                 Value one = arith::SelectOp::create(nb, nl, before,
                                                     constF(nb, nl, f32, 1.0),
                                                     constF(nb, nl, f32, 0.0));
                 linalg::YieldOp::create(
                     nb, nl,
                     ValueRange{arith::AddFOp::create(nb, nl, a[2], one)});
               })
        .getResult(0);
  }

  LogicalResult matchAndRewrite(RouteOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value l = adaptor.getLogits();
    auto t = tensorType(l);
    int64_t rank = t.getRank(), axis = rank - 1;
    int64_t experts = t.getShape().back();
    Type elt = t.getElementType(), f32 = b.getF32Type();
    MLIRContext *ctx = b.getContext();
    AffineMap id = b.getMultiDimIdentityMap(rank);
    AffineMap rowMap = dropDimMap(b, rank, axis);
    auto f32Type = RankedTensorType::get(t.getShape(), f32);
    SmallVector<std::pair<Value, int64_t>> dims;
    for (int64_t i = 0; i < rank; ++i)
      dims.push_back({l, i});
    auto empty = [&]() { return emptyTensor(b, loc, f32Type, dims); };
    auto fm = reassoc(ctx);
    auto add = [&](OpBuilder &nb, Location nl, Value acc, ValueRange a) {
      return arith::AddFOp::create(nb, nl, acc, a[0], fm);
    };
    auto maxOf = [&](OpBuilder &nb, Location nl, Value acc, ValueRange a) {
      return arith::MaximumFOp::create(nb, nl, acc, a[0]);
    };
    RouterKind kind = op.getRouter();
    bool sigmoid = kind == RouterKind::sigmoid;
    Value lf = generic(b, loc, ValueRange{l}, {id}, empty(),
                       [&](OpBuilder &nb, Location nl, ValueRange a) {
                         return toF32(nb, nl, a[0]);
                       });
    Value max = reduce(b, loc, lf, axis, -INFINITY, {}, {}, maxOf, f32);
    // The value each expert is chosen by: the logit (softmax routers), or
    // sigmoid(logit) + the selection bias (DeepSeek-V3).
    Value score, choice = lf;
    if (sigmoid) {
      score =
          generic(b, loc, ValueRange{lf}, {id}, empty(),
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    return buildActivation(nb, nl, Activation::sigmoid, a[0]);
                  });
      choice = score;
      if (Value bias = adaptor.getSelectionBias()) {
        AffineMap last = AffineMap::get(rank, 0, b.getAffineDimExpr(axis), ctx);
        choice = generic(b, loc, ValueRange{score, bias}, {id, last}, empty(),
                         [&](OpBuilder &nb, Location nl, ValueRange a) {
                           return arith::AddFOp::create(nb, nl, a[0],
                                                        toF32(nb, nl, a[1]));
                         });
      }
    }
    // Group-limited routing: each group's score (its largest logit, the
    // order of its largest softmax probability; or the sum of its two
    // largest choice values), the `topk_groups` best groups allowed, the
    // others' experts masked (-inf; the sigmoid router's 0, as DeepSeek).
    int64_t groups = op.getGroups(), topkGroups = op.getTopkGroups();
    if (groups > 1) {
      int64_t size = experts / groups;
      Value top = choice;
      if (sigmoid) {
        Value inGroup = rankOf(b, loc, choice, size);
        top = generic(b, loc, ValueRange{choice, inGroup}, {id, id}, empty(),
                      [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                        Value two = arith::CmpFOp::create(
                            nb, nl, arith::CmpFPredicate::OLT, a[1],
                            constF(nb, nl, f32, 2.0));
                        return arith::SelectOp::create(
                            nb, nl, two, a[0], constF(nb, nl, f32, 0.0));
                      });
      }
      // [.., E] -> [.., G, E / G], reduced to [.., G].
      SmallVector<ReassociationIndices> re;
      for (int64_t i = 0; i < axis; ++i)
        re.push_back({i});
      re.push_back({axis, axis + 1});
      SmallVector<int64_t> shape(t.getShape());
      shape.back() = groups;
      shape.push_back(size);
      SmallVector<OpFoldResult> outShape;
      for (int64_t i = 0; i < axis; ++i)
        outShape.push_back(t.isDynamicDim(i) ? OpFoldResult(dimOf(b, loc, l, i))
                                             : b.getIndexAttr(t.getDimSize(i)));
      outShape.push_back(b.getIndexAttr(groups));
      outShape.push_back(b.getIndexAttr(size));
      auto splitType = RankedTensorType::get(shape, f32);
      auto splitOf = [&](Value v) -> Value {
        return tensor::ExpandShapeOp::create(b, loc, splitType, v, re,
                                             outShape);
      };
      Value groupScore = reduce(
          b, loc, splitOf(top), axis + 1, sigmoid ? 0.0 : -INFINITY, {}, {},
          sigmoid
              ? function_ref<Value(OpBuilder &, Location, Value, ValueRange)>(
                    add)
              : function_ref<Value(OpBuilder &, Location, Value, ValueRange)>(
                    maxOf),
          f32);
      Value groupRank = rankOf(b, loc, groupScore, 0);
      // On the [.., G, E / G] form, so that the group is a dimension of
      // the indexing (no division in the maps: GPU kernels lower no
      // affine.apply).
      double k = double(topkGroups);
      Value masked =
          generic(b, loc, ValueRange{splitOf(choice), groupRank},
                  {b.getMultiDimIdentityMap(rank + 1),
                   dropDimMap(b, rank + 1, axis + 1)},
                  emptyTensor(b, loc, splitType,
                              [&] {
                                SmallVector<std::pair<Value, int64_t>> d;
                                Value sc = splitOf(choice);
                                for (int64_t i = 0; i <= axis + 1; ++i)
                                  d.push_back({sc, i});
                                return d;
                              }()),
                  [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                    Value allowed =
                        arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OLT,
                                              a[1], constF(nb, nl, f32, k));
                    return arith::SelectOp::create(
                        nb, nl, allowed, a[0],
                        constF(nb, nl, f32, sigmoid ? 0.0 : -INFINITY));
                  });
      choice = tensor::CollapseShapeOp::create(b, loc, f32Type, masked, re);
    }
    Value order = rankOf(b, loc, choice, 0);
    double k = double(op.getExpertsPerToken());
    // The chosen experts' weight before normalization, 0 for the others:
    // exp(l - max) (softmax routers: the softmax over all needs the others
    // too), or the sigmoid score.
    auto expOf = [&](OpBuilder &nb, Location nl, Value x, Value m) -> Value {
      return math::ExpOp::create(nb, nl, arith::SubFOp::create(nb, nl, x, m));
    };
    Value chosen = generic(
        b, loc, ValueRange{sigmoid ? score : lf, max, order}, {id, rowMap, id},
        empty(), [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
          Value in = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OLT,
                                           a[2], constF(nb, nl, f32, k));
          Value w = sigmoid ? a[0] : expOf(nb, nl, a[0], a[1]);
          return arith::SelectOp::create(nb, nl, in, w,
                                         constF(nb, nl, f32, 0.0));
        });
    // softmax over all experts; topk_softmax and normalize divide by the
    // chosen ones' sum instead (the sigmoid router: + 1e-20, as DeepSeek);
    // the sigmoid router's weights are the scores themselves otherwise.
    bool overChosen = kind == RouterKind::topk_softmax || op.getNormalize();
    Value denom;
    if (overChosen) {
      denom =
          reduce(b, loc, chosen, axis, sigmoid ? 1e-20 : 0.0, {}, {}, add, f32);
    } else if (!sigmoid) {
      Value all = generic(b, loc, ValueRange{lf, max}, {id, rowMap}, empty(),
                          [&](OpBuilder &nb, Location nl, ValueRange a) {
                            return expOf(nb, nl, a[0], a[1]);
                          });
      denom = reduce(b, loc, all, axis, 0.0, {}, {}, add, f32);
    }
    double scale = op.getRoutedScale().convertToDouble();
    SmallVector<Value> ins{chosen};
    SmallVector<AffineMap> maps{id};
    if (denom) {
      ins.push_back(denom);
      maps.push_back(rowMap);
    }
    b.replaceOp(op, generic(b, loc, ins, maps, emptyLike(b, loc, l),
                            [&](OpBuilder &nb, Location nl, ValueRange a) {
                              Value w = a[0];
                              if (denom)
                                w = arith::DivFOp::create(nb, nl, w, a[1]);
                              if (scale != 1.0)
                                w = arith::MulFOp::create(
                                    nb, nl, w, constF(nb, nl, f32, scale));
                              return fromF32(nb, nl, w, elt);
                            }));
    return success();
  }
};

struct LowerRowScale : OpConversionPattern<RowScaleOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RowScaleOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    int64_t rank = tensorType(x).getRank();
    SmallVector<AffineExpr> row;
    for (int64_t i = 0; i + 1 < rank; ++i)
      row.push_back(b.getAffineDimExpr(i));
    row.push_back(b.getAffineConstantExpr(0));
    auto act = op.getActivation();
    b.replaceOp(op, generic(b, loc, ValueRange{x, adaptor.getScale()},
                            {b.getMultiDimIdentityMap(rank),
                             AffineMap::get(rank, 0, row, b.getContext())},
                            emptyLike(b, loc, x),
                            [&](OpBuilder &nb, Location nl, ValueRange a) {
                              Value s = a[1];
                              if (act)
                                s = buildActivation(nb, nl, *act, s);
                              return arith::MulFOp::create(nb, nl, a[0], s);
                            }));
    return success();
  }
};

struct LowerMoeExperts : OpConversionPattern<MoeExpertsOp> {
  LowerMoeExperts(MLIRContext *ctx, int64_t panel)
      : OpConversionPattern(ctx), panel(panel) {}
  int64_t panel;
  LogicalResult matchAndRewrite(MoeExpertsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    if (!tensorType(adaptor.getInput()).getElementType().isF32())
      return b.notifyMatchFailure(op, "the MoE kernel computes in f32; "
                                      "decompose with dense-experts");
    Value x = asMatrix(b, loc, adaptor.getInput());
    Value w = asMatrix(b, loc, adaptor.getWeights());
    Value up =
        packedWeight(b, loc, op.getUpWeight(), adaptor.getUpWeight(), panel);
    Value gate = op.getGateWeight()
                     ? packedWeight(b, loc, op.getGateWeight(),
                                    adaptor.getGateWeight(), panel)
                     : Value();
    Value down = packedWeight(b, loc, op.getDownWeight(),
                              adaptor.getDownWeight(), panel);
    auto xt = tensorType(x);
    Value init = emptyTensor(b, loc, xt, {{x, 0}});
    int64_t hidden = tensorType(adaptor.getUpWeight()).getDimSize(1);
    Value y =
        MoeKernelOp::create(b, loc, TypeRange{xt}, x, w, up, gate, down,
                            adaptor.getBiases(), init,
                            b.getI64IntegerAttr(hidden), op.getActivationAttr())
            .getResult()[0];
    b.replaceOp(
        op, withLeadingDimsOf(b, loc, y, adaptor.getInput(), xt.getDimSize(1)));
    return success();
  }
};

} // namespace

void mlir::tfm::populateTfmMoeToLinalgPatterns(RewritePatternSet &patterns,
                                               int64_t panelWidth) {
  patterns.add<LowerRoute, LowerRowScale>(patterns.getContext());
  patterns.add<LowerMoeExperts>(patterns.getContext(), panelWidth);
}
