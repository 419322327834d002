//===- Decompose.cpp - model-level ops to primitive ops -------------------===//
//
// tfm.multi_head_attention and tfm.ffn become the textbook primitive form, so
// that attention fusion (FuseAttention.cpp) is a real pattern match over the
// same IR a hand-written or imported graph would have.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"
#include "tfm/Transforms/Transforms.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMDECOMPOSE
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// [B, T, in] x [out, in]^T (+ bias) -> [B, T, out].
Value linear(PatternRewriter &b, Location loc, Value x, Value w, Value bias) {
  auto xt = cast<RankedTensorType>(x.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  SmallVector<int64_t> shape(xt.getShape());
  shape.back() = wt.getDimSize(0);
  return LinearOp::create(
      b, loc, RankedTensorType::get(shape, xt.getElementType()), x, w, bias);
}

/// A splat f32/f16/bf16 constant of type `t`.
Value splat(PatternRewriter &b, Location loc, RankedTensorType t, double v) {
  return arith::ConstantOp::create(
      b, loc, t,
      DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), v)));
}

struct DecomposeMultiHeadAttention : OpRewritePattern<MultiHeadAttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MultiHeadAttentionOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto xt = cast<RankedTensorType>(op.getQuery().getType());
    auto st = cast<RankedTensorType>(op.getSource().getType());
    Type elt = xt.getElementType();
    int64_t heads = op.getHeadsAttr().getInt();
    int64_t kvHeads = op.getKvHeadsAttr().getInt();
    int64_t hd = op.getHeadDimAttr().getInt();
    auto biases = op.getBiases();
    auto bias = [&](int i) { return biases.empty() ? Value() : biases[i]; };

    Value q = linear(b, loc, op.getQuery(), op.getWq(), bias(0));
    Value k = linear(b, loc, op.getSource(), op.getWk(), bias(1));
    Value v = linear(b, loc, op.getSource(), op.getWv(), bias(2));
    auto qkNorm = op.getQkNorm();
    double qkOffset = op.getQkNormOffsetAttr()
                          ? op.getQkNormOffsetAttr().getValueAsDouble()
                          : 0.0;
    bool layerQkNorm =
        !qkNorm.empty() && *op.getQkNormKind() == NormKind::layernorm;
    // A norm over the last dimension with weight `w` (and a zero bias for
    // layernorm): each head's, or the whole projection's (qk_norm_full).
    auto qkNormOf = [&](Value x, Value w) -> Value {
      auto vecType = RankedTensorType::get(
          {cast<RankedTensorType>(w.getType()).getDimSize(0)}, elt);
      Value zero = layerQkNorm ? splat(b, loc, vecType, 0.0) : Value();
      return NormOp::create(b, loc, x.getType(), x, w, zero,
                            op.getQkNormKindAttr(), op.getQkNormEpsAttr(),
                            b.getF64FloatAttr(qkOffset));
    };
    if (!qkNorm.empty() && op.getQkNormFull()) {
      q = qkNormOf(q, qkNorm[0]);
      k = qkNormOf(k, qkNorm[1]);
    }
    auto headsType = [&](int64_t h, int64_t t) {
      return RankedTensorType::get({xt.getDimSize(0), h, t, hd}, elt);
    };
    int64_t tq = xt.getDimSize(1), tk = st.getDimSize(1);
    Value qh = SplitHeadsOp::create(b, loc, headsType(heads, tq), q,
                                    b.getI64IntegerAttr(heads));
    Value kh = SplitHeadsOp::create(b, loc, headsType(kvHeads, tk), k,
                                    b.getI64IntegerAttr(kvHeads));
    Value vh = SplitHeadsOp::create(b, loc, headsType(kvHeads, tk), v,
                                    b.getI64IntegerAttr(kvHeads));
    if (!qkNorm.empty() && !op.getQkNormFull()) {
      qh = qkNormOf(qh, qkNorm[0]);
      kh = qkNormOf(kh, qkNorm[1]);
    }
    // OLMo's clip_qkv, after the projections and norms.
    if (FloatAttr clip = op.getClipAttr()) {
      qh = ClipOp::create(b, loc, qh, clip);
      kh = ClipOp::create(b, loc, kh, clip);
      vh = ClipOp::create(b, loc, vh, clip);
    }
    Value positions = op.getPositions();
    if (auto invFreq = op.getRopeInvFreqAttr()) {
      qh = RopeOp::create(b, loc, qh, positions, invFreq, op.getRopeStyleAttr(),
                          op.getRopeScaleAttr());
      kh = RopeOp::create(b, loc, kh, positions, invFreq, op.getRopeStyleAttr(),
                          op.getRopeScaleAttr());
    }
    auto merge = [&](Value o) {
      Value merged = MergeHeadsOp::create(
          b, loc,
          RankedTensorType::get({xt.getDimSize(0), tq, heads * hd}, elt), o);
      return linear(b, loc, merged, op.getWo(), op.getOutBias());
    };
    if (auto cache = op.getCache(); !cache.empty()) {
      // With a KV cache: the new keys and values go into the cache, and the
      // queries attend to it in one fused tfm.attention (grouped heads read
      // their shared K/V head; no textbook form to match).
      UnitAttr ring = op.getRingAttr();
      Value table = op.getBlockTable();
      Value kc = CacheWriteOp::create(b, loc, cache[0].getType(), kh, cache[0],
                                      positions, table, b.getUnitAttr(), ring);
      Value vc = CacheWriteOp::create(b, loc, cache[1].getType(), vh, cache[1],
                                      positions, table, UnitAttr(), ring);
      Value o = AttentionOp::create(
          b, loc, headsType(heads, tq), qh, kc, vc, op.getRelative(),
          op.getLengths(), positions, op.getSinks(), table, op.getMaskAttr(),
          op.getWindowAttr(), op.getScaleAttr(), op.getSoftcapAttr(),
          op.getAlibiSlopesAttr(), op.getRelativeMaxDistanceAttr(),
          op.getRelativeBidirectionalAttr(), b.getUnitAttr(), ring);
      b.replaceOp(op, ValueRange{merge(o), kc, vc});
      return success();
    }
    if (kvHeads != heads) {
      auto rep = b.getI64IntegerAttr(heads / kvHeads);
      kh = RepeatKvOp::create(b, loc, headsType(heads, tk), kh, rep);
      vh = RepeatKvOp::create(b, loc, headsType(heads, tk), vh, rep);
    }
    auto scoresType =
        RankedTensorType::get({xt.getDimSize(0), heads, tq, tk}, elt);
    Value s = MatmulOp::create(b, loc, scoresType, qh, kh,
                               /*transpose_lhs=*/false,
                               /*transpose_rhs=*/true);
    s = ScaleOp::create(b, loc, s, op.getScaleAttr());
    // The score modifiers, in tfm.attention's order.
    if (auto cap = op.getSoftcapAttr())
      s = SoftcapOp::create(b, loc, s, cap);
    if (auto slopes = op.getAlibiSlopesAttr())
      s = AlibiOp::create(b, loc, s, slopes);
    if (Value table = op.getRelative())
      s = RelativeBiasOp::create(b, loc, scoresType, s, table,
                                 op.getRelativeMaxDistanceAttr(),
                                 op.getRelativeBidirectionalAttr());
    if (op.getMask() != MaskKind::none || op.getLengths())
      s = MaskOp::create(b, loc, scoresType, s, op.getLengths(),
                         op.getMaskAttr(), op.getWindowAttr());
    Value p = SoftmaxOp::create(b, loc, s.getType(), s, op.getSinks(),
                                b.getI64IntegerAttr(3));
    Value o =
        MatmulOp::create(b, loc, headsType(heads, tq), p, vh, false, false);
    b.replaceOp(op, merge(o));
    return success();
  }
};

/// `v` [..., n] at [..., offset, offset + size) of dimension `dim`.
Value sliceDim(PatternRewriter &b, Location loc, Value v, int64_t dim,
               int64_t offset, int64_t size) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<OpFoldResult> offsets(t.getRank(), b.getIndexAttr(0));
  offsets[dim] = b.getIndexAttr(offset);
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, v);
  sizes[dim] = b.getIndexAttr(size);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = size;
  return tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get(shape, t.getElementType()), v, offsets,
      sizes, SmallVector<OpFoldResult>(t.getRank(), b.getIndexAttr(1)));
}

/// `a` and `c` (of equal leading dimensions) joined along their last,
/// static, dimension.
Value concatLast(PatternRewriter &b, Location loc, Value a, Value c) {
  auto at = cast<RankedTensorType>(a.getType());
  auto ct = cast<RankedTensorType>(c.getType());
  int64_t last = at.getRank() - 1;
  int64_t na = at.getDimSize(last), nc = ct.getDimSize(last);
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, a);
  sizes[last] = b.getIndexAttr(na + nc);
  Value into = tensor::EmptyOp::create(b, loc, sizes, at.getElementType());
  SmallVector<OpFoldResult> offsets(at.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(at.getRank(), b.getIndexAttr(1));
  into = tensor::InsertSliceOp::create(
      b, loc, a, into, offsets, tensor::getMixedSizes(b, loc, a), strides);
  offsets[last] = b.getIndexAttr(na);
  return tensor::InsertSliceOp::create(
      b, loc, c, into, offsets, tensor::getMixedSizes(b, loc, c), strides);
}

/// Per head h: a[:, h] ([B, H, T, K]) times w[h] ([H, K, N], or [H, N, K]
/// with `transposeW`): [B, H, T, N]. A batched tfm.matmul over the heads
/// of the rows of all sequences.
Value perHeadMatmul(PatternRewriter &b, Location loc, Value a, Value w,
                    bool transposeW) {
  auto at = cast<RankedTensorType>(a.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  Type elt = at.getElementType();
  int64_t bsz = at.getDimSize(0), h = at.getDimSize(1), t = at.getDimSize(2),
          k = at.getDimSize(3), n = wt.getDimSize(transposeW ? 1 : 2);
  int64_t rows = ShapedType::isDynamic(bsz) || ShapedType::isDynamic(t)
                     ? ShapedType::kDynamic
                     : bsz * t;
  Value byHead =
      TransposeOp::create(b, loc, RankedTensorType::get({h, bsz, t, k}, elt), a,
                          b.getDenseI64ArrayAttr({1, 0, 2, 3}));
  SmallVector<ReassociationIndices> groups{{0}, {1, 2}, {3}};
  Value flat = tensor::CollapseShapeOp::create(
      b, loc, RankedTensorType::get({h, rows, k}, elt), byHead, groups);
  Value prod =
      MatmulOp::create(b, loc, RankedTensorType::get({h, rows, n}, elt), flat,
                       w, /*transpose_lhs=*/false, transposeW);
  SmallVector<OpFoldResult> outShape{
      b.getIndexAttr(h), tensor::getMixedSize(b, loc, a, 0),
      tensor::getMixedSize(b, loc, a, 2), b.getIndexAttr(n)};
  Value split = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({h, bsz, t, n}, elt), prod, groups,
      outShape);
  return TransposeOp::create(b, loc, RankedTensorType::get({bsz, h, t, n}, elt),
                             split, b.getDenseI64ArrayAttr({1, 0, 2, 3}));
}

/// Multi-head latent attention in DeepSeek's absorbed form: every head
/// attends to the latent rows [c_kv, k_rope] (one KV head of kv_rank +
/// rope_dim values) with the query [q_nope W_uk[h], q_rope], and its
/// output o W_uv[h]^T. With a cache, the latents go into it and the
/// queries attend to it (tfm.attention); without, the textbook form, which
/// attention fusion matches as grouped-query attention of one KV head.
struct DecomposeLatentAttention : OpRewritePattern<LatentAttentionOp> {
  DecomposeLatentAttention(MLIRContext *ctx, bool naivePrefill = false,
                           PatternBenefit benefit = 1)
      : OpRewritePattern(ctx, benefit), naivePrefill(naivePrefill) {}
  bool naivePrefill;

  /// The naive form's keys [k_nope, k_rope] ([B, H, S, head_dim]) and
  /// values ([B, H, S, value_dim]) of the latent rows `c` ([B, S,
  /// kv_rank], normalized) and `kRope` ([B, 1, S, rope_dim], rotated): each
  /// head's [k_nope, v] = c W_kv_b^T, k_rope shared by the heads.
  static std::pair<Value, Value> naiveKeysValues(PatternRewriter &b,
                                                 Location loc,
                                                 LatentAttentionOp op, Value c,
                                                 Value kRope) {
    auto ct = cast<RankedTensorType>(c.getType());
    int64_t heads = op.getHeads(), rope = op.getRopeDim(),
            dv = op.getValueDim(), nope = op.getHeadDim() - rope;
    auto headsType = [&](int64_t d) {
      return RankedTensorType::get(
          {ct.getDimSize(0), heads, ct.getDimSize(1), d}, ct.getElementType());
    };
    Value kvh = SplitHeadsOp::create(b, loc, headsType(nope + dv),
                                     linear(b, loc, c, op.getWkvB(), {}),
                                     b.getI64IntegerAttr(heads));
    Value key = concatLast(b, loc, sliceDim(b, loc, kvh, 3, 0, nope),
                           RepeatKvOp::create(b, loc, headsType(rope), kRope,
                                              b.getI64IntegerAttr(heads)));
    return {key, sliceDim(b, loc, kvh, 3, nope, dv)};
  }

  /// The naive form over the cache `kc` (after this step's write): each
  /// head's keys [k_nope, k_rope] and values expanded from the cached
  /// latents of the first B sequences (all S slots), then attention of the
  /// queries [q_nope, q_rope]: [B, H, T, value_dim].
  Value naiveOverCache(PatternRewriter &b, Location loc, LatentAttentionOp op,
                       Value kc, Value qNope, Value qRope) const {
    auto qt = cast<RankedTensorType>(qNope.getType());
    Type elt = qt.getElementType();
    int64_t heads = op.getHeads(), rope = op.getRopeDim(),
            dv = op.getValueDim(), rank = op.getKvRank();
    int64_t dyn = ShapedType::kDynamic;
    auto ct = cast<RankedTensorType>(kc.getType());
    // The first B sequences' cache: [B, 1, L + R, S].
    SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, kc);
    sizes[0] = tensor::getMixedSize(b, loc, op.getInput(), 0);
    Value mine = tensor::ExtractSliceOp::create(
        b, loc,
        RankedTensorType::get({dyn, 1, ct.getDimSize(2), ct.getDimSize(3)},
                              elt),
        kc, SmallVector<OpFoldResult>(4, b.getIndexAttr(0)), sizes,
        SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
    auto rows = [&](Value t, int64_t width) -> Value {
      return TransposeOp::create(
          b, loc, RankedTensorType::get({dyn, 1, dyn, width}, elt), t,
          b.getDenseI64ArrayAttr({0, 1, 3, 2}));
    };
    // c [B, S, L] and k_rope [B, 1, S, R] as rows.
    Value c = tensor::CollapseShapeOp::create(
        b, loc, RankedTensorType::get({dyn, dyn, rank}, elt),
        rows(sliceDim(b, loc, mine, 2, 0, rank), rank),
        SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}});
    Value kRope = rows(sliceDim(b, loc, mine, 2, rank, rope), rope);
    auto [key, value] = naiveKeysValues(b, loc, op, c, kRope);
    Value query = concatLast(b, loc, qNope, qRope);
    return AttentionOp::create(
        b, loc,
        RankedTensorType::get({qt.getDimSize(0), heads, qt.getDimSize(2), dv},
                              elt),
        query, key, value, Value(), op.getLengths(), op.getPositions(), Value(),
        Value(), op.getMaskAttr(), IntegerAttr(), op.getScaleAttr(),
        FloatAttr(), DenseF64ArrayAttr(), IntegerAttr(), UnitAttr(), UnitAttr(),
        UnitAttr(), UnitAttr());
  }

  LogicalResult matchAndRewrite(LatentAttentionOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    auto xt = cast<RankedTensorType>(x.getType());
    Type elt = xt.getElementType();
    int64_t heads = op.getHeads(), hd = op.getHeadDim(), rope = op.getRopeDim(),
            dv = op.getValueDim(), rank = op.getKvRank(), nope = hd - rope;
    int64_t bsz = xt.getDimSize(0), t = xt.getDimSize(1);
    bool layer = op.getNormKind() == NormKind::layernorm;
    auto norm = [&](Value v, Value w) -> Value {
      auto vecType = RankedTensorType::get(
          {cast<RankedTensorType>(w.getType()).getDimSize(0)}, elt);
      Value zero = layer ? splat(b, loc, vecType, 0.0) : Value();
      return NormOp::create(b, loc, v.getType(), v, w, zero,
                            op.getNormKindAttr(), op.getNormEpsAttr(),
                            op.getNormOffsetAttr() ? op.getNormOffsetAttr()
                                                   : b.getF64FloatAttr(0.0));
    };
    auto headsType = [&](int64_t h, int64_t d) {
      return RankedTensorType::get({bsz, h, t, d}, elt);
    };
    // The query, per head [q_nope, q_rope].
    Value q =
        op.getWqA()
            ? linear(b, loc,
                     norm(linear(b, loc, x, op.getWqA(), {}), op.getQANorm()),
                     op.getWq(), {})
            : linear(b, loc, x, op.getWq(), {});
    Value qh = SplitHeadsOp::create(b, loc, headsType(heads, hd), q,
                                    b.getI64IntegerAttr(heads));
    Value qNope = sliceDim(b, loc, qh, 3, 0, nope);
    Value qRope = sliceDim(b, loc, qh, 3, nope, rope);
    // The latent [c_kv, k_rope] as one KV head [B, 1, T, ..].
    Value c = linear(b, loc, x, op.getWkvA(), {});
    Value ckvRows = norm(sliceDim(b, loc, c, 2, 0, rank), op.getKvANorm());
    Value ckv = SplitHeadsOp::create(b, loc, headsType(1, rank), ckvRows,
                                     b.getI64IntegerAttr(1));
    Value kRope = SplitHeadsOp::create(b, loc, headsType(1, rope),
                                       sliceDim(b, loc, c, 2, rank, rope),
                                       b.getI64IntegerAttr(1));
    Value positions = op.getPositions();
    if (auto invFreq = op.getRopeInvFreqAttr()) {
      qRope = RopeOp::create(b, loc, qRope, positions, invFreq,
                             op.getRopeStyleAttr(), op.getRopeScaleAttr());
      kRope = RopeOp::create(b, loc, kRope, positions, invFreq,
                             op.getRopeStyleAttr(), op.getRopeScaleAttr());
    }
    Value latent = concatLast(b, loc, ckv, kRope);
    // W_kv_b as [heads, nope + value_dim, kv_rank]: each head's W_uk rows
    // then its W_uv rows.
    Value wkvb = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({heads, nope + dv, rank}, elt),
        op.getWkvB(), SmallVector<ReassociationIndices>{{0, 1}, {2}});
    Value wuk = sliceDim(b, loc, wkvb, 1, 0, nope);
    Value wuv = sliceDim(b, loc, wkvb, 1, nope, dv);
    auto absorbedQuery = [&]() {
      return concatLast(b, loc,
                        perHeadMatmul(b, loc, qNope, wuk, /*transposeW=*/false),
                        qRope);
    };
    // Per (query, key) pair and head the absorbed form computes 2 kv_rank
    // + rope_dim products, the naive one head_dim + value_dim, after
    // expanding every key's latent, (nope + value_dim) x kv_rank per head:
    // the naive form wins from T = (nope + dv) kv_rank / (the difference)
    // query rows (where the keys are about T). `naive`: T is that many
    // (with naivePrefill and a difference to win).
    Value tRows, naive;
    if (int64_t saved = (2 * rank + rope) - (hd + dv);
        naivePrefill && saved > 0) {
      tRows = tensor::DimOp::create(b, loc, x, 1);
      naive = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::sge, tRows,
          arith::ConstantIndexOp::create(
              b, loc, llvm::divideCeil((nope + dv) * rank, saved)));
    }
    // `thenFn()` where `cond` holds at run time, else `elseFn()`: [B, H, T,
    // value_dim].
    auto either = [&](Value cond, function_ref<Value()> thenFn,
                      function_ref<Value()> elseFn) -> Value {
      auto ifOp = scf::IfOp::create(b, loc, TypeRange{headsType(heads, dv)},
                                    cond, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      scf::YieldOp::create(b, loc, thenFn());
      b.setInsertionPointToStart(&ifOp.getElseRegion().front());
      scf::YieldOp::create(b, loc, elseFn());
      return ifOp.getResult(0);
    };
    Value o;
    SmallVector<Value> results;
    if (auto cache = op.getCache(); !cache.empty()) {
      Value table = op.getBlockTable();
      Value kc =
          CacheWriteOp::create(b, loc, cache[0].getType(), latent, cache[0],
                               positions, table, b.getUnitAttr(), UnitAttr());
      // The absorbed form: the values are the cache's c_kv rows, read in
      // place ([B', 1, kv_rank, S], transposed); the output [B, H, T,
      // value_dim] after W_uv.
      auto absorbed = [&]() -> Value {
        Value vt = sliceDim(b, loc, kc, 2, 0, rank);
        Value a = AttentionOp::create(
            b, loc, headsType(heads, rank), absorbedQuery(), kc, vt, Value(),
            op.getLengths(), positions, Value(), table, op.getMaskAttr(),
            IntegerAttr(), op.getScaleAttr(), FloatAttr(), DenseF64ArrayAttr(),
            IntegerAttr(), UnitAttr(), b.getUnitAttr(), UnitAttr(),
            b.getUnitAttr());
        return perHeadMatmul(b, loc, a, wuv, /*transposeW=*/true);
      };
      // The naive form reads the cache as [B', 1, .., S]: not a paged one.
      if (naive && !table) {
        Value slots = tensor::DimOp::create(b, loc, kc, 3);
        Value dense = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::sle, slots,
            arith::MulIOp::create(b, loc, tRows,
                                  arith::ConstantIndexOp::create(b, loc, 4)));
        o = either(
            arith::AndIOp::create(b, loc, naive, dense),
            [&]() { return naiveOverCache(b, loc, op, kc, qNope, qRope); },
            absorbed);
      } else {
        o = absorbed();
      }
      results.push_back(kc);
    } else {
      // The textbook forms: the absorbed one (every head against the
      // latent rows), or the naive one (each head's keys and values from
      // the latents by kv_b).
      auto scoresType = RankedTensorType::get({bsz, heads, t, t}, elt);
      auto attend = [&](Value q, Value k, Value v, int64_t width) -> Value {
        Value s = MatmulOp::create(b, loc, scoresType, q, k,
                                   /*transpose_lhs=*/false,
                                   /*transpose_rhs=*/true);
        s = ScaleOp::create(b, loc, s, op.getScaleAttr());
        if (op.getMask() != MaskKind::none || op.getLengths())
          s = MaskOp::create(b, loc, scoresType, s, op.getLengths(),
                             op.getMaskAttr(), IntegerAttr());
        Value p = SoftmaxOp::create(b, loc, s.getType(), s, Value(),
                                    b.getI64IntegerAttr(3));
        return MatmulOp::create(b, loc, headsType(heads, width), p, v, false,
                                false);
      };
      auto rep = b.getI64IntegerAttr(heads);
      auto absorbed = [&]() -> Value {
        Value kh = RepeatKvOp::create(b, loc, headsType(heads, rank + rope),
                                      latent, rep);
        Value vh = RepeatKvOp::create(b, loc, headsType(heads, rank), ckv, rep);
        return perHeadMatmul(b, loc, attend(absorbedQuery(), kh, vh, rank), wuv,
                             /*transposeW=*/true);
      };
      auto naiveForm = [&]() -> Value {
        auto [k, v] = naiveKeysValues(b, loc, op, ckvRows, kRope);
        return attend(concatLast(b, loc, qNope, qRope), k, v, dv);
      };
      o = naive ? either(naive, naiveForm, absorbed) : absorbed();
    }
    Value merged = MergeHeadsOp::create(
        b, loc, RankedTensorType::get({bsz, t, heads * dv}, elt), o);
    results.insert(results.begin(), linear(b, loc, merged, op.getWo(), {}));
    b.replaceOp(op, results);
    return success();
  }
};

struct DecomposeFfn : OpRewritePattern<FfnOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(FfnOp op, PatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto biases = op.getBiases();
    bool gated = op.getGateWeight() != nullptr;
    // Without down's bias (tensor parallelism) there is one bias fewer.
    auto bias = [&](unsigned i) {
      return i < biases.size() ? biases[i] : Value();
    };
    Value up = linear(b, loc, op.getInput(), op.getUpWeight(), bias(0));
    Value h;
    MLIRContext *ctx = b.getContext();
    if (gated) {
      Value gate = linear(b, loc, op.getInput(), op.getGateWeight(), bias(1));
      Activation act = getGateActivation(op.getActivation());
      Value g =
          ActivationOp::create(b, loc, gate, ActivationAttr::get(ctx, act));
      if (auto upAct = getUpActivation(op.getActivation()))
        up = ActivationOp::create(b, loc, up, ActivationAttr::get(ctx, *upAct));
      h = MulOp::create(b, loc, g, up);
    } else {
      h = ActivationOp::create(b, loc, up, op.getActivationAttr());
    }
    b.replaceOp(op, linear(b, loc, h, op.getDownWeight(), bias(gated ? 2 : 1)));
    return success();
  }
};

/// An ffn of the rows of `x` as tfm.ffn computes it (linears, activation,
/// product), from weights up [F, D], gate [F, D] (or null), down [D, F] and
/// biases (null when absent).
Value ffnOf(PatternRewriter &b, Location loc, Value x, Activation act, Value up,
            Value gate, Value down, Value upBias, Value gateBias,
            Value downBias) {
  Value u = linear(b, loc, x, up, upBias);
  Value h;
  MLIRContext *ctx = b.getContext();
  if (gate) {
    Value g =
        ActivationOp::create(b, loc, linear(b, loc, x, gate, gateBias),
                             ActivationAttr::get(ctx, getGateActivation(act)));
    if (auto upAct = getUpActivation(act))
      u = ActivationOp::create(b, loc, u, ActivationAttr::get(ctx, *upAct));
    h = MulOp::create(b, loc, g, u);
  } else {
    h = ActivationOp::create(b, loc, u, ActivationAttr::get(ctx, act));
  }
  return linear(b, loc, h, down, downBias);
}

struct DecomposeMoe : OpRewritePattern<MoeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MoeOp op, PatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = op.getInput();
    Value logits = linear(b, loc, x, op.getRouterWeight(), op.getRouterBias());
    Value weights = RouteOp::create(
        b, loc, logits.getType(), logits, op.getSelectionBias(),
        op.getExpertsPerTokenAttr(), op.getRouterAttr(), op.getNormalizeAttr(),
        op.getRoutedScaleAttr(), op.getGroupsAttr(), op.getTopkGroupsAttr());
    Value y = MoeExpertsOp::create(
        b, loc, x.getType(), x, weights, op.getUpWeight(), op.getGateWeight(),
        op.getDownWeight(), op.getExpertBiases(), op.getActivationAttr());
    if (auto shared = op.getShared(); !shared.empty()) {
      bool gated = shared.size() == 3;
      Value s = ffnOf(b, loc, x, op.getActivation(), shared[0],
                      gated ? shared[1] : Value(), shared.back(), {}, {}, {});
      if (Value scale = op.getSharedScale())
        s = RowScaleOp::create(
            b, loc, s.getType(), s, linear(b, loc, x, scale, Value()),
            ActivationAttr::get(b.getContext(), Activation::sigmoid));
      y = AddOp::create(b, loc, y, s);
    }
    b.replaceOp(op, y);
    return success();
  }
};

/// `v` [E, ...] at [e]: [...].
Value expertSlice(PatternRewriter &b, Location loc, Value v, int64_t e) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<OpFoldResult> offsets(t.getRank(), b.getIndexAttr(0));
  offsets[0] = b.getIndexAttr(e);
  SmallVector<OpFoldResult> sizes;
  for (int64_t d : t.getShape())
    sizes.push_back(b.getIndexAttr(d));
  sizes[0] = b.getIndexAttr(1);
  auto type =
      RankedTensorType::get(t.getShape().drop_front(), t.getElementType());
  return tensor::ExtractSliceOp::create(
      b, loc, type, v, offsets, sizes,
      SmallVector<OpFoldResult>(t.getRank(), b.getIndexAttr(1)));
}

/// The reference form of tfm.moe_experts: every expert's ffn over every
/// row, weighted by its column of the routing weights, summed in expert
/// order.
struct DecomposeMoeExpertsDense : OpRewritePattern<MoeExpertsOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MoeExpertsOp op,
                                PatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto wt = cast<RankedTensorType>(op.getWeights().getType());
    int64_t experts = wt.getShape().back(), rank = wt.getRank();
    auto biases = op.getBiases();
    bool gated = op.getGateWeight() != nullptr;
    SmallVector<int64_t> colShape(wt.getShape());
    colShape.back() = 1;
    auto colType = RankedTensorType::get(colShape, wt.getElementType());
    Value acc;
    for (int64_t e = 0; e < experts; ++e) {
      auto at = [&](Value v) { return v ? expertSlice(b, loc, v, e) : v; };
      Value y =
          ffnOf(b, loc, op.getInput(), op.getActivation(), at(op.getUpWeight()),
                at(op.getGateWeight()), at(op.getDownWeight()),
                biases.empty() ? Value() : at(biases[0]),
                biases.empty() || !gated ? Value() : at(biases[1]),
                biases.empty() ? Value() : at(biases.back()));
      SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
      offsets.back() = b.getIndexAttr(e);
      SmallVector<OpFoldResult> sizes =
          tensor::getMixedSizes(b, loc, op.getWeights());
      sizes.back() = b.getIndexAttr(1);
      Value col = tensor::ExtractSliceOp::create(
          b, loc, colType, op.getWeights(), offsets, sizes,
          SmallVector<OpFoldResult>(rank, b.getIndexAttr(1)));
      y = RowScaleOp::create(b, loc, y.getType(), y, col, ActivationAttr());
      acc = acc ? AddOp::create(b, loc, acc, y).getResult() : y;
    }
    b.replaceOp(op, acc);
    return success();
  }
};

struct TfmDecomposePass : mlir::tfm::impl::TfmDecomposeBase<TfmDecomposePass> {
  using TfmDecomposeBase::TfmDecomposeBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDecomposePatterns(patterns);
    if (naiveLatentPrefill)
      patterns.add<DecomposeLatentAttention>(&getContext(),
                                             /*naivePrefill=*/true,
                                             /*benefit=*/2);
    if (denseExperts)
      patterns.add<DecomposeMoeExpertsDense>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::tfm::populateDecomposePatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeMultiHeadAttention, DecomposeLatentAttention,
               DecomposeFfn, DecomposeMoe>(patterns.getContext());
}
