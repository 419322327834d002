//===- Lexer.h - .tfm lexer -------------------------------------*- C++ -*-===//

#ifndef TFM_FRONTEND_LEXER_H
#define TFM_FRONTEND_LEXER_H

#include "tfm/Frontend/Diagnostics.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::tfm {

enum class TokenKind {
#define TOK(NAME, DESC) NAME,
#include "tfm/Frontend/TokenKinds.def"
};

/// A human description of a token kind ("'{'", "name", ...).
llvm::StringRef describe(TokenKind kind);
/// The enumerator name of a token kind ("l_brace", ...).
llvm::StringRef kindName(TokenKind kind);

/// A token: its kind and its spelling, a StringRef into the source buffer.
struct Token {
  TokenKind kind = TokenKind::eof;
  llvm::StringRef spelling;

  bool is(TokenKind k) const { return kind == k; }
  llvm::SMLoc getLoc() const {
    return llvm::SMLoc::getFromPointer(spelling.data());
  }
};

/// Splits a .tfm buffer into tokens. Comments are skipped; newlines are
/// tokens because they end statements. Invalid bytes give an error token
/// (and a diagnostic) and lexing continues.
class Lexer {
public:
  Lexer(llvm::StringRef buffer, DiagEmitter &diags);
  Token lex();

private:
  Token make(TokenKind kind, const char *start) {
    return Token{kind, llvm::StringRef(start, cur - start)};
  }
  Token lexNumber(const char *start);

  llvm::StringRef buffer;
  const char *cur;
  DiagEmitter &diags;
};

} // namespace mlir::tfm

#endif // TFM_FRONTEND_LEXER_H
