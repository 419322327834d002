//===- Eval.cpp - .tfm scopes and expression evaluation -------------------===//
//
// Names resolve to the nearest enclosing scope that sets them; a binding is
// evaluated once, on first use, and a use while it is being evaluated is a
// cycle. Integer arithmetic is checked for overflow and inexact division;
// decimal arithmetic for results that are not finite.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/Eval.h"

#include "llvm/Support/FormatVariadic.h"
#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using llvm::SMLoc;
using llvm::StringRef;

std::string mlir::tfm::formatNum(const Num &v) {
  if (v.isInt)
    return std::to_string(v.i);
  return llvm::formatv("{0}", v.d).str();
}

//===----------------------------------------------------------------------===//
// Scopes
//===----------------------------------------------------------------------===//

Binding *Scope::lookup(StringRef key) {
  for (Scope *s = this; s; s = s->parent) {
    auto it = s->keys.find(key);
    if (it != s->keys.end())
      return &it->second;
  }
  return nullptr;
}

Binding *Scope::local(StringRef key) {
  auto it = keys.find(key);
  return it == keys.end() ? nullptr : &it->second;
}

SMLoc Scope::keyLoc(KeyId key) {
  Binding *b = local(key);
  return b ? b->stmt->loc : loc;
}

SMLoc Scope::valueLoc(KeyId key) {
  Binding *b = local(key);
  return b ? b->stmt->value->loc : loc;
}

Scope *Evaluator::newScope(StringRef name, SectionId section, SMLoc loc,
                           Scope *parent) {
  scopes.push_back(std::make_unique<Scope>());
  Scope *s = scopes.back().get();
  s->name = name.str();
  s->section = section;
  s->loc = loc;
  s->parent = parent;
  return s;
}

Scope *Evaluator::merged(StringRef name, SectionId section, SMLoc loc,
                         Scope *parent, llvm::ArrayRef<Scope *> layers) {
  Scope *s = newScope(name, section, loc, parent);
  for (Scope *layer : layers) {
    if (!layer)
      continue;
    for (auto &[key, b] : layer->keys) {
      // cross_attention takes the keys of attention it accepts.
      if (!findKeySchema(section, key))
        continue;
      Binding copy;
      copy.stmt = b.stmt;
      copy.scope = s;
      s->keys[key] = copy;
    }
    if (layer->loc.isValid())
      s->loc = layer->loc;
  }
  return s;
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

bool Evaluator::isNumeric(const Expr &e, Scope &scope) {
  if (e.kind == Expr::Kind::Call)
    return false;
  if (e.kind == Expr::Kind::Name)
    return scope.lookup(e.spelling) != nullptr;
  return true;
}

std::optional<Num> Evaluator::evalBinding(Binding &b, SMLoc refLoc) {
  switch (b.state) {
  case Binding::Done:
    return b.value;
  case Binding::Failed:
    return std::nullopt;
  case Binding::Busy:
    diags.error(refLoc,
                "'" + b.stmt->name + "' depends on itself (a cycle of keys)");
    return std::nullopt;
  case Binding::Fresh:
    break;
  }
  if (!isNumeric(*b.stmt->value, *b.scope)) {
    diags.error(refLoc, "'" + b.stmt->name +
                            "' is not a number and "
                            "cannot be used in an expression");
    return std::nullopt;
  }
  b.state = Binding::Busy;
  std::optional<Num> v = eval(*b.stmt->value, *b.scope);
  b.state = v ? Binding::Done : Binding::Failed;
  if (v)
    b.value = *v;
  return v;
}

std::optional<Num> Evaluator::eval(const Expr &e, Scope &scope) {
  switch (e.kind) {
  case Expr::Kind::Integer:
    return Num{true, e.intValue, 0.0};
  case Expr::Kind::Decimal:
    return Num{false, 0, e.decimalValue};
  case Expr::Kind::Call:
    diags.error(e.loc, "'" + e.spelling + "(...)' is not a number");
    return std::nullopt;
  case Expr::Kind::Name: {
    if (Binding *b = scope.lookup(e.spelling))
      return evalBinding(*b, e.loc);
    std::vector<StringRef> visible;
    for (Scope *s = &scope; s; s = s->parent)
      for (auto &kv : s->keys)
        visible.push_back(kv.first);
    std::string msg = ("unknown name '" + e.spelling + "'").str();
    StringRef near = closestMatch(e.spelling, visible);
    if (!near.empty())
      msg += ("; did you mean '" + near + "'?").str();
    else if (getHomeSection(e.spelling))
      msg += ("; '" + e.spelling +
              "' is not set in this section or an enclosing one")
                 .str();
    diags.error(e.loc, msg);
    return std::nullopt;
  }
  case Expr::Kind::Negate: {
    std::optional<Num> v = eval(*e.lhs, scope);
    if (!v)
      return std::nullopt;
    if (!v->isInt)
      return Num{false, 0, -v->d};
    if (v->i == INT64_MIN) {
      diags.error(e.loc, "integer overflow in negation");
      return std::nullopt;
    }
    return Num{true, -v->i, 0.0};
  }
  case Expr::Kind::Binary: {
    std::optional<Num> l = eval(*e.lhs, scope);
    std::optional<Num> r = eval(*e.rhs, scope);
    if (!l || !r)
      return std::nullopt;
    if (l->isInt && r->isInt) {
      int64_t out = 0;
      bool overflow = false;
      switch (e.op) {
      case '+':
        overflow = __builtin_add_overflow(l->i, r->i, &out);
        break;
      case '-':
        overflow = __builtin_sub_overflow(l->i, r->i, &out);
        break;
      case '*':
        overflow = __builtin_mul_overflow(l->i, r->i, &out);
        break;
      case '/':
        if (r->i == 0) {
          diags.error(e.loc, "division by zero");
          return std::nullopt;
        }
        if (l->i == INT64_MIN && r->i == -1) {
          overflow = true;
          break;
        }
        if (l->i % r->i != 0) {
          diags.error(e.loc, llvm::formatv("division {0} / {1} is not exact",
                                           l->i, r->i)
                                 .str());
          return std::nullopt;
        }
        out = l->i / r->i;
        break;
      }
      if (overflow) {
        diags.error(e.loc, "integer overflow: the result does not fit in "
                           "int64");
        return std::nullopt;
      }
      return Num{true, out, 0.0};
    }
    double a = l->asDouble(), b = r->asDouble(), out = 0;
    switch (e.op) {
    case '+':
      out = a + b;
      break;
    case '-':
      out = a - b;
      break;
    case '*':
      out = a * b;
      break;
    case '/':
      if (b == 0.0) {
        diags.error(e.loc, "division by zero");
        return std::nullopt;
      }
      out = a / b;
      break;
    }
    if (!std::isfinite(out)) {
      diags.error(e.loc, "the result is out of range");
      return std::nullopt;
    }
    return Num{false, 0, out};
  }
  }
  return std::nullopt;
}
