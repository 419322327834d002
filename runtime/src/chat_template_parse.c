/*===- chat_template_parse.c - Jinja lexer and parser --------------*- C -*-===*
 *
 * Source to tree, as Jinja2's lexer and parser do it with trim_blocks and
 * lstrip_blocks on (Hugging Face's settings): newlines normalized to "\n"
 * and one trailing newline dropped; "{%-"/"-%}" strip the whitespace
 * beside a tag; a block or comment tag alone on its line takes the line's
 * leading spaces and its newline with it, unless written "{%+"/"+%}".
 *===----------------------------------------------------------------------===*/
#include "chat_template_internal.h"
#include "utf8_encode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef enum tok_kind {
  T_EOF,
  T_TEXT,
  T_VAR_BEGIN,
  T_VAR_END,
  T_BLOCK_BEGIN,
  T_BLOCK_END,
  T_NAME,
  T_INT,
  T_FLOAT,
  T_STRING,
  T_OP,
} tok_kind;

typedef struct tok {
  tok_kind kind;
  int line, col;
  const char *s; /* name, op, text, decoded string (NUL-terminated) */
  size_t n;
  int64_t i;
  double f;
} tok;

typedef struct lexer {
  ct_arena *a;
  const char *src;
  size_t len;
  /* position -> line/column, advanced monotonically */
  size_t lc_pos;
  int line, col;
  tok *toks;
  size_t ntoks, cap;
} lexer;

static void advance_lc(lexer *L, size_t pos) {
  for (; L->lc_pos < pos; ++L->lc_pos) {
    unsigned char c = (unsigned char)L->src[L->lc_pos];
    if (c == '\n') {
      L->line++;
      L->col = 1;
    } else if ((c & 0xC0) != 0x80) {
      L->col++;
    }
  }
}

static tok *push(lexer *L, tok_kind kind, size_t pos, const char *s, size_t n) {
  if (L->ntoks == L->cap) {
    size_t cap = L->cap ? L->cap * 2 : 256;
    tok *t = ct_alloc(L->a, cap * sizeof *t);
    if (L->ntoks)
      memcpy(t, L->toks, L->ntoks * sizeof *t);
    L->toks = t;
    L->cap = cap;
  }
  advance_lc(L, pos);
  tok *t = &L->toks[L->ntoks++];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->line = L->line;
  t->col = L->col;
  t->s = s;
  t->n = n;
  return t;
}

_Noreturn static void lex_fail(lexer *L, size_t pos, const char *fmt,
                               const char *arg) {
  advance_lc(L, pos);
  ct_fail(L->a, TFM_ERR_FORMAT, L->line, L->col, fmt, arg);
}

/* Python's str.isspace() for the ASCII range. */
static bool is_space(unsigned char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}
static bool is_name_start(unsigned char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         c >= 0x80;
}
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static void utf8_put(ct_arena *a, ct_buf *b, uint32_t cp) {
  char u[4];
  size_t n = tfm_utf8_encode((uint32_t)cp, u);
  ct_buf_add(a, b, u, n);
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* A string literal at pos (quote included); returns the position after. */
static size_t lex_string(lexer *L, size_t pos) {
  const char *s = L->src;
  char q = s[pos];
  size_t i = pos + 1;
  ct_buf b = {0};
  ct_buf_add(L->a, &b, "", 0);
  for (;;) {
    if (i >= L->len)
      lex_fail(L, pos, "unterminated string%s", "");
    char c = s[i];
    if (c == q) {
      ++i;
      break;
    }
    if (c != '\\') {
      size_t j = i;
      while (j < L->len && s[j] != q && s[j] != '\\')
        ++j;
      ct_buf_add(L->a, &b, s + i, j - i);
      i = j;
      continue;
    }
    if (i + 1 >= L->len)
      lex_fail(L, pos, "unterminated string%s", "");
    char e = s[i + 1];
    const char *simple = strchr("\\'\"abfnrtv\n", e);
    if (simple && e) {
      static const char out[] = "\\'\"\a\b\f\n\r\t\v";
      if (e != '\n')
        ct_buf_add(L->a, &b, &out[simple - "\\'\"abfnrtv\n"], 1);
      i += 2;
      continue;
    }
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
      uint32_t cp = 0;
      for (int k = 0; k < digits; ++k) {
        int h = i + 2 + (size_t)k < L->len ? hexval(s[i + 2 + k]) : -1;
        if (h < 0)
          lex_fail(L, i, "truncated \\%c escape in a string", &s[i + 1]);
        cp = cp * 16 + (uint32_t)h;
      }
      if (cp > 0x10FFFF)
        lex_fail(L, i, "illegal Unicode character in a string%s", "");
      utf8_put(L->a, &b, cp);
      i += 2 + (size_t)digits;
      continue;
    }
    if (e >= '0' && e <= '7') {
      uint32_t cp = 0;
      size_t k = i + 1;
      for (int m = 0; m < 3 && k < L->len && s[k] >= '0' && s[k] <= '7';
           ++m, ++k)
        cp = cp * 8 + (uint32_t)(s[k] - '0');
      utf8_put(L->a, &b, cp);
      i = k;
      continue;
    }
    /* unknown escapes stay as written */
    ct_buf_add(L->a, &b, s + i, 1);
    ++i;
  }
  tok *t = push(L, T_STRING, pos, b.s, b.n);
  (void)t;
  return i;
}

static size_t lex_number(lexer *L, size_t pos, bool after_dot) {
  const char *s = L->src;
  size_t i = pos;
  bool is_float = false;
  while (i < L->len && (is_digit(s[i]) ||
                        (s[i] == '_' && i + 1 < L->len && is_digit(s[i + 1]))))
    ++i;
  if (!after_dot && i + 1 < L->len && s[i] == '.' && is_digit(s[i + 1])) {
    is_float = true;
    ++i;
    while (i < L->len && (is_digit(s[i]) || (s[i] == '_' && i + 1 < L->len &&
                                             is_digit(s[i + 1]))))
      ++i;
  }
  if (!after_dot && i < L->len && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < L->len && (s[j] == '+' || s[j] == '-'))
      ++j;
    if (j < L->len && is_digit(s[j])) {
      is_float = true;
      i = j;
      while (i < L->len && is_digit(s[i]))
        ++i;
    }
  }
  char tmp[64];
  size_t k = 0;
  for (size_t j = pos; j < i && k < sizeof tmp - 1; ++j)
    if (s[j] != '_')
      tmp[k++] = s[j];
  tmp[k] = 0;
  tok *t = push(L, is_float ? T_FLOAT : T_INT, pos, s + pos, i - pos);
  if (is_float) {
    t->f = strtod(tmp, NULL);
  } else {
    errno = 0;
    t->i = strtoll(tmp, NULL, 10);
    if (errno)
      lex_fail(L, pos, "integer %s does not fit 64 bits", tmp);
  }
  return i;
}

/* Tokens of a tag's inside from pos up to its end ("%}" or "}}", with
 * "-"/"+"); returns the position of the end marker (its sign included). */
static size_t lex_inside(lexer *L, size_t pos, char close, size_t tag_pos) {
  const char *s = L->src;
  int depth = 0;
  for (;;) {
    while (pos < L->len && is_space(s[pos]))
      ++pos;
    if (pos >= L->len)
      lex_fail(L, tag_pos,
               close == '%' ? "unclosed block tag ('{%%' without "
                              "'%%}')%s"
                            : "unclosed variable tag ('{{' "
                              "without '}}')%s",
               "");
    if (depth == 0) {
      size_t p = pos;
      if ((s[p] == '-' || s[p] == '+') && p + 1 < L->len)
        ++p;
      if (s[p] == close && p + 1 < L->len && s[p + 1] == '}' &&
          (p == pos || s[pos] == '-' || close == '%'))
        return pos;
    }
    unsigned char c = (unsigned char)s[pos];
    if (is_name_start(c)) {
      size_t j = pos;
      while (j < L->len && (is_name_start(s[j]) || is_digit(s[j])))
        ++j;
      push(L, T_NAME, pos, ct_strndup(L->a, s + pos, j - pos), j - pos);
      pos = j;
    } else if (is_digit(c)) {
      bool after_dot = L->ntoks && L->toks[L->ntoks - 1].kind == T_OP &&
                       L->toks[L->ntoks - 1].s[0] == '.';
      pos = lex_number(L, pos, after_dot);
    } else if (c == '\'' || c == '"') {
      pos = lex_string(L, pos);
    } else {
      static const char *ops2[] = {"**", "//", "==", "!=", "<=", ">="};
      size_t n = 0;
      for (size_t k = 0; k < sizeof ops2 / sizeof *ops2; ++k)
        if (pos + 1 < L->len && s[pos] == ops2[k][0] &&
            s[pos + 1] == ops2[k][1])
          n = 2;
      if (!n && strchr("+-*/%~<>=()[]{},.:|;", c) && c)
        n = 1;
      if (!n) {
        char ch[2] = {(char)c, 0};
        lex_fail(L, pos, "unexpected char '%s'", ch);
      }
      if (c == '(' || c == '[' || c == '{')
        ++depth;
      else if ((c == ')' || c == ']' || c == '}') && n == 1) {
        if (depth == 0) {
          char ch[2] = {(char)c, 0};
          lex_fail(L, pos, "unexpected '%s'", ch);
        }
        --depth;
      }
      push(L, T_OP, pos, ct_strndup(L->a, s + pos, n), n);
      pos += n;
    }
  }
}

static void lex(lexer *L) {
  const char *s = L->src;
  size_t pos = 0;
  bool line_starting = true;
  while (pos < L->len) {
    /* the next tag start */
    size_t t = pos;
    while (t + 1 < L->len &&
           !(s[t] == '{' &&
             (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#')))
      ++t;
    if (t + 1 >= L->len) {
      push(L, T_TEXT, pos, s + pos, L->len - pos);
      break;
    }
    char kind = s[t + 1];
    char sign =
        t + 2 < L->len && (s[t + 2] == '-' || s[t + 2] == '+') ? s[t + 2] : 0;
    size_t text_end = t;
    if (sign == '-') {
      while (text_end > pos && is_space(s[text_end - 1]))
        --text_end;
    } else if (sign != '+' && kind != '{') {
      size_t l = t;
      while (l > pos && s[l - 1] != '\n')
        --l;
      if ((l > pos || line_starting) && l < t) {
        bool ws = true;
        for (size_t k = l; k < t; ++k)
          ws = ws && is_space(s[k]);
        if (ws)
          text_end = l;
      }
    }
    if (text_end > pos)
      push(L, T_TEXT, pos, s + pos, text_end - pos);
    size_t p = t + 2 + (sign ? 1 : 0);
    char end_sign = 0;
    if (kind == '#') {
      const char *e = NULL;
      for (size_t k = p; k + 1 < L->len; ++k)
        if (s[k] == '#' && s[k + 1] == '}') {
          e = s + k;
          break;
        }
      if (!e)
        lex_fail(L, t, "unclosed comment ('{#' without '#}')%s", "");
      if (e > s + p && (e[-1] == '-' || e[-1] == '+'))
        end_sign = e[-1];
      pos = (size_t)(e - s) + 2;
    } else {
      /* {% raw %}...{% endraw %} */
      if (kind == '%') {
        size_t k = p;
        while (k < L->len && is_space(s[k]))
          ++k;
        if (L->len - k >= 3 && memcmp(s + k, "raw", 3) == 0) {
          size_t m = k + 3;
          while (m < L->len && is_space(s[m]))
            ++m;
          if (m < L->len && s[m] == '-')
            ++m;
          if (L->len - m >= 2 && s[m] == '%' && s[m + 1] == '}') {
            size_t body = m + 2;
            if (s[m - 1] == '-')
              while (body < L->len && is_space(s[body]))
                ++body;
            /* find {%[-+]? endraw [-]?%} */
            for (size_t q = body; q + 1 < L->len; ++q) {
              if (s[q] != '{' || s[q + 1] != '%')
                continue;
              size_t r = q + 2;
              char esign = 0;
              if (r < L->len && (s[r] == '-' || s[r] == '+'))
                esign = s[r++];
              while (r < L->len && is_space(s[r]))
                ++r;
              if (L->len - r < 6 || memcmp(s + r, "endraw", 6) != 0)
                continue;
              r += 6;
              while (r < L->len && is_space(s[r]))
                ++r;
              char rsign = 0;
              if (r < L->len && (s[r] == '-' || s[r] == '+'))
                rsign = s[r++];
              if (L->len - r < 2 || s[r] != '%' || s[r + 1] != '}')
                continue;
              size_t bend = q;
              if (esign == '-')
                while (bend > body && is_space(s[bend - 1]))
                  --bend;
              else if (esign != '+') {
                size_t l = q;
                while (l > body && s[l - 1] != '\n')
                  --l;
                bool ws = true;
                for (size_t z = l; z < q; ++z)
                  ws = ws && is_space(s[z]);
                if (ws && (l > body || s[body - 1] == '\n'))
                  bend = l;
              }
              if (bend > body)
                push(L, T_TEXT, body, s + body, bend - body);
              pos = r + 2;
              if (rsign == '-')
                while (pos < L->len && is_space(s[pos]))
                  ++pos;
              else if (rsign != '+' && pos < L->len && s[pos] == '\n')
                ++pos;
              goto next;
            }
            lex_fail(L, t, "missing end of raw directive%s", "");
          }
        }
      }
      push(L, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, t, s + t, 2);
      size_t e = lex_inside(L, p, kind == '%' ? '%' : '}', t);
      if (s[e] == '-' || s[e] == '+') {
        end_sign = s[e];
        ++e;
      }
      push(L, kind == '%' ? T_BLOCK_END : T_VAR_END, e, s + e, 2);
      pos = e + 2;
    }
    if (end_sign == '-')
      while (pos < L->len && is_space(s[pos]))
        ++pos;
    else if (end_sign != '+' && kind != '{' && pos < L->len && s[pos] == '\n')
      ++pos; /* trim_blocks */
  next:
    line_starting = pos > 0 && s[pos - 1] == '\n';
  }
  push(L, T_EOF, L->len, "", 0);
}

/*===- Parser -------------------------------------------------------------===*/

typedef struct parser {
  ct_arena *a;
  tok *toks;
  size_t i;
  int depth;
} parser;

_Noreturn static void fail_at(parser *P, const tok *t, const char *fmt,
                              const char *arg) {
  ct_fail(P->a, TFM_ERR_FORMAT, t->line, t->col, fmt, arg);
}

static tok *cur(parser *P) { return &P->toks[P->i]; }
static tok *peek(parser *P, size_t k) {
  size_t j = P->i + k;
  while (j > P->i && P->toks[j - 1].kind == T_EOF)
    --j;
  return &P->toks[j];
}
static bool is_op(const tok *t, const char *op) {
  return t->kind == T_OP && strcmp(t->s, op) == 0;
}
static bool is_name(const tok *t, const char *name) {
  return t->kind == T_NAME && strcmp(t->s, name) == 0;
}
static const char *describe(const tok *t) {
  switch (t->kind) {
  case T_EOF:
    return "end of template";
  case T_BLOCK_END:
    return "end of statement block";
  case T_VAR_END:
    return "end of print statement";
  case T_STRING:
    return "string";
  case T_INT:
    return "integer";
  case T_FLOAT:
    return "float";
  case T_TEXT:
    return "template text";
  case T_BLOCK_BEGIN:
    return "begin of statement block";
  case T_VAR_BEGIN:
    return "begin of print statement";
  default:
    return t->s;
  }
}
static void expect_op(parser *P, const char *op) {
  if (!is_op(cur(P), op)) {
    char msg[96];
    snprintf(msg, sizeof msg, "expected '%s', got '%%s'", op);
    fail_at(P, cur(P), msg, describe(cur(P)));
  }
  P->i++;
}
static const char *expect_name(parser *P) {
  if (cur(P)->kind != T_NAME)
    fail_at(P, cur(P), "expected a name, got '%s'", describe(cur(P)));
  return P->toks[P->i++].s;
}
static void expect_block_end(parser *P) {
  if (cur(P)->kind != T_BLOCK_END)
    fail_at(P, cur(P), "expected end of statement block, got '%s'",
            describe(cur(P)));
  P->i++;
}

/* The end of a statement that opens a body: Jinja2 allows a colon before
 * it, for Python's sake ("{% else: %}"). */
static void expect_body_start(parser *P) {
  if (is_op(cur(P), ":"))
    P->i++;
  expect_block_end(P);
}

static ct_node *node(parser *P, ct_node_kind kind, const tok *t) {
  ct_node *n = ct_alloc(P->a, sizeof *n);
  memset(n, 0, sizeof *n);
  n->kind = kind;
  n->line = t->line;
  n->col = t->col;
  return n;
}

/* A growable array of node pointers. */
typedef struct nvec {
  ct_node **v;
  size_t n, cap;
} nvec;
static void nvec_push(ct_arena *a, nvec *v, ct_node *n) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 4;
    ct_node **p = ct_alloc(a, cap * sizeof *p);
    if (v->n)
      memcpy(p, v->v, v->n * sizeof *p);
    v->v = p;
    v->cap = cap;
  }
  v->v[v->n++] = n;
}

static void enter(parser *P) {
  if (++P->depth > TFM_CHAT_MAX_NESTING)
    fail_at(P, cur(P), "nesting deeper than %s", "128 (the limit)");
}

static ct_node *parse_expr(parser *P, bool with_condexpr);
static ct_node *parse_or(parser *P);
static ct_node *parse_unary(parser *P, bool with_filter);
static ct_node *parse_primary(parser *P);
static ct_node *parse_postfix(parser *P, ct_node *n);

/* Call arguments after '(' up to ')'. */
static void parse_args(parser *P, ct_node *n) {
  nvec pos = {0}, kwv = {0};
  const char **kwn = NULL;
  size_t nkw = 0, capkw = 0;
  expect_op(P, "(");
  while (!is_op(cur(P), ")")) {
    if (pos.n || nkw)
      expect_op(P, ",");
    if (is_op(cur(P), ")"))
      break;
    if (is_op(cur(P), "*") || is_op(cur(P), "**"))
      fail_at(P, cur(P), "'%s' arguments are not supported", cur(P)->s);
    if (cur(P)->kind == T_NAME && is_op(peek(P, 1), "=")) {
      if (nkw == capkw) {
        capkw = capkw ? capkw * 2 : 4;
        const char **k = ct_alloc(P->a, capkw * sizeof *k);
        if (nkw)
          memcpy(k, kwn, nkw * sizeof *k);
        kwn = k;
      }
      kwn[nkw++] = cur(P)->s;
      P->i += 2;
      nvec_push(P->a, &kwv, parse_expr(P, true));
    } else {
      if (nkw)
        fail_at(P, cur(P),
                "a positional argument follows a keyword "
                "argument%s",
                "");
      nvec_push(P->a, &pos, parse_expr(P, true));
    }
  }
  P->i++;
  n->args = pos.v;
  n->nargs = pos.n;
  n->kwnames = kwn;
  n->kwvals = kwv.v;
  n->nkw = nkw;
}

static ct_node *parse_filter(parser *P, ct_node *target) {
  tok *t = cur(P);
  P->i++; /* '|' */
  tok *nt = cur(P);
  const char *name = expect_name(P);
  if (!ct_is_filter(name))
    fail_at(P, nt, "no filter named '%s'", name);
  ct_node *n = node(P, E_FILTER, nt);
  (void)t;
  n->name = name;
  n->a = target;
  if (is_op(cur(P), "("))
    parse_args(P, n);
  return n;
}

static ct_node *parse_test(parser *P, ct_node *target) {
  P->i++; /* 'is' */
  bool negated = false;
  if (is_name(cur(P), "not")) {
    negated = true;
    P->i++;
  }
  tok *nt = cur(P);
  const char *name = expect_name(P);
  if (!ct_is_test(name))
    fail_at(P, nt, "no test named '%s'", name);
  ct_node *n = node(P, E_TEST, nt);
  n->name = name;
  n->a = target;
  n->op = negated;
  tok *c = cur(P);
  if (is_op(c, "(")) {
    parse_args(P, n);
  } else if ((c->kind == T_NAME || c->kind == T_STRING || c->kind == T_INT ||
              c->kind == T_FLOAT || is_op(c, "(") || is_op(c, "[") ||
              is_op(c, "{")) &&
             !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
    if (is_name(c, "is"))
      fail_at(P, c, "you cannot chain multiple tests with is%s", "");
    ct_node *arg = parse_postfix(P, parse_primary(P));
    n->args = ct_alloc(P->a, sizeof *n->args);
    n->args[0] = arg;
    n->nargs = 1;
  }
  return n;
}

static ct_node *parse_postfix(parser *P, ct_node *n) {
  for (;;) {
    tok *t = cur(P);
    if (is_op(t, ".")) {
      P->i++;
      tok *a = cur(P);
      if (a->kind == T_NAME) {
        ct_node *g = node(P, E_ATTR, t);
        g->a = n;
        g->name = a->s;
        P->i++;
        n = g;
      } else if (a->kind == T_INT) {
        ct_node *g = node(P, E_ITEM, t);
        g->a = n;
        g->b = node(P, E_LIT, a);
        g->b->lit = ct_int(a->i);
        P->i++;
        n = g;
      } else {
        fail_at(P, a, "expected name or number after '.', got '%s'",
                describe(a));
      }
    } else if (is_op(t, "[")) {
      P->i++;
      ct_node *parts[3] = {NULL, NULL, NULL};
      int k = 0;
      bool slice = false;
      for (;;) {
        if (is_op(cur(P), ":")) {
          slice = true;
          if (++k > 2)
            fail_at(P, cur(P), "unexpected ':'%s", "");
          P->i++;
          continue;
        }
        if (is_op(cur(P), "]"))
          break;
        if (parts[k])
          fail_at(P, cur(P), "expected ']', got '%s'", describe(cur(P)));
        parts[k] = parse_expr(P, true);
      }
      P->i++;
      ct_node *g = node(P, slice ? E_SLICE : E_ITEM, t);
      g->a = n;
      if (!slice && !parts[0])
        fail_at(P, t, "expected an expression inside '[]'%s", "");
      g->b = parts[0];
      g->c = parts[1];
      g->d = parts[2];
      n = g;
    } else if (is_op(t, "(")) {
      ct_node *c = node(P, E_CALL, t);
      c->a = n;
      c->line = n->line; /* errors point at the callee */
      c->col = n->col;
      parse_args(P, c);
      n = c;
    } else {
      return n;
    }
  }
}

static ct_node *parse_filter_expr(parser *P, ct_node *n) {
  for (;;) {
    if (is_op(cur(P), "|"))
      n = parse_filter(P, n);
    else if (is_name(cur(P), "is"))
      n = parse_test(P, n);
    else if (is_op(cur(P), "(")) {
      ct_node *c = node(P, E_CALL, cur(P));
      c->a = n;
      c->line = n->line; /* errors point at the callee */
      c->col = n->col;
      parse_args(P, c);
      n = c;
    } else
      return n;
  }
}

/* The items of a list, tuple or dict up to `close`. */
static void parse_items(parser *P, ct_node *n, const char *close, bool dict) {
  nvec v = {0};
  while (!is_op(cur(P), close)) {
    if (v.n)
      expect_op(P, ",");
    if (is_op(cur(P), close))
      break;
    nvec_push(P->a, &v, parse_expr(P, true));
    if (dict) {
      expect_op(P, ":");
      nvec_push(P->a, &v, parse_expr(P, true));
    }
  }
  P->i++;
  n->args = v.v;
  n->nargs = v.n;
}

static ct_node *parse_primary(parser *P) {
  tok *t = cur(P);
  enter(P);
  ct_node *n;
  if (t->kind == T_NAME) {
    n = node(P, E_LIT, t);
    if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
      n->lit = ct_bool(true);
    else if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
      n->lit = ct_bool(false);
    else if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
      n->lit = ct_none();
    else {
      n->kind = E_NAME;
      n->name = t->s;
    }
    P->i++;
  } else if (t->kind == T_STRING) {
    n = node(P, E_LIT, t);
    P->i++;
    if (cur(P)->kind == T_STRING) {
      ct_buf b = {0};
      ct_buf_add(P->a, &b, t->s, t->n);
      while (cur(P)->kind == T_STRING) {
        ct_buf_add(P->a, &b, cur(P)->s, cur(P)->n);
        P->i++;
      }
      n->lit = ct_str(b.s, b.n);
    } else {
      n->lit = ct_str(t->s, t->n);
    }
  } else if (t->kind == T_INT || t->kind == T_FLOAT) {
    n = node(P, E_LIT, t);
    n->lit = t->kind == T_INT ? ct_int(t->i) : ct_float(t->f);
    P->i++;
  } else if (is_op(t, "(")) {
    P->i++;
    if (is_op(cur(P), ")")) {
      P->i++;
      n = node(P, E_TUPLE, t);
    } else {
      ct_node *first = parse_expr(P, true);
      if (is_op(cur(P), ")")) {
        P->i++;
        n = first;
      } else {
        expect_op(P, ",");
        n = node(P, E_TUPLE, t);
        nvec v = {0};
        nvec_push(P->a, &v, first);
        while (!is_op(cur(P), ")")) {
          nvec_push(P->a, &v, parse_expr(P, true));
          if (!is_op(cur(P), ")"))
            expect_op(P, ",");
        }
        P->i++;
        n->args = v.v;
        n->nargs = v.n;
      }
    }
  } else if (is_op(t, "[")) {
    P->i++;
    n = node(P, E_LIST, t);
    parse_items(P, n, "]", false);
  } else if (is_op(t, "{")) {
    P->i++;
    n = node(P, E_DICT, t);
    parse_items(P, n, "}", true);
  } else {
    fail_at(P, t, "unexpected '%s'", describe(t));
  }
  P->depth--;
  return n;
}

static ct_node *parse_unary(parser *P, bool with_filter) {
  tok *t = cur(P);
  ct_node *n;
  enter(P);
  if (is_op(t, "-") || is_op(t, "+")) {
    P->i++;
    n = node(P, is_op(t, "-") ? E_NEG : E_POS, t);
    n->a = parse_unary(P, false);
  } else {
    n = parse_primary(P);
  }
  n = parse_postfix(P, n);
  if (with_filter)
    n = parse_filter_expr(P, n);
  P->depth--;
  return n;
}

static ct_node *binary(parser *P, const tok *t, int op, ct_node *l,
                       ct_node *r) {
  ct_node *n = node(P, E_BINARY, t);
  n->op = op;
  n->a = l;
  n->b = r;
  return n;
}

static ct_node *parse_pow(parser *P) {
  ct_node *l = parse_unary(P, true);
  while (is_op(cur(P), "**")) {
    tok *t = cur(P);
    P->i++;
    l = binary(P, t, OP_POW, l, parse_unary(P, true));
  }
  return l;
}

static ct_node *parse_math2(parser *P) {
  ct_node *l = parse_pow(P);
  for (;;) {
    tok *t = cur(P);
    int op = is_op(t, "*")    ? OP_MUL
             : is_op(t, "/")  ? OP_DIV
             : is_op(t, "//") ? OP_FLOORDIV
             : is_op(t, "%")  ? OP_MOD
                              : -1;
    if (op < 0)
      return l;
    P->i++;
    l = binary(P, t, op, l, parse_pow(P));
  }
}

static ct_node *parse_concat(parser *P) {
  ct_node *l = parse_math2(P);
  while (is_op(cur(P), "~")) {
    tok *t = cur(P);
    P->i++;
    l = binary(P, t, OP_CONCAT, l, parse_math2(P));
  }
  return l;
}

static ct_node *parse_math1(parser *P) {
  ct_node *l = parse_concat(P);
  for (;;) {
    tok *t = cur(P);
    int op = is_op(t, "+") ? OP_ADD : is_op(t, "-") ? OP_SUB : -1;
    if (op < 0)
      return l;
    P->i++;
    l = binary(P, t, op, l, parse_concat(P));
  }
}

static ct_node *parse_compare(parser *P) {
  tok *t0 = cur(P);
  ct_node *first = parse_math1(P);
  nvec v = {0};
  int ops[64];
  size_t nops = 0;
  for (;;) {
    tok *t = cur(P);
    int op = is_op(t, "==")                                     ? OP_EQ
             : is_op(t, "!=")                                   ? OP_NE
             : is_op(t, "<")                                    ? OP_LT
             : is_op(t, "<=")                                   ? OP_LE
             : is_op(t, ">")                                    ? OP_GT
             : is_op(t, ">=")                                   ? OP_GE
             : is_name(t, "in")                                 ? OP_IN
             : (is_name(t, "not") && is_name(peek(P, 1), "in")) ? OP_NOTIN
                                                                : -1;
    if (op < 0)
      break;
    if (nops == 64)
      fail_at(P, t, "too many chained comparisons%s", "");
    P->i += op == OP_NOTIN ? 2 : 1;
    ops[nops++] = op;
    nvec_push(P->a, &v, parse_math1(P));
  }
  if (!nops)
    return first;
  ct_node *n = node(P, E_COMPARE, t0);
  n->a = first;
  n->args = v.v;
  n->nargs = v.n;
  n->ops = ct_alloc(P->a, nops * sizeof(int));
  memcpy(n->ops, ops, nops * sizeof(int));
  return n;
}

static ct_node *parse_not(parser *P) {
  if (is_name(cur(P), "not")) {
    tok *t = cur(P);
    P->i++;
    enter(P);
    ct_node *n = node(P, E_NOT, t);
    n->a = parse_not(P);
    P->depth--;
    return n;
  }
  return parse_compare(P);
}

static ct_node *parse_and(parser *P) {
  ct_node *l = parse_not(P);
  while (is_name(cur(P), "and")) {
    tok *t = cur(P);
    P->i++;
    ct_node *n = node(P, E_AND, t);
    n->a = l;
    n->b = parse_not(P);
    l = n;
  }
  return l;
}

static ct_node *parse_or(parser *P) {
  ct_node *l = parse_and(P);
  while (is_name(cur(P), "or")) {
    tok *t = cur(P);
    P->i++;
    ct_node *n = node(P, E_OR, t);
    n->a = l;
    n->b = parse_and(P);
    l = n;
  }
  return l;
}

static ct_node *parse_expr(parser *P, bool with_condexpr) {
  enter(P);
  ct_node *e = parse_or(P);
  while (with_condexpr && is_name(cur(P), "if")) {
    tok *t = cur(P);
    P->i++;
    ct_node *n = node(P, E_COND, t);
    n->b = e;
    n->a = parse_or(P);
    if (is_name(cur(P), "else")) {
      P->i++;
      n->c = parse_expr(P, true);
    }
    e = n;
  }
  P->depth--;
  return e;
}

/* An expression, or a tuple of them without parentheses ("a, b"). */
static ct_node *parse_tuple(parser *P, bool with_condexpr) {
  tok *t = cur(P);
  ct_node *first = parse_expr(P, with_condexpr);
  if (!is_op(cur(P), ","))
    return first;
  nvec v = {0};
  nvec_push(P->a, &v, first);
  while (is_op(cur(P), ",")) {
    P->i++;
    if (cur(P)->kind == T_BLOCK_END || cur(P)->kind == T_VAR_END ||
        is_op(cur(P), ")"))
      break;
    nvec_push(P->a, &v, parse_expr(P, with_condexpr));
  }
  ct_node *n = node(P, E_TUPLE, t);
  n->args = v.v;
  n->nargs = v.n;
  return n;
}

/* Names of a for or set target: "x", "a, b", "(a, b)". */
static void parse_targets(parser *P, ct_node *n) {
  bool paren = is_op(cur(P), "(");
  if (paren)
    P->i++;
  const char *names[32];
  size_t k = 0;
  for (;;) {
    if (k == 32)
      fail_at(P, cur(P), "too many names in a target%s", "");
    names[k++] = expect_name(P);
    if (!is_op(cur(P), ","))
      break;
    P->i++;
  }
  if (paren)
    expect_op(P, ")");
  n->names = ct_alloc(P->a, k * sizeof *names);
  memcpy(n->names, names, k * sizeof *names);
  n->nnames = k;
  if (k > 1 || paren)
    n->op = 1; /* unpack */
}

static ct_node **parse_body(parser *P, const char *const *ends, size_t *n);

/* At "{%" "name": the statement. */
static ct_node *parse_statement(parser *P) {
  tok *open = cur(P);
  P->i++;
  tok *t = cur(P);
  if (t->kind != T_NAME)
    fail_at(P, t, "tag name expected, got '%s'", describe(t));
  const char *name = t->s;
  P->i++;
  enter(P);
  ct_node *n;
  if (!strcmp(name, "if")) {
    n = node(P, N_IF, t);
    n->a = parse_tuple(P, false);
    expect_body_start(P);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    ct_node *cur_if = n;
    for (;;) {
      cur_if->body = parse_body(P, ends, &cur_if->nbody);
      tok *e = cur(P); /* the end tag's name */
      P->i++;
      if (!strcmp(e->s, "elif")) {
        ct_node *m = node(P, N_IF, e);
        m->a = parse_tuple(P, false);
        expect_body_start(P);
        cur_if->els = m;
        cur_if = m;
        continue;
      }
      if (!strcmp(e->s, "else")) {
        expect_body_start(P);
        static const char *const endif[] = {"endif", NULL};
        ct_node *b = node(P, N_BODY, e);
        b->body = parse_body(P, endif, &b->nbody);
        cur_if->els = b;
        P->i++;
      }
      expect_block_end(P);
      break;
    }
  } else if (!strcmp(name, "for")) {
    n = node(P, N_FOR, t);
    parse_targets(P, n);
    if (!is_name(cur(P), "in"))
      fail_at(P, cur(P), "expected 'in', got '%s'", describe(cur(P)));
    P->i++;
    n->a = parse_tuple(P, false);
    if (is_name(cur(P), "if")) {
      P->i++;
      n->b = parse_expr(P, true);
    }
    if (is_name(cur(P), "recursive"))
      fail_at(P, cur(P), "recursive loops are not supported%s", "");
    expect_body_start(P);
    static const char *const ends[] = {"endfor", "else", NULL};
    n->body = parse_body(P, ends, &n->nbody);
    if (is_name(cur(P), "else")) {
      tok *e = cur(P);
      P->i++;
      expect_body_start(P);
      static const char *const endfor[] = {"endfor", NULL};
      n->els = node(P, N_BODY, e);
      n->els->body = parse_body(P, endfor, &n->els->nbody);
    }
    P->i++;
    expect_block_end(P);
  } else if (!strcmp(name, "set")) {
    n = node(P, N_SET, t);
    if (cur(P)->kind == T_NAME && is_op(peek(P, 1), ".") &&
        peek(P, 2)->kind == T_NAME) {
      n->names = ct_alloc(P->a, sizeof *n->names);
      n->names[0] = cur(P)->s;
      n->nnames = 1;
      n->attr = peek(P, 2)->s;
      P->i += 3;
    } else {
      parse_targets(P, n);
    }
    if (is_op(cur(P), "=")) {
      P->i++;
      n->a = parse_tuple(P, true);
      expect_block_end(P);
    } else {
      if (n->attr || n->nnames != 1)
        fail_at(P, cur(P), "expected '=', got '%s'", describe(cur(P)));
      n->kind = N_SETBLOCK;
      /* optional filters: {% set x | trim %} */
      ct_node *src = node(P, E_NAME, t);
      src->name = NULL; /* the body's output */
      ct_node *f = src;
      while (is_op(cur(P), "|"))
        f = parse_filter(P, f);
      n->a = f == src ? NULL : f;
      n->b = src;
      expect_body_start(P);
      static const char *const ends[] = {"endset", NULL};
      n->body = parse_body(P, ends, &n->nbody);
      P->i++;
      expect_block_end(P);
    }
  } else if (!strcmp(name, "macro")) {
    n = node(P, N_MACRO, t);
    n->name = expect_name(P);
    expect_op(P, "(");
    const char *params[64];
    ct_node *defaults[64];
    size_t k = 0;
    while (!is_op(cur(P), ")")) {
      if (k)
        expect_op(P, ",");
      if (k == 64)
        fail_at(P, cur(P), "too many macro parameters%s", "");
      params[k] = expect_name(P);
      defaults[k] = NULL;
      if (is_op(cur(P), "=")) {
        P->i++;
        defaults[k] = parse_expr(P, true);
      }
      ++k;
    }
    P->i++;
    n->kwnames = ct_alloc(P->a, (k + 1) * sizeof *params);
    n->kwvals = ct_alloc(P->a, (k + 1) * sizeof *defaults);
    memcpy(n->kwnames, params, k * sizeof *params);
    memcpy(n->kwvals, defaults, k * sizeof *defaults);
    n->nkw = k;
    expect_body_start(P);
    static const char *const ends[] = {"endmacro", NULL};
    n->body = parse_body(P, ends, &n->nbody);
    P->i++;
    if (cur(P)->kind == T_NAME && !strcmp(cur(P)->s, n->name))
      P->i++;
    expect_block_end(P);
  } else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
    n = node(P, name[0] == 'b' ? N_BREAK : N_CONTINUE, t);
    expect_block_end(P);
  } else if (!strcmp(name, "generation")) {
    /* transformers' AssistantTracker: {% generation %} marks the
     * assistant's text; rendering is unchanged. */
    n = node(P, N_BODY, t);
    expect_body_start(P);
    static const char *const ends[] = {"endgeneration", NULL};
    n->body = parse_body(P, ends, &n->nbody);
    P->i++;
    expect_block_end(P);
  } else {
    (void)open;
    fail_at(P, t, "encountered unknown tag '%s'", name);
  }
  P->depth--;
  return n;
}

static ct_node **parse_body(parser *P, const char *const *ends, size_t *n) {
  nvec v = {0};
  for (;;) {
    tok *t = cur(P);
    if (t->kind == T_EOF) {
      if (!ends)
        break;
      char msg[160];
      size_t k = 0;
      for (const char *const *e = ends; *e && k < 120; ++e)
        k += (size_t)snprintf(msg + k, sizeof msg - k, "%s'%s'",
                              e == ends ? "" : " or ", *e);
      fail_at(P, t, "unexpected end of template: looking for the tags %s", msg);
    }
    if (t->kind == T_TEXT) {
      ct_node *s = node(P, N_TEXT, t);
      s->lit = ct_str(ct_strndup(P->a, t->s, t->n), t->n);
      nvec_push(P->a, &v, s);
      P->i++;
    } else if (t->kind == T_VAR_BEGIN) {
      P->i++;
      ct_node *s = node(P, N_OUTPUT, t);
      s->a = parse_tuple(P, true);
      if (cur(P)->kind != T_VAR_END)
        fail_at(P, cur(P), "expected end of print statement, got '%s'",
                describe(cur(P)));
      P->i++;
      nvec_push(P->a, &v, s);
    } else if (t->kind == T_BLOCK_BEGIN) {
      tok *name = peek(P, 1);
      if (name->kind == T_NAME && ends)
        for (const char *const *e = ends; *e; ++e)
          if (!strcmp(name->s, *e)) {
            P->i++; /* leaves the end tag's name current */
            goto done;
          }
      if (name->kind == T_NAME &&
          (!strncmp(name->s, "end", 3) || !strcmp(name->s, "else") ||
           !strcmp(name->s, "elif")))
        fail_at(P, name, "unexpected tag '%s'", name->s);
      nvec_push(P->a, &v, parse_statement(P));
    } else {
      fail_at(P, t, "unexpected '%s'", describe(t));
    }
  }
done:
  *n = v.n;
  return v.v;
}

ct_node *ct_parse(ct_arena *a, const char *source) {
  /* newlines to "\n", one trailing newline dropped */
  size_t len = strlen(source);
  char *src = ct_alloc(a, len + 1);
  size_t k = 0;
  for (size_t i = 0; i < len; ++i) {
    if (source[i] == '\r') {
      src[k++] = '\n';
      if (i + 1 < len && source[i + 1] == '\n')
        ++i;
    } else {
      src[k++] = source[i];
    }
  }
  if (k && src[k - 1] == '\n')
    --k;
  src[k] = 0;
  lexer L = {a, src, k, 0, 1, 1, NULL, 0, 0};
  lex(&L);
  parser P = {a, L.toks, 0, 0};
  ct_node *root = node(&P, N_BODY, &L.toks[0]);
  root->body = parse_body(&P, NULL, &root->nbody);
  return root;
}
