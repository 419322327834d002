//===- MLIRGen.h - ModelSpec to tfm dialect ---------------------*- C++ -*-===//

#ifndef TFM_FRONTEND_MLIRGEN_H
#define TFM_FRONTEND_MLIRGEN_H

#include "tfm/Frontend/ModelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir::tfm {

/// What buildModule builds besides the model function.
struct ModuleOptions {
  /// The KV-cache entry points below (`<name>_cached`, `<name>_encoder`).
  /// The CPU has them; CUDA not yet (its attention over a cache is not
  /// lowered).
  bool cacheEntryPoints = true;
  /// A decoder's forward function computes its self-attention through fresh
  /// caches at position 0, so that its layers are the same ops as the step
  /// function's and tfm-outline-layers compiles one layer function for both
  /// (half the code of a decoder). Its attention is then a tfm.attention
  /// from tfm-decompose on, never the textbook primitives.
  bool forwardThroughCaches = true;
  /// The element type the IR computes in (default: the model's dtype). The
  /// description keeps the model's dtype, which its checkpoint holds.
  std::optional<DType> computeType;
  /// The element type of the self-attention KV caches (the step function's
  /// and the forward function's fresh ones; default: the compute type):
  /// keys and values are rounded to it as they are written.
  /// Cross-attention caches keep the compute type.
  std::optional<DType> cacheType;
  /// Positions per block of a paged KV cache (0: contiguous caches). The
  /// self-attention caches without a sliding window are then pools of
  /// blocks that a block table maps each sequence's positions to: the step
  /// function takes the table, and the forward function's fresh caches
  /// give each sequence its own blocks.
  int64_t kvBlock = 0;
};

/// Builds the model-level tfm IR of `spec`: a module that describes itself
/// (`tfm.model`, see tfm/Dialect/ModelDescription.h) with one func.func
/// named after the model, taking the inputs of `ModelSpec::inputs()` with
/// dynamic batch and sequence dimensions and returning the output; parameters
/// are tfm.param ops under their canonical names. Each op carries the location
/// of the statement it comes from (the SourceLocs of `spec`), and each op of a
/// layer the name "<prefix>layers.<i>" around it; `loc` is the model's source
/// location, for the module, the function and statements without one.
OwningOpRef<ModuleOp> buildModule(MLIRContext &context, const ModelSpec &spec,
                                  Location loc, const ModuleOptions &options);

inline OwningOpRef<ModuleOp> buildModule(MLIRContext &context,
                                         const ModelSpec &spec, Location loc) {
  return buildModule(context, spec, loc, ModuleOptions());
}

/// Whether buildModule also builds `<name>_cached`, the forward pass over a
/// KV cache used for generation: (tokens [B, T], positions [B], then per
/// layer the key cache [B', KV, head_dim, S] and the value cache
/// [B', KV, S, head_dim]) -> (the last row's logits [B, 1, vocab], the
/// updated caches, each marked `tfm.cache_of` = its argument). Sequence b's
/// T new tokens are at positions[b]..; B' >= B. Decoders and
/// encoder-decoders with token input and an LM head have it. An
/// encoder-decoder's also takes the source lengths [B] after the positions
/// and, after the caches, each decoder layer's cross-attention key and value
/// caches (read only), written by `<name>_encoder`.
bool hasStepFunction(const ModelSpec &spec);

/// Whether buildModule also builds `<name>_encoder` (encoder-decoders with
/// a step function): (src [B, S], the source lengths [B] when the encoder
/// pads, then per decoder layer the cross-attention key cache
/// [B', KV, head_dim, S'] and value cache [B', KV, S', head_dim]) -> (the
/// encoder's output [B, S, d_model], the caches with the source's keys and
/// values written at positions 0..S-1, each marked `tfm.cache_of`).
bool hasEncoderFunction(const ModelSpec &spec);

} // namespace mlir::tfm

#endif // TFM_FRONTEND_MLIRGEN_H
