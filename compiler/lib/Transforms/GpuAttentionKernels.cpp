//===- GpuAttentionKernels.cpp - flash attention as gpu.launch ------------===//
//
// The two GPU forms of tfm.attention_kernel: one thread block per (query
// block, head, batch), K/V tiles staged in shared memory, the online softmax
// in registers. Key tiles above the causal diagonal, outside the sliding
// window or past the key lengths are skipped. The score modifiers (softcap,
// ALiBi, the position bias by distance) apply to each scaled score before
// the mask.
//
// Over a KV cache (`positions`), the decode kernel (flash decoding): a
// block per (key split, KV head, sequence x query step) computes the rows
// of all the query heads of the KV head's group from each K/V tile staged
// once, and writes its partial softmax (max, sum, unnormalized output); a
// second kernel merges the splits with log-sum-exp rescaling.
//
//===----------------------------------------------------------------------===//

#include "GpuKernelBuilders.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::kernels;

namespace {

/// Visible keys [lo, hi) of query row `row` (clamped into range).
std::pair<Value, Value> keyBounds(KB &k, const AttentionShape &s, Value row,
                                  Value limit) {
  Value pos = k.add(row, s.offset);
  Value hi = limit, lo = k.c(0);
  if (s.kind != MaskKind::none)
    hi = k.min(hi, k.add(pos, 1));
  if (s.kind == MaskKind::sliding)
    lo = k.max(k.c(0), k.sub(pos, k.c(s.window - 1)));
  return {lo, hi};
}

/// min(tk, lengths[bi]) or tk.
Value keyLimit(KB &k, const AttentionShape &s, Value bi) {
  if (!s.lengths)
    return s.tk;
  Value len = memref::LoadOp::create(k.b, s.lengths, ValueRange{bi});
  len = arith::IndexCastOp::create(k.b, k.b.getIndexType(), len);
  return k.min(s.tk, k.max(len, k.c(0)));
}

/// The head's ALiBi slope (a select chain over the constant slopes), or
/// null without ALiBi.
Value headSlope(KB &k, const AttentionShape &s, Value hi) {
  if (s.slopes.empty())
    return {};
  Value r = k.f(s.slopes.back());
  for (int64_t i = int64_t(s.slopes.size()) - 2; i >= 0; --i)
    r = k.sel(arith::CmpIOp::create(k.b, arith::CmpIPredicate::eq, hi, k.c(i)),
              k.f(s.slopes[i]), r);
  return r;
}

/// The scaled score `v` of query position `pos` and key `key` of head `hi`
/// after the softcap, ALiBi (`slope`, or null) and the position bias.
Value modifyScore(KB &k, const AttentionShape &s, Value v, Value hi,
                  Value slope, Value pos, Value key) {
  if (s.softcap > 0.0)
    v = k.fmul(math::TanhOp::create(k.b, k.fmul(v, k.f(1.0 / s.softcap))),
               k.f(s.softcap));
  if (!slope && !s.bias)
    return v;
  Value rel = k.sub(key, pos);
  if (slope) {
    Value relF = arith::SIToFPOp::create(
        k.b, k.b.getF32Type(),
        arith::IndexCastOp::create(k.b, k.b.getI32Type(), rel));
    v = k.fma(slope, relF, v);
  }
  if (s.bias) {
    int64_t m = s.biasDistance;
    Value at = k.add(k.max(k.min(rel, k.c(m)), k.c(-m)), m);
    v = k.fadd(v, k.loadF32(s.bias, {hi, at}));
  }
  return v;
}

/// Stages the key tile [j0, j0 + BC) of head (bi, kvh) in shared memory,
/// between barriers: K^T columns into sK [key][d] (reading along keys, which
/// K^T has contiguous), V rows into sV as [d][key] (`vTransposed`) or
/// [key][d]; keys past the end are zeros. Converts to the shared element
/// type.
void stageKeyTile(ImplicitLocOpBuilder &b, const AttentionShape &s, Value tid,
                  int64_t threads, Value j0, Value bi, Value kvh, Value sK,
                  Value sV, bool vTransposed) {
  KB k{b};
  auto sKT = cast<MemRefType>(sK.getType());
  int64_t bc = sKT.getDimSize(0);
  Type elt = sKT.getElementType();
  gpu::BarrierOp::create(b);
  Value tkLast = k.sub(s.tk, k.c(1));
  forEachElement(b, tid, bc * s.d, threads, [&](Value e) {
    Value j = k.rem(e, bc), d = k.div(e, bc);
    Value key = k.add(j0, j);
    Value v = k.loadOrZero(s.kt, {bi, kvh, d, k.min(key, tkLast)},
                           k.lt(key, s.tk), elt);
    memref::StoreOp::create(b, v, sK, ValueRange{j, d});
  });
  forEachElement(b, tid, bc * s.dv, threads, [&](Value e) {
    Value d = k.rem(e, s.dv), j = k.div(e, s.dv);
    Value key = k.add(j0, j);
    Value v = k.loadOrZero(s.v, {bi, kvh, k.min(key, tkLast), d},
                           k.lt(key, s.tk), elt);
    memref::StoreOp::create(b, v, sV,
                            vTransposed ? ValueRange{d, j} : ValueRange{j, d});
  });
  gpu::BarrierOp::create(b);
}

/// Sum or max over the 32 lanes of a warp, in every lane.
Value warpReduce(KB &k, Value v, bool isMax) {
  for (int32_t off : {16, 8, 4, 2, 1}) {
    Value o = gpu::ShuffleOp::create(k.b, v, off, 32, gpu::ShuffleMode::XOR)
                  .getShuffleResult();
    v = isMax ? k.fmax(v, o) : k.fadd(v, o);
  }
  return v;
}

/// Fewest keys in one split of the decode kernel (as on the CPU).
constexpr int64_t kDecodeMinSplitKeys = 256;

/// Thread blocks the decode kernel's key splits aim for: about two per SM
/// of an H100 (132 SMs) or an A100 (108).
constexpr int64_t kDecodeTargetBlocks = 256;

/// Keys per tile for the tensor-core kernel: K and V^T tiles in f16 within
/// 48 KiB of static shared memory.
int64_t mmaKeyTile(int64_t d, int64_t dv) {
  int64_t m = std::max(d, dv);
  return m <= 128 ? 64 : m <= 256 ? 32 : 16;
}

} // namespace

void kernels::emitAttentionMma(ImplicitLocOpBuilder &b,
                               const AttentionShape &s) {
  KB k{b};
  const int64_t br = 64, bc = mmaKeyTile(s.d, s.dv), threads = 128;
  const int64_t dTiles = s.d / 16, vTiles = s.dv / 8, nTiles = bc / 8;
  Type elt = s.elt;
  MemRefType sKT = sharedType({bc, s.d + 8}, elt);  // K tile, [key][d]
  MemRefType sVT = sharedType({s.dv, bc + 8}, elt); // V tile, [d][key]
  Value grid = arith::CeilDivUIOp::create(b, s.tq, k.c(br));
  launch(b, {grid, s.heads, s.bsz}, {threads, 1, 1}, {sKT, sVT},
         [&](gpu::LaunchOp op) {
           Value sK = op.getWorkgroupAttributions()[0];
           Value sV = op.getWorkgroupAttributions()[1];
           Value tid = op.getThreadIds().x;
           Value bi = op.getBlockIds().z, hi = op.getBlockIds().y;
           Value i0 = k.mul(op.getBlockIds().x, br);
           Value warp = k.div(tid, 32), lane = k.rem(tid, 32);
           Value g = k.div(lane, 4), t2 = k.mul(k.rem(lane, 4), 2);
           Value kvh = arith::DivUIOp::create(b, hi, s.group);
           Value limit = keyLimit(k, s, bi);
           Value lastRow = k.sub(s.tq, k.c(1));
           Value rowA = k.add(k.add(i0, k.mul(warp, 16)), g);
           Value rowB = k.add(rowA, 8);
           Value rA = k.min(rowA, lastRow), rB = k.min(rowB, lastRow);
           // Each thread holds rows rA and rB; their visible keys [lo, hi).
           Value loA, hiA, loB, hiB;
           std::tie(loA, hiA) = keyBounds(k, s, rA, limit);
           std::tie(loB, hiB) = keyBounds(k, s, rB, limit);
           // The key range any row of the block sees (bounds grow with the
           // row).
           Value loFirst = keyBounds(k, s, i0, limit).first;
           Value hiLast =
               keyBounds(k, s, k.min(k.add(i0, br - 1), lastRow), limit).second;
           Value begin = k.mul(k.div(loFirst, bc), bc);
           Value end = k.max(hiLast, begin);
           Value slope = headSlope(k, s, hi);
           Value posA = k.add(rA, s.offset), posB = k.add(rB, s.offset);

           // Q fragments for the warp's 16 rows, kept in registers.
           SmallVector<SmallVector<Value>> qa;
           for (int64_t kk = 0; kk < dTiles; ++kk) {
             Value col = k.add(t2, kk * 16);
             qa.push_back({pair(b, s.q, {bi, hi, rA, col}),
                           pair(b, s.q, {bi, hi, rB, col}),
                           pair(b, s.q, {bi, hi, rA, k.add(col, 8)}),
                           pair(b, s.q, {bi, hi, rB, k.add(col, 8)})});
           }
           Value ninf = k.f(-INFINITY), zero = k.f(0.0);
           SmallVector<Value> init{ninf, ninf, zero, zero}; // mA, mB, lA, lB
           init.append(vTiles * 4, zero);                   // O fragments
           auto loop = scf::ForOp::create(
               b, begin, end, k.c(bc), init,
               [&](OpBuilder &nb, Location l, Value j0, ValueRange st) {
                 ImplicitLocOpBuilder ib(l, nb);
                 KB kb{ib};
                 stageKeyTile(ib, s, tid, threads, j0, bi, kvh, sK, sV,
                              /*vTransposed=*/true);

                 // S = Q K^T, scaled and masked.
                 Value scale = kb.f(s.scale);
                 SmallVector<SmallVector<Value>> sc;
                 Value ninfL = kb.f(-INFINITY);
                 for (int64_t nt = 0; nt < nTiles; ++nt) {
                   SmallVector<Value> acc(4, kb.f(0.0));
                   Value krow = kb.add(g, nt * 8);
                   for (int64_t kk = 0; kk < dTiles; ++kk) {
                     Value col = kb.add(t2, kk * 16);
                     acc = mma(ib, elt, qa[kk],
                               {pair(ib, sK, {krow, col}),
                                pair(ib, sK, {krow, kb.add(col, 8)})},
                               acc);
                   }
                   for (int64_t e = 0; e < 4; ++e) {
                     Value key = kb.add(kb.add(j0, t2), nt * 8 + (e & 1));
                     Value lo = e < 2 ? loA : loB, hiK = e < 2 ? hiA : hiB;
                     Value ok = kb.andI(kb.ge(key, lo), kb.lt(key, hiK));
                     Value sv = modifyScore(kb, s, kb.fmul(acc[e], scale), hi,
                                            slope, e < 2 ? posA : posB, key);
                     acc[e] = kb.sel(ok, sv, ninfL);
                   }
                   sc.push_back(acc);
                 }
                 // Online softmax: running max per row (reduced over the quad
                 // that shares the row), per-thread partial sums.
                 SmallVector<Value> next;
                 Value alpha[2], mu[2];
                 for (int r = 0; r < 2; ++r) {
                   Value m = ninfL;
                   for (auto &t : sc)
                     m = kb.fmax(m, kb.fmax(t[2 * r], t[2 * r + 1]));
                   m = kb.quad(m, /*isMax=*/true);
                   Value mNew = kb.fmax(st[r], m);
                   Value none = arith::CmpFOp::create(
                       ib, arith::CmpFPredicate::OEQ, mNew, ninfL);
                   mu[r] = kb.sel(none, kb.f(0.0), mNew);
                   alpha[r] = kb.exp(kb.fsub(st[r], mu[r]));
                   next.push_back(mNew);
                 }
                 Value rowSum[2] = {kb.f(0.0), kb.f(0.0)};
                 for (auto &t : sc)
                   for (int64_t e = 0; e < 4; ++e) {
                     t[e] = kb.exp(kb.fsub(t[e], mu[e / 2]));
                     rowSum[e / 2] = kb.fadd(rowSum[e / 2], t[e]);
                   }
                 for (int r = 0; r < 2; ++r)
                   next.push_back(
                       kb.fadd(kb.fmul(st[2 + r], alpha[r]), rowSum[r]));
                 SmallVector<SmallVector<Value>> o(vTiles);
                 for (int64_t dn = 0; dn < vTiles; ++dn)
                   for (int64_t e = 0; e < 4; ++e)
                     o[dn].push_back(kb.fmul(st[4 + dn * 4 + e], alpha[e / 2]));
                 // O += P V, with P's C fragments reused as A fragments.
                 auto half = [&](Value x, Value y) {
                   Value hx = arith::TruncFOp::create(ib, elt, x);
                   Value hy = arith::TruncFOp::create(ib, elt, y);
                   return vector::FromElementsOp::create(
                       ib, VectorType::get({2}, elt), ValueRange{hx, hy});
                 };
                 for (int64_t kc = 0; kc < bc / 16; ++kc) {
                   auto &p0 = sc[2 * kc], &p1 = sc[2 * kc + 1];
                   SmallVector<Value> a{half(p0[0], p0[1]), half(p0[2], p0[3]),
                                        half(p1[0], p1[1]), half(p1[2], p1[3])};
                   Value col = kb.add(t2, kc * 16);
                   for (int64_t dn = 0; dn < vTiles; ++dn) {
                     Value vrow = kb.add(g, dn * 8);
                     o[dn] = mma(ib, elt, a,
                                 {pair(ib, sV, {vrow, col}),
                                  pair(ib, sV, {vrow, kb.add(col, 8)})},
                                 o[dn]);
                   }
                 }
                 for (auto &f : o)
                   next.append(f.begin(), f.end());
                 scf::YieldOp::create(ib, next);
               });
           ValueRange res = loop.getResults();
           Value inv[2];
           for (int r = 0; r < 2; ++r) {
             Value sum =
                 s.withSink(k, k.quad(res[2 + r], /*isMax=*/false), hi, res[r]);
             Value pos = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                               sum, k.f(0.0));
             inv[r] =
                 k.sel(pos, arith::DivFOp::create(b, k.f(1.0), sum), k.f(0.0));
           }
           for (int r = 0; r < 2; ++r) {
             Value row = r == 0 ? rowA : rowB;
             auto ifOp = scf::IfOp::create(b, k.lt(row, s.tq), false);
             OpBuilder::InsertionGuard guard(b);
             b.setInsertionPointToStart(ifOp.thenBlock());
             for (int64_t dn = 0; dn < vTiles; ++dn)
               for (int64_t c = 0; c < 2; ++c)
                 k.storeAs(k.fmul(res[4 + dn * 4 + 2 * r + c], inv[r]), s.out,
                           {bi, hi, row, k.add(t2, dn * 8 + c)});
           }
         });
}

void kernels::emitAttentionSimt(ImplicitLocOpBuilder &b,
                                const AttentionShape &s) {
  KB k{b};
  const int64_t rows = 64;
  const int64_t bc = std::clamp<int64_t>(4096 / std::max(s.d, s.dv), 1, 32);
  Type f32 = b.getF32Type();
  MemRefType sKT = sharedType({bc, s.d}, f32),
             sVT = sharedType({bc, s.dv}, f32);
  Value grid = arith::CeilDivUIOp::create(b, s.tq, k.c(rows));
  launch(
      b, {grid, s.heads, s.bsz}, {rows, 1, 1}, {sKT, sVT},
      [&](gpu::LaunchOp op) {
        Value sK = op.getWorkgroupAttributions()[0];
        Value sV = op.getWorkgroupAttributions()[1];
        Value tid = op.getThreadIds().x;
        Value bi = op.getBlockIds().z, hi = op.getBlockIds().y;
        Value i0 = k.mul(op.getBlockIds().x, rows);
        Value kvh = arith::DivUIOp::create(b, hi, s.group);
        Value limit = keyLimit(k, s, bi);
        Value lastRow = k.sub(s.tq, k.c(1));
        Value row = k.add(i0, tid), r = k.min(row, lastRow);
        Value lo, hiK;
        std::tie(lo, hiK) = keyBounds(k, s, r, limit);
        Value loFirst = keyBounds(k, s, i0, limit).first;
        Value hiLast =
            keyBounds(k, s, k.min(k.add(i0, rows - 1), lastRow), limit).second;
        Value begin = k.mul(k.div(loFirst, bc), bc);
        Value end = k.max(hiLast, begin);
        Value slope = headSlope(k, s, hi);
        Value rowPos = k.add(r, s.offset);
        SmallVector<Value> q;
        Value scale = k.f(s.scale);
        for (int64_t d = 0; d < s.d; ++d)
          q.push_back(k.fmul(k.loadF32(s.q, {bi, hi, r, k.c(d)}), scale));
        Value ninf = k.f(-INFINITY), zero = k.f(0.0);
        SmallVector<Value> init{ninf, zero};
        init.append(s.dv, zero);
        auto tiles = scf::ForOp::create(
            b, begin, end, k.c(bc), init,
            [&](OpBuilder &nb, Location l, Value j0, ValueRange st) {
              ImplicitLocOpBuilder ib(l, nb);
              KB kb{ib};
              stageKeyTile(ib, s, tid, rows, j0, bi, kvh, sK, sV,
                           /*vTransposed=*/false);
              auto keys = scf::ForOp::create(
                  ib, kb.c(0), kb.c(bc), kb.c(1), st,
                  [&](OpBuilder &kb2, Location kl, Value j, ValueRange acc) {
                    ImplicitLocOpBuilder jb(kl, kb2);
                    KB kj{jb};
                    Value dot = kj.f(0.0);
                    for (int64_t d = 0; d < s.d; ++d)
                      dot = kj.fma(q[d],
                                   memref::LoadOp::create(
                                       jb, sK, ValueRange{j, kj.c(d)}),
                                   dot);
                    Value key = kj.add(j0, j);
                    Value ok = kj.andI(kj.ge(key, lo), kj.lt(key, hiK));
                    Value ninfJ = kj.f(-INFINITY);
                    Value sv = kj.sel(
                        ok, modifyScore(kj, s, dot, hi, slope, rowPos, key),
                        ninfJ);
                    Value mNew = kj.fmax(acc[0], sv);
                    Value none = arith::CmpFOp::create(
                        jb, arith::CmpFPredicate::OEQ, mNew, ninfJ);
                    Value mu = kj.sel(none, kj.f(0.0), mNew);
                    Value alpha = kj.exp(kj.fsub(acc[0], mu));
                    Value p = kj.exp(kj.fsub(sv, mu));
                    SmallVector<Value> next{mNew,
                                            kj.fadd(kj.fmul(acc[1], alpha), p)};
                    for (int64_t d = 0; d < s.dv; ++d)
                      next.push_back(kj.fma(p,
                                            memref::LoadOp::create(
                                                jb, sV, ValueRange{j, kj.c(d)}),
                                            kj.fmul(acc[2 + d], alpha)));
                    scf::YieldOp::create(jb, next);
                  });
              scf::YieldOp::create(ib, keys.getResults());
            });
        ValueRange res = tiles.getResults();
        Value sum = s.withSink(k, res[1], hi, res[0]);
        Value pos =
            arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, sum, k.f(0.0));
        Value inv =
            k.sel(pos, arith::DivFOp::create(b, k.f(1.0), sum), k.f(0.0));
        auto ifOp = scf::IfOp::create(b, k.lt(row, s.tq), false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        for (int64_t d = 0; d < s.dv; ++d)
          k.storeAs(k.fmul(res[2 + d], inv), s.out, {bi, hi, row, k.c(d)});
      });
}

void kernels::emitAttentionDecode(ImplicitLocOpBuilder &b,
                                  const AttentionShape &s, int64_t group) {
  KB k{b};
  const int64_t threads = 128, warps = threads / 32;
  // Keys per tile: a lane each in the softmax; K and V tiles in f32 within
  // 32 KiB of shared memory.
  const int64_t bc = std::clamp<int64_t>(4096 / std::max(s.d, s.dv), 1, 32);
  const int64_t rowsPerWarp = (group + warps - 1) / warps;
  const int64_t outputs = group * s.dv;
  const int64_t outsPerThread = (outputs + threads - 1) / threads;
  int64_t kv = cast<MemRefType>(s.kt.getType()).getDimSize(1);
  Type f32 = b.getF32Type();
  // One block per (key split, KV head, sequence x query step).
  Value steps = arith::MulIOp::create(b, s.bsz, s.tq);
  Value tasks = k.max(arith::MulIOp::create(b, steps, s.kvHeads), k.c(1));
  Value splits = k.max(
      k.min(arith::CeilDivUIOp::create(b, k.c(kDecodeTargetBlocks), tasks),
            arith::CeilDivUIOp::create(b, s.tk, k.c(kDecodeMinSplitKeys))),
      k.c(1));
  // Per (sequence x step, KV head, split, query head of the group): the
  // running max and sum, and the unnormalized output.
  int64_t dyn = ShapedType::kDynamic;
  Value stats =
      memref::AllocOp::create(b, MemRefType::get({dyn, kv, dyn, group, 2}, f32),
                              ValueRange{steps, splits});
  Value partO = memref::AllocOp::create(
      b, MemRefType::get({dyn, kv, dyn, group, s.dv}, f32),
      ValueRange{steps, splits});
  MemRefType sKT = sharedType({bc, s.d}, f32),
             sVT = sharedType({bc, s.dv}, f32),
             sPT = sharedType({group, bc}, f32), sCT = sharedType({group}, f32);
  launch(
      b, {splits, s.kvHeads, steps}, {threads, 1, 1}, {sKT, sVT, sPT, sCT},
      [&](gpu::LaunchOp op) {
        Value sK = op.getWorkgroupAttributions()[0];
        Value sV = op.getWorkgroupAttributions()[1];
        Value sP = op.getWorkgroupAttributions()[2];
        Value sC = op.getWorkgroupAttributions()[3];
        Value tid = op.getThreadIds().x;
        Value si = op.getBlockIds().x, kvh = op.getBlockIds().y;
        Value step = op.getBlockIds().z;
        Value bi = arith::DivUIOp::create(b, step, s.tq);
        Value t = arith::RemUIOp::create(b, step, s.tq);
        Value warp = k.div(tid, 32), lane = k.rem(tid, 32);
        // This row's position, the keys it sees [lo, hi) and the range of
        // key slots to visit, [first, end).
        Value offset =
            k.max(arith::IndexCastOp::create(
                      b, b.getIndexType(),
                      memref::LoadOp::create(b, s.positions, ValueRange{bi})),
                  k.c(0));
        Value written = k.add(offset, s.tq);
        Value limit = s.ring ? written : k.min(s.tk, written);
        if (s.lengths) {
          Value len = arith::IndexCastOp::create(
              b, b.getIndexType(),
              memref::LoadOp::create(b, s.lengths, ValueRange{bi}));
          limit = k.min(limit, k.max(len, k.c(0)));
        }
        Value pos = k.add(offset, t);
        Value hi = limit, lo = k.c(0);
        if (s.kind != MaskKind::none)
          hi = k.min(hi, k.add(pos, 1));
        if (s.kind == MaskKind::sliding)
          lo = k.max(k.c(0), k.sub(pos, k.c(s.window - 1)));
        Value first = s.ring ? k.c(0) : k.mul(k.div(lo, bc), bc);
        Value end = s.ring ? k.min(s.tk, written) : k.max(hi, first);
        Value blocks =
            arith::CeilDivUIOp::create(b, k.sub(end, first), k.c(bc));
        Value per = k.max(arith::CeilDivUIOp::create(b, blocks, splits),
                          k.c((kDecodeMinSplitKeys + bc - 1) / bc));
        Value span = arith::MulIOp::create(b, per, k.c(bc));
        Value jStart = k.add(first, arith::MulIOp::create(b, si, span));
        Value jEnd = k.min(end, k.add(jStart, span));
        Value h0 = k.mul(kvh, group);

        Value ninf = k.f(-INFINITY), zero = k.f(0.0);
        SmallVector<Value> init(rowsPerWarp, ninf); // running max
        init.append(rowsPerWarp, zero);             // running sum
        init.append(outsPerThread, zero);           // output elements
        auto loop = scf::ForOp::create(
            b, jStart, jEnd, k.c(bc), init,
            [&](OpBuilder &, Location, Value j0, ValueRange st) {
              stageKeyTile(b, s, tid, threads, j0, bi, kvh, sK, sV,
                           /*vTransposed=*/false);
              // Scores of the group's rows against the tile.
              forEachElement(b, tid, group * bc, threads, [&](Value e) {
                Value r = k.div(e, bc), j = k.rem(e, bc);
                Value head = k.add(h0, r);
                Value dot =
                    scf::ForOp::create(
                        b, k.c(0), k.c(s.d), k.c(1), ValueRange{zero},
                        [&](OpBuilder &, Location, Value dd, ValueRange acc) {
                          Value qd =
                              k.loadF32(s.q, ValueRange{bi, head, t, dd});
                          Value kd =
                              memref::LoadOp::create(b, sK, ValueRange{j, dd});
                          scf::YieldOp::create(b, k.fma(qd, kd, acc[0]));
                        })
                        .getResult(0);
                Value slot = k.add(j0, j);
                Value key = slot;
                if (s.ring) {
                  // Slot j holds position e - 1 - ((e - 1 - j) mod S), or
                  // none if j >= e or j >= S.
                  Value last = k.sub(written, k.c(1));
                  Value back = k.sub(last, slot);
                  Value none = arith::OrIOp::create(b, k.lt(back, k.c(0)),
                                                    k.ge(slot, s.tk));
                  key = k.sel(none, k.c(-1),
                              k.sub(last, arith::RemSIOp::create(
                                              b, k.max(back, k.c(0)), s.tk)));
                }
                Value ok = k.andI(k.ge(key, lo), k.lt(key, hi));
                Value sv = modifyScore(k, s, k.fmul(dot, k.f(s.scale)), head,
                                       headSlope(k, s, head), pos, key);
                memref::StoreOp::create(b, k.sel(ok, sv, ninf), sP,
                                        ValueRange{r, j});
              });
              gpu::BarrierOp::create(b);
              // The online softmax: a warp per row, a lane per key.
              SmallVector<Value> next(st.begin(), st.end());
              for (int64_t i = 0; i < rowsPerWarp; ++i) {
                Value r = k.add(warp, i * warps);
                Value rc = k.min(r, k.c(group - 1));
                Value inTile = k.lt(lane, k.c(bc));
                Value lc = k.min(lane, k.c(bc - 1));
                Value sv = k.sel(
                    inTile, memref::LoadOp::create(b, sP, ValueRange{rc, lc}),
                    ninf);
                Value mNew = k.fmax(st[i], warpReduce(k, sv, /*isMax=*/true));
                Value none = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ,
                                                   mNew, ninf);
                Value mu = k.sel(none, zero, mNew);
                Value p = k.exp(k.fsub(sv, mu));
                Value corr = k.exp(k.fsub(st[i], mu));
                next[i] = mNew;
                next[rowsPerWarp + i] =
                    k.fadd(k.fmul(st[rowsPerWarp + i], corr),
                           warpReduce(k, p, /*isMax=*/false));
                auto own =
                    scf::IfOp::create(b, k.andI(k.lt(r, k.c(group)), inTile),
                                      /*withElseRegion=*/false);
                OpBuilder::InsertionGuard guard(b);
                b.setInsertionPointToStart(own.thenBlock());
                memref::StoreOp::create(b, p, sP, ValueRange{rc, lc});
                memref::StoreOp::create(b, corr, sC, ValueRange{rc});
              }
              gpu::BarrierOp::create(b);
              // O = O * corr + P V, each thread its output elements.
              for (int64_t i = 0; i < outsPerThread; ++i) {
                Value e = k.min(k.add(tid, i * threads), k.c(outputs - 1));
                Value r = k.div(e, s.dv), c = k.rem(e, s.dv);
                Value acc =
                    k.fmul(st[2 * rowsPerWarp + i],
                           memref::LoadOp::create(b, sC, ValueRange{r}));
                next[2 * rowsPerWarp + i] =
                    scf::ForOp::create(
                        b, k.c(0), k.c(bc), k.c(1), ValueRange{acc},
                        [&](OpBuilder &, Location, Value j, ValueRange a) {
                          scf::YieldOp::create(
                              b, k.fma(memref::LoadOp::create(b, sP,
                                                              ValueRange{r, j}),
                                       memref::LoadOp::create(b, sV,
                                                              ValueRange{j, c}),
                                       a[0]));
                        })
                        .getResult(0);
              }
              scf::YieldOp::create(b, next);
            });
        // This split's partial results.
        ValueRange res = loop.getResults();
        for (int64_t i = 0; i < rowsPerWarp; ++i) {
          Value r = k.add(warp, i * warps);
          auto own = scf::IfOp::create(
              b, k.andI(k.lt(r, k.c(group)), k.lt(lane, k.c(1))),
              /*withElseRegion=*/false);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(own.thenBlock());
          memref::StoreOp::create(b, res[i], stats,
                                  ValueRange{step, kvh, si, r, k.c(0)});
          memref::StoreOp::create(b, res[rowsPerWarp + i], stats,
                                  ValueRange{step, kvh, si, r, k.c(1)});
        }
        for (int64_t i = 0; i < outsPerThread; ++i) {
          Value e = k.add(tid, i * threads);
          auto own = scf::IfOp::create(b, k.lt(e, k.c(outputs)),
                                       /*withElseRegion=*/false);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(own.thenBlock());
          memref::StoreOp::create(
              b, res[2 * rowsPerWarp + i], partO,
              ValueRange{step, kvh, si, k.div(e, s.dv), k.rem(e, s.dv)});
        }
      });

  // The merge, a block per (head, sequence x step): out = sum_s w_s O_s /
  // sum_s w_s l_s with w_s = exp(m_s - max_s m_s), or zeros for a row that
  // saw no key.
  launch(b, {s.heads, steps, k.c(1)}, {threads, 1, 1}, {},
         [&](gpu::LaunchOp op) {
           Value tid = op.getThreadIds().x;
           Value hi = op.getBlockIds().x, step = op.getBlockIds().y;
           Value bi = arith::DivUIOp::create(b, step, s.tq);
           Value t = arith::RemUIOp::create(b, step, s.tq);
           Value kvh = k.div(hi, group), g = k.rem(hi, group);
           Value ninf = k.f(-INFINITY), zero = k.f(0.0);
           auto overSplits = [&](Value init,
                                 function_ref<Value(Value, Value)> body) {
             return scf::ForOp::create(
                        b, k.c(0), splits, k.c(1), ValueRange{init},
                        [&](OpBuilder &, Location, Value sp, ValueRange acc) {
                          scf::YieldOp::create(b, body(sp, acc[0]));
                        })
                 .getResult(0);
           };
           auto statOf = [&](Value sp, int64_t which) -> Value {
             return memref::LoadOp::create(
                 b, stats, ValueRange{step, kvh, sp, g, k.c(which)});
           };
           Value m = overSplits(ninf, [&](Value sp, Value acc) {
             return k.fmax(acc, statOf(sp, 0));
           });
           Value none =
               arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, m, ninf);
           Value mu = k.sel(none, zero, m);
           auto weight = [&](Value sp) {
             return k.exp(k.fsub(statOf(sp, 0), mu));
           };
           Value sum = s.withSink(k,
                                  overSplits(zero,
                                             [&](Value sp, Value acc) {
                                               return k.fma(weight(sp),
                                                            statOf(sp, 1), acc);
                                             }),
                                  hi, m);
           Value inv = k.sel(
               arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, sum, zero),
               arith::DivFOp::create(b, k.f(1.0), sum), zero);
           forEachElement(b, tid, s.dv, threads, [&](Value c) {
             Value o = overSplits(zero, [&](Value sp, Value acc) {
               return k.fma(k.fmul(weight(sp), inv),
                            memref::LoadOp::create(
                                b, partO, ValueRange{step, kvh, sp, g, c}),
                            acc);
             });
             k.storeAs(o, s.out, {bi, hi, t, c});
           });
         });
  memref::DeallocOp::create(b, stats);
  memref::DeallocOp::create(b, partO);
}
