//===- GgufCheckpoint.h - llama.cpp's GGUF tensor layouts -------*- C++ -*-===//
//
// A model with `checkpoint = gguf(arch = A)` reads the tensors of a GGUF
// file written for llama.cpp's architecture A as they lie: this maps each
// entry of the parameter table (canonical names) to its GGUF tensor
// (`blk.0.attn_q.weight`, ...) and how the canonical tensor is read out of
// it, as an HfSource (the description's "source" object) with `base` false.
// A source's `shape` is the stored tensor's shape in row-major order, the
// reverse of ggml's `ne` (`token_embd.weight` with ne = [d_model, vocab] is
// [vocab, d_model]). The architectures are frontend/lib/Gguf/GgufArchs.def.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTEND_GGUFCHECKPOINT_H
#define TFM_FRONTEND_GGUFCHECKPOINT_H

#include "tfm/Frontend/HfCheckpoint.h"

namespace mlir::tfm {

/// The architectures `checkpoint = gguf(arch = A)` may name, in order.
llvm::ArrayRef<llvm::StringRef> ggufCheckpointArchs();
bool isGgufCheckpointArch(llvm::StringRef arch);

/// The source of `p` in the GGUF layout of `spec.ggufArch`; nullopt when
/// the model's checkpoint is not GGUF.
std::optional<HfSource> getGgufSource(const ModelSpec &spec,
                                      const ParamSpec &p);

/// Why the model cannot read a GGUF file of its architecture, one line
/// each: a parameter the layout has no tensor for, and settings that would
/// compute something else than llama.cpp does on the same tensors (a RoPE
/// style other than the architecture's, Gemma's norm offset added twice).
std::vector<std::string> ggufCheckpointProblems(const ModelSpec &spec);

/// The model-level "checkpoint" object: {"format": "gguf", "arch": A,
/// "prefixes": [], "ignore": []}.
llvm::json::Value ggufCheckpointJSON(const ModelSpec &spec);

} // namespace mlir::tfm

#endif // TFM_FRONTEND_GGUFCHECKPOINT_H
