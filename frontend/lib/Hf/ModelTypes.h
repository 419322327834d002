//===- ModelTypes.h - the Hugging Face model types tfm reads ----*- C++ -*-===//
//
// ModelTypes.def as C++: the model types, the checkpoint layouts (families)
// and the tensor names of each layout. Private to the front end's Hugging
// Face code (HfImport.cpp, HfCheckpoint.cpp); the rest of the compiler sees
// the type names through HfImport.h and HfCheckpoint.h.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTEND_HF_MODELTYPES_H
#define TFM_FRONTEND_HF_MODELTYPES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>

namespace mlir::tfm::hf {

/// A checkpoint layout shared by model types (TFM_HF_FAMILY).
enum class Family : uint8_t {
#define TFM_HF_FAMILY(Id, Layer, Fused, Flags) Id,
#include "ModelTypes.def"
};

/// A model_type (TFM_HF_TYPE).
enum class ModelType : uint8_t {
#define TFM_HF_TYPE(Id, Name, Family, Prefix, PositionOffset, Import) Id,
#include "ModelTypes.def"
};

/// How a fused projection's output axis holds q, k and v.
enum class Fused : uint8_t {
  None,
  Concat,  ///< [q | k | v] (GPT-2 c_attn, Phi-3 qkv_proj)
  PerHead, ///< [heads, 3, head_dim] (GPT-NeoX, BLOOM)
  Grouped, ///< [kv_heads, heads / kv_heads + 2, head_dim] (Falcon)
};

/// What a family's checkpoints do differently from the usual nn.Linear and
/// nn.LayerNorm modules.
namespace FamilyFlag {
enum : unsigned {
  Conv1D = 1 << 0,      ///< linear weights stored [in, out] (GPT-2)
  GammaBeta = 1 << 1,   ///< norms may spell weight / bias gamma / beta
  ZeroKeyBias = 1 << 2, ///< k_proj has no bias: a key bias reads zeros
  NoHeadBias = 1 << 3,  ///< the LM head has no bias
};
} // namespace FamilyFlag

/// A tensor of the layouts (TFM_HF_TENSOR_KIND), named after the canonical
/// parameters it holds.
enum class Tensor : uint8_t {
#define TFM_HF_TENSOR_KIND(Id, WhyMissing) Id,
#include "ModelTypes.def"
};

/// Why a family that does not list `tensor` cannot provide its parameters.
llvm::StringRef whyMissing(Tensor tensor);
/// Whether `tensor` is a layer's, named under the family's layer prefix.
inline bool isLayerTensor(Tensor tensor) {
  return tensor >= Tensor::AttnNorm && tensor <= Tensor::FfnPostNorm;
}

/// A row of TFM_HF_FAMILY.
struct FamilyInfo {
  Family id;
  llvm::StringRef layer;
  Fused fused;
  unsigned flags;

  bool has(unsigned flag) const { return (flags & flag) != 0; }
  /// The names the family gives `tensor`, in order (empty when none).
  llvm::SmallVector<llvm::StringRef, 3> names(Tensor tensor) const;
  bool has(Tensor tensor) const { return !names(tensor).empty(); }
};

/// A row of TFM_HF_TYPE, less the importer (HfImport.cpp).
struct ModelTypeInfo {
  ModelType id;
  llvm::StringRef name;
  Family family;
  llvm::StringRef prefix;
  int64_t positionOffset;
};

/// Every model type, in table order.
llvm::ArrayRef<ModelTypeInfo> getModelTypes();
/// Their names: the `model_type`s tfm reads, in table order.
llvm::ArrayRef<llvm::StringRef> getModelTypeNames();
/// The type called `name`; null when tfm does not know it.
const ModelTypeInfo *lookupModelType(llvm::StringRef name);
/// Why `tfmc import` refuses the model_type `name` (TFM_HF_REFUSED); empty
/// when it is not one of those.
llvm::StringRef refusedModelType(llvm::StringRef name);
const ModelTypeInfo &getModelType(ModelType id);
const FamilyInfo &getFamily(Family id);

} // namespace mlir::tfm::hf

#endif // TFM_FRONTEND_HF_MODELTYPES_H
