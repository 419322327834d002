/*===- ggml_blocks.h - weights in ggml's block-quantized rows ------*- C -*-===*
 *
 * The one description of the linear weights that a compiled model reads in
 * ggml's own layout (GGUF files as llama.cpp writes them, or weights the
 * runtime quantizes with --quantize=q8_0 / q4_0 / q4_k / q5_k / q6_k). The
 * compiler includes it too: tfm-model-abi sizes such a weight's parameter
 * by it, the dialect's verifiers check `tfm.ggml_weight` by it, and the CPU
 * kernel (tfm-lower-kernels, LowerGgmlLinearKernel.cpp) reads these
 * offsets.
 *
 * A weight W [N, K] is N rows of K values, each row a sequence of K / B
 * blocks of B values and `bytes` bytes (ggml's ggml-common.h block_*
 * structs; f16 is IEEE half, all little-endian):
 *
 *   F32   B = 1,   4 bytes   the value.
 *   F16   B = 1,   2 bytes   the value.
 *   BF16  B = 1,   2 bytes   the value's high half.
 *   Q8_0  B = 32,  34 bytes  d (f16), q[32] (i8):  w = d q.
 *   Q4_0  B = 32,  18 bytes  d (f16), qs[16]:  w[j] = d ((qs[j] & 15) - 8),
 *                            w[j + 16] = d ((qs[j] >> 4) - 8), j < 16.
 *   Q4_K  B = 256, 144 bytes d, dmin (f16), scales[12], qs[128]: 8
 *                            sub-blocks of 32 with 6-bit scales sc and mins
 *                            m (ggml's get_scale_min_k4); sub-block s
 * reads the low (s even) or high (s odd) nibbles of qs[32 (s / 2) ..]: w = d sc
 * q - dmin m. Q5_K  B = 256, 176 bytes d, dmin, scales[12], qh[32], qs[128]: as
 * Q4_K with q += 16 bit s of qh[l] for value l of sub-block s. Q6_K  B = 256,
 * 210 bytes ql[128], qh[64], scales[16] (i8), d (f16): in halves h of 128
 * values, quarter t of 32: q = nibble t / 2 of ql[64 h + 32 (t % 2) + l] |
 * ((qh[32 h + l] >> 2 t) & 3) << 4, w = d scales[8 h + 2 t + l / 16] (q - 32).
 *
 * The compiled kernel multiplies rows of these types directly (never
 * expanded to f32 in memory); the runtime converts a tensor of any other
 * ggml type it reads (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K ...) to F32 rows. The
 * type of each weight is chosen when the weights are loaded: the kernel
 * reads it from the weight's type parameter.
 *===----------------------------------------------------------------------===*/
#ifndef TFM_GGML_BLOCKS_H
#define TFM_GGML_BLOCKS_H

#include <stdint.h>

/* ggml.h's enum ggml_type values of the types the kernel computes. */
enum {
  TFM_GGML_BLOCKS_F32 = 0,
  TFM_GGML_BLOCKS_F16 = 1,
  TFM_GGML_BLOCKS_Q4_0 = 2,
  TFM_GGML_BLOCKS_Q8_0 = 8,
  TFM_GGML_BLOCKS_Q4_K = 12,
  TFM_GGML_BLOCKS_Q5_K = 13,
  TFM_GGML_BLOCKS_Q6_K = 14,
  TFM_GGML_BLOCKS_BF16 = 30,
};

/* The types of the list above, in that order. */
#define TFM_GGML_BLOCKS_NUM_TYPES 8
static const int32_t tfm_ggml_blocks_types[TFM_GGML_BLOCKS_NUM_TYPES] = {
    TFM_GGML_BLOCKS_F32,  TFM_GGML_BLOCKS_F16,  TFM_GGML_BLOCKS_Q4_0,
    TFM_GGML_BLOCKS_Q8_0, TFM_GGML_BLOCKS_Q4_K, TFM_GGML_BLOCKS_Q5_K,
    TFM_GGML_BLOCKS_Q6_K, TFM_GGML_BLOCKS_BF16};

/* Values of a block of `type`; 0 if the kernel does not compute it. */
static inline int64_t tfm_ggml_blocks_values(int32_t type) {
  switch (type) {
  case TFM_GGML_BLOCKS_F32:
  case TFM_GGML_BLOCKS_F16:
  case TFM_GGML_BLOCKS_BF16:
    return 1;
  case TFM_GGML_BLOCKS_Q8_0:
  case TFM_GGML_BLOCKS_Q4_0:
    return 32;
  case TFM_GGML_BLOCKS_Q4_K:
  case TFM_GGML_BLOCKS_Q5_K:
  case TFM_GGML_BLOCKS_Q6_K:
    return 256;
  default:
    return 0;
  }
}

/* Bytes of a block of `type`; 0 if the kernel does not compute it. */
static inline int64_t tfm_ggml_blocks_bytes(int32_t type) {
  switch (type) {
  case TFM_GGML_BLOCKS_F32:
    return 4;
  case TFM_GGML_BLOCKS_F16:
  case TFM_GGML_BLOCKS_BF16:
    return 2;
  case TFM_GGML_BLOCKS_Q8_0:
    return 34;
  case TFM_GGML_BLOCKS_Q4_0:
    return 18;
  case TFM_GGML_BLOCKS_Q4_K:
    return 144;
  case TFM_GGML_BLOCKS_Q5_K:
    return 176;
  case TFM_GGML_BLOCKS_Q6_K:
    return 210;
  default:
    return 0;
  }
}

/* Bytes of a row of `k` values of `type`: 0 if the kernel does not compute
 * the type or `k` is not whole blocks of it. */
static inline int64_t tfm_ggml_blocks_row_bytes(int32_t type, int64_t k) {
  int64_t b = tfm_ggml_blocks_values(type);
  if (b == 0 || k <= 0 || k % b != 0)
    return 0;
  return k / b * tfm_ggml_blocks_bytes(type);
}

/* The capacity of a weight [n, k] in the parameter table: its rows in the
 * widest type (F32), whatever type the runtime then stores there. */
static inline int64_t tfm_ggml_blocks_capacity(int64_t n, int64_t k) {
  return n * k * 4;
}

#endif /* TFM_GGML_BLOCKS_H */
