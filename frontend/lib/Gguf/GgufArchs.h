//===- GgufArchs.h - the table of GGUF architectures ------------*- C++ -*-===//
//
// The rows of GgufArchs.def as data, for the layout (GgufCheckpoint.cpp)
// and the importer (GgufImport.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTEND_GGUF_GGUFARCHS_H
#define TFM_FRONTEND_GGUF_GGUFARCHS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::tfm::gguf {

enum class ArchId {
#define TFM_GGUF_ARCH(Id, Name, Rope, Flags) Id,
#include "GgufArchs.def"
};

/// The pairs llama.cpp's RoPE rotates for an architecture.
enum class Rope { Norm, Neox, None };

namespace GgufFlag {
enum : unsigned {
  FusedQkv = 1u << 0,
  FusedGateUp = 1u << 1,
  NormPlusOne = 1u << 2,
};
} // namespace GgufFlag

struct ArchInfo {
  ArchId id;
  llvm::StringRef name;
  Rope rope;
  unsigned flags;
  bool has(unsigned flag) const { return (flags & flag) != 0; }
};

llvm::ArrayRef<ArchInfo> getArchs();
/// The row of `name`, or null.
const ArchInfo *lookupArch(llvm::StringRef name);
/// "llama, qwen2, ..." for messages.
std::string archList();

} // namespace mlir::tfm::gguf

#endif // TFM_FRONTEND_GGUF_GGUFARCHS_H
