//===- GpuKernels.cpp - kernel ops to GPU kernels -------------------------===//
//
// tfm-gpu-lower-kernels turns the buffer forms of tfm.attention_kernel and
// tfm.linear_kernel into gpu.launch regions (see Passes.td for the
// blocking). The tensor-core paths use nvvm.mma.sync m16n8k16 with these
// per-thread fragments (g = lane / 4, t = lane % 4):
//
//   A (16x16, row major)  a0 = A[g][2t, 2t+1]      a1 = A[g+8][2t, 2t+1]
//                         a2 = A[g][2t+8, 2t+9]    a3 = A[g+8][2t+8, 2t+9]
//   B (16x8, col major)   b0 = B[2t, 2t+1][g]      b1 = B[2t+8, 2t+9][g]
//   C (16x8, f32)         c0, c1 = C[g][2t, 2t+1]  c2, c3 = C[g+8][2t, 2t+1]
//
// so that a pair of B elements is contiguous when B is staged transposed
// ([n][k]) in shared memory, and the C fragments of two neighbouring 8-key
// tiles of S = Q K^T are exactly the A fragment of P for P V.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include <cmath>

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMGPULOWERKERNELS
#define GEN_PASS_DEF_TFMGPUMAPLOOPS
#define GEN_PASS_DEF_TFMGPUMERGEMODULES
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Output columns per weight panel, and per GEMM thread block.
constexpr int64_t kGpuPanel = 64;

/// Small arithmetic helpers on an ImplicitLocOpBuilder.
struct KB {
  ImplicitLocOpBuilder &b;
  Value c(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value f(double v) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value add(Value x, int64_t y) { return y ? add(x, c(y)) : x; }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, x, y); }
  Value mul(Value x, int64_t y) { return arith::MulIOp::create(b, x, c(y)); }
  Value div(Value x, int64_t y) { return arith::DivUIOp::create(b, x, c(y)); }
  Value rem(Value x, int64_t y) { return arith::RemUIOp::create(b, x, c(y)); }
  Value min(Value x, Value y) { return arith::MinSIOp::create(b, x, y); }
  Value max(Value x, Value y) { return arith::MaxSIOp::create(b, x, y); }
  Value lt(Value x, Value y) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::slt, x, y);
  }
  Value ge(Value x, Value y) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::sge, x, y);
  }
  Value andI(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
  Value sel(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, c, x, y);
  }
  Value fadd(Value x, Value y) { return arith::AddFOp::create(b, x, y); }
  Value fmul(Value x, Value y) { return arith::MulFOp::create(b, x, y); }
  Value fsub(Value x, Value y) { return arith::SubFOp::create(b, x, y); }
  Value fmax(Value x, Value y) { return arith::MaximumFOp::create(b, x, y); }
  Value fma(Value x, Value y, Value z) {
    return math::FmaOp::create(b, x, y, z);
  }
  Value exp(Value x) { return math::ExpOp::create(b, x); }
  Value dim(Value m, int64_t i) { return memref::DimOp::create(b, m, i); }

  /// memref.load converted to f32.
  Value loadF32(Value m, ValueRange idx) {
    Value v = memref::LoadOp::create(b, m, idx);
    if (!v.getType().isF32())
      v = arith::ExtFOp::create(b, b.getF32Type(), v);
    return v;
  }
  /// Converts f32 `v` to `elt` and stores it.
  void storeAs(Value v, Value m, ValueRange idx) {
    Type elt = cast<MemRefType>(m.getType()).getElementType();
    if (elt != v.getType())
      v = arith::TruncFOp::create(b, elt, v);
    memref::StoreOp::create(b, v, m, idx);
  }
  /// Loads element `idx` of `m` as `elt`, or zero when `inside` is false
  /// (the index must be clamped into range by the caller).
  Value loadOrZero(Value m, ValueRange idx, Value inside, Type elt) {
    Value v = memref::LoadOp::create(b, m, idx);
    if (v.getType() != elt)
      v = elt.isF32() ? Value(arith::ExtFOp::create(b, elt, v))
                      : Value(arith::TruncFOp::create(b, elt, v));
    Value zero = arith::ConstantOp::create(b, b.getFloatAttr(elt, 0.0));
    return sel(inside, v, zero);
  }
  /// Sum or max over the four lanes of a quad (lanes 4g .. 4g+3).
  Value quad(Value v, bool isMax) {
    for (int32_t off : {1, 2}) {
      Value o = gpu::ShuffleOp::create(b, v, off, 32, gpu::ShuffleMode::XOR)
                    .getShuffleResult();
      v = isMax ? fmax(v, o) : fadd(v, o);
    }
    return v;
  }
};

/// Emits a gpu.launch of grid x block with shared buffers `shared` and
/// fills its body with `body(launch)`.
gpu::LaunchOp launch(ImplicitLocOpBuilder &b, std::array<Value, 3> grid,
                     std::array<int64_t, 3> block, TypeRange shared,
                     function_ref<void(gpu::LaunchOp)> body) {
  auto cst = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, v);
  };
  auto op = gpu::LaunchOp::create(b, grid[0], grid[1], grid[2], cst(block[0]),
                                  cst(block[1]), cst(block[2]), nullptr,
                                  nullptr, ValueRange{}, shared);
  Block &blk = op.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  if (!blk.empty() && blk.back().hasTrait<OpTrait::IsTerminator>())
    b.setInsertionPoint(&blk.back());
  else
    b.setInsertionPointToEnd(&blk);
  body(op);
  if (blk.empty() || !blk.back().hasTrait<OpTrait::IsTerminator>())
    gpu::TerminatorOp::create(b);
  return op;
}

MemRefType sharedType(ArrayRef<int64_t> shape, Type elt) {
  auto space = gpu::AddressSpaceAttr::get(elt.getContext(),
                                          gpu::AddressSpace::Workgroup);
  return MemRefType::get(shape, elt, MemRefLayoutAttrInterface(), space);
}

bool isHalf(Type t) { return t.isF16() || t.isBF16(); }

/// One m16n8k16 tensor-core product: c += a * b (a: 4, b: 2 pairs of
/// f16/bf16 as vector<2xT>, c: 4 f32). Returns the 4 new f32 values.
SmallVector<Value> mma(ImplicitLocOpBuilder &b, Type elt, ArrayRef<Value> a,
                       ArrayRef<Value> bf, ArrayRef<Value> c) {
  auto pack = [&](ArrayRef<Value> vs) {
    SmallVector<Value> out;
    for (Value v : vs) {
      if (elt.isBF16()) {
        // PTX takes bf16 pairs as .b32 registers.
        v = vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()),
                                      v);
        v = vector::ExtractOp::create(b, v, ArrayRef<int64_t>{0});
      }
      out.push_back(v);
    }
    return out;
  };
  Type f32 = b.getF32Type();
  auto resT =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes ptx =
      elt.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  auto op = NVVM::MmaOp::create(
      b, resT, pack(a), pack(bf), c, ArrayRef<int64_t>{16, 8, 16}, std::nullopt,
      std::nullopt, std::array<NVVM::MMATypes, 2>{ptx, ptx},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, op.getRes(), i));
  return out;
}

/// A pair of neighbouring elements [.., col], [.., col + 1] of `m`.
Value pair(ImplicitLocOpBuilder &b, Value m, ValueRange idx) {
  Type elt = cast<MemRefType>(m.getType()).getElementType();
  return vector::LoadOp::create(b, VectorType::get({2}, elt), m, idx);
}

/// Cooperative copy of a tile into shared memory: for every linear element
/// e of `count` (strided over `threads` starting at `tid`), `body(e)`.
void forEachElement(ImplicitLocOpBuilder &b, Value tid, int64_t count,
                    int64_t threads, function_ref<void(Value)> body) {
  KB k{b};
  scf::ForOp::create(b, tid, k.c(count), k.c(threads), ValueRange{},
                     [&](OpBuilder &nb, Location l, Value e, ValueRange) {
                       ImplicitLocOpBuilder ib(l, nb);
                       body(e);
                       scf::YieldOp::create(ib);
                     });
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

struct AttentionShape {
  Value q, kt, v, lengths, out;
  Value bsz, heads, tq, kvHeads, tk, group, offset;
  int64_t d, dv;
  Type elt;
  MaskKind kind;
  int64_t window;
  double scale;
};

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

/// Keys per tile for the tensor-core kernel: K and V^T tiles in f16 within
/// 48 KiB of static shared memory.
int64_t mmaKeyTile(int64_t d, int64_t dv) {
  int64_t m = std::max(d, dv);
  return m <= 128 ? 64 : m <= 256 ? 32 : 16;
}

void emitAttentionMma(ImplicitLocOpBuilder &b, const AttentionShape &s) {
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
                     acc[e] = kb.sel(ok, kb.fmul(acc[e], scale), ninfL);
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
             Value sum = k.quad(res[2 + r], /*isMax=*/false);
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

/// f32 (or any shape) fallback: one thread per query row, K/V tiles in
/// shared memory, the online softmax updated key by key.
void emitAttentionSimt(ImplicitLocOpBuilder &b, const AttentionShape &s) {
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
                    Value sv = kj.sel(ok, dot, ninfJ);
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
        Value pos = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, res[1],
                                          k.f(0.0));
        Value inv =
            k.sel(pos, arith::DivFOp::create(b, k.f(1.0), res[1]), k.f(0.0));
        auto ifOp = scf::IfOp::create(b, k.lt(row, s.tq), false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        for (int64_t d = 0; d < s.dv; ++d)
          k.storeAs(k.fmul(res[2 + d], inv), s.out, {bi, hi, row, k.c(d)});
      });
}

struct GpuAttention : OpRewritePattern<AttentionKernelOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionKernelOp op,
                                PatternRewriter &rw) const override {
    if (!op.hasPureBufferSemantics())
      return rw.notifyMatchFailure(op, "not bufferized yet");
    ImplicitLocOpBuilder b(op.getLoc(), rw);
    KB k{b};
    AttentionShape s;
    s.q = op.getQuery();
    s.kt = op.getKey();
    s.v = op.getValue();
    s.lengths = op.getLengths();
    s.out = op.getOutput();
    auto qt = cast<MemRefType>(s.q.getType());
    auto vt = cast<MemRefType>(s.v.getType());
    if (qt.isDynamicDim(3) || vt.isDynamicDim(3))
      return op.emitOpError("GPU attention needs static head dimensions");
    s.d = qt.getDimSize(3);
    s.dv = vt.getDimSize(3);
    s.elt = qt.getElementType();
    s.kind = op.getMask();
    s.window = op.getWindowAttr() ? op.getWindowAttr().getInt() : 0;
    s.scale = op.getScale().convertToDouble();
    s.bsz = k.dim(s.q, 0);
    s.heads = k.dim(s.q, 1);
    s.tq = k.dim(s.q, 2);
    s.kvHeads = k.dim(s.kt, 1);
    s.tk = k.dim(s.kt, 3);
    s.group = arith::DivUIOp::create(b, s.heads, s.kvHeads);
    s.offset = k.sub(s.tk, s.tq);
    if (isHalf(s.elt) && s.d % 16 == 0 && s.dv % 8 == 0 &&
        std::max(s.d, s.dv) <= 512)
      emitAttentionMma(b, s);
    else
      emitAttentionSimt(b, s);
    rw.eraseOp(op);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Linear
//===----------------------------------------------------------------------===//

struct GpuLinear : OpRewritePattern<LinearKernelOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearKernelOp op,
                                PatternRewriter &rw) const override {
    if (!op.hasPureBufferSemantics())
      return rw.notifyMatchFailure(op, "not bufferized yet");
    auto wt = cast<MemRefType>(op.getWeightP().getType());
    if (wt.getDimSize(2) != kGpuPanel)
      return rw.notifyMatchFailure(op, "weights not in 64-column panels");
    auto ot = cast<MemRefType>(op.getOutput().getType());
    ImplicitLocOpBuilder b(op.getLoc(), rw);
    if (isHalf(ot.getElementType()))
      emitMma(b, op);
    else
      emitSimt(b, op);
    rw.eraseOp(op);
    return success();
  }

  static constexpr int64_t bm = 64, bk = 32, threads = 128;

  /// Stages A[m0 .. m0+63][k0 .. k0+31] into sA[row][k] and the panel's
  /// rows k0 .. k0+31 into sB, as [n][k] (`transposed`) or [k][n].
  static void stage(ImplicitLocOpBuilder &b, Value tid, Value a, Value w,
                    Value p, Value m0, Value k0, Value sA, Value sB,
                    bool transposed) {
    KB k{b};
    Type elt = cast<MemRefType>(sA.getType()).getElementType();
    Value m = k.dim(a, 0), kk = k.dim(a, 1);
    Value mLast = k.sub(m, k.c(1)), kLast = k.sub(kk, k.c(1));
    forEachElement(b, tid, bm * bk, threads, [&](Value e) {
      Value r = k.div(e, bk), c = k.rem(e, bk);
      Value row = k.add(m0, r), col = k.add(k0, c);
      Value ok = k.andI(k.lt(row, m), k.lt(col, kk));
      Value v =
          k.loadOrZero(a, {k.min(row, mLast), k.min(col, kLast)}, ok, elt);
      memref::StoreOp::create(b, v, sA, ValueRange{r, c});
    });
    forEachElement(b, tid, bk * kGpuPanel, threads, [&](Value e) {
      Value r = k.div(e, kGpuPanel), c = k.rem(e, kGpuPanel);
      Value row = k.add(k0, r);
      Value v = k.loadOrZero(w, {p, k.min(row, kLast), c}, k.lt(row, kk), elt);
      memref::StoreOp::create(b, v, sB,
                              transposed ? ValueRange{c, r} : ValueRange{r, c});
    });
  }

  /// Adds the bias and stores element (row, col) when inside.
  static void epilogue(ImplicitLocOpBuilder &b, Operation *op, Value row,
                       Value col, Value v) {
    auto lin = cast<LinearKernelOp>(op);
    KB k{b};
    Value out = lin.getOutput();
    Value ok = k.andI(k.lt(row, k.dim(out, 0)), k.lt(col, k.dim(out, 1)));
    auto ifOp = scf::IfOp::create(b, ok, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    if (Value bias = lin.getBias())
      v = k.fadd(v, k.loadF32(bias, {col}));
    k.storeAs(v, out, {row, col});
  }

  void emitMma(ImplicitLocOpBuilder &b, LinearKernelOp op) const {
    KB k{b};
    Value a = op.getInput(), w = op.getWeightP();
    Type elt = cast<MemRefType>(op.getOutput().getType()).getElementType();
    MemRefType sAT = sharedType({bm, bk + 8}, elt);
    MemRefType sBT = sharedType({kGpuPanel, bk + 8}, elt);
    Value rowsGrid = arith::CeilDivUIOp::create(b, k.dim(a, 0), k.c(bm));
    launch(b, {k.dim(w, 0), rowsGrid, k.c(1)}, {threads, 1, 1}, {sAT, sBT},
           [&](gpu::LaunchOp l) {
             Value sA = l.getWorkgroupAttributions()[0];
             Value sB = l.getWorkgroupAttributions()[1];
             Value tid = l.getThreadIds().x, p = l.getBlockIds().x;
             Value m0 = k.mul(l.getBlockIds().y, bm);
             Value warp = k.div(tid, 32), lane = k.rem(tid, 32);
             Value g = k.div(lane, 4), t2 = k.mul(k.rem(lane, 4), 2);
             const int64_t nTiles = kGpuPanel / 8;
             SmallVector<Value> init(nTiles * 4, k.f(0.0));
             auto loop = scf::ForOp::create(
                 b, k.c(0), k.dim(a, 1), k.c(bk), init,
                 [&](OpBuilder &nb, Location loc, Value k0, ValueRange acc) {
                   ImplicitLocOpBuilder ib(loc, nb);
                   KB kb{ib};
                   gpu::BarrierOp::create(ib);
                   stage(ib, tid, a, w, p, m0, k0, sA, sB, /*transposed=*/true);
                   gpu::BarrierOp::create(ib);
                   SmallVector<Value> next(acc.begin(), acc.end());
                   Value ra = kb.add(kb.mul(warp, 16), g), rb = kb.add(ra, 8);
                   for (int64_t kk = 0; kk < bk / 16; ++kk) {
                     Value col = kb.add(t2, kk * 16), col8 = kb.add(col, 8);
                     SmallVector<Value> fa{
                         pair(ib, sA, {ra, col}), pair(ib, sA, {rb, col}),
                         pair(ib, sA, {ra, col8}), pair(ib, sA, {rb, col8})};
                     for (int64_t nt = 0; nt < nTiles; ++nt) {
                       Value n = kb.add(g, nt * 8);
                       SmallVector<Value> c(next.begin() + nt * 4,
                                            next.begin() + nt * 4 + 4);
                       c = mma(
                           ib, elt, fa,
                           {pair(ib, sB, {n, col}), pair(ib, sB, {n, col8})},
                           c);
                       std::copy(c.begin(), c.end(), next.begin() + nt * 4);
                     }
                   }
                   scf::YieldOp::create(ib, next);
                 });
             Value rowA = k.add(k.add(m0, k.mul(warp, 16)), g);
             for (int64_t nt = 0; nt < nTiles; ++nt)
               for (int64_t e = 0; e < 4; ++e) {
                 Value row = k.add(rowA, e < 2 ? 0 : 8);
                 Value col =
                     k.add(k.add(k.mul(p, kGpuPanel), t2), nt * 8 + (e & 1));
                 epilogue(b, op, row, col, loop.getResult(nt * 4 + e));
               }
           });
  }

  void emitSimt(ImplicitLocOpBuilder &b, LinearKernelOp op) const {
    KB k{b};
    Value a = op.getInput(), w = op.getWeightP();
    Type f32 = b.getF32Type();
    constexpr int64_t tr = 8, tc = 4; // outputs per thread
    MemRefType sAT = sharedType({bm, bk + 1}, f32);
    MemRefType sBT = sharedType({bk, kGpuPanel}, f32);
    Value rowsGrid = arith::CeilDivUIOp::create(b, k.dim(a, 0), k.c(bm));
    launch(
        b, {k.dim(w, 0), rowsGrid, k.c(1)}, {threads, 1, 1}, {sAT, sBT},
        [&](gpu::LaunchOp l) {
          Value sA = l.getWorkgroupAttributions()[0];
          Value sB = l.getWorkgroupAttributions()[1];
          Value tid = l.getThreadIds().x, p = l.getBlockIds().x;
          Value m0 = k.mul(l.getBlockIds().y, bm);
          Value tx = k.rem(tid, kGpuPanel / tc),
                ty = k.div(tid, kGpuPanel / tc);
          SmallVector<Value> init(tr * tc, k.f(0.0));
          auto loop = scf::ForOp::create(
              b, k.c(0), k.dim(a, 1), k.c(bk), init,
              [&](OpBuilder &nb, Location loc, Value k0, ValueRange acc) {
                ImplicitLocOpBuilder ib(loc, nb);
                KB kb{ib};
                gpu::BarrierOp::create(ib);
                stage(ib, tid, a, w, p, m0, k0, sA, sB, /*transposed=*/false);
                gpu::BarrierOp::create(ib);
                auto inner = scf::ForOp::create(
                    ib, kb.c(0), kb.c(bk), kb.c(1), acc,
                    [&](OpBuilder &nb2, Location l2, Value kc, ValueRange c) {
                      ImplicitLocOpBuilder jb(l2, nb2);
                      KB kj{jb};
                      SmallVector<Value> av, bv, next;
                      for (int64_t r = 0; r < tr; ++r)
                        av.push_back(memref::LoadOp::create(
                            jb, sA, ValueRange{kj.add(kj.mul(ty, tr), r), kc}));
                      for (int64_t cc = 0; cc < tc; ++cc)
                        bv.push_back(memref::LoadOp::create(
                            jb, sB,
                            ValueRange{kc, kj.add(kj.mul(tx, tc), cc)}));
                      for (int64_t r = 0; r < tr; ++r)
                        for (int64_t cc = 0; cc < tc; ++cc)
                          next.push_back(kj.fma(av[r], bv[cc], c[r * tc + cc]));
                      scf::YieldOp::create(jb, next);
                    });
                scf::YieldOp::create(ib, inner.getResults());
              });
          for (int64_t r = 0; r < tr; ++r)
            for (int64_t cc = 0; cc < tc; ++cc) {
              Value row = k.add(k.add(m0, k.mul(ty, tr)), r);
              Value col = k.add(k.add(k.mul(p, kGpuPanel), k.mul(tx, tc)), cc);
              epilogue(b, op, row, col, loop.getResult(r * tc + cc));
            }
        });
  }
};

struct CopyToLinalg : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &rw) const override {
    rw.replaceOpWithNewOp<linalg::CopyOp>(op, op.getSource(), op.getTarget());
    return success();
  }
};

struct TfmGpuLowerKernelsPass
    : mlir::tfm::impl::TfmGpuLowerKernelsBase<TfmGpuLowerKernelsPass> {
  void runOnOperation() override {
    WalkResult bad = getOperation().walk([](LinearKernelOp op) {
      auto wt = cast<ShapedType>(op.getWeightP().getType());
      if (wt.getDimSize(2) == kGpuPanel)
        return WalkResult::advance();
      op.emitOpError("the GPU GEMM needs weights packed in ")
          << kGpuPanel << "-column panels, got " << wt.getDimSize(2);
      return WalkResult::interrupt();
    });
    if (bad.wasInterrupted())
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    patterns.add<GpuAttention, GpuLinear, CopyToLinalg>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    WalkResult left = getOperation().walk([](Operation *op) {
      if (isa<AttentionKernelOp, LinearKernelOp>(op)) {
        op->emitOpError("was not lowered to a GPU kernel");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

//===----------------------------------------------------------------------===//
// Parallel loops and buffers
//===----------------------------------------------------------------------===//

/// Replaces a (nested) scf.parallel by a sequential scf.for nest.
void sequentialize(scf::ParallelOp par) {
  OpBuilder b(par);
  IRMapping map;
  Location loc = par.getLoc();
  SmallVector<Value> ivs;
  for (auto [lb, ub, st] :
       llvm::zip(par.getLowerBound(), par.getUpperBound(), par.getStep())) {
    auto f = scf::ForOp::create(b, loc, lb, ub, st);
    ivs.push_back(f.getInductionVar());
    b.setInsertionPointToStart(f.getBody());
  }
  for (auto [iv, arg] : llvm::zip(ivs, par.getInductionVars()))
    map.map(arg, iv);
  for (Operation &op : par.getBody()->without_terminator())
    b.clone(op, map);
  par.erase();
}

LogicalResult mapToLaunch(scf::ParallelOp par) {
  if (par.getNumResults() != 0)
    return par.emitOpError("with reductions cannot run on the GPU yet");
  // Inner parallel loops run sequentially within a thread.
  SmallVector<scf::ParallelOp> nested;
  par.getBody()->walk([&](scf::ParallelOp p) { nested.push_back(p); });
  for (scf::ParallelOp p : llvm::reverse(nested))
    sequentialize(p);

  ImplicitLocOpBuilder b(par.getLoc(), par);
  KB k{b};
  constexpr int64_t threads = 256;
  SmallVector<Value> trips;
  Value total = k.c(1);
  for (auto [lb, ub, st] :
       llvm::zip(par.getLowerBound(), par.getUpperBound(), par.getStep())) {
    Value n = arith::CeilDivUIOp::create(b, k.max(k.sub(ub, lb), k.c(0)), st);
    trips.push_back(n);
    total = arith::MulIOp::create(b, total, n);
  }
  // At least one block (a grid of 0 is a launch error); the threads past
  // the iteration space do nothing.
  Value blocks =
      k.max(arith::CeilDivUIOp::create(b, total, k.c(threads)), k.c(1));
  launch(
      b, {blocks, k.c(1), k.c(1)}, {threads, 1, 1}, {}, [&](gpu::LaunchOp l) {
        Value id = k.add(k.mul(l.getBlockIds().x, threads), l.getThreadIds().x);
        auto inside = scf::IfOp::create(b, k.lt(id, total), false);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(inside.thenBlock());
        IRMapping map;
        Value rest = id;
        for (int64_t i = trips.size() - 1; i >= 0; --i) {
          Value idx = arith::RemUIOp::create(b, rest, trips[i]);
          rest = arith::DivUIOp::create(b, rest, trips[i]);
          Value iv = k.add(par.getLowerBound()[i],
                           arith::MulIOp::create(b, idx, par.getStep()[i]));
          map.map(par.getInductionVars()[i], iv);
        }
        for (Operation &op : par.getBody()->without_terminator())
          b.clone(op, map);
      });
  par.erase();
  return success();
}

struct TfmGpuMapLoopsPass
    : mlir::tfm::impl::TfmGpuMapLoopsBase<TfmGpuMapLoopsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<scf::ParallelOp> outer;
    func.walk([&](scf::ParallelOp p) {
      if (!p->getParentOfType<scf::ParallelOp>() &&
          !p->getParentOfType<gpu::LaunchOp>())
        outer.push_back(p);
    });
    for (scf::ParallelOp p : outer)
      if (failed(mapToLaunch(p)))
        return signalPassFailure();

    // Buffers live on the device.
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if (isa<memref::AllocOp, memref::DeallocOp, memref::GetGlobalOp>(op) &&
          !op->getParentOfType<gpu::LaunchOp>())
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        auto g = gpu::AllocOp::create(b, loc, alloc.getType(), Type(),
                                      ValueRange{}, alloc.getDynamicSizes(),
                                      alloc.getSymbolOperands());
        alloc.replaceAllUsesWith(g.getMemref());
        alloc.erase();
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(b, loc, Type(), ValueRange{},
                               dealloc.getMemref());
        dealloc.erase();
      } else if (auto global = dyn_cast<memref::GetGlobalOp>(op)) {
        // A constant table: copy it to a device buffer at its use.
        auto type = cast<MemRefType>(global.getType());
        auto dev = gpu::AllocOp::create(b, loc, type, Type(), ValueRange{},
                                        ValueRange{}, ValueRange{});
        b.setInsertionPointAfter(global);
        auto copy = gpu::MemcpyOp::create(b, loc, Type(), ValueRange{},
                                          dev.getMemref(), global);
        global.getResult().replaceAllUsesExcept(dev.getMemref(), copy);
        dev->moveBefore(copy);
      }
    }

    // Nothing may touch device memory on the host.
    WalkResult res = func.walk([&](Operation *op) {
      if (op->getParentOfType<gpu::LaunchOp>() || isa<gpu::LaunchOp>(op))
        return WalkResult::skip();
      if (isa<memref::LoadOp, memref::StoreOp, vector::LoadOp, vector::StoreOp,
              vector::TransferReadOp, vector::TransferWriteOp, memref::CopyOp>(
              op) ||
          isa<linalg::LinalgOp>(op) || isa<scf::ParallelOp>(op)) {
        op->emitOpError("accesses device memory on the host");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (res.wasInterrupted())
      signalPassFailure();
  }
};

struct TfmGpuMergeModulesPass
    : mlir::tfm::impl::TfmGpuMergeModulesBase<TfmGpuMergeModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> mods(module.getOps<gpu::GPUModuleOp>());
    if (mods.size() < 2)
      return;
    std::string name = "kernels";
    for (auto f : module.getOps<func::FuncOp>())
      if (!f.isExternal())
        name = (f.getName() + "_kernels").str();
    OpBuilder b(mods.front());
    auto merged = gpu::GPUModuleOp::create(b, mods.front().getLoc(), name);
    if (ArrayAttr targets = mods.front().getTargetsAttr())
      merged.setTargetsAttr(targets);
    SymbolTable mergedTable(merged);
    // (old module, old function) -> new function name
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> map;
    // Layers repeat the same kernels: identical functions are kept once.
    llvm::StringMap<StringAttr> byText;
    for (gpu::GPUModuleOp m : mods) {
      for (auto f : llvm::make_early_inc_range(m.getOps<gpu::GPUFuncOp>())) {
        StringAttr oldMod = m.getNameAttr(), oldFn = f.getNameAttr();
        f.setName("k");
        std::string text;
        llvm::raw_string_ostream os(text);
        f->print(os, OpPrintingFlags().printGenericOpForm().useLocalScope());
        auto it = byText.find(text);
        if (it != byText.end()) {
          map[{oldMod, oldFn}] = it->second;
          continue;
        }
        f->remove();
        f.setName(m.getName());
        mergedTable.insert(f); // renames on a clash
        map[{oldMod, oldFn}] = f.getNameAttr();
        byText[text] = f.getNameAttr();
      }
    }
    StringAttr mergedName = merged.getNameAttr();
    module.walk([&](gpu::LaunchFuncOp op) {
      auto it = map.find({op.getKernelModuleName(), op.getKernelName()});
      if (it == map.end())
        return;
      op.setKernelAttr(
          SymbolRefAttr::get(mergedName, {FlatSymbolRefAttr::get(it->second)}));
    });
    for (gpu::GPUModuleOp m : mods)
      m.erase();
  }
};

} // namespace
