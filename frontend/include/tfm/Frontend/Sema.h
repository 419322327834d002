//===- Sema.h - .tfm semantic analysis --------------------------*- C++ -*-===//

#ifndef TFM_FRONTEND_SEMA_H
#define TFM_FRONTEND_SEMA_H

#include "tfm/Frontend/AST.h"
#include "tfm/Frontend/Diagnostics.h"
#include "tfm/Frontend/ModelSpec.h"

namespace mlir::tfm {

/// Resolves every model of `file`: defaults, expressions and rules of the
/// language. Errors go through `diags`; returns one spec per model that
/// resolved without error.
std::vector<ModelSpec> analyzeFile(const FileAST &file, DiagEmitter &diags);

/// Picks the model named `name` (or the only one when `name` is empty) from
/// `file`; reports an error naming the choices otherwise.
const ModelDecl *selectModel(const FileAST &file, llvm::StringRef name,
                             DiagEmitter &diags);

/// Resolves one model.
std::optional<ModelSpec> analyzeModel(const ModelDecl &model,
                                      DiagEmitter &diags);

} // namespace mlir::tfm

#endif // TFM_FRONTEND_SEMA_H
