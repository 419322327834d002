//===- CpuKernelBuilders.h - building blocks of the CPU kernels -*- C++ -*-===//
//
// Helpers shared by the CPU kernel lowerings of tfm-lower-kernels (GEMM in
// LowerLinearKernel.cpp, norms in LowerNormKernel.cpp, attention in
// LowerAttention*.cpp): constants and index arithmetic on an OpBuilder,
// loops, the kernels' own scf.parallel distribution, and the packed rows
// (bf16 pairs, int8 quads) that a norm writes and a linear reads. Each
// kernel's pattern is added by its populate function, declared last.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_LIB_TRANSFORMS_CPUKERNELBUILDERS_H
#define TFM_LIB_TRANSFORMS_CPUKERNELBUILDERS_H

#include "tfm/Dialect/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::tfm::cpu {

/// The runtime function that gives the number of threads the generated
/// code runs on (tfm_set_threads, --threads).
constexpr StringLiteral kThreadsFn = "tfm_get_threads";

/// The runtime function that gives the fewest rows of A from which a GEMM
/// on ggml blocks goes through f32 panels of the weight (i64; a decode
/// step sets it past any batch, so that each of its rows is computed as it
/// is alone: runtime/src/session.c).
constexpr StringLiteral kGgmlPanelRowsFn = "tfm_ggml_panel_rows";

/// Marks `par` as the kernel's own distribution, which
/// tfm-parallelize-outer keeps parallel.
void markKeepParallel(scf::ParallelOp par);

inline Value cIdx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}
inline Value cF32(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}
inline Value dim(OpBuilder &b, Location loc, Value m, int64_t i) {
  return memref::DimOp::create(b, loc, m, i);
}

/// The indices of row `row` of `from` [..., C] whose leading dimensions
/// are the rows, split (row-major), without the column.
SmallVector<Value> rowIndices(OpBuilder &b, Location loc, Value from,
                              Value row);

/// values[idx] for a small table of constants and a dynamic index (a
/// select chain; an index past the end reads the last entry).
Value selectByIndex(OpBuilder &b, Location loc, Value idx,
                    ArrayRef<double> values);

/// `for i in [lb, ub)` with `body(i)`.
void forRange(OpBuilder &b, Location loc, Value lb, Value ub, Value step,
              function_ref<void(OpBuilder &, Location, Value)> body);

/// Builds `for c in [0, chunks)` with `body(c)`.
void forChunks(OpBuilder &b, Location loc, int64_t chunks,
               function_ref<void(OpBuilder &, Location, Value)> body);

/// How a row of a matmul's A is stored for the weights' kind: f32 as is,
/// bf16 pairs (bf16 weights) or int8 quads (int8 weights).
using Packing = NormKernelOp::Packing;

/// The packing of an A buffer or a norm's output, as its element type says:
/// bf16 [M, 2 ceil(K / 2)] is in bf16 pairs, i8 [M, 4 ceil(K / 4) + 4] in
/// int8 quads, f32 not packed (the rows of A of tfm/packed_layout.h).
Packing packingOf(Value buf);

/// Gives the values of one row at columns [col, col + 16) as a vector, 0 in
/// the lanes `mask` leaves out (`mask` null: all 16 inside).
using RowChunk =
    function_ref<Value(OpBuilder &, Location, Value col, Value mask)>;

/// Stores row `row` of `k` values, given by `chunk`, in `out` ([..., C], the
/// row's indices split from `row` as rowIndices does) packed as its
/// element type says (packingOf): f32 as is; bf16 rounded to nearest even
/// (vcvtneps2bf16), a zero past an odd K: pair j holds columns 2j and
/// 2j + 1, low half first, the order in which vdpbf16ps multiplies a
/// weight's pair; i8 quantized (scale max |x| / 127, 0 for a zero row) to
/// round(x / scale) + 128 (1..255, 128 past K), four to a quad in the
/// operand order of vpdpbusd, then the scale's bytes: the rows of A of
/// tfm/packed_layout.h. 16 columns a vector.
void storePackedRow(OpBuilder &b, Location loc, RowChunk chunk, int64_t k,
                    Value out, Value row);

/// The kernels' patterns (populateLowerKernelPatterns adds them all):
/// `vectorWidth` f32 lanes per vector register.
/// tfm.linear_kernel (LowerLinearKernel.cpp).
void populateLowerLinearKernelPattern(RewritePatternSet &patterns,
                                      int64_t vectorWidth);
/// tfm.ggml_linear_kernel and tfm.ggml_embed_kernel
/// (LowerGgmlLinearKernel.cpp): calls of tfm_ggml_gemm, which
/// defineGgmlGemm adds to the module first.
void populateLowerGgmlLinearKernelPattern(RewritePatternSet &patterns,
                                          int64_t vectorWidth);
void defineGgmlGemm(ModuleOp module, int64_t vectorWidth, bool int8Dot);
/// tfm.ggml_embed_kernel (LowerGgmlLinearKernel.cpp): calls of
/// tfm_ggml_row, which defineGgmlRow adds to the module first.
void defineGgmlRow(ModuleOp module, int64_t vectorWidth);
/// tfm.attention_kernel (LowerAttentionKernel.cpp).
void populateLowerAttentionKernelPattern(RewritePatternSet &patterns,
                                         int64_t vectorWidth);
/// tfm.norm_kernel (LowerNormKernel.cpp), 16 lanes whatever the width.
void populateLowerNormKernelPattern(RewritePatternSet &patterns);
/// tfm.moe_kernel (LowerMoeKernel.cpp): linear kernels on the experts.
void populateLowerMoeKernelPattern(RewritePatternSet &patterns);

} // namespace mlir::tfm::cpu

#endif // TFM_LIB_TRANSFORMS_CPUKERNELBUILDERS_H
