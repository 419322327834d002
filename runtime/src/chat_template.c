/*===- chat_template.c - Jinja chat templates: values and API ------*- C -*-===*
 *
 * The values of a rendering, their memory, their printing as Python prints
 * them (str(), repr(), json.dumps) and the public API (tfm/chat_template.h).
 *===----------------------------------------------------------------------===*/
#include "chat_template_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*===- Memory -------------------------------------------------------------===*/

struct ct_block {
  ct_block *next;
  size_t size, used;
  max_align_t data[];
};

void ct_fail(ct_arena *a, tfm_status s, int line, int col, const char *fmt,
             ...) {
  char *m = a->msg;
  size_t k = 0;
  if (line > 0)
    k = (size_t)snprintf(m, TFM_ERROR_SIZE, "line %d, column %d: ", line, col);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m + k, TFM_ERROR_SIZE - k, fmt, ap);
  va_end(ap);
  a->status = s;
  longjmp(*a->jmp, 1);
}

void *ct_alloc(ct_arena *a, size_t n) {
  n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
  ct_block *b = a->head;
  if (!b || b->size - b->used < n) {
    size_t size = n > 65536 ? n : 65536;
    if (a->limit && a->used + size > a->limit)
      ct_fail(a, TFM_ERR_FORMAT, 0, 0,
              "the rendering needs more than %zu MiB of memory (the limit)",
              a->limit >> 20);
    b = malloc(sizeof(ct_block) + size);
    if (!b)
      ct_fail(a, TFM_ERR_MEMORY, 0, 0, "out of memory");
    b->size = size;
    b->used = 0;
    b->next = a->head;
    a->head = b;
    a->used += size;
  }
  void *p = (char *)b->data + b->used;
  b->used += n;
  return p;
}

char *ct_strndup(ct_arena *a, const char *s, size_t n) {
  char *p = ct_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

void ct_arena_free(ct_arena *a) {
  for (ct_block *b = a->head, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  a->head = NULL;
  a->used = 0;
}

void ct_buf_add(ct_arena *a, ct_buf *b, const char *s, size_t n) {
  if (b->limit && b->n + n > b->limit)
    ct_fail(a, TFM_ERR_FORMAT, 0, 0,
            "the output is longer than %zu MiB (the limit)", b->limit >> 20);
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->n + n + 1)
      cap *= 2;
    char *s2 = ct_alloc(a, cap);
    if (b->n)
      memcpy(s2, b->s, b->n);
    b->s = s2;
    b->cap = cap;
  }
  if (n)
    memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

void ct_buf_str(ct_arena *a, ct_buf *b, const char *s) {
  ct_buf_add(a, b, s, strlen(s));
}

void ct_buf_printf(ct_arena *a, ct_buf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  ct_buf_add(a, b, tmp,
             k < 0                    ? 0
             : (size_t)k < sizeof tmp ? (size_t)k
                                      : sizeof tmp - 1);
}

/*===- Values -------------------------------------------------------------===*/

ct_value ct_undef(const char *hint) {
  ct_value v = {CT_UNDEF, {.str = {hint, 0}}};
  return v;
}
ct_value ct_none(void) {
  ct_value v = {CT_NONE, {.i = 0}};
  return v;
}
ct_value ct_bool(bool b) {
  ct_value v = {CT_BOOL, {.b = b}};
  return v;
}
ct_value ct_int(int64_t i) {
  ct_value v = {CT_INT, {.i = i}};
  return v;
}
ct_value ct_float(double f) {
  ct_value v = {CT_FLOAT, {.f = f}};
  return v;
}
ct_value ct_str(const char *s, size_t n) {
  ct_value v = {CT_STR, {.str = {s, n}}};
  return v;
}
ct_value ct_cstr(const char *s) { return ct_str(s, strlen(s)); }

ct_value ct_new_list(ct_arena *a, size_t n, bool tuple) {
  ct_list *l = ct_alloc(a, sizeof *l);
  l->n = n;
  l->tuple = tuple;
  l->items = ct_alloc(a, (n ? n : 1) * sizeof(ct_value));
  ct_value v = {CT_LIST, {.list = l}};
  return v;
}

ct_value ct_new_dict(ct_arena *a) {
  ct_dict *d = ct_alloc(a, sizeof *d);
  memset(d, 0, sizeof *d);
  ct_value v = {CT_DICT, {.dict = d}};
  return v;
}

ct_value *ct_dict_find(const ct_dict *d, ct_value key) {
  for (size_t i = 0; i < d->n; ++i)
    if (ct_equal(d->keys[i], key))
      return &d->vals[i];
  return NULL;
}

ct_value *ct_dict_get(const ct_dict *d, const char *key, size_t n) {
  for (size_t i = 0; i < d->n; ++i)
    if (d->keys[i].kind == CT_STR && d->keys[i].u.str.n == n &&
        memcmp(d->keys[i].u.str.s, key, n) == 0)
      return &d->vals[i];
  return NULL;
}

void ct_dict_set(ct_arena *a, ct_dict *d, ct_value key, ct_value val) {
  ct_value *old = ct_dict_find(d, key);
  if (old) {
    *old = val;
    return;
  }
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 2;
    ct_value *k = ct_alloc(a, cap * sizeof *k),
             *v = ct_alloc(a, cap * sizeof *v);
    if (d->n) {
      memcpy(k, d->keys, d->n * sizeof *k);
      memcpy(v, d->vals, d->n * sizeof *v);
    }
    d->keys = k;
    d->vals = v;
    d->cap = cap;
  }
  d->keys[d->n] = key;
  d->vals[d->n] = val;
  d->n++;
}

bool ct_truthy(ct_value v) {
  switch (v.kind) {
  case CT_UNDEF:
  case CT_NONE:
    return false;
  case CT_BOOL:
    return v.u.b;
  case CT_INT:
    return v.u.i != 0;
  case CT_FLOAT:
    return v.u.f != 0;
  case CT_STR:
    return v.u.str.n != 0;
  case CT_LIST:
    return v.u.list->n != 0;
  case CT_DICT:
    return v.u.dict->n != 0;
  default:
    return true;
  }
}

static bool is_number(ct_value v) {
  return v.kind == CT_INT || v.kind == CT_FLOAT || v.kind == CT_BOOL;
}
static double num(ct_value v) {
  return v.kind == CT_FLOAT ? v.u.f : v.kind == CT_INT ? (double)v.u.i : v.u.b;
}

bool ct_equal(ct_value x, ct_value y) {
  if (is_number(x) && is_number(y)) {
    if (x.kind != CT_FLOAT && y.kind != CT_FLOAT) {
      int64_t a = x.kind == CT_INT ? x.u.i : x.u.b;
      int64_t b = y.kind == CT_INT ? y.u.i : y.u.b;
      return a == b;
    }
    return num(x) == num(y);
  }
  if (x.kind != y.kind)
    return false;
  switch (x.kind) {
  case CT_UNDEF:
  case CT_NONE:
    return true;
  case CT_STR:
    return x.u.str.n == y.u.str.n &&
           memcmp(x.u.str.s, y.u.str.s, x.u.str.n) == 0;
  case CT_LIST:
    if (x.u.list->tuple != y.u.list->tuple || x.u.list->n != y.u.list->n)
      return false;
    for (size_t i = 0; i < x.u.list->n; ++i)
      if (!ct_equal(x.u.list->items[i], y.u.list->items[i]))
        return false;
    return true;
  case CT_DICT:
    if (x.u.dict->n != y.u.dict->n)
      return false;
    for (size_t i = 0; i < x.u.dict->n; ++i) {
      ct_value *v = ct_dict_find(y.u.dict, x.u.dict->keys[i]);
      if (!v || !ct_equal(x.u.dict->vals[i], *v))
        return false;
    }
    return true;
  case CT_NS:
    return x.u.dict == y.u.dict;
  case CT_MACRO:
    return x.u.macro == y.u.macro;
  case CT_FUNC:
    return x.u.fn.name == y.u.fn.name && x.u.fn.self == y.u.fn.self;
  default:
    return false;
  }
}

const char *ct_type_name(ct_value v) {
  static const char *names[] = {
      "Undefined", "NoneType", "bool",      "int",   "float",    "str",
      "list",      "dict",     "Namespace", "Macro", "function", "LoopContext"};
  if (v.kind == CT_LIST && v.u.list->tuple)
    return "tuple";
  return names[v.kind];
}

/* Python's repr(float): the shortest text that reads back as f. */
void ct_format_float(double f, char out[32]) {
  if (isnan(f)) {
    strcpy(out, "nan");
    return;
  }
  if (isinf(f)) {
    strcpy(out, f < 0 ? "-inf" : "inf");
    return;
  }
  char tmp[40];
  int p;
  for (p = 1; p <= 17; ++p) {
    snprintf(tmp, sizeof tmp, "%.*e", p - 1, f);
    if (strtod(tmp, NULL) == f)
      break;
  }
  /* tmp: [-]d[.ddd]e[+-]xx */
  char digits[24];
  int nd = 0, neg = 0;
  const char *s = tmp;
  if (*s == '-') {
    neg = 1;
    ++s;
  }
  for (; *s && *s != 'e'; ++s)
    if (*s != '.')
      digits[nd++] = *s;
  int exp = atoi(s + 1);
  while (nd > 1 && digits[nd - 1] == '0')
    --nd;
  char *o = out;
  if (neg)
    *o++ = '-';
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      *o++ = '0';
      *o++ = '.';
      for (int i = 0; i < -exp - 1; ++i)
        *o++ = '0';
      for (int i = 0; i < nd; ++i)
        *o++ = digits[i];
    } else {
      for (int i = 0; i <= exp; ++i)
        *o++ = i < nd ? digits[i] : '0';
      *o++ = '.';
      if (nd > exp + 1)
        for (int i = exp + 1; i < nd; ++i)
          *o++ = digits[i];
      else
        *o++ = '0';
    }
    *o = 0;
    return;
  }
  *o++ = digits[0];
  if (nd > 1) {
    *o++ = '.';
    for (int i = 1; i < nd; ++i)
      *o++ = digits[i];
  }
  snprintf(o, (size_t)(out + 32 - o), "e%c%02d", exp < 0 ? '-' : '+',
           exp < 0 ? -exp : exp);
}

static void repr_str(ct_arena *a, ct_buf *b, const char *s, size_t n) {
  char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
  ct_buf_add(a, b, &q, 1);
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char tmp[8];
    if (c == '\\')
      esc = "\\\\";
    else if (c == (unsigned char)q)
      esc = q == '\'' ? "\\'" : "\\\"";
    else if (c == '\n')
      esc = "\\n";
    else if (c == '\r')
      esc = "\\r";
    else if (c == '\t')
      esc = "\\t";
    else if (c < 0x20 || c == 0x7f) {
      snprintf(tmp, sizeof tmp, "\\x%02x", c);
      esc = tmp;
    }
    if (esc) {
      ct_buf_add(a, b, s + start, i - start);
      ct_buf_str(a, b, esc);
      start = i + 1;
    }
  }
  ct_buf_add(a, b, s + start, n - start);
  ct_buf_add(a, b, &q, 1);
}

/* A dict's (or namespace's) items as Python prints them: `k: v, ...`. */
static void repr_items(ct_arena *a, ct_buf *b, const ct_dict *d) {
  for (size_t i = 0; i < d->n; ++i) {
    if (i)
      ct_buf_str(a, b, ", ");
    ct_repr(a, b, d->keys[i]);
    ct_buf_str(a, b, ": ");
    ct_repr(a, b, d->vals[i]);
  }
}

void ct_repr(ct_arena *a, ct_buf *b, ct_value v) {
  switch (v.kind) {
  case CT_STR:
    repr_str(a, b, v.u.str.s, v.u.str.n);
    return;
  case CT_LIST: {
    ct_buf_str(a, b, v.u.list->tuple ? "(" : "[");
    for (size_t i = 0; i < v.u.list->n; ++i) {
      if (i)
        ct_buf_str(a, b, ", ");
      ct_repr(a, b, v.u.list->items[i]);
    }
    if (v.u.list->tuple && v.u.list->n == 1)
      ct_buf_str(a, b, ",");
    ct_buf_str(a, b, v.u.list->tuple ? ")" : "]");
    return;
  }
  case CT_DICT:
    ct_buf_str(a, b, "{");
    repr_items(a, b, v.u.dict);
    ct_buf_str(a, b, "}");
    return;
  case CT_UNDEF:
    ct_buf_str(a, b, "Undefined");
    return;
  default:
    ct_to_str(a, b, v);
  }
}

void ct_to_str(ct_arena *a, ct_buf *b, ct_value v) {
  char tmp[32];
  switch (v.kind) {
  case CT_UNDEF:
    return;
  case CT_NONE:
    ct_buf_str(a, b, "None");
    return;
  case CT_BOOL:
    ct_buf_str(a, b, v.u.b ? "True" : "False");
    return;
  case CT_INT:
    ct_buf_printf(a, b, "%lld", (long long)v.u.i);
    return;
  case CT_FLOAT:
    ct_format_float(v.u.f, tmp);
    ct_buf_str(a, b, tmp);
    return;
  case CT_STR:
    ct_buf_add(a, b, v.u.str.s, v.u.str.n);
    return;
  case CT_NS: {
    ct_buf_str(a, b, "<Namespace {");
    repr_items(a, b, v.u.dict);
    ct_buf_str(a, b, "}>");
    return;
  }
  case CT_MACRO:
    ct_buf_printf(a, b, "<Macro '%s'>", v.u.macro->name);
    return;
  case CT_FUNC:
    ct_buf_printf(a, b, "<function %s>", v.u.fn.name);
    return;
  case CT_LOOP:
    ct_buf_printf(a, b, "<LoopContext %zu/%zu>", v.u.loop->index + 1,
                  v.u.loop->items->n);
    return;
  default:
    ct_repr(a, b, v);
  }
}

ct_value ct_as_str(ct_arena *a, ct_value v) {
  if (v.kind == CT_STR)
    return v;
  ct_buf b = {0};
  ct_to_str(a, &b, v);
  return b.s ? ct_str(b.s, b.n) : ct_str("", 0);
}

static void json_str(ct_arena *a, ct_buf *b, const char *s, size_t n,
                     bool ascii) {
  ct_buf_add(a, b, "\"", 1);
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char tmp[8];
    switch (c) {
    case '"':
      esc = "\\\"";
      break;
    case '\\':
      esc = "\\\\";
      break;
    case '\n':
      esc = "\\n";
      break;
    case '\r':
      esc = "\\r";
      break;
    case '\t':
      esc = "\\t";
      break;
    case '\b':
      esc = "\\b";
      break;
    case '\f':
      esc = "\\f";
      break;
    default:
      if (c < 0x20 || (ascii && c == 0x7f)) {
        snprintf(tmp, sizeof tmp, "\\u%04x", c);
        esc = tmp;
      } else if (ascii && c >= 0x80) {
        /* ensure_ascii: \uXXXX, astral code points as surrogate pairs */
        int k = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (i + (size_t)k > n)
          k = 1;
        uint32_t cp = k == 2 ? c & 0x1F : k == 3 ? c & 0x0F : c & 0x07;
        for (int j = 1; j < k; ++j)
          cp = (cp << 6) | ((unsigned char)s[i + (size_t)j] & 0x3F);
        ct_buf_add(a, b, s + start, i - start);
        if (cp >= 0x10000) {
          cp -= 0x10000;
          ct_buf_printf(a, b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10),
                        0xDC00 + (cp & 0x3FF));
        } else {
          ct_buf_printf(a, b, "\\u%04x", cp);
        }
        i += (size_t)k - 1;
        start = i + 1;
        continue;
      }
    }
    if (esc) {
      ct_buf_add(a, b, s + start, i - start);
      ct_buf_str(a, b, esc);
      start = i + 1;
    }
  }
  ct_buf_add(a, b, s + start, n - start);
  ct_buf_add(a, b, "\"", 1);
}

static void json_newline(ct_arena *a, ct_buf *b, const char *indent,
                         int depth) {
  ct_buf_add(a, b, "\n", 1);
  for (int i = 0; i < depth; ++i)
    ct_buf_str(a, b, indent);
}

static int cmp_keys(const void *x, const void *y) {
  const ct_value *p = *(const ct_value *const *)x,
                 *q = *(const ct_value *const *)y;
  size_t n = p->u.str.n < q->u.str.n ? p->u.str.n : q->u.str.n;
  int c = memcmp(p->u.str.s, q->u.str.s, n);
  return c ? c : (p->u.str.n > q->u.str.n) - (p->u.str.n < q->u.str.n);
}

void ct_json(ct_arena *a, ct_buf *b, ct_value v, const char *indent,
             const char *item_sep, const char *key_sep, bool sort_keys,
             bool ascii, int depth, int line, int col) {
  char tmp[32];
  if (depth > TFM_CHAT_MAX_NESTING)
    ct_fail(a, TFM_ERR_FORMAT, line, col, "tojson: nesting deeper than %d",
            TFM_CHAT_MAX_NESTING);
  switch (v.kind) {
  case CT_NONE:
    ct_buf_str(a, b, "null");
    return;
  case CT_BOOL:
    ct_buf_str(a, b, v.u.b ? "true" : "false");
    return;
  case CT_INT:
    ct_buf_printf(a, b, "%lld", (long long)v.u.i);
    return;
  case CT_FLOAT:
    if (isnan(v.u.f))
      ct_buf_str(a, b, "NaN");
    else if (isinf(v.u.f))
      ct_buf_str(a, b, v.u.f < 0 ? "-Infinity" : "Infinity");
    else {
      ct_format_float(v.u.f, tmp);
      ct_buf_str(a, b, tmp);
    }
    return;
  case CT_STR:
    json_str(a, b, v.u.str.s, v.u.str.n, ascii);
    return;
  case CT_LIST: {
    if (!v.u.list->n) {
      ct_buf_str(a, b, "[]");
      return;
    }
    ct_buf_str(a, b, "[");
    for (size_t i = 0; i < v.u.list->n; ++i) {
      if (i)
        ct_buf_str(a, b, item_sep);
      if (indent)
        json_newline(a, b, indent, depth + 1);
      ct_json(a, b, v.u.list->items[i], indent, item_sep, key_sep, sort_keys,
              ascii, depth + 1, line, col);
    }
    if (indent)
      json_newline(a, b, indent, depth);
    ct_buf_str(a, b, "]");
    return;
  }
  case CT_DICT: {
    ct_dict *d = v.u.dict;
    if (!d->n) {
      ct_buf_str(a, b, "{}");
      return;
    }
    const ct_value **keys = ct_alloc(a, d->n * sizeof *keys);
    for (size_t i = 0; i < d->n; ++i) {
      keys[i] = &d->keys[i];
      if (d->keys[i].kind != CT_STR)
        ct_fail(a, TFM_ERR_FORMAT, line, col,
                "tojson: a dict key is %s, not a string",
                ct_type_name(d->keys[i]));
    }
    if (sort_keys)
      qsort(keys, d->n, sizeof *keys, cmp_keys);
    ct_buf_str(a, b, "{");
    for (size_t i = 0; i < d->n; ++i) {
      if (i)
        ct_buf_str(a, b, item_sep);
      if (indent)
        json_newline(a, b, indent, depth + 1);
      json_str(a, b, keys[i]->u.str.s, keys[i]->u.str.n, ascii);
      ct_buf_str(a, b, key_sep);
      ct_json(a, b, *ct_dict_find(d, *keys[i]), indent, item_sep, key_sep,
              sort_keys, ascii, depth + 1, line, col);
    }
    if (indent)
      json_newline(a, b, indent, depth);
    ct_buf_str(a, b, "}");
    return;
  }
  default:
    ct_fail(a, TFM_ERR_FORMAT, line, col,
            "tojson: Object of type %s is not JSON serializable",
            ct_type_name(v));
  }
}

/*===- API ----------------------------------------------------------------===*/

struct tfm_chat_template {
  ct_arena arena;
  ct_node *root;
};

tfm_status tfm_chat_template_create(const char *source,
                                    tfm_chat_template **out) {
  *out = NULL;
  if (!source)
    return tfm_fail(TFM_ERR_ARGUMENT, "chat template: no source");
  tfm_chat_template *t = calloc(1, sizeof *t);
  char *msg = malloc(TFM_ERROR_SIZE);
  if (!t || !msg) {
    free(t);
    free(msg);
    return tfm_fail(TFM_ERR_MEMORY, "chat template: out of memory");
  }
  jmp_buf jmp;
  t->arena.jmp = &jmp;
  t->arena.msg = msg;
  t->arena.limit = TFM_CHAT_MAX_MEMORY;
  if (setjmp(jmp)) {
    tfm_status s = tfm_fail(t->arena.status, "chat template: %s", msg);
    ct_arena_free(&t->arena);
    free(t);
    free(msg);
    return s;
  }
  t->root = ct_parse(&t->arena, source);
  t->arena.jmp = NULL;
  t->arena.msg = NULL;
  free(msg);
  *out = t;
  return TFM_OK;
}

void tfm_chat_template_free(tfm_chat_template *t) {
  if (!t)
    return;
  ct_arena_free(&t->arena);
  free(t);
}

static ct_value from_json(ct_arena *a, json_t *j) {
  switch (json_typeof(j)) {
  case JSON_OBJECT: {
    ct_value d = ct_new_dict(a);
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) {
      ct_dict_set(a, d.u.dict, ct_str(ct_strndup(a, k, strlen(k)), strlen(k)),
                  from_json(a, v));
    }
    return d;
  }
  case JSON_ARRAY: {
    ct_value l = ct_new_list(a, json_array_size(j), false);
    for (size_t i = 0; i < l.u.list->n; ++i)
      l.u.list->items[i] = from_json(a, json_array_get(j, i));
    return l;
  }
  case JSON_STRING:
    return ct_str(ct_strndup(a, json_string_value(j), json_string_length(j)),
                  json_string_length(j));
  case JSON_INTEGER:
    return ct_int(json_integer_value(j));
  case JSON_REAL:
    return ct_float(json_real_value(j));
  case JSON_TRUE:
    return ct_bool(true);
  case JSON_FALSE:
    return ct_bool(false);
  default:
    return ct_none();
  }
}

tfm_status tfm_chat_template_render(const tfm_chat_template *t,
                                    const char *context_json, char **text,
                                    size_t *len) {
  *text = NULL;
  if (len)
    *len = 0;
  json_error_t jerr;
  json_t *volatile ctx = json_loads(context_json ? context_json : "", 0, &jerr);
  if (!ctx || !json_is_object(ctx)) {
    tfm_status s =
        ctx ? tfm_fail(TFM_ERR_ARGUMENT,
                       "chat template: the context is not a JSON object")
            : tfm_fail(TFM_ERR_ARGUMENT,
                       "chat template: the context is not JSON: line %d, "
                       "column %d: %s",
                       jerr.line, jerr.column, jerr.text);
    json_decref(ctx);
    return s;
  }
  /* On the heap: what ct_fail records must survive the longjmp (a local
   * modified after setjmp would be indeterminate there). */
  ct_arena *a = calloc(1, sizeof *a);
  char *msg = malloc(TFM_ERROR_SIZE);
  if (!a || !msg) {
    free(a);
    free(msg);
    json_decref(ctx);
    return tfm_fail(TFM_ERR_MEMORY, "chat template: out of memory");
  }
  jmp_buf jmp;
  a->jmp = &jmp;
  a->msg = msg;
  a->limit = TFM_CHAT_MAX_MEMORY;
  if (setjmp(jmp)) {
    tfm_status s = tfm_fail(a->status, "chat template: %s", msg);
    json_decref(ctx);
    ct_arena_free(a);
    free(a);
    free(msg);
    return s;
  }
  ct_value c = from_json(a, ctx);
  json_decref(ctx);
  ctx = NULL;
  ct_buf out = {0};
  out.limit = TFM_CHAT_MAX_OUTPUT;
  ct_buf_add(a, &out, "", 0);
  ct_render(a, t->root, c, &out);
  char *r = malloc(out.n + 1);
  tfm_status s = TFM_OK;
  if (r) {
    memcpy(r, out.s, out.n + 1);
    if (len)
      *len = out.n;
    *text = r;
  } else {
    s = tfm_fail(TFM_ERR_MEMORY, "chat template: out of memory");
  }
  ct_arena_free(a);
  free(a);
  free(msg);
  return s;
}
