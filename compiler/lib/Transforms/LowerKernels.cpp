//===- LowerKernels.cpp - kernel ops to vector loop nests -----------------===//
//
// tfm.linear_kernel: out[M, N] = A[M, K] * W^T + bias, with W packed in
// panels [P, K, PW] (PW = 2 vectors of output columns, zero-padded). A
// broadcast-FMA register tile keeps MR x 2 vectors of the output in
// registers (MR = 8 on AVX-512, 6 on AVX2) while streaming one contiguous
// panel: per k it loads the panel's row of PW weights and broadcasts MR
// elements of A. The work is cut in tasks of about 128 rows x 4 panels,
// distributed over threads in both directions (scf.parallel, later
// OpenMP), so that M = 1 and a narrow N keep every core busy and a task's
// panels stay in L2 for its rows. Rows past the last whole tile take
// smaller tiles (4, 2, 1 rows); a partial last panel stores through masks.
// The epilogue (activation, product with `mul`, sum with `residual`) is
// applied to the accumulators before they are stored: no pass of its own
// over the output.
//
// With weights in bf16 pairs of K (a bf16 model on AVX512_BF16), A is
// first rounded to bf16 pairs and vdpbf16ps multiplies pairs; with weights
// in int8 quads of K (--quantize=int8 on AVX512_VNNI), A is first quantized
// per row (scale max |x| / 127, offset by 128 to unsigned bytes) and
// vpdpbusd multiplies quads into i32, which the epilogue corrects by the
// column sums, converts and scales by the column and row scales.
//
// tfm.attention_kernel: FlashAttention-2 style on the CPU. A task takes a
// tile of query rows of one (sequence, head) and keeps the tile's output
// accumulators, running maxes and lane-wise running sums on its stack (a
// head wider than 16 vectors accumulates in its output rows instead). It
// passes over the keys in superblocks that stay in L2, each met by every
// group of 8 rows of the tile in turn, in blocks of two vector registers
// of keys: S = Q K^T as a register tile (one contiguous vector of K^T per
// head dimension, broadcast-FMA'd into every row), scores in base-2 units,
// the running max raised (and the row's state rescaled) only when a score
// passes it by a threshold (2^8), P = exp2(S - max) on full vectors (a
// polynomial) into a small buffer, then P V as register tiles of the
// accumulators with P broadcast from that buffer. Key blocks entirely
// above the causal diagonal, outside the sliding window or past the key
// lengths are skipped, partial ones masked by lane; K/V are read from the
// shared head for grouped queries; a row that sees no key gives zeros.
// The score modifiers apply to each block of scores before the mask:
// softcap (tanh, expanded to a polynomial later), ALiBi (the head's slope
// times the distance vector) and the position bias by distance (a gather
// from the [H, 2M + 1] table with clamped distances); block skipping is
// unchanged.
//
// Over a KV cache (`positions`) with few query rows per KV head (decode:
// T x group <= 16, or T = 1) a second kernel, flash decoding, takes over:
// a task per sequence, KV head and split of the keys computes all the
// query rows of the KV head's group together, so that each block of K and
// V is read once for the group, and keeps its partial softmax (max, sum,
// unnormalized output) in a workspace; a merge step combines the splits
// with log-sum-exp rescaling. The keys are split when batch x KV heads is
// smaller than the number of threads (tfm_get_threads, read at run time),
// in splits of at least 256 keys. With a dynamic T both kernels are
// emitted, chosen by T at run time.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"
#include "tfm/Transforms/Transforms.h"

#include "RuntimeFunctions.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include <cmath>

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMLOWERKERNELS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Marks `par` as the kernel's own distribution, which
/// tfm-parallelize-outer keeps parallel.
void markKeepParallel(scf::ParallelOp par) {
  TfmDialect::KeepParallelAttrHelper(par.getContext())
      .setAttr(par, UnitAttr::get(par.getContext()));
}

Value cIdx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}
Value cF32(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}
Value dim(OpBuilder &b, Location loc, Value m, int64_t i) {
  return memref::DimOp::create(b, loc, m, i);
}

/// The indices of row `row` of `from` [..., C] whose leading dimensions
/// are the rows, split (row-major), without the column.
SmallVector<Value> rowIndices(OpBuilder &b, Location loc, Value from,
                              Value row) {
  int64_t rank = cast<MemRefType>(from.getType()).getRank();
  SmallVector<Value> idx(rank - 1);
  for (int64_t i = rank - 2; i > 0; --i) {
    Value d = dim(b, loc, from, i);
    idx[i] = arith::RemUIOp::create(b, loc, row, d);
    row = arith::DivUIOp::create(b, loc, row, d);
  }
  idx[0] = row;
  return idx;
}

/// values[idx] for a small table of constants and a dynamic index (a
/// select chain; an index past the end reads the last entry).
Value selectByIndex(OpBuilder &b, Location loc, Value idx,
                    ArrayRef<double> values) {
  Value r = cF32(b, loc, values.back());
  for (int64_t i = int64_t(values.size()) - 2; i >= 0; --i) {
    Value is = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, idx,
                                     cIdx(b, loc, i));
    r = arith::SelectOp::create(b, loc, is, cF32(b, loc, values[i]), r);
  }
  return r;
}

/// `for i in [lb, ub)` with `body(i)`.
void forRange(OpBuilder &b, Location loc, Value lb, Value ub, Value step,
              function_ref<void(OpBuilder &, Location, Value)> body) {
  scf::ForOp::create(b, loc, lb, ub, step, ValueRange{},
                     [&](OpBuilder &fb, Location fl, Value i, ValueRange) {
                       body(fb, fl, i);
                       scf::YieldOp::create(fb, fl);
                     });
}

/// Rows of the register tile: with two vectors per row, 8 rows keep 16
/// accumulators in AVX-512's 32 registers, 6 rows keep 12 in AVX2's 16.
/// 14 rows (28 accumulators) measured no faster on the 2-core Zen 4 (a
/// 512-bit FMA a cycle either way) and 28% slower at K = 3072, where the
/// rows of A lie 12 KB apart, in one L1 set of 8 ways; copying A to a
/// padded buffer cured that but cost 10% (README, GEMM).
int64_t gemmTileRows(int64_t vl) { return vl >= 16 ? 8 : 6; }

/// Rows of a row group, about: a task covers this many rows of A (whole
/// register tiles, the rows shared evenly between the groups).
constexpr int64_t kGemmRowGroup = 128;

/// Panels of a panel group, the other side of a task: 4 panels over all of
/// K (384 KB for K = 768 on AVX-512) stay in L2 while a thread's
/// successive tasks (the same panels, the next rows) reuse them.
constexpr int64_t kGemmPanelGroup = 4;

/// How a row of a matmul's A is stored for the weights' kind: f32 as is,
/// bf16 pairs (bf16 weights) or int8 quads (int8 weights).
using Packing = NormKernelOp::Packing;

/// The packing of an A buffer or a norm's output, as its element type says:
/// bf16 [M, 2 ceil(K / 2)] is in bf16 pairs, i8 [M, 4 ceil(K / 4) + 4] in
/// int8 quads, f32 not packed.
Packing packingOf(Value buf) {
  return NormKernelOp::packingOf(
      cast<ShapedType>(buf.getType()).getElementType());
}

/// Gives the values of one row at columns [col, col + 16) as a vector, 0 in
/// the lanes `mask` leaves out (`mask` null: all 16 inside).
using RowChunk =
    function_ref<Value(OpBuilder &, Location, Value col, Value mask)>;

/// Calls `body(col, mask)` for the chunks of 16 columns of a row of `k`:
/// whole chunks, then one masked chunk for the rest (null mask for whole
/// ones).
void forChunksOf16(
    OpBuilder &b, Location loc, int64_t k,
    function_ref<void(OpBuilder &, Location, Value, Value)> body) {
  int64_t whole = k / 16, rest = k % 16;
  forRange(b, loc, cIdx(b, loc, 0), cIdx(b, loc, whole * 16), cIdx(b, loc, 16),
           [&](OpBuilder &fb, Location fl, Value col) {
             body(fb, fl, col, Value());
           });
  if (rest) {
    auto maskT = VectorType::get({16}, b.getI1Type());
    Value mask = vector::CreateMaskOp::create(b, loc, maskT,
                                              ValueRange{cIdx(b, loc, rest)});
    body(b, loc, cIdx(b, loc, whole * 16), mask);
  }
}

/// Stores row `row` of `k` values, given by `chunk`, in `out` ([..., C], the
/// row's indices split from `row` as rowIndices does) packed as its
/// element type says (packingOf): f32 as is; bf16 rounded to nearest even
/// (vcvtneps2bf16), a zero past an odd K: pair j holds columns 2j and
/// 2j + 1, low half first, the order in which vdpbf16ps multiplies a
/// weight's pair; i8 quantized (scale max |x| / 127, 0 for a zero row) to
/// round(x / scale) + 128 (1..255, 128 past K), four to a quad in the
/// operand order of vpdpbusd, then the scale's bytes. 16 columns a vector.
void storePackedRow(OpBuilder &b, Location loc, RowChunk chunk, int64_t k,
                    Value out, Value row) {
  Packing packing = packingOf(out);
  SmallVector<Value> outRow = rowIndices(b, loc, out, row);
  auto at = [&](Value col) {
    SmallVector<Value> idx(outRow);
    idx.push_back(col);
    return idx;
  };
  Type f32 = b.getF32Type();
  auto f32V = VectorType::get({16}, f32);
  auto i1V = VectorType::get({16}, b.getI1Type());
  // The lanes of the chunk at `col` to store: past K up to the packed
  // row's padding too (the chunk gives 0 there).
  int64_t padded = packing == Packing::Int8Quads
                       ? 4 * ((k + 3) / 4)
                       : NormKernelOp::packedColumns(packing, k);
  auto storeMask = [&](OpBuilder &sb, Location sl, Value col, Value mask) {
    if (!mask)
      return mask;
    Value n = arith::SubIOp::create(sb, sl, cIdx(sb, sl, padded), col);
    return Value(vector::CreateMaskOp::create(sb, sl, i1V, ValueRange{n}));
  };
  auto store = [&](OpBuilder &sb, Location sl, Value v, Value col, Value mask) {
    if (mask)
      vector::MaskedStoreOp::create(sb, sl, out, at(col), mask, v);
    else
      vector::StoreOp::create(sb, sl, v, out, at(col));
  };
  if (packing != Packing::Int8Quads) {
    forChunksOf16(b, loc, k,
                  [&](OpBuilder &fb, Location fl, Value col, Value mask) {
                    Value v = chunk(fb, fl, col, mask);
                    if (packing == Packing::Bf16Pairs)
                      v = arith::TruncFOp::create(
                          fb, fl, VectorType::get({16}, fb.getBF16Type()), v);
                    store(fb, fl, v, col, storeMask(fb, fl, col, mask));
                  });
    return;
  }
  Value zeroV = arith::ConstantOp::create(
      b, loc, f32V, DenseElementsAttr::get(f32V, b.getF32FloatAttr(0)));
  // max |x| over the row (masked lanes are 0).
  int64_t whole = k / 16;
  auto vmax = scf::ForOp::create(
      b, loc, cIdx(b, loc, 0), cIdx(b, loc, whole * 16), cIdx(b, loc, 16),
      ValueRange{zeroV},
      [&](OpBuilder &fb, Location fl, Value col, ValueRange acc) {
        Value v = chunk(fb, fl, col, Value());
        scf::YieldOp::create(
            fb, fl,
            ValueRange{arith::MaxNumFOp::create(
                fb, fl, acc[0], math::AbsFOp::create(fb, fl, v))});
      });
  Value mv = vmax.getResult(0);
  if (k % 16) {
    Value mask = vector::CreateMaskOp::create(b, loc, i1V,
                                              ValueRange{cIdx(b, loc, k % 16)});
    Value v = chunk(b, loc, cIdx(b, loc, whole * 16), mask);
    mv = arith::MaxNumFOp::create(b, loc, mv, math::AbsFOp::create(b, loc, v));
  }
  Value mx =
      vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXNUMF, mv);
  Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, mx,
                                         cF32(b, loc, 0.0));
  Value scale = arith::DivFOp::create(b, loc, mx, cF32(b, loc, 127.0));
  Value inv = arith::SelectOp::create(
      b, loc, positive, arith::DivFOp::create(b, loc, cF32(b, loc, 127.0), mx),
      cF32(b, loc, 0.0));
  auto i32V = VectorType::get({16}, b.getI32Type());
  forChunksOf16(
      b, loc, k, [&](OpBuilder &fb, Location fl, Value col, Value mask) {
        auto splat = [&](Value s) {
          return vector::BroadcastOp::create(fb, fl, f32V, s);
        };
        // round(x / scale) + 128, clamped to 1..255 (|x| <= max gives
        // -127..127; the clamp only guards rounding).
        Value q = math::RoundEvenOp::create(
            fb, fl,
            arith::MulFOp::create(fb, fl, chunk(fb, fl, col, mask),
                                  splat(inv)));
        q = arith::MinNumFOp::create(fb, fl, q, splat(cF32(fb, fl, 127.0)));
        q = arith::MaxNumFOp::create(fb, fl, q, splat(cF32(fb, fl, -127.0)));
        Value u = arith::AddIOp::create(
            fb, fl, arith::FPToSIOp::create(fb, fl, i32V, q),
            vector::BroadcastOp::create(
                fb, fl, i32V, arith::ConstantIntOp::create(fb, fl, 128, 32)));
        Value bytes = arith::TruncIOp::create(
            fb, fl, VectorType::get({16}, fb.getI8Type()), u);
        store(fb, fl, bytes, col, storeMask(fb, fl, col, mask));
      });
  Value bits = vector::BitCastOp::create(
      b, loc, VectorType::get({4}, b.getI8Type()),
      vector::BroadcastOp::create(b, loc, VectorType::get({1}, f32), scale));
  vector::StoreOp::create(b, loc, bits, out, at(cIdx(b, loc, padded)));
}

/// The rows of A [M, K] f32 in a new buffer packed as `packing` says
/// (storePackedRow), rows in parallel.
Value packRows(OpBuilder &b, Location loc, Value a, Value m, int64_t k,
               Packing packing) {
  Type elt = packing == Packing::Bf16Pairs ? Type(b.getBF16Type())
                                           : Type(b.getI8Type());
  auto buf = memref::AllocOp::create(
      b, loc,
      MemRefType::get(
          {ShapedType::kDynamic, NormKernelOp::packedColumns(packing, k)}, elt),
      ValueRange{m}, b.getI64IntegerAttr(64));
  auto f32V = VectorType::get({16}, b.getF32Type());
  Value c0 = cIdx(b, loc, 0), c1 = cIdx(b, loc, 1);
  auto par = scf::ParallelOp::create(
      b, loc, ValueRange{c0}, ValueRange{m}, ValueRange{c1},
      [&](OpBuilder &pb, Location pl, ValueRange ivs) {
        Value row = ivs[0];
        Value zeroV = arith::ConstantOp::create(
            pb, pl, f32V, DenseElementsAttr::get(f32V, pb.getF32FloatAttr(0)));
        storePackedRow(
            pb, pl,
            [&](OpBuilder &cb, Location cl, Value col, Value mask) -> Value {
              if (!mask)
                return vector::LoadOp::create(cb, cl, f32V, a,
                                              ValueRange{row, col});
              return vector::MaskedLoadOp::create(
                  cb, cl, f32V, a, ValueRange{row, col}, mask, zeroV);
            },
            k, buf, row);
        scf::ReduceOp::create(pb, pl);
      });
  markKeepParallel(par);
  return buf;
}

/// The LLVM intrinsic of AVX512_VNNI's vpdpbusd on 512-bit vectors: acc +
/// the sums of four products of unsigned bytes of `u` and signed bytes of
/// `s` per i32 lane.
constexpr StringLiteral kVpdpbusd = "llvm.x86.avx512.vpdpbusd.512";

struct LowerLinearKernel : OpRewritePattern<LinearKernelOp> {
  LowerLinearKernel(MLIRContext *ctx, int64_t vl)
      : OpRewritePattern(ctx), vl(vl) {}
  int64_t vl;

  LogicalResult matchAndRewrite(LinearKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureBufferSemantics())
      return b.notifyMatchFailure(op, "not bufferized yet");
    Location loc = op.getLoc();
    Value a = op.getInput(), wp = op.getWeightP(), bias = op.getBias(),
          out = op.getOutput();
    auto wType = cast<MemRefType>(wp.getType());
    // bf16 weights in pairs of K ([P, K / 2, 2 W]): vdpbf16ps multiplies
    // a pair of A's columns, rounded to bf16, by the pair of each column.
    bool pairs = wType.getElementType().isBF16();
    // int8 weights in quads of K ([P, K / 4 + 2, 4 W] bytes, the columns'
    // scales and sums last): vpdpbusd multiplies a quad of A's columns,
    // quantized per row, by the quad of each column.
    bool quads = wType.getElementType().isSignlessInteger(8);
    if ((pairs || quads) && vl != 16)
      return b.notifyMatchFailure(op, "bf16 and int8 weights need AVX-512 "
                                      "vectors");
    int64_t panels = wType.getDimSize(0),
            k = quads ? wType.getDimSize(1) - 2 : wType.getDimSize(1),
            panel = pairs   ? wType.getDimSize(2) / 2
                    : quads ? wType.getDimSize(2) / 4
                            : wType.getDimSize(2);
    int64_t n = cast<MemRefType>(out.getType()).getDimSize(1);
    if (panel % vl != 0)
      return b.notifyMatchFailure(op, "panel width is not whole vectors");
    int64_t kCols = panel / vl;
    int64_t tail = n % panel; // columns in a partial last panel (0: none)
    int64_t tileRows = gemmTileRows(vl);
    auto vt = VectorType::get({vl}, b.getF32Type());
    auto maskT = VectorType::get({vl}, b.getI1Type());
    Value m = dim(b, loc, a, 0);
    Value c0 = cIdx(b, loc, 0), c1 = cIdx(b, loc, 1);
    Value zeroV = arith::ConstantOp::create(
        b, loc, vt, DenseElementsAttr::get(vt, b.getF32FloatAttr(0.0)));
    auto pairT = VectorType::get({2 * vl}, b.getBF16Type());
    auto pairIntT = VectorType::get({vl}, b.getI32Type());
    // With bf16 weights A comes in bf16 pairs, with int8 weights in int8
    // quads with the rows' scales (packRows): packed here unless a
    // tfm.norm_kernel already wrote it so.
    Value aPacked, aOwned;
    if ((pairs || quads) && packingOf(a) == Packing::None)
      aPacked = aOwned =
          packRows(b, loc, a, m, cast<MemRefType>(a.getType()).getDimSize(1),
                   pairs ? Packing::Bf16Pairs : Packing::Int8Quads);
    else if (pairs || quads)
      aPacked = a;
    auto quadT = VectorType::get({4 * vl}, b.getI8Type());
    auto accIntT = VectorType::get({vl}, b.getI32Type());
    // The i32 at packed column `col` of row `row` of A (a pair or a quad).
    auto loadWord = [&](OpBuilder &nb, Location l, Value row, Value col) {
      Type elt = cast<MemRefType>(aPacked.getType()).getElementType();
      auto wordT = VectorType::get({pairs ? 2 : 4}, elt);
      Value w =
          vector::LoadOp::create(nb, l, wordT, aPacked, ValueRange{row, col});
      return vector::ExtractOp::create(
          nb, l,
          vector::BitCastOp::create(nb, l,
                                    VectorType::get({1}, nb.getI32Type()), w),
          ArrayRef<int64_t>{0});
    };

    // The register tile: rows [m0, m0 + rows) of panel `p` (columns
    // n0 = p * panel ...) over all of K; `masks` (or empty) limit a partial
    // last panel.
    auto microKernel = [&](OpBuilder &nb, Location l, Value m0, int64_t rows,
                           Value p, ArrayRef<Value> masks) {
      Value n0 = arith::MulIOp::create(nb, l, p, cIdx(nb, l, panel));
      SmallVector<Value> colIdx, laneIdx, pairIdx, rowIdx;
      SmallVector<Value> quadIdx;
      for (int64_t c = 0; c < kCols; ++c) {
        colIdx.push_back(arith::AddIOp::create(nb, l, n0, cIdx(nb, l, c * vl)));
        laneIdx.push_back(cIdx(nb, l, c * vl));
        pairIdx.push_back(cIdx(nb, l, 2 * c * vl));
        quadIdx.push_back(cIdx(nb, l, 4 * c * vl));
      }
      for (int64_t r = 0; r < rows; ++r)
        rowIdx.push_back(arith::AddIOp::create(nb, l, m0, cIdx(nb, l, r)));
      SmallVector<Value> cols, init;
      Value zeroI;
      if (quads)
        zeroI = arith::ConstantOp::create(
            nb, l, accIntT,
            DenseElementsAttr::get(accIntT, nb.getI32IntegerAttr(0)));
      for (int64_t c = 0; c < kCols; ++c) {
        if (quads)
          cols.push_back(zeroI);
        else if (!bias)
          cols.push_back(zeroV);
        else if (masks.empty())
          cols.push_back(vector::LoadOp::create(nb, l, vt, bias, colIdx[c]));
        else
          cols.push_back(vector::MaskedLoadOp::create(
              nb, l, vt, bias, colIdx[c], masks[c], zeroV, IntegerAttr()));
      }
      for (int64_t r = 0; r < rows; ++r)
        init.append(cols);
      auto loop = scf::ForOp::create(
          nb, l, c0, cIdx(nb, l, k), c1, init,
          [&](OpBuilder &bb, Location ll, Value kk, ValueRange acc) {
            // The panel is zero-padded: whole-vector loads are in bounds.
            // No software prefetch: the hardware's follows the panel, and
            // two prefetches a k made decode (M = 1, from L3) 15% slower.
            SmallVector<Value> w;
            for (int64_t c = 0; c < kCols; ++c)
              w.push_back(
                  vector::LoadOp::create(bb, ll,
                                         pairs   ? pairT
                                         : quads ? quadT
                                                 : vt,
                                         wp,
                                         ValueRange{p, kk,
                                                    pairs   ? pairIdx[c]
                                                    : quads ? quadIdx[c]
                                                            : laneIdx[c]}));
            SmallVector<Value> next;
            for (int64_t r = 0; r < rows; ++r) {
              if (quads) {
                Value s = loadWord(
                    bb, ll, rowIdx[r],
                    arith::MulIOp::create(bb, ll, kk, cIdx(bb, ll, 4)));
                Value sv = vector::BitCastOp::create(
                    bb, ll, quadT,
                    vector::BroadcastOp::create(bb, ll, accIntT, s));
                for (int64_t c = 0; c < kCols; ++c)
                  next.push_back(LLVM::CallIntrinsicOp::create(
                                     bb, ll, accIntT,
                                     bb.getStringAttr(kVpdpbusd),
                                     ValueRange{acc[r * kCols + c], sv, w[c]})
                                     .getResult(0));
                continue;
              }
              if (pairs) {
                Value s = loadWord(
                    bb, ll, rowIdx[r],
                    arith::MulIOp::create(bb, ll, kk, cIdx(bb, ll, 2)));
                Value sv = vector::BitCastOp::create(
                    bb, ll, pairT,
                    vector::BroadcastOp::create(bb, ll, pairIntT, s));
                for (int64_t c = 0; c < kCols; ++c)
                  next.push_back(x86vector::DotBF16Op::create(
                      bb, ll, acc[r * kCols + c], sv, w[c]));
                continue;
              }
              Value s =
                  memref::LoadOp::create(bb, ll, a, ValueRange{rowIdx[r], kk});
              Value sv = vector::BroadcastOp::create(bb, ll, vt, s);
              for (int64_t c = 0; c < kCols; ++c)
                next.push_back(vector::FMAOp::create(bb, ll, sv, w[c],
                                                     acc[r * kCols + c]));
            }
            scf::YieldOp::create(bb, ll, next);
          });
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < kCols; ++c) {
          Value v = loop.getResult(r * kCols + c);
          SmallVector<Value, 2> idx{rowIdx[r], colIdx[c]};
          if (quads) {
            // (acc - 128 colsum) x column scale x row scale + bias: the
            // column scales and sums are the panel's last two rows.
            auto panelRow = [&](int64_t at, Type t) {
              return vector::BitCastOp::create(
                  nb, l, t,
                  vector::LoadOp::create(
                      nb, l, quadT, wp,
                      ValueRange{p, cIdx(nb, l, at), quadIdx[c]}));
            };
            Value scaleW = panelRow(k, vt);
            Value sum128 = panelRow(k + 1, accIntT);
            Value rowScale = vector::BroadcastOp::create(
                nb, l, vt,
                arith::BitcastOp::create(
                    nb, l, nb.getF32Type(),
                    loadWord(nb, l, rowIdx[r], cIdx(nb, l, 4 * k))));
            v = arith::MulFOp::create(
                nb, l,
                arith::SIToFPOp::create(
                    nb, l, vt, arith::SubIOp::create(nb, l, v, sum128)),
                arith::MulFOp::create(nb, l, scaleW, rowScale));
            if (bias)
              v = arith::AddFOp::create(
                  nb, l, v,
                  masks.empty() ? Value(vector::LoadOp::create(nb, l, vt, bias,
                                                               colIdx[c]))
                                : Value(vector::MaskedLoadOp::create(
                                      nb, l, vt, bias, colIdx[c], masks[c],
                                      zeroV, IntegerAttr())));
          }
          // The epilogue, on the registers before they are stored.
          auto load = [&](Value from) -> Value {
            SmallVector<Value> at = rowIndices(nb, l, from, rowIdx[r]);
            at.push_back(colIdx[c]);
            if (masks.empty())
              return vector::LoadOp::create(nb, l, vt, from, at);
            return vector::MaskedLoadOp::create(nb, l, vt, from, at, masks[c],
                                                zeroV);
          };
          if (auto act = op.getActivation())
            v = buildActivation(nb, l, *act, v);
          if (Value mul = op.getMul())
            v = arith::MulFOp::create(nb, l, v, load(mul));
          if (Value residual = op.getResidual())
            v = arith::AddFOp::create(nb, l, v, load(residual));
          if (masks.empty())
            vector::StoreOp::create(nb, l, v, out, idx);
          else
            vector::MaskedStoreOp::create(nb, l, out, idx, masks[c], v,
                                          IntegerAttr());
        }
      }
    };

    // One task: rows [r0, r1) times panels [p0, p1), panel by panel, every
    // register tile of the rows. Rows past the last whole tile take one
    // tile of each power of two below the tile's height (4, 2, 1), as the
    // remainder's bits say, rather than one row at a time (a one-row tile
    // waits on the latency of its two accumulators).
    auto task = [&](OpBuilder &nb, Location l, Value r0, Value r1, Value p0,
                    Value p1, ArrayRef<Value> masks) {
      Value rows = arith::SubIOp::create(nb, l, r1, r0);
      Value rem = arith::RemUIOp::create(nb, l, rows, cIdx(nb, l, tileRows));
      Value rFull = arith::SubIOp::create(nb, l, r1, rem);
      forRange(nb, l, p0, p1, c1, [&](OpBuilder &pb, Location pl, Value p) {
        forRange(pb, pl, r0, rFull, cIdx(pb, pl, tileRows),
                 [&](OpBuilder &rb, Location rl, Value m0) {
                   microKernel(rb, rl, m0, tileRows, p, masks);
                 });
        for (int64_t s = llvm::PowerOf2Ceil(tileRows) / 2; s >= 1; s /= 2) {
          Value bit = arith::AndIOp::create(pb, pl, rem, cIdx(pb, pl, s));
          Value has = arith::CmpIOp::create(pb, pl, arith::CmpIPredicate::ne,
                                            bit, cIdx(pb, pl, 0));
          // Rows of the larger remainder tiles come first.
          Value before =
              arith::AndIOp::create(pb, pl, rem, cIdx(pb, pl, ~(2 * s - 1)));
          Value m0 = arith::AddIOp::create(pb, pl, rFull, before);
          scf::IfOp::create(pb, pl, has, [&](OpBuilder &ib, Location il) {
            microKernel(ib, il, m0, s, p, masks);
            scf::YieldOp::create(ib, il);
          });
        }
      });
    };

    // Tasks: panel groups x row groups, panel groups outermost so that the
    // threads' contiguous shares of the tasks split the columns (each
    // thread reads its own part of the weights) and successive tasks of a
    // thread reuse a panel group from L2; M = 1 (decode) still has a task
    // per panel group, and a few panels with many rows (N = 64) still have
    // a task per row group. A partial last panel runs after, on one
    // thread, through masks.
    int64_t fullPanels = tail ? panels - 1 : panels;
    // At least one group and one tile a group: M may be 0.
    Value groups = arith::MaxUIOp::create(
        b, loc,
        arith::CeilDivUIOp::create(b, loc, m, cIdx(b, loc, kGemmRowGroup)), c1);
    Value tiles = arith::CeilDivUIOp::create(
        b, loc, arith::CeilDivUIOp::create(b, loc, m, groups),
        cIdx(b, loc, tileRows));
    Value groupRows =
        arith::MulIOp::create(b, loc, arith::MaxUIOp::create(b, loc, tiles, c1),
                              cIdx(b, loc, tileRows));
    if (fullPanels > 0) {
      Value rowGroups = arith::CeilDivUIOp::create(b, loc, m, groupRows);
      int64_t panelGroups =
          (fullPanels + kGemmPanelGroup - 1) / kGemmPanelGroup;
      auto par = scf::ParallelOp::create(
          b, loc, ValueRange{c0, c0},
          ValueRange{cIdx(b, loc, panelGroups), rowGroups}, ValueRange{c1, c1},
          [&](OpBuilder &nb, Location l, ValueRange ivs) {
            Value p0 = arith::MulIOp::create(nb, l, ivs[0],
                                             cIdx(nb, l, kGemmPanelGroup));
            Value p1 = arith::MinSIOp::create(
                nb, l,
                arith::AddIOp::create(nb, l, p0, cIdx(nb, l, kGemmPanelGroup)),
                cIdx(nb, l, fullPanels));
            Value r0 = arith::MulIOp::create(nb, l, ivs[1], groupRows);
            Value r1 = arith::MinSIOp::create(
                nb, l, arith::AddIOp::create(nb, l, r0, groupRows), m);
            task(nb, l, r0, r1, p0, p1, {});
          });
      markKeepParallel(par);
    }
    if (tail) {
      SmallVector<Value> masks;
      for (int64_t c = 0; c < kCols; ++c) {
        int64_t valid = std::clamp<int64_t>(tail - c * vl, 0, vl);
        masks.push_back(vector::CreateMaskOp::create(
            b, loc, maskT, ValueRange{cIdx(b, loc, valid)}));
      }
      task(b, loc, c0, m, cIdx(b, loc, fullPanels), cIdx(b, loc, panels),
           masks);
    }
    if (aOwned)
      memref::DeallocOp::create(b, loc, aOwned);
    b.eraseOp(op);
    return success();
  }
};

/// tfm.norm_kernel: rows in parallel; a row's sum (layernorm), then its
/// sum of squares (of x - mean for layernorm), 16 columns a vector, while
/// the row stays in L1, then the normalized values, stored as the output's
/// element type says (storePackedRow). One pass over the input where the
/// linalg form of tfm.norm makes three (mean, variance, values).
struct LowerNormKernel : OpRewritePattern<NormKernelOp> {
  // Vectors of 16 lanes whatever the target's width (two on AVX2).
  LowerNormKernel(MLIRContext *ctx, int64_t) : OpRewritePattern(ctx) {}

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

/// The decode kernel takes an attention over a KV cache when the query rows
/// of one KV head (T x group) are at most this many, or T is 1: few enough
/// that reading each block of K and V once for all of them beats the
/// prefill kernel's register-held output blocks.
constexpr int64_t kDecodeMaxRows = 16;

/// Fewest keys in one split of the decode kernel. A split costs a task and
/// a (max, sum, Dv outputs) partial per query row to merge: with 256 keys
/// it computes 256 x (D + Dv) FMAs per row for D + 2 values merged, so the
/// merge stays well under 1% of the work.
constexpr int64_t kMinSplitKeys = 256;

/// Bytes of a cache line: the alignment of the decode kernel's workspace.
constexpr int64_t kCacheLine = 64;

/// The runtime function that gives the number of threads the generated
/// code runs on (tfm_set_threads, --threads).
constexpr StringLiteral kThreadsFn = "tfm_get_threads";

/// Query rows of a register block in the decode kernel: with two vectors
/// of keys, 8 rows fill half of AVX-512's registers with scores (4 for
/// AVX2).
int64_t decodeBlockRows(int64_t vl, int64_t group) {
  return std::min<int64_t>(group, vl >= 16 ? 8 : 4);
}

/// Vectors of keys per block in the decode kernel: as many as keep the
/// block's scores (rows x vectors) within half the vector registers, 2 to
/// 4.
int64_t decodeKeyVectors(int64_t vl, int64_t group) {
  int64_t budget = vl >= 16 ? 16 : 8;
  return std::clamp<int64_t>(budget / decodeBlockRows(vl, group), 2, 4);
}

/// Builds `for c in [0, chunks)` with `body(c)`.
void forChunks(OpBuilder &b, Location loc, int64_t chunks,
               function_ref<void(OpBuilder &, Location, Value)> body) {
  scf::ForOp::create(b, loc, cIdx(b, loc, 0), cIdx(b, loc, chunks),
                     cIdx(b, loc, 1), ValueRange{},
                     [&](OpBuilder &cb, Location cl, Value c, ValueRange) {
                       body(cb, cl, c);
                       scf::YieldOp::create(cb, cl);
                     });
}

/// What the prefill and decode attention kernels share: the operands,
/// shapes and attributes of the op, the constants emitted before the
/// kernel, and the computation of one block of scores.
struct AttentionLowering {
  AttentionKernelOp op;
  int64_t vl;
  Value q, kt, v, out, lengths, positions, bias;
  bool ring;
  int64_t d, dv;
  /// Lanes of an output vector (dv in `chunks` vectors of `wv` lanes).
  int64_t wv, chunks;
  /// Keys per block: `keyVectors` vector registers (two in the prefill
  /// kernel).
  int64_t bk;
  MaskKind kind;
  int64_t window, biasDistance;
  double scale;
  std::optional<double> softcap;
  std::optional<ArrayRef<double>> slopes;
  VectorType vk, vvT, maskT, idxV, i32V;
  // Emitted before the kernel by emitCommon.
  Value c0, c1, bsz, heads, tq, kvHeads, tk, ninf, ninfV, zeroVV, zeroK, scaleV,
      lanes;

  AttentionLowering(AttentionKernelOp op, int64_t vl, int64_t keyVectors = 2)
      : op(op), vl(vl) {
    q = op.getQuery();
    kt = op.getKey();
    v = op.getValue();
    out = op.getOutput();
    lengths = op.getLengths();
    positions = op.getPositions();
    bias = op.getBias();
    ring = op.getRing() && positions;
    d = cast<MemRefType>(q.getType()).getDimSize(3);
    dv = cast<MemRefType>(v.getType()).getDimSize(3);
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

  /// The constants and sizes, or the sizes of `sizes` (another lowering of
  /// the same op) and the constants of this one's block of keys.
  void emitCommon(OpBuilder &b, Location loc,
                  const AttentionLowering *sizes = nullptr) {
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
      tk = dim(b, loc, kt, 3);
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

  /// The query heads per KV head when both counts are static and the
  /// attention reads a KV cache: the decode kernel's grouping.
  std::optional<int64_t> decodeGroup() const {
    int64_t h = cast<MemRefType>(q.getType()).getDimSize(1);
    int64_t kv = cast<MemRefType>(kt.getType()).getDimSize(1);
    if (!positions || ShapedType::isDynamic(h) || ShapedType::isDynamic(kv) ||
        kv == 0 || h % kv != 0)
      return std::nullopt;
    return h / kv;
  }

  /// The position of query row 0 of sequence `bi` (`alignedOffset` without
  /// positions) and the end of its visible keys (unwritten cache slots and
  /// lengths excluded): (offset, limit).
  std::pair<Value, Value> sequenceBounds(OpBuilder &nb, Location l, Value bi,
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

  /// The key positions [lo, hi) that a query at position `pos` sees.
  std::pair<Value, Value> rowBounds(OpBuilder &nb, Location l, Value pos,
                                    Value limit) const {
    Value h = limit;
    if (kind != MaskKind::none)
      h = arith::MinSIOp::create(nb, l, h,
                                 arith::AddIOp::create(nb, l, pos, c1));
    Value lw = c0;
    if (kind == MaskKind::sliding)
      lw = arith::MaxSIOp::create(
          nb, l, c0,
          arith::SubIOp::create(nb, l, pos, cIdx(nb, l, window - 1)));
    return {lw, h};
  }

  /// The lanes of keys [j0, j0 + bk) inside the buffer.
  Value keyMask(OpBuilder &kb, Location kl, Value j0) const {
    Value valid = arith::SubIOp::create(kb, kl, tk, j0);
    return vector::CreateMaskOp::create(kb, kl, maskT, ValueRange{valid});
  }

  /// The positions of the keys in slots [j0, j0 + bk): the slots
  /// themselves, or in a ring buffer with `written` positions written, the
  /// position each slot holds (-1: none).
  Value keyPositions(OpBuilder &kb, Location kl, Value j0,
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
        arith::CmpIOp::create(kb, kl, arith::CmpIPredicate::slt, back,
                              splat(c0)),
        arith::CmpIOp::create(kb, kl, arith::CmpIPredicate::sge, jv,
                              splat(tk)));
    Value held = arith::SubIOp::create(
        kb, kl, last,
        arith::RemSIOp::create(kb, kl,
                               arith::MaxSIOp::create(kb, kl, back, splat(c0)),
                               splat(tk)));
    return arith::SelectOp::create(kb, kl, unwritten, splat(cIdx(kb, kl, -1)),
                                   held);
  }

  /// The dot products of `rows` query rows with the keys [j0, j0 + bk) of
  /// KV head `kvh` of sequence `bi` (lanes outside `kMask` 0): one
  /// contiguous vector of K^T per head dimension, broadcast-FMA'd into every
  /// row; `queryAt(r)` gives row r's (head, position) in Q.
  SmallVector<Value>
  dotBlock(OpBuilder &kb, Location kl, Value bi, Value kvh, Value j0,
           Value kMask, int64_t rows,
           function_ref<std::pair<Value, Value>(int64_t)> queryAt) const {
    SmallVector<Value> init(rows, zeroK);
    auto loop = scf::ForOp::create(
        kb, kl, c0, cIdx(kb, kl, d), c1, init,
        [&](OpBuilder &db, Location dl, Value dd, ValueRange acc) {
          Value kv = vector::MaskedLoadOp::create(db, dl, vk, kt,
                                                  ValueRange{bi, kvh, dd, j0},
                                                  kMask, zeroK, IntegerAttr());
          SmallVector<Value> next;
          for (int64_t r = 0; r < rows; ++r) {
            auto [head, pos] = queryAt(r);
            Value qs = memref::LoadOp::create(db, dl, q,
                                              ValueRange{bi, head, pos, dd});
            Value qb = vector::BroadcastOp::create(db, dl, vk, qs);
            next.push_back(vector::FMAOp::create(db, dl, qb, kv, acc[r]));
          }
          scf::YieldOp::create(db, dl, next);
        });
    return SmallVector<Value>(loop.getResults());
  }

  /// The block of scores of a query of head `head` at position `pos`
  /// against keys at positions `jv`, from its dot products `qk`: scaled,
  /// the score modifiers applied (`slopeV`: the head's ALiBi slope), -inf
  /// outside [lo, hi).
  Value scores(OpBuilder &kb, Location kl, Value qk, Value jv, Value pos,
               Value lo, Value hi, Value head, Value slopeV) const {
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

  /// One step of the online softmax over a block of scores `s`, from the
  /// running max and sum (mOld, lOld): the probabilities relative to the
  /// new max, the new max and sum, and the factor that rescales what was
  /// accumulated relative to the old max.
  struct SoftmaxStep {
    Value p, m, l, corr;
  };
  SoftmaxStep softmaxStep(OpBuilder &kb, Location kl, Value s, Value mOld,
                          Value lOld) const {
    Value mx =
        vector::ReductionOp::create(kb, kl, vector::CombiningKind::MAXIMUMF, s);
    Value mNew = arith::MaximumFOp::create(kb, kl, mOld, mx);
    // All keys so far masked: exponents relative to 0 give 0.
    Value none =
        arith::CmpFOp::create(kb, kl, arith::CmpFPredicate::OEQ, mNew, ninf);
    Value mUse = arith::SelectOp::create(kb, kl, none, cF32(kb, kl, 0.0), mNew);
    Value p = math::ExpOp::create(
        kb, kl,
        arith::SubFOp::create(kb, kl, s,
                              vector::BroadcastOp::create(kb, kl, vk, mUse)));
    Value corr =
        math::ExpOp::create(kb, kl, arith::SubFOp::create(kb, kl, mOld, mUse));
    Value sum =
        vector::ReductionOp::create(kb, kl, vector::CombiningKind::ADD, p,
                                    Value(), arith::FastMathFlags::reassoc);
    Value lNew = arith::AddFOp::create(
        kb, kl, arith::MulFOp::create(kb, kl, lOld, corr), sum);
    return {p, mNew, lNew, corr};
  }

  /// 1 / sum, or 0 for a row that saw no key (its output is zeros).
  Value inverseSum(OpBuilder &nb, Location l, Value sum) const {
    Value pos0 = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OGT, sum,
                                       cF32(nb, l, 0.0));
    return arith::SelectOp::create(
        nb, l, pos0, arith::DivFOp::create(nb, l, cF32(nb, l, 1.0), sum),
        cF32(nb, l, 0.0));
  }

  void emitPrefill(OpBuilder &b, Location loc) const;
  void emitDecode(OpBuilder &b, Location loc, int64_t group) const;
};

/// log2(e): the prefill kernel keeps scores in base-2 units (exp2).
constexpr double kLog2E = 1.4426950408889634;

/// How far (in base-2 units) a block's scores may rise above a row's
/// running max before the row is rescaled: probabilities stay at most
/// 2^8 relative to the max used, so that the running max, the rescaling
/// of the row's output and its horizontal max are needed only when the
/// scores jump (the first block of a row, rarely after).
constexpr double kRescaleThreshold = 8.0;

/// Bytes of K^T and V that a superblock of keys keeps in L2 while every
/// group of query rows of a tile passes over it.
constexpr int64_t kSuperblockBytes = 256 * 1024;

/// Bytes of a tile's output accumulators (on the task's stack).
constexpr int64_t kTileAccumulatorBytes = 32 * 1024;

/// Most vectors of a query row's output that the prefill kernel keeps on
/// the task's stack; a wider head accumulates in its output rows.
constexpr int64_t kMaxStackChunks = 16;

/// 2^x for a vector of f32 in base-2 units: x clamped to -127 (where, as
/// for -inf, it gives exactly 0), x = n + f with n = roundeven(x), 2^f by
/// its Taylor polynomial of degree 6 (relative error 1.2e-7 on
/// |f| <= 0.5), 2^n as the exponent bits (n + 127) << 23.
Value exp2Vector(OpBuilder &b, Location loc, Value x) {
  auto vt = cast<VectorType>(x.getType());
  auto it = VectorType::get(vt.getShape(), b.getI32Type());
  auto splat = [&](double c) {
    return vector::BroadcastOp::create(b, loc, vt, cF32(b, loc, c));
  };
  auto nnan = arith::FastMathFlags::nnan;
  x = arith::MaxNumFOp::create(b, loc, x, splat(-127.0), nnan);
  Value n = math::RoundEvenOp::create(b, loc, x);
  Value f = arith::SubFOp::create(b, loc, x, n);
  static const double coef[] = {1.0,
                                0.6931471805599453,
                                0.2402265069591007,
                                0.05550410866482158,
                                0.009618129107628477,
                                0.0013333558146428443,
                                0.00015403530393381608};
  Value p = splat(coef[6]);
  for (int k = 5; k >= 0; --k)
    p = vector::FMAOp::create(b, loc, p, f, splat(coef[k]));
  Value ni = arith::FPToSIOp::create(b, loc, it, n);
  auto splatI = [&](int32_t c) {
    return vector::BroadcastOp::create(
        b, loc, it, arith::ConstantIntOp::create(b, loc, c, 32));
  };
  Value bits = arith::ShLIOp::create(
      b, loc, arith::AddIOp::create(b, loc, ni, splatI(127)), splatI(23));
  return arith::MulFOp::create(b, loc, p,
                               arith::BitcastOp::create(b, loc, vt, bits));
}

/// The prefill kernel: parallel over batch x heads x tiles of query rows.
/// A task keeps its tile's output accumulators, running max and lane-wise
/// running sums on its stack, and passes over the keys in superblocks
/// that stay in L2 (kSuperblockBytes of K^T and V), each superblock met by
/// every group of `rows` query rows of the tile in turn. For a group and a
/// block of `bk` keys: S = Q K^T as a register tile (rows x bk/vl vectors,
/// one contiguous vector of K^T per head dimension broadcast-FMA'd into
/// every row), scores in base-2 units, the running max raised (and the
/// rows rescaled) only when a score passes it by kRescaleThreshold,
/// P = exp2(S - max) on full vectors stored to a small buffer, then P V as
/// register tiles of the accumulators (pvRows x pvChunks vectors) with
/// P broadcast from that buffer and each V row loaded once per tile.
void AttentionLowering::emitPrefill(OpBuilder &b, Location loc) const {
  Type f32 = b.getF32Type();
  // A head wider than kMaxStackChunks vectors accumulates in its output
  // rows, one row a group, so that the stack does not grow with head_dim.
  bool wide = chunks > kMaxStackChunks;
  int64_t rows = wide ? 1 : vl >= 16 ? 8 : 4;
  int64_t keyVecs = bk / vl;
  int64_t groupsPerTile =
      wide ? 8
           : std::clamp<int64_t>(kTileAccumulatorBytes / (rows * dv * 4), 1, 8);
  int64_t tileRows = rows * groupsPerTile;
  int64_t pvRows = std::min<int64_t>(rows, vl >= 16 ? 4 : 2);
  int64_t pvChunks = std::min<int64_t>(chunks, 4);
  while (chunks % pvChunks != 0)
    --pvChunks;
  int64_t sbKeys =
      std::max<int64_t>(1, kSuperblockBytes / ((d + dv) * 4) / bk) * bk;
  // Without score modifiers or a ring buffer, the scale and log2(e) fold
  // into one multiply and the mask compares i32 lanes.
  bool plain = !softcap && !slopes && !bias && !ring;
  VectorType lT = VectorType::get({vl}, f32);
  VectorType laneI = VectorType::get({bk}, b.getI32Type());

  Value group = arith::DivUIOp::create(b, loc, heads, kvHeads);
  Value alignedOffset = arith::SubIOp::create(b, loc, tk, tq);
  Value tiles = arith::CeilDivUIOp::create(b, loc, tq, cIdx(b, loc, tileRows));
  Value scaleL2 =
      vector::BroadcastOp::create(b, loc, vk, cF32(b, loc, scale * kLog2E));
  Value log2eV = vector::BroadcastOp::create(b, loc, vk, cF32(b, loc, kLog2E));
  Value lanes32 = arith::IndexCastOp::create(b, loc, laneI, lanes);
  Value zeroL = arith::ConstantOp::create(
      b, loc, lT, DenseElementsAttr::get(lT, b.getF32FloatAttr(0.0)));

  auto par = scf::ParallelOp::create(
      b, loc, ValueRange{c0, c0, c0}, ValueRange{bsz, heads, tiles},
      ValueRange{c1, c1, c1}, [&](OpBuilder &nb, Location l, ValueRange ivs) {
        Value bi = ivs[0], hi = ivs[1];
        Value t0 = arith::MulIOp::create(nb, l, ivs[2], cIdx(nb, l, tileRows));
        Value tileEnd = arith::MinSIOp::create(
            nb, l, arith::AddIOp::create(nb, l, t0, cIdx(nb, l, tileRows)), tq);
        Value tileCount = arith::SubIOp::create(nb, l, tileEnd, t0);
        Value nGroups =
            arith::CeilDivUIOp::create(nb, l, tileCount, cIdx(nb, l, rows));
        Value kvh = arith::DivUIOp::create(nb, l, hi, group);
        Value lastRow = arith::SubIOp::create(nb, l, tq, c1);
        Value lastKey = arith::SubIOp::create(nb, l, tk, c1);
        Value offset, limit;
        std::tie(offset, limit) = sequenceBounds(nb, l, bi, alignedOffset);
        Value written;
        if (ring)
          written = arith::AddIOp::create(nb, l, offset, tq);
        Value slopeV;
        if (slopes)
          slopeV = vector::BroadcastOp::create(
              nb, l, vk, selectByIndex(nb, l, hi, *slopes));

        // The tile's state: output accumulators, running max (base 2)
        // and lane-wise running sums, and one block of probabilities.
        Value acc = wide ? out
                         : Value(memref::AllocaOp::create(
                               nb, l, MemRefType::get({tileRows, dv}, f32)));
        // Where the accumulators of the tile's row `slot` start at `col`.
        auto accAt = [&](OpBuilder &ab, Location al, Value slot,
                         Value col) -> SmallVector<Value, 4> {
          if (!wide)
            return {slot, col};
          return {bi, hi, arith::AddIOp::create(ab, al, t0, slot), col};
        };
        auto mBuf =
            memref::AllocaOp::create(nb, l, MemRefType::get({tileRows}, f32));
        auto lBuf = memref::AllocaOp::create(
            nb, l, MemRefType::get({tileRows, vl}, f32));
        auto pBuf =
            memref::AllocaOp::create(nb, l, MemRefType::get({rows, bk}, f32));
        // (A wide head's accumulators are its output rows: only the
        // tile's own.)
        forRange(nb, l, c0, wide ? tileCount : cIdx(nb, l, tileRows), c1,
                 [&](OpBuilder &ib, Location il, Value i) {
                   memref::StoreOp::create(ib, il, ninf, mBuf, ValueRange{i});
                   vector::StoreOp::create(ib, il, zeroL, lBuf,
                                           ValueRange{i, c0});
                   forChunks(ib, il, chunks,
                             [&](OpBuilder &cb, Location cl, Value c) {
                               vector::StoreOp::create(
                                   cb, cl, zeroVV, acc,
                                   accAt(cb, cl, i,
                                         arith::MulIOp::create(
                                             cb, cl, c, cIdx(cb, cl, wv))));
                             });
                 });

        // The rows of group `g` (clamped: a partial last group recomputes
        // the last row into its own accumulators), their positions and
        // visible keys, and the keys [first, end) any of them sees.
        struct Group {
          SmallVector<Value> row, pos, lo, hi;
          Value first, end;
        };
        auto groupRows = [&](OpBuilder &gb, Location gl, Value g) {
          Group grp;
          Value g0 = arith::AddIOp::create(
              gb, gl, t0, arith::MulIOp::create(gb, gl, g, cIdx(gb, gl, rows)));
          for (int64_t r = 0; r < rows; ++r) {
            Value ir = arith::MinSIOp::create(
                gb, gl, arith::AddIOp::create(gb, gl, g0, cIdx(gb, gl, r)),
                lastRow);
            Value pos = arith::AddIOp::create(gb, gl, ir, offset);
            Value lw, h;
            std::tie(lw, h) = rowBounds(gb, gl, pos, limit);
            grp.row.push_back(ir);
            grp.pos.push_back(pos);
            grp.lo.push_back(lw);
            grp.hi.push_back(h);
          }
          if (ring) {
            grp.first = c0;
            grp.end = arith::MinSIOp::create(gb, gl, tk, written);
            return grp;
          }
          grp.first = arith::MulIOp::create(
              gb, gl,
              arith::DivUIOp::create(gb, gl, grp.lo[0], cIdx(gb, gl, bk)),
              cIdx(gb, gl, bk));
          Value end = grp.hi[0];
          for (Value h : grp.hi)
            end = arith::MaxSIOp::create(gb, gl, end, h);
          grp.end = arith::MaxSIOp::create(gb, gl, end, grp.first);
          return grp;
        };
        // The tile's keys: from its first group's first to its last
        // group's end (positions grow with the rows).
        Group firstG = groupRows(nb, l, c0);
        Group lastG =
            groupRows(nb, l, arith::SubIOp::create(nb, l, nGroups, c1));
        Value tileFirst = firstG.first;
        Value tileLast = arith::MaxSIOp::create(nb, l, lastG.end, firstG.end);

        forRange(
            nb, l, tileFirst, tileLast, cIdx(nb, l, sbKeys),
            [&](OpBuilder &sb, Location sl, Value s0) {
              Value sEnd =
                  arith::AddIOp::create(sb, sl, s0, cIdx(sb, sl, sbKeys));
              forRange(
                  sb, sl, c0, nGroups, c1,
                  [&](OpBuilder &gb, Location gl, Value g) {
                    Group grp = groupRows(gb, gl, g);
                    Value r0 =
                        arith::MulIOp::create(gb, gl, g, cIdx(gb, gl, rows));
                    SmallVector<Value> slot;
                    for (int64_t r = 0; r < rows; ++r)
                      slot.push_back(
                          arith::AddIOp::create(gb, gl, r0, cIdx(gb, gl, r)));
                    Value jb = arith::MaxSIOp::create(gb, gl, grp.first, s0);
                    Value je = arith::MinSIOp::create(gb, gl, grp.end, sEnd);
                    forRange(
                        gb, gl, jb, je, cIdx(gb, gl, bk),
                        [&](OpBuilder &kb, Location kl, Value j0) {
                          // S = Q K^T for the block.
                          Value kMask = keyMask(kb, kl, j0);
                          SmallVector<Value> qk = dotBlock(
                              kb, kl, bi, kvh, j0, kMask, rows,
                              [&](int64_t r) -> std::pair<Value, Value> {
                                return {hi, grp.row[r]};
                              });
                          // Scores in base-2 units, -inf outside each row's
                          // keys.
                          SmallVector<Value> t(rows), mOld(rows);
                          Value jv;
                          if (!plain)
                            jv = keyPositions(kb, kl, j0, written);
                          Value exceed;
                          for (int64_t r = 0; r < rows; ++r) {
                            Value s;
                            if (plain) {
                              // Lane j is visible iff j0 + j - lo < hi - lo
                              // (unsigned).
                              auto i32 = [&](Value x) {
                                return arith::IndexCastOp::create(
                                    kb, kl, kb.getI32Type(), x);
                              };
                              Value rel = arith::AddIOp::create(
                                  kb, kl, lanes32,
                                  vector::BroadcastOp::create(
                                      kb, kl, laneI,
                                      i32(arith::SubIOp::create(kb, kl, j0,
                                                                grp.lo[r]))));
                              Value span = arith::MaxSIOp::create(
                                  kb, kl,
                                  arith::SubIOp::create(kb, kl, grp.hi[r],
                                                        grp.lo[r]),
                                  c0);
                              Value in = arith::CmpIOp::create(
                                  kb, kl, arith::CmpIPredicate::ult, rel,
                                  vector::BroadcastOp::create(kb, kl, laneI,
                                                              i32(span)));
                              s = arith::SelectOp::create(
                                  kb, kl, in,
                                  arith::MulFOp::create(kb, kl, qk[r], scaleL2),
                                  ninfV);
                            } else {
                              s = arith::MulFOp::create(
                                  kb, kl,
                                  scores(kb, kl, qk[r], jv, grp.pos[r],
                                         grp.lo[r], grp.hi[r], hi, slopeV),
                                  log2eV);
                            }
                            t[r] = s;
                            mOld[r] = memref::LoadOp::create(
                                kb, kl, mBuf, ValueRange{slot[r]});
                            Value bound = vector::BroadcastOp::create(
                                kb, kl, vk,
                                arith::AddFOp::create(
                                    kb, kl, mOld[r],
                                    cF32(kb, kl, kRescaleThreshold)));
                            Value above = arith::CmpFOp::create(
                                kb, kl, arith::CmpFPredicate::OGT, s, bound);
                            exceed = exceed ? arith::OrIOp::create(
                                                  kb, kl, exceed, above)
                                            : above;
                          }
                          Value any = vector::ReductionOp::create(
                              kb, kl, vector::CombiningKind::OR, exceed);
                          // A score above a row's max + threshold: new maxes
                          // for every row of the group, their state rescaled.
                          SmallVector<Type> mTypes(rows, f32);
                          auto raise = scf::IfOp::create(
                              kb, kl, any,
                              [&](OpBuilder &tb, Location tl) {
                                SmallVector<Value> mNew;
                                for (int64_t r = 0; r < rows; ++r) {
                                  Value mx = vector::ReductionOp::create(
                                      tb, tl, vector::CombiningKind::MAXNUMF,
                                      t[r]);
                                  Value m = arith::MaxNumFOp::create(
                                      tb, tl, mOld[r], mx);
                                  Value none = arith::CmpFOp::create(
                                      tb, tl, arith::CmpFPredicate::OEQ, m,
                                      ninf);
                                  Value corr = arith::SelectOp::create(
                                      tb, tl, none, cF32(tb, tl, 1.0),
                                      math::ExpOp::create(
                                          tb, tl,
                                          arith::MulFOp::create(
                                              tb, tl,
                                              arith::SubFOp::create(tb, tl,
                                                                    mOld[r], m),
                                              cF32(tb, tl, M_LN2))));
                                  memref::StoreOp::create(tb, tl, m, mBuf,
                                                          ValueRange{slot[r]});
                                  Value corrL = vector::BroadcastOp::create(
                                      tb, tl, lT, corr);
                                  SmallVector<Value, 2> lAt{slot[r], c0};
                                  vector::StoreOp::create(
                                      tb, tl,
                                      arith::MulFOp::create(
                                          tb, tl,
                                          vector::LoadOp::create(tb, tl, lT,
                                                                 lBuf, lAt),
                                          corrL),
                                      lBuf, lAt);
                                  Value corrV = vector::BroadcastOp::create(
                                      tb, tl, vvT, corr);
                                  forChunks(
                                      tb, tl, chunks,
                                      [&](OpBuilder &cb, Location cl, Value c) {
                                        SmallVector<Value, 4> at = accAt(
                                            cb, cl, slot[r],
                                            arith::MulIOp::create(
                                                cb, cl, c, cIdx(cb, cl, wv)));
                                        vector::StoreOp::create(
                                            cb, cl,
                                            arith::MulFOp::create(
                                                cb, cl,
                                                vector::LoadOp::create(
                                                    cb, cl, vvT, acc, at),
                                                corrV),
                                            acc, at);
                                      });
                                  mNew.push_back(m);
                                }
                                scf::YieldOp::create(tb, tl, mNew);
                              },
                              [&](OpBuilder &eb, Location el) {
                                scf::YieldOp::create(eb, el, mOld);
                              });
                          // P = exp2(S - max) (a row that saw no key yet:
                          // relative to 0, its -inf scores give 0), summed
                          // lane-wise, stored.
                          for (int64_t r = 0; r < rows; ++r) {
                            Value m = raise.getResult(r);
                            Value none = arith::CmpFOp::create(
                                kb, kl, arith::CmpFPredicate::OEQ, m, ninf);
                            Value mUse = arith::SelectOp::create(
                                kb, kl, none, cF32(kb, kl, 0.0), m);
                            Value p =
                                exp2Vector(kb, kl,
                                           arith::SubFOp::create(
                                               kb, kl, t[r],
                                               vector::BroadcastOp::create(
                                                   kb, kl, vk, mUse)));
                            SmallVector<Value, 2> lAt{slot[r], c0};
                            Value lv =
                                vector::LoadOp::create(kb, kl, lT, lBuf, lAt);
                            for (int64_t k = 0; k < keyVecs; ++k)
                              lv = arith::AddFOp::create(
                                  kb, kl, lv,
                                  vector::ExtractStridedSliceOp::create(
                                      kb, kl, p, ArrayRef<int64_t>{k * vl},
                                      ArrayRef<int64_t>{vl},
                                      ArrayRef<int64_t>{1}));
                            vector::StoreOp::create(kb, kl, lv, lBuf, lAt);
                            vector::StoreOp::create(
                                kb, kl, p, pBuf,
                                ValueRange{cIdx(kb, kl, r), c0});
                          }
                          // O += P V, a register tile of pvRows x pvChunks
                          // vectors at a time. Keys past the end have p = 0;
                          // read a valid row.
                          SmallVector<Value> js;
                          for (int64_t jj = 0; jj < bk; ++jj)
                            js.push_back(arith::MinSIOp::create(
                                kb, kl,
                                arith::AddIOp::create(kb, kl, j0,
                                                      cIdx(kb, kl, jj)),
                                lastKey));
                          for (int64_t rg = 0; rg < rows; rg += pvRows) {
                            forChunks(
                                kb, kl, chunks / pvChunks,
                                [&](OpBuilder &cb, Location cl, Value cg) {
                                  SmallVector<Value> cols;
                                  for (int64_t c = 0; c < pvChunks; ++c)
                                    cols.push_back(arith::AddIOp::create(
                                        cb, cl,
                                        arith::MulIOp::create(
                                            cb, cl, cg,
                                            cIdx(cb, cl, pvChunks * wv)),
                                        cIdx(cb, cl, c * wv)));
                                  SmallVector<Value> o;
                                  for (int64_t i = 0; i < pvRows; ++i)
                                    for (int64_t c = 0; c < pvChunks; ++c)
                                      o.push_back(vector::LoadOp::create(
                                          cb, cl, vvT, acc,
                                          accAt(cb, cl, slot[rg + i],
                                                cols[c])));
                                  for (int64_t jj = 0; jj < bk; ++jj) {
                                    SmallVector<Value> vrow;
                                    for (int64_t c = 0; c < pvChunks; ++c)
                                      vrow.push_back(vector::LoadOp::create(
                                          cb, cl, vvT, v,
                                          ValueRange{bi, kvh, js[jj],
                                                     cols[c]}));
                                    for (int64_t i = 0; i < pvRows; ++i) {
                                      Value pb = vector::BroadcastOp::create(
                                          cb, cl, vvT,
                                          memref::LoadOp::create(
                                              cb, cl, pBuf,
                                              ValueRange{cIdx(cb, cl, rg + i),
                                                         cIdx(cb, cl, jj)}));
                                      for (int64_t c = 0; c < pvChunks; ++c)
                                        o[i * pvChunks + c] =
                                            vector::FMAOp::create(
                                                cb, cl, pb, vrow[c],
                                                o[i * pvChunks + c]);
                                    }
                                  }
                                  for (int64_t i = 0; i < pvRows; ++i)
                                    for (int64_t c = 0; c < pvChunks; ++c)
                                      vector::StoreOp::create(
                                          cb, cl, o[i * pvChunks + c], acc,
                                          accAt(cb, cl, slot[rg + i], cols[c]));
                                });
                          }
                        });
                  });
            });
        // out = O / sum, or zeros for a row that saw no key.
        forRange(
            nb, l, c0, tileCount, c1, [&](OpBuilder &ob, Location ol, Value i) {
              Value sum = vector::ReductionOp::create(
                  ob, ol, vector::CombiningKind::ADD,
                  vector::LoadOp::create(ob, ol, lT, lBuf, ValueRange{i, c0}),
                  Value(), arith::FastMathFlags::reassoc);
              Value invV = vector::BroadcastOp::create(ob, ol, vvT,
                                                       inverseSum(ob, ol, sum));
              Value row = arith::AddIOp::create(ob, ol, t0, i);
              forChunks(
                  ob, ol, chunks, [&](OpBuilder &cb, Location cl, Value c) {
                    Value col =
                        arith::MulIOp::create(cb, cl, c, cIdx(cb, cl, wv));
                    vector::StoreOp::create(
                        cb, cl,
                        arith::MulFOp::create(
                            cb, cl,
                            vector::LoadOp::create(cb, cl, vvT, acc,
                                                   accAt(cb, cl, i, col)),
                            invV),
                        out, ValueRange{bi, hi, row, col});
                  });
            });
      });
  markKeepParallel(par);
}

/// The decode kernel (flash decoding): parallel over batch x KV heads x
/// splits of the keys. A task takes all T x group query rows of its KV
/// head against its split: each block of K and V is loaded once and used
/// for every row (the scores of up to `blockRows` rows at a time in
/// registers, the block staying in L1 between them). Each row's running
/// max, sum and unnormalized output live in a workspace, one per split;
/// a second parallel loop merges the splits of every row, rescaling each
/// by exp(max_split - max), and divides by the merged sum. There are as
/// many splits as give every thread a task (tfm_get_threads over batch x
/// KV heads), but no split has fewer than kMinSplitKeys keys.
void AttentionLowering::emitDecode(OpBuilder &b, Location loc,
                                   int64_t group) const {
  int64_t kv = cast<MemRefType>(kt.getType()).getDimSize(1);
  // Scores of 8 rows x 2 vectors of keys fill half of AVX-512's registers.
  int64_t blockRows = decodeBlockRows(vl, group);
  Value groupV = cIdx(b, loc, group);
  Value rowsT = arith::MulIOp::create(b, loc, tq, groupV);
  Value threads = func::CallOp::create(b, loc, kThreadsFn,
                                       TypeRange{b.getI32Type()}, ValueRange{})
                      .getResult(0);
  threads = arith::MaxSIOp::create(
      b, loc, arith::IndexCastOp::create(b, loc, b.getIndexType(), threads),
      c1);
  Value tasks = arith::MaxSIOp::create(
      b, loc, arith::MulIOp::create(b, loc, bsz, kvHeads), c1);
  Value splits = arith::MaxSIOp::create(
      b, loc,
      arith::MinSIOp::create(
          b, loc, arith::CeilDivUIOp::create(b, loc, threads, tasks),
          arith::CeilDivUIOp::create(b, loc, tk, cIdx(b, loc, kMinSplitKeys))),
      c1);
  // The workspace: per sequence, KV head, split and row (t * group + g),
  // the running max and sum (`stats`, a cache line per row: tasks on
  // other threads update theirs at every block of keys), the unnormalized
  // output, and (per register block of rows) the block's probabilities;
  // cache-line aligned.
  Type f32 = b.getF32Type();
  int64_t dyn = ShapedType::kDynamic;
  auto alloc = [&](ArrayRef<int64_t> shape, ValueRange sizes) -> Value {
    return memref::AllocOp::create(b, loc, MemRefType::get(shape, f32), sizes,
                                   b.getI64IntegerAttr(kCacheLine));
  };
  Value stats =
      alloc({dyn, kv, dyn, dyn, kCacheLine / 4}, {bsz, splits, rowsT});
  Value maxLane = c0, sumLane = c1;
  Value partO = alloc({dyn, kv, dyn, dyn, dv}, {bsz, splits, rowsT});
  Value probs = alloc({dyn, kv, dyn, blockRows, bk}, {bsz, splits});

  auto par = scf::ParallelOp::create(
      b, loc, ValueRange{c0, c0, c0}, ValueRange{bsz, kvHeads, splits},
      ValueRange{c1, c1, c1}, [&](OpBuilder &nb, Location l, ValueRange ivs) {
        Value bi = ivs[0], kvh = ivs[1], si = ivs[2];
        Value offset, limit;
        std::tie(offset, limit) = sequenceBounds(nb, l, bi, Value());
        // The keys any row sees, [first, end), then this split's blocks.
        Value first, end, written;
        if (ring) {
          written = arith::AddIOp::create(nb, l, offset, tq);
          first = c0;
          end = arith::MinSIOp::create(nb, l, tk, written);
        } else {
          Value lo0 = rowBounds(nb, l, offset, limit).first;
          first = arith::MulIOp::create(
              nb, l, arith::DivUIOp::create(nb, l, lo0, cIdx(nb, l, bk)),
              cIdx(nb, l, bk));
          Value lastPos = arith::SubIOp::create(
              nb, l, arith::AddIOp::create(nb, l, offset, tq), c1);
          end = arith::MaxSIOp::create(
              nb, l, rowBounds(nb, l, lastPos, limit).second, first);
        }
        Value blocks = arith::CeilDivUIOp::create(
            nb, l, arith::SubIOp::create(nb, l, end, first), cIdx(nb, l, bk));
        Value perSplit = arith::MaxSIOp::create(
            nb, l, arith::CeilDivUIOp::create(nb, l, blocks, splits),
            cIdx(nb, l, kMinSplitKeys / bk));
        Value span = arith::MulIOp::create(nb, l, perSplit, cIdx(nb, l, bk));
        Value jStart = arith::AddIOp::create(
            nb, l, first, arith::MulIOp::create(nb, l, si, span));
        Value jEnd = arith::MinSIOp::create(
            nb, l, end, arith::AddIOp::create(nb, l, jStart, span));

        // The query heads of the group, and their ALiBi slopes.
        SmallVector<Value> head, slopeV(group);
        Value h0 = arith::MulIOp::create(nb, l, kvh, cIdx(nb, l, group));
        for (int64_t g = 0; g < group; ++g) {
          head.push_back(arith::AddIOp::create(nb, l, h0, cIdx(nb, l, g)));
          if (slopes)
            slopeV[g] = vector::BroadcastOp::create(
                nb, l, vk, selectByIndex(nb, l, head[g], *slopes));
        }
        // No key seen yet.
        forRange(
            nb, l, c0, rowsT, c1, [&](OpBuilder &ib, Location il, Value rr) {
              memref::StoreOp::create(ib, il, ninf, stats,
                                      ValueRange{bi, kvh, si, rr, maxLane});
              memref::StoreOp::create(ib, il, cF32(ib, il, 0.0), stats,
                                      ValueRange{bi, kvh, si, rr, sumLane});
              forChunks(
                  ib, il, chunks, [&](OpBuilder &cb, Location cl, Value c) {
                    Value col =
                        arith::MulIOp::create(cb, cl, c, cIdx(cb, cl, wv));
                    vector::StoreOp::create(cb, cl, zeroVV, partO,
                                            ValueRange{bi, kvh, si, rr, col});
                  });
            });

        forRange(
            nb, l, jStart, jEnd, cIdx(nb, l, bk),
            [&](OpBuilder &kb, Location kl, Value j0) {
              Value kMask = keyMask(kb, kl, j0);
              Value jv = keyPositions(kb, kl, j0, written);
              // The V rows of the block (keys past the end have p = 0:
              // read a valid row instead).
              Value lastKey = arith::SubIOp::create(kb, kl, tk, c1);
              SmallVector<Value> js;
              for (int64_t jj = 0; jj < bk; ++jj)
                js.push_back(arith::MinSIOp::create(
                    kb, kl, arith::AddIOp::create(kb, kl, j0, cIdx(kb, kl, jj)),
                    lastKey));
              forRange(
                  kb, kl, c0, tq, c1, [&](OpBuilder &tb, Location tl, Value t) {
                    Value pos = arith::AddIOp::create(tb, tl, offset, t);
                    Value lo, hi;
                    std::tie(lo, hi) = rowBounds(tb, tl, pos, limit);
                    Value row0 =
                        arith::MulIOp::create(tb, tl, t, cIdx(tb, tl, group));
                    for (int64_t g0 = 0; g0 < group; g0 += blockRows) {
                      int64_t n = std::min(blockRows, group - g0);
                      // S = Q K^T for the block: one contiguous vector of K^T
                      // per head dimension, broadcast-FMA'd into every row.
                      SmallVector<Value> qk =
                          dotBlock(tb, tl, bi, kvh, j0, kMask, n,
                                   [&](int64_t r) -> std::pair<Value, Value> {
                                     return {head[g0 + r], t};
                                   });
                      SmallVector<Value> rowAt, corrV;
                      for (int64_t r = 0; r < n; ++r) {
                        Value rr = arith::AddIOp::create(tb, tl, row0,
                                                         cIdx(tb, tl, g0 + r));
                        rowAt.push_back(rr);
                        SmallVector<Value, 5> mAt{bi, kvh, si, rr, maxLane};
                        SmallVector<Value, 5> lAt{bi, kvh, si, rr, sumLane};
                        Value s = scores(tb, tl, qk[r], jv, pos, lo, hi,
                                         head[g0 + r], slopeV[g0 + r]);
                        SoftmaxStep step = softmaxStep(
                            tb, tl, s,
                            memref::LoadOp::create(tb, tl, stats, mAt),
                            memref::LoadOp::create(tb, tl, stats, lAt));
                        memref::StoreOp::create(tb, tl, step.m, stats, mAt);
                        memref::StoreOp::create(tb, tl, step.l, stats, lAt);
                        vector::StoreOp::create(
                            tb, tl, step.p, probs,
                            ValueRange{bi, kvh, si, cIdx(tb, tl, r), c0});
                        corrV.push_back(vector::BroadcastOp::create(tb, tl, vvT,
                                                                    step.corr));
                      }
                      // O = O * corr + P V, a chunk of the head at a time: each
                      // V vector is loaded once for all the rows.
                      forChunks(
                          tb, tl, chunks,
                          [&](OpBuilder &cb, Location cl, Value c) {
                            Value col = arith::MulIOp::create(cb, cl, c,
                                                              cIdx(cb, cl, wv));
                            SmallVector<Value> acc;
                            for (int64_t r = 0; r < n; ++r)
                              acc.push_back(arith::MulFOp::create(
                                  cb, cl,
                                  vector::LoadOp::create(
                                      cb, cl, vvT, partO,
                                      ValueRange{bi, kvh, si, rowAt[r], col}),
                                  corrV[r]));
                            for (int64_t jj = 0; jj < bk; ++jj) {
                              Value vrow = vector::LoadOp::create(
                                  cb, cl, vvT, v,
                                  ValueRange{bi, kvh, js[jj], col});
                              for (int64_t r = 0; r < n; ++r) {
                                Value pj = memref::LoadOp::create(
                                    cb, cl, probs,
                                    ValueRange{bi, kvh, si, cIdx(cb, cl, r),
                                               cIdx(cb, cl, jj)});
                                acc[r] = vector::FMAOp::create(
                                    cb, cl,
                                    vector::BroadcastOp::create(cb, cl, vvT,
                                                                pj),
                                    vrow, acc[r]);
                              }
                            }
                            for (int64_t r = 0; r < n; ++r)
                              vector::StoreOp::create(
                                  cb, cl, acc[r], partO,
                                  ValueRange{bi, kvh, si, rowAt[r], col});
                          });
                    }
                  });
            });
      });
  markKeepParallel(par);

  // The merge: out = sum_s exp(m_s - m) O_s / sum_s exp(m_s - m) l_s with
  // m = max_s m_s, or zeros for a row that saw no key.
  auto merge = scf::ParallelOp::create(
      b, loc, ValueRange{c0, c0}, ValueRange{bsz, heads}, ValueRange{c1, c1},
      [&](OpBuilder &nb, Location l, ValueRange ivs) {
        Value bi = ivs[0], hi = ivs[1];
        Value kvh = arith::DivUIOp::create(nb, l, hi, cIdx(nb, l, group));
        Value g = arith::RemUIOp::create(nb, l, hi, cIdx(nb, l, group));
        forRange(nb, l, c0, tq, c1, [&](OpBuilder &tb, Location tl, Value t) {
          Value rr = arith::AddIOp::create(
              tb, tl, arith::MulIOp::create(tb, tl, t, cIdx(tb, tl, group)), g);
          auto overSplits =
              [&](OpBuilder &sb, Location sl, Value init,
                  function_ref<Value(OpBuilder &, Location, Value, Value)>
                      step) {
                return scf::ForOp::create(
                           sb, sl, c0, splits, c1, ValueRange{init},
                           [&](OpBuilder &fb, Location fl, Value s,
                               ValueRange acc) {
                             scf::YieldOp::create(fb, fl,
                                                  step(fb, fl, s, acc[0]));
                           })
                    .getResult(0);
              };
          auto maxOf = [&](OpBuilder &fb, Location fl, Value s) -> Value {
            return memref::LoadOp::create(fb, fl, stats,
                                          ValueRange{bi, kvh, s, rr, maxLane});
          };
          Value m = overSplits(
              tb, tl, ninf,
              [&](OpBuilder &fb, Location fl, Value s, Value acc) -> Value {
                return arith::MaximumFOp::create(fb, fl, acc, maxOf(fb, fl, s));
              });
          // No key seen at all: every exponent is exp(-inf) = 0.
          Value none =
              arith::CmpFOp::create(tb, tl, arith::CmpFPredicate::OEQ, m, ninf);
          Value mUse =
              arith::SelectOp::create(tb, tl, none, cF32(tb, tl, 0.0), m);
          auto weight = [&](OpBuilder &fb, Location fl, Value s) -> Value {
            return math::ExpOp::create(
                fb, fl, arith::SubFOp::create(fb, fl, maxOf(fb, fl, s), mUse));
          };
          Value sum = overSplits(
              tb, tl, cF32(tb, tl, 0.0),
              [&](OpBuilder &fb, Location fl, Value s, Value acc) -> Value {
                Value ls = memref::LoadOp::create(
                    fb, fl, stats, ValueRange{bi, kvh, s, rr, sumLane});
                return arith::AddFOp::create(
                    fb, fl, acc,
                    arith::MulFOp::create(fb, fl, weight(fb, fl, s), ls));
              });
          Value inv = inverseSum(tb, tl, sum);
          forChunks(tb, tl, chunks, [&](OpBuilder &cb, Location cl, Value c) {
            Value col = arith::MulIOp::create(cb, cl, c, cIdx(cb, cl, wv));
            Value o = overSplits(
                cb, cl, zeroVV,
                [&](OpBuilder &fb, Location fl, Value s, Value acc) -> Value {
                  Value w =
                      arith::MulFOp::create(fb, fl, weight(fb, fl, s), inv);
                  return vector::FMAOp::create(
                      fb, fl, vector::BroadcastOp::create(fb, fl, vvT, w),
                      vector::LoadOp::create(fb, fl, vvT, partO,
                                             ValueRange{bi, kvh, s, rr, col}),
                      acc);
                });
            vector::StoreOp::create(cb, cl, o, out, ValueRange{bi, hi, t, col});
          });
        });
      });
  markKeepParallel(merge);
  for (Value buf : {stats, partO, probs})
    memref::DeallocOp::create(b, loc, buf);
}

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
        cast<MemRefType>(op.getValue().getType()).isDynamicDim(3))
      return b.notifyMatchFailure(op, "head dimensions must be static");
    Location loc = op.getLoc();
    AttentionLowering a(op, vl);
    a.emitCommon(b, loc);
    std::optional<int64_t> group = a.decodeGroup();
    std::optional<AttentionLowering> dec;
    if (group) {
      // Decode: blocks of keys as wide as the scores of a register block
      // of rows allow (longer contiguous runs of each row of K^T).
      dec.emplace(op, vl, decodeKeyVectors(vl, *group));
      dec->emitCommon(b, loc, &a);
    }
    if (!group) {
      a.emitPrefill(b, loc);
      b.eraseOp(op);
      return success();
    }
    // Over a KV cache: the decode kernel for few query rows per KV head,
    // decided at run time unless T is static.
    int64_t maxT = std::max<int64_t>(1, kDecodeMaxRows / *group);
    if (!qt.isDynamicDim(2) && qt.getDimSize(2) > maxT) {
      a.emitPrefill(b, loc);
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
          a.emitPrefill(eb, el);
          scf::YieldOp::create(eb, el);
        });
    b.eraseOp(op);
    return success();
  }
};

/// Whether memref.copy lowers to a plain memcpy (identity layouts), rather
/// than to the generic `memrefCopy` of MLIR's C runner utilities, which
/// tfm artifacts do not link.
bool isContiguousCopy(memref::CopyOp op) {
  return cast<MemRefType>(op.getSource().getType()).getLayout().isIdentity() &&
         cast<MemRefType>(op.getTarget().getType()).getLayout().isIdentity();
}

/// A copy between strided buffers (a window of a KV cache, the last row of
/// a sequence): an element loop nest, innermost dimension last.
struct LowerStridedCopy : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &b) const override {
    if (isContiguousCopy(op))
      return b.notifyMatchFailure(op, "contiguous");
    Location loc = op.getLoc();
    Value src = op.getSource(), dst = op.getTarget();
    int64_t rank = cast<MemRefType>(src.getType()).getRank();
    SmallVector<Value> lbs(rank, cIdx(b, loc, 0)), steps(rank, cIdx(b, loc, 1)),
        ubs;
    for (int64_t i = 0; i < rank; ++i)
      ubs.push_back(dim(b, loc, src, i));
    scf::buildLoopNest(b, loc, lbs, ubs, steps,
                       [&](OpBuilder &nb, Location l, ValueRange ivs) {
                         Value v = memref::LoadOp::create(nb, l, src, ivs);
                         memref::StoreOp::create(nb, l, v, dst, ivs);
                       });
    b.eraseOp(op);
    return success();
  }
};

struct TfmLowerKernelsPass
    : mlir::tfm::impl::TfmLowerKernelsBase<TfmLowerKernelsPass> {
  using TfmLowerKernelsBase::TfmLowerKernelsBase;
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    // The CPU kernels compute in f32 (f16 and bf16 kernels are the GPU's),
    // the linear's weight in bf16 pairs or int8 quads aside.
    WalkResult types = getOperation().walk([&](Operation *op) {
      if (!isa<LinearKernelOp, AttentionKernelOp>(op))
        return WalkResult::advance();
      auto lin = dyn_cast<LinearKernelOp>(op);
      for (Value v : op->getOperands()) {
        Type elt = cast<ShapedType>(v.getType()).getElementType();
        // The weight in pairs or quads, and the input perhaps packed for
        // it (by a tfm.norm_kernel).
        if (lin && (v == lin.getWeightP() || v == lin.getInput()) &&
            (elt.isBF16() || elt.isSignlessInteger(8)) &&
            cast<ShapedType>(lin.getOutput().getType())
                .getElementType()
                .isF32() &&
            cast<ShapedType>(lin.getWeightP().getType()).getElementType() ==
                elt) {
          if (vectorWidth != 16) {
            op->emitOpError()
                << (elt.isBF16() ? "multiplies weights in bf16 pairs, which "
                                   "needs AVX-512 (AVX512_BF16)"
                                 : "multiplies weights in int8 quads, which "
                                   "needs AVX-512 (AVX512_VNNI)");
            return WalkResult::interrupt();
          }
          continue;
        }
        if (isa<FloatType>(elt) && !elt.isF32()) {
          op->emitOpError() << "computes in " << elt
                            << ", which the CPU kernels do not support (they "
                               "compute in f32)";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (types.wasInterrupted())
      return signalPassFailure();
    ConversionTarget target(*ctx);
    target.addLegalDialect<arith::ArithDialect, func::FuncDialect,
                           math::MathDialect, memref::MemRefDialect,
                           scf::SCFDialect, vector::VectorDialect,
                           x86vector::X86VectorDialect, LLVM::LLVMDialect>();
    target.addIllegalOp<LinearKernelOp, NormKernelOp, AttentionKernelOp,
                        AllReduceKernelOp, AllGatherKernelOp, TpRankOp>();
    target.addDynamicallyLegalOp<memref::CopyOp>(isContiguousCopy);
    RewritePatternSet patterns(ctx);
    populateLowerKernelPatterns(patterns, vectorWidth);
    populateLowerCollectivePatterns(patterns);
    patterns.add<LowerStridedCopy>(ctx);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    // Fold the kernels' index arithmetic and share their constants.
    (void)applyPatternsGreedily(getOperation(), FrozenRewritePatternSet());
  }
};

} // namespace

void mlir::tfm::populateLowerKernelPatterns(RewritePatternSet &patterns,
                                            int64_t vectorWidth) {
  patterns.add<LowerLinearKernel, LowerAttentionKernel, LowerNormKernel>(
      patterns.getContext(), vectorWidth);
}
