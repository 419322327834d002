//===- LowerAttentionKernel.cpp - tfm.attention_kernel on the CPU ---------===//
//
// tfm.attention_kernel becomes one of two kernels (AttentionLowering.h):
// the prefill kernel, FlashAttention-2 style (LowerAttentionPrefill.cpp),
// or over a KV cache with few query rows per KV head, the decode kernel,
// flash decoding (LowerAttentionDecode.cpp). With a dynamic T both kernels
// are emitted, chosen by T at run time. This file holds what they share:
// the op's operands and shapes, the constants emitted before the kernel,
// the bounds of the visible keys and the computation of a block of scores
// (its modifiers and mask).
//
//===----------------------------------------------------------------------===//

#include "AttentionLowering.h"

#include "RuntimeFunctions.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::cpu;

AttentionLowering::AttentionLowering(AttentionKernelOp op, int64_t vl,
                                     int64_t keyVectors)
    : op(op), vl(vl) {
  q = op.getQuery();
  kt = op.getKey();
  v = op.getValue();
  out = op.getOutput();
  lengths = op.getLengths();
  positions = op.getPositions();
  bias = op.getBias();
  sinks = op.getSinks();
  ring = op.getRing() && positions;
  vTransposed = op.getValueTransposed();
  if ((table = op.getBlockTable())) {
    pageSize = cast<MemRefType>(kt.getType()).getDimSize(3);
    valuePaged = true;
  }
  d = cast<MemRefType>(q.getType()).getDimSize(3);
  dv = cast<MemRefType>(v.getType()).getDimSize(vTransposed ? 2 : 3);
  wv = vl;
  while (wv > 1 && dv % wv != 0)
    wv /= 2;
  chunks = dv / wv;
  bk = keyVectors * vl;
  kind = op.getMask();
  window = op.getWindowAttr() ? op.getWindowAttr().getInt() : 0;
  biasDistance = bias ? op.getBiasDistanceAttr().getInt() : int64_t(0);
  scale = op.getScale().convertToDouble();
  if (auto cap = op.getSoftcapAttr())
    softcap = cap.getValueAsDouble();
  slopes = op.getAlibiSlopes();
  MLIRContext *ctx = op.getContext();
  Type f32 = Float32Type::get(ctx);
  vk = VectorType::get({bk}, f32);
  vvT = VectorType::get({wv}, f32);
  maskT = VectorType::get({bk}, IntegerType::get(ctx, 1));
  idxV = VectorType::get({bk}, IndexType::get(ctx));
  i32V = VectorType::get({bk}, IntegerType::get(ctx, 32));
}

void AttentionLowering::emitCommon(OpBuilder &b, Location loc,
                                   const AttentionLowering *sizes) {
  if (sizes) {
    c0 = sizes->c0;
    c1 = sizes->c1;
    bsz = sizes->bsz;
    heads = sizes->heads;
    tq = sizes->tq;
    kvHeads = sizes->kvHeads;
    tk = sizes->tk;
  } else {
    c0 = cIdx(b, loc, 0);
    c1 = cIdx(b, loc, 1);
    bsz = dim(b, loc, q, 0);
    heads = dim(b, loc, q, 1);
    tq = dim(b, loc, q, 2);
    kvHeads = dim(b, loc, kt, 1);
    // A paged cache: M blocks a sequence.
    tk = table ? arith::MulIOp::create(b, loc, dim(b, loc, table, 1),
                                       cIdx(b, loc, pageSize))
                     .getResult()
               : dim(b, loc, kt, 3);
  }
  ninf = cF32(b, loc, -INFINITY);
  ninfV = vector::BroadcastOp::create(b, loc, vk, ninf);
  zeroVV = arith::ConstantOp::create(
      b, loc, vvT, DenseElementsAttr::get(vvT, b.getF32FloatAttr(0.0)));
  zeroK = arith::ConstantOp::create(
      b, loc, vk, DenseElementsAttr::get(vk, b.getF32FloatAttr(0.0)));
  scaleV = vector::BroadcastOp::create(b, loc, vk, cF32(b, loc, scale));
  lanes = vector::StepOp::create(b, loc, idxV);
}

std::pair<Value, Value> AttentionLowering::keySlot(OpBuilder &b, Location loc,
                                                   Value bi, Value j,
                                                   bool value) const {
  if (!table || (value && !valuePaged))
    return {bi, j};
  Value page = cIdx(b, loc, pageSize);
  Value block = memref::LoadOp::create(
      b, loc, table, ValueRange{bi, arith::DivUIOp::create(b, loc, j, page)});
  return {arith::IndexCastOp::create(b, loc, b.getIndexType(), block),
          arith::RemUIOp::create(b, loc, j, page)};
}

AttentionLowering::ValueRows AttentionLowering::valueRows(OpBuilder &b,
                                                          Location loc,
                                                          Value bi, Value j0,
                                                          Value limit) const {
  bool paged = table && valuePaged;
  auto [seq, first] = keySlot(b, loc, bi, j0, /*value=*/true);
  Value last = arith::SubIOp::create(b, loc, paged ? limit : tk, c1);
  return {seq, first, last, j0, paged};
}

Value AttentionLowering::ValueRows::at(OpBuilder &b, Location loc,
                                       Value jj) const {
  Value j = arith::MinSIOp::create(b, loc,
                                   arith::AddIOp::create(b, loc, j0, jj), last);
  if (!paged)
    return j;
  return arith::AddIOp::create(b, loc, first,
                               arith::SubIOp::create(b, loc, j, j0));
}

SmallVector<Value> AttentionLowering::forBlockKeys(
    OpBuilder &b, Location loc, ValueRange init,
    function_ref<SmallVector<Value>(OpBuilder &, Location, Value, ValueRange)>
        body) const {
  int64_t step = std::min<int64_t>(kKeysPerStep, bk);
  assert(bk % step == 0 && "a block's keys are a power of two");
  auto loop = scf::ForOp::create(
      b, loc, c0, cIdx(b, loc, bk), cIdx(b, loc, step), init,
      [&](OpBuilder &lb, Location ll, Value j, ValueRange acc) {
        SmallVector<Value> next(acc);
        for (int64_t u = 0; u < step; ++u)
          next = body(
              lb, ll,
              u ? arith::AddIOp::create(lb, ll, j, cIdx(lb, ll, u)).getResult()
                : j,
              next);
        scf::YieldOp::create(lb, ll, next);
      });
  return SmallVector<Value>(loop.getResults());
}

Value AttentionLowering::transposedValueCopy(OpBuilder &b, Location loc) const {
  auto vt = cast<MemRefType>(v.getType());
  int64_t dyn = ShapedType::kDynamic;
  SmallVector<Value> sizes{bsz};
  // A paged cache's copy holds the M x BS positions of each sequence.
  int64_t kvStatic = vt.getDimSize(1), sStatic = table ? dyn : vt.getDimSize(3);
  if (ShapedType::isDynamic(kvStatic))
    sizes.push_back(kvHeads);
  if (ShapedType::isDynamic(sStatic))
    sizes.push_back(tk);
  Value copy = memref::AllocOp::create(
      b, loc, MemRefType::get({dyn, kvStatic, sStatic, dv}, b.getF32Type()),
      sizes, b.getI64IntegerAttr(64));
  // Rows of V^T read contiguously, written as columns of V.
  auto par = scf::ParallelOp::create(
      b, loc, ValueRange{c0, c0, c0},
      ValueRange{bsz, kvHeads, cIdx(b, loc, dv)}, ValueRange{c1, c1, c1},
      [&](OpBuilder &nb, Location l, ValueRange ivs) {
        // A paged cache's slots past the sequence's last key may never have
        // been written: zeros there.
        Value limit =
            table ? sequenceBounds(nb, l, ivs[0], Value()).second : Value();
        forRange(nb, l, c0, tk, c1, [&](OpBuilder &jb, Location jl, Value j) {
          auto [seq, slot] = keySlot(jb, jl, ivs[0], j, /*value=*/true);
          Value x = memref::LoadOp::create(
              jb, jl, v, ValueRange{seq, ivs[1], ivs[2], slot});
          // An f16 or bf16 cache's values, copied as f32.
          if (!x.getType().isF32())
            x = arith::ExtFOp::create(jb, jl, jb.getF32Type(), x);
          if (limit)
            x = arith::SelectOp::create(
                jb, jl,
                arith::CmpIOp::create(jb, jl, arith::CmpIPredicate::slt, j,
                                      limit),
                x, cF32(jb, jl, 0.0));
          memref::StoreOp::create(jb, jl, x, copy,
                                  ValueRange{ivs[0], ivs[1], j, ivs[2]});
        });
      });
  markKeepParallel(par);
  return copy;
}

std::pair<Value, Value>
AttentionLowering::sequenceBounds(OpBuilder &nb, Location l, Value bi,
                                  Value alignedOffset) const {
  Value limit = tk;
  Value offset = alignedOffset;
  if (positions) {
    // A KV cache: this sequence's rows start at positions[b], and
    // nothing past its last row's position was written.
    Value p = memref::LoadOp::create(nb, l, positions, ValueRange{bi});
    offset = arith::MaxSIOp::create(
        nb, l, arith::IndexCastOp::create(nb, l, nb.getIndexType(), p), c0);
    Value end = arith::AddIOp::create(nb, l, offset, tq);
    // Positions, not slots, for a ring buffer.
    limit = ring ? end : arith::MinSIOp::create(nb, l, limit, end);
  }
  if (lengths) {
    Value len = memref::LoadOp::create(nb, l, lengths, ValueRange{bi});
    len = arith::IndexCastOp::create(nb, l, nb.getIndexType(), len);
    len = arith::MaxSIOp::create(nb, l, len, c0);
    limit = arith::MinSIOp::create(nb, l, limit, len);
  }
  return {offset, limit};
}

std::pair<Value, Value> AttentionLowering::rowBounds(OpBuilder &nb, Location l,
                                                     Value pos,
                                                     Value limit) const {
  Value h = limit;
  if (kind != MaskKind::none)
    h = arith::MinSIOp::create(nb, l, h, arith::AddIOp::create(nb, l, pos, c1));
  Value lw = c0;
  if (kind == MaskKind::sliding)
    lw = arith::MaxSIOp::create(
        nb, l, c0, arith::SubIOp::create(nb, l, pos, cIdx(nb, l, window - 1)));
  return {lw, h};
}

Value AttentionLowering::keyMask(OpBuilder &kb, Location kl, Value j0) const {
  Value valid = arith::SubIOp::create(kb, kl, tk, j0);
  return vector::CreateMaskOp::create(kb, kl, maskT, ValueRange{valid});
}

Value AttentionLowering::keyPositions(OpBuilder &kb, Location kl, Value j0,
                                      Value written) const {
  Value jv = arith::AddIOp::create(
      kb, kl, lanes, vector::BroadcastOp::create(kb, kl, idxV, j0));
  if (!ring)
    return jv;
  // Slot j holds position e - 1 - ((e - 1 - j) mod S), or none (-1) if
  // j >= e or j >= S.
  auto splat = [&](Value x) {
    return vector::BroadcastOp::create(kb, kl, idxV, x);
  };
  Value last = splat(arith::SubIOp::create(kb, kl, written, c1));
  Value back = arith::SubIOp::create(kb, kl, last, jv);
  // Lanes past the last slot hold nothing either.
  Value unwritten = arith::OrIOp::create(
      kb, kl,
      arith::CmpIOp::create(kb, kl, arith::CmpIPredicate::slt, back, splat(c0)),
      arith::CmpIOp::create(kb, kl, arith::CmpIPredicate::sge, jv, splat(tk)));
  Value held = arith::SubIOp::create(
      kb, kl, last,
      arith::RemSIOp::create(
          kb, kl, arith::MaxSIOp::create(kb, kl, back, splat(c0)), splat(tk)));
  return arith::SelectOp::create(kb, kl, unwritten, splat(cIdx(kb, kl, -1)),
                                 held);
}

Value AttentionLowering::loadF32(OpBuilder &b, Location loc, VectorType type,
                                 Value mem, ValueRange at, Value mask,
                                 Value pass) const {
  Type elt = cast<MemRefType>(mem.getType()).getElementType();
  if (elt == type.getElementType())
    return mask ? vector::MaskedLoadOp::create(b, loc, type, mem, at, mask,
                                               pass, IntegerAttr())
                      .getResult()
                : vector::LoadOp::create(b, loc, type, mem, at).getResult();
  auto narrow = VectorType::get(type.getShape(), elt);
  auto wide = [&](OpBuilder &nb, Location l) -> Value {
    return arith::ExtFOp::create(
        nb, l, type,
        vector::LoadOp::create(nb, l, narrow, mem, at).getResult());
  };
  if (!mask)
    return wide(b, loc);
  // x86 has no masked load of 16-bit elements before AVX-512, and LLVM
  // scalarizes one through f32 (bf16's through a call of __truncsfbf2,
  // which GCC 12's libgcc lacks): a whole block is one plain load, and the
  // block at the end of the keys (the mask covers lanes along the last
  // index) reads each lane as a scalar, its index clamped to the last one.
  Value full = vector::ReductionOp::create(b, loc, vector::CombiningKind::AND,
                                           mask, Value());
  auto ifOp = scf::IfOp::create(
      b, loc, full,
      [&](OpBuilder &tb, Location tl) {
        scf::YieldOp::create(tb, tl, wide(tb, tl));
      },
      [&](OpBuilder &eb, Location el) {
        SmallVector<Value> idx(at);
        int64_t last = cast<MemRefType>(mem.getType()).getRank() - 1;
        Value end = arith::SubIOp::create(
            eb, el, memref::DimOp::create(eb, el, mem, last), cIdx(eb, el, 1));
        SmallVector<Value> lanes;
        for (int64_t i = 0; i < type.getNumElements(); ++i) {
          idx.back() = arith::MinSIOp::create(
              eb, el, arith::AddIOp::create(eb, el, at.back(), cIdx(eb, el, i)),
              end);
          lanes.push_back(arith::ExtFOp::create(
              eb, el, type.getElementType(),
              memref::LoadOp::create(eb, el, mem, idx).getResult()));
        }
        Value v = vector::FromElementsOp::create(eb, el, type, lanes);
        scf::YieldOp::create(
            eb, el, arith::SelectOp::create(eb, el, mask, v, pass).getResult());
      });
  return ifOp.getResult(0);
}

SmallVector<Value> AttentionLowering::dotBlock(
    OpBuilder &kb, Location kl, Value bi, Value kvh, Value j0, Value kMask,
    int64_t rows,
    function_ref<std::pair<Value, Value>(int64_t)> queryAt) const {
  SmallVector<Value> init(rows, zeroK);
  Value seq, slot;
  std::tie(seq, slot) = keySlot(kb, kl, bi, j0);
  auto loop = scf::ForOp::create(
      kb, kl, c0, cIdx(kb, kl, d), c1, init,
      [&](OpBuilder &db, Location dl, Value dd, ValueRange acc) {
        Value kv = loadF32(db, dl, vk, kt, ValueRange{seq, kvh, dd, slot},
                           kMask, zeroK);
        SmallVector<Value> next;
        for (int64_t r = 0; r < rows; ++r) {
          auto [head, pos] = queryAt(r);
          Value qs =
              memref::LoadOp::create(db, dl, q, ValueRange{bi, head, pos, dd});
          Value qb = vector::BroadcastOp::create(db, dl, vk, qs);
          next.push_back(vector::FMAOp::create(db, dl, qb, kv, acc[r]));
        }
        scf::YieldOp::create(db, dl, next);
      });
  return SmallVector<Value>(loop.getResults());
}

Value AttentionLowering::scores(OpBuilder &kb, Location kl, Value qk, Value jv,
                                Value pos, Value lo, Value hi, Value head,
                                Value slopeV) const {
  Value s = arith::MulFOp::create(kb, kl, qk, scaleV);
  if (softcap)
    s = arith::MulFOp::create(
        kb, kl,
        math::TanhOp::create(
            kb, kl,
            arith::MulFOp::create(
                kb, kl, s,
                vector::BroadcastOp::create(kb, kl, vk,
                                            cF32(kb, kl, 1.0 / *softcap)))),
        vector::BroadcastOp::create(kb, kl, vk, cF32(kb, kl, *softcap)));
  if (slopes || bias) {
    // Distances j - pos of the block's keys.
    Value rel = arith::SubIOp::create(
        kb, kl, jv, vector::BroadcastOp::create(kb, kl, idxV, pos));
    if (slopes) {
      Value relF = arith::SIToFPOp::create(
          kb, kl, vk, arith::IndexCastOp::create(kb, kl, i32V, rel));
      s = vector::FMAOp::create(kb, kl, slopeV, relF, s);
    }
    if (bias) {
      auto splatIdx = [&](int64_t x) {
        return vector::BroadcastOp::create(kb, kl, idxV, cIdx(kb, kl, x));
      };
      Value at = arith::AddIOp::create(
          kb, kl,
          arith::MaxSIOp::create(
              kb, kl,
              arith::MinSIOp::create(kb, kl, rel, splatIdx(biasDistance)),
              splatIdx(-biasDistance)),
          splatIdx(biasDistance));
      Value all = vector::ConstantMaskOp::create(
          kb, kl, maskT, vector::ConstantMaskKind::AllTrue);
      s = arith::AddFOp::create(kb, kl, s,
                                vector::GatherOp::create(kb, kl, vk, bias,
                                                         ValueRange{head, c0},
                                                         at, all, zeroK));
    }
  }
  Value in = arith::AndIOp::create(
      kb, kl,
      arith::CmpIOp::create(kb, kl, arith::CmpIPredicate::slt, jv,
                            vector::BroadcastOp::create(kb, kl, idxV, hi)),
      arith::CmpIOp::create(kb, kl, arith::CmpIPredicate::sge, jv,
                            vector::BroadcastOp::create(kb, kl, idxV, lo)));
  return arith::SelectOp::create(kb, kl, in, s, ninfV);
}

Value AttentionLowering::withSink(OpBuilder &nb, Location l, Value sum,
                                  Value head, Value m, bool base2) const {
  if (!sinks)
    return sum;
  Value sink = memref::LoadOp::create(nb, l, sinks, ValueRange{head});
  Value none = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OEQ, m, ninf);
  Value e = base2 ? Value(math::Exp2Op::create(
                        nb, l,
                        arith::SubFOp::create(
                            nb, l,
                            arith::MulFOp::create(
                                nb, l, sink, cF32(nb, l, 1.4426950408889634)),
                            m)))
                  : Value(math::ExpOp::create(
                        nb, l, arith::SubFOp::create(nb, l, sink, m)));
  return arith::SelectOp::create(nb, l, none, sum,
                                 arith::AddFOp::create(nb, l, sum, e));
}

Value AttentionLowering::inverseSum(OpBuilder &nb, Location l,
                                    Value sum) const {
  Value pos0 = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OGT, sum,
                                     cF32(nb, l, 0.0));
  return arith::SelectOp::create(
      nb, l, pos0, arith::DivFOp::create(nb, l, cF32(nb, l, 1.0), sum),
      cF32(nb, l, 0.0));
}

namespace {

/// The decode kernel takes an attention over a KV cache when the query rows
/// of one KV head (T x group) are at most this many, or T is 1: few enough
/// that reading each block of K and V once for all of them beats the
/// prefill kernel's register-held output blocks.
constexpr int64_t kDecodeMaxRows = 16;

struct LowerAttentionKernel : OpRewritePattern<AttentionKernelOp> {
  LowerAttentionKernel(MLIRContext *ctx, int64_t vl)
      : OpRewritePattern(ctx), vl(vl) {}
  int64_t vl;

  LogicalResult matchAndRewrite(AttentionKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureBufferSemantics())
      return b.notifyMatchFailure(op, "not bufferized yet");
    auto qt = cast<MemRefType>(op.getQuery().getType());
    if (qt.isDynamicDim(3) ||
        cast<MemRefType>(op.getValue().getType())
            .isDynamicDim(op.getValueTransposed() ? 2 : 3))
      return b.notifyMatchFailure(op, "head dimensions must be static");
    Location loc = op.getLoc();
    AttentionLowering a(op, vl);
    // A block of keys the kernels read must lie in one page: the decode
    // kernel's are at most 4 vectors.
    if (a.table && (a.pageSize % (4 * vl) != 0 || a.pageSize % a.bk != 0))
      return op.emitOpError()
             << "a paged KV cache needs blocks of a multiple of " << 4 * vl
             << " positions on this CPU, not " << a.pageSize;
    a.emitCommon(b, loc);
    std::optional<int64_t> group = op.getDecodeGroup();
    std::optional<AttentionLowering> dec;
    if (group) {
      // Decode: blocks of keys as wide as the scores of a register block
      // of rows allow (longer contiguous runs of each row of K^T).
      dec.emplace(op, vl, decodeKeyVectors(vl, *group));
      dec->emitCommon(b, loc, &a);
    }
    // The prefill kernel reads V as [B, KV, S, Dv]: transposed values go
    // to it as a transposed copy.
    auto prefill = [&](OpBuilder &pb, Location pl) {
      if (!a.vTransposed)
        return a.emitPrefill(pb, pl);
      AttentionLowering pa = a;
      pa.v = a.transposedValueCopy(pb, pl);
      pa.valuePaged = false;
      pa.emitPrefill(pb, pl);
      memref::DeallocOp::create(pb, pl, pa.v);
    };
    if (!group) {
      prefill(b, loc);
      b.eraseOp(op);
      return success();
    }
    // Over a KV cache: the decode kernel for few query rows per KV head,
    // decided at run time unless T is static.
    int64_t maxT = std::max<int64_t>(1, kDecodeMaxRows / *group);
    if (!qt.isDynamicDim(2) && qt.getDimSize(2) > maxT) {
      prefill(b, loc);
      b.eraseOp(op);
      return success();
    }
    declareRuntimeFunction(b, op, kThreadsFn,
                           b.getFunctionType({}, {b.getI32Type()}));
    if (!qt.isDynamicDim(2)) {
      dec->emitDecode(b, loc, *group);
      b.eraseOp(op);
      return success();
    }
    Value decode = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule,
                                         a.tq, cIdx(b, loc, maxT));
    scf::IfOp::create(
        b, loc, decode,
        [&](OpBuilder &tb, Location tl) {
          dec->emitDecode(tb, tl, *group);
          scf::YieldOp::create(tb, tl);
        },
        [&](OpBuilder &eb, Location el) {
          prefill(eb, el);
          scf::YieldOp::create(eb, el);
        });
    b.eraseOp(op);
    return success();
  }
};

} // namespace

void cpu::populateLowerAttentionKernelPattern(RewritePatternSet &patterns,
                                              int64_t vectorWidth) {
  patterns.add<LowerAttentionKernel>(patterns.getContext(), vectorWidth);
}
