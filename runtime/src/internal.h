/*===- internal.h - runtime internals -----------------------------*- C -*-===*/
#ifndef TFM_RUNTIME_INTERNAL_H
#define TFM_RUNTIME_INTERNAL_H

#include "tfm/runtime.h"

/* Records a formatted message as this thread's last error; returns status. */
tfm_status tfm_fail(tfm_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends to the last error (for lists of problems). */
void tfm_error_append(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void tfm_error_clear(void);

/* The view of tensor `name` in `st`, or NULL; sets no error. */
const tfm_tensor *tfm_safetensors_find(const tfm_safetensors *st,
                                       const char *name);

float tfm_f16_to_f32(uint16_t h);
float tfm_bf16_to_f32(uint16_t h);
/* Round to nearest even; overflow gives infinity. */
uint16_t tfm_f32_to_f16(float f);
uint16_t tfm_f32_to_bf16(float f);

/* Device memory for CUDA artifacts (synchronous; errors as tfm_cuda_status). */
tfm_status tfm_cuda_alloc(void **dev, size_t bytes);
/* Either direction: the driver tells host from device addresses. */
tfm_status tfm_cuda_copy(void *dst, const void *src, size_t bytes);
void tfm_cuda_free(void *dev);
void tfm_shape_str(int32_t rank, const int64_t *shape, char *buf, size_t n);

#endif
