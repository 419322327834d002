//===- TfmToLinalgKernels.cpp - tfm compute ops to kernel ops -------------===//
//
// The two compute-heavy ops, tfm.linear (and tfm.patch_embed, a linear over
// image patches) and tfm.attention, become the destination-style kernel ops
// tfm.linear_kernel and tfm.attention_kernel, which One-Shot Bufferize turns
// into their buffer form (BufferizableOpInterface) and tfm-lower-kernels /
// tfm-gpu-lower-kernels into hand-blocked code. tfm.matmul (unfused
// attention) becomes a batched linalg.generic contraction.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "TfmToLinalgUtils.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::linalg_lowering;
using utils::IteratorType;

namespace {

/// The epilogue of a linear (tfm.linear's `activation`, `mul`, `residual`;
/// the last two of the result's shape [..., N]).
struct Epilogue {
  ActivationAttr activation;
  Value mul, residual;
};

/// Emits x[..., K] times the weight (packed as [P, K, W] in `weightP`, with
/// `n` real columns; or, `ggml` given, in the ggml blocks it views) plus
/// bias, then the epilogue, through tfm.linear_kernel (or
/// tfm.ggml_linear_kernel).
Value emitLinear(OpBuilder &b, Location loc, Value x, Value weightP, int64_t n,
                 Value bias, const Epilogue &epilogue = {},
                 GgmlWeightOp ggml = {}) {
  Value x2 = asMatrix(b, loc, x);
  auto x2t = tensorType(x2);
  auto outType =
      RankedTensorType::get({x2t.getDimSize(0), n}, x2t.getElementType());
  Value init = emptyTensor(b, loc, outType, {{x2, 0}, {x2, 1}});
  // The residual keeps its shape: collapsed, it would fold into the matrix
  // of the linear before it, which tfm-outline-layers would then see cross
  // from one layer to the next instead of the residual stream.
  Value mul = epilogue.mul ? asMatrix(b, loc, epilogue.mul) : Value();
  Value res =
      ggml ? GgmlLinearKernelOp::create(b, loc, TypeRange{outType}, x2,
                                        ggml.getRows(), ggml.getGgmlType(),
                                        bias, mul, epilogue.residual, init,
                                        epilogue.activation)
                 .getResult()[0]
           : LinearKernelOp::create(b, loc, TypeRange{outType}, x2, weightP,
                                    bias, mul, epilogue.residual, init,
                                    epilogue.activation)
                 .getResult()[0];
  // The sizes of a residual stream, rather than the input's: a layer's
  // output then has the sizes of the model's input, as the layers outlined
  // into one function need (tfm-outline-layers).
  return withLeadingDimsOf(b, loc, res,
                           epilogue.residual ? epilogue.residual : x, n);
}

struct LowerLinear : OpConversionPattern<LinearOp> {
  LowerLinear(MLIRContext *ctx, int64_t panel)
      : OpConversionPattern(ctx), panel(panel) {}
  int64_t panel;
  LogicalResult matchAndRewrite(LinearOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    int64_t n = tensorType(adaptor.getWeight()).getDimSize(0);
    // A weight in ggml blocks goes to its kernel as the blocks.
    if (auto ggml = op.getWeight().getDefiningOp<GgmlWeightOp>()) {
      b.replaceOp(op, emitLinear(b, loc, adaptor.getInput(), Value(), n,
                                 adaptor.getBias(),
                                 {op.getActivationAttr(), adaptor.getMul(),
                                  adaptor.getResidual()},
                                 ggml));
      return success();
    }
    Value wp = packedWeight(b, loc, op.getWeight(), adaptor.getWeight(), panel);
    b.replaceOp(op,
                emitLinear(b, loc, adaptor.getInput(), wp, n, adaptor.getBias(),
                           {op.getActivationAttr(), adaptor.getMul(),
                            adaptor.getResidual()}));
    return success();
  }
};

struct LowerAttention : OpConversionPattern<AttentionOp> {
  /// With `keepValueTransposed` a transposed value goes to the kernel as it
  /// is (the CPU kernels read it); otherwise as a transposed copy.
  LowerAttention(MLIRContext *ctx, bool keepValueTransposed = false,
                 PatternBenefit benefit = 1)
      : OpConversionPattern(ctx, benefit),
        keepValueTransposed(keepValueTransposed) {}
  bool keepValueTransposed;

  LogicalResult matchAndRewrite(AttentionOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto rt = op.getType();
    Value q = adaptor.getQuery(), v = adaptor.getValue();
    bool valueTransposed = op.getValueTransposed() && keepValueTransposed;
    if (op.getValueTransposed() && !keepValueTransposed)
      v = transposeTensor(b, loc, v, {0, 1, 3, 2});
    Value init = emptyTensor(b, loc, rt,
                             {{q, 0},
                              {q, 1},
                              {q, 2},
                              {v, valueTransposed ? int64_t(2) : int64_t(3)}});
    // The kernel streams K^T ([B, KV, D, S]): one transposed copy of K,
    // unless K is kept transposed (a KV cache).
    Value kt = op.getKeyTransposed()
                   ? adaptor.getKey()
                   : transposeTensor(b, loc, adaptor.getKey(), {0, 1, 3, 2});
    // The relative bias, tabulated by distance for the kernel:
    // bias[h, r + M] = table[bucket(r), h] for r in [-M, M].
    Value bias;
    IntegerAttr distance;
    if (Value table = adaptor.getRelative()) {
      auto tt = tensorType(table);
      int64_t m = op.getRelativeMaxDistanceAttr().getInt();
      int64_t buckets = tt.getDimSize(0);
      bool bidirectional = op.getRelativeBidirectional();
      auto biasType =
          RankedTensorType::get({tt.getDimSize(1), 2 * m + 1}, b.getF32Type());
      bias = generic(
          b, loc, ValueRange{}, {}, emptyTensor(b, loc, biasType, {}),
          [&](OpBuilder &nb, Location l, ValueRange) {
            Value h = linalg::IndexOp::create(nb, l, 0);
            Value r = linalg::IndexOp::create(nb, l, 1);
            Value rel = arith::SubIOp::create(nb, l, r, constIdx(nb, l, m));
            Value bucket =
                relativeBucketOf(nb, l, rel, buckets, m, bidirectional);
            return toF32(
                nb, l,
                tensor::ExtractOp::create(nb, l, table, ValueRange{bucket, h}));
          });
      distance = b.getI64IntegerAttr(m);
    }
    auto kernel = AttentionKernelOp::create(
        b, loc, TypeRange{rt}, q, kt, v, adaptor.getLengths(),
        adaptor.getPositions(), bias, adaptor.getSinks(),
        adaptor.getBlockTable(), init, op.getMaskAttr(), op.getWindowAttr(),
        op.getScaleAttr(), op.getSoftcapAttr(), op.getAlibiSlopesAttr(),
        distance, op.getRingAttr(),
        valueTransposed ? b.getUnitAttr() : UnitAttr());
    b.replaceOp(op, kernel.getResult()[0]);
    return success();
  }
};

/// `x` (f32) rounded to the nearest bf16, ties to even, NaN kept: in
/// integer ops, since LLVM lowers an f32 -> bf16 truncation on x86 without
/// AVX512_BF16 to a call of __truncsfbf2, which GCC 12's libgcc lacks (and
/// so does any select of bf16 values: hence no select here).
static Value roundToBF16(OpBuilder &b, Location loc, Value x) {
  Type i32 = b.getI32Type();
  auto c = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, v, 32);
  };
  Value bits = arith::BitcastOp::create(b, loc, i32, x);
  // A NaN gets its quiet bit, so that rounding cannot make it infinite.
  Value nan = arith::ExtUIOp::create(
      b, loc, i32,
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x));
  bits = arith::OrIOp::create(b, loc, bits,
                              arith::ShLIOp::create(b, loc, nan, c(22)));
  Value lsb = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, c(16)), c(1));
  Value rounded = arith::AddIOp::create(
      b, loc, bits, arith::AddIOp::create(b, loc, c(0x7FFF), lsb));
  Value high = arith::TruncIOp::create(
      b, loc, b.getI16Type(), arith::ShRUIOp::create(b, loc, rounded, c(16)));
  return arith::BitcastOp::create(b, loc, b.getBF16Type(), high);
}

/// tfm.cache_write: for each sequence b, the cache's window at positions[b]
/// is extracted, overwritten by a linalg.generic copying the update's
/// [KV, T, D] block (transposing it for a key cache: the transpose is the
/// generic's indexing map) and inserted back; bufferized in place, this
/// writes the block straight into the cache, with no copy of the cache. A
/// ring buffer is written one position at a time, at slot p mod S; a paged
/// cache one run of positions per block the update reaches.
struct LowerCacheWrite : OpConversionPattern<CacheWriteOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(CacheWriteOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Value update = adaptor.getUpdate(), cache = adaptor.getCache(),
          positions = adaptor.getPositions(), table = adaptor.getBlockTable();
    bool transposed = op.getTransposed(), ring = op.getRing();
    auto ut = tensorType(update);
    // A cache of f16 or bf16 holds the update rounded (--kv-cache).
    Type elt = tensorType(cache).getElementType();
    bool round = elt != ut.getElementType();
    int64_t posDim = transposed ? 3 : 2;
    Value c0 = constIdx(b, loc, 0), c1 = constIdx(b, loc, 1);
    auto dim = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
    AffineMap in =
        transposed ? AffineMap::get(4, 0, {dim(0), dim(1), dim(3), dim(2)}, ctx)
                   : b.getMultiDimIdentityMap(4);
    // Copies update[b, :, t0 : t0 + n, :] to the cache at position `at` of
    // its entry `dst` (a sequence, or a paged cache's block).
    auto write = [&](OpBuilder &nb, Location l, Value into, Value bi,
                     OpFoldResult t0, OpFoldResult n, Value at,
                     Value dst) -> Value {
      SmallVector<OpFoldResult> ones(4, nb.getIndexAttr(1));
      auto size = [&](int64_t i) -> OpFoldResult {
        return ut.isDynamicDim(i) ? OpFoldResult(dimOf(nb, l, update, i))
                                  : nb.getIndexAttr(ut.getDimSize(i));
      };
      SmallVector<OpFoldResult> srcOff{OpFoldResult(bi), nb.getIndexAttr(0), t0,
                                       nb.getIndexAttr(0)};
      SmallVector<OpFoldResult> srcSizes{nb.getIndexAttr(1), size(1), n,
                                         size(3)};
      Value block =
          tensor::ExtractSliceOp::create(nb, l, update, srcOff, srcSizes, ones);
      SmallVector<OpFoldResult> dstOff{OpFoldResult(dst), nb.getIndexAttr(0),
                                       nb.getIndexAttr(0), nb.getIndexAttr(0)};
      dstOff[posDim] = OpFoldResult(at);
      SmallVector<OpFoldResult> dstSizes(srcSizes);
      if (transposed)
        std::swap(dstSizes[2], dstSizes[3]);
      std::optional<int64_t> nStatic = getConstantIntValue(n);
      int64_t nDim = nStatic ? *nStatic : ShapedType::kDynamic;
      SmallVector<int64_t> dstShape{1, ut.getDimSize(1),
                                    transposed ? ut.getDimSize(3) : nDim,
                                    transposed ? nDim : ut.getDimSize(3)};
      Value window = tensor::ExtractSliceOp::create(
          nb, l, RankedTensorType::get(dstShape, elt), into, dstOff, dstSizes,
          ones);
      Value written =
          generic(nb, l, ValueRange{block}, {in}, window,
                  [&](OpBuilder &gb, Location gl, ValueRange a) -> Value {
                    if (!round)
                      return a[0];
                    if (elt.isBF16() && a[0].getType().isF32())
                      return roundToBF16(gb, gl, a[0]);
                    return arith::TruncFOp::create(gb, gl, elt, a[0]);
                  });
      return tensor::InsertSliceOp::create(nb, l, written, into, dstOff,
                                           dstSizes, ones);
    };
    auto loop = scf::ForOp::create(
        b, loc, c0, dimOf(b, loc, update, 0), c1, ValueRange{cache},
        [&](OpBuilder &nb, Location l, Value bi, ValueRange iter) {
          Value p = positionOf(nb, l, positions, bi);
          if (table) {
            // Block g of the sequence takes the update's positions
            // [max(g * BS, p), min((g + 1) * BS, p + T)).
            Value bs = dimOf(nb, l, cache, posDim);
            Value t = dimOf(nb, l, update, 2);
            Value end = arith::AddIOp::create(nb, l, p, t);
            Value g0 = arith::DivUIOp::create(nb, l, p, bs);
            Value g1 = arith::CeilDivUIOp::create(nb, l, end, bs);
            auto pages = scf::ForOp::create(
                nb, l, g0, g1, c1, ValueRange{iter[0]},
                [&](OpBuilder &gb, Location gl, Value g, ValueRange it) {
                  Value lo = arith::MaxUIOp::create(
                      gb, gl, arith::MulIOp::create(gb, gl, g, bs), p);
                  Value hi = arith::MinUIOp::create(
                      gb, gl,
                      arith::MulIOp::create(
                          gb, gl, arith::AddIOp::create(gb, gl, g, c1), bs),
                      end);
                  Value block = arith::IndexCastOp::create(
                      gb, gl, gb.getIndexType(),
                      tensor::ExtractOp::create(gb, gl, table,
                                                ValueRange{bi, g}));
                  scf::YieldOp::create(
                      gb, gl,
                      write(gb, gl, it[0], bi,
                            OpFoldResult(arith::SubIOp::create(gb, gl, lo, p)),
                            OpFoldResult(arith::SubIOp::create(gb, gl, hi, lo)),
                            arith::RemUIOp::create(gb, gl, lo, bs), block));
                });
            scf::YieldOp::create(nb, l, pages.getResult(0));
            return;
          }
          if (!ring) {
            OpFoldResult t = ut.isDynamicDim(2)
                                 ? OpFoldResult(dimOf(nb, l, update, 2))
                                 : nb.getIndexAttr(ut.getDimSize(2));
            scf::YieldOp::create(
                nb, l, write(nb, l, iter[0], bi, nb.getIndexAttr(0), t, p, bi));
            return;
          }
          Value slots = dimOf(nb, l, cache, posDim);
          auto inner = scf::ForOp::create(
              nb, l, c0, dimOf(nb, l, update, 2), c1, ValueRange{iter[0]},
              [&](OpBuilder &ib, Location il, Value t, ValueRange it) {
                Value slot = arith::RemUIOp::create(
                    ib, il, arith::AddIOp::create(ib, il, p, t), slots);
                scf::YieldOp::create(ib, il,
                                     write(ib, il, it[0], bi, OpFoldResult(t),
                                           ib.getIndexAttr(1), slot, bi));
              });
          scf::YieldOp::create(nb, l, inner.getResult(0));
        });
    b.replaceOp(op, loop.getResult(0));
    return success();
  }
};

struct LowerMatmul : OpConversionPattern<MatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MatmulOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
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

struct LowerPatchEmbed : OpConversionPattern<PatchEmbedOp> {
  LowerPatchEmbed(MLIRContext *ctx, int64_t panel)
      : OpConversionPattern(ctx), panel(panel) {}
  int64_t panel;
  LogicalResult matchAndRewrite(PatchEmbedOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value px = adaptor.getPixels();
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
    Value wp = packedWeight(b, loc, op.getWeight(), adaptor.getWeight(), panel);
    int64_t n = tensorType(adaptor.getWeight()).getDimSize(0);
    b.replaceOp(op, emitLinear(b, loc, flat, wp, n, adaptor.getBias()));
    return success();
  }
};

/// tfm.all_reduce -> tfm.all_reduce_kernel into a new tensor.
struct LowerAllReduce : OpConversionPattern<AllReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AllReduceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    Value init = emptyLike(b, loc, x);
    b.replaceOp(op, AllReduceKernelOp::create(b, loc, TypeRange{x.getType()}, x,
                                              adaptor.getBias(), init)
                        .getResult()[0]);
    return success();
  }
};

/// tfm.all_gather [..., C] -> tfm.all_gather_kernel on [rows, C].
struct LowerAllGather : OpConversionPattern<AllGatherOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AllGatherOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    Value x2 = asMatrix(b, loc, x);
    auto x2t = tensorType(x2);
    int64_t cols = op.getType().getShape().back();
    auto outType =
        RankedTensorType::get({x2t.getDimSize(0), cols}, x2t.getElementType());
    Value init = emptyTensor(b, loc, outType, {{x2, 0}});
    Value res = AllGatherKernelOp::create(b, loc, TypeRange{outType}, x2, init)
                    .getResult()[0];
    b.replaceOp(op, withLeadingDimsOf(b, loc, res, x, cols));
    return success();
  }
};

/// tfm.norm of f32 rows as tfm.norm_kernel on their matrix [rows, K].
struct LowerNormToKernel : OpConversionPattern<NormOp> {
  LowerNormToKernel(MLIRContext *ctx)
      : OpConversionPattern(ctx, /*benefit=*/2) {}
  LogicalResult matchAndRewrite(NormOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Value x = adaptor.getInput();
    auto t = tensorType(x);
    if (!t.getElementType().isF32() || t.getRank() < 2 ||
        t.isDynamicDim(t.getRank() - 1))
      return b.notifyMatchFailure(op, "not f32 rows of a static width");
    Location loc = op.getLoc();
    // Rows in the input's shape: a post-norm residual stream then crosses
    // layers as [B, T, K], not as the matrix of its rows, which the linears
    // of the next layer would otherwise read (see emitLinear).
    Value y = NormKernelOp::create(b, loc, TypeRange{t}, x, adaptor.getWeight(),
                                   adaptor.getBias(), emptyLike(b, loc, x),
                                   op.getKindAttr(), op.getEpsAttr(),
                                   op.getOffsetAttr())
                  .getResult()[0];
    b.replaceOp(op, y);
    return success();
  }
};

/// A tfm.norm_kernel with f32 rows that only linears of packed weights (all
/// bf16 pairs or all int8 quads) take as their input (through the collapse
/// of its rows to a matrix): the norm writes the packed rows [M, C], which
/// the linears then read instead of packing them each. The normalized f32
/// rows are never stored.
struct PackNormForLinears : OpRewritePattern<NormKernelOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NormKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureTensorSemantics() ||
        op.getPacking() != NormKernelOp::Packing::None)
      return failure();
    Type weightElt;
    // The linears, and the sizes asked of the rows or of their matrix.
    SmallVector<LinearKernelOp> readers;
    SmallVector<tensor::DimOp> sizes, matrixSizes;
    SmallVector<Operation *> collapses;
    // A use of the rows (or, `matrix`, of their [M, K] collapse).
    auto visit = [&](OpOperand &use, bool matrix) -> LogicalResult {
      Operation *user = use.getOwner();
      int64_t rank = tensorType(use.get()).getRank();
      if (auto d = dyn_cast<tensor::DimOp>(user)) {
        std::optional<int64_t> index = d.getConstantIndex();
        if (!index || *index == rank - 1)
          return failure();
        (matrix ? matrixSizes : sizes).push_back(d);
        return success();
      }
      auto linear = dyn_cast<LinearKernelOp>(user);
      if (!linear || use.getOperandNumber() != 0 || rank != 2)
        return failure();
      Type elt =
          cast<ShapedType>(linear.getWeightP().getType()).getElementType();
      if (NormKernelOp::packingOf(elt) == NormKernelOp::Packing::None ||
          (weightElt && elt != weightElt))
        return failure();
      weightElt = elt;
      readers.push_back(linear);
      return success();
    };
    Value rows = op.getResult()[0];
    bool rowsAreMatrix = tensorType(rows).getRank() == 2;
    for (OpOperand &use : rows.getUses()) {
      auto collapse = dyn_cast<tensor::CollapseShapeOp>(use.getOwner());
      if (!collapse) {
        if (failed(visit(use, /*matrix=*/rowsAreMatrix)))
          return b.notifyMatchFailure(op, "its rows are read by something "
                                          "but a linear of packed weights");
        continue;
      }
      if (collapse.getResultType().getRank() != 2)
        return b.notifyMatchFailure(op, "collapsed to something but a matrix");
      for (OpOperand &cuse : collapse.getResult().getUses())
        if (failed(visit(cuse, /*matrix=*/true)))
          return b.notifyMatchFailure(op, "a matrix of its rows is read by "
                                          "something but a linear of packed "
                                          "weights");
      collapses.push_back(collapse);
    }
    if (readers.empty())
      return failure();
    auto inT = tensorType(op.getInput());
    int64_t k = inT.getDimSize(inT.getRank() - 1),
            m = leadingRows(inT.getShape());
    auto packedT = RankedTensorType::get(
        {m, NormKernelOp::packedColumns(NormKernelOp::packingOf(weightElt), k)},
        weightElt);
    Location loc = op.getLoc();
    Value init;
    if (ShapedType::isDynamic(m)) {
      Value mv = constIdx(b, loc, 1);
      for (int64_t i = 0; i + 1 < inT.getRank(); ++i)
        mv = arith::MulIOp::create(b, loc, mv, dimOf(b, loc, op.getInput(), i));
      init = tensor::EmptyOp::create(b, loc, packedT.getShape(), weightElt,
                                     ValueRange{mv});
    } else {
      init = tensor::EmptyOp::create(b, loc, packedT.getShape(), weightElt,
                                     ValueRange{});
    }
    Value packed = NormKernelOp::create(b, loc, TypeRange{packedT},
                                        op.getInput(), op.getWeight(),
                                        op.getBias(), init, op.getKindAttr(),
                                        op.getEpsAttr(), op.getOffsetAttr())
                       .getResult()[0];
    for (LinearKernelOp linear : readers)
      b.modifyOpInPlace(linear,
                        [&] { linear.getInputMutable().assign(packed); });
    // The rows' leading sizes are the input's; their matrix's, the packed
    // rows'.
    for (tensor::DimOp d : sizes)
      b.modifyOpInPlace(d, [&] { d.getSourceMutable().assign(op.getInput()); });
    for (tensor::DimOp d : matrixSizes)
      b.modifyOpInPlace(d, [&] { d.getSourceMutable().assign(packed); });
    for (Operation *c : collapses)
      b.eraseOp(c);
    b.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::tfm::populateTfmNormToKernelPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerNormToKernel>(patterns.getContext());
}

void mlir::tfm::populateTfmPackNormForLinearsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<PackNormForLinears>(patterns.getContext());
}

void mlir::tfm::populateTfmTransposedValueAttentionPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerAttention>(patterns.getContext(),
                               /*keepValueTransposed=*/true,
                               /*benefit=*/2);
}

void mlir::tfm::populateTfmKernelOpsToLinalgPatterns(
    RewritePatternSet &patterns, int64_t panelWidth) {
  patterns.add<LowerAttention, LowerCacheWrite, LowerMatmul, LowerAllReduce,
               LowerAllGather>(patterns.getContext());
  patterns.add<LowerLinear, LowerPatchEmbed>(patterns.getContext(), panelWidth);
}
