//===- FuseAttention.cpp - softmax(Q K^T s + M) V to tfm.attention --------===//
//
// The pattern is rooted at the P V matmul and walks up through the softmax,
// the mask and the scale to the Q K^T matmul. Accepted spellings:
//   - scale on the scores, before or after the mask, and/or folded into Q:
//     tfm.scale, or a multiply (tfm.mul, arith.mulf) or divide (arith.divf)
//     by a splat constant; the factors multiply;
//   - K transposed by the matmul flag or by an explicit tfm.transpose of its
//     last two dimensions;
//   - the mask as tfm.mask (causal, sliding window, key lengths), as an
//     additive constant bias (0 where visible, -inf or <= -1e4 where masked:
//     tfm.add or arith.addf), or as arith.select of the scores against such
//     a constant under a constant condition; a constant mask is accepted
//     only when its contents prove it causal or a sliding window;
//   - K and V repeated for grouped-query attention (tfm.repeat_kv), which is
//     fused away: tfm.attention reads the shared heads;
//   - the score modifiers tfm.softcap, tfm.alibi and tfm.relative_bias, in
//     tfm.attention's order: scale, softcap, position biases (either order),
//     mask (which may also come between or before the biases, as a bias
//     does not change -inf). A scale between them, or a mask before the
//     softcap (tanh(-inf) is not -inf), is left unfused.
// Anything else (softmax over another axis, transposed V, a mask after the
// softmax, ...) is left alone and still computes the right answer.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"
#include "tfm/Transforms/Transforms.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include <cmath>

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMFUSEATTENTION
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The value of a splat floating-point constant.
std::optional<double> splatValue(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

/// A multiply or divide of `v` by a splat constant: the other operand and
/// the factor.
std::optional<std::pair<Value, double>> constantScale(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op)
    return std::nullopt;
  if (isa<MulOp, arith::MulFOp>(op)) {
    if (auto c = splatValue(op->getOperand(1)))
      return std::make_pair(op->getOperand(0), *c);
    if (auto c = splatValue(op->getOperand(0)))
      return std::make_pair(op->getOperand(1), *c);
  }
  if (auto div = dyn_cast<arith::DivFOp>(op))
    if (auto c = splatValue(div.getRhs()); c && *c != 0.0)
      return std::make_pair(div.getLhs(), 1.0 / *c);
  return std::nullopt;
}

/// What a constant mask proves: the kind and window.
struct ProvenMask {
  MaskKind kind;
  int64_t window = 0;
};

/// Classifies `visible` (one flag per score of a static [B, H, T, S] shape,
/// row-major): every [b, h] slice must be the same T x S pattern, and that
/// pattern all visible, causal (key j visible iff j <= i + S - T) or a
/// sliding window of the last W keys.
std::optional<ProvenMask> classifyMask(ArrayRef<int64_t> shape,
                                       ArrayRef<bool> visible) {
  if (shape.size() != 4 || ShapedType::isDynamicShape(shape))
    return std::nullopt;
  int64_t t = shape[2], s = shape[3], slice = t * s;
  for (int64_t k = slice; k < static_cast<int64_t>(visible.size()); ++k)
    if (visible[k] != visible[k % slice])
      return std::nullopt;
  auto at = [&](int64_t i, int64_t j) { return visible[i * s + j]; };
  bool all = true;
  for (int64_t k = 0; k < slice; ++k)
    all &= visible[k];
  if (all)
    return ProvenMask{MaskKind::none};
  // The window is what the last query row sees.
  int64_t w = 0;
  for (int64_t j = 0; j < s; ++j)
    w += at(t - 1, j);
  if (w == 0)
    return std::nullopt;
  for (MaskKind kind : {MaskKind::causal, MaskKind::sliding}) {
    bool ok = true;
    for (int64_t i = 0; i < t && ok; ++i)
      for (int64_t j = 0; j < s && ok; ++j) {
        int64_t pos = i + s - t;
        bool want = j <= pos && (kind == MaskKind::causal || j > pos - w);
        ok = at(i, j) == want;
      }
    if (ok)
      return ProvenMask{kind, kind == MaskKind::sliding ? w : 0};
  }
  return std::nullopt;
}

bool isMaskedValue(const APFloat &v) {
  return (v.isInfinity() && v.isNegative()) || v.convertToDouble() <= -1e4;
}

/// An additive constant bias on `v` (tfm.add or arith.addf): the other
/// operand and what the bias proves.
std::optional<std::pair<Value, ProvenMask>> constantBiasMask(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op || !isa<AddOp, arith::AddFOp>(op))
    return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    DenseElementsAttr attr;
    if (!matchPattern(op->getOperand(side), m_Constant(&attr)) ||
        !isa<FloatType>(attr.getElementType()))
      continue;
    SmallVector<bool> visible;
    for (const APFloat &x : attr.getValues<APFloat>()) {
      if (x.isZero())
        visible.push_back(true);
      else if (isMaskedValue(x))
        visible.push_back(false);
      else
        return std::nullopt; // a real bias, not a mask
    }
    auto shape = cast<ShapedType>(attr.getType()).getShape();
    if (attr.isSplat())
      visible.assign(ShapedType::getNumElements(shape), visible.front());
    if (auto m = classifyMask(shape, visible))
      return std::make_pair(op->getOperand(1 - side), *m);
    return std::nullopt;
  }
  return std::nullopt;
}

/// arith.select(cond, v, masked) with a constant condition.
std::optional<std::pair<Value, ProvenMask>> selectMask(Value v) {
  auto sel = v.getDefiningOp<arith::SelectOp>();
  if (!sel)
    return std::nullopt;
  auto fill = splatValue(sel.getFalseValue());
  DenseElementsAttr cond;
  if (!fill || !(std::isinf(*fill) ? *fill < 0 : *fill <= -1e4) ||
      !matchPattern(sel.getCondition(), m_Constant(&cond)))
    return std::nullopt;
  SmallVector<bool> visible(cond.getValues<bool>());
  auto shape = cast<ShapedType>(cond.getType()).getShape();
  if (cond.isSplat())
    visible.assign(ShapedType::getNumElements(shape), visible.front());
  if (auto m = classifyMask(shape, visible))
    return std::make_pair(sel.getTrueValue(), *m);
  return std::nullopt;
}

/// Strips a tfm.repeat_kv, returning its input and the repeat count.
std::pair<Value, int64_t> stripRepeat(Value v) {
  if (auto rep = v.getDefiningOp<RepeatKvOp>())
    return {rep.getInput(), rep.getRepeatsAttr().getInt()};
  return {v, 1};
}

struct FuseAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp pv,
                                PatternRewriter &b) const override {
    if (pv.getTransposeLhs() || pv.getTransposeRhs())
      return b.notifyMatchFailure(pv, "P or V is transposed");
    if (pv.getType().getRank() != 4)
      return b.notifyMatchFailure(pv, "not [B, H, T, D]");
    auto softmax = pv.getLhs().getDefiningOp<SoftmaxOp>();
    if (!softmax || softmax.getAxisAttr().getInt() != 3)
      return b.notifyMatchFailure(pv, "P is not a softmax over the keys");

    // Walking up from the softmax: masks and scales, position biases,
    // softcap, then the scales of Q K^T. `phase`: 0 before any
    // modifier, 1 after a position bias, 2 after the softcap, 3 after a
    // scale that comes before them.
    double scale = 1.0, postScale = 1.0;
    MaskOp mask;
    std::optional<ProvenMask> constMask;
    SoftcapOp softcap;
    AlibiOp alibi;
    RelativeBiasOp relative;
    int phase = 0;
    Value s = softmax.getInput();
    while (true) {
      bool haveMask = mask || constMask;
      std::optional<double> factor;
      Value next;
      if (auto sc = s.getDefiningOp<ScaleOp>()) {
        factor = sc.getFactor().convertToDouble();
        next = sc.getInput();
      } else if (auto cs = constantScale(s)) {
        next = cs->first;
        factor = cs->second;
      }
      if (factor) {
        // -inf * f stays -inf only for f > 0.
        if (haveMask && *factor <= 0.0)
          return b.notifyMatchFailure(pv, "non-positive scale after mask");
        if (phase == 0) {
          postScale *= *factor;
        } else {
          scale *= *factor;
          phase = 3;
        }
        s = next;
        continue;
      }
      if (phase >= 2 &&
          (s.getDefiningOp<MaskOp>() || s.getDefiningOp<AlibiOp>() ||
           s.getDefiningOp<RelativeBiasOp>() || s.getDefiningOp<SoftcapOp>()))
        return b.notifyMatchFailure(
            pv, "mask, bias or softcap before the softcap or the scale");
      if (auto m = s.getDefiningOp<MaskOp>()) {
        if (haveMask)
          return b.notifyMatchFailure(pv, "two masks");
        mask = m;
        s = m.getInput();
        continue;
      }
      if (auto a = s.getDefiningOp<AlibiOp>()) {
        if (alibi || postScale != 1.0)
          return b.notifyMatchFailure(pv, "two ALiBi biases or a scale after");
        alibi = a;
        phase = 1;
        s = a.getInput();
        continue;
      }
      if (auto r = s.getDefiningOp<RelativeBiasOp>()) {
        if (relative || postScale != 1.0)
          return b.notifyMatchFailure(pv,
                                      "two relative biases or a scale after");
        relative = r;
        phase = 1;
        s = r.getInput();
        continue;
      }
      if (auto c = s.getDefiningOp<SoftcapOp>()) {
        if (postScale != 1.0)
          return b.notifyMatchFailure(pv, "a scale after the softcap");
        softcap = c;
        phase = 2;
        s = c.getInput();
        continue;
      }
      if (phase == 0) {
        std::optional<std::pair<Value, ProvenMask>> cm = constantBiasMask(s);
        if (!cm)
          cm = selectMask(s);
        if (cm) {
          if (haveMask)
            return b.notifyMatchFailure(pv, "two masks");
          constMask = cm->second;
          s = cm->first;
          continue;
        }
      }
      break;
    }
    scale *= postScale;
    auto qk = s.getDefiningOp<MatmulOp>();
    if (!qk || qk.getTransposeLhs())
      return b.notifyMatchFailure(pv, "scores are not Q K^T");
    Value q = qk.getLhs(), k = qk.getRhs();
    if (!qk.getTransposeRhs()) {
      auto tr = k.getDefiningOp<TransposeOp>();
      if (!tr || tr.getPermutation() != ArrayRef<int64_t>{0, 1, 3, 2})
        return b.notifyMatchFailure(pv, "K is not transposed");
      k = tr.getInput();
    }
    while (true) {
      if (auto sc = q.getDefiningOp<ScaleOp>()) {
        scale *= sc.getFactor().convertToDouble();
        q = sc.getInput();
      } else if (auto cs = constantScale(q)) {
        scale *= cs->second;
        q = cs->first;
      } else {
        break;
      }
    }
    if ((mask || constMask) && scale <= 0.0)
      return b.notifyMatchFailure(pv, "non-positive scale with a mask");
    auto [k0, kRep] = stripRepeat(k);
    auto [v0, vRep] = stripRepeat(pv.getRhs());
    if (kRep != vRep) {
      // Only one of them is repeated: keep the repeat on neither side.
      k0 = k;
      v0 = pv.getRhs();
    }

    MaskKind kind = mask        ? mask.getKind()
                    : constMask ? constMask->kind
                                : MaskKind::none;
    IntegerAttr window = mask ? mask.getWindowAttr() : IntegerAttr();
    if (constMask && constMask->kind == MaskKind::sliding)
      window = b.getI64IntegerAttr(constMask->window);
    auto attn = AttentionOp::create(
        b, pv.getLoc(), pv.getType(), q, k0, v0,
        relative ? relative.getTable() : Value(),
        mask ? mask.getLengths() : Value(), /*positions=*/Value(),
        softmax.getSinks(), /*block_table=*/Value(),
        MaskKindAttr::get(b.getContext(), kind), window,
        b.getF64FloatAttr(scale), softcap ? softcap.getCapAttr() : FloatAttr(),
        alibi ? alibi.getSlopesAttr() : DenseF64ArrayAttr(),
        relative ? relative.getMaxDistanceAttr() : IntegerAttr(),
        relative ? relative.getBidirectionalAttr() : UnitAttr(),
        /*key_transposed=*/UnitAttr(), /*ring=*/UnitAttr());
    b.replaceOp(pv, attn.getResult());
    return success();
  }
};

struct TfmFuseAttentionPass
    : mlir::tfm::impl::TfmFuseAttentionBase<TfmFuseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseAttentionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::tfm::populateFuseAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseAttention>(patterns.getContext());
}
