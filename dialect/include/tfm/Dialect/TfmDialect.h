//===- TfmDialect.h - tfm dialect ------------------------------*- C++ -*-===//

#ifndef TFM_DIALECT_TFMDIALECT_H
#define TFM_DIALECT_TFMDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"

#include <mutex>

#include "tfm/Dialect/TfmOpsDialect.h.inc"

#include <optional>

namespace mlir::tfm {

/// How deeply `(`, `[`, `{` and `<` may nest in textual IR that tfm tools
/// parse: MLIR's parser recurses once per level and has no limit of its own
/// (tens of thousands of `(` overflow the stack).
constexpr size_t kMaxIRNesting = 512;

/// The offset in `text` of the first bracket nested deeper than
/// kMaxIRNesting, skipping string literals and `//` comments; nothing when
/// the text stays within the limit.
std::optional<size_t> findExcessiveNesting(llvm::StringRef text);

} // namespace mlir::tfm

#endif // TFM_DIALECT_TFMDIALECT_H
