//===- Parser.h - .tfm parser -----------------------------------*- C++ -*-===//

#ifndef TFM_FRONTEND_PARSER_H
#define TFM_FRONTEND_PARSER_H

#include "tfm/Frontend/AST.h"
#include "tfm/Frontend/Lexer.h"

namespace mlir::tfm {

/// Parses a whole .tfm buffer. Syntax errors are reported through `diags`;
/// the parser recovers at the next statement so that independent errors are
/// all reported. The returned AST holds whatever parsed.
FileAST parseFile(llvm::StringRef buffer, DiagEmitter &diags);

} // namespace mlir::tfm

#endif // TFM_FRONTEND_PARSER_H
