//===- ModelTypes.cpp - the Hugging Face model types tfm reads ------------===//
//
// The tables of ModelTypes.def.
//
//===----------------------------------------------------------------------===//

#include "ModelTypes.h"

#include "llvm/ADT/STLExtras.h"

#include <vector>

using namespace mlir::tfm::hf;
using llvm::StringRef;

namespace {

using namespace FamilyFlag;

const FamilyInfo kFamilies[] = {
#define TFM_HF_FAMILY(Id, Layer, FusedAs, Flags)                               \
  {Family::Id, Layer, Fused::FusedAs, Flags},
#include "ModelTypes.def"
};

struct TensorName {
  Family family;
  Tensor tensor;
  StringRef pattern;
};

const TensorName kTensorNames[] = {
#define TFM_HF_TENSOR(Fam, Name, Pattern) {Family::Fam, Tensor::Name, Pattern},
#include "ModelTypes.def"
};

const ModelTypeInfo kModelTypes[] = {
#define TFM_HF_TYPE(Id, Name, Fam, Prefix, PositionOffset, Import)             \
  {ModelType::Id, Name, Family::Fam, Prefix, PositionOffset},
#include "ModelTypes.def"
};

const StringRef kModelTypeNames[] = {
#define TFM_HF_TYPE(Id, Name, Fam, Prefix, PositionOffset, Import) Name,
#include "ModelTypes.def"
};

} // namespace

llvm::SmallVector<StringRef, 3> FamilyInfo::names(Tensor tensor) const {
  llvm::SmallVector<StringRef, 3> out;
  for (const TensorName &t : kTensorNames)
    if (t.family == id && t.tensor == tensor)
      out.push_back(t.pattern);
  return out;
}

llvm::ArrayRef<ModelTypeInfo> mlir::tfm::hf::getModelTypes() {
  return kModelTypes;
}

llvm::ArrayRef<StringRef> mlir::tfm::hf::getModelTypeNames() {
  return kModelTypeNames;
}

StringRef mlir::tfm::hf::whyMissing(Tensor tensor) {
  static const StringRef why[] = {
#define TFM_HF_TENSOR_KIND(Id, WhyMissing) WhyMissing,
#include "ModelTypes.def"
  };
  return why[static_cast<unsigned>(tensor)];
}

const ModelTypeInfo *mlir::tfm::hf::lookupModelType(StringRef name) {
  for (const ModelTypeInfo &t : kModelTypes)
    if (t.name == name)
      return &t;
  return nullptr;
}

StringRef mlir::tfm::hf::refusedModelType(StringRef name) {
  // A vector: the table may be empty.
  static const std::vector<std::pair<StringRef, StringRef>> refused = {
#define TFM_HF_REFUSED(Name, Why) {Name, Why},
#include "ModelTypes.def"
  };
  for (const auto &[type, why] : refused)
    if (type == name)
      return why;
  return "";
}

const ModelTypeInfo &mlir::tfm::hf::getModelType(ModelType id) {
  return kModelTypes[static_cast<unsigned>(id)];
}

const FamilyInfo &mlir::tfm::hf::getFamily(Family id) {
  return kFamilies[static_cast<unsigned>(id)];
}
