//===- AST.cpp - .tfm AST printing ----------------------------------------===//

#include "tfm/Frontend/AST.h"

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::printExpr(const Expr &e, llvm::raw_ostream &os) {
  switch (e.kind) {
  case Expr::Kind::Integer:
  case Expr::Kind::Decimal:
  case Expr::Kind::Name:
    os << e.spelling;
    return;
  case Expr::Kind::Negate:
    os << "(-";
    printExpr(*e.lhs, os);
    os << ")";
    return;
  case Expr::Kind::Binary:
    os << "(";
    printExpr(*e.lhs, os);
    os << " " << e.op << " ";
    printExpr(*e.rhs, os);
    os << ")";
    return;
  case Expr::Kind::Call:
    os << e.spelling << "(";
    for (size_t i = 0; i < e.args.size(); ++i) {
      if (i)
        os << ", ";
      os << e.args[i].name << " = ";
      printExpr(*e.args[i].value, os);
    }
    os << ")";
    return;
  }
}

static void printSection(const Section &s, unsigned indent,
                         llvm::raw_ostream &os) {
  for (const Stmt &stmt : s.stmts) {
    os.indent(indent);
    if (stmt.isSection()) {
      os << "section " << stmt.name << "\n";
      printSection(*stmt.section, indent + 2, os);
    } else {
      os << "key " << stmt.name << " = ";
      printExpr(*stmt.value, os);
      os << "\n";
    }
  }
}

void mlir::tfm::printAST(const FileAST &file, llvm::raw_ostream &os) {
  for (const ModelDecl &m : file.models) {
    os << "model " << m.name << "\n";
    printSection(m.body, 2, os);
  }
}
