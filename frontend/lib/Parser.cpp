//===- Parser.cpp - .tfm parser -------------------------------------------===//
//
// Recursive descent over the token stream:
//
//   file    := { model }
//   model   := 'model' NAME '{' body '}'
//   body    := { stmt (NEWLINE | ';') }
//   stmt    := NAME '=' expr | NAME '{' body '}'
//   expr    := term { ('+' | '-') term }
//   term    := unary { ('*' | '/') unary }
//   unary   := '-' unary | primary
//   primary := INTEGER | DECIMAL | NAME [ '(' [ arg { ',' arg } ] ')' ]
//            | '(' expr ')'
//   arg     := NAME '=' expr
//
// Newlines inside parentheses are ignored. After an error the parser skips
// to the end of the statement and goes on, so one run reports every
// independent syntax error.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/Parser.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr int kMaxSectionDepth = 16;
constexpr int kMaxExprDepth = 256;

class Parser {
public:
  Parser(llvm::StringRef buffer, DiagEmitter &diags)
      : lexer(buffer, diags), diags(diags) {
    consume();
  }

  FileAST parseFile();

private:
  void consume() {
    do
      tok = lexer.lex();
    while (parenDepth > 0 && tok.is(TokenKind::newline));
  }
  bool stop() const { return diags.tooManyErrors(); }
  /// Reports an error at the current token unless it is a lexer error token
  /// (already reported).
  void errorHere(const llvm::Twine &msg) {
    if (!tok.is(TokenKind::error))
      diags.error(tok.getLoc(), msg);
  }
  std::string describeTok() const {
    if (tok.is(TokenKind::identifier) || tok.is(TokenKind::integer) ||
        tok.is(TokenKind::decimal))
      return (describe(tok.kind) + " '" + tok.spelling + "'").str();
    return describe(tok.kind).str();
  }
  void skipNewlines() {
    while (tok.is(TokenKind::newline) || tok.is(TokenKind::semicolon))
      consume();
  }
  void skipStatement();
  void skipToModel();

  bool parseModel(FileAST &file);
  /// Parses statements up to and including the closing '}'.
  bool parseBody(Section &section, int depth);
  ExprPtr parseExpr(int depth);
  ExprPtr parseTerm(int depth);
  /// A left-associative chain of `operand`s joined by `op1` or `op2`.
  ExprPtr parseBinary(int depth, TokenKind op1, TokenKind op2,
                      ExprPtr (Parser::*operand)(int));
  ExprPtr parseUnary(int depth);
  ExprPtr parsePrimary(int depth);

  Lexer lexer;
  DiagEmitter &diags;
  Token tok;
  int parenDepth = 0;
};

} // namespace

void Parser::skipStatement() {
  parenDepth = 0;
  int braces = 0;
  while (!tok.is(TokenKind::eof)) {
    if (braces == 0 &&
        (tok.is(TokenKind::newline) || tok.is(TokenKind::semicolon) ||
         tok.is(TokenKind::r_brace)))
      return;
    if (tok.is(TokenKind::l_brace))
      ++braces;
    else if (tok.is(TokenKind::r_brace))
      --braces;
    consume();
  }
}

void Parser::skipToModel() {
  parenDepth = 0;
  bool lineStart = false;
  while (!tok.is(TokenKind::eof)) {
    if (lineStart && tok.is(TokenKind::identifier) && tok.spelling == "model")
      return;
    lineStart = tok.is(TokenKind::newline);
    consume();
  }
}

FileAST Parser::parseFile() {
  FileAST file;
  skipNewlines();
  while (!tok.is(TokenKind::eof) && !stop()) {
    if (tok.is(TokenKind::identifier) && tok.spelling == "model") {
      if (!parseModel(file))
        skipToModel();
    } else {
      errorHere("expected 'model NAME { ... }', got " + describeTok());
      consume();
      skipToModel();
    }
    skipNewlines();
  }
  return file;
}

bool Parser::parseModel(FileAST &file) {
  llvm::SMLoc modelLoc = tok.getLoc();
  consume(); // 'model'
  if (!tok.is(TokenKind::identifier)) {
    errorHere("expected a model name after 'model', got " + describeTok());
    return false;
  }
  ModelDecl decl;
  decl.name = tok.spelling;
  decl.loc = tok.getLoc();
  decl.body.name = decl.name;
  decl.body.loc = modelLoc;
  consume();
  while (tok.is(TokenKind::newline))
    consume();
  if (!tok.is(TokenKind::l_brace)) {
    errorHere("expected '{' after 'model " + decl.name + "', got " +
              describeTok());
    return false;
  }
  consume();
  bool ok = parseBody(decl.body, 1);
  file.models.push_back(std::move(decl));
  return ok;
}

bool Parser::parseBody(Section &section, int depth) {
  llvm::SMLoc open = section.loc;
  while (!stop()) {
    skipNewlines();
    if (tok.is(TokenKind::r_brace)) {
      consume();
      return true;
    }
    if (tok.is(TokenKind::eof)) {
      auto diag = diags.error(tok.getLoc(),
                              "expected '}' to close '" + section.name + "'");
      if (diag)
        diag.attachNote(diags.loc(open))
            << "'" << section.name << "' opened here";
      return false;
    }
    if (!tok.is(TokenKind::identifier)) {
      errorHere("expected a key or a section name, got " + describeTok());
      consume();
      skipStatement();
      continue;
    }
    Stmt stmt;
    stmt.name = tok.spelling;
    stmt.loc = tok.getLoc();
    consume();
    if (tok.is(TokenKind::equal)) {
      consume();
      stmt.value = parseExpr(0);
      if (!stmt.value) {
        skipStatement();
        continue;
      }
      if (!tok.is(TokenKind::newline) && !tok.is(TokenKind::semicolon) &&
          !tok.is(TokenKind::r_brace) && !tok.is(TokenKind::eof)) {
        errorHere("expected a newline or ';' after the value of '" + stmt.name +
                  "', got " + describeTok());
        skipStatement();
      }
      section.stmts.push_back(std::move(stmt));
      continue;
    }
    if (tok.is(TokenKind::l_brace)) {
      if (depth >= kMaxSectionDepth) {
        errorHere("sections are nested too deeply (more than " +
                  llvm::Twine(kMaxSectionDepth) + " levels)");
        return false;
      }
      consume();
      stmt.section = std::make_unique<Section>();
      stmt.section->name = stmt.name;
      stmt.section->loc = stmt.loc;
      bool ok = parseBody(*stmt.section, depth + 1);
      section.stmts.push_back(std::move(stmt));
      if (!ok)
        return false;
      continue;
    }
    errorHere("expected '=' or '{' after '" + stmt.name + "', got " +
              describeTok());
    skipStatement();
  }
  return false;
}

ExprPtr Parser::parseExpr(int depth) {
  return parseBinary(depth, TokenKind::plus, TokenKind::minus,
                     &Parser::parseTerm);
}

ExprPtr Parser::parseTerm(int depth) {
  return parseBinary(depth, TokenKind::star, TokenKind::slash,
                     &Parser::parseUnary);
}

ExprPtr Parser::parseBinary(int depth, TokenKind op1, TokenKind op2,
                            ExprPtr (Parser::*operand)(int)) {
  ExprPtr lhs = (this->*operand)(depth);
  // Each operator deepens the (left-leaning) tree: count it as nesting so
  // that `1 + 1 + ... + 1` cannot build a tree too deep to walk.
  while (lhs && (tok.is(op1) || tok.is(op2))) {
    if (++depth > kMaxExprDepth) {
      errorHere("expression is too long (more than " +
                llvm::Twine(kMaxExprDepth) + " operators or levels)");
      return nullptr;
    }
    auto bin = std::make_unique<Expr>(Expr::Kind::Binary, tok.getLoc());
    bin->op = tok.spelling[0];
    consume();
    bin->lhs = std::move(lhs);
    bin->rhs = (this->*operand)(depth);
    if (!bin->rhs)
      return nullptr;
    lhs = std::move(bin);
  }
  return lhs;
}

ExprPtr Parser::parseUnary(int depth) {
  if (depth > kMaxExprDepth) {
    errorHere("expression is nested too deeply (more than " +
              llvm::Twine(kMaxExprDepth) + " levels)");
    return nullptr;
  }
  if (tok.is(TokenKind::minus)) {
    auto neg = std::make_unique<Expr>(Expr::Kind::Negate, tok.getLoc());
    consume();
    neg->lhs = parseUnary(depth + 1);
    if (!neg->lhs)
      return nullptr;
    return neg;
  }
  return parsePrimary(depth);
}

ExprPtr Parser::parsePrimary(int depth) {
  switch (tok.kind) {
  case TokenKind::integer: {
    auto e = std::make_unique<Expr>(Expr::Kind::Integer, tok.getLoc());
    e->spelling = tok.spelling;
    uint64_t v;
    if (tok.spelling.getAsInteger(10, v) ||
        v > static_cast<uint64_t>(INT64_MAX)) {
      diags.error(tok.getLoc(),
                  "integer '" + tok.spelling + "' does not fit in int64");
      return nullptr;
    }
    e->intValue = static_cast<int64_t>(v);
    consume();
    return e;
  }
  case TokenKind::decimal: {
    auto e = std::make_unique<Expr>(Expr::Kind::Decimal, tok.getLoc());
    e->spelling = tok.spelling;
    double v;
    if (tok.spelling.getAsDouble(v) || !std::isfinite(v)) {
      diags.error(tok.getLoc(),
                  "number '" + tok.spelling + "' is out of range");
      return nullptr;
    }
    e->decimalValue = v;
    consume();
    return e;
  }
  case TokenKind::identifier: {
    llvm::SMLoc loc = tok.getLoc();
    llvm::StringRef name = tok.spelling;
    consume();
    if (!tok.is(TokenKind::l_paren)) {
      auto e = std::make_unique<Expr>(Expr::Kind::Name, loc);
      e->spelling = name;
      return e;
    }
    auto call = std::make_unique<Expr>(Expr::Kind::Call, loc);
    call->spelling = name;
    ++parenDepth;
    consume();
    while (!tok.is(TokenKind::r_paren)) {
      if (!tok.is(TokenKind::identifier)) {
        errorHere("expected an argument name in the call to '" + name +
                  "', got " + describeTok());
        return nullptr;
      }
      CallArg arg;
      arg.name = tok.spelling;
      arg.loc = tok.getLoc();
      consume();
      if (!tok.is(TokenKind::equal)) {
        errorHere("expected '=' after argument '" + arg.name +
                  "' (arguments are named: " + name + "(" + arg.name +
                  " = ...)), got " + describeTok());
        return nullptr;
      }
      consume();
      arg.value = parseExpr(depth + 1);
      if (!arg.value)
        return nullptr;
      call->args.push_back(std::move(arg));
      if (tok.is(TokenKind::comma)) {
        consume();
        continue;
      }
      if (!tok.is(TokenKind::r_paren)) {
        errorHere("expected ',' or ')' in the call to '" + name + "', got " +
                  describeTok());
        return nullptr;
      }
    }
    --parenDepth;
    consume();
    return call;
  }
  case TokenKind::l_paren: {
    ++parenDepth;
    consume();
    ExprPtr inner = parseExpr(depth + 1);
    if (!inner)
      return nullptr;
    if (!tok.is(TokenKind::r_paren)) {
      errorHere("expected ')', got " + describeTok());
      return nullptr;
    }
    --parenDepth;
    consume();
    return inner;
  }
  default:
    errorHere("expected a value, got " + describeTok());
    return nullptr;
  }
}

FileAST mlir::tfm::parseFile(llvm::StringRef buffer, DiagEmitter &diags) {
  return Parser(buffer, diags).parseFile();
}
