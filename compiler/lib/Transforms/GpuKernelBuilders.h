//===- GpuKernelBuilders.h - building blocks of the GPU kernels -*- C++ -*-===//
//
// Helpers shared by the GPU kernel families (flash attention, GEMM) and by
// tfm-gpu-map-loops: index arithmetic on an ImplicitLocOpBuilder, gpu.launch
// with workgroup buffers, the m16n8k16 tensor-core product and cooperative
// tile copies. The tensor-core paths use nvvm.mma.sync m16n8k16 with these
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

#ifndef TFM_LIB_TRANSFORMS_GPUKERNELBUILDERS_H
#define TFM_LIB_TRANSFORMS_GPUKERNELBUILDERS_H

#include "tfm/Dialect/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <array>
#include <cmath>

namespace mlir::tfm::kernels {

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
                     function_ref<void(gpu::LaunchOp)> body);

/// A statically shaped buffer of `elt` in workgroup (shared) memory.
MemRefType sharedType(ArrayRef<int64_t> shape, Type elt);

/// Whether `t` is f16 or bf16 (a tensor-core operand type).
bool isHalf(Type t);

/// One m16n8k16 tensor-core product: c += a * b (a: 4, b: 2 pairs of
/// f16/bf16 as vector<2xT>, c: 4 f32). Returns the 4 new f32 values.
SmallVector<Value> mma(ImplicitLocOpBuilder &b, Type elt, ArrayRef<Value> a,
                       ArrayRef<Value> bf, ArrayRef<Value> c);

/// A pair of neighbouring elements [.., col], [.., col + 1] of `m`.
Value pair(ImplicitLocOpBuilder &b, Value m, ValueRange idx);

/// Cooperative copy of a tile into shared memory: for every linear element
/// e of `count` (strided over `threads` starting at `tid`), `body(e)`.
void forEachElement(ImplicitLocOpBuilder &b, Value tid, int64_t count,
                    int64_t threads, function_ref<void(Value)> body);

//===----------------------------------------------------------------------===//
// Attention (GpuAttentionKernels.cpp)
//===----------------------------------------------------------------------===//

/// The operands, sizes and attributes of a buffer-level
/// tfm.attention_kernel, as the kernel builders read them.
struct AttentionShape {
  Value q, kt, v, lengths, out;
  /// A KV cache: each sequence's position ([B], null: none), and whether
  /// the keys are a ring buffer.
  Value positions;
  bool ring = false;
  Value bsz, heads, tq, kvHeads, tk, group, offset;
  int64_t d, dv;
  Type elt;
  MaskKind kind;
  int64_t window;
  double scale;
  /// Score modifiers (tfm.attention_kernel): softcap (0: none), ALiBi
  /// slopes per head (empty: none), the [H, 2 * biasDistance + 1] f32
  /// position bias by distance (null: none).
  double softcap = 0.0;
  SmallVector<double> slopes;
  Value bias;
  int64_t biasDistance = 0;
  /// Attention sinks [H] (null: none): each row's softmax denominator adds
  /// exp(sinks[h] - max).
  Value sinks;

  /// `sum` plus head `head`'s sink term exp(sink - m) for a row of running
  /// max `m` (natural units), or `sum` without sinks or for a row that saw
  /// no key (m = -inf).
  Value withSink(KB &k, Value sum, Value head, Value m) const {
    if (!sinks)
      return sum;
    Value e = k.exp(k.fsub(k.loadF32(sinks, ValueRange{head}), m));
    Value none = arith::CmpFOp::create(
        k.b, arith::CmpFPredicate::OEQ, m,
        arith::ConstantOp::create(k.b, k.b.getF32FloatAttr(-INFINITY)));
    return k.sel(none, sum, k.fadd(sum, e));
  }
};

/// Flash attention on tensor cores (f16/bf16, head dimensions multiples of
/// 16 / 8, at most 512): four warps of 16 query rows per block, K and V^T
/// tiles in shared memory, the online softmax in registers, P V reusing the
/// S accumulators as A fragments.
void emitAttentionMma(ImplicitLocOpBuilder &b, const AttentionShape &s);

/// f32 (or any shape) fallback: one thread per query row, K/V tiles in
/// shared memory, the online softmax updated key by key.
void emitAttentionSimt(ImplicitLocOpBuilder &b, const AttentionShape &s);

/// Attention over a KV cache (`s.positions`; `group` query heads per KV
/// head, static): split-K flash decoding. A block of 128 threads per (key
/// split, KV head, sequence x query step) stages each K/V tile in shared
/// memory once for the group's rows: scores a (row, key) pair per thread,
/// the online softmax a warp per row and a lane per key, P V an output
/// element per thread. Its partial max, sum and output go to a workspace;
/// a second kernel, a block per (head, sequence x step), merges the splits.
/// The keys are split (at least 256 per split) until there are about 256
/// blocks.
void emitAttentionDecode(ImplicitLocOpBuilder &b, const AttentionShape &s,
                         int64_t group);

//===----------------------------------------------------------------------===//
// GEMM (GpuGemmKernels.cpp)
//===----------------------------------------------------------------------===//

/// The tensor-core GEMM of a buffer-level f16/bf16 tfm.linear_kernel: 64x64
/// output tiles, K staged 32 at a time, mma.sync with f32 accumulation. The
/// weight must be packed in kGpuPanel-column panels.
void emitLinearMma(ImplicitLocOpBuilder &b, LinearKernelOp op);

/// The f32 GEMM: the same tiles, an 8x4 register block per thread.
void emitLinearSimt(ImplicitLocOpBuilder &b, LinearKernelOp op);

} // namespace mlir::tfm::kernels

#endif // TFM_LIB_TRANSFORMS_GPUKERNELBUILDERS_H
