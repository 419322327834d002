//===- LowerAttentionPrefill.cpp - the CPU prefill attention kernel -------===//
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
//===----------------------------------------------------------------------===//

#include "AttentionLowering.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::cpu;

namespace {

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

/// One task of the prefill kernel: sequence `bi`, head `hi` and the tile
/// of query rows [t0, t0 + tileCount), and the tile's state.
struct PrefillTask {
  Value bi, hi, t0, tileCount, nGroups, kvh, lastRow;
  /// The sequence's bounds (sequenceBounds), the positions written in a
  /// ring buffer, the head's ALiBi slope (or null).
  Value offset, limit, written, slopeV;
  /// Output accumulators (a wide head's: its output rows), running max
  /// (base 2) and lane-wise running sums, one block of probabilities.
  Value acc, mBuf, lBuf, pBuf;
};

/// The rows of a group of a tile (clamped: a partial last group
/// recomputes the last row into its own accumulators), their positions and
/// visible keys, and the keys [first, end) any of them sees.
struct RowGroup {
  SmallVector<Value> row, pos, lo, hi;
  Value first, end;
};

/// The scores of a block of keys for the rows of a group, in base-2
/// units, the rows' running maxes before the block, and whether any score
/// passes its row's max by kRescaleThreshold.
struct BlockScores {
  SmallVector<Value> t, mOld;
  Value any;
};

/// The prefill kernel of a lowering (AttentionLowering::emitPrefill): the
/// shared lowering with the kernel's blocking and its own constants.
struct PrefillKernel : AttentionLowering {
  Type f32;
  /// A head wider than kMaxStackChunks vectors accumulates in its output
  /// rows, one row a group, so that the stack does not grow with head_dim.
  bool wide;
  int64_t rows, keyVecs, tileRows, pvRows, pvChunks, sbKeys;
  /// Without score modifiers or a ring buffer, the scale and log2(e) fold
  /// into one multiply and the mask compares i32 lanes.
  bool plain;
  VectorType lT, laneI;
  // Emitted before the kernel by emitConstants.
  Value group, alignedOffset, tiles, scaleL2, log2eV, lanes32, zeroL;

  PrefillKernel(const AttentionLowering &a, OpBuilder &b)
      : AttentionLowering(a) {
    f32 = b.getF32Type();
    wide = chunks > kMaxStackChunks;
    rows = wide ? 1 : vl >= 16 ? 8 : 4;
    keyVecs = bk / vl;
    int64_t groupsPerTile =
        wide ? 8
             : std::clamp<int64_t>(kTileAccumulatorBytes / (rows * dv * 4), 1,
                                   8);
    tileRows = rows * groupsPerTile;
    pvRows = std::min<int64_t>(rows, vl >= 16 ? 4 : 2);
    pvChunks = std::min<int64_t>(chunks, 4);
    while (chunks % pvChunks != 0)
      --pvChunks;
    sbKeys = std::max<int64_t>(1, kSuperblockBytes / ((d + dv) * 4) / bk) * bk;
    plain = !softcap && !slopes && !bias && !ring;
    lT = VectorType::get({vl}, f32);
    laneI = VectorType::get({bk}, b.getI32Type());
  }

  /// The kernel's group size, tiles and constants, before its loops.
  void emitConstants(OpBuilder &b, Location loc) {
    group = arith::DivUIOp::create(b, loc, heads, kvHeads);
    alignedOffset = arith::SubIOp::create(b, loc, tk, tq);
    tiles = arith::CeilDivUIOp::create(b, loc, tq, cIdx(b, loc, tileRows));
    scaleL2 =
        vector::BroadcastOp::create(b, loc, vk, cF32(b, loc, scale * kLog2E));
    log2eV = vector::BroadcastOp::create(b, loc, vk, cF32(b, loc, kLog2E));
    lanes32 = arith::IndexCastOp::create(b, loc, laneI, lanes);
    zeroL = arith::ConstantOp::create(
        b, loc, lT, DenseElementsAttr::get(lT, b.getF32FloatAttr(0.0)));
  }

  /// The kernel: a task per sequence, head and tile of query rows.
  void emit(OpBuilder &b, Location loc) {
    emitConstants(b, loc);
    auto par = scf::ParallelOp::create(
        b, loc, ValueRange{c0, c0, c0}, ValueRange{bsz, heads, tiles},
        ValueRange{c1, c1, c1}, [&](OpBuilder &nb, Location l, ValueRange ivs) {
          PrefillTask task = beginTask(nb, l, ivs);
          passKeys(nb, l, task);
          storeOutput(nb, l, task);
        });
    markKeepParallel(par);
  }

  /// The task at `ivs` (sequence, head, tile): its rows and bounds, and
  /// its state on the stack, initialized (no key seen yet).
  PrefillTask beginTask(OpBuilder &nb, Location l, ValueRange ivs) const {
    PrefillTask task;
    task.bi = ivs[0];
    task.hi = ivs[1];
    task.t0 = arith::MulIOp::create(nb, l, ivs[2], cIdx(nb, l, tileRows));
    Value tileEnd = arith::MinSIOp::create(
        nb, l, arith::AddIOp::create(nb, l, task.t0, cIdx(nb, l, tileRows)),
        tq);
    task.tileCount = arith::SubIOp::create(nb, l, tileEnd, task.t0);
    task.nGroups =
        arith::CeilDivUIOp::create(nb, l, task.tileCount, cIdx(nb, l, rows));
    task.kvh = arith::DivUIOp::create(nb, l, task.hi, group);
    task.lastRow = arith::SubIOp::create(nb, l, tq, c1);
    std::tie(task.offset, task.limit) =
        sequenceBounds(nb, l, task.bi, alignedOffset);
    if (ring)
      task.written = arith::AddIOp::create(nb, l, task.offset, tq);
    if (slopes)
      task.slopeV = vector::BroadcastOp::create(
          nb, l, vk, selectByIndex(nb, l, task.hi, *slopes));

    // The tile's state: output accumulators, running max (base 2)
    // and lane-wise running sums, and one block of probabilities.
    task.acc = wide ? out
                    : Value(memref::AllocaOp::create(
                          nb, l, MemRefType::get({tileRows, dv}, f32)));
    task.mBuf =
        memref::AllocaOp::create(nb, l, MemRefType::get({tileRows}, f32));
    task.lBuf =
        memref::AllocaOp::create(nb, l, MemRefType::get({tileRows, vl}, f32));
    task.pBuf =
        memref::AllocaOp::create(nb, l, MemRefType::get({rows, bk}, f32));
    // (A wide head's accumulators are its output rows: only the
    // tile's own.)
    forRange(
        nb, l, c0, wide ? task.tileCount : cIdx(nb, l, tileRows), c1,
        [&](OpBuilder &ib, Location il, Value i) {
          memref::StoreOp::create(ib, il, ninf, task.mBuf, ValueRange{i});
          vector::StoreOp::create(ib, il, zeroL, task.lBuf, ValueRange{i, c0});
          forChunks(ib, il, chunks, [&](OpBuilder &cb, Location cl, Value c) {
            vector::StoreOp::create(
                cb, cl, zeroVV, task.acc,
                accAt(cb, cl, task, i,
                      arith::MulIOp::create(cb, cl, c, cIdx(cb, cl, wv))));
          });
        });
    return task;
  }

  /// Where the accumulators of the tile's row `slot` start at `col`.
  SmallVector<Value, 4> accAt(OpBuilder &ab, Location al,
                              const PrefillTask &task, Value slot,
                              Value col) const {
    if (!wide)
      return {slot, col};
    return {task.bi, task.hi, arith::AddIOp::create(ab, al, task.t0, slot),
            col};
  }

  /// The rows of group `g` of the tile and the keys they see.
  RowGroup groupRows(OpBuilder &gb, Location gl, const PrefillTask &task,
                     Value g) const {
    RowGroup grp;
    Value g0 = arith::AddIOp::create(
        gb, gl, task.t0, arith::MulIOp::create(gb, gl, g, cIdx(gb, gl, rows)));
    for (int64_t r = 0; r < rows; ++r) {
      Value ir = arith::MinSIOp::create(
          gb, gl, arith::AddIOp::create(gb, gl, g0, cIdx(gb, gl, r)),
          task.lastRow);
      Value pos = arith::AddIOp::create(gb, gl, ir, task.offset);
      Value lw, h;
      std::tie(lw, h) = rowBounds(gb, gl, pos, task.limit);
      grp.row.push_back(ir);
      grp.pos.push_back(pos);
      grp.lo.push_back(lw);
      grp.hi.push_back(h);
    }
    if (ring) {
      grp.first = c0;
      grp.end = arith::MinSIOp::create(gb, gl, tk, task.written);
      return grp;
    }
    grp.first = arith::MulIOp::create(
        gb, gl, arith::DivUIOp::create(gb, gl, grp.lo[0], cIdx(gb, gl, bk)),
        cIdx(gb, gl, bk));
    Value end = grp.hi[0];
    for (Value h : grp.hi)
      end = arith::MaxSIOp::create(gb, gl, end, h);
    grp.end = arith::MaxSIOp::create(gb, gl, end, grp.first);
    return grp;
  }

  /// The task's pass over its keys: superblocks of sbKeys keys, each met
  /// by every group of rows of the tile in turn, a block of bk keys at a
  /// time.
  void passKeys(OpBuilder &nb, Location l, const PrefillTask &task) const {
    // The tile's keys: from its first group's first to its last
    // group's end (positions grow with the rows).
    RowGroup firstG = groupRows(nb, l, task, c0);
    RowGroup lastG =
        groupRows(nb, l, task, arith::SubIOp::create(nb, l, task.nGroups, c1));
    Value tileFirst = firstG.first;
    Value tileLast = arith::MaxSIOp::create(nb, l, lastG.end, firstG.end);

    forRange(
        nb, l, tileFirst, tileLast, cIdx(nb, l, sbKeys),
        [&](OpBuilder &sb, Location sl, Value s0) {
          Value sEnd = arith::AddIOp::create(sb, sl, s0, cIdx(sb, sl, sbKeys));
          forRange(sb, sl, c0, task.nGroups, c1,
                   [&](OpBuilder &gb, Location gl, Value g) {
                     RowGroup grp = groupRows(gb, gl, task, g);
                     Value r0 =
                         arith::MulIOp::create(gb, gl, g, cIdx(gb, gl, rows));
                     SmallVector<Value> slot;
                     for (int64_t r = 0; r < rows; ++r)
                       slot.push_back(
                           arith::AddIOp::create(gb, gl, r0, cIdx(gb, gl, r)));
                     Value jb = arith::MaxSIOp::create(gb, gl, grp.first, s0);
                     Value je = arith::MinSIOp::create(gb, gl, grp.end, sEnd);
                     forRange(gb, gl, jb, je, cIdx(gb, gl, bk),
                              [&](OpBuilder &kb, Location kl, Value j0) {
                                keyBlock(kb, kl, task, grp, slot, j0);
                              });
                   });
        });
  }

  /// The group's rows (in the tile's rows `slot`) against the block of
  /// keys [j0, j0 + bk).
  void keyBlock(OpBuilder &kb, Location kl, const PrefillTask &task,
                const RowGroup &grp, ArrayRef<Value> slot, Value j0) const {
    BlockScores s = blockScores(kb, kl, task, grp, slot, j0);
    scf::IfOp raise = raiseMaxes(kb, kl, task, slot, s);
    storeProbabilities(kb, kl, task, slot, s.t, raise.getResults());
    accumulatePV(kb, kl, task, slot, j0);
  }

  /// S = Q K^T for the block, in base-2 units, -inf outside each row's
  /// keys, and the rows' running maxes.
  BlockScores blockScores(OpBuilder &kb, Location kl, const PrefillTask &task,
                          const RowGroup &grp, ArrayRef<Value> slot,
                          Value j0) const {
    // S = Q K^T for the block.
    Value kMask = keyMask(kb, kl, j0);
    SmallVector<Value> qk = dotBlock(kb, kl, task.bi, task.kvh, j0, kMask, rows,
                                     [&](int64_t r) -> std::pair<Value, Value> {
                                       return {task.hi, grp.row[r]};
                                     });
    // Scores in base-2 units, -inf outside each row's keys.
    BlockScores s;
    s.t.resize(rows);
    s.mOld.resize(rows);
    Value jv;
    if (!plain)
      jv = keyPositions(kb, kl, j0, task.written);
    Value exceed;
    for (int64_t r = 0; r < rows; ++r) {
      s.t[r] = rowScores(kb, kl, task, grp, r, qk[r], jv, j0);
      s.mOld[r] =
          memref::LoadOp::create(kb, kl, task.mBuf, ValueRange{slot[r]});
      Value bound = vector::BroadcastOp::create(
          kb, kl, vk,
          arith::AddFOp::create(kb, kl, s.mOld[r],
                                cF32(kb, kl, kRescaleThreshold)));
      Value above = arith::CmpFOp::create(kb, kl, arith::CmpFPredicate::OGT,
                                          s.t[r], bound);
      exceed = exceed ? arith::OrIOp::create(kb, kl, exceed, above) : above;
    }
    s.any =
        vector::ReductionOp::create(kb, kl, vector::CombiningKind::OR, exceed);
    return s;
  }

  /// The scores of row r of the group from its dot products `qk`, in
  /// base-2 units, -inf outside the row's keys.
  Value rowScores(OpBuilder &kb, Location kl, const PrefillTask &task,
                  const RowGroup &grp, int64_t r, Value qk, Value jv,
                  Value j0) const {
    if (!plain)
      return arith::MulFOp::create(kb, kl,
                                   scores(kb, kl, qk, jv, grp.pos[r], grp.lo[r],
                                          grp.hi[r], task.hi, task.slopeV),
                                   log2eV);
    // Lane j is visible iff j0 + j - lo < hi - lo (unsigned).
    auto i32 = [&](Value x) {
      return arith::IndexCastOp::create(kb, kl, kb.getI32Type(), x);
    };
    Value rel = arith::AddIOp::create(
        kb, kl, lanes32,
        vector::BroadcastOp::create(
            kb, kl, laneI, i32(arith::SubIOp::create(kb, kl, j0, grp.lo[r]))));
    Value span = arith::MaxSIOp::create(
        kb, kl, arith::SubIOp::create(kb, kl, grp.hi[r], grp.lo[r]), c0);
    Value in = arith::CmpIOp::create(
        kb, kl, arith::CmpIPredicate::ult, rel,
        vector::BroadcastOp::create(kb, kl, laneI, i32(span)));
    return arith::SelectOp::create(
        kb, kl, in, arith::MulFOp::create(kb, kl, qk, scaleL2), ninfV);
  }

  /// A score above a row's max + threshold: new maxes for every row of
  /// the group, their state rescaled. Gives the maxes to use.
  scf::IfOp raiseMaxes(OpBuilder &kb, Location kl, const PrefillTask &task,
                       ArrayRef<Value> slot, const BlockScores &s) const {
    return scf::IfOp::create(
        kb, kl, s.any,
        [&](OpBuilder &tb, Location tl) {
          SmallVector<Value> mNew;
          for (int64_t r = 0; r < rows; ++r)
            mNew.push_back(raiseMax(tb, tl, task, slot[r], s.t[r], s.mOld[r]));
          scf::YieldOp::create(tb, tl, mNew);
        },
        [&](OpBuilder &eb, Location el) {
          scf::YieldOp::create(eb, el, s.mOld);
        });
  }

  /// The new max of the tile's row `slot` with the scores `t`, stored, the
  /// row's sums and accumulators rescaled to it.
  Value raiseMax(OpBuilder &tb, Location tl, const PrefillTask &task,
                 Value slot, Value t, Value mOld) const {
    Value mx =
        vector::ReductionOp::create(tb, tl, vector::CombiningKind::MAXNUMF, t);
    Value m = arith::MaxNumFOp::create(tb, tl, mOld, mx);
    Value none =
        arith::CmpFOp::create(tb, tl, arith::CmpFPredicate::OEQ, m, ninf);
    Value corr = arith::SelectOp::create(
        tb, tl, none, cF32(tb, tl, 1.0),
        math::ExpOp::create(tb, tl,
                            arith::MulFOp::create(
                                tb, tl, arith::SubFOp::create(tb, tl, mOld, m),
                                cF32(tb, tl, M_LN2))));
    memref::StoreOp::create(tb, tl, m, task.mBuf, ValueRange{slot});
    Value corrL = vector::BroadcastOp::create(tb, tl, lT, corr);
    SmallVector<Value, 2> lAt{slot, c0};
    vector::StoreOp::create(
        tb, tl,
        arith::MulFOp::create(
            tb, tl, vector::LoadOp::create(tb, tl, lT, task.lBuf, lAt), corrL),
        task.lBuf, lAt);
    Value corrV = vector::BroadcastOp::create(tb, tl, vvT, corr);
    forChunks(tb, tl, chunks, [&](OpBuilder &cb, Location cl, Value c) {
      SmallVector<Value, 4> at =
          accAt(cb, cl, task, slot,
                arith::MulIOp::create(cb, cl, c, cIdx(cb, cl, wv)));
      vector::StoreOp::create(
          cb, cl,
          arith::MulFOp::create(
              cb, cl, vector::LoadOp::create(cb, cl, vvT, task.acc, at), corrV),
          task.acc, at);
    });
    return m;
  }

  /// P = exp2(S - max) (a row that saw no key yet: relative to 0, its
  /// -inf scores give 0), summed lane-wise, stored.
  void storeProbabilities(OpBuilder &kb, Location kl, const PrefillTask &task,
                          ArrayRef<Value> slot, ArrayRef<Value> t,
                          ValueRange maxes) const {
    for (int64_t r = 0; r < rows; ++r) {
      Value m = maxes[r];
      Value none =
          arith::CmpFOp::create(kb, kl, arith::CmpFPredicate::OEQ, m, ninf);
      Value mUse = arith::SelectOp::create(kb, kl, none, cF32(kb, kl, 0.0), m);
      Value p = exp2Vector(
          kb, kl,
          arith::SubFOp::create(kb, kl, t[r],
                                vector::BroadcastOp::create(kb, kl, vk, mUse)));
      SmallVector<Value, 2> lAt{slot[r], c0};
      Value lv = vector::LoadOp::create(kb, kl, lT, task.lBuf, lAt);
      for (int64_t k = 0; k < keyVecs; ++k)
        lv = arith::AddFOp::create(kb, kl, lv,
                                   vector::ExtractStridedSliceOp::create(
                                       kb, kl, p, ArrayRef<int64_t>{k * vl},
                                       ArrayRef<int64_t>{vl},
                                       ArrayRef<int64_t>{1}));
      vector::StoreOp::create(kb, kl, lv, task.lBuf, lAt);
      vector::StoreOp::create(kb, kl, p, task.pBuf,
                              ValueRange{cIdx(kb, kl, r), c0});
    }
  }

  /// O += P V for the block of keys at j0, a register tile of pvRows x
  /// pvChunks vectors at a time, carried through the loop over the keys
  /// (forBlockKeys).
  void accumulatePV(OpBuilder &kb, Location kl, const PrefillTask &task,
                    ArrayRef<Value> slot, Value j0) const {
    // Keys past the end have p = 0 (valueRows reads a valid row).
    ValueRows vrows = valueRows(kb, kl, task.bi, j0, task.limit);
    for (int64_t rg = 0; rg < rows; rg += pvRows) {
      forChunks(
          kb, kl, chunks / pvChunks, [&](OpBuilder &cb, Location cl, Value cg) {
            SmallVector<Value> cols;
            for (int64_t c = 0; c < pvChunks; ++c)
              cols.push_back(arith::AddIOp::create(
                  cb, cl,
                  arith::MulIOp::create(cb, cl, cg,
                                        cIdx(cb, cl, pvChunks * wv)),
                  cIdx(cb, cl, c * wv)));
            SmallVector<Value> init;
            for (int64_t i = 0; i < pvRows; ++i)
              for (int64_t c = 0; c < pvChunks; ++c)
                init.push_back(vector::LoadOp::create(
                    cb, cl, vvT, task.acc,
                    accAt(cb, cl, task, slot[rg + i], cols[c])));
            SmallVector<Value> o = forBlockKeys(
                cb, cl, init,
                [&](OpBuilder &jb, Location jl, Value jj, ValueRange acc) {
                  SmallVector<Value> next(acc);
                  Value row = vrows.at(jb, jl, jj);
                  SmallVector<Value> vrow;
                  for (int64_t c = 0; c < pvChunks; ++c)
                    vrow.push_back(
                        loadF32(jb, jl, vvT, v,
                                ValueRange{vrows.seq, task.kvh, row, cols[c]}));
                  for (int64_t i = 0; i < pvRows; ++i) {
                    Value pb = vector::BroadcastOp::create(
                        jb, jl, vvT,
                        memref::LoadOp::create(
                            jb, jl, task.pBuf,
                            ValueRange{cIdx(jb, jl, rg + i), jj}));
                    for (int64_t c = 0; c < pvChunks; ++c)
                      next[i * pvChunks + c] = vector::FMAOp::create(
                          jb, jl, pb, vrow[c], next[i * pvChunks + c]);
                  }
                  return next;
                });
            for (int64_t i = 0; i < pvRows; ++i)
              for (int64_t c = 0; c < pvChunks; ++c)
                vector::StoreOp::create(
                    cb, cl, o[i * pvChunks + c], task.acc,
                    accAt(cb, cl, task, slot[rg + i], cols[c]));
          });
    }
  }

  /// out = O / sum, or zeros for a row that saw no key.
  void storeOutput(OpBuilder &nb, Location l, const PrefillTask &task) const {
    forRange(
        nb, l, c0, task.tileCount, c1,
        [&](OpBuilder &ob, Location ol, Value i) {
          Value sum = vector::ReductionOp::create(
              ob, ol, vector::CombiningKind::ADD,
              vector::LoadOp::create(ob, ol, lT, task.lBuf, ValueRange{i, c0}),
              Value(), arith::FastMathFlags::reassoc);
          // The sink against the row's max (base 2): the max its sums and
          // accumulators are relative to.
          if (sinks)
            sum = withSink(
                ob, ol, sum, task.hi,
                memref::LoadOp::create(ob, ol, task.mBuf, ValueRange{i}), true);
          Value invV =
              vector::BroadcastOp::create(ob, ol, vvT, inverseSum(ob, ol, sum));
          Value row = arith::AddIOp::create(ob, ol, task.t0, i);
          forChunks(ob, ol, chunks, [&](OpBuilder &cb, Location cl, Value c) {
            Value col = arith::MulIOp::create(cb, cl, c, cIdx(cb, cl, wv));
            vector::StoreOp::create(
                cb, cl,
                arith::MulFOp::create(
                    cb, cl,
                    vector::LoadOp::create(cb, cl, vvT, task.acc,
                                           accAt(cb, cl, task, i, col)),
                    invV),
                out, ValueRange{task.bi, task.hi, row, col});
          });
        });
  }
};

} // namespace

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
  PrefillKernel(*this, b).emit(b, loc);
}
