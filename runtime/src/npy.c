/*===- npy.c - NumPy .npy reader and writer -------------------------------===*
 * Reads versions 1-3 of the format: little-endian int32, int64, float32 and
 * float16, C order. Every malformed header is an error naming the file.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Longest header read, in bytes. */
#define NPY_MAX_HEADER (1u << 20)

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && isspace((unsigned char)*p))
    ++p;
  return p;
}

/* Finds 'key': in the header dict and returns a pointer to its value. */
static const char *find_key(const char *h, const char *end, const char *key) {
  size_t kl = strlen(key);
  for (const char *p = h; p + kl + 2 < end; ++p)
    if ((*p == '\'' || *p == '"') && !strncmp(p + 1, key, kl) &&
        p[kl + 1] == *p) {
      const char *q = skip_ws(p + kl + 2, end);
      if (q < end && *q == ':')
        return skip_ws(q + 1, end);
    }
  return NULL;
}

tfm_status tfm_npy_read(const char *path, tfm_tensor *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f)
    return tfm_fail(TFM_ERR_IO, "%s: cannot open the file", path);
  unsigned char magic[10];
  tfm_status st = TFM_OK;
  char *header = NULL;
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6)) {
    st = tfm_fail(TFM_ERR_FORMAT, "%s: not an npy file (bad magic)", path);
    goto done;
  }
  uint32_t hlen;
  if (magic[6] == 1) {
    unsigned char b[2];
    if (fread(b, 1, 2, f) != 2) {
      st = tfm_fail(TFM_ERR_FORMAT, "%s: truncated npy header", path);
      goto done;
    }
    hlen = b[0] | (b[1] << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    unsigned char b[4];
    if (fread(b, 1, 4, f) != 4) {
      st = tfm_fail(TFM_ERR_FORMAT, "%s: truncated npy header", path);
      goto done;
    }
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | ((uint32_t)b[3] << 24);
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
  const char *end = header + hlen;
  const char *descr = find_key(header, end, "descr");
  const char *order = find_key(header, end, "fortran_order");
  const char *shape = find_key(header, end, "shape");
  if (!descr || !order || !shape) {
    st = tfm_fail(TFM_ERR_FORMAT,
                  "%s: npy header lacks descr, fortran_order or shape", path);
    goto done;
  }
  int32_t dtype;
  if (!strncmp(descr, "'<i4'", 5) || !strncmp(descr, "'|i4'", 5))
    dtype = TFM_I32;
  else if (!strncmp(descr, "'<i8'", 5))
    dtype = TFM_I64;
  else if (!strncmp(descr, "'<f4'", 5))
    dtype = TFM_F32;
  else if (!strncmp(descr, "'<f2'", 5))
    dtype = TFM_F16;
  else {
    const char *q = descr;
    while (q < end && *q != ',')
      ++q;
    st = tfm_fail(TFM_ERR_FORMAT,
                  "%s: unsupported npy dtype %.*s (expected int32, int64, "
                  "float32 or float16, little-endian)",
                  path, (int)(q - descr), descr);
    goto done;
  }
  if (strncmp(order, "False", 5)) {
    st = tfm_fail(TFM_ERR_FORMAT,
                  "%s: Fortran-order npy arrays are not supported", path);
    goto done;
  }
  if (*shape != '(') {
    st = tfm_fail(TFM_ERR_FORMAT, "%s: malformed npy shape", path);
    goto done;
  }
  int64_t dims[TFM_MAX_RANK];
  int32_t rank = 0;
  const char *p = skip_ws(shape + 1, end);
  while (p < end && *p != ')') {
    if (!isdigit((unsigned char)*p)) {
      st = tfm_fail(TFM_ERR_FORMAT, "%s: malformed npy shape", path);
      goto done;
    }
    if (rank == TFM_MAX_RANK) {
      st =
          tfm_fail(TFM_ERR_FORMAT, "%s: npy rank above %d", path, TFM_MAX_RANK);
      goto done;
    }
    char *e;
    long long v = strtoll(p, &e, 10);
    if (v < 0 || v > TFM_MAX_DIM) {
      st = tfm_fail(TFM_ERR_FORMAT, "%s: npy dimension out of range", path);
      goto done;
    }
    dims[rank++] = v;
    p = skip_ws(e, end);
    if (p < end && *p == ',')
      p = skip_ws(p + 1, end);
  }
  if (p >= end) {
    st = tfm_fail(TFM_ERR_FORMAT, "%s: malformed npy shape", path);
    goto done;
  }
  if ((st = tfm_tensor_alloc(out, (tfm_dtype)dtype, rank, dims)) != TFM_OK)
    goto done;
  size_t bytes = (size_t)tfm_tensor_numel(out) * tfm_dtype_size(dtype);
  if (fread(out->data, 1, bytes, f) != bytes) {
    tfm_tensor_free(out);
    st = tfm_fail(TFM_ERR_FORMAT,
                  "%s: npy data is shorter than its shape says (%zu bytes "
                  "expected)",
                  path, bytes);
    goto done;
  }
  if (out->dtype == TFM_F16) { /* widen to float32 */
    tfm_tensor w;
    if ((st = tfm_tensor_alloc(&w, TFM_F32, rank, dims)) != TFM_OK) {
      tfm_tensor_free(out);
      goto done;
    }
    for (int64_t i = 0; i < tfm_tensor_numel(out); ++i)
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
