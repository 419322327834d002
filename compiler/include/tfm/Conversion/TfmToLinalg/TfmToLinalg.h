//===- TfmToLinalg.h - tfm ops to linalg on tensors -------------*- C++ -*-===//
//
// Patterns lowering primitive and fused tfm ops on tensors to linalg, tensor
// and the destination-style kernel ops (tfm.linear_kernel,
// tfm.attention_kernel, tfm.norm_kernel), split like upstream's TosaToLinalg:
// elementwise ops and reductions, data movement, and the compute-heavy ops.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOLINALG_TFMTOLINALG_H
#define TFM_CONVERSION_TFMTOLINALG_TFMTOLINALG_H

namespace mlir {
class ConversionTarget;
class RewritePatternSet;
} // namespace mlir

namespace mlir::tfm {

/// Arithmetic, activations, positions, RoPE, masks, norms, softmax, pooling.
void populateTfmElementwiseToLinalgPatterns(RewritePatternSet &patterns);

/// Embeddings, transposes, head reshapes, repeated K/V heads, prepended
/// tokens, unpacked weights.
void populateTfmDataMovementToLinalgPatterns(RewritePatternSet &patterns);

/// tfm.linear / tfm.patch_embed / tfm.attention to kernel ops, tfm.matmul
/// to a linalg contraction.
/// Weights that do not come packed from tfm-model-abi are packed in the IR,
/// in panels of `panelWidth` columns (the target's GEMM's).
void populateTfmKernelOpsToLinalgPatterns(RewritePatternSet &patterns,
                                          int64_t panelWidth = 32);

/// tfm.attention with a transposed value ([B, KV, Dv, S], latent
/// attention's cache rows) to a kernel op that reads it as it is (the CPU
/// kernels), preferred to the default pattern's transposed copy.
void populateTfmTransposedValueAttentionPatterns(RewritePatternSet &patterns);

/// tfm.route and tfm.row_scale to linalg, tfm.moe_experts to tfm.moe_kernel.
void populateTfmMoeToLinalgPatterns(RewritePatternSet &patterns,
                                    int64_t panelWidth = 32);

/// tfm.norm (f32, rank >= 2) to tfm.norm_kernel over its rows, preferred
/// to the linalg form of the elementwise patterns (CPU: one pass a row).
void populateTfmNormToKernelPatterns(RewritePatternSet &patterns);

/// A tfm.norm_kernel whose rows only linears with weights in bf16 pairs or
/// int8 quads read writes them packed for those weights, once for all of
/// them (run after the conversion, with the reshapes between folded).
void populateTfmPackNormForLinearsPatterns(RewritePatternSet &patterns);

/// All of the above but the norm kernels.
void populateTfmToLinalgConversionPatterns(RewritePatternSet &patterns,
                                           int64_t panelWidth = 32);

/// Marks the tfm dialect illegal except the kernel ops (lowered later, on
/// buffers) and the tfm.unpack_weight ops that only those kernels read, and
/// the dialects the patterns produce legal.
void populateTfmToLinalgConversionTarget(ConversionTarget &target);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOLINALG_TFMTOLINALG_H
