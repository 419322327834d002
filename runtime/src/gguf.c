/*===- gguf.c - memory-mapped GGUF reader ---------------------------------===*
 * The format of ggml's docs/gguf.md, with the checks of llama.cpp's reader
 * (ggml/src/gguf.cpp) and the spec's own: magic "GGUF", version 2 or 3
 * (version 1's 32-bit counts are refused, as is a big-endian file), 64-bit
 * tensor and key/value counts, keys unique and not empty, values of the 13
 * types (arrays typed, nested up to TFM_GGUF_MAX_DEPTH, booleans 0 or 1),
 * general.alignment a uint32 power of two (default 32), tensor names unique
 * and shorter than 64 bytes, at most 4 dimensions, none negative, rows a
 * multiple of the type's block, the data section at the first aligned
 * offset after the tensor infos, each tensor's offset a multiple of the
 * alignment and its data within the file, overlapping no other's. Every
 * count and length is bounded by the bytes left in the file before anything
 * is allocated for it, and every sum and product is overflow-checked.
 * Every error names the file, the byte offset and the problem.
 *===----------------------------------------------------------------------===*/
#define _DEFAULT_SOURCE
#include "gguf.h"
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct gguf_kv {
  char *key;
  uint64_t key_offset; /* of the key's length */
  uint64_t end;        /* the offset just past its value */
  tfm_gguf_value value;
} gguf_kv;

typedef struct gguf_info {
  tfm_gguf_tensor t;
  uint64_t info_offset; /* of the name's length */
  uint64_t rel;         /* offset within the data section, as stored */
  char *name;           /* owned; t.name points to it */
} gguf_info;

struct tfm_gguf {
  char *path;
  void *mapping; /* what mmap returned (NULL for an empty file) */
  const unsigned char *map;
  size_t size;
  uint32_t version;
  uint64_t alignment, data_offset;
  gguf_kv *kv;
  size_t num_kv;
  size_t *kv_sorted; /* indices of kv, by key */
  gguf_info *tensors;
  size_t num_tensors;
  size_t *tensors_sorted; /* indices of tensors, by name */
  /* Element offsets of the arrays of strings (one per element) and of
   * arrays (two per element: the offset and the element's own index, or
   * UINT64_MAX). */
  uint64_t *arena;
  size_t arena_len, arena_cap;
};

/*===- ggml's types -------------------------------------------------------===*/

typedef struct ggml_type_traits {
  const char *name;
  int64_t block, bytes;
} ggml_type_traits;

/* From ggml.c's type_traits and ggml-common.h's block structs. */
static const ggml_type_traits GGML_TYPES[] = {
    [0] = {"f32", 1, 4},         [1] = {"f16", 1, 2},
    [2] = {"q4_0", 32, 18},      [3] = {"q4_1", 32, 20},
    [6] = {"q5_0", 32, 22},      [7] = {"q5_1", 32, 24},
    [8] = {"q8_0", 32, 34},      [9] = {"q8_1", 32, 36},
    [10] = {"q2_K", 256, 84},    [11] = {"q3_K", 256, 110},
    [12] = {"q4_K", 256, 144},   [13] = {"q5_K", 256, 176},
    [14] = {"q6_K", 256, 210},   [15] = {"q8_K", 256, 292},
    [16] = {"iq2_xxs", 256, 66}, [17] = {"iq2_xs", 256, 74},
    [18] = {"iq3_xxs", 256, 98}, [19] = {"iq1_s", 256, 50},
    [20] = {"iq4_nl", 32, 18},   [21] = {"iq3_s", 256, 110},
    [22] = {"iq2_s", 256, 82},   [23] = {"iq4_xs", 256, 136},
    [24] = {"i8", 1, 1},         [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},        [27] = {"i64", 1, 8},
    [28] = {"f64", 1, 8},        [29] = {"iq1_m", 256, 56},
    [30] = {"bf16", 1, 2},       [34] = {"tq1_0", 256, 54},
    [35] = {"tq2_0", 256, 66},   [39] = {"mxfp4", 32, 17},
    [40] = {"nvfp4", 64, 36},    [41] = {"q1_0", 128, 18},
    [42] = {"q2_0", 64, 18},
};
#define GGML_NUM_TYPES ((int32_t)(sizeof GGML_TYPES / sizeof GGML_TYPES[0]))

int tfm_ggml_type_info(int32_t type, const char **name, int64_t *block,
                       int64_t *bytes) {
  if (type < 0 || type >= GGML_NUM_TYPES || !GGML_TYPES[type].name)
    return 0;
  if (name)
    *name = GGML_TYPES[type].name;
  if (block)
    *block = GGML_TYPES[type].block;
  if (bytes)
    *bytes = GGML_TYPES[type].bytes;
  return 1;
}

/*===- Value types --------------------------------------------------------===*/

static const char *const TYPE_NAMES[TFM_GGUF_TYPE_COUNT] = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64"};

const char *tfm_gguf_type_name(tfm_gguf_type t) {
  return (unsigned)t < TFM_GGUF_TYPE_COUNT ? TYPE_NAMES[t] : "unknown";
}

/* Bytes of a fixed-size value; 0 for strings and arrays. */
static uint64_t fixed_size(tfm_gguf_type t) {
  switch (t) {
  case TFM_GGUF_UINT8:
  case TFM_GGUF_INT8:
  case TFM_GGUF_BOOL:
    return 1;
  case TFM_GGUF_UINT16:
  case TFM_GGUF_INT16:
    return 2;
  case TFM_GGUF_UINT32:
  case TFM_GGUF_INT32:
  case TFM_GGUF_FLOAT32:
    return 4;
  case TFM_GGUF_UINT64:
  case TFM_GGUF_INT64:
  case TFM_GGUF_FLOAT64:
    return 8;
  default:
    return 0;
  }
}

/*===- Reading ------------------------------------------------------------===*/

static uint64_t load_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

/* The file being parsed and the position. */
typedef struct reader {
  tfm_gguf *g;
  uint64_t pos;
} reader;

static uint64_t left(const reader *r) { return r->g->size - r->pos; }

static tfm_status truncated(const reader *r, uint64_t need, const char *what) {
  return tfm_fail(TFM_ERR_FORMAT,
                  "%s: byte %llu: the file ends inside %s (%llu bytes "
                  "needed, %llu left)",
                  r->g->path, (unsigned long long)r->pos, what,
                  (unsigned long long)need, (unsigned long long)left(r));
}

static tfm_status read_uint(reader *r, int n, const char *what, uint64_t *out) {
  if (left(r) < (uint64_t)n)
    return truncated(r, (uint64_t)n, what);
  *out = load_le(r->g->map + r->pos, n);
  r->pos += (uint64_t)n;
  return TFM_OK;
}

/* A string's length and bytes: `*at` gets the offset of its bytes. */
static tfm_status read_string(reader *r, const char *what, uint64_t *at,
                              uint64_t *len) {
  uint64_t start = r->pos;
  tfm_status s = read_uint(r, 8, what, len);
  if (s != TFM_OK)
    return s;
  if (*len > left(r)) {
    tfm_status e =
        tfm_fail(TFM_ERR_FORMAT,
                 "%s: byte %llu: %s is %llu bytes long, past the "
                 "end of the file (%llu bytes left)",
                 r->g->path, (unsigned long long)start, what,
                 (unsigned long long)*len, (unsigned long long)left(r));
    r->pos = start;
    return e;
  }
  *at = r->pos;
  r->pos += *len;
  return TFM_OK;
}

/* A key or tensor name as a C string: no NUL bytes inside. */
static tfm_status read_name(reader *r, const char *what, char **out) {
  uint64_t start = r->pos, at, len;
  tfm_status s = read_string(r, what, &at, &len);
  if (s != TFM_OK)
    return s;
  if (memchr(r->g->map + at, 0, (size_t)len))
    return tfm_fail(TFM_ERR_FORMAT, "%s: byte %llu: %s holds a NUL byte",
                    r->g->path, (unsigned long long)start, what);
  *out = tfm_memdup((const char *)r->g->map + at, (size_t)len);
  if (!*out)
    return tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", r->g->path);
  return TFM_OK;
}

/* Reserves `n` entries of the arena (n is bounded by the file's size);
 * `*base` gets the first. */
static tfm_status arena_reserve(tfm_gguf *g, uint64_t n, uint64_t *base) {
  if (n > g->arena_cap - g->arena_len) {
    size_t cap = g->arena_cap ? g->arena_cap : 64;
    while (cap - g->arena_len < n)
      cap *= 2;
    uint64_t *a = NULL;
    if (!tfm_allocation_injected_failure())
      a = realloc(g->arena, cap * sizeof *a);
    if (!a)
      return tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", g->path);
    g->arena = a;
    g->arena_cap = cap;
  }
  *base = g->arena_len;
  g->arena_len += (size_t)n;
  return TFM_OK;
}

/* Names the value being read in messages: the key, and the element path
 * when inside an array. */
typedef struct value_ctx {
  const char *key;
  int depth;
} value_ctx;

static tfm_status read_value(reader *r, const value_ctx *c, tfm_gguf_type t,
                             int depth, tfm_gguf_value *v);

static tfm_status bad_value(const reader *r, uint64_t at, const value_ctx *c,
                            const char *fmt, unsigned long long a,
                            unsigned long long b) {
  char clip[TFM_CLIP_SIZE], what[256];
  snprintf(what, sizeof what, fmt, a, b);
  return tfm_fail(TFM_ERR_FORMAT, "%s: byte %llu: metadata '%s': %s",
                  r->g->path, (unsigned long long)at, tfm_clip(c->key, clip),
                  what);
}

static tfm_status read_array(reader *r, const value_ctx *c, int depth,
                             tfm_gguf_value *v) {
  tfm_gguf *g = r->g;
  uint64_t start = r->pos, elem, count;
  tfm_status s = read_uint(r, 4, "an array's element type", &elem);
  if (s != TFM_OK)
    return s;
  if (elem >= TFM_GGUF_TYPE_COUNT)
    return bad_value(r, start, c, "unknown array element type %llu", elem, 0);
  if (elem == TFM_GGUF_ARRAY && depth + 1 >= TFM_GGUF_MAX_DEPTH)
    return bad_value(r, start, c, "arrays nested deeper than %llu levels",
                     TFM_GGUF_MAX_DEPTH, 0);
  s = read_uint(r, 8, "an array's length", &count);
  if (s != TFM_OK)
    return s;
  v->elem = (tfm_gguf_type)elem;
  v->count = count;
  uint64_t size = fixed_size(v->elem);
  /* The smallest encoding of an element: a string's length, an array's
   * type and length. */
  uint64_t least = size ? size : elem == TFM_GGUF_STRING ? 8 : 12;
  if (count > left(r) / least)
    return bad_value(r, start, c,
                     "an array of %llu elements does not fit in the %llu "
                     "bytes left in the file",
                     count, left(r));
  if (size) {
    const unsigned char *p = g->map + r->pos;
    if (v->elem == TFM_GGUF_BOOL)
      for (uint64_t i = 0; i < count; ++i)
        if (p[i] > 1)
          return bad_value(r, r->pos + i, c,
                           "boolean element %llu is %llu, not 0 or 1", i, p[i]);
    r->pos += count * size;
    return TFM_OK;
  }
  uint64_t stride = elem == TFM_GGUF_STRING ? 1 : 2, base;
  s = arena_reserve(g, count * stride, &base);
  if (s != TFM_OK)
    return s;
  v->index = base;
  value_ctx inner = {c->key, depth + 1};
  for (uint64_t i = 0; i < count; ++i) {
    g->arena[base + i * stride] = r->pos;
    tfm_gguf_value e = {0};
    e.index = UINT64_MAX;
    s = read_value(r, &inner, v->elem, depth + 1, &e);
    if (s != TFM_OK)
      return s;
    if (stride == 2)
      g->arena[base + i * stride + 1] = e.index;
  }
  return TFM_OK;
}

/* Reads a value of type `t` at r->pos into `v` (type, offset, and for
 * arrays the element type, count and index). */
static tfm_status read_value(reader *r, const value_ctx *c, tfm_gguf_type t,
                             int depth, tfm_gguf_value *v) {
  v->type = t;
  v->offset = r->pos;
  uint64_t size = fixed_size(t);
  if (size) {
    if (left(r) < size)
      return truncated(r, size, "a metadata value");
    if (t == TFM_GGUF_BOOL && r->g->map[r->pos] > 1)
      return bad_value(r, r->pos, c, "boolean value %llu is not 0 or 1",
                       r->g->map[r->pos], 0);
    r->pos += size;
    return TFM_OK;
  }
  if (t == TFM_GGUF_STRING) {
    uint64_t at, len;
    return read_string(r, "a string value", &at, &len);
  }
  return read_array(r, c, depth, v);
}

/*===- Lookup -------------------------------------------------------------===*/

/* qsort's comparisons see the file through this (qsort has no context). */
static _Thread_local const tfm_gguf *sorting;

static int by_key(const void *a, const void *b) {
  return strcmp(sorting->kv[*(const size_t *)a].key,
                sorting->kv[*(const size_t *)b].key);
}

static int by_name(const void *a, const void *b) {
  return strcmp(sorting->tensors[*(const size_t *)a].t.name,
                sorting->tensors[*(const size_t *)b].t.name);
}

static int by_offset(const void *a, const void *b) {
  const gguf_info *x = &sorting->tensors[*(const size_t *)a];
  const gguf_info *y = &sorting->tensors[*(const size_t *)b];
  if (x->rel != y->rel)
    return x->rel < y->rel ? -1 : 1;
  return (x->t.bytes > y->t.bytes) - (x->t.bytes < y->t.bytes);
}

static size_t *sorted_indices(tfm_gguf *g, size_t n,
                              int (*cmp)(const void *, const void *)) {
  size_t *idx = tfm_calloc(n ? n : 1, sizeof *idx);
  if (!idx)
    return NULL;
  for (size_t i = 0; i < n; ++i)
    idx[i] = i;
  sorting = g;
  qsort(idx, n, sizeof *idx, cmp);
  sorting = NULL;
  return idx;
}

const tfm_gguf_value *tfm_gguf_find(const tfm_gguf *g, const char *key) {
  size_t lo = 0, hi = g->num_kv;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(g->kv[g->kv_sorted[mid]].key, key);
    if (c == 0)
      return &g->kv[g->kv_sorted[mid]].value;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

const tfm_gguf_tensor *tfm_gguf_find_tensor(const tfm_gguf *g,
                                            const char *name) {
  size_t lo = 0, hi = g->num_tensors;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(g->tensors[g->tensors_sorted[mid]].t.name, name);
    if (c == 0)
      return &g->tensors[g->tensors_sorted[mid]].t;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/*===- Parsing ------------------------------------------------------------===*/

static tfm_status read_header(reader *r, uint64_t *n_tensors, uint64_t *n_kv) {
  tfm_gguf *g = r->g;
  const unsigned char *b = g->map;
  if (g->size < 4 || memcmp(b, "GGUF", 4) != 0) {
    char shown[17] = "";
    for (size_t i = 0, at = 0; i < 4 && i < g->size; ++i) {
      if (b[i] >= 0x20 && b[i] < 0x7f && b[i] != '"' && b[i] != '\\')
        shown[at++] = (char)b[i];
      else
        at += (size_t)snprintf(shown + at, sizeof shown - at, "\\x%02x", b[i]);
    }
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte 0: not a GGUF file (it starts with \"%s\", not "
                    "the magic \"GGUF\")",
                    g->path, shown);
  }
  r->pos = 4;
  uint64_t version;
  tfm_status s = read_uint(r, 4, "the header's version", &version);
  if (s != TFM_OK)
    return s;
  g->version = (uint32_t)version;
  if (version == 1)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte 4: GGUF version 1 is not supported (its counts "
                    "are 32-bit; llama.cpp no longer reads it either): "
                    "convert the model again with a current llama.cpp",
                    g->path);
  if (version != 0 && (version & 0xFFFF) == 0)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte 4: GGUF version %llu (0x%08llx): a big-endian "
                    "file? Only little-endian GGUF files are read",
                    g->path, (unsigned long long)version,
                    (unsigned long long)version);
  if (version != 2 && version != 3)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte 4: unsupported GGUF version %llu (versions 2 "
                    "and 3 are read)",
                    g->path, (unsigned long long)version);
  s = read_uint(r, 8, "the header's tensor count", n_tensors);
  if (s == TFM_OK)
    s = read_uint(r, 8, "the header's metadata count", n_kv);
  if (s != TFM_OK)
    return s;
  /* The smallest tensor info: an empty name's length, n_dims, type and
   * offset; the smallest key/value: a 1-byte key, the type, a uint8. */
  if (*n_tensors > left(r) / 24)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte 8: %llu tensors cannot fit in the %llu bytes "
                    "left in the file (each tensor info takes 24 or more)",
                    g->path, (unsigned long long)*n_tensors,
                    (unsigned long long)left(r));
  if (*n_kv > left(r) / 14)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte 16: %llu metadata entries cannot fit in the "
                    "%llu bytes left in the file (each takes 14 or more)",
                    g->path, (unsigned long long)*n_kv,
                    (unsigned long long)left(r));
  return TFM_OK;
}

static tfm_status read_metadata(reader *r, uint64_t n_kv) {
  tfm_gguf *g = r->g;
  g->kv = tfm_calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
  if (!g->kv)
    return tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", g->path);
  tfm_status s;
  for (uint64_t i = 0; i < n_kv; ++i) {
    gguf_kv *kv = &g->kv[i];
    kv->key_offset = r->pos;
    s = read_name(r, "a metadata key", &kv->key);
    if (s != TFM_OK)
      return s;
    g->num_kv = (size_t)i + 1;
    if (!kv->key[0])
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: byte %llu: metadata key %llu is "
                      "empty",
                      g->path, (unsigned long long)kv->key_offset,
                      (unsigned long long)i);
    uint64_t at = r->pos, type;
    s = read_uint(r, 4, "a metadata value's type", &type);
    if (s != TFM_OK)
      return s;
    value_ctx c = {kv->key, 0};
    if (type >= TFM_GGUF_TYPE_COUNT)
      return bad_value(r, at, &c, "unknown value type %llu", type, 0);
    kv->value.file = g;
    kv->value.key = kv->key;
    kv->value.element = UINT64_MAX;
    kv->value.index = UINT64_MAX;
    s = read_value(r, &c, (tfm_gguf_type)type, 0, &kv->value);
    if (s != TFM_OK)
      return s;
    kv->end = r->pos;
  }
  g->kv_sorted = sorted_indices(g, g->num_kv, by_key);
  if (!g->kv_sorted)
    return tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", g->path);
  for (size_t i = 1; i < g->num_kv; ++i) {
    const gguf_kv *a = &g->kv[g->kv_sorted[i - 1]],
                  *b = &g->kv[g->kv_sorted[i]];
    if (strcmp(a->key, b->key) == 0) {
      if (a->key_offset > b->key_offset) {
        const gguf_kv *t = a;
        a = b;
        b = t;
      }
      char clip[TFM_CLIP_SIZE];
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: byte %llu: duplicate metadata key '%s' (first at "
                      "byte %llu)",
                      g->path, (unsigned long long)b->key_offset,
                      tfm_clip(b->key, clip),
                      (unsigned long long)a->key_offset);
    }
  }
  g->alignment = TFM_GGUF_DEFAULT_ALIGNMENT;
  const tfm_gguf_value *al = tfm_gguf_find(g, "general.alignment");
  if (al) {
    if (al->type != TFM_GGUF_UINT32)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: byte %llu: general.alignment is a %s, not a "
                      "uint32",
                      g->path, (unsigned long long)al->offset,
                      tfm_gguf_type_name(al->type));
    g->alignment = load_le(g->map + al->offset, 4);
    if (g->alignment == 0 || (g->alignment & (g->alignment - 1)))
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: byte %llu: general.alignment %llu is not a power "
                      "of two",
                      g->path, (unsigned long long)al->offset,
                      (unsigned long long)g->alignment);
  }
  return TFM_OK;
}

static tfm_status read_tensor_info(reader *r, uint64_t i, gguf_info *ti) {
  tfm_gguf *g = r->g;
  ti->info_offset = r->pos;
  char *name = NULL;
  tfm_status s = read_name(r, "a tensor name", &name);
  if (s != TFM_OK)
    return s;
  ti->name = name;
  ti->t.name = name;
  char clip[TFM_CLIP_SIZE];
  const char *shown = tfm_clip(name, clip);
  unsigned long long at = (unsigned long long)ti->info_offset;
  if (strlen(name) >= TFM_GGUF_MAX_NAME)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte %llu: tensor %llu's name '%s' is %zu bytes "
                    "long (at most %d)",
                    g->path, at, (unsigned long long)i, shown, strlen(name),
                    TFM_GGUF_MAX_NAME - 1);
  uint64_t n_dims;
  if ((s = read_uint(r, 4, "a tensor's dimension count", &n_dims)) != TFM_OK)
    return s;
  if (n_dims > TFM_GGUF_MAX_DIMS)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte %llu: tensor '%s' has %llu dimensions (at "
                    "most %d)",
                    g->path, at, shown, (unsigned long long)n_dims,
                    TFM_GGUF_MAX_DIMS);
  ti->t.n_dims = (uint32_t)n_dims;
  for (int d = 0; d < TFM_GGUF_MAX_DIMS; ++d) {
    ti->t.ne[d] = 1;
    if ((uint64_t)d >= n_dims)
      continue;
    uint64_t dim;
    if ((s = read_uint(r, 8, "a tensor's dimension", &dim)) != TFM_OK)
      return s;
    if (dim > (uint64_t)INT64_MAX)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: byte %llu: tensor '%s' has a negative dimension "
                      "%lld (dimension %d)",
                      g->path, at, shown, (long long)dim, d);
    ti->t.ne[d] = (int64_t)dim;
  }
  uint64_t type;
  if ((s = read_uint(r, 4, "a tensor's type", &type)) != TFM_OK)
    return s;
  int64_t block, bytes;
  const char *tname;
  if (type > INT32_MAX ||
      !tfm_ggml_type_info((int32_t)type, &tname, &block, &bytes))
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte %llu: tensor '%s' has unknown ggml type %llu",
                    g->path, at, shown, (unsigned long long)type);
  ti->t.type = (int32_t)type;
  if (ti->t.ne[0] % block != 0)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte %llu: tensor '%s' of type %s has rows of %lld "
                    "elements, not a multiple of the type's block of %lld",
                    g->path, at, shown, tname, (long long)ti->t.ne[0],
                    (long long)block);
  /* Bytes: (ne[0] / block) * bytes per block * ne[1] * ne[2] * ne[3], and
   * the element count must fit in an int64 as ggml requires; so must the
   * product of the nonzero dimensions, so that no product of some of them
   * (rows = ne[1] * ne[2] * ne[3]) overflows for a tensor of no elements. */
  uint64_t total = (uint64_t)(ti->t.ne[0] / block) * (uint64_t)bytes;
  int64_t numel = ti->t.ne[0] ? ti->t.ne[0] : 1;
  int over = (uint64_t)(ti->t.ne[0] / block) > UINT64_MAX / (uint64_t)bytes;
  for (int d = 1; d < TFM_GGUF_MAX_DIMS; ++d) {
    over |= (int)__builtin_mul_overflow(total, (uint64_t)ti->t.ne[d], &total);
    over |= (int)__builtin_mul_overflow(numel, ti->t.ne[d] ? ti->t.ne[d] : 1,
                                        &numel);
  }
  if (over)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte %llu: tensor '%s' of shape [%lld, %lld, %lld, "
                    "%lld] has too many elements",
                    g->path, at, shown, (long long)ti->t.ne[0],
                    (long long)ti->t.ne[1], (long long)ti->t.ne[2],
                    (long long)ti->t.ne[3]);
  ti->t.bytes = total;
  return read_uint(r, 8, "a tensor's offset", &ti->rel);
}

/* Places the data section and checks every tensor's data in it. */
static tfm_status check_data(reader *r) {
  tfm_gguf *g = r->g;
  uint64_t a = g->alignment;
  g->data_offset = 0;
  if (g->num_tensors == 0)
    return TFM_OK;
  uint64_t start = r->pos + (a - r->pos % a) % a;
  if (start > g->size || start < r->pos)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte %llu: the file ends before its tensor data "
                    "(which starts at byte %llu, after padding to the "
                    "alignment of %llu)",
                    g->path, (unsigned long long)r->pos,
                    (unsigned long long)start, (unsigned long long)a);
  g->data_offset = start;
  char c1[TFM_CLIP_SIZE], c2[TFM_CLIP_SIZE];
  for (size_t i = 0; i < g->num_tensors; ++i) {
    gguf_info *ti = &g->tensors[i];
    const char *shown = tfm_clip(ti->t.name, c1);
    if (ti->rel % a)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: byte %llu: tensor '%s' has offset %llu, not a "
                      "multiple of the alignment %llu",
                      g->path, (unsigned long long)ti->info_offset, shown,
                      (unsigned long long)ti->rel, (unsigned long long)a);
    uint64_t room = g->size - start;
    if (ti->rel > room || ti->t.bytes > room - ti->rel)
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: byte %llu: tensor '%s' (%llu bytes at offset "
                      "%llu of the data, byte %llu) goes past the end of the "
                      "file (%zu bytes)",
                      g->path, (unsigned long long)ti->info_offset, shown,
                      (unsigned long long)ti->t.bytes,
                      (unsigned long long)ti->rel,
                      (unsigned long long)(start + ti->rel), g->size);
    ti->t.offset = start + ti->rel;
    ti->t.data = g->map + ti->t.offset;
  }
  size_t *order = sorted_indices(g, g->num_tensors, by_offset);
  if (!order)
    return tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", g->path);
  tfm_status s = TFM_OK;
  for (size_t i = 1; i < g->num_tensors && s == TFM_OK; ++i) {
    const gguf_info *p = &g->tensors[order[i - 1]], *q = &g->tensors[order[i]];
    if (q->rel < p->rel + p->t.bytes)
      s = tfm_fail(TFM_ERR_FORMAT,
                   "%s: byte %llu: tensor '%s' (data bytes %llu to %llu) "
                   "overlaps tensor '%s' (data bytes %llu to %llu)",
                   g->path, (unsigned long long)q->info_offset,
                   tfm_clip(q->t.name, c1), (unsigned long long)q->rel,
                   (unsigned long long)(q->rel + q->t.bytes),
                   tfm_clip(p->t.name, c2), (unsigned long long)p->rel,
                   (unsigned long long)(p->rel + p->t.bytes));
  }
  free(order);
  return s;
}

static tfm_status read_tensors(reader *r, uint64_t n) {
  tfm_gguf *g = r->g;
  g->tensors = tfm_calloc(n ? (size_t)n : 1, sizeof *g->tensors);
  if (!g->tensors)
    return tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", g->path);
  for (uint64_t i = 0; i < n; ++i) {
    g->num_tensors = (size_t)i + 1;
    tfm_status s = read_tensor_info(r, i, &g->tensors[i]);
    if (s != TFM_OK)
      return s;
  }
  g->tensors_sorted = sorted_indices(g, g->num_tensors, by_name);
  if (!g->tensors_sorted)
    return tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", g->path);
  for (size_t i = 1; i < g->num_tensors; ++i) {
    const gguf_info *a = &g->tensors[g->tensors_sorted[i - 1]],
                    *b = &g->tensors[g->tensors_sorted[i]];
    if (strcmp(a->t.name, b->t.name) == 0) {
      if (a->info_offset > b->info_offset) {
        const gguf_info *t = a;
        a = b;
        b = t;
      }
      char clip[TFM_CLIP_SIZE];
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: byte %llu: duplicate tensor name '%s' (first at "
                      "byte %llu)",
                      g->path, (unsigned long long)b->info_offset,
                      tfm_clip(b->t.name, clip),
                      (unsigned long long)a->info_offset);
    }
  }
  return check_data(r);
}

tfm_status tfm_gguf_open(const char *path, tfm_gguf **out) {
  *out = NULL;
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return tfm_fail(TFM_ERR_IO, "%s: cannot open the GGUF file", path);
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return tfm_fail(TFM_ERR_IO, "%s: not a regular file", path);
  }
  size_t size = (size_t)sb.st_size;
  void *map = NULL;
  if (size > 0) {
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      close(fd);
      return tfm_fail(TFM_ERR_IO, "%s: cannot map the file", path);
    }
  }
  close(fd);
  tfm_gguf *g = tfm_calloc(1, sizeof *g);
  if (!g) {
    if (map)
      munmap(map, size);
    return tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", path);
  }
  g->mapping = map;
  g->map = map ? map : (const unsigned char *)"";
  g->size = size;
  g->path = tfm_strdup(path);
  tfm_status s = TFM_OK;
  if (!g->path) {
    s = tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", path);
  } else {
    reader r = {g, 0};
    uint64_t n_tensors = 0, n_kv = 0;
    s = read_header(&r, &n_tensors, &n_kv);
    if (s == TFM_OK)
      s = read_metadata(&r, n_kv);
    if (s == TFM_OK)
      s = read_tensors(&r, n_tensors);
  }
  if (s != TFM_OK) {
    tfm_gguf_close(g);
    return s;
  }
  *out = g;
  return TFM_OK;
}

void tfm_gguf_close(tfm_gguf *g) {
  if (!g)
    return;
  for (size_t i = 0; i < g->num_kv; ++i)
    free(g->kv[i].key);
  for (size_t i = 0; i < g->num_tensors; ++i)
    free(g->tensors[i].name);
  free(g->kv);
  free(g->kv_sorted);
  free(g->tensors);
  free(g->tensors_sorted);
  free(g->arena);
  if (g->mapping)
    munmap(g->mapping, g->size);
  free(g->path);
  free(g);
}

/*===- Accessors ----------------------------------------------------------===*/

const char *tfm_gguf_path(const tfm_gguf *g) { return g->path; }
uint32_t tfm_gguf_version(const tfm_gguf *g) { return g->version; }
uint64_t tfm_gguf_alignment(const tfm_gguf *g) { return g->alignment; }
uint64_t tfm_gguf_data_offset(const tfm_gguf *g) { return g->data_offset; }
size_t tfm_gguf_num_kv(const tfm_gguf *g) { return g->num_kv; }
const char *tfm_gguf_key(const tfm_gguf *g, size_t i) { return g->kv[i].key; }
const tfm_gguf_value *tfm_gguf_kv_value(const tfm_gguf *g, size_t i) {
  return &g->kv[i].value;
}
int tfm_gguf_is_file(const char *path) {
  unsigned char magic[4];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, magic, 4);
  close(fd);
  return n == 4 && !memcmp(magic, "GGUF", 4);
}
const void *tfm_gguf_kv_encoding(const tfm_gguf *g, size_t i, size_t *len) {
  *len = (size_t)(g->kv[i].end - g->kv[i].key_offset);
  return g->map + g->kv[i].key_offset;
}
size_t tfm_gguf_num_tensors(const tfm_gguf *g) { return g->num_tensors; }
const tfm_gguf_tensor *tfm_gguf_tensor_at(const tfm_gguf *g, size_t i) {
  return &g->tensors[i].t;
}

/* "'key'" or "'key' element 3" for messages. */
static const char *value_name(const tfm_gguf_value *v, char *buf, size_t size) {
  char clip[TFM_CLIP_SIZE];
  if (v->element == UINT64_MAX)
    snprintf(buf, size, "metadata '%s'", tfm_clip(v->key, clip));
  else
    snprintf(buf, size, "metadata '%s' element %llu", tfm_clip(v->key, clip),
             (unsigned long long)v->element);
  return buf;
}

static tfm_status wrong_type(const tfm_gguf_value *v, const char *want) {
  char name[TFM_CLIP_SIZE + 64];
  return tfm_fail(TFM_ERR_FORMAT, "%s: byte %llu: %s is a %s, not %s",
                  v->file->path, (unsigned long long)v->offset,
                  value_name(v, name, sizeof name), tfm_gguf_type_name(v->type),
                  want);
}

tfm_status tfm_gguf_value_string(const tfm_gguf_value *v, const char **s,
                                 size_t *len) {
  if (v->type != TFM_GGUF_STRING)
    return wrong_type(v, "a string");
  *len = (size_t)load_le(v->file->map + v->offset, 8);
  *s = (const char *)v->file->map + v->offset + 8;
  return TFM_OK;
}

/* An integer value: its magnitude and sign. */
static int int_value(const tfm_gguf_value *v, uint64_t *mag, int *negative) {
  const unsigned char *p = v->file->map + v->offset;
  int n = (int)fixed_size(v->type);
  int is_signed;
  switch (v->type) {
  case TFM_GGUF_UINT8:
  case TFM_GGUF_UINT16:
  case TFM_GGUF_UINT32:
  case TFM_GGUF_UINT64:
    is_signed = 0;
    break;
  case TFM_GGUF_INT8:
  case TFM_GGUF_INT16:
  case TFM_GGUF_INT32:
  case TFM_GGUF_INT64:
    is_signed = 1;
    break;
  default:
    return 0;
  }
  uint64_t u = load_le(p, n);
  *negative = is_signed && (u >> (8 * n - 1)) & 1;
  if (*negative) /* the two's complement magnitude, within n bytes */
    u = n == 8 ? ~u + 1 : (((uint64_t)1 << (8 * n)) - u);
  *mag = u;
  return 1;
}

tfm_status tfm_gguf_value_int(const tfm_gguf_value *v, int64_t min, int64_t max,
                              int64_t *out) {
  uint64_t mag;
  int neg;
  if (!int_value(v, &mag, &neg))
    return wrong_type(v, "an integer");
  /* In range of int64 first: magnitudes up to 2^63 when negative. */
  int fits = neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX;
  int64_t x = 0;
  if (fits)
    x = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag)
            : (int64_t)mag;
  if (!fits || x < min || x > max) {
    char name[TFM_CLIP_SIZE + 64];
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte %llu: %s is %s%llu, outside [%lld, %lld]",
                    v->file->path, (unsigned long long)v->offset,
                    value_name(v, name, sizeof name), neg ? "-" : "",
                    (unsigned long long)mag, (long long)min, (long long)max);
  }
  *out = x;
  return TFM_OK;
}

tfm_status tfm_gguf_value_uint(const tfm_gguf_value *v, uint64_t *out) {
  uint64_t mag;
  int neg;
  if (!int_value(v, &mag, &neg))
    return wrong_type(v, "an integer");
  if (neg) {
    char name[TFM_CLIP_SIZE + 64];
    return tfm_fail(TFM_ERR_FORMAT, "%s: byte %llu: %s is negative (-%llu)",
                    v->file->path, (unsigned long long)v->offset,
                    value_name(v, name, sizeof name), (unsigned long long)mag);
  }
  *out = mag;
  return TFM_OK;
}

tfm_status tfm_gguf_value_float(const tfm_gguf_value *v, double *out) {
  const unsigned char *p = v->file->map + v->offset;
  if (v->type == TFM_GGUF_FLOAT32) {
    uint32_t bits = (uint32_t)load_le(p, 4);
    float f;
    memcpy(&f, &bits, 4);
    *out = f;
    return TFM_OK;
  }
  if (v->type == TFM_GGUF_FLOAT64) {
    uint64_t bits = load_le(p, 8);
    memcpy(out, &bits, 8);
    return TFM_OK;
  }
  return wrong_type(v, "a float");
}

tfm_status tfm_gguf_value_bool(const tfm_gguf_value *v, int *out) {
  if (v->type != TFM_GGUF_BOOL)
    return wrong_type(v, "a bool");
  *out = v->file->map[v->offset] != 0;
  return TFM_OK;
}

tfm_status tfm_gguf_value_array(const tfm_gguf_value *v, tfm_gguf_type elem,
                                uint64_t *count) {
  if (v->type != TFM_GGUF_ARRAY)
    return wrong_type(v, "an array");
  if (elem != TFM_GGUF_TYPE_COUNT && v->elem != elem) {
    char name[TFM_CLIP_SIZE + 64];
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: byte %llu: %s is an array of %s, not of %s",
                    v->file->path, (unsigned long long)v->offset,
                    value_name(v, name, sizeof name),
                    tfm_gguf_type_name(v->elem), tfm_gguf_type_name(elem));
  }
  *count = v->count;
  return TFM_OK;
}

tfm_gguf_value tfm_gguf_array_at(const tfm_gguf_value *v, uint64_t i) {
  tfm_gguf_value e = {0};
  e.file = v->file;
  e.key = v->key;
  e.element = i;
  e.type = v->elem;
  e.index = UINT64_MAX;
  uint64_t size = fixed_size(v->elem);
  if (size) {
    e.offset = v->offset + 12 + i * size;
  } else if (v->elem == TFM_GGUF_STRING) {
    e.offset = v->file->arena[v->index + i];
  } else {
    e.offset = v->file->arena[v->index + 2 * i];
    e.index = v->file->arena[v->index + 2 * i + 1];
    e.elem = (tfm_gguf_type)load_le(v->file->map + e.offset, 4);
    e.count = load_le(v->file->map + e.offset + 4, 8);
  }
  return e;
}

const void *tfm_gguf_array_data(const tfm_gguf_value *v) {
  if (v->type != TFM_GGUF_ARRAY || !fixed_size(v->elem))
    return NULL;
  return v->file->map + v->offset + 12;
}

static const tfm_gguf_value *require(const tfm_gguf *g, const char *key) {
  const tfm_gguf_value *v = tfm_gguf_find(g, key);
  if (!v) {
    char clip[TFM_CLIP_SIZE];
    tfm_fail(TFM_ERR_FORMAT, "%s: no metadata key '%s'", g->path,
             tfm_clip(key, clip));
  }
  return v;
}

tfm_status tfm_gguf_get_string(const tfm_gguf *g, const char *key,
                               const char **s, size_t *len) {
  const tfm_gguf_value *v = require(g, key);
  return v ? tfm_gguf_value_string(v, s, len) : TFM_ERR_FORMAT;
}

tfm_status tfm_gguf_get_int(const tfm_gguf *g, const char *key, int64_t min,
                            int64_t max, int64_t *out) {
  const tfm_gguf_value *v = require(g, key);
  return v ? tfm_gguf_value_int(v, min, max, out) : TFM_ERR_FORMAT;
}

tfm_status tfm_gguf_get_float(const tfm_gguf *g, const char *key, double *out) {
  const tfm_gguf_value *v = require(g, key);
  return v ? tfm_gguf_value_float(v, out) : TFM_ERR_FORMAT;
}

tfm_status tfm_gguf_get_bool(const tfm_gguf *g, const char *key, int *out) {
  const tfm_gguf_value *v = require(g, key);
  return v ? tfm_gguf_value_bool(v, out) : TFM_ERR_FORMAT;
}

tfm_status tfm_gguf_get_array(const tfm_gguf *g, const char *key,
                              tfm_gguf_type elem, tfm_gguf_value *out) {
  const tfm_gguf_value *v = require(g, key);
  if (!v)
    return TFM_ERR_FORMAT;
  uint64_t count;
  tfm_status s = tfm_gguf_value_array(v, elem, &count);
  if (s == TFM_OK)
    *out = *v;
  return s;
}
