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
  LogicalResult matchAndRewrite(RouteOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value l = adaptor.getLogits();
    auto t = tensorType(l);
    int64_t rank = t.getRank(), axis = rank - 1;
    Type elt = t.getElementType(), f32 = b.getF32Type();
    AffineMap id = b.getMultiDimIdentityMap(rank);
    AffineMap rowMap = dropDimMap(b, rank, axis);
    Value max = reduce(
        b, loc, l, axis, -INFINITY, {}, {},
        [&](OpBuilder &nb, Location nl, Value acc, ValueRange a) {
          return arith::MaximumFOp::create(nb, nl, acc, toF32(nb, nl, a[0]));
        },
        f32);
    // rank[.., e] = the experts e' that come before e: a larger logit, or
    // an equal one at a lower index (torch.topk's order).
    SmallVector<AffineExpr> at, other;
    for (int64_t i = 0; i < rank; ++i) {
      at.push_back(b.getAffineDimExpr(i));
      other.push_back(b.getAffineDimExpr(i == axis ? rank : i));
    }
    MLIRContext *ctx = b.getContext();
    auto f32Type = RankedTensorType::get(t.getShape(), f32);
    SmallVector<std::pair<Value, int64_t>> dims;
    for (int64_t i = 0; i < rank; ++i)
      dims.push_back({l, i});
    Value zeros = linalg::FillOp::create(b, loc, constF(b, loc, f32, 0.0),
                                         emptyTensor(b, loc, f32Type, dims))
                      .getResult(0);
    SmallVector<IteratorType> iters(rank, IteratorType::parallel);
    iters.push_back(IteratorType::reduction);
    Value order =
        linalg::GenericOp::create(
            b, loc, TypeRange{f32Type}, ValueRange{l, l}, ValueRange{zeros},
            ArrayRef<AffineMap>{AffineMap::get(rank + 1, 0, at, ctx),
                                AffineMap::get(rank + 1, 0, other, ctx),
                                AffineMap::get(rank + 1, 0, at, ctx)},
            iters,
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              using P = arith::CmpFPredicate;
              Value mine = toF32(nb, nl, a[0]), theirs = toF32(nb, nl, a[1]);
              Value e = linalg::IndexOp::create(nb, nl, axis);
              Value e2 = linalg::IndexOp::create(nb, nl, rank);
              Value larger =
                  arith::CmpFOp::create(nb, nl, P::OGT, theirs, mine);
              Value tie = arith::AndIOp::create(
                  nb, nl, arith::CmpFOp::create(nb, nl, P::OEQ, theirs, mine),
                  arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::ult, e2,
                                        e));
              Value before = arith::OrIOp::create(nb, nl, larger, tie);
              Value one = arith::SelectOp::create(nb, nl, before,
                                                  constF(nb, nl, f32, 1.0),
                                                  constF(nb, nl, f32, 0.0));
              linalg::YieldOp::create(
                  nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[2], one)});
            })
            .getResult(0);
    // The chosen experts' exp(l - max), 0 for the others; the softmax over
    // all of them also needs the others'.
    double k = double(op.getExpertsPerToken());
    auto expOf = [&](OpBuilder &nb, Location nl, Value x, Value m) -> Value {
      return math::ExpOp::create(
          nb, nl, arith::SubFOp::create(nb, nl, toF32(nb, nl, x), m));
    };
    Value chosen = generic(
        b, loc, ValueRange{l, max, order}, {id, rowMap, id},
        emptyTensor(b, loc, f32Type, dims),
        [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
          Value in = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OLT,
                                           a[2], constF(nb, nl, f32, k));
          return arith::SelectOp::create(nb, nl, in, expOf(nb, nl, a[0], a[1]),
                                         constF(nb, nl, f32, 0.0));
        });
    auto fm = reassoc(ctx);
    auto add = [&](OpBuilder &nb, Location nl, Value acc, ValueRange a) {
      return arith::AddFOp::create(nb, nl, acc, a[0], fm);
    };
    // softmax over all experts; topk_softmax and normalize divide by the
    // chosen ones' sum instead.
    bool overChosen =
        op.getRouter() == RouterKind::topk_softmax || op.getNormalize();
    Value denom;
    if (overChosen) {
      denom = reduce(b, loc, chosen, axis, 0.0, {}, {}, add, f32);
    } else {
      Value all = generic(b, loc, ValueRange{l, max}, {id, rowMap},
                          emptyTensor(b, loc, f32Type, dims),
                          [&](OpBuilder &nb, Location nl, ValueRange a) {
                            return expOf(nb, nl, a[0], a[1]);
                          });
      denom = reduce(b, loc, all, axis, 0.0, {}, {}, add, f32);
    }
    double scale = op.getRoutedScale().convertToDouble();
    b.replaceOp(op, generic(b, loc, ValueRange{chosen, denom}, {id, rowMap},
                            emptyLike(b, loc, l),
                            [&](OpBuilder &nb, Location nl, ValueRange a) {
                              Value w =
                                  arith::DivFOp::create(nb, nl, a[0], a[1]);
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

/// The packed [E, P, K, W] form of the stack `w` [E, N, K] (`converted`:
/// its value after conversion): the packed parameter when it comes from
/// tfm.unpack_weight (tfm-model-abi), else packed here in panels of `kPanel`
/// columns (hand-written IR).
Value packedStack(OpBuilder &b, Location loc, Value w, Value converted,
                  int64_t kPanel) {
  if (auto up = w.getDefiningOp<UnpackWeightOp>())
    return up.getPacked();
  auto wt = tensorType(converted);
  int64_t e = wt.getDimSize(0), n = wt.getDimSize(1), k = wt.getDimSize(2);
  auto pt = RankedTensorType::get({e, (n + kPanel - 1) / kPanel, k, kPanel},
                                  wt.getElementType());
  Value init = tensor::EmptyOp::create(b, loc, pt.getShape(),
                                       pt.getElementType(), ValueRange{});
  return generic(
      b, loc, ValueRange{}, {}, init,
      [&](OpBuilder &nb, Location l, ValueRange) {
        Value ex = linalg::IndexOp::create(nb, l, 0);
        Value p = linalg::IndexOp::create(nb, l, 1);
        Value kk = linalg::IndexOp::create(nb, l, 2);
        Value c = linalg::IndexOp::create(nb, l, 3);
        Value row = arith::AddIOp::create(
            nb, l, arith::MulIOp::create(nb, l, p, constIdx(nb, l, kPanel)), c);
        Value inside = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt,
                                             row, constIdx(nb, l, n));
        Value safe = arith::MinUIOp::create(nb, l, row, constIdx(nb, l, n - 1));
        Value v = tensor::ExtractOp::create(nb, l, converted,
                                            ValueRange{ex, safe, kk});
        return arith::SelectOp::create(nb, l, inside, v,
                                       constF(nb, l, wt.getElementType(), 0.0));
      });
}

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
        packedStack(b, loc, op.getUpWeight(), adaptor.getUpWeight(), panel);
    Value gate = op.getGateWeight()
                     ? packedStack(b, loc, op.getGateWeight(),
                                   adaptor.getGateWeight(), panel)
                     : Value();
    Value down =
        packedStack(b, loc, op.getDownWeight(), adaptor.getDownWeight(), panel);
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
