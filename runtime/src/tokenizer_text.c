/*===- tokenizer_text.c - normalizers, pre-tokenizers, decoders -----------===*
 *
 * The text steps of Hugging Face tokenizers, after the `tokenizers` library's
 * semantics. Unicode knowledge comes from utf8proc (normalization forms,
 * general categories, lowercase) and PCRE2 (\p{L}, \p{N} in the
 * pre-tokenizers' patterns); both are loaded with dlopen at first use, as
 * the CUDA driver is, so an executable that never tokenizes needs neither.
 *===----------------------------------------------------------------------===*/
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer_internal.h"
#include "utf8_encode.h"

#include <dlfcn.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/*===- Buffers and lists --------------------------------------------------===*/

tfm_status tk_buf_add(tk_buf *b, const void *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n + 1)
      cap *= 2;
    char *p = tfm_malloc(cap);
    if (!p)
      return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
    if (b->n)
      memcpy(p, b->s, b->n);
    free(b->s);
    b->s = p;
    b->cap = cap;
  }
  if (n)
    memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
  return TFM_OK;
}

tfm_status tk_buf_cp(tk_buf *b, int32_t cp) {
  char u[4];
  size_t n = tfm_utf8_encode((uint32_t)cp, u);
  return tk_buf_add(b, u, n);
}

tfm_status tk_list_push(tk_list *l, const char *s, size_t n) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    tk_str *v = tfm_malloc(cap * sizeof *v);
    if (!v)
      return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
    if (l->n)
      memcpy(v, l->v, l->n * sizeof *v);
    free(l->v);
    l->v = v;
    l->cap = cap;
  }
  char *c = tfm_memdup(s, n);
  if (!c)
    return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
  l->v[l->n].s = c;
  l->v[l->n].n = n;
  ++l->n;
  return TFM_OK;
}

void tk_list_free(tk_list *l) {
  for (size_t i = 0; i < l->n; ++i)
    free(l->v[i].s);
  free(l->v);
  memset(l, 0, sizeof *l);
}

/*===- UTF-8 --------------------------------------------------------------===*/

size_t tk_utf8_len(const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  if (!n)
    return 0;
  if (s[0] < 0x80)
    return 1;
  size_t len;
  int32_t min;
  if ((s[0] & 0xE0) == 0xC0)
    len = 2, min = 0x80;
  else if ((s[0] & 0xF0) == 0xE0)
    len = 3, min = 0x800;
  else if ((s[0] & 0xF8) == 0xF0)
    len = 4, min = 0x10000;
  else
    return 0;
  if (len > n)
    return 0;
  int32_t cp = s[0] & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

bool tk_utf8_valid(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    size_t l = tk_utf8_len(s + i, n - i);
    if (!l)
      return false;
    i += l;
  }
  return true;
}

size_t tk_utf8_next(const char *str, size_t n, int32_t *cp) {
  const unsigned char *s = (const unsigned char *)str;
  size_t len = tk_utf8_len(str, n);
  if (!len) {
    *cp = 0xFFFD;
    return 1;
  }
  if (len == 1) {
    *cp = s[0];
    return 1;
  }
  int32_t c = s[0] & (0x7F >> len);
  for (size_t i = 1; i < len; ++i)
    c = (c << 6) | (s[i] & 0x3F);
  *cp = c;
  return len;
}

/*===- The libraries ------------------------------------------------------===*/

static struct {
  int loaded; /* 1: loaded, -1: failed (message kept); once, by any thread */
  char error[512];
  pcre2_code *(*compile)(PCRE2_SPTR, PCRE2_SIZE, uint32_t, int *, PCRE2_SIZE *,
                         pcre2_compile_context *);
  int (*error_message)(int, PCRE2_UCHAR *, PCRE2_SIZE);
  pcre2_match_data *(*match_data_create)(const pcre2_code *,
                                         pcre2_general_context *);
  int (*match)(const pcre2_code *, PCRE2_SPTR, PCRE2_SIZE, PCRE2_SIZE, uint32_t,
               pcre2_match_data *, pcre2_match_context *);
  PCRE2_SIZE *(*ovector)(pcre2_match_data *);
  void (*match_data_free)(pcre2_match_data *);
  void (*code_free)(pcre2_code *);
  int (*jit_compile)(pcre2_code *, uint32_t);
  utf8proc_category_t (*category)(utf8proc_int32_t);
  utf8proc_int32_t (*tolower)(utf8proc_int32_t);
  utf8proc_ssize_t (*map)(const utf8proc_uint8_t *, utf8proc_ssize_t,
                          utf8proc_uint8_t **, utf8proc_option_t);
  const char *(*errmsg)(utf8proc_ssize_t);
  utf8proc_bool (*grapheme_break)(utf8proc_int32_t, utf8proc_int32_t,
                                  utf8proc_int32_t *);
} lib;

static void *open_first(const char *const *names, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h)
      return h;
  }
  return NULL;
}

#define SYM(h, field, name)                                                    \
  do {                                                                         \
    *(void **)&lib.field = dlsym(h, name);                                     \
    if (!lib.field) {                                                          \
      snprintf(lib.error, sizeof lib.error,                                    \
               "tokenizer: %s lacks the function %s", libname, name);          \
      return -1;                                                               \
    }                                                                          \
  } while (0)

static int load_libs(void) {
  static const char *const pcre[] = {"libpcre2-8.so.0", "libpcre2-8.so"};
  static const char *const u8p[] = {"libutf8proc.so.3", "libutf8proc.so.2",
                                    "libutf8proc.so"};
  const char *libname = "libpcre2-8.so.0";
  void *h = open_first(pcre, 2);
  if (!h) {
    snprintf(lib.error, sizeof lib.error,
             "tokenizer: cannot load PCRE2 (libpcre2-8.so.0; Debian package "
             "libpcre2-8-0): %s",
             dlerror());
    return -1;
  }
  SYM(h, compile, "pcre2_compile_8");
  SYM(h, error_message, "pcre2_get_error_message_8");
  SYM(h, match_data_create, "pcre2_match_data_create_from_pattern_8");
  SYM(h, match, "pcre2_match_8");
  SYM(h, ovector, "pcre2_get_ovector_pointer_8");
  SYM(h, match_data_free, "pcre2_match_data_free_8");
  SYM(h, code_free, "pcre2_code_free_8");
  SYM(h, jit_compile, "pcre2_jit_compile_8");
  libname = "libutf8proc.so";
  h = open_first(u8p, 3);
  if (!h) {
    snprintf(lib.error, sizeof lib.error,
             "tokenizer: cannot load utf8proc (libutf8proc.so.2; Debian "
             "package libutf8proc2 or libutf8proc3): %s",
             dlerror());
    return -1;
  }
  SYM(h, category, "utf8proc_category");
  SYM(h, tolower, "utf8proc_tolower");
  SYM(h, map, "utf8proc_map");
  SYM(h, errmsg, "utf8proc_errmsg");
  SYM(h, grapheme_break, "utf8proc_grapheme_break_stateful");
  return 1;
}

static void load_once(void) {
  lib.loaded = load_libs();
  tk_byte_map_init();
}

tfm_status tk_libs_load(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, load_once);
  if (lib.loaded < 0)
    return tfm_fail(TFM_ERR_IO, "%s", lib.error);
  return TFM_OK;
}

/*===- Characters ---------------------------------------------------------===*/

int32_t tk_byte_char[256];
static int32_t char_byte[324]; /* inverse for code points < 324; -1: none */

void tk_byte_map_init(void) {
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) ||
                     (b >= 174 && b <= 255);
    tk_byte_char[b] = printable ? b : 256 + n++;
  }
  for (int c = 0; c < 324; ++c)
    char_byte[c] = -1;
  for (int b = 0; b < 256; ++b)
    char_byte[tk_byte_char[b]] = b;
}

tfm_status tk_bytes_to_chars(const char *s, size_t n, tk_buf *out) {
  for (size_t i = 0; i < n; ++i) {
    tfm_status st = tk_buf_cp(out, tk_byte_char[(unsigned char)s[i]]);
    if (st != TFM_OK)
      return st;
  }
  return TFM_OK;
}

static utf8proc_category_t category(int32_t cp) { return lib.category(cp); }

int tk_category(int32_t cp) { return (int)lib.category(cp); }

int32_t tk_tolower(int32_t cp) { return lib.tolower(cp); }

int32_t tk_nfd_first(int32_t cp) {
  char u[4];
  size_t n = tfm_utf8_encode((uint32_t)cp, u);
  utf8proc_uint8_t *d = NULL;
  utf8proc_ssize_t r = lib.map((const utf8proc_uint8_t *)u, (utf8proc_ssize_t)n,
                               &d, UTF8PROC_DECOMPOSE);
  int32_t first = cp;
  if (r > 0 && d)
    tk_utf8_next((const char *)d, (size_t)r, &first);
  free(d);
  return first;
}

bool tk_is_whitespace(int32_t cp) {
  if ((cp >= 9 && cp <= 13) || cp == 0x85)
    return true;
  utf8proc_category_t c = category(cp);
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL ||
         c == UTF8PROC_CATEGORY_ZP;
}

bool tk_is_alnum(int32_t cp) {
  utf8proc_category_t c = category(cp);
  return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
         (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

/* Punctuation as BERT sees it: ASCII punctuation and Unicode P*. */
static bool is_punctuation(int32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) ||
      (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
    return true;
  utf8proc_category_t c = category(cp);
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

static bool is_mark(int32_t cp) {
  utf8proc_category_t c = category(cp);
  return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC ||
         c == UTF8PROC_CATEGORY_ME;
}

/* BERT's "Chinese character": the CJK Unified Ideographs blocks, as BERT's
 * tokenizer defines them. */
static bool is_cjk(int32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/*===- Regular expressions ------------------------------------------------===*/

struct tk_regex {
  pcre2_code *code;
  const char *literal; /* a String pattern: matched as is */
  size_t literal_len;
  char *owned; /* what `literal` points to when allocated */
  bool bytes;  /* TK_RE_BYTES: one byte is one character */
};

static tfm_status compile_pattern(tk_regex *r, const char *pattern, size_t len,
                                  uint32_t opts, tk_regex **out,
                                  const char *what);

tfm_status tk_regex_compile(const char *pattern, bool literal, tk_regex **out,
                            const char *what) {
  tfm_status s = tk_libs_load();
  if (s != TFM_OK)
    return s;
  tk_regex *r = tfm_calloc(1, sizeof *r);
  if (!r)
    return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
  if (literal) {
    r->literal = r->owned = tfm_strdup(pattern);
    r->literal_len = strlen(pattern);
    if (!r->owned) {
      free(r);
      return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
    }
    if (!r->literal_len) {
      tk_regex_free(r);
      return tfm_fail(TFM_ERR_FORMAT, "%s: the pattern is empty", what);
    }
    *out = r;
    return TFM_OK;
  }
  return compile_pattern(r, pattern, strlen(pattern), PCRE2_UTF | PCRE2_UCP,
                         out, what);
}

tfm_status tk_regex_compile_mode(const char *pattern, size_t len,
                                 tk_regex_mode mode, tk_regex **out,
                                 const char *what) {
  tfm_status s = tk_libs_load();
  if (s != TFM_OK)
    return s;
  tk_regex *r = tfm_calloc(1, sizeof *r);
  if (!r)
    return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
  r->bytes = mode == TK_RE_BYTES;
  uint32_t opts = mode == TK_RE_UCP   ? PCRE2_UTF | PCRE2_UCP
                  : mode == TK_RE_UTF ? PCRE2_UTF | PCRE2_DOLLAR_ENDONLY
                                      : PCRE2_DOLLAR_ENDONLY;
  return compile_pattern(r, pattern, len, opts, out, what);
}

static tfm_status compile_pattern(tk_regex *r, const char *pattern, size_t len,
                                  uint32_t opts, tk_regex **out,
                                  const char *what) {
  int err;
  PCRE2_SIZE off;
  r->code = lib.compile((PCRE2_SPTR)pattern, len, opts, &err, &off, NULL);
  if (!r->code) {
    PCRE2_UCHAR msg[256];
    lib.error_message(err, msg, sizeof msg);
    free(r);
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: the regular expression '%s' does not compile at "
                    "offset %zu: %s",
                    what, pattern, (size_t)off, (const char *)msg);
  }
  lib.jit_compile(r->code, PCRE2_JIT_COMPLETE); /* optional: may fail */
  *out = r;
  return TFM_OK;
}

void tk_regex_free(tk_regex *r) {
  if (!r)
    return;
  if (r->code)
    lib.code_free(r->code);
  free(r->owned);
  free(r);
}

int tk_regex_find(const tk_regex *r, const char *s, size_t n, size_t start,
                  size_t *b, size_t *e) {
  if (r->literal) {
    for (size_t i = start; i + r->literal_len <= n; ++i)
      if (!memcmp(s + i, r->literal, r->literal_len)) {
        *b = i;
        *e = i + r->literal_len;
        return 1;
      }
    return 0;
  }
  pcre2_match_data *md = lib.match_data_create(r->code, NULL);
  if (!md) {
    tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
    return -1;
  }
  for (;;) {
    int rc = lib.match(r->code, (PCRE2_SPTR)s, n, start, 0, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) {
      lib.match_data_free(md);
      return 0;
    }
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      lib.error_message(rc, msg, sizeof msg);
      tfm_fail(TFM_ERR_ARGUMENT, "tokenizer: regular expression: %s",
               (const char *)msg);
      lib.match_data_free(md);
      return -1;
    }
    PCRE2_SIZE *ov = lib.ovector(md);
    if (ov[1] > ov[0]) {
      *b = ov[0];
      *e = ov[1];
      lib.match_data_free(md);
      return 1;
    }
    /* An empty match: look again one character further. */
    if (ov[0] >= n) {
      lib.match_data_free(md);
      return 0;
    }
    size_t l = r->bytes ? 1 : tk_utf8_len(s + ov[0], n - ov[0]);
    start = ov[0] + (l ? l : 1);
  }
}

/*===- Reading the steps --------------------------------------------------===*/

static tfm_status push_step(tk_steps *s, const tk_step *st) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 4;
    tk_step *v = tfm_malloc(cap * sizeof *v);
    if (!v)
      return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
    if (s->n)
      memcpy(v, s->v, s->n * sizeof *v);
    free(s->v);
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = *st;
  return TFM_OK;
}

static void charsmap_free(tk_charsmap *m) {
  if (!m)
    return;
  free(m->units);
  free(m->normalized);
  free(m);
}

void tk_steps_free(tk_steps *s) {
  for (size_t i = 0; i < s->n; ++i) {
    tk_regex_free(s->v[i].re);
    free(s->v[i].text);
    charsmap_free(s->v[i].map);
  }
  free(s->v);
  memset(s, 0, sizeof *s);
}

static bool get_bool(const json_t *j, const char *key, bool dflt) {
  const json_t *v = json_object_get(j, key);
  return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* A string field; NULL if absent or not a string. */
static const char *get_str(const json_t *j, const char *key) {
  return json_string_value(json_object_get(j, key));
}

static tfm_status dup_text(tk_step *st, const char *s, const char *file,
                           const char *what, const char *key) {
  if (!s)
    return tfm_fail(TFM_ERR_FORMAT, "%s: %s lacks the string '%s'", file, what,
                    key);
  st->text = tfm_strdup(s);
  return st->text ? TFM_OK
                  : tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
}

/* "pattern": {"String": s} or {"Regex": r}. */
static tfm_status read_pattern(const json_t *j, tk_step *st, const char *file,
                               const char *what) {
  const json_t *p = json_object_get(j, "pattern");
  const char *lit = get_str(p, "String"), *re = get_str(p, "Regex");
  if (!lit && !re)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: %s lacks a pattern {\"String\": ...} or "
                    "{\"Regex\": ...}",
                    file, what);
  char where[512];
  snprintf(where, sizeof where, "%s: %s", file, what);
  return tk_regex_compile(lit ? lit : re, lit != NULL, &st->re, where);
}

/* Standard base64 (RFC 4648, '=' padding optional); NULL if `in` is not
 * base64. */
static unsigned char *base64_decode(const char *in, size_t n, size_t *len) {
  unsigned char *out = tfm_malloc(n / 4 * 3 + 3);
  if (!out)
    return NULL;
  uint32_t acc = 0;
  int bits = 0;
  size_t o = 0, i = 0;
  for (; i < n && in[i] != '='; ++i) {
    char c = in[i];
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+'             ? 62
            : c == '/'             ? 63
                                   : -1;
    if (v < 0) {
      free(out);
      return NULL;
    }
    acc = acc << 6 | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (unsigned char)(acc >> bits);
      acc &= (1u << bits) - 1;
    }
  }
  for (; i < n; ++i)
    if (in[i] != '=') {
      free(out);
      return NULL;
    }
  *len = o;
  return out;
}

/* Reads a precompiled_charsmap: a little-endian uint32 holding the trie's
 * size in bytes, the trie's 32-bit units, then the replacement strings (as
 * the spm_precompiled crate that Hugging Face's tokenizers use). */
static tfm_status read_charsmap(const char *b64, tk_step *st, const char *file,
                                const char *what) {
  size_t n = 0;
  unsigned char *blob = base64_decode(b64, strlen(b64), &n);
  if (!blob && *b64 == 0)
    blob = tfm_malloc(1);
  if (!blob)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: %s: precompiled_charsmap is not base64", file, what);
  tfm_status s = TFM_OK;
  uint32_t trie_bytes = 0;
  if (n >= 4)
    trie_bytes = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 |
                 (uint32_t)blob[2] << 16 | (uint32_t)blob[3] << 24;
  size_t units = trie_bytes / 4;
  if (n < 4 || units > (n - 4) / 4 || units == 0) {
    s = tfm_fail(TFM_ERR_FORMAT,
                 "%s: %s: precompiled_charsmap is not a charsmap (%zu bytes; "
                 "it starts with the trie's size, then the trie)",
                 file, what, n);
    goto done;
  }
  size_t rest = n - 4 - units * 4;
  const char *norm = (const char *)blob + 4 + units * 4;
  if (!tk_utf8_valid(norm, rest)) {
    s = tfm_fail(TFM_ERR_FORMAT,
                 "%s: %s: the replacement strings of precompiled_charsmap "
                 "are not valid UTF-8",
                 file, what);
    goto done;
  }
  tk_charsmap *m = tfm_calloc(1, sizeof *m);
  if (!m || !(m->units = tfm_malloc(units * sizeof *m->units)) ||
      !(m->normalized = tfm_malloc(rest + 1))) {
    charsmap_free(m);
    s = tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
    goto done;
  }
  for (size_t i = 0; i < units; ++i) {
    const unsigned char *u = blob + 4 + i * 4;
    m->units[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
                  (uint32_t)u[3] << 24;
  }
  m->num_units = units;
  memcpy(m->normalized, norm, rest);
  m->normalized[rest] = 0;
  m->normalized_len = rest;
  st->map = m;
done:
  free(blob);
  return s;
}

typedef enum { NORMALIZER, PRE_TOKENIZER, DECODER } step_family;

static tfm_status read_step(const json_t *j, tk_steps *out, const char *file,
                            step_family fam) {
  static const char *const fam_name[] = {"normalizer", "pre_tokenizer",
                                         "decoder"};
  static const char *const seq_key[] = {"normalizers", "pretokenizers",
                                        "decoders"};
  if (json_is_null(j) || !j)
    return TFM_OK;
  const char *type = get_str(j, "type");
  if (!json_is_object(j) || !type)
    return tfm_fail(TFM_ERR_FORMAT, "%s: the %s is not an object with a type",
                    file, fam_name[fam]);
  if (!strcmp(type, "Sequence")) {
    const json_t *list = json_object_get(j, seq_key[fam]);
    if (!json_is_array(list))
      return tfm_fail(TFM_ERR_FORMAT, "%s: the %s Sequence lacks the list '%s'",
                      file, fam_name[fam], seq_key[fam]);
    for (size_t i = 0; i < json_array_size(list); ++i) {
      tfm_status s = read_step(json_array_get(list, i), out, file, fam);
      if (s != TFM_OK)
        return s;
    }
    return TFM_OK;
  }
  tk_step st;
  memset(&st, 0, sizeof st);
  char what[128];
  snprintf(what, sizeof what, "the %s %s", fam_name[fam], type);
  tfm_status s = TFM_OK;
  bool known = true;
  if (fam == NORMALIZER) {
    if (!strcmp(type, "NFC"))
      st.kind = TK_N_NFC;
    else if (!strcmp(type, "NFD"))
      st.kind = TK_N_NFD;
    else if (!strcmp(type, "NFKC"))
      st.kind = TK_N_NFKC;
    else if (!strcmp(type, "NFKD"))
      st.kind = TK_N_NFKD;
    else if (!strcmp(type, "Lowercase"))
      st.kind = TK_N_LOWERCASE;
    else if (!strcmp(type, "StripAccents"))
      st.kind = TK_N_STRIP_ACCENTS;
    else if (!strcmp(type, "Strip")) {
      st.kind = TK_N_STRIP;
      st.left = get_bool(j, "strip_left", true);
      st.right = get_bool(j, "strip_right", true);
    } else if (!strcmp(type, "Replace")) {
      st.kind = TK_N_REPLACE;
      if ((s = read_pattern(j, &st, file, what)) == TFM_OK)
        s = dup_text(&st, get_str(j, "content"), file, what, "content");
    } else if (!strcmp(type, "Prepend")) {
      st.kind = TK_N_PREPEND;
      s = dup_text(&st, get_str(j, "prepend"), file, what, "prepend");
    } else if (!strcmp(type, "BertNormalizer")) {
      st.kind = TK_N_BERT;
      st.clean_text = get_bool(j, "clean_text", true);
      st.chinese_chars = get_bool(j, "handle_chinese_chars", true);
      st.lowercase = get_bool(j, "lowercase", true);
      st.strip_accents = get_bool(j, "strip_accents", st.lowercase);
    } else if (!strcmp(type, "Precompiled")) {
      st.kind = TK_N_PRECOMPILED;
      const char *map = get_str(j, "precompiled_charsmap");
      if (!map)
        return tfm_fail(TFM_ERR_FORMAT,
                        "%s: %s lacks the string 'precompiled_charsmap'", file,
                        what);
      s = read_charsmap(map, &st, file, what);
    } else
      known = false;
  } else if (fam == PRE_TOKENIZER) {
    if (!strcmp(type, "ByteLevel")) {
      st.kind = TK_P_BYTELEVEL;
      st.flag = get_bool(j, "add_prefix_space", true);
      st.use_regex = get_bool(j, "use_regex", true);
      if (st.use_regex)
        s = tk_regex_compile("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| "
                             "?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
                             false, &st.re, what);
    } else if (!strcmp(type, "Split")) {
      st.kind = TK_P_SPLIT;
      st.flag = get_bool(j, "invert", false);
      const char *b = get_str(j, "behavior");
      if (!b)
        b = "";
      if (!strcmp(b, "Removed"))
        st.behavior = TK_REMOVED;
      else if (!strcmp(b, "Isolated"))
        st.behavior = TK_ISOLATED;
      else if (!strcmp(b, "MergedWithPrevious"))
        st.behavior = TK_MERGED_WITH_PREVIOUS;
      else if (!strcmp(b, "MergedWithNext"))
        st.behavior = TK_MERGED_WITH_NEXT;
      else if (!strcmp(b, "Contiguous"))
        st.behavior = TK_CONTIGUOUS;
      else
        return tfm_fail(TFM_ERR_FORMAT,
                        "%s: %s has behavior '%s'; known: Removed, Isolated, "
                        "MergedWithPrevious, MergedWithNext, Contiguous",
                        file, what, b);
      s = read_pattern(j, &st, file, what);
    } else if (!strcmp(type, "Metaspace")) {
      st.kind = TK_P_METASPACE;
      st.flag = get_bool(j, "split", true);
      const char *scheme = get_str(j, "prepend_scheme");
      st.prepend = get_bool(j, "add_prefix_space", true) ? TK_PREPEND_ALWAYS
                                                         : TK_PREPEND_NEVER;
      if (scheme && !strcmp(scheme, "first"))
        st.prepend = TK_PREPEND_FIRST;
      else if (scheme && !strcmp(scheme, "never"))
        st.prepend = TK_PREPEND_NEVER;
      else if (scheme && !strcmp(scheme, "always"))
        st.prepend = TK_PREPEND_ALWAYS;
      const char *rep = get_str(j, "replacement");
      s = dup_text(&st, rep ? rep : "\xE2\x96\x81", file, what, "replacement");
    } else if (!strcmp(type, "BertPreTokenizer"))
      st.kind = TK_P_BERT;
    else if (!strcmp(type, "Whitespace"))
      st.kind = TK_P_WHITESPACE;
    else if (!strcmp(type, "WhitespaceSplit"))
      st.kind = TK_P_WHITESPACE_SPLIT;
    else if (!strcmp(type, "Digits")) {
      st.kind = TK_P_DIGITS;
      st.flag = get_bool(j, "individual_digits", false);
    } else if (!strcmp(type, "Punctuation")) {
      st.kind = TK_P_PUNCTUATION;
      const char *b = get_str(j, "behavior");
      st.behavior = TK_ISOLATED;
      if (b && strcmp(b, "Isolated"))
        return tfm_fail(TFM_ERR_FORMAT,
                        "%s: %s: behavior '%s' is not supported (only "
                        "Isolated)",
                        file, what, b);
    } else
      known = false;
  } else {
    if (!strcmp(type, "ByteLevel"))
      st.kind = TK_D_BYTELEVEL;
    else if (!strcmp(type, "Metaspace")) {
      st.kind = TK_D_METASPACE;
      const char *scheme = get_str(j, "prepend_scheme");
      st.prepend = get_bool(j, "add_prefix_space", true) ? TK_PREPEND_ALWAYS
                                                         : TK_PREPEND_NEVER;
      if (scheme)
        st.prepend =
            !strcmp(scheme, "never") ? TK_PREPEND_NEVER : TK_PREPEND_ALWAYS;
      const char *rep = get_str(j, "replacement");
      s = dup_text(&st, rep ? rep : "\xE2\x96\x81", file, what, "replacement");
    } else if (!strcmp(type, "WordPiece")) {
      st.kind = TK_D_WORDPIECE;
      st.flag = get_bool(j, "cleanup", true);
      const char *p = get_str(j, "prefix");
      s = dup_text(&st, p ? p : "##", file, what, "prefix");
    } else if (!strcmp(type, "Replace")) {
      st.kind = TK_D_REPLACE;
      if ((s = read_pattern(j, &st, file, what)) == TFM_OK)
        s = dup_text(&st, get_str(j, "content"), file, what, "content");
    } else if (!strcmp(type, "ByteFallback"))
      st.kind = TK_D_BYTE_FALLBACK;
    else if (!strcmp(type, "Fuse"))
      st.kind = TK_D_FUSE;
    else if (!strcmp(type, "Strip")) {
      st.kind = TK_D_STRIP;
      const json_t *a = json_object_get(j, "start"),
                   *b = json_object_get(j, "stop");
      st.start = json_is_integer(a) ? (int)json_integer_value(a) : 0;
      st.stop = json_is_integer(b) ? (int)json_integer_value(b) : 0;
      const char *c = get_str(j, "content");
      s = dup_text(&st, c ? c : " ", file, what, "content");
    } else if (!strcmp(type, "BPEDecoder")) {
      st.kind = TK_D_BPE;
      const char *c = get_str(j, "suffix");
      s = dup_text(&st, c ? c : "</w>", file, what, "suffix");
    } else
      known = false;
  }
  if (!known)
    return tfm_fail(TFM_ERR_FORMAT, "%s: %s '%s' is not supported", file,
                    fam_name[fam], type);
  if (s == TFM_OK)
    s = push_step(out, &st);
  if (s != TFM_OK) {
    tk_regex_free(st.re);
    free(st.text);
    charsmap_free(st.map);
  }
  return s;
}

tfm_status tk_read_normalizer(const json_t *j, tk_steps *out,
                              const char *file) {
  return read_step(j, out, file, NORMALIZER);
}
tfm_status tk_read_pre_tokenizer(const json_t *j, tk_steps *out,
                                 const char *file) {
  return read_step(j, out, file, PRE_TOKENIZER);
}
tfm_status tk_read_decoder(const json_t *j, tk_steps *out, const char *file) {
  return read_step(j, out, file, DECODER);
}

/*===- Normalizers --------------------------------------------------------===*/

static tfm_status utf8proc_form(const char *in, size_t n, utf8proc_option_t o,
                                tk_buf *out) {
  utf8proc_uint8_t *dst = NULL;
  utf8proc_ssize_t r = lib.map((const utf8proc_uint8_t *)in,
                               (utf8proc_ssize_t)n, &dst, UTF8PROC_STABLE | o);
  if (r < 0)
    return tfm_fail(TFM_ERR_ARGUMENT, "tokenizer: normalization: %s",
                    lib.errmsg(r));
  out->n = 0;
  tfm_status s = tk_buf_add(out, dst, (size_t)r);
  free(dst);
  return s;
}

/* Replaces every match of `re` in in[0, n) with `with`. */
static tfm_status replace_all(const tk_regex *re, const char *with,
                              const char *in, size_t n, tk_buf *out) {
  size_t pos = 0, b, e;
  int f;
  tfm_status s = TFM_OK;
  while (s == TFM_OK && (f = tk_regex_find(re, in, n, pos, &b, &e)) == 1) {
    if ((s = tk_buf_add(out, in + pos, b - pos)) == TFM_OK)
      s = tk_buf_add(out, with, strlen(with));
    pos = e;
  }
  if (s != TFM_OK)
    return s;
  if (f < 0)
    return TFM_ERR_ARGUMENT;
  return tk_buf_add(out, in + pos, n - pos);
}

/* The replacement of the shortest key of the trie that is a prefix of
 * s[0, n), or NULL (darts-clone's common prefix search, first result, as
 * spm_precompiled's `transform`). The trie's unit: bits 0-7 the label (bit
 * 31 set on a leaf's value unit), bit 8 "has a leaf", bit 9 the offset's
 * scale, bits 10-31 the offset to the children. */
static const char *charsmap_find(const tk_charsmap *m, const char *s,
                                 size_t n) {
  const uint32_t *u = m->units;
  size_t pos = 0;
#define OFFSET(x) (((size_t)(x) >> 10) << (((x) & (1u << 9)) >> 6))
  pos ^= OFFSET(u[0]);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = (unsigned char)s[i];
    if (!c)
      return NULL;
    pos ^= c;
    if (pos >= m->num_units)
      return NULL;
    uint32_t unit = u[pos];
    if ((unit & ((1u << 31) | 0xFF)) != c)
      return NULL;
    pos ^= OFFSET(unit);
    if (pos >= m->num_units)
      return NULL;
    if ((unit >> 8) & 1) {
      size_t v = u[pos] & ((1u << 31) - 1);
      return v <= m->normalized_len ? m->normalized + v : NULL;
    }
  }
#undef OFFSET
  return NULL;
}

/* Hugging Face's Precompiled normalizer: per extended grapheme cluster, the
 * cluster's replacement if it is shorter than 6 bytes and the trie has one,
 * else each character's replacement or the character itself. */
static tfm_status precompiled(const tk_charsmap *m, const char *in, size_t n,
                              tk_buf *out) {
  tfm_status s = TFM_OK;
  utf8proc_int32_t state = 0;
  size_t g = 0; /* the cluster's start */
  while (g < n && s == TFM_OK) {
    int32_t prev, cp;
    size_t e = g + tk_utf8_next(in + g, n - g, &prev);
    while (e < n) {
      size_t l = tk_utf8_next(in + e, n - e, &cp);
      if (lib.grapheme_break(prev, cp, &state))
        break;
      prev = cp;
      e += l;
    }
    const char *r = e - g < 6 ? charsmap_find(m, in + g, e - g) : NULL;
    if (r) {
      s = tk_buf_add(out, r, strlen(r));
    } else {
      for (size_t i = g; i < e && s == TFM_OK;) {
        size_t l = tk_utf8_next(in + i, e - i, &cp);
        r = charsmap_find(m, in + i, l);
        s = r ? tk_buf_add(out, r, strlen(r)) : tk_buf_add(out, in + i, l);
        i += l;
      }
    }
    g = e;
  }
  return s;
}

static tfm_status normalize_one(const tk_step *st, const char *in, size_t n,
                                tk_buf *out) {
  tfm_status s = TFM_OK;
  int32_t cp;
  switch (st->kind) {
  case TK_N_NFC:
    return utf8proc_form(in, n, UTF8PROC_COMPOSE, out);
  case TK_N_NFD:
    return utf8proc_form(in, n, UTF8PROC_DECOMPOSE, out);
  case TK_N_NFKC:
    return utf8proc_form(in, n, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out);
  case TK_N_NFKD:
    return utf8proc_form(in, n, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, out);
  case TK_N_LOWERCASE:
    for (size_t i = 0; i < n && s == TFM_OK;) {
      i += tk_utf8_next(in + i, n - i, &cp);
      s = tk_buf_cp(out, lib.tolower(cp));
    }
    return s;
  case TK_N_STRIP_ACCENTS:
    for (size_t i = 0; i < n && s == TFM_OK;) {
      size_t l = tk_utf8_next(in + i, n - i, &cp);
      if (!is_mark(cp))
        s = tk_buf_add(out, in + i, l);
      i += l;
    }
    return s;
  case TK_N_STRIP: {
    size_t b = 0, e = n;
    while (st->left && b < e) {
      size_t l = tk_utf8_next(in + b, e - b, &cp);
      if (!tk_is_whitespace(cp))
        break;
      b += l;
    }
    while (st->right && e > b) {
      size_t k = e - 1;
      while (k > b && ((unsigned char)in[k] & 0xC0) == 0x80)
        --k;
      tk_utf8_next(in + k, e - k, &cp);
      if (!tk_is_whitespace(cp))
        break;
      e = k;
    }
    return tk_buf_add(out, in + b, e - b);
  }
  case TK_N_REPLACE:
    return replace_all(st->re, st->text, in, n, out);
  case TK_N_PREPEND:
    if (n && (s = tk_buf_add(out, st->text, strlen(st->text))) != TFM_OK)
      return s;
    return tk_buf_add(out, in, n);
  case TK_N_BERT: {
    tk_buf a = {0};
    for (size_t i = 0; i < n && s == TFM_OK;) {
      size_t l = tk_utf8_next(in + i, n - i, &cp);
      i += l;
      if (st->clean_text) {
        if (cp == 0 || cp == 0xFFFD)
          continue;
        bool ws = cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' ||
                  category(cp) == UTF8PROC_CATEGORY_ZS;
        if (ws) {
          s = tk_buf_cp(&a, ' ');
          continue;
        }
        utf8proc_category_t c = category(cp);
        if (c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF ||
            c == UTF8PROC_CATEGORY_CN || c == UTF8PROC_CATEGORY_CO)
          continue;
      }
      if (st->chinese_chars && is_cjk(cp)) {
        if ((s = tk_buf_cp(&a, ' ')) == TFM_OK &&
            (s = tk_buf_cp(&a, cp)) == TFM_OK)
          s = tk_buf_cp(&a, ' ');
        continue;
      }
      s = tk_buf_cp(&a, cp);
    }
    if (s == TFM_OK && st->strip_accents) {
      tk_buf d = {0};
      if ((s = utf8proc_form(a.s ? a.s : "", a.n, UTF8PROC_DECOMPOSE, &d)) ==
          TFM_OK) {
        a.n = 0;
        for (size_t i = 0; i < d.n && s == TFM_OK;) {
          size_t l = tk_utf8_next(d.s + i, d.n - i, &cp);
          if (category(cp) != UTF8PROC_CATEGORY_MN)
            s = tk_buf_add(&a, d.s + i, l);
          i += l;
        }
      }
      free(d.s);
    }
    if (s == TFM_OK && st->lowercase) {
      tk_step lower = {.kind = TK_N_LOWERCASE};
      s = normalize_one(&lower, a.s ? a.s : "", a.n, out);
    } else if (s == TFM_OK)
      s = tk_buf_add(out, a.s ? a.s : "", a.n);
    free(a.s);
    return s;
  }
  case TK_N_PRECOMPILED:
    return precompiled(st->map, in, n, out);
  default:
    return tfm_fail(TFM_ERR_ARGUMENT, "tokenizer: not a normalizer");
  }
}

tfm_status tk_normalize(const tk_steps *steps, const char *in, size_t n,
                        tk_buf *out) {
  tk_buf cur = {0}, next = {0};
  tfm_status s = tk_buf_add(&cur, in, n);
  for (size_t i = 0; i < steps->n && s == TFM_OK; ++i) {
    next.n = 0;
    if ((s = tk_buf_add(&next, "", 0)) != TFM_OK)
      break;
    s = normalize_one(&steps->v[i], cur.s, cur.n, &next);
    tk_buf t = cur;
    cur = next;
    next = t;
  }
  free(next.s);
  if (s != TFM_OK) {
    free(cur.s);
    return s;
  }
  *out = cur;
  return TFM_OK;
}

/*===- Pre-tokenizers -----------------------------------------------------===*/

/* A piece of the text as a pre-tokenizer splits it: [b, e), a match or not. */
typedef struct seg {
  size_t b, e;
  bool match;
} seg;

typedef struct segs {
  seg *v;
  size_t n, cap;
} segs;

static tfm_status seg_push(segs *s, size_t b, size_t e, bool match) {
  if (b == e)
    return TFM_OK;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    seg *v = tfm_malloc(cap * sizeof *v);
    if (!v)
      return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
    if (s->n)
      memcpy(v, s->v, s->n * sizeof *v);
    free(s->v);
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = (seg){b, e, match};
  return TFM_OK;
}

/* Applies a split behavior to segments covering `str` (the `tokenizers`
 * library's SplitDelimiterBehavior). */
static tfm_status emit_segments(const char *str, segs *sg,
                                tk_split_behavior how, tk_list *out) {
  segs r = {0};
  tfm_status s = TFM_OK;
  bool prev = false;
  switch (how) {
  case TK_REMOVED:
    for (size_t i = 0; i < sg->n && s == TFM_OK; ++i)
      if (!sg->v[i].match)
        s = seg_push(&r, sg->v[i].b, sg->v[i].e, false);
    break;
  case TK_ISOLATED:
    for (size_t i = 0; i < sg->n && s == TFM_OK; ++i)
      s = seg_push(&r, sg->v[i].b, sg->v[i].e, false);
    break;
  case TK_MERGED_WITH_PREVIOUS:
    for (size_t i = 0; i < sg->n && s == TFM_OK; ++i) {
      if (sg->v[i].match && !prev && r.n)
        r.v[r.n - 1].e = sg->v[i].e;
      else
        s = seg_push(&r, sg->v[i].b, sg->v[i].e, false);
      prev = sg->v[i].match;
    }
    break;
  case TK_MERGED_WITH_NEXT:
    for (size_t k = sg->n; k-- > 0 && s == TFM_OK;) {
      if (sg->v[k].match && !prev && r.n)
        r.v[r.n - 1].b = sg->v[k].b;
      else
        s = seg_push(&r, sg->v[k].b, sg->v[k].e, false);
      prev = sg->v[k].match;
    }
    for (size_t i = 0; i < r.n / 2; ++i) {
      seg t = r.v[i];
      r.v[i] = r.v[r.n - 1 - i];
      r.v[r.n - 1 - i] = t;
    }
    break;
  case TK_CONTIGUOUS:
    for (size_t i = 0; i < sg->n && s == TFM_OK; ++i) {
      if (i && sg->v[i].match == prev && r.n)
        r.v[r.n - 1].e = sg->v[i].e;
      else
        s = seg_push(&r, sg->v[i].b, sg->v[i].e, false);
      prev = sg->v[i].match;
    }
    break;
  }
  for (size_t i = 0; i < r.n && s == TFM_OK; ++i)
    s = tk_list_push(out, str + r.v[i].b, r.v[i].e - r.v[i].b);
  free(r.v);
  return s;
}

/* Segments of `str` by a regex (invert: the matches are the gaps). */
static tfm_status regex_segments(const tk_regex *re, const char *str, size_t n,
                                 bool invert, segs *sg) {
  size_t pos = 0, b, e;
  int f;
  tfm_status s = TFM_OK;
  while (s == TFM_OK && (f = tk_regex_find(re, str, n, pos, &b, &e)) == 1) {
    if ((s = seg_push(sg, pos, b, invert)) == TFM_OK)
      s = seg_push(sg, b, e, !invert);
    pos = e;
  }
  if (s != TFM_OK)
    return s;
  if (f < 0)
    return TFM_ERR_ARGUMENT;
  return seg_push(sg, pos, n, invert);
}

/* Segments by a character class: 0 no, 1 yes (each char its own match when
 * `single`). */
typedef bool (*char_pred)(int32_t);
static tfm_status char_segments(const char *str, size_t n, char_pred pred,
                                bool single, segs *sg) {
  tfm_status s = TFM_OK;
  size_t start = 0;
  int cur = -1;
  for (size_t i = 0; i < n && s == TFM_OK;) {
    int32_t cp;
    size_t l = tk_utf8_next(str + i, n - i, &cp);
    int m = pred(cp) ? 1 : 0;
    if (cur >= 0 && (m != cur || (m && single))) {
      s = seg_push(sg, start, i, cur == 1);
      start = i;
    }
    cur = m;
    i += l;
  }
  if (s == TFM_OK && cur >= 0)
    s = seg_push(sg, start, n, cur == 1);
  return s;
}

static bool is_digit(int32_t cp) {
  return category(cp) == UTF8PROC_CATEGORY_ND || (cp >= '0' && cp <= '9');
}

static tfm_status pre_tokenize_one(const tk_step *st, const tk_str *p,
                                   bool first, tk_list *out) {
  segs sg = {0};
  tfm_status s = TFM_OK;
  switch (st->kind) {
  case TK_P_BYTELEVEL: {
    tk_buf text = {0};
    if (st->flag && (p->n == 0 || p->s[0] != ' '))
      s = tk_buf_add(&text, " ", 1);
    if (s == TFM_OK)
      s = tk_buf_add(&text, p->s, p->n);
    tk_list parts = {0};
    if (s == TFM_OK && st->use_regex) {
      if ((s = regex_segments(st->re, text.s, text.n, false, &sg)) == TFM_OK)
        s = emit_segments(text.s, &sg, TK_ISOLATED, &parts);
    } else if (s == TFM_OK)
      s = tk_list_push(&parts, text.s, text.n);
    for (size_t i = 0; i < parts.n && s == TFM_OK; ++i) {
      tk_buf m = {0};
      if ((s = tk_bytes_to_chars(parts.v[i].s, parts.v[i].n, &m)) == TFM_OK)
        s = tk_list_push(out, m.s ? m.s : "", m.n);
      free(m.s);
    }
    tk_list_free(&parts);
    free(text.s);
    break;
  }
  case TK_P_SPLIT:
    if ((s = regex_segments(st->re, p->s, p->n, st->flag, &sg)) == TFM_OK)
      s = emit_segments(p->s, &sg, st->behavior, out);
    break;
  case TK_P_METASPACE: {
    tk_buf t = {0};
    size_t rl = strlen(st->text);
    bool prepend = st->prepend == TK_PREPEND_ALWAYS ||
                   (st->prepend == TK_PREPEND_FIRST && first);
    /* As `tokenizers`: no prefix where the text, spaces replaced, starts
     * with the replacement already. */
    bool starts =
        (p->n && p->s[0] == ' ') || (p->n >= rl && !memcmp(p->s, st->text, rl));
    if (prepend && !starts)
      s = tk_buf_add(&t, st->text, rl);
    for (size_t i = 0; i < p->n && s == TFM_OK; ++i)
      s = p->s[i] == ' ' ? tk_buf_add(&t, st->text, rl)
                         : tk_buf_add(&t, p->s + i, 1);
    if (s == TFM_OK && !st->flag)
      s = tk_list_push(out, t.s ? t.s : "", t.n);
    else if (s == TFM_OK) {
      tk_regex lit = {NULL, st->text, rl, NULL, false};
      if ((s = regex_segments(&lit, t.s ? t.s : "", t.n, false, &sg)) == TFM_OK)
        s = emit_segments(t.s, &sg, TK_MERGED_WITH_NEXT, out);
    }
    free(t.s);
    break;
  }
  case TK_P_WHITESPACE_SPLIT:
    if ((s = char_segments(p->s, p->n, tk_is_whitespace, false, &sg)) == TFM_OK)
      s = emit_segments(p->s, &sg, TK_REMOVED, out);
    break;
  case TK_P_BERT: {
    tk_list words = {0};
    if ((s = char_segments(p->s, p->n, tk_is_whitespace, false, &sg)) == TFM_OK)
      s = emit_segments(p->s, &sg, TK_REMOVED, &words);
    for (size_t i = 0; i < words.n && s == TFM_OK; ++i) {
      sg.n = 0;
      if ((s = char_segments(words.v[i].s, words.v[i].n, is_punctuation, true,
                             &sg)) == TFM_OK)
        s = emit_segments(words.v[i].s, &sg, TK_ISOLATED, out);
    }
    tk_list_free(&words);
    break;
  }
  case TK_P_WHITESPACE: {
    tk_regex *re;
    if ((s = tk_regex_compile("\\w+|[^\\w\\s]+", false, &re, "Whitespace")) !=
        TFM_OK)
      break;
    if ((s = regex_segments(re, p->s, p->n, false, &sg)) == TFM_OK) {
      /* Keep the matches only. */
      for (size_t i = 0; i < sg.n; ++i)
        sg.v[i].match = !sg.v[i].match;
      s = emit_segments(p->s, &sg, TK_REMOVED, out);
    }
    tk_regex_free(re);
    break;
  }
  case TK_P_DIGITS:
    if ((s = char_segments(p->s, p->n, is_digit, st->flag, &sg)) == TFM_OK)
      s = emit_segments(p->s, &sg, TK_ISOLATED, out);
    break;
  case TK_P_PUNCTUATION:
    if ((s = char_segments(p->s, p->n, is_punctuation, true, &sg)) == TFM_OK)
      s = emit_segments(p->s, &sg, TK_ISOLATED, out);
    break;
  default:
    s = tfm_fail(TFM_ERR_ARGUMENT, "tokenizer: not a pre-tokenizer");
  }
  free(sg.v);
  return s;
}

tfm_status tk_pre_tokenize(const tk_steps *steps, const char *in, size_t n,
                           bool first, tk_list *out) {
  tk_list cur = {0};
  tfm_status s = tk_list_push(&cur, in, n);
  for (size_t i = 0; i < steps->n && s == TFM_OK; ++i) {
    tk_list next = {0};
    for (size_t k = 0; k < cur.n && s == TFM_OK; ++k)
      s = pre_tokenize_one(&steps->v[i], &cur.v[k], first && k == 0, &next);
    tk_list_free(&cur);
    cur = next;
  }
  if (s != TFM_OK) {
    tk_list_free(&cur);
    return s;
  }
  *out = cur;
  return TFM_OK;
}

/*===- Decoders -----------------------------------------------------------===*/

/* Replaces token i by buf's contents. */
static tfm_status set_token(tk_list *l, size_t i, tk_buf *b) {
  char *c = tfm_memdup(b->s ? b->s : "", b->n);
  if (!c)
    return tfm_fail(TFM_ERR_MEMORY, "tokenizer: out of memory");
  free(l->v[i].s);
  l->v[i].s = c;
  l->v[i].n = b->n;
  return TFM_OK;
}

/* Appends bytes as UTF-8, each byte of an invalid sequence as U+FFFD. */
static tfm_status add_lossy(tk_buf *out, const char *s, size_t n) {
  tfm_status st = TFM_OK;
  for (size_t i = 0; i < n && st == TFM_OK;) {
    size_t l = tk_utf8_len(s + i, n - i);
    if (l) {
      st = tk_buf_add(out, s + i, l);
      i += l;
    } else {
      st = tk_buf_add(out, "\xEF\xBF\xBD", 3);
      ++i;
    }
  }
  return st;
}

/* "<0xAB>" -> 0xAB, else -1. */
static int byte_token(const tk_str *t) {
  if (t->n != 6 || memcmp(t->s, "<0x", 3) || t->s[5] != '>')
    return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    char c = t->s[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : -1;
    if (d < 0)
      return -1;
    v = v * 16 + d;
  }
  return v;
}

static tfm_status decode_one(const tk_step *st, tk_list *l) {
  tfm_status s = TFM_OK;
  tk_buf b = {0};
  switch (st->kind) {
  case TK_D_BYTELEVEL: {
    tk_buf bytes = {0};
    for (size_t i = 0; i < l->n && s == TFM_OK; ++i) {
      size_t start = bytes.n;
      bool ok = true;
      for (size_t k = 0; k < l->v[i].n && s == TFM_OK;) {
        int32_t cp;
        k += tk_utf8_next(l->v[i].s + k, l->v[i].n - k, &cp);
        if (cp < 324 && char_byte[cp] >= 0) {
          char c = (char)char_byte[cp];
          s = tk_buf_add(&bytes, &c, 1);
        } else {
          ok = false;
          break;
        }
      }
      if (!ok && s == TFM_OK) {
        bytes.n = start;
        s = tk_buf_add(&bytes, l->v[i].s, l->v[i].n);
      }
    }
    if (s == TFM_OK)
      s = add_lossy(&b, bytes.s ? bytes.s : "", bytes.n);
    free(bytes.s);
    for (size_t i = 0; i < l->n; ++i)
      free(l->v[i].s);
    l->n = 0;
    if (s == TFM_OK)
      s = tk_list_push(l, b.s ? b.s : "", b.n);
    break;
  }
  case TK_D_FUSE:
    for (size_t i = 0; i < l->n && s == TFM_OK; ++i)
      s = tk_buf_add(&b, l->v[i].s, l->v[i].n);
    for (size_t i = 0; i < l->n; ++i)
      free(l->v[i].s);
    l->n = 0;
    if (s == TFM_OK)
      s = tk_list_push(l, b.s ? b.s : "", b.n);
    break;
  case TK_D_BYTE_FALLBACK: {
    tk_list r = {0};
    for (size_t i = 0; i < l->n && s == TFM_OK;) {
      if (byte_token(&l->v[i]) < 0) {
        s = tk_list_push(&r, l->v[i].s, l->v[i].n);
        ++i;
        continue;
      }
      tk_buf bytes = {0};
      size_t k = i;
      for (; k < l->n && byte_token(&l->v[k]) >= 0 && s == TFM_OK; ++k) {
        char c = (char)byte_token(&l->v[k]);
        s = tk_buf_add(&bytes, &c, 1);
      }
      if (s == TFM_OK) {
        b.n = 0;
        if (tk_utf8_valid(bytes.s, bytes.n))
          s = tk_buf_add(&b, bytes.s, bytes.n);
        else
          for (size_t q = 0; q < bytes.n && s == TFM_OK; ++q)
            s = tk_buf_add(&b, "\xEF\xBF\xBD", 3);
      }
      if (s == TFM_OK)
        s = tk_list_push(&r, b.s ? b.s : "", b.n);
      free(bytes.s);
      i = k;
    }
    tk_list_free(l);
    *l = r;
    break;
  }
  case TK_D_REPLACE:
    for (size_t i = 0; i < l->n && s == TFM_OK; ++i) {
      b.n = 0;
      if ((s = tk_buf_add(&b, "", 0)) == TFM_OK &&
          (s = replace_all(st->re, st->text, l->v[i].s, l->v[i].n, &b)) ==
              TFM_OK)
        s = set_token(l, i, &b);
    }
    break;
  case TK_D_STRIP: {
    size_t cl = strlen(st->text);
    for (size_t i = 0; i < l->n && s == TFM_OK; ++i) {
      size_t from = 0, to = l->v[i].n;
      for (int k = 0; k < st->start && to - from >= cl &&
                      !memcmp(l->v[i].s + from, st->text, cl);
           ++k)
        from += cl;
      for (int k = 0; k < st->stop && to - from >= cl &&
                      !memcmp(l->v[i].s + to - cl, st->text, cl);
           ++k)
        to -= cl;
      b.n = 0;
      if ((s = tk_buf_add(&b, l->v[i].s + from, to - from)) == TFM_OK)
        s = set_token(l, i, &b);
    }
    break;
  }
  case TK_D_METASPACE: {
    size_t rl = strlen(st->text);
    for (size_t i = 0; i < l->n && s == TFM_OK; ++i) {
      b.n = 0;
      s = tk_buf_add(&b, "", 0);
      for (size_t k = 0; k < l->v[i].n && s == TFM_OK;) {
        if (l->v[i].n - k >= rl && !memcmp(l->v[i].s + k, st->text, rl)) {
          s = tk_buf_add(&b, " ", 1);
          k += rl;
        } else
          s = tk_buf_add(&b, l->v[i].s + k++, 1);
      }
      if (s == TFM_OK && i == 0 && st->prepend != TK_PREPEND_NEVER && b.n &&
          b.s[0] == ' ') {
        memmove(b.s, b.s + 1, b.n);
        --b.n;
      }
      if (s == TFM_OK)
        s = set_token(l, i, &b);
    }
    break;
  }
  case TK_D_WORDPIECE: {
    size_t pl = strlen(st->text);
    static const char *const cleanup[][2] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},   {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
    };
    for (size_t i = 0; i < l->n && s == TFM_OK; ++i) {
      b.n = 0;
      s = tk_buf_add(&b, "", 0);
      if (s == TFM_OK && i && l->v[i].n >= pl &&
          !memcmp(l->v[i].s, st->text, pl))
        s = tk_buf_add(&b, l->v[i].s + pl, l->v[i].n - pl);
      else if (s == TFM_OK) {
        if (i)
          s = tk_buf_add(&b, " ", 1);
        if (s == TFM_OK)
          s = tk_buf_add(&b, l->v[i].s, l->v[i].n);
      }
      for (size_t c = 0;
           st->flag && s == TFM_OK && c < sizeof cleanup / sizeof *cleanup;
           ++c) {
        tk_regex lit = {NULL, cleanup[c][0], strlen(cleanup[c][0]), NULL,
                        false};
        tk_buf r = {0};
        if ((s = tk_buf_add(&r, "", 0)) == TFM_OK &&
            (s = replace_all(&lit, cleanup[c][1], b.s, b.n, &r)) == TFM_OK) {
          free(b.s);
          b = r;
        } else
          free(r.s);
      }
      if (s == TFM_OK)
        s = set_token(l, i, &b);
    }
    break;
  }
  case TK_D_BPE: {
    size_t sl = strlen(st->text);
    for (size_t i = 0; i < l->n && s == TFM_OK; ++i) {
      tk_regex lit = {NULL, st->text, sl, NULL, false};
      b.n = 0;
      if ((s = tk_buf_add(&b, "", 0)) == TFM_OK &&
          (s = replace_all(&lit, i + 1 == l->n ? "" : " ", l->v[i].s, l->v[i].n,
                           &b)) == TFM_OK)
        s = set_token(l, i, &b);
    }
    break;
  }
  default:
    s = tfm_fail(TFM_ERR_ARGUMENT, "tokenizer: not a decoder");
  }
  free(b.s);
  return s;
}

tfm_status tk_decode_steps(const tk_steps *steps, tk_list *tokens) {
  for (size_t i = 0; i < steps->n; ++i) {
    tfm_status s = decode_one(&steps->v[i], tokens);
    if (s != TFM_OK)
      return s;
  }
  return TFM_OK;
}
