/*===- tensor.c - errors, allocation, tensors, conversions, threads, time -===*/
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise */
#include "internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static _Thread_local char last_error[TFM_ERROR_SIZE];

const char *tfm_last_error(void) { return last_error; }
void tfm_error_clear(void) { last_error[0] = 0; }

tfm_status tfm_fail(tfm_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

void tfm_error_append(const char *fmt, ...) {
  size_t len = strlen(last_error);
  if (len + 1 >= sizeof last_error)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error + len, sizeof last_error - len, fmt, ap);
  va_end(ap);
}

/* Allocations left before one fails (tfm_fail_allocation_after). */
static _Thread_local long alloc_countdown = -1;

void tfm_fail_allocation_after(long n) { alloc_countdown = n < 0 ? -1 : n; }

static int allocation_fails(void) {
  if (alloc_countdown < 0)
    return 0;
  return alloc_countdown-- == 0;
}

int tfm_allocation_injected_failure(void) { return allocation_fails(); }

void *tfm_malloc(size_t bytes) {
  return allocation_fails() ? NULL : malloc(bytes ? bytes : 1);
}

void *tfm_calloc(size_t count, size_t size) {
  if (allocation_fails())
    return NULL;
  return count && size ? calloc(count, size) : calloc(1, 1);
}

void tfm_advise_huge_pages(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  /* The whole huge pages inside [p, p + bytes); the kernel backs them with
   * 2 MB pages where transparent huge pages are enabled ("madvise" mode
   * included), so that streaming a weight takes a TLB entry per 2 MB, not
   * per 4 KB. Advice only: a failure changes nothing. */
  uintptr_t lo =
      ((uintptr_t)p + TFM_HUGE_PAGE - 1) & ~(uintptr_t)(TFM_HUGE_PAGE - 1);
  uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(TFM_HUGE_PAGE - 1);
  if (p && hi > lo)
    (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

void *tfm_aligned_alloc(size_t bytes) {
  if (bytes > SIZE_MAX - 2 * TFM_HUGE_PAGE || allocation_fails())
    return NULL;
  if (bytes >= 2 * TFM_HUGE_PAGE) {
    /* Large (the weights): on huge-page boundaries, advised to be huge
     * pages before the first write touches them. */
    size_t rounded = (bytes + TFM_ALIGNMENT + TFM_HUGE_PAGE - 1) /
                     TFM_HUGE_PAGE * TFM_HUGE_PAGE;
    void *p = aligned_alloc(TFM_HUGE_PAGE, rounded);
    tfm_advise_huge_pages(p, rounded);
    return p;
  }
  size_t rounded = (bytes + TFM_ALIGNMENT - 1) / TFM_ALIGNMENT * TFM_ALIGNMENT;
  return aligned_alloc(TFM_ALIGNMENT, rounded + TFM_ALIGNMENT);
}

char *tfm_strndup(const char *s, size_t n) {
  size_t len = 0;
  while (len < n && s[len])
    ++len;
  char *d = tfm_malloc(len + 1);
  if (d) {
    memcpy(d, s, len);
    d[len] = 0;
  }
  return d;
}

char *tfm_strdup(const char *s) { return tfm_strndup(s, SIZE_MAX); }

char *tfm_memdup(const char *s, size_t n) {
  char *d = n < SIZE_MAX ? tfm_malloc(n + 1) : NULL;
  if (d) {
    if (n)
      memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

int tfm_runtime_api_version(void) { return TFM_RUNTIME_API_VERSION; }

const char *tfm_status_string(tfm_status s) {
  switch (s) {
  case TFM_OK:
    return "success";
  case TFM_ERR_IO:
    return "a file could not be read or written";
  case TFM_ERR_FORMAT:
    return "a file or the model description is malformed";
  case TFM_ERR_MISMATCH:
    return "weights or inputs do not fit the model";
  case TFM_ERR_ARGUMENT:
    return "a bad argument";
  case TFM_ERR_MEMORY:
    return "out of memory";
  case TFM_ERR_CUDA:
    return "a CUDA driver failure";
  case TFM_ERR_FORWARD:
    return "the compiled forward pass failed";
  }
  return "unknown status";
}

/* The safetensors dtypes the runtime does not compute with, and their
 * element sizes: such tensors (buffers such as GPT-NeoX's BOOL attention
 * mask) are read and size-checked, and only an error where a parameter
 * reads one. */
static const struct {
  const char *name;
  size_t size;
} kOpaqueDtypes[] = {{"BOOL", 1},    {"U8", 1},     {"I8", 1},  {"I16", 2},
                     {"U16", 2},     {"U32", 4},    {"U64", 8}, {"F64", 8},
                     {"F8_E4M3", 1}, {"F8_E5M2", 1}};
#define NUM_OPAQUE (sizeof kOpaqueDtypes / sizeof *kOpaqueDtypes)

int32_t tfm_opaque_dtype(const char *name) {
  for (size_t i = 0; i < NUM_OPAQUE; ++i)
    if (!strcmp(name, kOpaqueDtypes[i].name))
      return TFM_DTYPE_OPAQUE_BASE + (int32_t)i;
  return -1;
}

const char *tfm_dtype_name(int32_t d) {
  switch (d) {
  case TFM_F32:
    return "float32";
  case TFM_F16:
    return "float16";
  case TFM_BF16:
    return "bfloat16";
  case TFM_I32:
    return "int32";
  case TFM_I64:
    return "int64";
  }
  if (d >= TFM_DTYPE_OPAQUE_BASE && d < TFM_DTYPE_OPAQUE_BASE + (int)NUM_OPAQUE)
    return kOpaqueDtypes[d - TFM_DTYPE_OPAQUE_BASE].name;
  return "unknown";
}

size_t tfm_dtype_size(int32_t d) {
  switch (d) {
  case TFM_F32:
  case TFM_I32:
    return 4;
  case TFM_F16:
  case TFM_BF16:
    return 2;
  case TFM_I64:
    return 8;
  }
  if (d >= TFM_DTYPE_OPAQUE_BASE && d < TFM_DTYPE_OPAQUE_BASE + (int)NUM_OPAQUE)
    return kOpaqueDtypes[d - TFM_DTYPE_OPAQUE_BASE].size;
  return 0;
}

int64_t tfm_tensor_numel(const tfm_tensor *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; ++i)
    n *= t->shape[i];
  return n;
}

/* Tensor data comes from the pool (pool.c), so that outputs freed and
 * allocated again for every forward pass keep their pages. Below the data,
 * TFM_ALIGNMENT-aligned and with one more alignment unit past its end (as
 * tfm_aligned_alloc), what tfm_tensor_free gives back to the pool. */
typedef struct {
  void *raw;
  size_t capacity;
} tensor_block;

static void *tensor_data_alloc(size_t bytes) {
  if (bytes > SIZE_MAX - 4 * TFM_ALIGNMENT)
    return NULL;
  size_t rounded = (bytes + TFM_ALIGNMENT - 1) / TFM_ALIGNMENT * TFM_ALIGNMENT;
  size_t capacity;
  char *raw = tfm_pool_alloc(rounded + 3 * TFM_ALIGNMENT, &capacity);
  if (!raw)
    return NULL;
  uintptr_t at = ((uintptr_t)raw + sizeof(tensor_block) + TFM_ALIGNMENT - 1) &
                 ~(uintptr_t)(TFM_ALIGNMENT - 1);
  tensor_block *b = (tensor_block *)at - 1;
  b->raw = raw;
  b->capacity = capacity;
  return (void *)at;
}

tfm_status tfm_tensor_alloc(tfm_tensor *t, tfm_dtype dtype, int32_t rank,
                            const int64_t *shape) {
  memset(t, 0, sizeof *t);
  if (rank < 0 || rank > TFM_MAX_RANK)
    return tfm_fail(TFM_ERR_ARGUMENT, "tensor rank %d is not supported", rank);
  t->dtype = dtype;
  t->rank = rank;
  int64_t n = 1;
  for (int32_t i = 0; i < rank; ++i) {
    if (shape[i] < 0)
      return tfm_fail(TFM_ERR_ARGUMENT, "negative tensor dimension");
    t->shape[i] = shape[i];
    if (shape[i] && n > INT64_MAX / shape[i])
      return tfm_fail(TFM_ERR_MEMORY, "tensor too large");
    n *= shape[i];
  }
  size_t bytes = (size_t)n * tfm_dtype_size(dtype);
  t->data = tensor_data_alloc(bytes);
  if (!t->data)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory allocating %zu bytes",
                    bytes);
  return TFM_OK;
}

void tfm_tensor_free(tfm_tensor *t) {
  if (t->data) {
    tensor_block *b = (tensor_block *)t->data - 1;
    tfm_pool_free(b->raw, b->capacity);
  }
  t->data = NULL;
}

/* Bit operations only (no ldexpf): a CUDA f16 model converts its whole
 * output through here, 6.4M values for GPT-2's logits at T = 128. */
float tfm_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ff, bits;
  float f;
  if (exp == 0) {
    f = (float)mant * 0x1p-24f; /* zero or subnormal: exact */
    memcpy(&bits, &f, 4);
  } else if (exp == 31) {
    bits = 0x7f800000u | mant << 13; /* infinity, or NaN with its payload */
  } else {
    bits = (exp + 112) << 23 | mant << 13; /* rebiased from 15 to 127 */
  }
  bits |= sign;
  memcpy(&f, &bits, 4);
  return f;
}

float tfm_f8e4m3_to_f32(uint8_t b) {
  uint32_t exp = (b >> 3) & 0xf, mant = b & 0x7, bits;
  float f;
  if (exp == 0xf && mant == 0x7) {
    f = NAN;
  } else if (exp == 0) {
    f = (float)mant * 0x1p-9f; /* (m / 8) 2^-6, exact */
  } else {
    /* (1 + m / 8) 2^(e - 7): the exponent rebiased to f32's 127. */
    bits = (exp + 120) << 23 | mant << 20;
    memcpy(&f, &bits, 4);
  }
  return b & 0x80 ? -f : f;
}

float tfm_f8e5m2_to_f32(uint8_t b) {
  return tfm_f16_to_f32((uint16_t)(b << 8));
}

float tfm_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t tfm_f32_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) /* NaN stays NaN */
    return (uint16_t)((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1); /* round to nearest even */
  return (uint16_t)(bits >> 16);
}

uint16_t tfm_f32_to_f16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u)
    return sign | 0x7e00u; /* NaN */
  if (abs >= 0x477ff000u)  /* rounds to >= 65520: infinity */
    return sign | 0x7c00u;
  float a;
  memcpy(&a, &abs, 4);
  if (abs < 0x38800000u) { /* below 2^-14: subnormal, units of 2^-24 */
    float q = nearbyintf(ldexpf(a, 24));
    return sign | (uint16_t)q;
  }
  /* Normal: round the 23-bit mantissa to 10 bits, nearest even. */
  uint32_t m = abs + 0xfffu + ((abs >> 13) & 1);
  return sign | (uint16_t)((m >> 13) - ((127 - 15) << 10));
}

void tfm_shape_str(int32_t rank, const int64_t *shape, char *buf, size_t n) {
  size_t at = 0;
  at += snprintf(buf + at, n - at, "[");
  for (int32_t i = 0; i < rank && at < n; ++i)
    at += snprintf(buf + at, n - at, "%s%lld", i ? ", " : "",
                   (long long)shape[i]);
  if (at < n)
    snprintf(buf + at, n - at, "]");
}

const char *tfm_clip(const char *s, char buf[TFM_CLIP_SIZE]) {
  size_t keep = TFM_CLIP_SIZE - 4; /* "..." and the terminator */
  size_t n = 0;
  while (n < TFM_CLIP_SIZE && s[n])
    ++n;
  if (n < TFM_CLIP_SIZE)
    return s;
  /* Do not cut a UTF-8 character: back up over continuation bytes. */
  while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80)
    --keep;
  memcpy(buf, s, keep);
  memcpy(buf + keep, "...", 4);
  return buf;
}

extern void omp_set_num_threads(int);
extern int omp_get_max_threads(void);

void tfm_set_threads(int n) {
  if (n > 0)
    omp_set_num_threads(n);
}
int tfm_get_threads(void) { return omp_get_max_threads(); }

/* Rows of A from which the generated GEMMs on ggml blocks go through f32
 * panels of the weight (quantizing A to bytes below): a prompt's many rows.
 * A decode step raises it past any batch on its thread (session.c), so
 * that each sequence's row is computed as it is alone. */
static _Thread_local int64_t panel_rows = 32;

int64_t tfm_ggml_panel_rows(void) { return panel_rows; }

int64_t tfm_set_ggml_panel_rows(int64_t rows) {
  int64_t old = panel_rows;
  panel_rows = rows;
  return old;
}

double tfm_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
