/*===- chat_template_eval.c - Jinja evaluation ---------------------*- C -*-===*
 *
 * Walks the tree of chat_template_parse.c: statements write to a buffer,
 * expressions give values. Scopes follow Jinja2: a `set` inside a loop body
 * is local to that iteration, one inside `if` belongs to the enclosing
 * scope, a macro's body sees the template's top-level variables.
 * Attribute and item access, undefined values, filters, tests and string
 * methods follow Jinja2 3.1 in transformers' ImmutableSandboxedEnvironment.
 *===----------------------------------------------------------------------===*/
#include "chat_template_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct scope {
  struct scope *parent;
  ct_dict vars;
} scope;

typedef struct R {
  ct_arena *a;
  ct_value ctx;
  scope *root;
  size_t iterations;
  int depth;
} R;

enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

/* Evaluated call arguments. */
typedef struct args {
  ct_value *pos;
  size_t npos;
  const char **kwn;
  ct_value *kwv;
  size_t nkw;
} args;

static ct_value eval(R *r, const ct_node *n, scope *s);
static int exec_body(R *r, ct_node *const *body, size_t n, scope *s,
                     ct_buf *out);

_Noreturn static void fail(R *r, const ct_node *n, const char *fmt,
                           const char *x, const char *y) {
  ct_fail(r->a, TFM_ERR_FORMAT, n ? n->line : 0, n ? n->col : 0, fmt, x, y);
}

_Noreturn static void fail_undef(R *r, const ct_node *n, ct_value v) {
  fail(r, n, "%s%s", v.u.str.s ? v.u.str.s : "value is undefined", "");
}

static const char *num_str(R *r, size_t k) {
  ct_buf b = {0};
  ct_buf_printf(r->a, &b, "%zu", k);
  return b.s;
}

static const char *hint(R *r, const char *fmt, const char *x, const char *y) {
  ct_buf b = {0};
  ct_buf_printf(r->a, &b, fmt, x, y);
  return b.s;
}

/* Jinja2's object_type_repr: "dict object", "None". */
static const char *type_repr(ct_value v) {
  switch (v.kind) {
  case CT_NONE:
    return "None";
  case CT_BOOL:
    return "bool object";
  case CT_INT:
    return "int object";
  case CT_FLOAT:
    return "float object";
  case CT_STR:
    return "str object";
  case CT_LIST:
    return v.u.list->tuple ? "tuple object" : "list object";
  case CT_DICT:
    return "dict object";
  case CT_NS:
    return "jinja2.utils.Namespace object";
  default:
    return "object";
  }
}

static ct_value check_iterations(R *r, const ct_node *n, size_t more) {
  r->iterations += more;
  if (r->iterations > TFM_CHAT_MAX_ITERATIONS)
    fail(r, n, "more than %s loop iterations (the limit)%s", "1000000", "");
  return ct_none();
}

/*===- UTF-8 --------------------------------------------------------------===*/

static size_t utf8_len(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; ++i)
    k += ((unsigned char)s[i] & 0xC0) != 0x80;
  return k;
}

/* Byte offsets of each code point, plus the end: an array of count+1. */
static size_t *utf8_offsets(R *r, const char *s, size_t n, size_t *count) {
  size_t k = utf8_len(s, n);
  size_t *off = ct_alloc(r->a, (k + 1) * sizeof *off);
  size_t j = 0;
  for (size_t i = 0; i < n; ++i)
    if (((unsigned char)s[i] & 0xC0) != 0x80)
      off[j++] = i;
  off[k] = n;
  *count = k;
  return off;
}

static uint32_t utf8_decode(const char *s, size_t n, size_t *len) {
  unsigned char c = (unsigned char)s[0];
  int k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if ((size_t)k > n)
    k = 1;
  uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1F : k == 3 ? c & 0x0F : c & 0x07;
  for (int i = 1; i < k; ++i)
    cp = (cp << 6) | ((unsigned char)s[i] & 0x3F);
  *len = (size_t)k;
  return cp;
}

/* Python's str.isspace() for one code point. */
static bool uspace(uint32_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) ||
         c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

/*===- Conversions --------------------------------------------------------===*/

static ct_value str_of(R *r, ct_value v) { return ct_as_str(r->a, v); }

static ct_value substr(const char *s, size_t from, size_t to) {
  return ct_str(s + from, to - from);
}

/* A string value made of the buffer. */
static ct_value buf_value(ct_buf *b) {
  return b->s ? ct_str(b->s, b->n) : ct_str("", 0);
}

/* The items of an iterable as a list (dict: its keys; str: its characters;
 * undefined: nothing). */
static ct_list *iterate(R *r, const ct_node *n, ct_value v) {
  switch (v.kind) {
  case CT_LIST:
    return v.u.list;
  case CT_UNDEF:
    return ct_new_list(r->a, 0, false).u.list;
  case CT_DICT: {
    ct_value l = ct_new_list(r->a, v.u.dict->n, false);
    memcpy(l.u.list->items, v.u.dict->keys, v.u.dict->n * sizeof(ct_value));
    return l.u.list;
  }
  case CT_STR: {
    size_t k;
    size_t *off = utf8_offsets(r, v.u.str.s, v.u.str.n, &k);
    ct_value l = ct_new_list(r->a, k, false);
    for (size_t i = 0; i < k; ++i)
      l.u.list->items[i] = substr(v.u.str.s, off[i], off[i + 1]);
    return l.u.list;
  }
  default:
    fail(r, n, "'%s' object is not iterable%s", ct_type_name(v), "");
  }
}

static int64_t as_int(R *r, const ct_node *n, ct_value v, const char *what) {
  if (v.kind == CT_INT)
    return v.u.i;
  if (v.kind == CT_BOOL)
    return v.u.b;
  if (v.kind == CT_UNDEF)
    fail_undef(r, n, v);
  fail(r, n, "%s must be an integer, not '%s'", what, ct_type_name(v));
}

static bool is_num(ct_value v) {
  return v.kind == CT_INT || v.kind == CT_FLOAT || v.kind == CT_BOOL;
}
static double num(ct_value v) {
  return v.kind == CT_FLOAT ? v.u.f : v.kind == CT_INT ? (double)v.u.i : v.u.b;
}
static int64_t ival(ct_value v) { return v.kind == CT_INT ? v.u.i : v.u.b; }

/*===- Access -------------------------------------------------------------===*/

static bool in_list(const char *name, const char *const *list) {
  for (; *list; ++list)
    if (!strcmp(name, *list))
      return true;
  return false;
}

static const char *const str_methods[] = {
    "strip",        "lstrip",     "rstrip",     "split",     "rsplit",
    "startswith",   "endswith",   "replace",    "upper",     "lower",
    "title",        "capitalize", "find",       "rfind",     "count",
    "join",         "splitlines", "isdigit",    "isalpha",   "isalnum",
    "isspace",      "isupper",    "islower",    "format",    "index",
    "center",       "zfill",      "casefold",   "swapcase",  "removeprefix",
    "removesuffix", "partition",  "rpartition", "ljust",     "rjust",
    "expandtabs",   "istitle",    "isnumeric",  "isdecimal", "isidentifier",
    "isprintable",  "encode",     "format_map", "isascii",   "maketrans",
    "translate",    NULL};
static const char *const dict_methods[] = {
    "items",  "keys",  "values",  "get",        "copy",     "pop",
    "update", "clear", "popitem", "setdefault", "fromkeys", NULL};
static const char *const list_methods[] = {
    "index",  "count",   "append", "extend", "insert", "pop",
    "remove", "reverse", "sort",   "copy",   "clear",  NULL};

static ct_value method(R *r, ct_value self, const char *name) {
  ct_value *p = ct_alloc(r->a, sizeof *p);
  *p = self;
  ct_value f = {CT_FUNC, {.fn = {name, p}}};
  return f;
}

static ct_value get_attr(R *r, const ct_node *n, ct_value obj,
                         const char *name) {
  switch (obj.kind) {
  case CT_UNDEF:
    fail_undef(r, n, obj);
  case CT_STR:
    if (in_list(name, str_methods))
      return method(r, obj, name);
    break;
  case CT_DICT: {
    if (in_list(name, dict_methods))
      return method(r, obj, name);
    ct_value *v = ct_dict_get(obj.u.dict, name, strlen(name));
    if (v)
      return *v;
    break;
  }
  case CT_NS: {
    ct_value *v = ct_dict_get(obj.u.dict, name, strlen(name));
    if (v)
      return *v;
    break;
  }
  case CT_LIST:
    if (in_list(name, list_methods))
      return method(r, obj, name);
    break;
  case CT_LOOP: {
    size_t i = obj.u.loop->index, len = obj.u.loop->items->n;
    const ct_value *items = obj.u.loop->items->items;
    if (!strcmp(name, "index"))
      return ct_int((int64_t)i + 1);
    if (!strcmp(name, "index0"))
      return ct_int((int64_t)i);
    if (!strcmp(name, "revindex"))
      return ct_int((int64_t)(len - i));
    if (!strcmp(name, "revindex0"))
      return ct_int((int64_t)(len - i - 1));
    if (!strcmp(name, "first"))
      return ct_bool(i == 0);
    if (!strcmp(name, "last"))
      return ct_bool(i + 1 == len);
    if (!strcmp(name, "length"))
      return ct_int((int64_t)len);
    if (!strcmp(name, "depth"))
      return ct_int(1);
    if (!strcmp(name, "depth0"))
      return ct_int(0);
    if (!strcmp(name, "previtem"))
      return i ? items[i - 1] : ct_undef("there is no previous item");
    if (!strcmp(name, "nextitem"))
      return i + 1 < len ? items[i + 1] : ct_undef("there is no next item");
    if (!strcmp(name, "cycle"))
      return method(r, ct_int((int64_t)i), "cycle");
    break;
  }
  default:
    break;
  }
  if (obj.kind == CT_LOOP)
    return ct_undef(
        hint(r, "'LoopContext' object has no attribute '%s'%s", name, ""));
  return ct_undef(hint(r, "'%s' has no attribute '%s'", type_repr(obj), name));
}

static ct_value get_item(R *r, const ct_node *n, ct_value obj, ct_value key) {
  switch (obj.kind) {
  case CT_UNDEF:
    fail_undef(r, n, obj);
  case CT_LIST:
  case CT_STR:
    if (key.kind == CT_INT || key.kind == CT_BOOL) {
      int64_t i = ival(key);
      if (obj.kind == CT_LIST) {
        int64_t len = (int64_t)obj.u.list->n;
        if (i < 0)
          i += len;
        if (i >= 0 && i < len)
          return obj.u.list->items[i];
      } else {
        size_t k;
        size_t *off = utf8_offsets(r, obj.u.str.s, obj.u.str.n, &k);
        if (i < 0)
          i += (int64_t)k;
        if (i >= 0 && i < (int64_t)k)
          return substr(obj.u.str.s, off[i], off[i + 1]);
      }
      char num[32];
      snprintf(num, sizeof num, "%lld", (long long)ival(key));
      return ct_undef(hint(r, "'%s' has no element %s", type_repr(obj), num));
    }
    break;
  case CT_DICT: {
    ct_value *v = ct_dict_find(obj.u.dict, key);
    if (v)
      return *v;
    break;
  }
  case CT_NS:
    if (key.kind == CT_STR) {
      ct_value *v = ct_dict_get(obj.u.dict, key.u.str.s, key.u.str.n);
      if (v)
        return *v;
    }
    break;
  default:
    break;
  }
  if (key.kind == CT_STR)
    return get_attr(r, n, obj, key.u.str.s);
  ct_buf b = {0};
  ct_repr(r->a, &b, key);
  return ct_undef(hint(r, "'%s' has no element %s", type_repr(obj), b.s));
}

/* Python's slice index adjustment. */
static ct_value get_slice(R *r, const ct_node *n, ct_value obj, ct_value lo,
                          ct_value hi, ct_value st) {
  if (obj.kind == CT_UNDEF)
    fail_undef(r, n, obj);
  int64_t step = st.kind == CT_NONE ? 1 : as_int(r, n, st, "a slice step");
  if (step == 0)
    fail(r, n, "slice step cannot be zero%s%s", "", "");
  size_t len;
  size_t *off = NULL;
  if (obj.kind == CT_LIST)
    len = obj.u.list->n;
  else if (obj.kind == CT_STR)
    off = utf8_offsets(r, obj.u.str.s, obj.u.str.n, &len);
  else
    fail(r, n, "'%s' object is not subscriptable%s", ct_type_name(obj), "");
  int64_t L = (int64_t)len, start, stop;
  if (lo.kind == CT_NONE)
    start = step < 0 ? L - 1 : 0;
  else {
    start = as_int(r, n, lo, "a slice index");
    if (start < 0) {
      start += L;
      if (start < 0)
        start = step < 0 ? -1 : 0;
    } else if (start >= L)
      start = step < 0 ? L - 1 : L;
  }
  if (hi.kind == CT_NONE)
    stop = step < 0 ? -1 : L;
  else {
    stop = as_int(r, n, hi, "a slice index");
    if (stop < 0) {
      stop += L;
      if (stop < 0)
        stop = step < 0 ? -1 : 0;
    } else if (stop >= L)
      stop = step < 0 ? L - 1 : L;
  }
  size_t count = 0;
  if (step > 0 && start < stop)
    count = (size_t)((stop - start - 1) / step + 1);
  else if (step < 0 && stop < start)
    count = (size_t)((start - stop - 1) / (-step) + 1);
  if (obj.kind == CT_LIST) {
    ct_value l = ct_new_list(r->a, count, obj.u.list->tuple);
    for (size_t i = 0; i < count; ++i)
      l.u.list->items[i] = obj.u.list->items[start + (int64_t)i * step];
    return l;
  }
  if (step == 1)
    return count ? substr(obj.u.str.s, off[start], off[start + count])
                 : ct_str("", 0);
  ct_buf b = {0};
  ct_buf_add(r->a, &b, "", 0);
  for (size_t i = 0; i < count; ++i) {
    int64_t k = start + (int64_t)i * step;
    ct_buf_add(r->a, &b, obj.u.str.s + off[k], off[k + 1] - off[k]);
  }
  return buf_value(&b);
}

static ct_value lookup(R *r, const ct_node *n, scope *s, const char *name) {
  for (; s; s = s->parent) {
    ct_value *v = ct_dict_get(&s->vars, name, strlen(name));
    if (v)
      return *v;
  }
  ct_value *v = ct_dict_get(r->ctx.u.dict, name, strlen(name));
  if (v)
    return *v;
  static const char *const globals[] = {
      "range", "namespace", "dict", "raise_exception", "strftime_now", NULL};
  for (const char *const *g = globals; *g; ++g)
    if (!strcmp(*g, name)) {
      ct_value f = {CT_FUNC, {.fn = {*g, NULL}}};
      return f;
    }
  (void)n;
  return ct_undef(hint(r, "'%s' is undefined%s", name, ""));
}

static void assign(R *r, scope *s, const char *name, ct_value v) {
  ct_dict_set(r->a, &s->vars, ct_cstr(name), v);
}

/*===- Operators ----------------------------------------------------------===*/

_Noreturn static void bad_operands(R *r, const ct_node *n, const char *op,
                                   ct_value x, ct_value y) {
  if (x.kind == CT_UNDEF)
    fail_undef(r, n, x);
  if (y.kind == CT_UNDEF)
    fail_undef(r, n, y);
  ct_fail(r->a, TFM_ERR_FORMAT, n->line, n->col,
          "unsupported operand type(s) for %s: '%s' and '%s'", op,
          ct_type_name(x), ct_type_name(y));
}

static ct_value repeat(R *r, const ct_node *n, ct_value seq, int64_t k) {
  if (k < 0)
    k = 0;
  if (seq.kind == CT_STR) {
    if (seq.u.str.n && (uint64_t)k > TFM_CHAT_MAX_OUTPUT / seq.u.str.n)
      fail(r, n, "a repeated string longer than the output limit%s%s", "", "");
    ct_buf b = {0};
    ct_buf_add(r->a, &b, "", 0);
    for (int64_t i = 0; i < k; ++i)
      ct_buf_add(r->a, &b, seq.u.str.s, seq.u.str.n);
    return buf_value(&b);
  }
  size_t m = seq.u.list->n;
  if (m && (uint64_t)k > TFM_CHAT_MAX_ITERATIONS / m)
    fail(r, n, "a repeated list longer than the iteration limit%s%s", "", "");
  ct_value l = ct_new_list(r->a, m * (size_t)k, seq.u.list->tuple);
  for (int64_t i = 0; i < k; ++i)
    memcpy(l.u.list->items + (size_t)i * m, seq.u.list->items,
           m * sizeof(ct_value));
  return l;
}

/* Python's printf-style formatting, fmt % args: the conversions s r a d i
 * u f F e E g G x X o c and %%, with flags, width and precision (or "*");
 * args a tuple, a mapping for %(name)s, or one value. */
static ct_value percent_format(R *r, const ct_node *n, ct_value fmt,
                               ct_value args) {
  bool tuple = args.kind == CT_LIST && args.u.list->tuple;
  const ct_value *items = tuple ? args.u.list->items : &args;
  size_t nitems = tuple ? args.u.list->n : 1, used = 0;
  bool mapping_used = false;
  ct_buf b = {0};
  ct_buf_add(r->a, &b, "", 0);
  const char *p = fmt.u.str.s, *end = p + fmt.u.str.n;
  while (p < end) {
    const char *pc = memchr(p, '%', (size_t)(end - p));
    if (!pc) {
      ct_buf_add(r->a, &b, p, (size_t)(end - p));
      break;
    }
    ct_buf_add(r->a, &b, p, (size_t)(pc - p));
    p = pc + 1;
    if (p >= end)
      fail(r, n, "incomplete format%s%s", "", "");
    if (*p == '%') {
      ct_buf_add(r->a, &b, "%", 1);
      ++p;
      continue;
    }
    ct_value v;
    bool have = false;
    if (*p == '(') {
      const char *close = memchr(p, ')', (size_t)(end - p));
      if (!close)
        fail(r, n, "incomplete format key%s%s", "", "");
      if (args.kind != CT_DICT)
        fail(r, n, "format requires a mapping%s%s", "", "");
      ct_value *m = ct_dict_get(args.u.dict, p + 1, (size_t)(close - p - 1));
      if (!m)
        fail(r, n, "KeyError: '%s'%s",
             ct_strndup(r->a, p + 1, (size_t)(close - p - 1)), "");
      v = *m;
      have = mapping_used = true;
      p = close + 1;
    }
    char spec[32];
    size_t k = 0;
    spec[k++] = '%';
    while (p < end && strchr("-+ 0#", *p) && *p && k < 8)
      spec[k++] = *p++;
    int width = -1, prec = -1;
    if (p < end && *p == '*') {
      if (used >= nitems)
        fail(r, n, "not enough arguments for format string%s%s", "", "");
      width = (int)as_int(r, n, items[used++], "* width");
      ++p;
    } else
      for (width = p < end && *p >= '0' && *p <= '9' ? 0 : -1;
           p < end && *p >= '0' && *p <= '9'; ++p)
        width = width * 10 + (*p - '0');
    if (p < end && *p == '.') {
      ++p;
      prec = 0;
      if (p < end && *p == '*') {
        if (used >= nitems)
          fail(r, n, "not enough arguments for format string%s%s", "", "");
        prec = (int)as_int(r, n, items[used++], "* precision");
        ++p;
      } else
        for (; p < end && *p >= '0' && *p <= '9'; ++p)
          prec = prec * 10 + (*p - '0');
    }
    while (p < end && (*p == 'l' || *p == 'h' || *p == 'L'))
      ++p;
    if (p >= end)
      fail(r, n, "incomplete format%s%s", "", "");
    char conv = *p++;
    if (!have) {
      if (used >= nitems)
        fail(r, n, "not enough arguments for format string%s%s", "", "");
      v = items[used++];
    }
    bool left = memchr(spec + 1, '-', k - 1) != NULL;
    ct_value text;
    char tmp[512];
    switch (conv) {
    case 's':
    case 'r':
    case 'a': {
      ct_buf t = {0};
      ct_buf_add(r->a, &t, "", 0);
      if (conv == 's')
        ct_to_str(r->a, &t, v);
      else
        ct_repr(r->a, &t, v);
      text = buf_value(&t);
      if (prec >= 0) {
        size_t cnt;
        size_t *off = utf8_offsets(r, text.u.str.s, text.u.str.n, &cnt);
        if ((size_t)prec < cnt)
          text.u.str.n = off[prec];
      }
      break;
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o':
    case 'c': {
      if (!is_num(v))
        fail(r, n, "%%%s format: a number is required, not %s",
             ct_strndup(r->a, &conv, 1), ct_type_name(v));
      long long iv = v.kind == CT_FLOAT ? (long long)v.u.f : (long long)ival(v);
      if (conv == 'c') {
        char c = (char)iv;
        text = ct_str(ct_strndup(r->a, &c, 1), 1);
        break;
      }
      memcpy(spec + k, "ll", 2);
      spec[k + 2] = conv == 'i' || conv == 'u' ? 'd' : conv;
      spec[k + 3] = 0;
      if (prec >= 0) {
        char s2[40];
        snprintf(s2, sizeof s2, "%%.%d%s", prec, spec + k);
        snprintf(tmp, sizeof tmp, s2, iv);
      } else
        snprintf(tmp, sizeof tmp, spec, iv);
      text = ct_str(ct_strndup(r->a, tmp, strlen(tmp)), strlen(tmp));
      break;
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      if (!is_num(v))
        fail(r, n, "must be real number, not %s%s", ct_type_name(v), "");
      spec[k] = '.';
      snprintf(spec + k + 1, sizeof spec - k - 1, "%d%c", prec < 0 ? 6 : prec,
               conv);
      snprintf(tmp, sizeof tmp, spec, num(v));
      text = ct_str(ct_strndup(r->a, tmp, strlen(tmp)), strlen(tmp));
      break;
    }
    default: {
      char c[2] = {conv, 0};
      fail(r, n, "unsupported format character '%s'%s", c, "");
    }
    }
    /* width, by code points; zero padding was done by snprintf */
    size_t len = utf8_len(text.u.str.s, text.u.str.n);
    if (width > 0 && (size_t)width > len && width < 4096) {
      bool zero = memchr(spec + 1, '0', k - 1) != NULL && !left &&
                  conv != 's' && conv != 'r' && conv != 'a' && conv != 'c';
      if (!zero && !left)
        for (size_t i = len; i < (size_t)width; ++i)
          ct_buf_add(r->a, &b, " ", 1);
      if (zero) {
        /* let printf pad numbers with zeros after the sign */
        char s2[48], out[600];
        if (strchr("fFeEgG", conv)) {
          snprintf(s2, sizeof s2, "%%0%d.%d%c", width, prec < 0 ? 6 : prec,
                   conv);
          snprintf(out, sizeof out, s2, num(v));
        } else {
          snprintf(s2, sizeof s2, "%%0%dll%c", width,
                   conv == 'i' || conv == 'u' ? 'd' : conv);
          snprintf(out, sizeof out, s2,
                   v.kind == CT_FLOAT ? (long long)v.u.f : (long long)ival(v));
        }
        ct_buf_str(r->a, &b, out);
        continue;
      }
      ct_buf_add(r->a, &b, text.u.str.s, text.u.str.n);
      if (left)
        for (size_t i = len; i < (size_t)width; ++i)
          ct_buf_add(r->a, &b, " ", 1);
      continue;
    }
    ct_buf_add(r->a, &b, text.u.str.s, text.u.str.n);
  }
  if (!mapping_used && used < nitems && !(args.kind == CT_DICT && !tuple))
    fail(r, n, "not all arguments converted during string formatting%s%s", "",
         "");
  return buf_value(&b);
}

static ct_value arith(R *r, const ct_node *n, int op, ct_value x, ct_value y) {
  static const char *names[] = {"+", "-", "*", "/", "//", "%", "**"};
  const char *name = names[op];
  if (op == OP_ADD && x.kind == CT_STR && y.kind == CT_STR) {
    ct_buf b = {0};
    ct_buf_add(r->a, &b, x.u.str.s, x.u.str.n);
    ct_buf_add(r->a, &b, y.u.str.s, y.u.str.n);
    return buf_value(&b);
  }
  if (op == OP_ADD && x.kind == CT_LIST && y.kind == CT_LIST &&
      x.u.list->tuple == y.u.list->tuple) {
    ct_value l = ct_new_list(r->a, x.u.list->n + y.u.list->n, x.u.list->tuple);
    memcpy(l.u.list->items, x.u.list->items, x.u.list->n * sizeof(ct_value));
    memcpy(l.u.list->items + x.u.list->n, y.u.list->items,
           y.u.list->n * sizeof(ct_value));
    return l;
  }
  if (op == OP_MUL && (x.kind == CT_STR || x.kind == CT_LIST) &&
      (y.kind == CT_INT || y.kind == CT_BOOL))
    return repeat(r, n, x, ival(y));
  if (op == OP_MUL && (y.kind == CT_STR || y.kind == CT_LIST) &&
      (x.kind == CT_INT || x.kind == CT_BOOL))
    return repeat(r, n, y, ival(x));
  if (op == OP_MOD && x.kind == CT_STR)
    return percent_format(r, n, x, y);
  if (!is_num(x) || !is_num(y))
    bad_operands(r, n, name, x, y);
  bool ints = x.kind != CT_FLOAT && y.kind != CT_FLOAT;
  if (ints) {
    int64_t a = ival(x), b = ival(y);
    switch (op) {
    case OP_ADD:
      if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
        break;
      return ct_int(a + b);
    case OP_SUB:
      if ((b < 0 && a > INT64_MAX + b) || (b > 0 && a < INT64_MIN + b))
        break;
      return ct_int(a - b);
    case OP_MUL:
      if (a && b &&
          (a > INT64_MAX / (b < 0 ? -b : b) ||
           a < -(INT64_MAX / (b < 0 ? -b : b))))
        break;
      return ct_int(a * b);
    case OP_FLOORDIV:
    case OP_MOD: {
      if (b == 0)
        fail(r, n, "integer division or modulo by zero%s%s", "", "");
      if (a == INT64_MIN && b == -1)
        break;
      int64_t q = a / b, m = a % b;
      if (m && ((m < 0) != (b < 0))) {
        q -= 1;
        m += b;
      }
      return ct_int(op == OP_MOD ? m : q);
    }
    case OP_POW:
      if (b >= 0) {
        int64_t p = 1;
        for (int64_t i = 0; i < b; ++i) {
          if (a && (p > INT64_MAX / (a < 0 ? -a : a)))
            goto overflow;
          p *= a;
          if (p == 0 || p == 1)
            break;
        }
        return ct_int(p);
      }
      return ct_float(pow((double)a, (double)b));
    default:
      break;
    }
    if (op != OP_DIV)
    overflow:
      fail(r, n, "integer overflow in '%s'%s", name, "");
  }
  double a = num(x), b = num(y);
  switch (op) {
  case OP_ADD:
    return ct_float(a + b);
  case OP_SUB:
    return ct_float(a - b);
  case OP_MUL:
    return ct_float(a * b);
  case OP_DIV:
    if (b == 0)
      fail(r, n, "division by zero%s%s", "", "");
    return ct_float(a / b);
  case OP_FLOORDIV:
  case OP_MOD: {
    if (b == 0)
      fail(r, n, "float division or modulo by zero%s%s", "", "");
    double m = fmod(a, b);
    if (m && ((m < 0) != (b < 0)))
      m += b;
    return ct_float(op == OP_MOD ? m : floor(a / b));
  }
  default:
    return ct_float(pow(a, b));
  }
}

static int compare(R *r, const ct_node *n, int op, ct_value x, ct_value y) {
  static const char *names[] = {"<", "<=", ">", ">="};
  if (is_num(x) && is_num(y)) {
    if (x.kind != CT_FLOAT && y.kind != CT_FLOAT)
      return (ival(x) > ival(y)) - (ival(x) < ival(y));
    return (num(x) > num(y)) - (num(x) < num(y));
  }
  if (x.kind == CT_STR && y.kind == CT_STR) {
    size_t m = x.u.str.n < y.u.str.n ? x.u.str.n : y.u.str.n;
    int c = memcmp(x.u.str.s, y.u.str.s, m);
    return c ? (c > 0) - (c < 0)
             : (x.u.str.n > y.u.str.n) - (x.u.str.n < y.u.str.n);
  }
  if (x.kind == CT_LIST && y.kind == CT_LIST) {
    size_t m = x.u.list->n < y.u.list->n ? x.u.list->n : y.u.list->n;
    for (size_t i = 0; i < m; ++i)
      if (!ct_equal(x.u.list->items[i], y.u.list->items[i]))
        return compare(r, n, op, x.u.list->items[i], y.u.list->items[i]);
    return (x.u.list->n > m) - (y.u.list->n > m);
  }
  if (x.kind == CT_UNDEF)
    fail_undef(r, n, x);
  if (y.kind == CT_UNDEF)
    fail_undef(r, n, y);
  ct_fail(r->a, TFM_ERR_FORMAT, n->line, n->col,
          "'%s' not supported between instances of '%s' and '%s'",
          names[op - OP_LT], ct_type_name(x), ct_type_name(y));
}

static bool contains(R *r, const ct_node *n, ct_value item, ct_value c) {
  switch (c.kind) {
  case CT_STR:
    if (item.kind != CT_STR)
      fail(r, n, "'in <string>' requires string as left operand, not %s%s",
           ct_type_name(item), "");
    if (!item.u.str.n)
      return true;
    for (size_t i = 0; i + item.u.str.n <= c.u.str.n; ++i)
      if (!memcmp(c.u.str.s + i, item.u.str.s, item.u.str.n))
        return true;
    return false;
  case CT_LIST:
    for (size_t i = 0; i < c.u.list->n; ++i)
      if (ct_equal(c.u.list->items[i], item))
        return true;
    return false;
  case CT_DICT:
    return ct_dict_find(c.u.dict, item) != NULL;
  case CT_UNDEF:
    return false;
  default:
    fail(r, n, "argument of type '%s' is not iterable%s", ct_type_name(c), "");
  }
}

static bool cmp_op(R *r, const ct_node *n, int op, ct_value x, ct_value y) {
  switch (op) {
  case OP_EQ:
    return ct_equal(x, y);
  case OP_NE:
    return !ct_equal(x, y);
  case OP_IN:
    return contains(r, n, x, y);
  case OP_NOTIN:
    return !contains(r, n, x, y);
  case OP_LT:
    return compare(r, n, op, x, y) < 0;
  case OP_LE:
    return compare(r, n, op, x, y) <= 0;
  case OP_GT:
    return compare(r, n, op, x, y) > 0;
  default:
    return compare(r, n, op, x, y) >= 0;
  }
}

/*===- Arguments ----------------------------------------------------------===*/

static args eval_args(R *r, const ct_node *n, scope *s) {
  args a = {0};
  a.npos = n->nargs;
  a.pos = ct_alloc(r->a, (n->nargs + 1) * sizeof(ct_value));
  for (size_t i = 0; i < n->nargs; ++i)
    a.pos[i] = eval(r, n->args[i], s);
  a.nkw = n->nkw;
  a.kwn = n->kwnames;
  a.kwv = ct_alloc(r->a, (n->nkw + 1) * sizeof(ct_value));
  for (size_t i = 0; i < n->nkw; ++i)
    a.kwv[i] = eval(r, n->kwvals[i], s);
  return a;
}

/* Argument `i` (positional) or `name` (keyword), else `def`. Checks that
 * no unknown keyword is given: pass the full parameter list once with
 * check_args. */
static ct_value arg(const args *a, size_t i, const char *name, ct_value def) {
  if (i < a->npos)
    return a->pos[i];
  for (size_t k = 0; k < a->nkw; ++k)
    if (!strcmp(a->kwn[k], name))
      return a->kwv[k];
  return def;
}

static void check_args(R *r, const ct_node *n, const args *a, const char *what,
                       const char *const *params) {
  size_t np = 0;
  while (params[np])
    ++np;
  if (a->npos > np)
    fail(r, n, "%s takes at most %s arguments", what, num_str(r, np));
  for (size_t k = 0; k < a->nkw; ++k)
    if (!in_list(a->kwn[k], params))
      fail(r, n, "%s got an unexpected keyword argument '%s'", what, a->kwn[k]);
}

/*===- Strings ------------------------------------------------------------===*/

static bool in_chars(uint32_t cp, ct_value chars) {
  if (chars.kind != CT_STR)
    return uspace(cp);
  for (size_t i = 0; i < chars.u.str.n;) {
    size_t k;
    if (utf8_decode(chars.u.str.s + i, chars.u.str.n - i, &k) == cp)
      return true;
    i += k;
  }
  return false;
}

/* str.strip/lstrip/rstrip(chars): which = 1 left, 2 right, 3 both. */
static ct_value strip(R *r, const ct_node *n, ct_value s, ct_value chars,
                      int which) {
  if (chars.kind != CT_STR && chars.kind != CT_NONE && chars.kind != CT_UNDEF)
    fail(r, n, "strip arg must be None or str%s%s", "", "");
  const char *p = s.u.str.s;
  size_t b = 0, e = s.u.str.n;
  if (which & 1)
    while (b < e) {
      size_t k;
      if (!in_chars(utf8_decode(p + b, e - b, &k), chars))
        break;
      b += k;
    }
  if (which & 2)
    while (e > b) {
      size_t st = e - 1;
      while (st > b && ((unsigned char)p[st] & 0xC0) == 0x80)
        --st;
      size_t k;
      if (!in_chars(utf8_decode(p + st, e - st, &k), chars))
        break;
      e = st;
    }
  return substr(p, b, e);
}

static ct_value map_case(R *r, ct_value s, int mode) {
  /* mode 0 upper, 1 lower, 2 capitalize, 3 title (Jinja), 4 str.title,
   * 5 swapcase; ASCII letters only */
  char *o = ct_strndup(r->a, s.u.str.s, s.u.str.n);
  bool word_start = true;
  for (size_t i = 0; i < s.u.str.n; ++i) {
    char c = o[i];
    bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
    bool up;
    switch (mode) {
    case 0:
      up = true;
      break;
    case 1:
      up = false;
      break;
    case 2:
      up = i == 0;
      break;
    case 3: {
      up = word_start;
      unsigned char u = (unsigned char)c;
      word_start = u == '-' || u == '(' || u == '{' || u == '[' || u == '<' ||
                   u == ' ' || (u >= '\t' && u <= '\r') ||
                   (u >= 0x1c && u <= 0x1f);
      break;
    }
    case 4:
      up = word_start;
      word_start = !(lower || upper) && ((unsigned char)c < 0x80);
      break;
    default:
      up = lower;
      if (!lower && !upper)
        continue;
      o[i] = up ? (char)(c - 32) : (char)(c + 32);
      continue;
    }
    if (up && lower)
      o[i] = (char)(c - 32);
    else if (!up && upper)
      o[i] = (char)(c + 32);
  }
  return ct_str(o, s.u.str.n);
}

static const char *find_bytes(const char *h, size_t hn, const char *nd,
                              size_t nn) {
  if (nn == 0)
    return h;
  for (size_t i = 0; i + nn <= hn; ++i)
    if (!memcmp(h + i, nd, nn))
      return h + i;
  return NULL;
}

static ct_value replace(R *r, ct_value s, ct_value old, ct_value new_,
                        int64_t count) {
  ct_buf b = {0};
  ct_buf_add(r->a, &b, "", 0);
  const char *p = s.u.str.s, *end = p + s.u.str.n;
  if (old.u.str.n == 0) {
    /* inserts between characters */
    size_t k;
    size_t *off = utf8_offsets(r, p, s.u.str.n, &k);
    int64_t done = 0;
    for (size_t i = 0; i <= k; ++i) {
      if (count < 0 || done < count) {
        ct_buf_add(r->a, &b, new_.u.str.s, new_.u.str.n);
        ++done;
      }
      if (i < k)
        ct_buf_add(r->a, &b, p + off[i], off[i + 1] - off[i]);
    }
    return buf_value(&b);
  }
  int64_t done = 0;
  while (p < end) {
    const char *f =
        count >= 0 && done >= count
            ? NULL
            : find_bytes(p, (size_t)(end - p), old.u.str.s, old.u.str.n);
    if (!f)
      break;
    ct_buf_add(r->a, &b, p, (size_t)(f - p));
    ct_buf_add(r->a, &b, new_.u.str.s, new_.u.str.n);
    p = f + old.u.str.n;
    ++done;
  }
  ct_buf_add(r->a, &b, p, (size_t)(end - p));
  return buf_value(&b);
}

static ct_value split(R *r, const ct_node *n, ct_value s, ct_value sep,
                      int64_t maxsplit, bool right) {
  ct_value out[1];
  (void)out;
  /* collect pieces in a growable list */
  size_t cap = 8, k = 0;
  ct_value *items = ct_alloc(r->a, cap * sizeof *items);
#define PUSH(v)                                                                \
  do {                                                                         \
    if (k == cap) {                                                            \
      ct_value *p2 = ct_alloc(r->a, 2 * cap * sizeof *p2);                     \
      memcpy(p2, items, k * sizeof *p2);                                       \
      items = p2;                                                              \
      cap *= 2;                                                                \
    }                                                                          \
    items[k++] = (v);                                                          \
  } while (0)
  const char *p = s.u.str.s;
  size_t len = s.u.str.n;
  if (sep.kind == CT_STR) {
    if (!sep.u.str.n)
      fail(r, n, "empty separator%s%s", "", "");
    if (!right) {
      size_t i = 0;
      int64_t done = 0;
      for (;;) {
        const char *f =
            maxsplit >= 0 && done >= maxsplit
                ? NULL
                : find_bytes(p + i, len - i, sep.u.str.s, sep.u.str.n);
        if (!f) {
          PUSH(substr(p, i, len));
          break;
        }
        PUSH(substr(p, i, (size_t)(f - p)));
        i = (size_t)(f - p) + sep.u.str.n;
        ++done;
      }
    } else {
      size_t e = len;
      int64_t done = 0;
      for (;;) {
        const char *f = NULL;
        if (!(maxsplit >= 0 && done >= maxsplit) && e >= sep.u.str.n)
          for (size_t i = e - sep.u.str.n + 1; i-- > 0;)
            if (!memcmp(p + i, sep.u.str.s, sep.u.str.n)) {
              f = p + i;
              break;
            }
        if (!f) {
          PUSH(substr(p, 0, e));
          break;
        }
        PUSH(substr(p, (size_t)(f - p) + sep.u.str.n, e));
        e = (size_t)(f - p);
        ++done;
      }
      for (size_t i = 0; i < k / 2; ++i) {
        ct_value t = items[i];
        items[i] = items[k - 1 - i];
        items[k - 1 - i] = t;
      }
    }
  } else {
    /* runs of whitespace; left to right (rsplit with maxsplit is rare:
     * treated the same unless maxsplit limits it) */
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
      while (i < len) {
        size_t cl;
        if (!uspace(utf8_decode(p + i, len - i, &cl)))
          break;
        i += cl;
      }
      if (i >= len)
        break;
      if (maxsplit >= 0 && done >= maxsplit) {
        ct_value rest = strip(r, n, substr(p, i, len), ct_none(), 2);
        PUSH(rest);
        break;
      }
      size_t j = i;
      while (j < len) {
        size_t cl;
        if (uspace(utf8_decode(p + j, len - j, &cl)))
          break;
        j += cl;
      }
      PUSH(substr(p, i, j));
      ++done;
      i = j;
    }
  }
#undef PUSH
  ct_value l = ct_new_list(r->a, k, false);
  memcpy(l.u.list->items, items, k * sizeof *items);
  return l;
}

/* str.splitlines() */
static ct_value splitlines(R *r, ct_value s, bool keepends) {
  size_t cap = 8, k = 0;
  ct_value *items = ct_alloc(r->a, cap * sizeof *items);
  const char *p = s.u.str.s;
  size_t len = s.u.str.n, start = 0, i = 0;
  while (i < len) {
    size_t cl;
    uint32_t c = utf8_decode(p + i, len - i, &cl);
    size_t brk = 0;
    if (c == '\r' && i + 1 < len && p[i + 1] == '\n')
      brk = 2;
    else if (c == '\n' || c == '\r' || c == 0x0b || c == 0x0c ||
             (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 ||
             c == 0x2029)
      brk = cl;
    if (brk) {
      if (k == cap) {
        ct_value *p2 = ct_alloc(r->a, 2 * cap * sizeof *p2);
        memcpy(p2, items, k * sizeof *p2);
        items = p2;
        cap *= 2;
      }
      items[k++] = substr(p, start, keepends ? i + brk : i);
      i += brk;
      start = i;
    } else {
      i += cl;
    }
  }
  if (start < len) {
    if (k == cap) {
      ct_value *p2 = ct_alloc(r->a, 2 * cap * sizeof *p2);
      memcpy(p2, items, k * sizeof *p2);
      items = p2;
    }
    items[k++] = substr(p, start, len);
  }
  ct_value l = ct_new_list(r->a, k, false);
  memcpy(l.u.list->items, items, k * sizeof *items);
  return l;
}

static bool affix(R *r, const ct_node *n, ct_value s, ct_value x, bool end) {
  if (x.kind == CT_LIST && x.u.list->tuple) {
    for (size_t i = 0; i < x.u.list->n; ++i)
      if (affix(r, n, s, x.u.list->items[i], end))
        return true;
    return false;
  }
  if (x.kind != CT_STR)
    fail(r, n, "%s first arg must be str or a tuple of str, not %s",
         end ? "endswith" : "startswith", ct_type_name(x));
  if (x.u.str.n > s.u.str.n)
    return false;
  return !memcmp(s.u.str.s + (end ? s.u.str.n - x.u.str.n : 0), x.u.str.s,
                 x.u.str.n);
}

static ct_value join(R *r, const ct_node *n, ct_value sep, ct_list *items,
                     bool strict) {
  ct_buf b = {0};
  ct_buf_add(r->a, &b, "", 0);
  for (size_t i = 0; i < items->n; ++i) {
    if (i)
      ct_buf_add(r->a, &b, sep.u.str.s, sep.u.str.n);
    if (strict && items->items[i].kind != CT_STR)
      fail(r, n, "sequence item %s: expected str instance, %s found",
           num_str(r, i), ct_type_name(items->items[i]));
    ct_to_str(r->a, &b, items->items[i]);
  }
  return buf_value(&b);
}

static bool is_all(ct_value s, int cls) {
  if (!s.u.str.n)
    return false;
  bool cased = false;
  for (size_t i = 0; i < s.u.str.n; ++i) {
    unsigned char c = (unsigned char)s.u.str.s[i];
    bool d = c >= '0' && c <= '9', lo = c >= 'a' && c <= 'z',
         up = c >= 'A' && c <= 'Z';
    switch (cls) {
    case 0:
      if (!d)
        return false;
      break;
    case 1:
      if (!lo && !up)
        return false;
      break;
    case 2:
      if (!lo && !up && !d)
        return false;
      break;
    case 3:
      if (!(c == ' ' || (c >= '\t' && c <= '\r')))
        return false;
      break;
    case 4:
      if (lo)
        return false;
      cased |= up;
      break;
    case 5:
      if (up)
        return false;
      cased |= lo;
      break;
    }
  }
  return cls < 4 || cased;
}

static ct_value call_str_method(R *r, const ct_node *n, const char *name,
                                ct_value s, const args *a) {
  ct_value none = ct_none();
  if (!strcmp(name, "strip") || !strcmp(name, "lstrip") ||
      !strcmp(name, "rstrip"))
    return strip(r, n, s, arg(a, 0, "chars", none),
                 name[0] == 's'   ? 3
                 : name[0] == 'l' ? 1
                                  : 2);
  if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
    ct_value ms = arg(a, 1, "maxsplit", ct_int(-1));
    return split(r, n, s, arg(a, 0, "sep", none), as_int(r, n, ms, "maxsplit"),
                 name[0] == 'r');
  }
  if (!strcmp(name, "startswith") || !strcmp(name, "endswith"))
    return ct_bool(affix(r, n, s, arg(a, 0, "prefix", none), name[0] == 'e'));
  if (!strcmp(name, "replace")) {
    ct_value o = arg(a, 0, "old", none), w = arg(a, 1, "new", none);
    if (o.kind != CT_STR || w.kind != CT_STR)
      fail(r, n, "replace arguments must be str%s%s", "", "");
    return replace(r, s, o, w,
                   as_int(r, n, arg(a, 2, "count", ct_int(-1)), "count"));
  }
  if (!strcmp(name, "upper"))
    return map_case(r, s, 0);
  if (!strcmp(name, "lower") || !strcmp(name, "casefold"))
    return map_case(r, s, 1);
  if (!strcmp(name, "capitalize"))
    return map_case(r, s, 2);
  if (!strcmp(name, "title"))
    return map_case(r, s, 4);
  if (!strcmp(name, "swapcase"))
    return map_case(r, s, 5);
  if (!strcmp(name, "find") || !strcmp(name, "rfind") ||
      !strcmp(name, "index") || !strcmp(name, "count")) {
    ct_value x = arg(a, 0, "sub", none);
    if (x.kind != CT_STR)
      fail(r, n, "%s argument must be str%s", name, "");
    if (!strcmp(name, "count")) {
      if (!x.u.str.n)
        return ct_int((int64_t)utf8_len(s.u.str.s, s.u.str.n) + 1);
      int64_t c = 0;
      for (size_t i = 0; i + x.u.str.n <= s.u.str.n;)
        if (!memcmp(s.u.str.s + i, x.u.str.s, x.u.str.n)) {
          ++c;
          i += x.u.str.n;
        } else
          ++i;
      return ct_int(c);
    }
    int64_t at = -1;
    for (size_t i = 0; i + x.u.str.n <= s.u.str.n; ++i)
      if (!memcmp(s.u.str.s + i, x.u.str.s, x.u.str.n)) {
        at = (int64_t)i;
        if (name[0] != 'r')
          break;
      }
    if (at < 0 && name[0] == 'i')
      fail(r, n, "substring not found%s%s", "", "");
    return ct_int(at < 0 ? -1 : (int64_t)utf8_len(s.u.str.s, (size_t)at));
  }
  if (!strcmp(name, "join"))
    return join(r, n, s, iterate(r, n, arg(a, 0, "iterable", none)), true);
  if (!strcmp(name, "splitlines"))
    return splitlines(r, s, ct_truthy(arg(a, 0, "keepends", ct_bool(false))));
  if (!strcmp(name, "isdigit") || !strcmp(name, "isnumeric") ||
      !strcmp(name, "isdecimal"))
    return ct_bool(is_all(s, 0));
  if (!strcmp(name, "isalpha"))
    return ct_bool(is_all(s, 1));
  if (!strcmp(name, "isalnum"))
    return ct_bool(is_all(s, 2));
  if (!strcmp(name, "isspace"))
    return ct_bool(is_all(s, 3));
  if (!strcmp(name, "isupper"))
    return ct_bool(is_all(s, 4));
  if (!strcmp(name, "islower"))
    return ct_bool(is_all(s, 5));
  if (!strcmp(name, "removeprefix") || !strcmp(name, "removesuffix")) {
    ct_value x = arg(a, 0, "prefix", none);
    if (x.kind != CT_STR)
      fail(r, n, "%s argument must be str%s", name, "");
    bool end = name[6] == 's';
    if (!affix(r, n, s, x, end))
      return s;
    return end ? substr(s.u.str.s, 0, s.u.str.n - x.u.str.n)
               : substr(s.u.str.s, x.u.str.n, s.u.str.n);
  }
  fail(r, n, "the string method '%s' is not supported%s", name, "");
}

/*===- Filters ------------------------------------------------------------===*/

static const char *const filters[] = {
    "abs",    "capitalize", "count",   "d",         "default",  "e",
    "escape", "first",      "float",   "indent",    "int",      "items",
    "join",   "last",       "length",  "list",      "lower",    "map",
    "reject", "rejectattr", "replace", "reverse",   "round",    "safe",
    "select", "selectattr", "string",  "sum",       "title",    "tojson",
    "trim",   "unique",     "upper",   "wordcount", "dictsort", "sort",
    "max",    "min",        "center",  "attr",      "format",   NULL};
static const char *const tests[] = {
    "boolean",  "callable",    "defined", "divisibleby", "eq",
    "equalto",  "even",        "false",   "float",       "ge",
    "gt",       "greaterthan", "in",      "integer",     "iterable",
    "le",       "lessthan",    "lower",   "lt",          "mapping",
    "ne",       "none",        "number",  "odd",         "sameas",
    "sequence", "string",      "true",    "undefined",   "upper",
    "escaped",  "filter",      "test",    NULL};

bool ct_is_filter(const char *name) { return in_list(name, filters); }
bool ct_is_test(const char *name) { return in_list(name, tests); }

static bool run_test(R *r, const ct_node *n, const char *name, ct_value v,
                     const ct_value *targs, size_t ntargs);

/* getattr for a dotted attribute path ("a.b.0"), as Jinja2's
 * make_attrgetter: each part through getitem. */
static ct_value attr_path_or(R *r, const ct_node *n, ct_value v, ct_value path,
                             const ct_value *def) {
  if (path.kind == CT_INT)
    return get_item(r, n, v, path);
  if (path.kind != CT_STR)
    fail(r, n, "an attribute name must be a string, not %s%s",
         ct_type_name(path), "");
  const char *p = path.u.str.s, *end = p + path.u.str.n;
  while (p <= end) {
    const char *dot = memchr(p, '.', (size_t)(end - p));
    if (!dot)
      dot = end;
    ct_value part =
        ct_str(ct_strndup(r->a, p, (size_t)(dot - p)), (size_t)(dot - p));
    bool digits = part.u.str.n > 0;
    for (size_t i = 0; i < part.u.str.n; ++i)
      digits = digits && part.u.str.s[i] >= '0' && part.u.str.s[i] <= '9';
    v = get_item(r, n, v, digits ? ct_int(atoll(part.u.str.s)) : part);
    if (def && v.kind == CT_UNDEF)
      v = *def;
    p = dot + 1;
  }
  return v;
}

static ct_value attr_path(R *r, const ct_node *n, ct_value v, ct_value path) {
  return attr_path_or(r, n, v, path, NULL);
}

static ct_value list_of(R *r, ct_value *items, size_t k) {
  ct_value l = ct_new_list(r->a, k, false);
  if (k)
    memcpy(l.u.list->items, items, k * sizeof *items);
  return l;
}

/* select/reject/selectattr/rejectattr */
static ct_value select_items(R *r, const ct_node *n, ct_value v, const args *a,
                             bool attr, bool keep) {
  ct_list *items = iterate(r, n, v);
  ct_value *out = ct_alloc(r->a, (items->n + 1) * sizeof *out);
  size_t k = 0, first = attr ? 1 : 0;
  const char *test = NULL;
  if (a->npos > first) {
    if (a->pos[first].kind != CT_STR)
      fail(r, n, "a test name must be a string%s%s", "", "");
    test = a->pos[first].u.str.s;
    if (!ct_is_test(test))
      fail(r, n, "no test named '%s'%s", test, "");
  }
  size_t ntargs = a->npos > first + 1 ? a->npos - first - 1 : 0;
  for (size_t i = 0; i < items->n; ++i) {
    ct_value x = items->items[i];
    if (attr) {
      if (!a->npos)
        fail(r, n, "selectattr/rejectattr need an attribute%s%s", "", "");
      x = attr_path(r, n, x, a->pos[0]);
    }
    bool t = test ? run_test(r, n, test, x, a->pos + first + 1, ntargs)
                  : ct_truthy(x);
    if (t == keep)
      out[k++] = items->items[i];
  }
  return list_of(r, out, k);
}

static ct_value apply_filter(R *r, const ct_node *n, const char *name,
                             ct_value v, const args *a);

static ct_value do_indent(R *r, ct_value s, ct_value width, bool first,
                          bool blank) {
  ct_value ind = width.kind == CT_STR
                     ? width
                     : repeat(r, NULL, ct_str(" ", 1),
                              width.kind == CT_INT ? width.u.i : 4);
  ct_buf t = {0};
  ct_buf_add(r->a, &t, s.u.str.s, s.u.str.n);
  ct_buf_add(r->a, &t, "\n", 1);
  ct_list *lines = splitlines(r, buf_value(&t), false).u.list;
  ct_buf b = {0};
  ct_buf_add(r->a, &b, "", 0);
  if (first)
    ct_buf_add(r->a, &b, ind.u.str.s, ind.u.str.n);
  for (size_t i = 0; i < lines->n; ++i) {
    ct_value line = lines->items[i];
    if (i) {
      ct_buf_add(r->a, &b, "\n", 1);
      if (blank || line.u.str.n)
        ct_buf_add(r->a, &b, ind.u.str.s, ind.u.str.n);
    }
    ct_buf_add(r->a, &b, line.u.str.s, line.u.str.n);
  }
  return buf_value(&b);
}

static int sort_cmp_ci, sort_rev;
static R *sort_r;
static const ct_node *sort_n;
static ct_value sort_key(ct_value v) {
  if (sort_cmp_ci && v.kind == CT_STR)
    return map_case(sort_r, v, 1);
  return v;
}
static int sort_cmp(const void *x, const void *y) {
  const ct_value *p = x, *q = y;
  int c = compare(sort_r, sort_n, OP_LT, sort_key(p[0]), sort_key(q[0]));
  return sort_rev ? -c : c;
}

/* Sorts pairs (key, item) by key, stably. */
static void sort_pairs(R *r, const ct_node *n, ct_value *pairs, size_t k,
                       bool ci, bool rev) {
  /* insertion sort: stable (also reversed, as Python's), and the lists are
   * small */
  sort_cmp_ci = ci;
  sort_rev = rev;
  sort_r = r;
  sort_n = n;
  for (size_t i = 1; i < k; ++i) {
    ct_value key = pairs[2 * i], item = pairs[2 * i + 1];
    size_t j = i;
    while (j > 0 && sort_cmp(&pairs[2 * (j - 1)], &key) > 0) {
      pairs[2 * j] = pairs[2 * (j - 1)];
      pairs[2 * j + 1] = pairs[2 * (j - 1) + 1];
      --j;
    }
    pairs[2 * j] = key;
    pairs[2 * j + 1] = item;
  }
}

static ct_value parse_int(R *r, ct_value s, ct_value def, int base) {
  char *t = ct_strndup(r->a, s.u.str.s, s.u.str.n), *o = t;
  for (char *p = t; *p; ++p)
    if (*p != '_')
      *o++ = *p;
  *o = 0;
  char *end;
  long long x = strtoll(t, &end, base);
  while (*end == ' ' || (*end >= '\t' && *end <= '\r'))
    ++end;
  if (end != t && !*end)
    return ct_int(x);
  double f = strtod(t, &end);
  while (*end == ' ' || (*end >= '\t' && *end <= '\r'))
    ++end;
  if (end != t && !*end && isfinite(f))
    return ct_int((int64_t)f);
  return def;
}

/* How many arguments (after the value) Jinja2's filters take: at least
 * min, at most max (-1: any). */
static const struct {
  const char *name;
  int min, max;
} filter_arity[] = {
    {"abs", 0, 0},         {"attr", 1, 1},     {"capitalize", 0, 0},
    {"center", 0, 1},      {"count", 0, 0},    {"d", 0, 2},
    {"default", 0, 2},     {"dictsort", 0, 3}, {"e", 0, 0},
    {"escape", 0, 0},      {"first", 0, 0},    {"float", 0, 1},
    {"indent", 0, 3},      {"int", 0, 2},      {"items", 0, 0},
    {"join", 0, 2},        {"last", 0, 0},     {"length", 0, 0},
    {"list", 0, 0},        {"lower", 0, 0},    {"map", 0, -1},
    {"max", 0, 2},         {"min", 0, 2},      {"reject", 0, -1},
    {"rejectattr", 1, -1}, {"replace", 2, 3},  {"reverse", 0, 0},
    {"round", 0, 2},       {"safe", 0, 0},     {"select", 0, -1},
    {"selectattr", 1, -1}, {"sort", 0, 3},     {"string", 0, 0},
    {"sum", 0, 2},         {"title", 0, 0},    {"tojson", 0, 4},
    {"trim", 0, 1},        {"unique", 0, 2},   {"upper", 0, 0},
    {"wordcount", 0, 0},
};

static void check_filter_arity(R *r, const ct_node *n, const char *name,
                               const args *a) {
  size_t k = a->npos + a->nkw;
  for (size_t i = 0; i < sizeof filter_arity / sizeof *filter_arity; ++i)
    if (!strcmp(filter_arity[i].name, name)) {
      if (k < (size_t)filter_arity[i].min)
        fail(r, n, "the filter '%s' needs at least %s arguments", name,
             num_str(r, (size_t)filter_arity[i].min));
      if (filter_arity[i].max >= 0 && k > (size_t)filter_arity[i].max)
        fail(r, n, "the filter '%s' takes at most %s arguments", name,
             num_str(r, (size_t)filter_arity[i].max));
      return;
    }
}

static ct_value apply_filter(R *r, const ct_node *n, const char *name,
                             ct_value v, const args *a) {
  ct_value none = ct_none();
  check_filter_arity(r, n, name, a);
  if (!strcmp(name, "safe") || !strcmp(name, "list")) {
    if (name[0] == 'l' && v.kind != CT_LIST)
      return list_of(r, iterate(r, n, v)->items, iterate(r, n, v)->n);
    if (name[0] == 'l' && v.u.list->tuple)
      return list_of(r, v.u.list->items, v.u.list->n);
    return v;
  }
  if (!strcmp(name, "string"))
    return str_of(r, v);
  if (!strcmp(name, "trim"))
    return strip(r, n, str_of(r, v), arg(a, 0, "chars", none), 3);
  if (!strcmp(name, "upper"))
    return map_case(r, str_of(r, v), 0);
  if (!strcmp(name, "lower"))
    return map_case(r, str_of(r, v), 1);
  if (!strcmp(name, "capitalize"))
    return map_case(r, str_of(r, v), 2);
  if (!strcmp(name, "title"))
    return map_case(r, str_of(r, v), 3);
  if (!strcmp(name, "length") || !strcmp(name, "count")) {
    switch (v.kind) {
    case CT_STR:
      return ct_int((int64_t)utf8_len(v.u.str.s, v.u.str.n));
    case CT_LIST:
      return ct_int((int64_t)v.u.list->n);
    case CT_DICT:
      return ct_int((int64_t)v.u.dict->n);
    case CT_UNDEF:
      return ct_int(0);
    default:
      fail(r, n, "object of type '%s' has no len()%s", ct_type_name(v), "");
    }
  }
  if (!strcmp(name, "default") || !strcmp(name, "d")) {
    static const char *const p[] = {"default_value", "boolean", NULL};
    check_args(r, n, a, name, p);
    bool boolean = ct_truthy(arg(a, 1, "boolean", ct_bool(false)));
    if (v.kind == CT_UNDEF || (boolean && !ct_truthy(v)))
      return arg(a, 0, "default_value", ct_str("", 0));
    return v;
  }
  if (!strcmp(name, "tojson")) {
    static const char *const p[] = {"ensure_ascii", "indent", "separators",
                                    "sort_keys", NULL};
    check_args(r, n, a, name, p);
    bool ascii = ct_truthy(arg(a, 0, "ensure_ascii", ct_bool(false)));
    ct_value indent = arg(a, 1, "indent", none);
    const char *ind = NULL;
    if (indent.kind == CT_INT || indent.kind == CT_BOOL) {
      int64_t k = ival(indent);
      ind = k > 0 ? repeat(r, n, ct_str(" ", 1), k).u.str.s : "";
    } else if (indent.kind == CT_STR) {
      ind = indent.u.str.s;
    } else if (indent.kind != CT_NONE) {
      fail(r, n, "tojson: indent must be an integer or a string%s%s", "", "");
    }
    const char *item_sep = ind ? "," : ", ", *key_sep = ": ";
    ct_value seps = arg(a, 2, "separators", none);
    if (seps.kind == CT_LIST && seps.u.list->n == 2 &&
        seps.u.list->items[0].kind == CT_STR &&
        seps.u.list->items[1].kind == CT_STR) {
      item_sep = seps.u.list->items[0].u.str.s;
      key_sep = seps.u.list->items[1].u.str.s;
    } else if (seps.kind != CT_NONE) {
      fail(r, n, "tojson: separators must be a pair of strings%s%s", "", "");
    }
    ct_buf b = {0};
    ct_buf_add(r->a, &b, "", 0);
    ct_json(r->a, &b, v, ind, item_sep, key_sep,
            ct_truthy(arg(a, 3, "sort_keys", ct_bool(false))), ascii, 0,
            n->line, n->col);
    return buf_value(&b);
  }
  if (!strcmp(name, "join")) {
    ct_value sep = str_of(r, arg(a, 0, "d", ct_str("", 0)));
    ct_value attr = arg(a, 1, "attribute", none);
    ct_list *items = iterate(r, n, v);
    if (attr.kind != CT_NONE) {
      ct_value l = ct_new_list(r->a, items->n, false);
      for (size_t i = 0; i < items->n; ++i)
        l.u.list->items[i] = attr_path(r, n, items->items[i], attr);
      items = l.u.list;
    }
    return join(r, n, sep, items, false);
  }
  if (!strcmp(name, "first") || !strcmp(name, "last")) {
    ct_list *items = iterate(r, n, v);
    if (!items->n)
      return ct_undef(name[0] == 'f' ? "No first item, sequence was empty."
                                     : "No last item, sequence was empty.");
    return items->items[name[0] == 'f' ? 0 : items->n - 1];
  }
  if (!strcmp(name, "items")) {
    if (v.kind == CT_UNDEF)
      return ct_new_list(r->a, 0, false);
    if (v.kind != CT_DICT)
      fail(r, n, "can only get item pairs from a mapping%s%s", "", "");
    ct_value l = ct_new_list(r->a, v.u.dict->n, false);
    for (size_t i = 0; i < v.u.dict->n; ++i) {
      ct_value t = ct_new_list(r->a, 2, true);
      t.u.list->items[0] = v.u.dict->keys[i];
      t.u.list->items[1] = v.u.dict->vals[i];
      l.u.list->items[i] = t;
    }
    return l;
  }
  if (!strcmp(name, "reverse")) {
    if (v.kind == CT_STR)
      return get_slice(r, n, v, none, none, ct_int(-1));
    ct_list *items = iterate(r, n, v);
    ct_value l = ct_new_list(r->a, items->n, false);
    for (size_t i = 0; i < items->n; ++i)
      l.u.list->items[i] = items->items[items->n - 1 - i];
    return l;
  }
  /* Jinja2's Undefined fails on int(), float() and .items() */
  if (v.kind == CT_UNDEF && (!strcmp(name, "int") || !strcmp(name, "float") ||
                             !strcmp(name, "dictsort")))
    fail_undef(r, n, v);
  if (!strcmp(name, "int")) {
    ct_value def = arg(a, 0, "default", ct_int(0));
    int base = (int)as_int(r, n, arg(a, 1, "base", ct_int(10)), "base");
    if (v.kind == CT_INT || v.kind == CT_BOOL)
      return ct_int(ival(v));
    if (v.kind == CT_FLOAT)
      return isfinite(v.u.f) ? ct_int((int64_t)v.u.f) : def;
    if (v.kind == CT_STR)
      return parse_int(r, v, def, base);
    return def;
  }
  if (!strcmp(name, "float")) {
    ct_value def = arg(a, 0, "default", ct_float(0));
    if (is_num(v))
      return ct_float(num(v));
    if (v.kind == CT_STR) {
      char *t = ct_strndup(r->a, v.u.str.s, v.u.str.n), *end;
      double f = strtod(t, &end);
      while (*end == ' ' || (*end >= '\t' && *end <= '\r'))
        ++end;
      if (end != t && !*end)
        return ct_float(f);
    }
    return def;
  }
  if (!strcmp(name, "abs")) {
    if (v.kind == CT_INT || v.kind == CT_BOOL)
      return ct_int(ival(v) < 0 ? -ival(v) : ival(v));
    if (v.kind == CT_FLOAT)
      return ct_float(fabs(v.u.f));
    fail(r, n, "bad operand type for abs(): '%s'%s", ct_type_name(v), "");
  }
  if (!strcmp(name, "round")) {
    int64_t prec = as_int(r, n, arg(a, 0, "precision", ct_int(0)), "precision");
    ct_value method = arg(a, 1, "method", ct_cstr("common"));
    if (!is_num(v))
      fail(r, n, "round: '%s' is not a number%s", ct_type_name(v), "");
    double x = num(v), m = pow(10, (double)prec);
    if (method.kind == CT_STR && !strcmp(method.u.str.s, "floor"))
      return ct_float(floor(x * m) / m);
    if (method.kind == CT_STR && !strcmp(method.u.str.s, "ceil"))
      return ct_float(ceil(x * m) / m);
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.*f", (int)(prec < 0 ? 0 : prec), x);
    return ct_float(strtod(tmp, NULL));
  }
  if (!strcmp(name, "replace")) {
    ct_value s = str_of(r, v), o = str_of(r, arg(a, 0, "old", ct_str("", 0))),
             w = str_of(r, arg(a, 1, "new", ct_str("", 0)));
    ct_value c = arg(a, 2, "count", none);
    return replace(r, s, o, w,
                   c.kind == CT_NONE ? -1 : as_int(r, n, c, "count"));
  }
  if (!strcmp(name, "indent")) {
    static const char *const p[] = {"width", "first", "blank", NULL};
    check_args(r, n, a, name, p);
    return do_indent(r, str_of(r, v), arg(a, 0, "width", ct_int(4)),
                     ct_truthy(arg(a, 1, "first", ct_bool(false))),
                     ct_truthy(arg(a, 2, "blank", ct_bool(false))));
  }
  if (!strcmp(name, "e") || !strcmp(name, "escape")) {
    ct_value s = str_of(r, v);
    ct_buf b = {0};
    ct_buf_add(r->a, &b, "", 0);
    for (size_t i = 0; i < s.u.str.n; ++i) {
      char c = s.u.str.s[i];
      const char *e = c == '&'    ? "&amp;"
                      : c == '<'  ? "&lt;"
                      : c == '>'  ? "&gt;"
                      : c == '"'  ? "&#34;"
                      : c == '\'' ? "&#39;"
                                  : NULL;
      if (e)
        ct_buf_str(r->a, &b, e);
      else
        ct_buf_add(r->a, &b, &c, 1);
    }
    return buf_value(&b);
  }
  if (!strcmp(name, "wordcount")) {
    ct_value s = str_of(r, v);
    int64_t c = 0;
    bool in = false;
    for (size_t i = 0; i < s.u.str.n; ++i) {
      unsigned char ch = (unsigned char)s.u.str.s[i];
      bool w = ch >= 0x80 || ch == '_' || (ch >= '0' && ch <= '9') ||
               ((ch | 32) >= 'a' && (ch | 32) <= 'z');
      if (w && !in)
        ++c;
      in = w;
    }
    return ct_int(c);
  }
  if (!strcmp(name, "map")) {
    ct_list *items = iterate(r, n, v);
    ct_value l = ct_new_list(r->a, items->n, false);
    ct_value attr = arg(a, 99, "attribute", none);
    if (attr.kind != CT_NONE) {
      ct_value def = arg(a, 99, "default", ct_none());
      for (size_t i = 0; i < items->n; ++i)
        l.u.list->items[i] = attr_path_or(r, n, items->items[i], attr,
                                          def.kind == CT_NONE ? NULL : &def);
      return l;
    }
    if (!a->npos || a->pos[0].kind != CT_STR)
      fail(r, n, "map needs a filter name or attribute=...%s%s", "", "");
    const char *f = a->pos[0].u.str.s;
    if (!ct_is_filter(f))
      fail(r, n, "no filter named '%s'%s", f, "");
    args rest = *a;
    rest.pos++;
    rest.npos--;
    for (size_t i = 0; i < items->n; ++i)
      l.u.list->items[i] = apply_filter(r, n, f, items->items[i], &rest);
    return l;
  }
  if (!strcmp(name, "select") || !strcmp(name, "reject"))
    return select_items(r, n, v, a, false, name[0] == 's');
  if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
    return select_items(r, n, v, a, true, name[0] == 's');
  if (!strcmp(name, "unique")) {
    bool cs = ct_truthy(arg(a, 0, "case_sensitive", ct_bool(false)));
    ct_value attr = arg(a, 1, "attribute", none);
    ct_list *items = iterate(r, n, v);
    ct_value *out = ct_alloc(r->a, (items->n + 1) * sizeof *out);
    ct_value *keys = ct_alloc(r->a, (items->n + 1) * sizeof *keys);
    size_t k = 0;
    for (size_t i = 0; i < items->n; ++i) {
      ct_value key = items->items[i];
      if (attr.kind != CT_NONE)
        key = attr_path(r, n, key, attr);
      if (!cs && key.kind == CT_STR)
        key = map_case(r, key, 1);
      bool seen = false;
      for (size_t j = 0; j < k && !seen; ++j)
        seen = ct_equal(keys[j], key);
      if (!seen) {
        keys[k] = key;
        out[k++] = items->items[i];
      }
    }
    return list_of(r, out, k);
  }
  if (!strcmp(name, "sum")) {
    ct_value attr = arg(a, 0, "attribute", none);
    ct_value total = arg(a, 1, "start", ct_int(0));
    ct_list *items = iterate(r, n, v);
    for (size_t i = 0; i < items->n; ++i) {
      ct_value x = items->items[i];
      if (attr.kind != CT_NONE)
        x = attr_path(r, n, x, attr);
      total = arith(r, n, OP_ADD, total, x);
    }
    return total;
  }
  if (!strcmp(name, "sort") || !strcmp(name, "max") || !strcmp(name, "min") ||
      !strcmp(name, "dictsort")) {
    bool dictsort = name[0] == 'd';
    bool rev = !strcmp(name, "sort") &&
               ct_truthy(arg(a, 0, "reverse", ct_bool(false)));
    bool cs = ct_truthy(
        arg(a, name[1] == 'o' ? 1 : 0, "case_sensitive", ct_bool(false)));
    ct_value attr = arg(a, name[1] == 'o' ? 2 : 1, "attribute", none);
    ct_list *items;
    if (dictsort) {
      items = apply_filter(r, n, "items", v, a).u.list;
      ct_value by = arg(a, 1, "by", ct_cstr("key"));
      attr = ct_int(by.kind == CT_STR && !strcmp(by.u.str.s, "value"));
      rev = ct_truthy(arg(a, 2, "reverse", ct_bool(false)));
    } else {
      items = iterate(r, n, v);
    }
    ct_value *pairs = ct_alloc(r->a, (2 * items->n + 2) * sizeof *pairs);
    for (size_t i = 0; i < items->n; ++i) {
      pairs[2 * i] = attr.kind != CT_NONE
                         ? attr_path(r, n, items->items[i], attr)
                         : items->items[i];
      pairs[2 * i + 1] = items->items[i];
    }
    sort_pairs(r, n, pairs, items->n, !cs, rev);
    if (!strcmp(name, "max") || !strcmp(name, "min")) {
      if (!items->n)
        return ct_undef("No aggregated item, sequence was empty.");
      return pairs[name[1] == 'a' ? 2 * items->n - 1 : 1];
    }
    ct_value l = ct_new_list(r->a, items->n, false);
    for (size_t i = 0; i < items->n; ++i)
      l.u.list->items[i] = pairs[2 * i + 1];
    return l;
  }
  if (!strcmp(name, "center")) {
    ct_value s = str_of(r, v);
    int64_t w = as_int(r, n, arg(a, 0, "width", ct_int(80)), "width");
    int64_t len = (int64_t)utf8_len(s.u.str.s, s.u.str.n);
    if (w <= len)
      return s;
    int64_t pad = w - len, left = pad / 2 + (pad & w & 1);
    ct_buf b = {0};
    ct_buf_add(r->a, &b, "", 0);
    for (int64_t i = 0; i < left; ++i)
      ct_buf_add(r->a, &b, " ", 1);
    ct_buf_add(r->a, &b, s.u.str.s, s.u.str.n);
    for (int64_t i = 0; i < pad - left; ++i)
      ct_buf_add(r->a, &b, " ", 1);
    return buf_value(&b);
  }
  if (!strcmp(name, "format")) {
    if (a->npos && a->nkw)
      fail(r, n,
           "can't handle positional and keyword arguments at the "
           "same time%s%s",
           "", "");
    ct_value fa;
    if (a->nkw) {
      fa = ct_new_dict(r->a);
      for (size_t k = 0; k < a->nkw; ++k)
        ct_dict_set(r->a, fa.u.dict, ct_cstr(a->kwn[k]), a->kwv[k]);
    } else {
      fa = ct_new_list(r->a, a->npos, true);
      for (size_t k = 0; k < a->npos; ++k)
        fa.u.list->items[k] = a->pos[k];
    }
    return percent_format(r, n, str_of(r, v), fa);
  }
  if (!strcmp(name, "attr"))
    return get_attr(r, n, v,
                    str_of(r, arg(a, 0, "name", ct_str("", 0))).u.str.s);
  fail(r, n, "the filter '%s' is not supported%s", name, "");
}

/*===- Tests --------------------------------------------------------------===*/

static bool run_test(R *r, const ct_node *n, const char *name, ct_value v,
                     const ct_value *ta, size_t nta) {
  /* the tests with one argument; the others take none */
  static const char *const binary[] = {
      "divisibleby", "eq", "equalto",     "ne", "lt",     "lessthan", "le",
      "gt",          "ge", "greaterthan", "in", "sameas", NULL};
  size_t want = in_list(name, binary) ? 1 : 0;
  if (nta != want)
    fail(r, n, "the test '%s' takes %s arguments", name, num_str(r, want));
  ct_value x = nta ? ta[0] : ct_undef(NULL);
  if (!strcmp(name, "defined"))
    return v.kind != CT_UNDEF;
  if (!strcmp(name, "undefined"))
    return v.kind == CT_UNDEF;
  if (!strcmp(name, "none"))
    return v.kind == CT_NONE;
  if (!strcmp(name, "string"))
    return v.kind == CT_STR;
  if (!strcmp(name, "mapping"))
    return v.kind == CT_DICT;
  if (!strcmp(name, "iterable"))
    return v.kind == CT_STR || v.kind == CT_LIST || v.kind == CT_DICT ||
           v.kind == CT_UNDEF;
  if (!strcmp(name, "sequence"))
    return v.kind == CT_STR || v.kind == CT_LIST || v.kind == CT_DICT ||
           v.kind == CT_UNDEF;
  if (!strcmp(name, "number"))
    return is_num(v);
  if (!strcmp(name, "integer"))
    return v.kind == CT_INT;
  if (!strcmp(name, "float"))
    return v.kind == CT_FLOAT;
  if (!strcmp(name, "boolean"))
    return v.kind == CT_BOOL;
  if (!strcmp(name, "true"))
    return v.kind == CT_BOOL && v.u.b;
  if (!strcmp(name, "false"))
    return v.kind == CT_BOOL && !v.u.b;
  if (!strcmp(name, "callable"))
    return v.kind == CT_MACRO || v.kind == CT_FUNC;
  if (!strcmp(name, "odd") || !strcmp(name, "even")) {
    int64_t k = as_int(r, n, v, "the value");
    return (k % 2 != 0) == (name[0] == 'o');
  }
  if (!strcmp(name, "divisibleby")) {
    int64_t d = as_int(r, n, x, "divisibleby's argument");
    if (!d)
      fail(r, n, "integer division or modulo by zero%s%s", "", "");
    return as_int(r, n, v, "the value") % d == 0;
  }
  if (!strcmp(name, "eq") || !strcmp(name, "equalto"))
    return ct_equal(v, x);
  if (!strcmp(name, "ne"))
    return !ct_equal(v, x);
  if (!strcmp(name, "lt") || !strcmp(name, "lessthan"))
    return compare(r, n, OP_LT, v, x) < 0;
  if (!strcmp(name, "le"))
    return compare(r, n, OP_LE, v, x) <= 0;
  if (!strcmp(name, "gt") || !strcmp(name, "greaterthan"))
    return compare(r, n, OP_GT, v, x) > 0;
  if (!strcmp(name, "ge"))
    return compare(r, n, OP_GE, v, x) >= 0;
  if (!strcmp(name, "in"))
    return contains(r, n, v, x);
  if (!strcmp(name, "sameas")) {
    if (v.kind != x.kind)
      return false;
    if (v.kind == CT_NONE || v.kind == CT_BOOL)
      return ct_equal(v, x);
    if (v.kind == CT_LIST)
      return v.u.list == x.u.list;
    if (v.kind == CT_DICT || v.kind == CT_NS)
      return v.u.dict == x.u.dict;
    return ct_equal(v, x);
  }
  if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
    if (v.kind != CT_STR)
      return false;
    return is_all(v, name[0] == 'l' ? 5 : 4);
  }
  if (!strcmp(name, "escaped"))
    return false;
  if (!strcmp(name, "filter") || !strcmp(name, "test"))
    return v.kind == CT_STR &&
           (name[0] == 'f' ? ct_is_filter(v.u.str.s) : ct_is_test(v.u.str.s));
  fail(r, n, "the test '%s' is not supported%s", name, "");
}

/*===- Calls --------------------------------------------------------------===*/

static ct_value call_macro(R *r, const ct_node *n, const ct_node *m,
                           const args *a) {
  if (++r->depth > TFM_CHAT_MAX_CALL_DEPTH)
    fail(r, n, "macro calls nested deeper than %s (the limit)%s", "64", "");
  scope s = {r->root, {0}};
  size_t np = m->nkw;
  ct_value varargs = ct_new_list(r->a, a->npos > np ? a->npos - np : 0, true);
  for (size_t i = 0; i < a->npos; ++i) {
    if (i < np)
      assign(r, &s, m->kwnames[i], a->pos[i]);
    else
      varargs.u.list->items[i - np] = a->pos[i];
  }
  ct_value kwargs = ct_new_dict(r->a);
  for (size_t k = 0; k < a->nkw; ++k) {
    bool known = false;
    for (size_t i = 0; i < np; ++i)
      if (!strcmp(m->kwnames[i], a->kwn[k])) {
        if (i < a->npos)
          fail(r, n, "macro '%s' got multiple values for argument '%s'",
               m->name, a->kwn[k]);
        assign(r, &s, m->kwnames[i], a->kwv[k]);
        known = true;
      }
    if (!known)
      ct_dict_set(r->a, kwargs.u.dict, ct_cstr(a->kwn[k]), a->kwv[k]);
  }
  for (size_t i = 0; i < np; ++i)
    if (!ct_dict_get(&s.vars, m->kwnames[i], strlen(m->kwnames[i])))
      assign(r, &s, m->kwnames[i],
             m->kwvals[i]
                 ? eval(r, m->kwvals[i], &s)
                 : ct_undef(hint(r, "parameter '%s' was not provided%s",
                                 m->kwnames[i], "")));
  assign(r, &s, "varargs", varargs);
  assign(r, &s, "kwargs", kwargs);
  ct_buf b = {0};
  b.limit = TFM_CHAT_MAX_OUTPUT;
  ct_buf_add(r->a, &b, "", 0);
  exec_body(r, m->body, m->nbody, &s, &b);
  r->depth--;
  return buf_value(&b);
}

static ct_value call_global(R *r, const ct_node *n, const char *name,
                            const args *a) {
  if (!strcmp(name, "raise_exception")) {
    ct_value msg = str_of(r, arg(a, 0, "message", ct_str("", 0)));
    ct_fail(r->a, TFM_ERR_FORMAT, n->line, n->col, "raise_exception: %s",
            msg.u.str.s);
  }
  if (!strcmp(name, "range")) {
    int64_t start = 0, stop, step = 1;
    if (a->npos == 1)
      stop = as_int(r, n, a->pos[0], "range()'s argument");
    else if (a->npos == 2 || a->npos == 3) {
      start = as_int(r, n, a->pos[0], "range()'s argument");
      stop = as_int(r, n, a->pos[1], "range()'s argument");
      if (a->npos == 3)
        step = as_int(r, n, a->pos[2], "range()'s argument");
    } else
      fail(r, n, "range expected 1 to 3 arguments%s%s", "", "");
    if (step == 0)
      fail(r, n, "range() arg 3 must not be zero%s%s", "", "");
    double count = ceil(((double)stop - (double)start) / (double)step);
    if (count < 0)
      count = 0;
    if (count > TFM_CHAT_MAX_ITERATIONS)
      fail(r, n, "range() longer than %s items (the limit)%s", "1000000", "");
    ct_value l = ct_new_list(r->a, (size_t)count, false);
    for (size_t i = 0; i < (size_t)count; ++i)
      l.u.list->items[i] = ct_int(start + (int64_t)i * step);
    return l;
  }
  if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
    ct_value d = ct_new_dict(r->a);
    for (size_t i = 0; i < a->npos; ++i) {
      if (a->pos[i].kind != CT_DICT)
        fail(r, n, "%s() takes keyword arguments or a dict%s", name, "");
      for (size_t k = 0; k < a->pos[i].u.dict->n; ++k)
        ct_dict_set(r->a, d.u.dict, a->pos[i].u.dict->keys[k],
                    a->pos[i].u.dict->vals[k]);
    }
    for (size_t k = 0; k < a->nkw; ++k)
      ct_dict_set(r->a, d.u.dict, ct_cstr(a->kwn[k]), a->kwv[k]);
    if (name[0] == 'n')
      d.kind = CT_NS;
    return d;
  }
  if (!strcmp(name, "strftime_now")) {
    ct_value f = str_of(r, arg(a, 0, "format", ct_str("", 0)));
    time_t now = time(NULL);
    struct tm tm;
    struct tm *lt = localtime(&now);
    if (!lt)
      fail(r, n, "strftime_now: no local time%s%s", "", "");
    tm = *lt;
    char out[512];
    size_t k = f.u.str.n ? strftime(out, sizeof out, f.u.str.s, &tm) : 0;
    return ct_str(ct_strndup(r->a, out, k), k);
  }
  fail(r, n, "'%s' is not callable%s", name, "");
}

static ct_value call_method(R *r, const ct_node *n, const char *name,
                            ct_value self, const args *a) {
  if (!strcmp(name, "cycle") && self.kind == CT_INT) {
    if (!a->npos)
      fail(r, n, "no items for cycling given%s%s", "", "");
    return a->pos[self.u.i % (int64_t)a->npos];
  }
  if (self.kind == CT_STR)
    return call_str_method(r, n, name, self, a);
  if (self.kind == CT_DICT) {
    ct_dict *d = self.u.dict;
    if (!strcmp(name, "items"))
      return apply_filter(r, n, "items", self, a);
    if (!strcmp(name, "keys") || !strcmp(name, "values")) {
      ct_value l = ct_new_list(r->a, d->n, false);
      memcpy(l.u.list->items, name[0] == 'k' ? d->keys : d->vals,
             d->n * sizeof(ct_value));
      return l;
    }
    if (!strcmp(name, "get")) {
      ct_value *v = ct_dict_find(d, arg(a, 0, "key", ct_none()));
      return v ? *v : arg(a, 1, "default", ct_none());
    }
    if (!strcmp(name, "copy")) {
      ct_value c = ct_new_dict(r->a);
      for (size_t i = 0; i < d->n; ++i)
        ct_dict_set(r->a, c.u.dict, d->keys[i], d->vals[i]);
      return c;
    }
  }
  if (self.kind == CT_LIST) {
    ct_list *l = self.u.list;
    if (!strcmp(name, "index") || !strcmp(name, "count")) {
      ct_value x = arg(a, 0, "value", ct_none());
      int64_t c = 0;
      for (size_t i = 0; i < l->n; ++i)
        if (ct_equal(l->items[i], x)) {
          if (name[0] == 'i')
            return ct_int((int64_t)i);
          ++c;
        }
      if (name[0] == 'i')
        fail(r, n, "value is not in list%s%s", "", "");
      return ct_int(c);
    }
    if (!strcmp(name, "copy"))
      return list_of(r, l->items, l->n);
  }
  fail(r, n, "access to '%s.%s' is unsafe (the environment is immutable)",
       ct_type_name(self), name);
}

static ct_value call(R *r, const ct_node *n, ct_value f, const args *a) {
  switch (f.kind) {
  case CT_MACRO:
    return call_macro(r, n, f.u.macro, a);
  case CT_FUNC:
    if (!f.u.fn.self)
      return call_global(r, n, f.u.fn.name, a);
    return call_method(r, n, f.u.fn.name, *f.u.fn.self, a);
  case CT_UNDEF:
    fail_undef(r, n, f);
  default:
    fail(r, n, "'%s' object is not callable%s", ct_type_name(f), "");
  }
}

/*===- Expressions --------------------------------------------------------===*/

static ct_value eval(R *r, const ct_node *n, scope *s) {
  switch (n->kind) {
  case E_LIT:
    return n->lit;
  case E_NAME:
    return lookup(r, n, s, n->name);
  case E_LIST:
  case E_TUPLE: {
    ct_value l = ct_new_list(r->a, n->nargs, n->kind == E_TUPLE);
    for (size_t i = 0; i < n->nargs; ++i)
      l.u.list->items[i] = eval(r, n->args[i], s);
    return l;
  }
  case E_DICT: {
    ct_value d = ct_new_dict(r->a);
    for (size_t i = 0; i + 1 < n->nargs; i += 2) {
      ct_value k = eval(r, n->args[i], s);
      if (k.kind == CT_LIST && !k.u.list->tuple)
        fail(r, n->args[i], "unhashable type: 'list'%s%s", "", "");
      if (k.kind == CT_DICT || k.kind == CT_NS)
        fail(r, n->args[i], "unhashable type: 'dict'%s%s", "", "");
      ct_dict_set(r->a, d.u.dict, k, eval(r, n->args[i + 1], s));
    }
    return d;
  }
  case E_ATTR:
    return get_attr(r, n, eval(r, n->a, s), n->name);
  case E_ITEM:
    return get_item(r, n, eval(r, n->a, s), eval(r, n->b, s));
  case E_SLICE: {
    ct_value none = ct_none();
    ct_value o = eval(r, n->a, s);
    return get_slice(r, n, o, n->b ? eval(r, n->b, s) : none,
                     n->c ? eval(r, n->c, s) : none,
                     n->d ? eval(r, n->d, s) : none);
  }
  case E_CALL: {
    ct_value f = eval(r, n->a, s);
    args a = eval_args(r, n, s);
    return call(r, n, f, &a);
  }
  case E_FILTER: {
    ct_value v = eval(r, n->a, s);
    args a = eval_args(r, n, s);
    return apply_filter(r, n, n->name, v, &a);
  }
  case E_TEST: {
    ct_value v = eval(r, n->a, s);
    args a = eval_args(r, n, s);
    bool t = run_test(r, n, n->name, v, a.pos, a.npos);
    return ct_bool(n->op ? !t : t);
  }
  case E_NOT:
    return ct_bool(!ct_truthy(eval(r, n->a, s)));
  case E_NEG:
  case E_POS: {
    ct_value v = eval(r, n->a, s);
    if (v.kind == CT_INT || v.kind == CT_BOOL) {
      if (n->kind == E_POS)
        return ct_int(ival(v));
      if (ival(v) == INT64_MIN)
        fail(r, n, "integer overflow in '-'%s%s", "", "");
      return ct_int(-ival(v));
    }
    if (v.kind == CT_FLOAT)
      return ct_float(n->kind == E_NEG ? -v.u.f : v.u.f);
    if (v.kind == CT_UNDEF)
      fail_undef(r, n, v);
    fail(r, n, "bad operand type for unary %s: '%s'",
         n->kind == E_NEG ? "-" : "+", ct_type_name(v));
  }
  case E_BINARY: {
    ct_value x = eval(r, n->a, s), y = eval(r, n->b, s);
    if (n->op == OP_CONCAT) {
      ct_buf b = {0};
      ct_buf_add(r->a, &b, "", 0);
      ct_to_str(r->a, &b, x);
      ct_to_str(r->a, &b, y);
      return buf_value(&b);
    }
    return arith(r, n, n->op, x, y);
  }
  case E_AND: {
    ct_value x = eval(r, n->a, s);
    return ct_truthy(x) ? eval(r, n->b, s) : x;
  }
  case E_OR: {
    ct_value x = eval(r, n->a, s);
    return ct_truthy(x) ? x : eval(r, n->b, s);
  }
  case E_COND:
    if (ct_truthy(eval(r, n->a, s)))
      return eval(r, n->b, s);
    if (n->c)
      return eval(r, n->c, s);
    return ct_undef("the inline if-expression evaluated to false and no "
                    "else section was defined.");
  case E_COMPARE: {
    ct_value x = eval(r, n->a, s);
    for (size_t i = 0; i < n->nargs; ++i) {
      ct_value y = eval(r, n->args[i], s);
      if (!cmp_op(r, n, n->ops[i], x, y))
        return ct_bool(false);
      x = y;
    }
    return ct_bool(true);
  }
  default:
    fail(r, n, "not an expression%s%s", "", "");
  }
}

/*===- Statements ---------------------------------------------------------===*/

static void unpack(R *r, const ct_node *n, scope *s, ct_value v) {
  if (!n->op) {
    assign(r, s, n->names[0], v);
    return;
  }
  ct_list *items = iterate(r, n, v);
  if (items->n != n->nnames)
    fail(r, n, "cannot unpack %s values into %s names", num_str(r, items->n),
         num_str(r, n->nnames));
  for (size_t i = 0; i < n->nnames; ++i)
    assign(r, s, n->names[i], items->items[i]);
}

static int exec_for(R *r, const ct_node *n, scope *s, ct_buf *out) {
  ct_list *items = iterate(r, n->a, eval(r, n->a, s));
  if (n->b) {
    ct_value *kept = ct_alloc(r->a, (items->n + 1) * sizeof *kept);
    size_t k = 0;
    /* one scope for all iterations: its variables start afresh each time
     * (nothing else refers to a scope's arrays) */
    scope f = {s, {0}};
    for (size_t i = 0; i < items->n; ++i) {
      check_iterations(r, n, 1);
      f.vars.n = 0;
      unpack(r, n, &f, items->items[i]);
      if (ct_truthy(eval(r, n->b, &f)))
        kept[k++] = items->items[i];
    }
    items = list_of(r, kept, k).u.list;
  }
  if (!items->n) {
    if (n->els)
      return exec_body(r, n->els->body, n->els->nbody, s, out);
    return FLOW_NEXT;
  }
  size_t len = items->n;
  scope f = {s, {0}};
  for (size_t i = 0; i < len; ++i) {
    check_iterations(r, n, 1);
    f.vars.n = 0;
    unpack(r, n, &f, items->items[i]);
    ct_loop *lp = ct_alloc(r->a, sizeof *lp);
    lp->items = items;
    lp->index = i;
    ct_value loop = {CT_LOOP, {.loop = lp}};
    assign(r, &f, "loop", loop);
    int flow = exec_body(r, n->body, n->nbody, &f, out);
    if (flow == FLOW_BREAK)
      break;
  }
  return FLOW_NEXT;
}

static int exec_body(R *r, ct_node *const *body, size_t nb, scope *s,
                     ct_buf *out) {
  for (size_t i = 0; i < nb; ++i) {
    const ct_node *n = body[i];
    switch (n->kind) {
    case N_TEXT:
      ct_buf_add(r->a, out, n->lit.u.str.s, n->lit.u.str.n);
      break;
    case N_OUTPUT:
      ct_to_str(r->a, out, eval(r, n->a, s));
      break;
    case N_IF: {
      const ct_node *c = n;
      while (c && c->kind == N_IF && !ct_truthy(eval(r, c->a, s)))
        c = c->els;
      if (c) {
        int flow = exec_body(r, c->body, c->nbody, s, out);
        if (flow != FLOW_NEXT)
          return flow;
      }
      break;
    }
    case N_FOR:
      exec_for(r, n, s, out);
      break;
    case N_SET: {
      ct_value v = eval(r, n->a, s);
      if (n->attr) {
        ct_value ns = lookup(r, n, s, n->names[0]);
        if (ns.kind != CT_NS)
          fail(r, n, "cannot assign attribute on non-namespace object%s%s", "",
               "");
        ct_dict_set(r->a, ns.u.dict, ct_cstr(n->attr), v);
      } else {
        unpack(r, n, s, v);
      }
      break;
    }
    case N_SETBLOCK: {
      ct_buf b = {0};
      b.limit = TFM_CHAT_MAX_OUTPUT;
      ct_buf_add(r->a, &b, "", 0);
      exec_body(r, n->body, n->nbody, s, &b);
      ct_value v = buf_value(&b);
      if (n->a) {
        /* the filter chain applies to the body's text (n->b stands for
         * it) */
        const ct_node *chain[64];
        size_t k = 0;
        for (const ct_node *f = n->a; f != n->b && k < 64; f = f->a)
          chain[k++] = f;
        while (k--) {
          args a = eval_args(r, chain[k], s);
          v = apply_filter(r, chain[k], chain[k]->name, v, &a);
        }
      }
      assign(r, s, n->names[0], v);
      break;
    }
    case N_MACRO: {
      ct_value m = {CT_MACRO, {.macro = n}};
      assign(r, s, n->name, m);
      break;
    }
    case N_BREAK:
      return FLOW_BREAK;
    case N_CONTINUE:
      return FLOW_CONTINUE;
    case N_BODY: {
      int flow = exec_body(r, n->body, n->nbody, s, out);
      if (flow != FLOW_NEXT)
        return flow;
      break;
    }
    default:
      fail(r, n, "not a statement%s%s", "", "");
    }
  }
  return FLOW_NEXT;
}

void ct_render(ct_arena *a, const ct_node *root, ct_value ctx, ct_buf *out) {
  scope top = {NULL, {0}};
  R r = {a, ctx, &top, 0, 0};
  exec_body(&r, root->body, root->nbody, &top, out);
}
