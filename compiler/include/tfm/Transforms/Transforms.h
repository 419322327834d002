//===- Transforms.h - tfm rewrite patterns ----------------------*- C++ -*-===//
//
// The pattern sets behind the tfm passes, for use in other drivers and
// pipelines. Each pass in Passes.td only sets up the driver (or the
// ConversionTarget) around one of these.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TRANSFORMS_TRANSFORMS_H
#define TFM_TRANSFORMS_TRANSFORMS_H

#include <cstdint>

namespace mlir {
class Operation;
class RewritePatternSet;
} // namespace mlir

namespace mlir::tfm {

/// Model-level attention and FFN to primitive ops (tfm-decompose).
void populateDecomposePatterns(RewritePatternSet &patterns);

/// softmax(Q K^T s + M) V spellings to tfm.attention (tfm-fuse-attention).
void populateFuseAttentionPatterns(RewritePatternSet &patterns);
/// tfm-fuse-epilogues: activations, products and residual adds into the
/// tfm.linear that produces them.
void populateFuseEpiloguesPatterns(RewritePatternSet &patterns);

/// Buffer-level kernel ops to vector loop nests (tfm-lower-kernels):
/// `vectorWidth` f32 lanes per vector register. The attention decode kernel
/// declares the runtime's `tfm_get_threads` in the enclosing module, so the
/// patterns must run on a module, not on its functions in parallel.
void populateLowerKernelPatterns(RewritePatternSet &patterns,
                                 int64_t vectorWidth);

/// Whether `op` is a memref.copy that tfm-lower-kernels makes an element
/// loop nest: one side a view (not of the identity layout). A copy between
/// whole buffers becomes a memcpy and is left alone.
bool isStridedCopy(Operation *op);

/// Buffer-level tensor-parallel ops (tfm.all_reduce_kernel,
/// tfm.all_gather_kernel, tfm.tp_rank) to calls of the runtime's MPI
/// functions, declared in the enclosing module (tfm-lower-kernels).
void populateLowerCollectivePatterns(RewritePatternSet &patterns);

/// Buffer-level kernel ops to gpu.launch kernels, memref.copy to
/// linalg.copy (tfm-gpu-lower-kernels).
void populateGpuLowerKernelPatterns(RewritePatternSet &patterns);

/// exp, tanh and erf to vectorizable polynomials (tfm-expand-math).
void populateExpandMathPatterns(RewritePatternSet &patterns);

/// memref.expand_shape of contiguous buffers to memref.reinterpret_cast,
/// alloca-free memref.alloca_scope inlined (tfm-expand-shape-to-cast).
void populateExpandShapeToCastPatterns(RewritePatternSet &patterns);

} // namespace mlir::tfm

#endif // TFM_TRANSFORMS_TRANSFORMS_H
