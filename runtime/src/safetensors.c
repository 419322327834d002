/*===- safetensors.c - memory-mapped safetensors reader -------------------===*
 * Enforces the format before any tensor is handed out: the 8-byte header
 * length, the JSON header (jansson) with unique names and a string-to-string
 * "__metadata__", every entry's dtype, shape (overflow-checked) and
 * data_offsets, and the offsets tiling the data section exactly: contiguous
 * from 0, non-overlapping, no byte left over. Every error names the file and
 * the tensor.
 *===----------------------------------------------------------------------===*/
#define _DEFAULT_SOURCE
#include "internal.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct entry {
  char *name;
  tfm_tensor view;
  uint64_t begin, end; /* data_offsets */
} entry;

struct tfm_safetensors {
  char *path;
  void *map;
  size_t size;
  entry *entries;
  size_t count;
};

static int parse_dtype(const char *s, int32_t *out) {
  int32_t opaque = tfm_opaque_dtype(s);
  if (opaque >= 0) {
    *out = opaque;
    return 1;
  }
  if (!strcmp(s, "F32"))
    *out = TFM_F32;
  else if (!strcmp(s, "F16"))
    *out = TFM_F16;
  else if (!strcmp(s, "BF16"))
    *out = TFM_BF16;
  else if (!strcmp(s, "I32"))
    *out = TFM_I32;
  else if (!strcmp(s, "I64"))
    *out = TFM_I64;
  else
    return 0;
  return 1;
}

/* What a file that is not safetensors is, by its first bytes; NULL if it
 * is not recognized. */
static const char *other_format(const unsigned char *b, size_t size) {
  if (size >= 6 && !memcmp(b, "\x93NUMPY", 6))
    return "an npy file";
  if (size >= 4 && !memcmp(b, "PK\x03\x04", 4))
    return "a zip archive (a PyTorch .bin or .pt checkpoint?)";
  if (size >= 4 && !memcmp(b, "GGUF", 4))
    return "a GGUF file";
  if (size >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5)
    return "a Python pickle (a PyTorch checkpoint?)";
  if (size >= 1 && (b[0] == '{' || b[0] == '['))
    return "a JSON file";
  return NULL;
}

/* Largest header read, as the reference implementation's limit. */
#define ST_MAX_HEADER (100u * 1000 * 1000)

/* The name given twice at the top level of a header that jansson refused
 * with json_error_duplicate_key (its message does not always say which):
 * the keys' raw text, compared as written, through a set. */
static void duplicate_name(const char *h, size_t n, char *buf, size_t size) {
  snprintf(buf, size, "a tensor name");
  json_t *seen = json_object();
  int depth = 0;
  for (size_t i = 0; seen && i < n; ++i) {
    if (h[i] == '{' || h[i] == '[') {
      ++depth;
    } else if (h[i] == '}' || h[i] == ']') {
      --depth;
    } else if (h[i] == '"') {
      size_t start = ++i;
      while (i < n && h[i] != '"')
        i += h[i] == '\\' ? 2 : 1;
      if (depth != 1 || i >= n)
        continue;
      size_t len = i - start, k = i + 1;
      while (k < n &&
             (h[k] == ' ' || h[k] == '\t' || h[k] == '\n' || h[k] == '\r'))
        ++k;
      if (k >= n || h[k] != ':')
        continue;
      if (json_object_getn(seen, h + start, len)) {
        int shown = len > TFM_CLIP_SIZE - 4 ? TFM_CLIP_SIZE - 4 : (int)len;
        snprintf(buf, size, "'%.*s%s'", shown, h + start,
                 (size_t)shown < len ? "..." : "");
        break;
      }
      if (json_object_setn_new(seen, h + start, len, json_null()))
        break;
    }
  }
  json_decref(seen);
}

/* "__metadata__" must be an object of strings. */
static tfm_status check_metadata(const char *path, json_t *meta) {
  if (!json_is_object(meta))
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: '__metadata__' must be an object mapping strings to "
                    "strings",
                    path);
  const char *key;
  json_t *val;
  json_object_foreach(meta, key, val) {
    if (!json_is_string(val)) {
      char clip[TFM_CLIP_SIZE];
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: '__metadata__' entry '%s' must be a string", path,
                      tfm_clip(key, clip));
    }
  }
  return TFM_OK;
}

static int by_offsets(const void *a, const void *b) {
  const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
}

/* The tensors' data must tile the data section: sorted by offset, each
 * starts where the one before ends, the first at 0, the last at its end. */
static tfm_status check_layout(const char *path, tfm_safetensors *st,
                               uint64_t dataSize) {
  entry **order = tfm_calloc(st->count ? st->count : 1, sizeof *order);
  if (!order)
    return tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", path);
  for (size_t i = 0; i < st->count; ++i)
    order[i] = &st->entries[i];
  qsort(order, st->count, sizeof *order, by_offsets);
  tfm_status s = TFM_OK;
  uint64_t at = 0;
  const entry *prev = NULL;
  char c1[TFM_CLIP_SIZE], c2[TFM_CLIP_SIZE];
  for (size_t i = 0; i < st->count && s == TFM_OK; ++i) {
    const entry *e = order[i];
    if (e->begin < at)
      s = tfm_fail(TFM_ERR_FORMAT,
                   "%s: tensor '%s' (bytes %llu to %llu) overlaps tensor "
                   "'%s' (bytes %llu to %llu)",
                   path, tfm_clip(e->name, c1), (unsigned long long)e->begin,
                   (unsigned long long)e->end, tfm_clip(prev->name, c2),
                   (unsigned long long)prev->begin,
                   (unsigned long long)prev->end);
    else if (e->begin > at)
      s = tfm_fail(TFM_ERR_FORMAT,
                   "%s: data bytes %llu to %llu belong to no tensor (before "
                   "tensor '%s'); the data_offsets must be contiguous from 0",
                   path, (unsigned long long)at, (unsigned long long)e->begin,
                   tfm_clip(e->name, c1));
    at = e->end;
    prev = e;
  }
  if (s == TFM_OK && at != dataSize)
    s = tfm_fail(TFM_ERR_FORMAT,
                 "%s: data bytes %llu to %llu belong to no tensor (the file "
                 "is longer than its tensors)",
                 path, (unsigned long long)at, (unsigned long long)dataSize);
  free(order);
  return s;
}

tfm_status tfm_safetensors_open(const char *path, tfm_safetensors **out) {
  *out = NULL;
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return tfm_fail(TFM_ERR_IO, "%s: cannot open the weights file", path);
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return tfm_fail(TFM_ERR_IO, "%s: not a regular file", path);
  }
  size_t size = (size_t)sb.st_size;
  if (size < 8) {
    close(fd);
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: not a safetensors file (%zu bytes, shorter than its "
                    "8-byte header length)",
                    path, size);
  }
  void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED)
    return tfm_fail(TFM_ERR_IO, "%s: cannot map the file", path);
  tfm_safetensors *st = tfm_calloc(1, sizeof *st);
  if (!st) {
    munmap(map, size);
    return tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", path);
  }
  st->map = map;
  st->size = size;
  const unsigned char *bytes = map;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i)
    hlen = (hlen << 8) | bytes[i];
  tfm_status status = TFM_OK;
  json_t *root = NULL;
  char clip[TFM_CLIP_SIZE];
  st->path = tfm_strdup(path);
  if (!st->path) {
    status = tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", path);
    goto fail;
  }
  const char *other = (hlen > size - 8 || (size > 8 && bytes[8] != '{'))
                          ? other_format(bytes, size)
                          : NULL;
  if (other) {
    status = tfm_fail(TFM_ERR_FORMAT,
                      "%s: %s, not a safetensors file (the weights must be "
                      "safetensors: a file, a model folder or an index)",
                      path, other);
    goto fail;
  }
  if (hlen > size - 8) {
    status = tfm_fail(TFM_ERR_FORMAT,
                      "%s: header length %llu exceeds the file size %zu", path,
                      (unsigned long long)hlen, size);
    goto fail;
  }
  if (hlen > ST_MAX_HEADER) {
    status = tfm_fail(TFM_ERR_FORMAT,
                      "%s: header length %llu is above the format's limit of "
                      "%u bytes",
                      path, (unsigned long long)hlen, ST_MAX_HEADER);
    goto fail;
  }
  json_error_t jerr;
  root = json_loadb((const char *)bytes + 8, (size_t)hlen,
                    JSON_REJECT_DUPLICATES, &jerr);
  if (!root && json_error_code(&jerr) == json_error_duplicate_key) {
    char dup[TFM_CLIP_SIZE + 4];
    duplicate_name((const char *)bytes + 8, (size_t)hlen, dup, sizeof dup);
    status = tfm_fail(TFM_ERR_FORMAT,
                      "%s: the header names %s twice; tensor names must be "
                      "unique",
                      path, dup);
    goto fail;
  }
  if (!root || !json_is_object(root)) {
    status = tfm_fail(
        TFM_ERR_FORMAT, "%s: the header is not a JSON object (%s at byte %d)",
        path, root ? "not an object" : jerr.text, root ? 0 : jerr.position);
    goto fail;
  }
  size_t dataStart = 8 + (size_t)hlen, dataSize = size - dataStart;
  st->entries = tfm_calloc(json_object_size(root) + 1, sizeof(entry));
  if (!st->entries) {
    status = tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", path);
    goto fail;
  }
  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) {
    const char *name = tfm_clip(key, clip);
    if (!strcmp(key, "__metadata__")) {
      if ((status = check_metadata(path, val)) != TFM_OK)
        goto fail;
      continue;
    }
    json_t *dt = json_object_get(val, "dtype");
    json_t *shape = json_object_get(val, "shape");
    json_t *offs = json_object_get(val, "data_offsets");
    if (!json_is_object(val) || !json_is_string(dt) || !json_is_array(shape) ||
        !json_is_array(offs) || json_array_size(offs) != 2) {
      status = tfm_fail(TFM_ERR_FORMAT,
                        "%s: tensor '%s' lacks a valid dtype, shape or "
                        "data_offsets",
                        path, name);
      goto fail;
    }
    entry *e = &st->entries[st->count];
    if (!parse_dtype(json_string_value(dt), &e->view.dtype)) {
      char dclip[TFM_CLIP_SIZE];
      status = tfm_fail(TFM_ERR_FORMAT,
                        "%s: tensor '%s' has dtype %s; known: F32, F16, "
                        "BF16, I32, I64, BOOL, U8, I8, I16, U16, U32, U64, "
                        "F64, F8_E4M3, F8_E5M2",
                        path, name, tfm_clip(json_string_value(dt), dclip));
      goto fail;
    }
    if (json_array_size(shape) > TFM_MAX_RANK) {
      status = tfm_fail(TFM_ERR_FORMAT, "%s: tensor '%s' has rank above %d",
                        path, name, TFM_MAX_RANK);
      goto fail;
    }
    e->view.rank = (int32_t)json_array_size(shape);
    /* The element count is checked for overflow at every factor, before it
     * is compared with anything. */
    uint64_t numel = 1;
    for (size_t i = 0; i < json_array_size(shape); ++i) {
      json_t *d = json_array_get(shape, i);
      if (!json_is_integer(d) || json_integer_value(d) < 0 ||
          json_integer_value(d) > TFM_MAX_DIM) {
        status = tfm_fail(TFM_ERR_FORMAT,
                          "%s: tensor '%s' has an invalid shape (dimension "
                          "%zu is not a size up to 2^40)",
                          path, name, i);
        goto fail;
      }
      e->view.shape[i] = json_integer_value(d);
      if (__builtin_mul_overflow(numel, (uint64_t)e->view.shape[i], &numel) ||
          numel > TFM_MAX_NUMEL) {
        status =
            tfm_fail(TFM_ERR_FORMAT,
                     "%s: tensor '%s' has more than 2^44 elements", path, name);
        goto fail;
      }
    }
    json_t *b0 = json_array_get(offs, 0), *b1 = json_array_get(offs, 1);
    if (!json_is_integer(b0) || !json_is_integer(b1) ||
        json_integer_value(b0) < 0 ||
        json_integer_value(b1) < json_integer_value(b0) ||
        (uint64_t)json_integer_value(b1) > dataSize) {
      status = tfm_fail(TFM_ERR_FORMAT,
                        "%s: tensor '%s' has data_offsets outside the file's "
                        "%zu data bytes",
                        path, name, dataSize);
      goto fail;
    }
    e->begin = (uint64_t)json_integer_value(b0);
    e->end = (uint64_t)json_integer_value(b1);
    uint64_t nbytes = e->end - e->begin;
    size_t esize = tfm_dtype_size(e->view.dtype);
    if (nbytes != numel * esize) {
      char s[TFM_SHAPE_STR_SIZE];
      tfm_shape_str(e->view.rank, e->view.shape, s, sizeof s);
      status = tfm_fail(TFM_ERR_FORMAT,
                        "%s: tensor '%s' (%s %s) needs %llu bytes but its "
                        "data_offsets span %llu",
                        path, name, json_string_value(dt), s,
                        (unsigned long long)(numel * esize),
                        (unsigned long long)nbytes);
      goto fail;
    }
    e->view.data = (void *)(uintptr_t)(bytes + dataStart + e->begin);
    e->name = tfm_strdup(key);
    if (!e->name) {
      status = tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", path);
      goto fail;
    }
    st->count++;
  }
  if ((status = check_layout(path, st, dataSize)) != TFM_OK)
    goto fail;
  json_decref(root);
  *out = st;
  return TFM_OK;
fail:
  if (root)
    json_decref(root);
  tfm_safetensors_close(st);
  return status;
}

void tfm_safetensors_close(tfm_safetensors *st) {
  if (!st)
    return;
  for (size_t i = 0; i < st->count; ++i)
    free(st->entries[i].name);
  free(st->entries);
  free(st->path);
  munmap(st->map, st->size);
  free(st);
}

size_t tfm_safetensors_count(const tfm_safetensors *st) { return st->count; }
const char *tfm_safetensors_name(const tfm_safetensors *st, size_t i) {
  return i < st->count ? st->entries[i].name : NULL;
}

const tfm_tensor *tfm_safetensors_find(const tfm_safetensors *st,
                                       const char *name) {
  for (size_t i = 0; i < st->count; ++i)
    if (!strcmp(st->entries[i].name, name))
      return &st->entries[i].view;
  return NULL;
}

tfm_status tfm_safetensors_get(const tfm_safetensors *st, const char *name,
                               tfm_tensor *view) {
  char clip[TFM_CLIP_SIZE];
  const tfm_tensor *v = tfm_safetensors_find(st, name);
  if (!v)
    return tfm_fail(TFM_ERR_MISMATCH, "%s: no tensor named '%s'", st->path,
                    tfm_clip(name, clip));
  /* A typed view must be aligned to its element; the format does not
   * promise it (the loader copies such tensors with memcpy). */
  size_t esize = tfm_dtype_size(v->dtype);
  uintptr_t offset = (uintptr_t)v->data - (uintptr_t)st->map;
  if (esize > 1 && offset % esize != 0)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: tensor '%s' starts at byte %llu of the file, not a "
                    "multiple of its %zu-byte elements: it cannot be viewed "
                    "in place",
                    st->path, tfm_clip(name, clip), (unsigned long long)offset,
                    esize);
  *view = *v;
  return TFM_OK;
}
