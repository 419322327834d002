//===- ModelDescription.h - what a model module says of itself --*- C++ -*-===//
//
// A module built from a model description carries `tfm.model`, a dictionary
// with everything the back end and the runtime need beyond the IR itself:
//
//   tfm.model = {
//     description = "{...}",      // the runtime's JSON description (schema:
//                                 // docs/Runtime.md), as the front end
//                                 // resolved it: name, dtype, inputs,
//                                 // outputs, parameters, their shards, ...
//     forward = @name,            // the entry points that exist
//     step = @name_cached,        //   (optional: a KV-cache step function)
//     encode = @name_encoder,     //   (optional: an encoder-decoder's)
//     generation = {              // with `step`: the caches' layout
//       layers = L, kv_heads = KV, head_dim = D,
//       windows = array<i64: ...>, // each layer's sliding window, 0: none
//       encoder = {kv_heads = KV, head_dim = D, d_model = M,
//                  lengths = true|false}}  // with `encode`
//   }
//
// The tfm dialect verifies it (TfmDialect::verifyOperationAttribute), the
// target and the driver read it through ModelDescription, and a hand-written
// `.mlir` module that carries it compiles to the same artifact as the `.tfm`
// file it came from.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_DIALECT_MODELDESCRIPTION_H
#define TFM_DIALECT_MODELDESCRIPTION_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::tfm {

/// The KV caches of a model with a step function, as `generation` says.
struct CacheLayout {
  int64_t layers = 0;
  int64_t kvHeads = 0;
  int64_t headDim = 0;
  /// Latent attention: one cache per layer, the latents (transposed,
  /// [B', kvHeads, headDim, S]), instead of a key and a value cache.
  bool latent = false;
  /// Layer l's sliding window (0: attends to the whole cache); its cache is
  /// a ring buffer of that many positions.
  std::vector<int64_t> windows;
  /// A paged cache (0: none): the positions of a block. The caches of the
  /// layers without a sliding window are pools of such blocks ([N, kvHeads,
  /// headDim, block] and [N, kvHeads, block, headDim]), and the step
  /// function takes a block table [B, M] (i32) after the positions and an
  /// encoder-decoder's source lengths.
  int64_t block = 0;
  /// An encoder-decoder's cross-attention caches.
  struct Encoder {
    int64_t kvHeads = 0;
    int64_t headDim = 0;
    int64_t dModel = 0;
    /// Whether the encode entry point takes the source lengths.
    bool lengths = false;
  };
  std::optional<Encoder> encoder;
};

/// The `tfm.model` attribute of a module, read and checked.
struct ModelDescription {
  /// One entry of the parameter table, in the description's order: its
  /// index is the parameter's identity after lowering.
  struct Param {
    std::string name;
    std::vector<int64_t> shape;
  };
  /// An input or output: -1 is the batch, -2 the sequence, -3 the source.
  struct Tensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
  };

  static constexpr llvm::StringLiteral kAttrName = "tfm.model";

  /// The description's fields the compiler reads.
  std::string name;
  /// The model's declared dtype ("f32", "f16", "bf16"): what its checkpoint
  /// holds, whatever the target computes in.
  std::string dtype;
  int64_t tensorParallel = 1;
  int64_t parameterCount = 0;
  std::vector<Param> params;
  std::vector<Tensor> inputs, outputs;
  /// The whole description, for the runtime.
  llvm::json::Object json;

  /// Entry-point functions ("" where the module has none).
  std::string forward, step, encode;
  /// With a step function.
  std::optional<CacheLayout> cache;

  /// The parameter named `name`'s index in `params`.
  std::optional<unsigned> indexOf(llvm::StringRef name) const;
  /// `params` by name.
  llvm::StringMap<unsigned> paramIndex;

  /// The description of `module`: nothing when it has no `tfm.model` (a
  /// hand-written function), failure (reported at the module) when the
  /// attribute is malformed.
  static FailureOr<std::optional<ModelDescription>> read(ModuleOp module);

  /// Parses `attr` (the value of `tfm.model` on `op`); malformed parts are
  /// reported through `emitError`. Does not look up the entry points.
  static FailureOr<ModelDescription>
  parse(Attribute attr, llvm::function_ref<InFlightDiagnostic()> emitError);

  /// The attribute for a module: the description's JSON text, the entry
  /// points and the cache layout.
  static DictionaryAttr build(MLIRContext *ctx, llvm::StringRef descriptionJson,
                              llvm::StringRef forward, llvm::StringRef step,
                              llvm::StringRef encode,
                              const std::optional<CacheLayout> &cache);
};

/// The dialect's check of `tfm.model` on `op`: on a module, well formed
/// (unless `checkDescription` is false: the value was checked before), its
/// entry points defined there.
LogicalResult verifyModelAttribute(Operation *op, Attribute value,
                                   bool checkDescription = true);

} // namespace mlir::tfm

#endif // TFM_DIALECT_MODELDESCRIPTION_H
