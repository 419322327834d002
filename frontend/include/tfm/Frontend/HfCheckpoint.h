//===- HfCheckpoint.h - Hugging Face checkpoint layouts ---------*- C++ -*-===//
//
// A model with `checkpoint = huggingface(type = T)` reads the safetensors
// Hugging Face publishes for model_type T as they are. This maps each entry
// of the parameter table (canonical names) to its source in such a
// checkpoint: the tensor's name under the base model (the runtime accepts it
// with or without the base-model prefix, `transformer.`, `model.`, ..., as
// `from_pretrained` does) and how the canonical tensor is read out of it
// (copied, transposed, a row range of a fused tensor, a row offset; for the
// stacked experts of a mixture of experts, each expert's slice read so from
// a tensor of its own or from one tensor that stacks them all, which may be
// stored in MXFP4; linear weights that may be stored in FP8 with block
// scales, when the checkpoint's config says so). The
// mapping is embedded in the artifact's description; the runtime applies it
// while converting the weights, so no converted copy is ever written. The
// types and the tensor names of their layouts are the table
// frontend/lib/Hf/ModelTypes.def.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTEND_HFCHECKPOINT_H
#define TFM_FRONTEND_HFCHECKPOINT_H

#include "tfm/Frontend/ModelSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::tfm {

/// The model_type values a `checkpoint = huggingface(type = T)` may name
/// (the rows of ModelTypes.def, in order).
llvm::ArrayRef<llvm::StringRef> hfCheckpointTypes();
bool isHfCheckpointType(llvm::StringRef type);

/// The blocks of a weight stored in FP8 with block scales: one scale per
/// `rows` x `cols` block of each stored matrix (quantization_config's
/// weight_block_size).
struct HfFp8Block {
  int64_t rows = 0, cols = 0;
};

/// What a checkpoint's config.json says about how its tensors are stored,
/// beyond the layout of its model type: its quantization_config.
struct HfCheckpointOptions {
  /// quant_method "fp8" with weight_block_size [rows, cols] (DeepSeek-V3
  /// and R1, Kimi K2): the linear weights of attention and of the
  /// feed-forward networks (dense, shared expert, experts) may be stored in
  /// F8_E4M3 with block scales, and their sources say so (`fp8Block`).
  /// Routers, norms, embeddings, biases and the LM head are read as stored.
  std::optional<HfFp8Block> fp8Block;
};

/// A piece of a tensor stored in pieces (HfSource::parts): `shape` [G, n,
/// C], or with `transpose` [G, C, n] (each of the G matrices transposed).
struct HfSourcePart {
  std::string name;
  std::vector<int64_t> shape;
  bool transpose = false;
};

/// Where one canonical parameter comes from in a Hugging Face checkpoint.
struct HfSource {
  enum class Kind {
    Copy,          ///< the tensor as stored (`shape`), same elements in order
    Transpose,     ///< a 2-D [in, out] tensor (GPT-2 Conv1D): canonical = S^T
    Rows,          ///< rows of S (its first axis) picked by the row map
    TransposeRows, ///< rows of S^T picked by the row map (fused Conv1D)
    Zeros,         ///< no tensor: the parameter is zero (an absent bias)
    Unmapped,      ///< the layout has no tensor for it; `why` says so
  };
  Kind kind = Kind::Copy;
  /// Names to try, in order (alternative spellings such as LayerNorm's
  /// `gamma`/`beta`), relative to the base model when `base`.
  std::vector<std::string> names;
  /// Whether the names live under the base model (and may carry its prefix);
  /// heads outside it (`lm_head.weight`) are never prefixed.
  bool base = true;
  /// The shape of the stored tensor. With `atLeast`, the row axis (the first
  /// for Rows, the second for TransposeRows) may be longer.
  std::vector<int64_t> shape;
  bool atLeast = false;
  /// Row map of Rows / TransposeRows: canonical row r reads source row
  /// offset + (r / block) * stride + r % block.
  int64_t offset = 0, block = 0, stride = 0;
  std::string why; ///< Unmapped only
  /// A stacked parameter [experts, N, ...] of a mixture of experts
  /// (`experts` > 0): `kind` and the row map say how each expert's slice
  /// [N, ...] is read, rows counted within the expert. With `perExpert`,
  /// expert e is a tensor of its own of `shape`, named by `names` with `{e}`
  /// replaced by e (Mixtral's `experts.{e}.w1`); otherwise one tensor of
  /// `shape` [experts, ...] holds them all, expert e at [e] (GraniteMoE's
  /// `input_linear`).
  int64_t experts = 0;
  bool perExpert = false;
  /// The tensor may also be stored in MXFP4, as transformers' Mxfp4
  /// quantizer stores gpt-oss's experts: `<name>_blocks` (U8 [E, N, G, 16],
  /// two e2m1 values a byte, low nibble first) and `<name>_scales` (U8 [E,
  /// N, G], one e8m0 exponent per block of 32), which the runtime reads as
  /// the tensor [E, 32 G, N] that transformers' dequantizer
  /// (convert_moe_packed_tensors) makes of them, then as `kind` says.
  bool mxfp4 = false;
  /// The tensor may also be stored in FP8 with block scales, as DeepSeek-V3
  /// publishes its linear weights: an F8_E4M3 `<name>` [N, K] (or a stack
  /// [E, N, K]) and beside it `<name>_scale_inv` (F32 or BF16) [ceil(N /
  /// rows), ceil(K / cols)] (or [E, ...]); the runtime reads element (n, k)
  /// as fp8(n, k) * scale_inv[n / rows][k / cols], then as `kind` says. A
  /// tensor stored in another dtype is read as it is.
  std::optional<HfFp8Block> fp8Block;
  /// The tensor, a matrix [G * (n_0 + n_1 + ...), C], may also be stored in
  /// pieces (llama.cpp's attn_k_b and attn_v_b, which newer converters
  /// write for DeepSeek's kv_b): when the checkpoint has no tensor of
  /// `names`, the runtime reads row g * (n_0 + ...) + o_p + j (o_p = n_0 +
  /// ... + n_{p-1}) as row j of part p's matrix g (its column j when
  /// transposed), dequantized to f32, then as `kind` says.
  std::vector<HfSourcePart> parts;
};

/// The source of `p` in the checkpoint layout of `spec.hfType`, stored as
/// `options` say; nullopt for a canonical checkpoint (no `hfType`).
std::optional<HfSource> getHfSource(const ModelSpec &spec, const ParamSpec &p,
                                    const HfCheckpointOptions &options = {});

/// One line per parameter the layout cannot provide ("model type gpt2 has
/// no tensor for 'layers.0.ffn.gate.weight': ..."), and an unknown type.
std::vector<std::string> hfCheckpointProblems(const ModelSpec &spec);

/// The "source" object of a parameter in the JSON description; nullopt for
/// canonical checkpoints.
std::optional<llvm::json::Value>
hfSourceJSON(const ModelSpec &spec, const ParamSpec &p,
             const HfCheckpointOptions &options = {});

/// The model-level "checkpoint" object of the JSON description: the format,
/// and for Hugging Face the type, the base-model prefixes the runtime tries
/// and the patterns of checkpoint tensors that are not parameters (buffers,
/// tied copies, parts of the model tfm does not run) and are ignored.
llvm::json::Value hfCheckpointJSON(const ModelSpec &spec);

} // namespace mlir::tfm

#endif // TFM_FRONTEND_HFCHECKPOINT_H
