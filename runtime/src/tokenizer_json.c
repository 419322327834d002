/*===- tokenizer_json.c - the large parts of tokenizer.json, fast ---------===*
 *
 * A tokenizer.json is 2-35 MB, nearly all of it model.vocab and
 * model.merges; jansson builds a hash table entry per key and takes seconds
 * on them. These are read here by a small scanner straight into arrays of
 * entries, and jansson reads the rest (with those two emptied).
 *===----------------------------------------------------------------------===*/
#include "tokenizer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct scan {
  const char *s;
  size_t n, i;
  size_t base; /* offset of s in the file, for messages */
  const char *file, *what;
} scan;

static tfm_status bad(const scan *c, const char *expected) {
  return tfm_fail(TFM_ERR_FORMAT, "%s: %s: malformed JSON at byte %zu (%s)",
                  c->file, c->what, c->base + c->i, expected);
}

static void ws(scan *c) {
  while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\n' ||
                         c->s[c->i] == '\r' || c->s[c->i] == '\t'))
    ++c->i;
}

static bool eat(scan *c, char ch) {
  ws(c);
  if (c->i < c->n && c->s[c->i] == ch) {
    ++c->i;
    return true;
  }
  return false;
}

static int hex4(const char *p) {
  int v = 0;
  for (int k = 0; k < 4; ++k) {
    char ch = p[k];
    int d = ch >= '0' && ch <= '9'   ? ch - '0'
            : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
            : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                     : -1;
    if (d < 0)
      return -1;
    v = v * 16 + d;
  }
  return v;
}

/* A string into `out` (appended; not NUL-separated). With out == NULL it is
 * skipped. */
static tfm_status string(scan *c, tk_buf *out) {
  ws(c);
  if (c->i >= c->n || c->s[c->i] != '"')
    return bad(c, "a string");
  ++c->i;
  tfm_status st = TFM_OK;
  for (;;) {
    size_t run = c->i;
    while (c->i < c->n && c->s[c->i] != '"' && c->s[c->i] != '\\' &&
           (unsigned char)c->s[c->i] >= 0x20)
      ++c->i;
    if (out && c->i > run &&
        (st = tk_buf_add(out, c->s + run, c->i - run)) != TFM_OK)
      return st;
    if (c->i >= c->n || (unsigned char)c->s[c->i] < 0x20)
      return bad(c, "the string's closing quote");
    if (c->s[c->i] == '"') {
      ++c->i;
      return TFM_OK;
    }
    /* An escape. */
    if (c->i + 1 >= c->n)
      return bad(c, "an escape");
    char e = c->s[c->i + 1];
    c->i += 2;
    int32_t cp;
    switch (e) {
    case '"':
    case '\\':
    case '/':
      cp = e;
      break;
    case 'b':
      cp = '\b';
      break;
    case 'f':
      cp = '\f';
      break;
    case 'n':
      cp = '\n';
      break;
    case 'r':
      cp = '\r';
      break;
    case 't':
      cp = '\t';
      break;
    case 'u': {
      if (c->i + 4 > c->n || (cp = hex4(c->s + c->i)) < 0)
        return bad(c, "four hex digits after \\u");
      c->i += 4;
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        int lo;
        if (c->i + 6 > c->n || c->s[c->i] != '\\' || c->s[c->i + 1] != 'u' ||
            (lo = hex4(c->s + c->i + 2)) < 0xDC00 || lo > 0xDFFF)
          return bad(c, "the low half of a surrogate pair");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        c->i += 6;
      } else if (cp >= 0xDC00 && cp <= 0xDFFF)
        return bad(c, "no lone low surrogate");
      break;
    }
    default:
      return bad(c, "a valid escape");
    }
    if (out && (st = tk_buf_cp(out, cp)) != TFM_OK)
      return st;
  }
}

static tfm_status number(scan *c, double *v, bool integer) {
  ws(c);
  size_t b = c->i;
  while (c->i < c->n && strchr("+-0123456789.eE", c->s[c->i]))
    ++c->i;
  if (b == c->i || c->i - b > 64)
    return bad(c, integer ? "an integer" : "a number");
  char tmp[72];
  memcpy(tmp, c->s + b, c->i - b);
  tmp[c->i - b] = 0;
  char *end;
  *v = strtod(tmp, &end);
  /* (A double outside int64_t's range is an integer, and too large for an
   * int64_t cast.) */
  if (*end ||
      (integer && (strpbrk(tmp, ".eE") ||
                   (*v > -0x1p63 && *v < 0x1p63 && *v != (double)(int64_t)*v))))
    return bad(c, integer ? "an integer" : "a number");
  return TFM_OK;
}

/* Skips any value. */
static tfm_status skip(scan *c, int depth) {
  ws(c);
  if (c->i >= c->n)
    return bad(c, "a value");
  if (depth > 512)
    return bad(c, "less nesting");
  char ch = c->s[c->i];
  tfm_status s;
  if (ch == '"')
    return string(c, NULL);
  if (ch == '{' || ch == '[') {
    char close = ch == '{' ? '}' : ']';
    ++c->i;
    if (eat(c, close))
      return TFM_OK;
    do {
      if (ch == '{') {
        if ((s = string(c, NULL)) != TFM_OK)
          return s;
        if (!eat(c, ':'))
          return bad(c, "':'");
      }
      if ((s = skip(c, depth + 1)) != TFM_OK)
        return s;
    } while (eat(c, ','));
    return eat(c, close) ? TFM_OK : bad(c, close == '}' ? "'}'" : "']'");
  }
  while (c->i < c->n && !strchr(",]} \n\r\t", c->s[c->i]))
    ++c->i;
  return TFM_OK;
}

static tfm_status push_entry(tk_entries *l, const tk_entry *e) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 1024;
    tk_entry *v = tfm_malloc(cap * sizeof *v);
    if (!v)
      return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
    if (l->n)
      memcpy(v, l->v, l->n * sizeof *v);
    free(l->v);
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = *e;
  return TFM_OK;
}

/* Reserves room for what a span can hold: unescaped strings are never
 * longer than their JSON, and entries take at least 6 bytes ("a":1,). */
static tfm_status reserve(tk_entries *l, size_t span) {
  size_t want = l->arena.n + span + 1;
  if (l->arena.cap < want) {
    char *p = tfm_malloc(want);
    if (!p)
      return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
    if (l->arena.n)
      memcpy(p, l->arena.s, l->arena.n);
    p[l->arena.n] = 0;
    free(l->arena.s);
    l->arena.s = p;
    l->arena.cap = want;
  }
  size_t entries = l->n + span / 6 + 1;
  if (l->cap < entries) {
    tk_entry *v = tfm_malloc(entries * sizeof *v);
    if (!v)
      return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
    if (l->n)
      memcpy(v, l->v, l->n * sizeof *v);
    free(l->v);
    l->v = v;
    l->cap = entries;
  }
  return TFM_OK;
}

void tk_entries_free(tk_entries *l) {
  free(l->v);
  free(l->arena.s);
  memset(l, 0, sizeof *l);
}

tfm_status tk_json_extract(char *text, size_t n, tk_span *vocab,
                           tk_span *merges, const char *file) {
  memset(vocab, 0, sizeof *vocab);
  memset(merges, 0, sizeof *merges);
  scan c = {text, n, 0, 0, file, "the tokenizer"};
  tfm_status s;
  if (!eat(&c, '{'))
    return TFM_OK; /* jansson will say what is wrong */
  if (eat(&c, '}'))
    return TFM_OK;
  tk_buf key = {0};
  do {
    key.n = 0;
    if ((s = string(&c, &key)) != TFM_OK || !eat(&c, ':'))
      break;
    ws(&c);
    if (key.n == 5 && !memcmp(key.s, "model", 5) && c.i < n &&
        text[c.i] == '{') {
      ++c.i;
      if (eat(&c, '}'))
        continue;
      do {
        key.n = 0;
        if ((s = string(&c, &key)) != TFM_OK || !eat(&c, ':'))
          break;
        ws(&c);
        size_t b = c.i;
        if ((s = skip(&c, 0)) != TFM_OK)
          break;
        tk_span *sp = key.n == 5 && !memcmp(key.s, "vocab", 5)    ? vocab
                      : key.n == 6 && !memcmp(key.s, "merges", 6) ? merges
                                                                  : NULL;
        if (sp && (text[b] == '{' || text[b] == '[')) {
          sp->found = true;
          sp->offset = b;
          sp->n = c.i - b;
        }
      } while (eat(&c, ','));
      if (s != TFM_OK || !eat(&c, '}'))
        break;
    } else if ((s = skip(&c, 0)) != TFM_OK)
      break;
  } while (eat(&c, ','));
  free(key.s);
  if (s == TFM_ERR_MEMORY)
    return s;
  /* A malformed file: leave it whole for jansson's message. */
  if (s != TFM_OK || !eat(&c, '}')) {
    vocab->found = merges->found = false;
    return TFM_OK;
  }
  return TFM_OK;
}

tfm_status tk_json_vocab_object(const char *text, const tk_span *sp,
                                tk_entries *out, const char *file,
                                const char *what) {
  scan c = {text + sp->offset, sp->n, 0, sp->offset, file, what};
  tfm_status s = reserve(out, sp->n);
  if (s != TFM_OK)
    return s;
  if (!eat(&c, '{'))
    return bad(&c, "an object of token: id");
  if (eat(&c, '}'))
    return TFM_OK;
  do {
    tk_entry e = {0};
    e.off = out->arena.n;
    if ((s = string(&c, &out->arena)) != TFM_OK)
      return s;
    e.len = out->arena.n - e.off;
    if (!eat(&c, ':'))
      return bad(&c, "':'");
    double v;
    if ((s = number(&c, &v, true)) != TFM_OK)
      return s;
    if (v < 0 || v > TK_MAX_ID)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: %s: the id of '%.*s' is not an integer from 0 to "
                      "%d",
                      file, what, (int)e.len, out->arena.s + e.off, TK_MAX_ID);
    e.id = (int64_t)v;
    if ((s = push_entry(out, &e)) != TFM_OK)
      return s;
  } while (eat(&c, ','));
  return eat(&c, '}') ? TFM_OK : bad(&c, "'}'");
}

tfm_status tk_json_vocab_list(const char *text, const tk_span *sp,
                              tk_entries *out, const char *file,
                              const char *what) {
  scan c = {text + sp->offset, sp->n, 0, sp->offset, file, what};
  tfm_status s = reserve(out, sp->n);
  if (s != TFM_OK)
    return s;
  if (!eat(&c, '['))
    return bad(&c, "a list of [piece, score]");
  if (eat(&c, ']'))
    return TFM_OK;
  do {
    tk_entry e = {0};
    if (!eat(&c, '['))
      return bad(&c, "[piece, score]");
    e.off = out->arena.n;
    if ((s = string(&c, &out->arena)) != TFM_OK)
      return s;
    e.len = out->arena.n - e.off;
    if (!eat(&c, ','))
      return bad(&c, "','");
    if ((s = number(&c, &e.score, false)) != TFM_OK)
      return s;
    /* (1e999 reads as infinity; `tokenizers` refuses it as out of range.) */
    if (!isfinite(e.score))
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: %s: the score of '%.*s' is not a finite number",
                      file, what, (int)e.len, out->arena.s + e.off);
    if (!eat(&c, ']'))
      return bad(&c, "']'");
    e.id = (int64_t)out->n;
    if ((s = push_entry(out, &e)) != TFM_OK)
      return s;
  } while (eat(&c, ','));
  return eat(&c, ']') ? TFM_OK : bad(&c, "']'");
}

tfm_status tk_json_merges(const char *text, const tk_span *sp, tk_entries *out,
                          const char *file, const char *what) {
  scan c = {text + sp->offset, sp->n, 0, sp->offset, file, what};
  tfm_status s = reserve(out, sp->n);
  if (s != TFM_OK)
    return s;
  if (!eat(&c, '['))
    return bad(&c, "a list of merges");
  if (eat(&c, ']'))
    return TFM_OK;
  do {
    tk_entry e = {0};
    e.off = out->arena.n;
    ws(&c);
    bool pair = c.i < c.n && c.s[c.i] == '[';
    if (pair)
      ++c.i;
    if ((s = string(&c, &out->arena)) != TFM_OK)
      return s;
    e.len = out->arena.n - e.off;
    if (pair) {
      if (!eat(&c, ','))
        return bad(&c, "','");
      e.off2 = out->arena.n;
      if ((s = string(&c, &out->arena)) != TFM_OK)
        return s;
      e.len2 = out->arena.n - e.off2;
      if (!eat(&c, ']'))
        return bad(&c, "']'");
    } else {
      /* "a b": split at the first space. */
      const char *p = memchr(out->arena.s + e.off, ' ', e.len);
      if (!p)
        return tfm_fail(TFM_ERR_FORMAT,
                        "%s: merge %zu ('%.*s') is not two tokens separated "
                        "by a space",
                        file, out->n + 1, (int)e.len, out->arena.s + e.off);
      size_t a = (size_t)(p - (out->arena.s + e.off));
      e.off2 = e.off + a + 1;
      e.len2 = e.len - a - 1;
      e.len = a;
    }
    if ((s = push_entry(out, &e)) != TFM_OK)
      return s;
  } while (eat(&c, ','));
  return eat(&c, ']') ? TFM_OK : bad(&c, "']'");
}
