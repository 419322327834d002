/*===- weights_ggml.c - weights in ggml's block-quantized rows ------------===*
 *
 * A linear weight [N, K] that the compiled model reads in ggml's blocks
 * (tfm-model-abi{ggml-blocks}: tfmc --quantize=q8_0 / q4_0 / q4_k / q5_k /
 * q6_k, or a GGUF checkpoint's layout) takes two entries of the parameter
 * table: its rows,
 * then their ggml type (runtime/include/tfm/ggml_blocks.h). A GGUF tensor
 * of a type the kernel computes keeps its blocks, bytes as stored (whole or
 * the rows a source's row map picks); anything else is converted to f32 by
 * weights.c and then stored as the description's "ggml_quantize" type asks
 * (ggml's own Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K reference quantizers,
 * llama.cpp's bytes; the K-quants' least-squares fits take ~0.1 us a
 * value, so the rows are split over the runtime's threads), or as F32
 * rows.
 *===----------------------------------------------------------------------===*/
#include "weights_ggml.h"
#include "checkpoint.h"
#include "ggml_quants.h"
#include "tfm/ggml_blocks.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The ggml type of `view` when it is a GGUF tensor of a type the kernels
 * compute, holding matrix `p`'s rows of K values whole (as stored or
 * through a row map: `row_map`); -1 otherwise. */
static int32_t computed_type(const tfm_param_desc *p, const tfm_tensor *view,
                             int row_map) {
  const tfm_source *s = &p->source;
  int rows = row_map && s->transform == TFM_SOURCE_ROWS;
  if (!view || !tfm_is_ggml_dtype(view->dtype) || p->rank != 2 ||
      view->rank != 2 || s->experts > 0 ||
      (s->transform != TFM_SOURCE_CANONICAL &&
       s->transform != TFM_SOURCE_COPY && !rows) ||
      view->shape[1] != p->shape[1] || (!rows && view->shape[0] != p->shape[0]))
    return -1;
  int32_t t = view->dtype - TFM_GGML_DTYPE_BASE;
  return tfm_ggml_blocks_row_bytes(t, p->shape[1]) ? t : -1;
}

void *tfm_ggml_rows_as_stored(const tfm_param_desc *p, const tfm_tensor *view,
                              int32_t *type) {
  int32_t t = computed_type(p, view, 1);
  if (t < 0)
    return NULL;
  const tfm_source *s = &p->source;
  int64_t n = p->shape[0];
  int64_t row_bytes = tfm_ggml_blocks_row_bytes(t, p->shape[1]);
  uint8_t *rows = tfm_aligned_alloc((size_t)(n * row_bytes));
  if (!rows)
    return NULL;
  const uint8_t *data = view->data;
  for (int64_t r = 0; r < n; ++r) {
    int64_t from = s->transform == TFM_SOURCE_ROWS ? tfm_source_row(s, r) : r;
    if (from < 0 || from >= view->shape[0]) {
      free(rows);
      return NULL;
    }
    memcpy(rows + r * row_bytes, data + from * row_bytes, (size_t)row_bytes);
  }
  *type = t;
  return rows;
}

const void *tfm_ggml_rows_in_place(const tfm_param_desc *p,
                                   const tfm_tensor *view, int32_t *type) {
  int32_t t = computed_type(p, view, 0);
  if (t < 0)
    return NULL;
  *type = t;
  return view->data;
}

int32_t tfm_ggml_quantize_type(int32_t quantize, int64_t k) {
  if (quantize < 0)
    return TFM_GGML_BLOCKS_F32;
  if (tfm_ggml_blocks_row_bytes(quantize, k))
    return quantize;
  /* A K-quant on rows that are not whole super-blocks of 256 falls back
   * as llama.cpp's quantizer does for Q6_K: to Q8_0 (its fallbacks of Q4_K
   * and Q5_K, Q5_0 and Q5_1, are not types the kernels compute; Q8_0 is
   * the closer of those they do). */
  if ((quantize == TFM_GGML_BLOCKS_Q4_K || quantize == TFM_GGML_BLOCKS_Q5_K ||
       quantize == TFM_GGML_BLOCKS_Q6_K) &&
      tfm_ggml_blocks_row_bytes(TFM_GGML_BLOCKS_Q8_0, k))
    return TFM_GGML_BLOCKS_Q8_0;
  return TFM_GGML_BLOCKS_F32;
}

/* Rows [begin, end) of a matrix quantized by one thread. */
typedef struct {
  void (*quantize_row)(const float *, void *, int64_t);
  const float *values;
  uint8_t *rows;
  int64_t k, row_bytes, begin, end;
} quantize_task;

static void *quantize_rows(void *arg) {
  const quantize_task *t = arg;
  for (int64_t r = t->begin; r < t->end; ++r)
    t->quantize_row(t->values + r * t->k, t->rows + r * t->row_bytes, t->k);
  return NULL;
}

/* The rows split into equal ranges over up to tfm_get_threads() threads
 * (one where they are few: at least 256 K of values each); a thread that
 * cannot be started leaves its range to the caller. Every row is
 * quantized alone, so the bytes do not depend on the split. */
#define QUANTIZE_MAX_THREADS 256
static void quantize_parallel(quantize_task whole, int64_t n) {
  int64_t threads = tfm_get_threads(), per_thread = 1 << 18;
  if (threads > n * whole.k / per_thread)
    threads = n * whole.k / per_thread;
  if (threads > QUANTIZE_MAX_THREADS)
    threads = QUANTIZE_MAX_THREADS;
  if (threads < 2) {
    whole.begin = 0;
    whole.end = n;
    quantize_rows(&whole);
    return;
  }
  quantize_task tasks[QUANTIZE_MAX_THREADS];
  pthread_t ids[QUANTIZE_MAX_THREADS];
  int started[QUANTIZE_MAX_THREADS] = {0};
  for (int64_t i = 0; i < threads; ++i) {
    tasks[i] = whole;
    tasks[i].begin = n * i / threads;
    tasks[i].end = n * (i + 1) / threads;
    if (i > 0)
      started[i] = pthread_create(&ids[i], NULL, quantize_rows, &tasks[i]) == 0;
  }
  for (int64_t i = 0; i < threads; ++i)
    if (!started[i])
      quantize_rows(&tasks[i]);
  for (int64_t i = 1; i < threads; ++i)
    if (started[i])
      pthread_join(ids[i], NULL);
}

void *tfm_ggml_rows_of(float *values, int64_t n, int64_t k, int32_t quantize,
                       int32_t *type) {
  if (!values)
    return NULL;
  int32_t t = tfm_ggml_quantize_type(quantize, k);
  if (t == TFM_GGML_BLOCKS_F32) {
    /* F32 rows: the values as they are. */
    *type = TFM_GGML_BLOCKS_F32;
    return values;
  }
  void (*quantize_row)(const float *, void *, int64_t) =
      t == TFM_GGML_BLOCKS_Q8_0   ? tfm_ggml_quantize_row_q8_0
      : t == TFM_GGML_BLOCKS_Q4_0 ? tfm_ggml_quantize_row_q4_0
      : t == TFM_GGML_BLOCKS_Q4_K ? tfm_ggml_quantize_row_q4_K
      : t == TFM_GGML_BLOCKS_Q5_K ? tfm_ggml_quantize_row_q5_K
                                  : tfm_ggml_quantize_row_q6_K;
  int64_t row_bytes = tfm_ggml_blocks_row_bytes(t, k);
  uint8_t *rows = tfm_aligned_alloc((size_t)(n * row_bytes));
  if (rows)
    quantize_parallel(
        (quantize_task){quantize_row, values, rows, k, row_bytes, 0, n}, n);
  free(values);
  *type = t;
  return rows;
}

void *tfm_ggml_type_buffer(int32_t type) {
  int32_t *t = tfm_aligned_alloc(64);
  if (t)
    *t = type;
  return t;
}
