//===- AST.h - .tfm abstract syntax tree ------------------------*- C++ -*-===//

#ifndef TFM_FRONTEND_AST_H
#define TFM_FRONTEND_AST_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/raw_ostream.h"
#include <memory>
#include <vector>

namespace mlir::tfm {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// A named call argument: `theta = 500000`.
struct CallArg {
  llvm::StringRef name;
  llvm::SMLoc loc;
  ExprPtr value;
};

/// A value expression.
struct Expr {
  enum class Kind { Integer, Decimal, Name, Call, Negate, Binary };
  Kind kind;
  llvm::SMLoc loc;
  llvm::StringRef spelling; ///< literal text or name
  int64_t intValue = 0;
  double decimalValue = 0.0;
  char op = 0;               ///< '+', '-', '*', '/' for Binary
  ExprPtr lhs, rhs;          ///< Binary operands; Negate uses lhs
  std::vector<CallArg> args; ///< Call arguments

  Expr(Kind kind, llvm::SMLoc loc) : kind(kind), loc(loc) {}
};

struct Section;

/// `key = value` or `name { ... }`.
struct Stmt {
  llvm::StringRef name;
  llvm::SMLoc loc;
  ExprPtr value;                    ///< set for assignments
  std::unique_ptr<Section> section; ///< set for sections
  bool isSection() const { return section != nullptr; }
};

struct Section {
  llvm::StringRef name;
  llvm::SMLoc loc;
  std::vector<Stmt> stmts;
};

/// `model NAME { ... }`.
struct ModelDecl {
  llvm::StringRef name;
  llvm::SMLoc loc;
  Section body;
};

struct FileAST {
  std::vector<ModelDecl> models;
};

/// Prints the AST as an indented tree (tfmc --emit=ast).
void printAST(const FileAST &file, llvm::raw_ostream &os);
/// Prints an expression in source syntax, fully parenthesised.
void printExpr(const Expr &expr, llvm::raw_ostream &os);

} // namespace mlir::tfm

#endif // TFM_FRONTEND_AST_H
