/*===- weights_ggml.h - weights in ggml's block-quantized rows ---*- C -*-===*/
#ifndef TFM_RUNTIME_WEIGHTS_GGML_H
#define TFM_RUNTIME_WEIGHTS_GGML_H

#include "internal.h"

/* Row r of a TFM_SOURCE_ROWS source's stored tensor: its row map
 * (weights.c). */
int64_t tfm_source_row(const tfm_source *s, int64_t r);

/* The rows of matrix parameter `p` as its bound tensor `view` stores them,
 * when that is a GGUF tensor of a type the kernel computes and the source
 * picks whole rows (as stored, or through a row map): a new buffer of the
 * rows' bytes, `*type` its ggml type. NULL (nothing set) otherwise. */
void *tfm_ggml_rows_as_stored(const tfm_param_desc *p, const tfm_tensor *view,
                              int32_t *type);

/* The rows of matrix parameter `p` where its bound tensor `view` lies,
 * when that is a GGUF tensor of a type the kernel computes, read as it is
 * stored (`*type` its ggml type): valid while the checkpoint is open. NULL
 * (nothing set) otherwise. */
const void *tfm_ggml_rows_in_place(const tfm_param_desc *p,
                                   const tfm_tensor *view, int32_t *type);

/* The ggml type that rows of `k` values are stored in for the
 * description's "ggml_quantize" type `quantize` (-1: none): `quantize`
 * where `k` is whole blocks of it; else for a K-quant (Q4_K, Q5_K, Q6_K:
 * super-blocks of 256) Q8_0 where `k` is whole blocks of 32, as llama.cpp
 * falls back from Q6_K; else F32. */
int32_t tfm_ggml_quantize_type(int32_t quantize, int64_t k);

/* The rows of `values` (f32 [n, k], which this takes) in the ggml type
 * tfm_ggml_quantize_type(quantize, k) (F32: the values themselves);
 * `*type` says which. NULL if out of memory. */
void *tfm_ggml_rows_of(float *values, int64_t n, int64_t k, int32_t quantize,
                       int32_t *type);

/* The buffer of a weight's type entry: the ggml type (an i32). */
void *tfm_ggml_type_buffer(int32_t type);

#endif /* TFM_RUNTIME_WEIGHTS_GGML_H */
