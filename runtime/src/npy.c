/*===- npy.c - NumPy .npy reader and writer -------------------------------===*
 * Reads versions 1-3 of the format: little-endian int32, int64, float32 and
 * float16, C order. The header is parsed as the Python dict literal it is,
 * as numpy does: exactly the keys 'descr', 'fortran_order' and 'shape' at
 * its top level, a string, True or False, and a tuple of sizes. The data's
 * size is checked against the file's before anything is allocated. Every
 * error names the file and the problem.
 *===----------------------------------------------------------------------===*/
#define _DEFAULT_SOURCE
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Longest header read, in bytes. */
#define NPY_MAX_HEADER (1u << 20)

/* The header dict being parsed: the text, the position, and the file and
 * status for errors. */
typedef struct npy_parser {
  const char *path;
  const char *begin, *p, *end;
} npy_parser;

static tfm_status npy_error(const npy_parser *ps, const char *what) {
  return tfm_fail(TFM_ERR_FORMAT,
                  "%s: malformed npy header at byte %zu: %s (the header "
                  "must be a Python dict literal with 'descr', "
                  "'fortran_order' and 'shape')",
                  ps->path, (size_t)(ps->p - ps->begin), what);
}

static void skip_ws(npy_parser *ps) {
  while (ps->p < ps->end &&
         (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
    ++ps->p;
}

/* Consumes `c` (after whitespace) if it is next. */
static int accept(npy_parser *ps, char c) {
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == c) {
    ++ps->p;
    return 1;
  }
  return 0;
}

/* A Python string literal in single or double quotes, without escapes or
 * prefixes (numpy writes none in these keys and values); [*s, *s + *n). */
static tfm_status parse_string(npy_parser *ps, const char **s, size_t *n) {
  skip_ws(ps);
  if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"'))
    return npy_error(ps, "expected a quoted string");
  char quote = *ps->p++;
  const char *start = ps->p;
  while (ps->p < ps->end && *ps->p != quote) {
    if (*ps->p == '\\' || *ps->p == '\n')
      return npy_error(ps, "escapes and line breaks in strings are not "
                           "supported");
    ++ps->p;
  }
  if (ps->p >= ps->end)
    return npy_error(ps, "unterminated string");
  *s = start;
  *n = (size_t)(ps->p - start);
  ++ps->p;
  return TFM_OK;
}

static int is_ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* True or False, as whole words. */
static tfm_status parse_bool(npy_parser *ps, int *out) {
  skip_ws(ps);
  const char *w = ps->p;
  while (ps->p < ps->end && is_ident(*ps->p))
    ++ps->p;
  size_t n = (size_t)(ps->p - w);
  if (n == 4 && !memcmp(w, "True", 4))
    *out = 1;
  else if (n == 5 && !memcmp(w, "False", 5))
    *out = 0;
  else {
    ps->p = w;
    return npy_error(ps, "'fortran_order' must be True or False");
  }
  return TFM_OK;
}

/* A tuple of decimal sizes: (), (N,), (N, M), (N, M,). */
static tfm_status parse_shape(npy_parser *ps, int32_t *rank, int64_t *dims) {
  if (!accept(ps, '('))
    return npy_error(ps, "'shape' must be a tuple");
  *rank = 0;
  if (accept(ps, ')'))
    return TFM_OK;
  for (;;) {
    skip_ws(ps);
    const char *d = ps->p;
    int64_t v = 0;
    while (ps->p < ps->end && isdigit((unsigned char)*ps->p)) {
      if (v > (TFM_MAX_DIM - (*ps->p - '0')) / 10)
        return tfm_fail(TFM_ERR_FORMAT,
                        "%s: npy dimension %d is larger than %lld", ps->path,
                        (int)*rank, (long long)TFM_MAX_DIM);
      v = v * 10 + (*ps->p++ - '0');
    }
    if (ps->p == d || (ps->p < ps->end && is_ident(*ps->p)) ||
        (ps->p - d > 1 && *d == '0'))
      return npy_error(ps, "a dimension of 'shape' must be a decimal size");
    if (*rank == TFM_MAX_RANK)
      return tfm_fail(TFM_ERR_FORMAT, "%s: npy rank above %d", ps->path,
                      TFM_MAX_RANK);
    dims[(*rank)++] = v;
    int comma = accept(ps, ',');
    if (accept(ps, ')')) {
      /* A one-element tuple needs its comma: (3) is the number 3. */
      if (*rank == 1 && !comma)
        return npy_error(ps, "'shape' must be a tuple: write (N,)");
      return TFM_OK;
    }
    if (!comma)
      return npy_error(ps, "expected ',' or ')' in 'shape'");
  }
}

/* What the header says. */
typedef struct npy_header {
  const char *descr;
  size_t descr_len;
  int fortran;
  int32_t rank;
  int64_t dims[TFM_MAX_RANK];
} npy_header;

/* The header dict: exactly the three keys, each once, then only
 * whitespace (numpy pads with spaces and ends with a newline). */
static tfm_status parse_header(npy_parser *ps, npy_header *h) {
  int seen[3] = {0, 0, 0};
  static const char *const keys[3] = {"descr", "fortran_order", "shape"};
  tfm_status st;
  if (!accept(ps, '{'))
    return npy_error(ps, "expected '{'");
  while (!accept(ps, '}')) {
    const char *key;
    size_t n;
    const char *at = ps->p;
    if ((st = parse_string(ps, &key, &n)) != TFM_OK)
      return st;
    int k = 0;
    while (k < 3 && !(strlen(keys[k]) == n && !memcmp(keys[k], key, n)))
      ++k;
    if (k == 3) {
      ps->p = at;
      skip_ws(ps);
      return tfm_fail(TFM_ERR_FORMAT,
                      "%s: npy header has the key '%.*s'; numpy allows only "
                      "'descr', 'fortran_order' and 'shape'",
                      ps->path, (int)(n > 64 ? 64 : n), key);
    }
    if (seen[k])
      return tfm_fail(TFM_ERR_FORMAT, "%s: npy header gives '%s' twice",
                      ps->path, keys[k]);
    seen[k] = 1;
    if (!accept(ps, ':'))
      return npy_error(ps, "expected ':' after a key");
    if (k == 0)
      st = parse_string(ps, &h->descr, &h->descr_len);
    else if (k == 1)
      st = parse_bool(ps, &h->fortran);
    else
      st = parse_shape(ps, &h->rank, h->dims);
    if (st != TFM_OK)
      return st;
    if (!accept(ps, ',')) {
      if (!accept(ps, '}'))
        return npy_error(ps, "expected ',' or '}'");
      break;
    }
  }
  skip_ws(ps);
  if (ps->p != ps->end)
    return npy_error(ps, "unexpected text after the dict");
  for (int k = 0; k < 3; ++k)
    if (!seen[k])
      return tfm_fail(TFM_ERR_FORMAT, "%s: npy header lacks '%s'", ps->path,
                      keys[k]);
  return TFM_OK;
}

/* The dtype of an npy descr string, or -1. */
static int32_t parse_descr(const char *s, size_t n) {
  static const struct {
    const char *descr;
    int32_t dtype;
  } known[] = {{"<i4", TFM_I32},
               {"|i4", TFM_I32},
               {"<i8", TFM_I64},
               {"<f4", TFM_F32},
               {"<f2", TFM_F16}};
  for (size_t i = 0; i < sizeof known / sizeof *known; ++i)
    if (n == 3 && !memcmp(s, known[i].descr, 3))
      return known[i].dtype;
  return -1;
}

tfm_status tfm_npy_read(const char *path, tfm_tensor *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f)
    return tfm_fail(TFM_ERR_IO, "%s: cannot open the file: %s", path,
                    strerror(errno));
  unsigned char magic[10];
  tfm_status st = TFM_OK;
  char *header = NULL;
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    st = tfm_fail(TFM_ERR_IO, "%s: not a regular file", path);
    goto done;
  }
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6)) {
    st = tfm_fail(TFM_ERR_FORMAT, "%s: not an npy file (bad magic)", path);
    goto done;
  }
  uint32_t hlen;
  size_t prefix;
  if (magic[6] == 1) {
    unsigned char b[2];
    if (fread(b, 1, 2, f) != 2) {
      st = tfm_fail(TFM_ERR_FORMAT, "%s: truncated npy header", path);
      goto done;
    }
    hlen = b[0] | (b[1] << 8);
    prefix = 10;
  } else if (magic[6] == 2 || magic[6] == 3) {
    unsigned char b[4];
    if (fread(b, 1, 4, f) != 4) {
      st = tfm_fail(TFM_ERR_FORMAT, "%s: truncated npy header", path);
      goto done;
    }
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | ((uint32_t)b[3] << 24);
    prefix = 12;
  } else {
    st = tfm_fail(TFM_ERR_FORMAT, "%s: unsupported npy version %d", path,
                  magic[6]);
    goto done;
  }
  if (hlen > NPY_MAX_HEADER) {
    st = tfm_fail(TFM_ERR_FORMAT, "%s: npy header too long (%u bytes)", path,
                  hlen);
    goto done;
  }
  if ((uint64_t)sb.st_size < prefix + hlen) {
    st = tfm_fail(TFM_ERR_FORMAT,
                  "%s: truncated npy header (%u bytes declared, the file "
                  "has %lld)",
                  path, hlen, (long long)sb.st_size);
    goto done;
  }
  header = tfm_malloc(hlen + 1);
  if (!header) {
    st = tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", path);
    goto done;
  }
  if (fread(header, 1, hlen, f) != hlen) {
    st = tfm_fail(TFM_ERR_FORMAT, "%s: truncated npy header", path);
    goto done;
  }
  header[hlen] = 0;
  npy_parser ps = {path, header, header, header + hlen};
  npy_header h;
  memset(&h, 0, sizeof h);
  if ((st = parse_header(&ps, &h)) != TFM_OK)
    goto done;
  int32_t dtype = parse_descr(h.descr, h.descr_len);
  if (dtype < 0) {
    st = tfm_fail(TFM_ERR_FORMAT,
                  "%s: unsupported npy dtype '%.*s' (expected int32, int64, "
                  "float32 or float16, little-endian)",
                  path, (int)(h.descr_len > 64 ? 64 : h.descr_len), h.descr);
    goto done;
  }
  if (h.fortran) {
    st = tfm_fail(TFM_ERR_FORMAT,
                  "%s: Fortran-order npy arrays are not supported", path);
    goto done;
  }
  /* The data must be in the file before anything is allocated for it. */
  uint64_t numel = 1, bytes;
  for (int32_t i = 0; i < h.rank; ++i)
    if (__builtin_mul_overflow(numel, (uint64_t)h.dims[i], &numel) ||
        numel > TFM_MAX_NUMEL) {
      char s[TFM_SHAPE_STR_SIZE];
      tfm_shape_str(h.rank, h.dims, s, sizeof s);
      st = tfm_fail(TFM_ERR_FORMAT,
                    "%s: npy shape %s has more than 2^44 elements", path, s);
      goto done;
    }
  bytes = numel * tfm_dtype_size(dtype);
  uint64_t available = (uint64_t)sb.st_size - prefix - hlen;
  if (available != bytes) {
    char s[TFM_SHAPE_STR_SIZE];
    tfm_shape_str(h.rank, h.dims, s, sizeof s);
    st = tfm_fail(TFM_ERR_FORMAT,
                  available < bytes
                      ? "%s: npy data is shorter than its shape says (%s "
                        "%s: %llu bytes expected, the file holds %llu)"
                      : "%s: npy data is longer than its shape says (%s "
                        "%s: %llu bytes expected, the file holds %llu)",
                  path, tfm_dtype_name(dtype), s, (unsigned long long)bytes,
                  (unsigned long long)available);
    goto done;
  }
  if (tfm_tensor_alloc(out, (tfm_dtype)dtype, h.rank, h.dims) != TFM_OK) {
    st = tfm_fail(TFM_ERR_MEMORY, "%s: out of memory for %llu bytes", path,
                  (unsigned long long)bytes);
    goto done;
  }
  if (fread(out->data, 1, bytes, f) != bytes) {
    tfm_tensor_free(out);
    st = tfm_fail(TFM_ERR_IO, "%s: cannot read the npy data", path);
    goto done;
  }
  if (out->dtype == TFM_F16) { /* widen to float32 */
    tfm_tensor w;
    if (tfm_tensor_alloc(&w, TFM_F32, h.rank, h.dims) != TFM_OK) {
      tfm_tensor_free(out);
      st = tfm_fail(TFM_ERR_MEMORY, "%s: out of memory for %llu bytes", path,
                    (unsigned long long)(numel * 4));
      goto done;
    }
    for (uint64_t i = 0; i < numel; ++i)
      ((float *)w.data)[i] = tfm_f16_to_f32(((uint16_t *)out->data)[i]);
    tfm_tensor_free(out);
    *out = w;
  }
done:
  free(header);
  fclose(f);
  return st;
}

tfm_status tfm_npy_write(const char *path, const tfm_tensor *t) {
  const char *descr = t->dtype == TFM_F32   ? "<f4"
                      : t->dtype == TFM_I32 ? "<i4"
                      : t->dtype == TFM_I64 ? "<i8"
                                            : NULL;
  if (!descr)
    return tfm_fail(TFM_ERR_ARGUMENT, "%s: cannot write %s as npy", path,
                    tfm_dtype_name(t->dtype));
  char dict[512];
  int n = snprintf(dict, sizeof dict,
                   "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int32_t i = 0; i < t->rank; ++i)
    n += snprintf(dict + n, sizeof dict - n, "%lld%s", (long long)t->shape[i],
                  t->rank == 1 ? "," : (i + 1 < t->rank ? ", " : ""));
  n += snprintf(dict + n, sizeof dict - n, "), }");
  int total = 10 + n + 1;
  int pad = (64 - total % 64) % 64;
  FILE *f = fopen(path, "wb");
  if (!f)
    return tfm_fail(TFM_ERR_IO, "%s: cannot create the file", path);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
  uint16_t hl = (uint16_t)(n + pad + 1);
  pre[8] = hl & 0xff;
  pre[9] = hl >> 8;
  fwrite(pre, 1, 10, f);
  fwrite(dict, 1, (size_t)n, f);
  for (int i = 0; i < pad; ++i)
    fputc(' ', f);
  fputc('\n', f);
  size_t bytes = (size_t)tfm_tensor_numel(t) * tfm_dtype_size(t->dtype);
  size_t w = fwrite(t->data, 1, bytes, f);
  if (fclose(f) != 0 || w != bytes)
    return tfm_fail(TFM_ERR_IO, "%s: write failed", path);
  return TFM_OK;
}
