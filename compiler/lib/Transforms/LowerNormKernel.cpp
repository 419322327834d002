//===- LowerNormKernel.cpp - tfm.norm_kernel as one pass over the rows ----===//
//
// tfm.norm_kernel: rows in parallel; a row's sum (layernorm), then its
// sum of squares (of x - mean for layernorm), 16 columns a vector, while
// the row stays in L1, then the normalized values, stored as the output's
// element type says (storePackedRow: f32, or bf16 pairs or int8 quads for
// the linear that reads them). One pass over the input where the linalg
// form of tfm.norm makes three (mean, variance, values).
//
//===----------------------------------------------------------------------===//

#include "CpuKernelBuilders.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::cpu;

namespace {

struct LowerNormKernel : OpRewritePattern<NormKernelOp> {
  // Vectors of 16 lanes whatever the target's width (two on AVX2).
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(NormKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureBufferSemantics())
      return b.notifyMatchFailure(op, "not bufferized yet");
    Location loc = op.getLoc();
    Value x = op.getInput(), w = op.getWeight(), bias = op.getBias(),
          out = op.getOutput();
    auto xType = cast<MemRefType>(x.getType());
    int64_t k = xType.getDimSize(xType.getRank() - 1);
    bool layer = op.getKind() == NormKind::layernorm;
    double eps = op.getEps().convertToDouble();
    double offset = op.getOffset().convertToDouble();
    Type f32 = b.getF32Type();
    auto f32V = VectorType::get({16}, f32);
    Value c0 = cIdx(b, loc, 0), c1 = cIdx(b, loc, 1);
    // Rows: the input's leading dimensions (the output is [..., K] like
    // the input, or the packed [M, C]).
    Value m = c1;
    for (int64_t i = 0; i + 1 < xType.getRank(); ++i)
      m = arith::MulIOp::create(b, loc, m, dim(b, loc, x, i));
    auto par = scf::ParallelOp::create(
        b, loc, ValueRange{c0}, ValueRange{m}, ValueRange{c1},
        [&](OpBuilder &pb, Location pl, ValueRange ivs) {
          Value row = ivs[0];
          // The row of the input [..., K], its leading dimensions split.
          SmallVector<Value> xRow = rowIndices(pb, pl, x, row);
          auto at = [&](Value col) {
            SmallVector<Value> idx(xRow);
            idx.push_back(col);
            return idx;
          };
          Value zeroV = arith::ConstantOp::create(
              pb, pl, f32V,
              DenseElementsAttr::get(f32V, pb.getF32FloatAttr(0)));
          auto load = [&](OpBuilder &lb, Location ll, Value from, ValueRange at,
                          Value mask) -> Value {
            if (!mask)
              return vector::LoadOp::create(lb, ll, f32V, from, at);
            return vector::MaskedLoadOp::create(lb, ll, f32V, from, at, mask,
                                                zeroV);
          };
          auto splat = [&](OpBuilder &sb, Location sl, Value v) {
            return vector::BroadcastOp::create(sb, sl, f32V, v);
          };
          // sum over the row of f(x chunk, mask), masked lanes excluded.
          auto rowSum =
              [&](function_ref<Value(OpBuilder &, Location, Value, Value)> f) {
                int64_t whole = k / 16;
                auto loop = scf::ForOp::create(
                    pb, pl, c0, cIdx(pb, pl, whole * 16), cIdx(pb, pl, 16),
                    ValueRange{zeroV},
                    [&](OpBuilder &fb, Location fl, Value col, ValueRange acc) {
                      Value v = load(fb, fl, x, at(col), Value());
                      scf::YieldOp::create(
                          fb, fl,
                          ValueRange{arith::AddFOp::create(
                              fb, fl, acc[0], f(fb, fl, v, Value()))});
                    });
                Value acc = loop.getResult(0);
                if (k % 16) {
                  Value mask = vector::CreateMaskOp::create(
                      pb, pl, VectorType::get({16}, pb.getI1Type()),
                      ValueRange{cIdx(pb, pl, k % 16)});
                  Value v = load(pb, pl, x, at(cIdx(pb, pl, whole * 16)), mask);
                  acc = arith::AddFOp::create(pb, pl, acc, f(pb, pl, v, mask));
                }
                return vector::ReductionOp::create(
                    pb, pl, vector::CombiningKind::ADD, acc);
              };
          Value invK = cF32(pb, pl, 1.0 / double(k));
          Value mean;
          if (layer)
            mean = arith::MulFOp::create(
                pb, pl,
                rowSum([](OpBuilder &, Location, Value v, Value) { return v; }),
                invK);
          Value ss =
              rowSum([&](OpBuilder &fb, Location fl, Value v, Value mask) {
                if (layer) {
                  v = arith::SubFOp::create(fb, fl, v, splat(fb, fl, mean));
                  if (mask)
                    v = arith::SelectOp::create(fb, fl, mask, v, zeroV);
                }
                return Value(arith::MulFOp::create(fb, fl, v, v));
              });
          Value rstd = math::RsqrtOp::create(
              pb, pl,
              arith::AddFOp::create(pb, pl,
                                    arith::MulFOp::create(pb, pl, ss, invK),
                                    cF32(pb, pl, eps)));
          storePackedRow(
              pb, pl,
              [&](OpBuilder &cb, Location cl, Value col, Value mask) -> Value {
                Value v = load(cb, cl, x, at(col), mask);
                if (layer)
                  v = arith::SubFOp::create(cb, cl, v, splat(cb, cl, mean));
                Value g = load(cb, cl, w, ValueRange{col}, mask);
                if (offset != 0.0)
                  g = arith::AddFOp::create(
                      cb, cl, g, splat(cb, cl, cF32(cb, cl, offset)));
                v = arith::MulFOp::create(
                    cb, cl,
                    arith::MulFOp::create(cb, cl, v, splat(cb, cl, rstd)), g);
                if (bias)
                  v = arith::AddFOp::create(
                      cb, cl, v, load(cb, cl, bias, ValueRange{col}, mask));
                // Lanes past K are 0 (the packed forms' padding).
                if (mask)
                  v = arith::SelectOp::create(cb, cl, mask, v, zeroV);
                return v;
              },
              k, out, row);
          scf::ReduceOp::create(pb, pl);
        });
    markKeepParallel(par);
    b.eraseOp(op);
    return success();
  }
};

} // namespace

void cpu::populateLowerNormKernelPattern(RewritePatternSet &patterns) {
  patterns.add<LowerNormKernel>(patterns.getContext());
}
