//===- Eval.h - .tfm scopes and expression evaluation -----------*- C++ -*-===//
//
// Each section of the source becomes a scope of bindings (key -> expression)
// whose parent is the enclosing section. Expressions (integer arithmetic
// with `+ - * /`, unary minus, decimals, names of keys set in the same or an
// enclosing scope) are evaluated lazily in the scope that uses them, so an
// expression in a shared section sees a stack's overrides, and cycles of
// keys are detected.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTEND_EVAL_H
#define TFM_FRONTEND_EVAL_H

#include "tfm/Frontend/AST.h"
#include "tfm/Frontend/Diagnostics.h"
#include "tfm/Frontend/Keys.h"

#include "llvm/ADT/MapVector.h"
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir::tfm {

/// The value of an expression: an integer or a decimal.
struct Num {
  bool isInt = true;
  int64_t i = 0;
  double d = 0.0;
  double asDouble() const { return isInt ? static_cast<double>(i) : d; }
};

/// A number as messages show it: `8`, `2.5`.
std::string formatNum(const Num &v);

struct Scope;

/// A key set in a scope, evaluated at most once.
struct Binding {
  const Stmt *stmt = nullptr;
  Scope *scope = nullptr; ///< where the expression is evaluated
  enum State { Fresh, Busy, Done, Failed } state = Fresh;
  Num value;
};

struct Scope {
  std::string name; ///< for messages: "attention", "decoder.attention"
  SectionId section = SectionId::Model; ///< whose keys it holds
  llvm::SMLoc loc;
  Scope *parent = nullptr;
  llvm::MapVector<llvm::StringRef, Binding> keys;
  llvm::MapVector<llvm::StringRef, const Section *> sections;

  /// The binding of `key` here or in an enclosing scope.
  Binding *lookup(llvm::StringRef key);
  /// The binding of `key` in this scope only.
  Binding *local(llvm::StringRef key);
  Binding *local(KeyId key) { return local(stringifyKey(key)); }
  /// The location of the statement that sets `key` (of the scope if none).
  llvm::SMLoc keyLoc(KeyId key);
  /// The location of the expression of `key` (for value errors).
  llvm::SMLoc valueLoc(KeyId key);
};

/// Owns the scopes of a model and evaluates their expressions; errors go
/// through `diags`.
class Evaluator {
public:
  explicit Evaluator(DiagEmitter &diags) : diags(diags) {}

  /// A new empty scope.
  Scope *newScope(llvm::StringRef name, SectionId section, llvm::SMLoc loc,
                  Scope *parent);
  /// A new scope holding the bindings of `layers` in order, later ones
  /// overriding earlier ones (null layers are skipped), and only the keys
  /// `section` accepts; expressions are evaluated in the new scope.
  Scope *merged(llvm::StringRef name, SectionId section, llvm::SMLoc loc,
                Scope *parent, llvm::ArrayRef<Scope *> layers);

  /// Evaluates `e` in `scope`.
  std::optional<Num> eval(const Expr &e, Scope &scope);
  /// Evaluates the expression of `b` (once); `refLoc` is where it is used.
  std::optional<Num> evalBinding(Binding &b, llvm::SMLoc refLoc);
  /// Whether `e` can be evaluated as a number: not a call, and not a name
  /// that is no key in scope (an enum word such as `causal`).
  static bool isNumeric(const Expr &e, Scope &scope);

private:
  DiagEmitter &diags;
  std::vector<std::unique_ptr<Scope>> scopes;
};

} // namespace mlir::tfm

#endif // TFM_FRONTEND_EVAL_H
