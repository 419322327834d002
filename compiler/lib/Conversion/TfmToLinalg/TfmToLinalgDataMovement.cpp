//===- TfmToLinalgDataMovement.cpp - tfm data movement to linalg ----------===//
//
// Gathers (embeddings, repeated K/V heads, a prepended token, unpacked
// weights) become linalg.generic ops reading through tensor.extract; head
// reshapes become tensor.expand_shape / collapse_shape and linalg.transpose.
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

struct LowerEmbed : OpConversionPattern<EmbedOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(EmbedOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value tokens = adaptor.getTokens(), table = adaptor.getTable();
    auto rt = op.getType();
    Value init =
        emptyTensor(b, loc, rt, {{tokens, 0}, {tokens, 1}, {table, 1}});
    double scale = op.getScale() ? std::sqrt(double(rt.getDimSize(2))) : 1.0;
    // A table in ggml blocks: its kernel dequantizes the rows it gathers.
    if (auto ggml = op.getTable().getDefiningOp<GgmlWeightOp>()) {
      b.replaceOp(op,
                  GgmlEmbedKernelOp::create(
                      b, loc, TypeRange{rt}, tokens, ggml.getRows(),
                      ggml.getGgmlType(), init,
                      op.getScale() ? b.getF64FloatAttr(scale) : FloatAttr())
                      .getResult()[0]);
      return success();
    }
    MLIRContext *ctx = b.getContext();
    AffineMap tokMap = AffineMap::get(
        3, 0, {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx)}, ctx);
    // A rank's block of the vocabulary (tensor parallelism): rows
    // [rank * V, (rank + 1) * V); other tokens read row 0 and give zeros.
    Value first;
    int64_t rows = tensorType(table).getDimSize(0);
    if (op.getVocabShards().value_or(1) > 1) {
      Value rank = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                              TpRankOp::create(b, loc));
      first = arith::MulIOp::create(b, loc, rank, constIdx(b, loc, rows));
    }
    b.replaceOp(
        op,
        generic(b, loc, ValueRange{tokens}, {tokMap}, init,
                [&](OpBuilder &nb, Location l, ValueRange a) {
                  Value id = arith::IndexCastOp::create(
                      nb, l, nb.getIndexType(), a[0]);
                  Value inBlock;
                  if (first) {
                    id = arith::SubIOp::create(nb, l, id, first);
                    inBlock = arith::AndIOp::create(
                        nb, l,
                        arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sge,
                                              id, constIdx(nb, l, 0)),
                        arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt,
                                              id, constIdx(nb, l, rows)));
                    id = arith::SelectOp::create(nb, l, inBlock, id,
                                                 constIdx(nb, l, 0));
                  }
                  Value d = linalg::IndexOp::create(nb, l, 2);
                  Value v = tensor::ExtractOp::create(nb, l, table,
                                                      ValueRange{id, d});
                  if (scale != 1.0)
                    v = arith::MulFOp::create(
                        nb, l, v, constF(nb, l, v.getType(), scale));
                  if (inBlock)
                    v = arith::SelectOp::create(
                        nb, l, inBlock, v, constF(nb, l, v.getType(), 0.0));
                  return v;
                }));
    return success();
  }
};

struct LowerTranspose : OpConversionPattern<TransposeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(TransposeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    b.replaceOp(op, transposeTensor(b, op.getLoc(), adaptor.getInput(),
                                    op.getPermutation()));
    return success();
  }
};

/// A packed weight read other than by a linear (a tied embedding reads the
/// plain copy, so this is rare): unpack it. One read only by linears is
/// legal (isFoldedIntoKernel) and folded into their kernels.
struct LowerUnpackWeight : OpConversionPattern<UnpackWeightOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(UnpackWeightOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value p = adaptor.getPacked();
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

struct LowerSplitHeads : OpConversionPattern<SplitHeadsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SplitHeadsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
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

struct LowerMergeHeads : OpConversionPattern<MergeHeadsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MergeHeadsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value t = transposeTensor(b, loc, adaptor.getInput(), {0, 2, 1, 3});
    b.replaceOp(op, tensor::CollapseShapeOp::create(
                        b, loc, op.getType(), t,
                        SmallVector<ReassociationIndices>{{0}, {1}, {2, 3}}));
    return success();
  }
};

struct LowerRepeatKv : OpConversionPattern<RepeatKvOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RepeatKvOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
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

struct LowerPrependToken : OpConversionPattern<PrependTokenOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PrependTokenOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput(), tok = adaptor.getToken();
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

} // namespace

void mlir::tfm::populateTfmDataMovementToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerEmbed, LowerTranspose, LowerUnpackWeight, LowerSplitHeads,
               LowerMergeHeads, LowerRepeatKv, LowerPrependToken>(
      patterns.getContext());
}
