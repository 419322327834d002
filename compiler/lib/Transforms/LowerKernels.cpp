//===- LowerKernels.cpp - kernel ops to vector loop nests -----------------===//
//
// tfm.linear_kernel: out[M, N] = A[M, K] * W^T + bias, with W packed in
// panels [P, K, PW] (PW output columns, zero-padded). A broadcast-FMA
// micro-kernel keeps an MR x (PW / VL vectors) block of the output in
// registers while streaming one contiguous panel: per k it loads the panel's
// row of PW weights and broadcasts MR elements of A. Panels are distributed
// over threads (scf.parallel, later OpenMP); rows run in blocks of MR with a
// one-row remainder loop, and a partial last panel stores through masks.
//
// tfm.attention_kernel: online softmax (running max and sum in f32,
// rescaled accumulator) per query row, keys visited only inside the causal /
// sliding window / length bounds, K/V read from the shared head for grouped
// queries, parallel over batch x heads. No buffer larger than one row of the
// head dimension is used.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include <cmath>

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMLOWERKERNELS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Marks loops that must stay parallel (tfm-parallelize-outer keeps them).
constexpr StringLiteral kKeepParallel = "tfm.keep_parallel";

Value cIdx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}
Value cF32(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}
Value dim(OpBuilder &b, Location loc, Value m, int64_t i) {
  return memref::DimOp::create(b, loc, m, i);
}

struct LowerLinearKernel : OpRewritePattern<LinearKernelOp> {
  LowerLinearKernel(MLIRContext *ctx, int64_t vl)
      : OpRewritePattern(ctx), vl(vl) {}
  int64_t vl;
  static constexpr int64_t kRows = 8; // MR

  LogicalResult matchAndRewrite(LinearKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureBufferSemantics())
      return b.notifyMatchFailure(op, "not bufferized yet");
    Location loc = op.getLoc();
    Value a = op.getInput(), wp = op.getWeightP(), bias = op.getBias(),
          out = op.getOutput();
    auto wType = cast<MemRefType>(wp.getType());
    int64_t panels = wType.getDimSize(0), k = wType.getDimSize(1),
            panel = wType.getDimSize(2);
    int64_t n = cast<MemRefType>(out.getType()).getDimSize(1);
    if (panel % vl != 0)
      return b.notifyMatchFailure(op, "panel width is not whole vectors");
    int64_t kCols = panel / vl;
    int64_t tail = n % panel; // columns in a partial last panel (0: none)
    auto vt = VectorType::get({vl}, b.getF32Type());
    auto maskT = VectorType::get({vl}, b.getI1Type());
    Value m = dim(b, loc, a, 0);
    Value c0 = cIdx(b, loc, 0), c1 = cIdx(b, loc, 1);
    Value zeroV = arith::ConstantOp::create(
        b, loc, vt, DenseElementsAttr::get(vt, b.getF32FloatAttr(0.0)));

    // Emits the micro-kernel for rows [m0, m0 + rows) and the panel at n0;
    // `masks` (or empty) limit the columns of a partial panel.
    // The micro-kernel for rows [m0, m0 + rows) of panel `p` (columns
    // n0 = p * panel ...); `masks` (or empty) limit a partial last panel.
    auto microKernel = [&](OpBuilder &nb, Location l, Value m0, int64_t rows,
                           Value p, ArrayRef<Value> masks) {
      Value n0 = arith::MulIOp::create(nb, l, p, cIdx(nb, l, panel));
      SmallVector<Value> colIdx, laneIdx;
      for (int64_t c = 0; c < kCols; ++c) {
        colIdx.push_back(arith::AddIOp::create(nb, l, n0, cIdx(nb, l, c * vl)));
        laneIdx.push_back(cIdx(nb, l, c * vl));
      }
      auto loadBias = [&](OpBuilder &bb, Location ll, int64_t c) -> Value {
        if (masks.empty())
          return vector::LoadOp::create(bb, ll, vt, bias, colIdx[c]);
        return vector::MaskedLoadOp::create(bb, ll, vt, bias, colIdx[c],
                                            masks[c], zeroV, IntegerAttr());
      };
      SmallVector<Value> init;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < kCols; ++c)
          init.push_back(bias ? loadBias(nb, l, c) : zeroV);
      auto loop = scf::ForOp::create(
          nb, l, cIdx(nb, l, 0), cIdx(nb, l, k), cIdx(nb, l, 1), init,
          [&](OpBuilder &bb, Location ll, Value kk, ValueRange acc) {
            // The panel is zero-padded: whole-vector loads are in bounds.
            SmallVector<Value> w;
            for (int64_t c = 0; c < kCols; ++c)
              w.push_back(vector::LoadOp::create(
                  bb, ll, vt, wp, ValueRange{p, kk, laneIdx[c]}));
            SmallVector<Value> next;
            for (int64_t r = 0; r < rows; ++r) {
              Value row = arith::AddIOp::create(bb, ll, m0, cIdx(bb, ll, r));
              Value s = memref::LoadOp::create(bb, ll, a, ValueRange{row, kk});
              Value sv = vector::BroadcastOp::create(bb, ll, vt, s);
              for (int64_t c = 0; c < kCols; ++c)
                next.push_back(vector::FMAOp::create(bb, ll, sv, w[c],
                                                     acc[r * kCols + c]));
            }
            scf::YieldOp::create(bb, ll, next);
          });
      for (int64_t r = 0; r < rows; ++r) {
        Value row = arith::AddIOp::create(nb, l, m0, cIdx(nb, l, r));
        for (int64_t c = 0; c < kCols; ++c) {
          Value v = loop.getResult(r * kCols + c);
          if (masks.empty())
            vector::StoreOp::create(nb, l, v, out,
                                    ValueRange{row, colIdx[c]});
          else
            vector::MaskedStoreOp::create(nb, l, out,
                                          ValueRange{row, colIdx[c]},
                                          masks[c], v, IntegerAttr());
        }
      }
    };

    // All rows of one panel.
    auto panelBody = [&](OpBuilder &nb, Location l, Value n0,
                         ArrayRef<Value> masks) {
      // (n0 is the panel index.)
      Value rem = arith::RemUIOp::create(nb, l, m, cIdx(nb, l, kRows));
      Value mFull = arith::SubIOp::create(nb, l, m, rem);
      scf::ForOp::create(nb, l, c0, mFull, cIdx(nb, l, kRows), ValueRange{},
                         [&](OpBuilder &bb, Location ll, Value m0, ValueRange) {
                           microKernel(bb, ll, m0, kRows, n0, masks);
                           scf::YieldOp::create(bb, ll);
                         });
      scf::ForOp::create(nb, l, mFull, m, c1, ValueRange{},
                         [&](OpBuilder &bb, Location ll, Value m0, ValueRange) {
                           microKernel(bb, ll, m0, 1, n0, masks);
                           scf::YieldOp::create(bb, ll);
                         });
    };

    int64_t fullPanels = tail ? panels - 1 : panels;
    if (fullPanels > 0) {
      auto par = scf::ParallelOp::create(
          b, loc, ValueRange{c0}, ValueRange{cIdx(b, loc, fullPanels)},
          ValueRange{c1}, [&](OpBuilder &nb, Location l, ValueRange ivs) {
            panelBody(nb, l, ivs[0], {});
          });
      par->setAttr(kKeepParallel, b.getUnitAttr());
    }
    if (tail) {
      Value n0 = cIdx(b, loc, fullPanels);
      SmallVector<Value> masks;
      for (int64_t c = 0; c < kCols; ++c) {
        int64_t valid = std::clamp<int64_t>(tail - c * vl, 0, vl);
        masks.push_back(vector::CreateMaskOp::create(
            b, loc, maskT, ValueRange{cIdx(b, loc, valid)}));
      }
      panelBody(b, loc, n0, masks);
    }
    b.eraseOp(op);
    return success();
  }
};

struct LowerAttentionKernel : OpRewritePattern<AttentionKernelOp> {
  LowerAttentionKernel(MLIRContext *ctx, int64_t vl)
      : OpRewritePattern(ctx), vl(vl) {}
  int64_t vl;

  LogicalResult matchAndRewrite(AttentionKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureBufferSemantics())
      return b.notifyMatchFailure(op, "not bufferized yet");
    Location loc = op.getLoc();
    Value q = op.getQuery(), k = op.getKey(), v = op.getValue(),
          out = op.getOutput(), lengths = op.getLengths();
    auto qt = cast<MemRefType>(q.getType());
    auto vtT = cast<MemRefType>(v.getType());
    if (qt.isDynamicDim(3) || vtT.isDynamicDim(3))
      return b.notifyMatchFailure(op, "head dimensions must be static");
    int64_t d = qt.getDimSize(3), dv = vtT.getDimSize(3);
    auto width = [&](int64_t n) {
      int64_t w = vl;
      while (w > 1 && n % w != 0)
        w /= 2;
      return w;
    };
    int64_t wq = width(d), wv = width(dv);
    auto vq = VectorType::get({wq}, b.getF32Type());
    auto vv = VectorType::get({wv}, b.getF32Type());
    MaskKind kind = op.getMask();
    int64_t window = op.getWindowAttr() ? op.getWindowAttr().getInt() : 0;
    float scale = op.getScale().convertToDouble();

    Value c0 = cIdx(b, loc, 0), c1 = cIdx(b, loc, 1);
    Value bsz = dim(b, loc, q, 0), heads = dim(b, loc, q, 1),
          tq = dim(b, loc, q, 2), kvHeads = dim(b, loc, k, 1),
          tk = dim(b, loc, k, 2);
    Value group = arith::DivUIOp::create(b, loc, heads, kvHeads);
    Value offset = arith::SubIOp::create(b, loc, tk, tq);

    auto par = scf::ParallelOp::create(
        b, loc, ValueRange{c0, c0}, ValueRange{bsz, heads},
        ValueRange{c1, c1}, [&](OpBuilder &nb, Location l, ValueRange ivs) {
          Value bi = ivs[0], hi = ivs[1];
          Value kvh = arith::DivUIOp::create(nb, l, hi, group);
          Value limit = tk;
          if (lengths) {
            Value len = memref::LoadOp::create(nb, l, lengths, ValueRange{bi});
            len = arith::IndexCastOp::create(nb, l, nb.getIndexType(), len);
            len = arith::MaxSIOp::create(nb, l, len, c0);
            limit = arith::MinSIOp::create(nb, l, limit, len);
          }
          scf::ForOp::create(
              nb, l, c0, tq, c1, ValueRange{},
              [&](OpBuilder &bb, Location ll, Value i, ValueRange) {
                Value pos = arith::AddIOp::create(bb, ll, i, offset);
                Value hiKey = limit;
                Value loKey = c0;
                if (kind != MaskKind::none)
                  hiKey = arith::MinSIOp::create(
                      bb, ll, hiKey,
                      arith::AddIOp::create(bb, ll, pos, c1));
                if (kind == MaskKind::sliding)
                  loKey = arith::MaxSIOp::create(
                      bb, ll, c0,
                      arith::SubIOp::create(bb, ll, pos,
                                            cIdx(bb, ll, window - 1)));
                // The query row, pre-scaled.
                SmallVector<Value> qv;
                Value sv = vector::BroadcastOp::create(bb, ll, vq,
                                                       cF32(bb, ll, scale));
                for (int64_t c = 0; c < d; c += wq) {
                  Value x = vector::LoadOp::create(
                      bb, ll, vq, q,
                      ValueRange{bi, hi, i, cIdx(bb, ll, c)});
                  qv.push_back(arith::MulFOp::create(bb, ll, x, sv));
                }
                SmallVector<Value> init{cF32(bb, ll, -INFINITY),
                                        cF32(bb, ll, 0.0)};
                Value zv = arith::ConstantOp::create(
                    bb, ll, vv,
                    DenseElementsAttr::get(vv, bb.getF32FloatAttr(0.0)));
                for (int64_t c = 0; c < dv; c += wv)
                  init.push_back(zv);
                auto keys = scf::ForOp::create(
                    bb, ll, loKey,
                    arith::MaxSIOp::create(bb, ll, loKey, hiKey), c1, init,
                    [&](OpBuilder &kb, Location kl, Value j, ValueRange st) {
                      Value dot;
                      for (int64_t c = 0, ci = 0; c < d; c += wq, ++ci) {
                        Value kv = vector::LoadOp::create(
                            kb, kl, vq, k,
                            ValueRange{bi, kvh, j, cIdx(kb, kl, c)});
                        dot = dot ? Value(vector::FMAOp::create(kb, kl, qv[ci],
                                                                kv, dot))
                                  : Value(arith::MulFOp::create(kb, kl, qv[ci],
                                                                kv));
                      }
                      Value s = vector::ReductionOp::create(
                          kb, kl, vector::CombiningKind::ADD, dot);
                      Value mOld = st[0], lOld = st[1];
                      Value mNew = arith::MaximumFOp::create(kb, kl, mOld, s);
                      Value corr = math::ExpOp::create(
                          kb, kl, arith::SubFOp::create(kb, kl, mOld, mNew));
                      Value p = math::ExpOp::create(
                          kb, kl, arith::SubFOp::create(kb, kl, s, mNew));
                      Value lNew = arith::AddFOp::create(
                          kb, kl, arith::MulFOp::create(kb, kl, lOld, corr), p);
                      Value corrV = vector::BroadcastOp::create(kb, kl, vv, corr);
                      Value pV = vector::BroadcastOp::create(kb, kl, vv, p);
                      SmallVector<Value> next{mNew, lNew};
                      for (int64_t c = 0, ci = 0; c < dv; c += wv, ++ci) {
                        Value x = vector::LoadOp::create(
                            kb, kl, vv, v,
                            ValueRange{bi, kvh, j, cIdx(kb, kl, c)});
                        Value acc = arith::MulFOp::create(kb, kl, st[2 + ci],
                                                          corrV);
                        next.push_back(
                            vector::FMAOp::create(kb, kl, pV, x, acc));
                      }
                      scf::YieldOp::create(kb, kl, next);
                    });
                // out = acc / l, or zeros when no key was visible.
                Value lFin = keys.getResult(1);
                Value pos0 = arith::CmpFOp::create(
                    bb, ll, arith::CmpFPredicate::OGT, lFin, cF32(bb, ll, 0.0));
                Value inv = arith::SelectOp::create(
                    bb, ll, pos0,
                    arith::DivFOp::create(bb, ll, cF32(bb, ll, 1.0), lFin),
                    cF32(bb, ll, 0.0));
                Value invV = vector::BroadcastOp::create(bb, ll, vv, inv);
                for (int64_t c = 0, ci = 0; c < dv; c += wv, ++ci)
                  vector::StoreOp::create(
                      bb, ll,
                      arith::MulFOp::create(bb, ll, keys.getResult(2 + ci),
                                            invV),
                      out, ValueRange{bi, hi, i, cIdx(bb, ll, c)});
                scf::YieldOp::create(bb, ll);
              });
        });
    par->setAttr(kKeepParallel, b.getUnitAttr());
    b.eraseOp(op);
    return success();
  }
};

struct TfmLowerKernelsPass
    : mlir::tfm::impl::TfmLowerKernelsBase<TfmLowerKernelsPass> {
  using TfmLowerKernelsBase::TfmLowerKernelsBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateLowerKernelPatterns(patterns, vectorWidth);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    WalkResult r = getOperation().walk([](Operation *op) {
      if (isa<LinearKernelOp, AttentionKernelOp>(op)) {
        op->emitError("tfm-lower-kernels could not lower this kernel");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void mlir::tfm::populateLowerKernelPatterns(RewritePatternSet &patterns,
                                            int64_t vectorWidth) {
  patterns.add<LowerLinearKernel, LowerAttentionKernel>(patterns.getContext(),
                                                        vectorWidth);
}
