/*===- weights_ggml.c - weights in ggml's block-quantized rows ------------===*
 *
 * A linear weight [N, K] that the compiled model reads in ggml's blocks
 * (tfm-model-abi{ggml-blocks}: tfmc --quantize=q8_0 / q4_0, or a GGUF
 * checkpoint's layout) takes two entries of the parameter table: its rows,
 * then their ggml type (runtime/include/tfm/ggml_blocks.h). A GGUF tensor
 * of a type the kernel computes keeps its blocks, bytes as stored (whole or
 * the rows a source's row map picks); anything else is converted to f32 by
 * weights.c and then stored as the description's "ggml_quantize" type asks
 * (ggml's own Q8_0 / Q4_0 reference quantizers, llama.cpp's bytes), or as
 * F32 rows.
 *===----------------------------------------------------------------------===*/
#include "checkpoint.h"
#include "ggml_quants.h"
#include "tfm/ggml_blocks.h"

#include <stdlib.h>
#include <string.h>

/* Row r of the parameter in its stored tensor (the source's row map). */
static int64_t stored_row(const tfm_source *s, int64_t r) {
  if (s->transform != TFM_SOURCE_ROWS)
    return r;
  int64_t block = s->block > 0 ? s->block : 1;
  return s->offset + r / block * s->stride + r % block;
}

void *tfm_ggml_rows_as_stored(const tfm_param_desc *p, const tfm_tensor *view,
                              int32_t *type) {
  const tfm_source *s = &p->source;
  if (!view || !tfm_is_ggml_dtype(view->dtype) || p->rank != 2 ||
      view->rank != 2 || s->experts > 0 ||
      (s->transform != TFM_SOURCE_CANONICAL &&
       s->transform != TFM_SOURCE_COPY && s->transform != TFM_SOURCE_ROWS))
    return NULL;
  int32_t t = view->dtype - TFM_GGML_DTYPE_BASE;
  int64_t n = p->shape[0], k = p->shape[1];
  int64_t row_bytes = tfm_ggml_blocks_row_bytes(t, k);
  if (row_bytes == 0 || view->shape[1] != k)
    return NULL;
  if (s->transform != TFM_SOURCE_ROWS && view->shape[0] != n)
    return NULL;
  for (int64_t r = 0; r < n; ++r) {
    int64_t from = stored_row(s, r);
    if (from < 0 || from >= view->shape[0])
      return NULL;
  }
  uint8_t *rows = tfm_aligned_alloc((size_t)(n * row_bytes));
  if (!rows)
    return NULL;
  const uint8_t *data = view->data;
  for (int64_t r = 0; r < n; ++r)
    memcpy(rows + r * row_bytes, data + stored_row(s, r) * row_bytes,
           (size_t)row_bytes);
  *type = t;
  return rows;
}

const void *tfm_ggml_rows_in_place(const tfm_param_desc *p,
                                   const tfm_tensor *view, int32_t *type) {
  const tfm_source *s = &p->source;
  if (!view || !tfm_is_ggml_dtype(view->dtype) || p->rank != 2 ||
      view->rank != 2 || s->experts > 0 ||
      (s->transform != TFM_SOURCE_CANONICAL &&
       s->transform != TFM_SOURCE_COPY) ||
      view->shape[0] != p->shape[0] || view->shape[1] != p->shape[1])
    return NULL;
  int32_t t = view->dtype - TFM_GGML_DTYPE_BASE;
  if (tfm_ggml_blocks_row_bytes(t, p->shape[1]) == 0)
    return NULL;
  *type = t;
  return view->data;
}

void *tfm_ggml_rows_of(float *values, int64_t n, int64_t k, int32_t quantize,
                       int32_t *type) {
  if (!values)
    return NULL;
  int64_t row_bytes = quantize < 0 ? 0 : tfm_ggml_blocks_row_bytes(quantize, k);
  if (row_bytes == 0) {
    /* F32 rows: the values as they are. */
    *type = TFM_GGML_BLOCKS_F32;
    return values;
  }
  uint8_t *rows = tfm_aligned_alloc((size_t)(n * row_bytes));
  if (rows)
    for (int64_t r = 0; r < n; ++r) {
      if (quantize == TFM_GGML_BLOCKS_Q8_0)
        tfm_ggml_quantize_row_q8_0(values + r * k, rows + r * row_bytes, k);
      else
        tfm_ggml_quantize_row_q4_0(values + r * k, rows + r * row_bytes, k);
    }
  free(values);
  *type = quantize;
  return rows;
}

void *tfm_ggml_type_buffer(int32_t type) {
  int32_t *t = tfm_aligned_alloc(64);
  if (t)
    *t = type;
  return t;
}
