//===- LowerAttentionDecode.cpp - the CPU decode attention kernel ---------===//
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

#include "AttentionLowering.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::cpu;

namespace {

/// Fewest keys in one split of the decode kernel. A split costs a task and
/// a (max, sum, Dv outputs) partial per query row to merge: with 256 keys
/// it computes 256 x (D + Dv) FMAs per row for D + 2 values merged, so the
/// merge stays well under 1% of the work.
constexpr int64_t kMinSplitKeys = 256;

/// Bytes of a cache line: the alignment of the decode kernel's workspace.
constexpr int64_t kCacheLine = 64;

} // namespace

int64_t cpu::decodeBlockRows(int64_t vl, int64_t group) {
  return std::min<int64_t>(group, vl >= 16 ? 8 : 4);
}

int64_t cpu::decodeKeyVectors(int64_t vl, int64_t group) {
  int64_t budget = vl >= 16 ? 16 : 8;
  return std::clamp<int64_t>(budget / decodeBlockRows(vl, group), 2, 4);
}

AttentionLowering::SoftmaxStep
AttentionLowering::softmaxStep(OpBuilder &kb, Location kl, Value s, Value mOld,
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

namespace {

/// One task of the decode kernel: sequence `bi`, KV head `kvh` and split
/// `si` of the keys.
struct DecodeTask {
  Value bi, kvh, si;
  /// The sequence's bounds (sequenceBounds), the positions written in a
  /// ring buffer, the keys [jStart, jEnd) of the split.
  Value offset, limit, written, jStart, jEnd;
  /// The query heads of the KV head's group, and their ALiBi slopes.
  SmallVector<Value> head, slopeV;
};

/// The decode kernel of a lowering (AttentionLowering::emitDecode) for
/// `group` query heads per KV head: the shared lowering with the kernel's
/// blocking and its workspace.
struct DecodeKernel : AttentionLowering {
  int64_t group, kv, blockRows;
  // Emitted before the kernel by emitWorkspace.
  Value groupV, rowsT, splits;
  /// The workspace: per sequence, KV head, split and row (t * group + g),
  /// the running max and sum (`stats`, at maxLane and sumLane), the
  /// unnormalized output, and (per register block of rows) the block's
  /// probabilities.
  Value stats, maxLane, sumLane, partO, probs;

  DecodeKernel(const AttentionLowering &a, int64_t group)
      : AttentionLowering(a), group(group) {
    kv = cast<MemRefType>(kt.getType()).getDimSize(1);
    // Scores of 8 rows x 2 vectors of keys fill half of AVX-512's
    // registers.
    blockRows = decodeBlockRows(vl, group);
  }

  /// The kernel, the merge of its splits, and its workspace's lifetime.
  void emit(OpBuilder &b, Location loc) {
    if (vTransposed)
      return emitTransposedValues(b, loc);
    emitWorkspace(b, loc);
    auto par = scf::ParallelOp::create(
        b, loc, ValueRange{c0, c0, c0}, ValueRange{bsz, kvHeads, splits},
        ValueRange{c1, c1, c1}, [&](OpBuilder &nb, Location l, ValueRange ivs) {
          DecodeTask task = beginTask(nb, l, ivs);
          initRows(nb, l, task);
          forRange(nb, l, task.jStart, task.jEnd, cIdx(nb, l, bk),
                   [&](OpBuilder &kb, Location kl, Value j0) {
                     keyBlock(kb, kl, task, j0);
                   });
        });
    markKeepParallel(par);
    emitMerge(b, loc);
    for (Value buf : {stats, partO, probs})
      memref::DeallocOp::create(b, loc, buf);
  }

  /// With the values transposed (V^T rows [Dv, S], latent attention's
  /// cache read in place), a task takes its split in three passes instead
  /// of the online softmax: every row's scores (K^T blocks as in keyBlock)
  /// into a buffer of the split, with the row's max; the probabilities
  /// relative to it and their sum; then O = P V as dot products over the
  /// keys, V^T's rows contiguous, a register block of rows x value dims
  /// accumulated across the whole split and reduced once. The partials and
  /// the merge are the online kernel's.
  void emitTransposedValues(OpBuilder &b, Location loc) {
    emitWorkspace(b, loc);
    auto par = scf::ParallelOp::create(
        b, loc, ValueRange{c0, c0, c0}, ValueRange{bsz, kvHeads, splits},
        ValueRange{c1, c1, c1}, [&](OpBuilder &nb, Location l, ValueRange ivs) {
          DecodeTask task = beginTask(nb, l, ivs);
          initRows(nb, l, task);
          Value count = arith::MaxSIOp::create(
              nb, l, arith::SubIOp::create(nb, l, task.jEnd, task.jStart), c0);
          Value width = arith::MulIOp::create(
              nb, l, arith::CeilDivUIOp::create(nb, l, count, cIdx(nb, l, bk)),
              cIdx(nb, l, bk));
          Value buf = memref::AllocOp::create(
              nb, l,
              MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                              nb.getF32Type()),
              ValueRange{rowsT, width}, nb.getI64IntegerAttr(kCacheLine));
          forRange(nb, l, task.jStart, task.jEnd, cIdx(nb, l, bk),
                   [&](OpBuilder &kb, Location kl, Value j0) {
                     scoreBlock(kb, kl, task, j0, buf);
                   });
          forRange(nb, l, c0, rowsT, c1,
                   [&](OpBuilder &rb, Location rl, Value rr) {
                     probabilities(rb, rl, task, rr, buf, width);
                   });
          transposedPV(nb, l, task, buf, width);
          memref::DeallocOp::create(nb, l, buf);
        });
    markKeepParallel(par);
    emitMerge(b, loc);
    for (Value buf : {stats, partO, probs})
      memref::DeallocOp::create(b, loc, buf);
  }

  /// Pass 1: the scores of every row against the keys [j0, j0 + bk), into
  /// `buf` at column j0 - jStart, and each row's running max.
  void scoreBlock(OpBuilder &kb, Location kl, const DecodeTask &task, Value j0,
                  Value buf) const {
    Value col = arith::SubIOp::create(kb, kl, j0, task.jStart);
    forScoreBlocks(
        kb, kl, task, j0,
        [&](OpBuilder &tb, Location tl, ArrayRef<Value> rows,
            ArrayRef<Value> sc) {
          for (auto [rr, s] : llvm::zip(rows, sc)) {
            vector::StoreOp::create(tb, tl, s, buf, ValueRange{rr, col});
            SmallVector<Value, 5> mAt{task.bi, task.kvh, task.si, rr, maxLane};
            Value mx = vector::ReductionOp::create(
                tb, tl, vector::CombiningKind::MAXIMUMF, s);
            memref::StoreOp::create(
                tb, tl,
                arith::MaximumFOp::create(
                    tb, tl, memref::LoadOp::create(tb, tl, stats, mAt), mx),
                stats, mAt);
          }
        });
  }

  /// Pass 2: row `rr`'s probabilities exp(s - max) in place in `buf`, and
  /// their sum (a row that saw no key keeps zeros).
  void probabilities(OpBuilder &rb, Location rl, const DecodeTask &task,
                     Value rr, Value buf, Value width) const {
    Value m = memref::LoadOp::create(
        rb, rl, stats, ValueRange{task.bi, task.kvh, task.si, rr, maxLane});
    Value none =
        arith::CmpFOp::create(rb, rl, arith::CmpFPredicate::OEQ, m, ninf);
    Value mUse = vector::BroadcastOp::create(
        rb, rl, vk,
        arith::SelectOp::create(rb, rl, none, cF32(rb, rl, 0.0), m));
    auto loop = scf::ForOp::create(
        rb, rl, c0, width, cIdx(rb, rl, bk), ValueRange{cF32(rb, rl, 0.0)},
        [&](OpBuilder &fb, Location fl, Value col, ValueRange acc) {
          Value sc =
              vector::LoadOp::create(fb, fl, vk, buf, ValueRange{rr, col});
          Value p = math::ExpOp::create(
              fb, fl, arith::SubFOp::create(fb, fl, sc, mUse));
          vector::StoreOp::create(fb, fl, p, buf, ValueRange{rr, col});
          Value sum = vector::ReductionOp::create(
              fb, fl, vector::CombiningKind::ADD, p, Value(),
              arith::FastMathFlags::reassoc);
          scf::YieldOp::create(
              fb, fl, ValueRange{arith::AddFOp::create(fb, fl, acc[0], sum)});
        });
    memref::StoreOp::create(
        rb, rl, loop.getResult(0), stats,
        ValueRange{task.bi, task.kvh, task.si, rr, sumLane});
  }

  /// Pass 3: the task's unnormalized outputs O[r, e] = sum_j P[r, j] V^T[e,
  /// j] over the split, for register blocks of `blockRows` rows x 2 value
  /// dims, each an accumulator of vl keys reduced at the end.
  void transposedPV(OpBuilder &nb, Location l, const DecodeTask &task,
                    Value buf, Value width) const {
    MLIRContext *ctx = nb.getContext();
    Type f32 = nb.getF32Type();
    auto lane = VectorType::get({vl}, f32);
    auto laneMask = VectorType::get({vl}, IntegerType::get(ctx, 1));
    Value zero = arith::ConstantOp::create(
        nb, l, lane, DenseElementsAttr::get(lane, nb.getF32FloatAttr(0.0)));
    int64_t dims = dv % 2 == 0 ? 2 : 1;
    forRange(nb, l, c0, tq, c1, [&](OpBuilder &tb, Location tl, Value t) {
      Value row0 = arith::MulIOp::create(tb, tl, t, cIdx(tb, tl, group));
      for (int64_t g0 = 0; g0 < group; g0 += blockRows) {
        int64_t n = std::min(blockRows, group - g0);
        SmallVector<Value> rows;
        for (int64_t r = 0; r < n; ++r)
          rows.push_back(
              arith::AddIOp::create(tb, tl, row0, cIdx(tb, tl, g0 + r)));
        forRange(
            tb, tl, c0, cIdx(tb, tl, dv), cIdx(tb, tl, dims),
            [&](OpBuilder &eb, Location el, Value e0) {
              SmallVector<Value> es;
              for (int64_t i = 0; i < dims; ++i)
                es.push_back(
                    arith::AddIOp::create(eb, el, e0, cIdx(eb, el, i)));
              SmallVector<Value> init(n * dims, zero);
              auto loop = scf::ForOp::create(
                  eb, el, c0, width, cIdx(eb, el, vl), init,
                  [&](OpBuilder &fb, Location fl, Value col, ValueRange acc) {
                    Value j = arith::AddIOp::create(fb, fl, task.jStart, col);
                    // (A paged cache's slots past the last key may never
                    // have been written.)
                    Value mask = vector::CreateMaskOp::create(
                        fb, fl, laneMask,
                        ValueRange{arith::SubIOp::create(
                            fb, fl, table ? task.limit : tk, j)});
                    auto [seq, slot] =
                        keySlot(fb, fl, task.bi, j, /*value=*/true);
                    SmallVector<Value> vrow;
                    for (int64_t i = 0; i < dims; ++i)
                      vrow.push_back(loadF32(
                          fb, fl, lane, v,
                          ValueRange{seq, task.kvh, es[i], slot}, mask, zero));
                    SmallVector<Value> next;
                    for (int64_t r = 0; r < n; ++r) {
                      Value p = vector::LoadOp::create(
                          fb, fl, lane, buf, ValueRange{rows[r], col});
                      for (int64_t i = 0; i < dims; ++i)
                        next.push_back(vector::FMAOp::create(
                            fb, fl, p, vrow[i], acc[r * dims + i]));
                    }
                    scf::YieldOp::create(fb, fl, next);
                  });
              for (int64_t r = 0; r < n; ++r)
                for (int64_t i = 0; i < dims; ++i)
                  memref::StoreOp::create(
                      eb, el,
                      vector::ReductionOp::create(
                          eb, el, vector::CombiningKind::ADD,
                          loop.getResult(r * dims + i), Value(),
                          arith::FastMathFlags::reassoc),
                      partO,
                      ValueRange{task.bi, task.kvh, task.si, rows[r], es[i]});
            });
      }
    });
  }

  /// The number of splits and the workspace.
  void emitWorkspace(OpBuilder &b, Location loc) {
    groupV = cIdx(b, loc, group);
    rowsT = arith::MulIOp::create(b, loc, tq, groupV);
    Value threads =
        func::CallOp::create(b, loc, kThreadsFn, TypeRange{b.getI32Type()},
                             ValueRange{})
            .getResult(0);
    threads = arith::MaxSIOp::create(
        b, loc, arith::IndexCastOp::create(b, loc, b.getIndexType(), threads),
        c1);
    Value tasks = arith::MaxSIOp::create(
        b, loc, arith::MulIOp::create(b, loc, bsz, kvHeads), c1);
    splits = arith::MaxSIOp::create(
        b, loc,
        arith::MinSIOp::create(
            b, loc, arith::CeilDivUIOp::create(b, loc, threads, tasks),
            arith::CeilDivUIOp::create(b, loc, tk,
                                       cIdx(b, loc, kMinSplitKeys))),
        c1);
    // The workspace: per sequence, KV head, split and row (t * group + g),
    // the running max and sum (`stats`, a cache line per row: tasks on
    // other threads update theirs at every block of keys), the unnormalized
    // output, and (per register block of rows) the block's probabilities;
    // cache-line aligned.
    Type f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    // Dimension 1, the KV heads, may be dynamic (a shared kernel).
    auto alloc = [&](ArrayRef<int64_t> shape, ValueRange sizes) -> Value {
      SmallVector<Value> dynSizes{sizes.front()};
      if (ShapedType::isDynamic(kv))
        dynSizes.push_back(kvHeads);
      dynSizes.append(sizes.begin() + 1, sizes.end());
      return memref::AllocOp::create(b, loc, MemRefType::get(shape, f32),
                                     dynSizes, b.getI64IntegerAttr(kCacheLine));
    };
    stats = alloc({dyn, kv, dyn, dyn, kCacheLine / 4}, {bsz, splits, rowsT});
    maxLane = c0;
    sumLane = c1;
    partO = alloc({dyn, kv, dyn, dyn, dv}, {bsz, splits, rowsT});
    probs = alloc({dyn, kv, dyn, blockRows, bk}, {bsz, splits});
  }

  /// The task at `ivs` (sequence, KV head, split): the keys of its split
  /// and the query heads of its group.
  DecodeTask beginTask(OpBuilder &nb, Location l, ValueRange ivs) const {
    DecodeTask task;
    task.bi = ivs[0];
    task.kvh = ivs[1];
    task.si = ivs[2];
    std::tie(task.offset, task.limit) = sequenceBounds(nb, l, task.bi, Value());
    // The keys any row sees, [first, end), then this split's blocks.
    Value first, end;
    if (ring) {
      task.written = arith::AddIOp::create(nb, l, task.offset, tq);
      first = c0;
      end = arith::MinSIOp::create(nb, l, tk, task.written);
    } else {
      Value lo0 = rowBounds(nb, l, task.offset, task.limit).first;
      first = arith::MulIOp::create(
          nb, l, arith::DivUIOp::create(nb, l, lo0, cIdx(nb, l, bk)),
          cIdx(nb, l, bk));
      Value lastPos = arith::SubIOp::create(
          nb, l, arith::AddIOp::create(nb, l, task.offset, tq), c1);
      end = arith::MaxSIOp::create(
          nb, l, rowBounds(nb, l, lastPos, task.limit).second, first);
    }
    Value blocks = arith::CeilDivUIOp::create(
        nb, l, arith::SubIOp::create(nb, l, end, first), cIdx(nb, l, bk));
    Value perSplit = arith::MaxSIOp::create(
        nb, l, arith::CeilDivUIOp::create(nb, l, blocks, splits),
        cIdx(nb, l, kMinSplitKeys / bk));
    Value span = arith::MulIOp::create(nb, l, perSplit, cIdx(nb, l, bk));
    task.jStart = arith::AddIOp::create(
        nb, l, first, arith::MulIOp::create(nb, l, task.si, span));
    task.jEnd = arith::MinSIOp::create(
        nb, l, end, arith::AddIOp::create(nb, l, task.jStart, span));

    // The query heads of the group, and their ALiBi slopes.
    task.slopeV.resize(group);
    Value h0 = arith::MulIOp::create(nb, l, task.kvh, cIdx(nb, l, group));
    for (int64_t g = 0; g < group; ++g) {
      task.head.push_back(arith::AddIOp::create(nb, l, h0, cIdx(nb, l, g)));
      if (slopes)
        task.slopeV[g] = vector::BroadcastOp::create(
            nb, l, vk, selectByIndex(nb, l, task.head[g], *slopes));
    }
    return task;
  }

  /// No key seen yet: the task's rows' max, sum and output in the
  /// workspace.
  void initRows(OpBuilder &nb, Location l, const DecodeTask &task) const {
    Value bi = task.bi, kvh = task.kvh, si = task.si;
    forRange(nb, l, c0, rowsT, c1, [&](OpBuilder &ib, Location il, Value rr) {
      memref::StoreOp::create(ib, il, ninf, stats,
                              ValueRange{bi, kvh, si, rr, maxLane});
      memref::StoreOp::create(ib, il, cF32(ib, il, 0.0), stats,
                              ValueRange{bi, kvh, si, rr, sumLane});
      forChunks(ib, il, chunks, [&](OpBuilder &cb, Location cl, Value c) {
        Value col = arith::MulIOp::create(cb, cl, c, cIdx(cb, cl, wv));
        vector::StoreOp::create(cb, cl, zeroVV, partO,
                                ValueRange{bi, kvh, si, rr, col});
      });
    });
  }

  /// For each query step t and register block of the group's rows, the
  /// block's scores against the keys [j0, j0 + bk) (scaled, modified, -inf
  /// where the row does not see the key): `body(rows, scores)`, each row as
  /// its index t * group + g in the task.
  void forScoreBlocks(OpBuilder &kb, Location kl, const DecodeTask &task,
                      Value j0,
                      function_ref<void(OpBuilder &, Location, ArrayRef<Value>,
                                        ArrayRef<Value>)>
                          body) const {
    Value kMask = keyMask(kb, kl, j0);
    Value jv = keyPositions(kb, kl, j0, task.written);
    forRange(kb, kl, c0, tq, c1, [&](OpBuilder &tb, Location tl, Value t) {
      Value pos = arith::AddIOp::create(tb, tl, task.offset, t);
      auto [lo, hi] = rowBounds(tb, tl, pos, task.limit);
      Value row0 = arith::MulIOp::create(tb, tl, t, cIdx(tb, tl, group));
      for (int64_t g0 = 0; g0 < group; g0 += blockRows) {
        int64_t n = std::min(blockRows, group - g0);
        // S = Q K^T for the block: one contiguous vector of K^T
        // per head dimension, broadcast-FMA'd into every row.
        SmallVector<Value> qk =
            dotBlock(tb, tl, task.bi, task.kvh, j0, kMask, n,
                     [&](int64_t r) -> std::pair<Value, Value> {
                       return {task.head[g0 + r], t};
                     });
        SmallVector<Value> rows, sc;
        for (int64_t r = 0; r < n; ++r) {
          rows.push_back(
              arith::AddIOp::create(tb, tl, row0, cIdx(tb, tl, g0 + r)));
          sc.push_back(scores(tb, tl, qk[r], jv, pos, lo, hi, task.head[g0 + r],
                              task.slopeV[g0 + r]));
        }
        body(tb, tl, rows, sc);
      }
    });
  }

  /// Every query row of the task against the block of keys [j0, j0 + bk):
  /// the online softmax step of each register block of rows, then their
  /// outputs.
  void keyBlock(OpBuilder &kb, Location kl, const DecodeTask &task,
                Value j0) const {
    // The V rows of the block (keys past the end have p = 0).
    ValueRows vrows = valueRows(kb, kl, task.bi, j0, task.limit);
    forScoreBlocks(kb, kl, task, j0,
                   [&](OpBuilder &tb, Location tl, ArrayRef<Value> rows,
                       ArrayRef<Value> sc) {
                     SmallVector<Value> corrV;
                     for (auto [r, rr] : llvm::enumerate(rows))
                       corrV.push_back(softmaxRow(tb, tl, task, rr, r, sc[r]));
                     accumulatePV(tb, tl, task, vrows, rows, corrV);
                   });
  }

  /// The online softmax step of row `rr` (row r of the register block)
  /// over its scores `s`: its max and sum updated in the workspace, its
  /// probabilities stored to the block's. Gives the factor that rescales
  /// its output, as a vector.
  Value softmaxRow(OpBuilder &tb, Location tl, const DecodeTask &task, Value rr,
                   int64_t r, Value s) const {
    Value bi = task.bi, kvh = task.kvh, si = task.si;
    SmallVector<Value, 5> mAt{bi, kvh, si, rr, maxLane};
    SmallVector<Value, 5> lAt{bi, kvh, si, rr, sumLane};
    SoftmaxStep step =
        softmaxStep(tb, tl, s, memref::LoadOp::create(tb, tl, stats, mAt),
                    memref::LoadOp::create(tb, tl, stats, lAt));
    memref::StoreOp::create(tb, tl, step.m, stats, mAt);
    memref::StoreOp::create(tb, tl, step.l, stats, lAt);
    vector::StoreOp::create(tb, tl, step.p, probs,
                            ValueRange{bi, kvh, si, cIdx(tb, tl, r), c0});
    return vector::BroadcastOp::create(tb, tl, vvT, step.corr);
  }

  /// O = O * corr + P V for the rows `rowAt` of a register block, a chunk
  /// of the head at a time: each V vector is loaded once for all the rows
  /// (the block's values `vrows`).
  void accumulatePV(OpBuilder &tb, Location tl, const DecodeTask &task,
                    const ValueRows &vrows, ArrayRef<Value> rowAt,
                    ArrayRef<Value> corrV) const {
    Value bi = task.bi, kvh = task.kvh, si = task.si;
    int64_t n = rowAt.size();
    forChunks(tb, tl, chunks, [&](OpBuilder &cb, Location cl, Value c) {
      Value col = arith::MulIOp::create(cb, cl, c, cIdx(cb, cl, wv));
      SmallVector<Value> acc;
      for (int64_t r = 0; r < n; ++r)
        acc.push_back(arith::MulFOp::create(
            cb, cl,
            vector::LoadOp::create(cb, cl, vvT, partO,
                                   ValueRange{bi, kvh, si, rowAt[r], col}),
            corrV[r]));
      acc = forBlockKeys(
          cb, cl, acc,
          [&](OpBuilder &jb, Location jl, Value jj, ValueRange in) {
            SmallVector<Value> next(in);
            Value vrow =
                loadF32(jb, jl, vvT, v,
                        ValueRange{vrows.seq, kvh, vrows.at(jb, jl, jj), col});
            for (int64_t r = 0; r < n; ++r) {
              Value pj = memref::LoadOp::create(
                  jb, jl, probs, ValueRange{bi, kvh, si, cIdx(jb, jl, r), jj});
              next[r] = vector::FMAOp::create(
                  jb, jl, vector::BroadcastOp::create(jb, jl, vvT, pj), vrow,
                  next[r]);
            }
            return next;
          });
      for (int64_t r = 0; r < n; ++r)
        vector::StoreOp::create(cb, cl, acc[r], partO,
                                ValueRange{bi, kvh, si, rowAt[r], col});
    });
  }

  /// The merge: out = sum_s exp(m_s - m) O_s / sum_s exp(m_s - m) l_s with
  /// m = max_s m_s, or zeros for a row that saw no key.
  void emitMerge(OpBuilder &b, Location loc) const {
    auto merge = scf::ParallelOp::create(
        b, loc, ValueRange{c0, c0}, ValueRange{bsz, heads}, ValueRange{c1, c1},
        [&](OpBuilder &nb, Location l, ValueRange ivs) {
          Value bi = ivs[0], hi = ivs[1];
          Value kvh = arith::DivUIOp::create(nb, l, hi, cIdx(nb, l, group));
          Value g = arith::RemUIOp::create(nb, l, hi, cIdx(nb, l, group));
          forRange(nb, l, c0, tq, c1, [&](OpBuilder &tb, Location tl, Value t) {
            mergeRow(tb, tl, bi, hi, kvh, g, t);
          });
        });
    markKeepParallel(merge);
  }

  /// The merge of query step t of head `hi` (query head g of KV head
  /// `kvh`) of sequence `bi`.
  void mergeRow(OpBuilder &tb, Location tl, Value bi, Value hi, Value kvh,
                Value g, Value t) const {
    Value rr = arith::AddIOp::create(
        tb, tl, arith::MulIOp::create(tb, tl, t, cIdx(tb, tl, group)), g);
    auto overSplits =
        [&](OpBuilder &sb, Location sl, Value init,
            function_ref<Value(OpBuilder &, Location, Value, Value)> step) {
          return scf::ForOp::create(
                     sb, sl, c0, splits, c1, ValueRange{init},
                     [&](OpBuilder &fb, Location fl, Value s, ValueRange acc) {
                       scf::YieldOp::create(fb, fl, step(fb, fl, s, acc[0]));
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
    Value mUse = arith::SelectOp::create(tb, tl, none, cF32(tb, tl, 0.0), m);
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
    Value inv = inverseSum(tb, tl, withSink(tb, tl, sum, hi, m, false));
    forChunks(tb, tl, chunks, [&](OpBuilder &cb, Location cl, Value c) {
      Value col = arith::MulIOp::create(cb, cl, c, cIdx(cb, cl, wv));
      Value o = overSplits(
          cb, cl, zeroVV,
          [&](OpBuilder &fb, Location fl, Value s, Value acc) -> Value {
            Value w = arith::MulFOp::create(fb, fl, weight(fb, fl, s), inv);
            return vector::FMAOp::create(
                fb, fl, vector::BroadcastOp::create(fb, fl, vvT, w),
                vector::LoadOp::create(fb, fl, vvT, partO,
                                       ValueRange{bi, kvh, s, rr, col}),
                acc);
          });
      vector::StoreOp::create(cb, cl, o, out, ValueRange{bi, hi, t, col});
    });
  }
};

} // namespace

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
  DecodeKernel(*this, group).emit(b, loc);
}
