//===- Lexer.cpp - .tfm lexer ---------------------------------------------===//

#include "tfm/Frontend/Lexer.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::tfm;

llvm::StringRef mlir::tfm::describe(TokenKind kind) {
  switch (kind) {
#define TOK(NAME, DESC)                                                        \
  case TokenKind::NAME:                                                        \
    return DESC;
#include "tfm/Frontend/TokenKinds.def"
  }
  return "token";
}

llvm::StringRef mlir::tfm::kindName(TokenKind kind) {
  switch (kind) {
#define TOK(NAME, DESC)                                                        \
  case TokenKind::NAME:                                                        \
    return #NAME;
#include "tfm/Frontend/TokenKinds.def"
  }
  return "token";
}

Lexer::Lexer(llvm::StringRef buffer, DiagEmitter &diags)
    : buffer(buffer), cur(buffer.begin()), diags(diags) {}

static bool isIdentStart(char c) { return llvm::isAlpha(c) || c == '_'; }
static bool isIdentChar(char c) { return llvm::isAlnum(c) || c == '_'; }

Token Lexer::lexNumber(const char *start) {
  const char *end = buffer.end();
  while (cur != end && llvm::isDigit(*cur))
    ++cur;
  bool decimal = false;
  if (cur != end && *cur == '.') {
    decimal = true;
    ++cur;
    while (cur != end && llvm::isDigit(*cur))
      ++cur;
  }
  if (cur != end && (*cur == 'e' || *cur == 'E')) {
    const char *p = cur + 1;
    if (p != end && (*p == '+' || *p == '-'))
      ++p;
    if (p != end && llvm::isDigit(*p)) {
      decimal = true;
      cur = p;
      while (cur != end && llvm::isDigit(*cur))
        ++cur;
    }
  }
  // ".5": the language writes a digit before the point.
  if (*start == '.') {
    Token tok = make(TokenKind::error, start);
    diags.error(tok.getLoc(), "a number needs a digit before its point: "
                              "write '0" +
                                  tok.spelling + "'");
    return tok;
  }
  // A number running straight into a name ("12abc") is one bad token.
  if (cur != end && isIdentChar(*cur)) {
    while (cur != end && isIdentChar(*cur))
      ++cur;
    Token tok = make(TokenKind::error, start);
    diags.error(tok.getLoc(), "invalid number '" + tok.spelling + "'");
    return tok;
  }
  return make(decimal ? TokenKind::decimal : TokenKind::integer, start);
}

Token Lexer::lex() {
  const char *end = buffer.end();
  while (true) {
    if (cur == end)
      return Token{TokenKind::eof, llvm::StringRef(end, 0)};
    const char *start = cur;
    char c = *cur++;
    switch (c) {
    case ' ':
    case '\t':
    case '\r':
    case '\f':
    case '\v':
      continue;
    case '#':
      while (cur != end && *cur != '\n')
        ++cur;
      continue;
    case '\n':
      return make(TokenKind::newline, start);
    case '{':
      return make(TokenKind::l_brace, start);
    case '}':
      return make(TokenKind::r_brace, start);
    case '(':
      return make(TokenKind::l_paren, start);
    case ')':
      return make(TokenKind::r_paren, start);
    case '=':
      return make(TokenKind::equal, start);
    case ';':
      return make(TokenKind::semicolon, start);
    case ',':
      return make(TokenKind::comma, start);
    case '+':
      return make(TokenKind::plus, start);
    case '-':
      return make(TokenKind::minus, start);
    case '*':
      return make(TokenKind::star, start);
    case '/':
      return make(TokenKind::slash, start);
    default:
      break;
    }
    if (isIdentStart(c)) {
      while (cur != end && isIdentChar(*cur))
        ++cur;
      return make(TokenKind::identifier, start);
    }
    if (llvm::isDigit(c) || (c == '.' && cur != end && llvm::isDigit(*cur)))
      return lexNumber(start);
    // Anything else is an error token; a run of non-ASCII bytes (UTF-8 text
    // or binary garbage) is one token and one message.
    if (static_cast<unsigned char>(c) >= 0x80) {
      while (cur != end && static_cast<unsigned char>(*cur) >= 0x80)
        ++cur;
      Token tok = make(TokenKind::error, start);
      diags.error(tok.getLoc(), "unexpected non-ASCII bytes (" +
                                    llvm::Twine(tok.spelling.size()) +
                                    " bytes); names and numbers are ASCII");
      return tok;
    }
    Token tok = make(TokenKind::error, start);
    if (llvm::isPrint(c))
      diags.error(tok.getLoc(),
                  "unexpected character '" + llvm::Twine(c) + "'");
    else
      diags.error(tok.getLoc(),
                  "unexpected byte 0x" +
                      llvm::utohexstr(static_cast<unsigned char>(c), false, 2));
    return tok;
  }
}
