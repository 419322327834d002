/*===- ggml_quants.h - ggml's block types to f32 and back ---------*- C -*-===*
 *
 * The tensor types of GGUF files (ggml.h's enum ggml_type, named in gguf.h)
 * converted to f32 row by row exactly as ggml's dequantize_row_* define
 * them (ggml/src/ggml-quants.c, block layouts of ggml-common.h), and the
 * reference quantizers of Q8_0, Q4_0, Q4_K, Q5_K and Q6_K
 * (quantize_row_*_ref: the same bits as llama.cpp's quantizer writes
 * without an importance matrix).
 *===----------------------------------------------------------------------===*/
#ifndef TFM_RUNTIME_GGML_QUANTS_H
#define TFM_RUNTIME_GGML_QUANTS_H

#include "tfm/runtime.h"

#include <stddef.h>
#include <stdint.h>

/* Whether tfm_ggml_dequantize converts `type`: F32, F16, BF16, Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS. */
int tfm_ggml_can_dequantize(int32_t type);

/* The bytes of `n` elements of `type` (n a multiple of its block); 0 for a
 * type that gguf.h's tfm_ggml_type_info does not know or an `n` that is not
 * a whole number of blocks, or whose bytes do not fit a size_t. */
size_t tfm_ggml_row_bytes(int32_t type, int64_t n);

/* `n` elements of `type` at `src` (n a multiple of its block; blocks need
 * no alignment) as f32 in `dst`. TFM_ERR_ARGUMENT (the error set) for a
 * type tfm_ggml_can_dequantize refuses or a partial block. */
tfm_status tfm_ggml_dequantize(int32_t type, const void *src, float *dst,
                               int64_t n);

/* quantize_row_q8_0_ref: `n` floats (a multiple of 32) as n / 32 Q8_0
 * blocks of 34 bytes at `dst`: per block d = max|x| / 127 (as f16), q =
 * round(x / d) (half away from zero). */
void tfm_ggml_quantize_row_q8_0(const float *src, void *dst, int64_t n);
/* quantize_row_q4_0_ref: `n` floats (a multiple of 32) as n / 32 Q4_0
 * blocks of 18 bytes: d = the block's value of largest magnitude / -8 (as
 * f16), q = min(15, (int8)(x / d + 8.5)), element j and j + 16 in byte j. */
void tfm_ggml_quantize_row_q4_0(const float *src, void *dst, int64_t n);
/* quantize_row_q4_K_ref: `n` floats (a multiple of 256) as n / 256 Q4_K
 * super-blocks of 144 bytes: each sub-block of 32 fitted with a scale and a
 * min (make_qkx2_quants, weights rms + |x|, levels 0..15), those quantized
 * to 6 bits against d and dmin (the largest / 63, as f16), the values
 * requantized with the stored scales. */
void tfm_ggml_quantize_row_q4_K(const float *src, void *dst, int64_t n);
/* quantize_row_q5_K_ref: as Q4_K with levels 0..31 (fifth bits in qh),
 * super-blocks of 176 bytes. */
void tfm_ggml_quantize_row_q5_K(const float *src, void *dst, int64_t n);
/* quantize_row_q6_K_ref: `n` floats (a multiple of 256) as n / 256 Q6_K
 * super-blocks of 210 bytes: each sub-block of 16 fitted by
 * make_qx_quants (levels -32..31, weights x^2), its scale quantized to 8
 * bits against d (the largest / -128, as f16), the values requantized. */
void tfm_ggml_quantize_row_q6_K(const float *src, void *dst, int64_t n);

#endif /* TFM_RUNTIME_GGML_QUANTS_H */
