//===- LowerLinearKernel.cpp - tfm.linear_kernel as a CPU GEMM ------------===//
//
// tfm.linear_kernel: out[M, N] = A[M, K] * W^T + bias, with W packed in
// panels [P, K, PW] (PW = 2 vectors of output columns, zero-padded; the
// layouts, also in bf16 pairs and int8 quads, are tfm/packed_layout.h's). A
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
//===----------------------------------------------------------------------===//

#include "CpuKernelBuilders.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::cpu;

namespace {

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

/// The rows of A [M, K] f32 in a new buffer packed as `packing` says
/// (storePackedRow), rows in parallel.
Value packRows(OpBuilder &b, Location loc, Value a, Value m, int64_t k,
               Packing packing, bool serial) {
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
  if (!serial)
    markKeepParallel(par);
  return buf;
}

/// The LLVM intrinsic of AVX512_VNNI's vpdpbusd on 512-bit vectors: acc +
/// the sums of four products of unsigned bytes of `u` and signed bytes of
/// `s` per i32 lane.
constexpr StringLiteral kVpdpbusd = "llvm.x86.avx512.vpdpbusd.512";

/// The register tile of rows [m0, m0 + rows) of panel `p`: its rows and
/// columns in the output, the offsets of its vectors in a row of the panel
/// (f32, bf16 pairs, int8 quads), and the masks (or none) that limit a
/// partial last panel.
struct Tile {
  Value p;
  int64_t rows;
  ArrayRef<Value> masks;
  SmallVector<Value> colIdx, laneIdx, pairIdx, quadIdx, rowIdx;
};

/// The GEMM of one tfm.linear_kernel: the operands and shapes of the op,
/// the constants emitted before the kernel, the register tile (microKernel),
/// a task of tiles and their distribution over threads.
struct LinearLowering {
  int64_t vl;
  Value a, wp, bias, out;
  /// The epilogue: activation, product with `mul`, sum with `residual`.
  std::optional<Activation> activation;
  Value mul, residual;
  /// How the panels hold K (tfm/packed_layout.h): f32; bf16 pairs, whose
  /// pair of A's columns, rounded to bf16, vdpbf16ps multiplies by the pair
  /// of each column; int8 quads, the columns' scales and sums last, whose
  /// quad of A's columns, quantized per row, vpdpbusd multiplies by the quad
  /// of each column.
  tfm_packing packing;
  bool pairs, quads;
  /// The words of K a column holds in a panel (K for f32), the columns of
  /// a panel and of the output: static, or (f32 panels of a kernel shared
  /// by every shape) K and N dynamic, read from the buffers at run time.
  int64_t steps, panel, n;
  // Set by emitCommon.
  int64_t kCols, tileRows;
  /// The words of K as a value (a constant when static).
  Value stepsV;
  VectorType vt, maskT, pairT, pairIntT, quadT, accIntT;
  Value m, c0, c1, zeroV;
  /// A in bf16 pairs or int8 quads for such weights, and the buffer it was
  /// packed into here (null: none).
  Value aPacked, aOwned;

  /// The kernel runs on the thread that reaches it (inside a parallel loop
  /// of its own caller: tfm.moe_kernel's experts); its loops stay serial.
  bool serial = false;

  LinearLowering(LinearKernelOp op, int64_t vl) : vl(vl) {
    serial = op->hasAttr(LinearKernelOp::kSerialAttrName);
    a = op.getInput();
    wp = op.getWeightP();
    bias = op.getBias();
    out = op.getOutput();
    activation = op.getActivation();
    mul = op.getMul();
    residual = op.getResidual();
    auto wType = cast<MemRefType>(wp.getType());
    pairs = wType.getElementType().isBF16();
    quads = wType.getElementType().isSignlessInteger(8);
    packing = pairs   ? TFM_PACKING_BF16_PAIRS
              : quads ? TFM_PACKING_INT8_QUADS
                      : TFM_PACKING_F32;
    steps = ShapedType::isDynamic(wType.getDimSize(1))
                ? ShapedType::kDynamic
                : tfm_packed_steps_of(packing, wType.getDimSize(1));
    panel = tfm_packed_panel_of(packing, wType.getDimSize(2));
    n = cast<MemRefType>(out.getType()).getDimSize(1);
  }

  /// The constants and sizes, and A packed for bf16 or int8 weights.
  void emitCommon(OpBuilder &b, Location loc) {
    kCols = panel / vl;
    tileRows = gemmTileRows(vl);
    vt = VectorType::get({vl}, b.getF32Type());
    maskT = VectorType::get({vl}, b.getI1Type());
    m = dim(b, loc, a, 0);
    c0 = cIdx(b, loc, 0);
    c1 = cIdx(b, loc, 1);
    stepsV =
        ShapedType::isDynamic(steps) ? dim(b, loc, wp, 1) : cIdx(b, loc, steps);
    zeroV = arith::ConstantOp::create(
        b, loc, vt, DenseElementsAttr::get(vt, b.getF32FloatAttr(0.0)));
    pairT = VectorType::get({2 * vl}, b.getBF16Type());
    pairIntT = VectorType::get({vl}, b.getI32Type());
    // With bf16 weights A comes in bf16 pairs, with int8 weights in int8
    // quads with the rows' scales (packRows): packed here unless a
    // tfm.norm_kernel already wrote it so.
    if ((pairs || quads) && packingOf(a) == Packing::None)
      aPacked = aOwned =
          packRows(b, loc, a, m, cast<MemRefType>(a.getType()).getDimSize(1),
                   pairs ? Packing::Bf16Pairs : Packing::Int8Quads, serial);
    else if (pairs || quads)
      aPacked = a;
    quadT = VectorType::get({4 * vl}, b.getI8Type());
    accIntT = VectorType::get({vl}, b.getI32Type());
  }

  /// The i32 at packed column `col` of row `row` of A (a pair or a quad).
  Value loadWord(OpBuilder &nb, Location l, Value row, Value col) const {
    Type elt = cast<MemRefType>(aPacked.getType()).getElementType();
    auto wordT = VectorType::get({pairs ? 2 : 4}, elt);
    Value w =
        vector::LoadOp::create(nb, l, wordT, aPacked, ValueRange{row, col});
    return vector::ExtractOp::create(
        nb, l,
        vector::BitCastOp::create(nb, l, VectorType::get({1}, nb.getI32Type()),
                                  w),
        ArrayRef<int64_t>{0});
  }

  /// The indices of the register tile of rows [m0, m0 + rows) of panel `p`
  /// (columns n0 = p * panel ...).
  Tile tileAt(OpBuilder &nb, Location l, Value m0, int64_t rows, Value p,
              ArrayRef<Value> masks) const {
    Tile t{p, rows, masks, {}, {}, {}, {}, {}};
    Value n0 = arith::MulIOp::create(nb, l, p, cIdx(nb, l, panel));
    for (int64_t c = 0; c < kCols; ++c) {
      t.colIdx.push_back(arith::AddIOp::create(nb, l, n0, cIdx(nb, l, c * vl)));
      // Where the words of columns c * vl.. start in a row of the panel.
      t.laneIdx.push_back(
          cIdx(nb, l, tfm_packed_word_column(TFM_PACKING_F32, c * vl)));
      t.pairIdx.push_back(
          cIdx(nb, l, tfm_packed_word_column(TFM_PACKING_BF16_PAIRS, c * vl)));
      t.quadIdx.push_back(
          cIdx(nb, l, tfm_packed_word_column(TFM_PACKING_INT8_QUADS, c * vl)));
    }
    for (int64_t r = 0; r < rows; ++r)
      t.rowIdx.push_back(arith::AddIOp::create(nb, l, m0, cIdx(nb, l, r)));
    return t;
  }

  /// The tile's accumulators before the first k: zeros (i32 with int8
  /// weights) or the bias.
  SmallVector<Value> tileInit(OpBuilder &nb, Location l, const Tile &t) const {
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
      else if (t.masks.empty())
        cols.push_back(vector::LoadOp::create(nb, l, vt, bias, t.colIdx[c]));
      else
        cols.push_back(vector::MaskedLoadOp::create(
            nb, l, vt, bias, t.colIdx[c], t.masks[c], zeroV, IntegerAttr()));
    }
    for (int64_t r = 0; r < t.rows; ++r)
      init.append(cols);
    return init;
  }

  /// Row r's packed word (G values of K in 32 bits) at step `kk` of K,
  /// broadcast to `intT` and viewed as the `lanes` the instruction takes.
  Value broadcastWord(OpBuilder &bb, Location ll, const Tile &t, int64_t r,
                      Value kk, VectorType intT, VectorType lanes) const {
    // The word of step kk starts at column G kk of the row.
    Value s = loadWord(
        bb, ll, t.rowIdx[r],
        arith::MulIOp::create(
            bb, ll, kk, cIdx(bb, ll, tfm_packed_word_column(packing, 1))));
    return vector::BitCastOp::create(
        bb, ll, lanes, vector::BroadcastOp::create(bb, ll, intT, s));
  }

  /// The products of row r of the tile at `kk` with the panel's row `w`,
  /// added to its accumulators `acc`, appended to `next`: broadcast-FMA in
  /// f32, vdpbf16ps on bf16 pairs, vpdpbusd on int8 quads.
  void rowProducts(OpBuilder &bb, Location ll, const Tile &t, int64_t r,
                   Value kk, ArrayRef<Value> w, ValueRange acc,
                   SmallVectorImpl<Value> &next) const {
    if (quads) {
      Value sv = broadcastWord(bb, ll, t, r, kk, accIntT, quadT);
      for (int64_t c = 0; c < kCols; ++c)
        next.push_back(LLVM::CallIntrinsicOp::create(
                           bb, ll, accIntT, bb.getStringAttr(kVpdpbusd),
                           ValueRange{acc[r * kCols + c], sv, w[c]})
                           .getResult(0));
      return;
    }
    if (pairs) {
      Value sv = broadcastWord(bb, ll, t, r, kk, pairIntT, pairT);
      for (int64_t c = 0; c < kCols; ++c)
        next.push_back(
            x86vector::DotBF16Op::create(bb, ll, acc[r * kCols + c], sv, w[c]));
      return;
    }
    Value s = memref::LoadOp::create(bb, ll, a, ValueRange{t.rowIdx[r], kk});
    Value sv = vector::BroadcastOp::create(bb, ll, vt, s);
    for (int64_t c = 0; c < kCols; ++c)
      next.push_back(
          vector::FMAOp::create(bb, ll, sv, w[c], acc[r * kCols + c]));
  }

  /// The loop over K of the tile, from the accumulators `init`.
  scf::ForOp productLoop(OpBuilder &nb, Location l, const Tile &t,
                         ValueRange init) const {
    return scf::ForOp::create(
        nb, l, c0, stepsV, c1, init,
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
                                       ValueRange{t.p, kk,
                                                  pairs   ? t.pairIdx[c]
                                                  : quads ? t.quadIdx[c]
                                                          : t.laneIdx[c]}));
          SmallVector<Value> next;
          for (int64_t r = 0; r < t.rows; ++r)
            rowProducts(bb, ll, t, r, kk, w, acc, next);
          scf::YieldOp::create(bb, ll, next);
        });
  }

  /// The i32 accumulator `v` of vector c of row r as f32: (acc - 128
  /// colsum) x column scale x row scale + bias: the column scales and sums
  /// are the panel's last two rows, the row's scale follows its quads.
  Value dequantize(OpBuilder &nb, Location l, const Tile &t, int64_t r,
                   int64_t c, Value v) const {
    auto panelRow = [&](int64_t at, Type type) {
      return vector::BitCastOp::create(
          nb, l, type,
          vector::LoadOp::create(
              nb, l, quadT, wp,
              ValueRange{t.p, cIdx(nb, l, at), t.quadIdx[c]}));
    };
    Value scaleW = panelRow(tfm_packed_scales_row(steps), vt);
    Value sum128 = panelRow(tfm_packed_sums_row(steps), accIntT);
    Value rowScale = vector::BroadcastOp::create(
        nb, l, vt,
        arith::BitcastOp::create(
            nb, l, nb.getF32Type(),
            loadWord(nb, l, t.rowIdx[r],
                     cIdx(nb, l, tfm_packed_word_column(packing, steps)))));
    v = arith::MulFOp::create(
        nb, l,
        arith::SIToFPOp::create(nb, l, vt,
                                arith::SubIOp::create(nb, l, v, sum128)),
        arith::MulFOp::create(nb, l, scaleW, rowScale));
    if (bias)
      v = arith::AddFOp::create(
          nb, l, v,
          t.masks.empty()
              ? Value(vector::LoadOp::create(nb, l, vt, bias, t.colIdx[c]))
              : Value(vector::MaskedLoadOp::create(nb, l, vt, bias, t.colIdx[c],
                                                   t.masks[c], zeroV,
                                                   IntegerAttr())));
    return v;
  }

  /// Stores the accumulator `v` of vector c of row r of the tile, the
  /// epilogue applied on the registers before.
  void storeAccumulator(OpBuilder &nb, Location l, const Tile &t, int64_t r,
                        int64_t c, Value v) const {
    SmallVector<Value, 2> idx{t.rowIdx[r], t.colIdx[c]};
    if (quads)
      v = dequantize(nb, l, t, r, c, v);
    // The epilogue, on the registers before they are stored.
    auto load = [&](Value from) -> Value {
      SmallVector<Value> at = rowIndices(nb, l, from, t.rowIdx[r]);
      at.push_back(t.colIdx[c]);
      if (t.masks.empty())
        return vector::LoadOp::create(nb, l, vt, from, at);
      return vector::MaskedLoadOp::create(nb, l, vt, from, at, t.masks[c],
                                          zeroV);
    };
    if (activation)
      v = buildActivation(nb, l, *activation, v);
    if (mul)
      v = arith::MulFOp::create(nb, l, v, load(mul));
    if (residual)
      v = arith::AddFOp::create(nb, l, v, load(residual));
    if (t.masks.empty())
      vector::StoreOp::create(nb, l, v, out, idx);
    else
      vector::MaskedStoreOp::create(nb, l, out, idx, t.masks[c], v,
                                    IntegerAttr());
  }

  /// The register tile: rows [m0, m0 + rows) of panel `p` (columns
  /// n0 = p * panel ...) over all of K; `masks` (or empty) limit a partial
  /// last panel.
  void microKernel(OpBuilder &nb, Location l, Value m0, int64_t rows, Value p,
                   ArrayRef<Value> masks) const {
    Tile t = tileAt(nb, l, m0, rows, p, masks);
    SmallVector<Value> init = tileInit(nb, l, t);
    scf::ForOp loop = productLoop(nb, l, t, init);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < kCols; ++c)
        storeAccumulator(nb, l, t, r, c, loop.getResult(r * kCols + c));
  }

  /// One task: rows [r0, r1) times panels [p0, p1), panel by panel, every
  /// register tile of the rows. Rows past the last whole tile take one
  /// tile of each power of two below the tile's height (4, 2, 1), as the
  /// remainder's bits say, rather than one row at a time (a one-row tile
  /// waits on the latency of its two accumulators).
  void task(OpBuilder &nb, Location l, Value r0, Value r1, Value p0, Value p1,
            ArrayRef<Value> masks) const {
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
        Value has = arith::CmpIOp::create(pb, pl, arith::CmpIPredicate::ne, bit,
                                          cIdx(pb, pl, 0));
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
  }

  /// Tasks: panel groups x row groups, panel groups outermost so that the
  /// threads' contiguous shares of the tasks split the columns (each
  /// thread reads its own part of the weights) and successive tasks of a
  /// thread reuse a panel group from L2; M = 1 (decode) still has a task
  /// per panel group, and a few panels with many rows (N = 64) still have
  /// a task per row group. A partial last panel runs after, on one
  /// thread, through masks. With a dynamic N the whole panels and the
  /// partial one are counted at run time.
  void emitTasks(OpBuilder &b, Location loc) const {
    // The panels fit N exactly (the verifier's rule): N / panel whole ones,
    // then a partial one of N % panel columns (constants where N is
    // static).
    Value nV = ShapedType::isDynamic(n) ? dim(b, loc, out, 1) : cIdx(b, loc, n);
    Value panelV = cIdx(b, loc, panel);
    Value fullPanels = b.createOrFold<arith::DivUIOp>(loc, nV, panelV);
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
    if (!isConstantIntValue(fullPanels, 0)) {
      Value rowGroups = arith::CeilDivUIOp::create(b, loc, m, groupRows);
      Value panelGroups = b.createOrFold<arith::CeilDivUIOp>(
          loc, fullPanels, cIdx(b, loc, kGemmPanelGroup));
      auto par = scf::ParallelOp::create(
          b, loc, ValueRange{c0, c0}, ValueRange{panelGroups, rowGroups},
          ValueRange{c1, c1}, [&](OpBuilder &nb, Location l, ValueRange ivs) {
            Value p0 = arith::MulIOp::create(nb, l, ivs[0],
                                             cIdx(nb, l, kGemmPanelGroup));
            Value p1 = arith::MinSIOp::create(
                nb, l,
                arith::AddIOp::create(nb, l, p0, cIdx(nb, l, kGemmPanelGroup)),
                fullPanels);
            Value r0 = arith::MulIOp::create(nb, l, ivs[1], groupRows);
            Value r1 = arith::MinSIOp::create(
                nb, l, arith::AddIOp::create(nb, l, r0, groupRows), m);
            task(nb, l, r0, r1, p0, p1, {});
          });
      if (!serial)
        markKeepParallel(par);
    }
    // The partial last panel, through masks of its columns.
    Value tail = b.createOrFold<arith::RemUIOp>(loc, nV, panelV);
    auto partialPanel = [&](OpBuilder &pb, Location pl) {
      SmallVector<Value> masks;
      for (int64_t c = 0; c < kCols; ++c) {
        Value valid = pb.createOrFold<arith::MaxSIOp>(
            pl,
            pb.createOrFold<arith::MinSIOp>(
                pl,
                pb.createOrFold<arith::SubIOp>(pl, tail, cIdx(pb, pl, c * vl)),
                cIdx(pb, pl, vl)),
            c0);
        masks.push_back(
            vector::CreateMaskOp::create(pb, pl, maskT, ValueRange{valid}));
      }
      task(pb, pl, c0, m, fullPanels,
           pb.createOrFold<arith::AddIOp>(pl, fullPanels, c1), masks);
    };
    if (std::optional<int64_t> staticTail = getConstantIntValue(tail)) {
      if (*staticTail)
        partialPanel(b, loc);
    } else {
      Value hasTail =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, tail, c0);
      scf::IfOp::create(b, loc, hasTail, [&](OpBuilder &ib, Location il) {
        partialPanel(ib, il);
        scf::YieldOp::create(ib, il);
      });
    }
    if (aOwned)
      memref::DeallocOp::create(b, loc, aOwned);
  }
};

struct LowerLinearKernel : OpRewritePattern<LinearKernelOp> {
  LowerLinearKernel(MLIRContext *ctx, int64_t vl)
      : OpRewritePattern(ctx), vl(vl) {}
  int64_t vl;

  LogicalResult matchAndRewrite(LinearKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureBufferSemantics())
      return b.notifyMatchFailure(op, "not bufferized yet");
    LinearLowering lin(op, vl);
    if ((lin.pairs || lin.quads) && vl != 16)
      return b.notifyMatchFailure(op, "bf16 and int8 weights need AVX-512 "
                                      "vectors");
    if (lin.panel % vl != 0)
      return b.notifyMatchFailure(op, "panel width is not whole vectors");
    Location loc = op.getLoc();
    lin.emitCommon(b, loc);
    lin.emitTasks(b, loc);
    b.eraseOp(op);
    return success();
  }
};

} // namespace

void cpu::populateLowerLinearKernelPattern(RewritePatternSet &patterns,
                                           int64_t vectorWidth) {
  patterns.add<LowerLinearKernel>(patterns.getContext(), vectorWidth);
}
