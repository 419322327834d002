/*===- ggml_quants.c - ggml's block types to f32 and back -----------------===*
 *
 * Written from ggml's definitions (ggml/src/ggml-quants.c dequantize_row_*
 * and quantize_row_{q8_0,q4_0,q4_K,q5_K,q6_K}_ref with their helpers
 * nearest_int, make_qkx2_quants and make_qx_quants, the block structs of
 * ggml-common.h) of llama.cpp v0.5.0. Blocks are read at their byte offsets
 * (the structs have no padding; GGUF is little-endian, as is every host the
 * runtime runs on), so a block needs no alignment. Every product is the one
 * ggml computes, in its order and in f32, so that the values are bit for bit
 * ggml's: the unit test compares them with llama.cpp's own dequantization of
 * files its quantizer wrote (test/runtime/Inputs/gguf).
 *===----------------------------------------------------------------------===*/
#include "ggml_quants.h"
#include "gguf.h"
#include "internal.h"

#include <math.h>
#include <string.h>

/* ggml's products are separate roundings (its files are compiled without
 * contraction on the baseline x86-64 target): no fused multiply-adds. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Types outside gguf.h's named list. */
#define GGML_IQ4_NL 20
#define GGML_IQ4_XS 23

/* QK_K: the super-block of the K-quants. */
#define QK_K 256

/* IEEE half to float, exactly (NaN payloads kept), as ggml's
 * ggml_compute_fp16_to_fp32. */
static float half(const uint8_t *p) {
  uint16_t h = (uint16_t)(p[0] | p[1] << 8);
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ffu, bits;
  float f;
  if (exp == 0) {
    f = (float)mant * 0x1p-24f; /* zero or subnormal: exact */
    memcpy(&bits, &f, 4);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 112) << 23 | mant << 13;
  }
  memcpy(&f, &bits, 4);
  return f;
}

static float bfloat(const uint8_t *p) {
  uint32_t bits = (uint32_t)(p[0] | p[1] << 8) << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* get_scale_min_k4: the 6-bit scale and min of sub-block j of a Q4_K or
 * Q5_K super-block from its 12 scale bytes. */
static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

/* kvalues_iq4nl: IQ4_NL's and IQ4_XS's 16 non-linear levels. */
static const int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                  1,    13,   25,  38,  53,  69,  89,  113};

/* Each function converts `nb` blocks at `x` into `y`. */

static void q4_0(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 18, y += 32) {
    const float d = half(x);
    const uint8_t *qs = x + 2;
    for (int j = 0; j < 16; ++j) {
      y[j] = ((qs[j] & 0x0F) - 8) * d;
      y[j + 16] = ((qs[j] >> 4) - 8) * d;
    }
  }
}

static void q4_1(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 20, y += 32) {
    const float d = half(x), m = half(x + 2);
    const uint8_t *qs = x + 4;
    for (int j = 0; j < 16; ++j) {
      y[j] = (qs[j] & 0x0F) * d + m;
      y[j + 16] = (qs[j] >> 4) * d + m;
    }
  }
}

/* Q5_0 and Q5_1: the fifth bits of the 32 values in a little-endian word,
 * bit j for element j. */
static uint32_t load32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static void q5_0(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 22, y += 32) {
    const float d = half(x);
    const uint32_t qh = load32(x + 2);
    const uint8_t *qs = x + 6;
    for (int j = 0; j < 16; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
      y[j] = (((qs[j] & 0x0F) | h0) - 16) * d;
      y[j + 16] = (((qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

static void q5_1(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 24, y += 32) {
    const float d = half(x), m = half(x + 2);
    const uint32_t qh = load32(x + 4);
    const uint8_t *qs = x + 8;
    for (int j = 0; j < 16; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
      y[j] = ((qs[j] & 0x0F) | h0) * d + m;
      y[j + 16] = ((qs[j] >> 4) | h1) * d + m;
    }
  }
}

static void q8_0(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 34, y += 32) {
    const float d = half(x);
    for (int j = 0; j < 32; ++j)
      y[j] = (int8_t)x[2 + j] * d;
  }
}

/* Q2_K (84 bytes): scales[16] (low nibble the scale, high the min of each
 * 16 values), qs[64] (2 bits), d, dmin. */
static void q2_k(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 84) {
    const float d = half(x + 80), min = half(x + 82);
    const uint8_t *q = x + 16, *scales = x;
    int is = 0;
    for (int n = 0; n < QK_K; n += 128, q += 32)
      for (int shift = 0; shift < 8; shift += 2)
        for (int half16 = 0; half16 < 2; ++half16) {
          const uint8_t sc = scales[is++];
          const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
          for (int l = 0; l < 16; ++l)
            *y++ = dl * (int8_t)((q[l + 16 * half16] >> shift) & 3) - ml;
        }
  }
}

/* Q3_K (110 bytes): hmask[32] (the high bits), qs[64] (the low 2 bits),
 * scales[12] (16 6-bit scales, biased by 32), d. */
static void q3_k(const uint8_t *x, float *y, int64_t nb) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  for (int64_t i = 0; i < nb; ++i, x += 110) {
    const float d_all = half(x + 108);
    const uint8_t *q = x + 32, *hm = x;
    uint32_t aux[4];
    memcpy(aux, x + 96, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    int8_t scales[16];
    memcpy(scales, aux, 16);
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < QK_K; n += 128, q += 32)
      for (int shift = 0; shift < 8; shift += 2, m <<= 1)
        for (int half16 = 0; half16 < 2; ++half16) {
          const float dl = d_all * (scales[is++] - 32);
          for (int l = 0; l < 16; ++l) {
            const int at = l + 16 * half16;
            *y++ =
                dl * ((int8_t)((q[at] >> shift) & 3) - ((hm[at] & m) ? 0 : 4));
          }
        }
  }
}

/* Q4_K (144 bytes): d, dmin, scales[12] (8 6-bit scales and mins),
 * qs[128] (4 bits; 32 bytes hold the 64 values of sub-blocks 2i and 2i + 1,
 * low nibbles first): value = d sc q - dmin m. Q5_K (176 bytes, `fifth`)
 * has qh[32] before qs: bit s of qh[l] adds 16 to value l of sub-block s. */
static void q45_k(const uint8_t *x, float *y, int64_t nb, int fifth) {
  for (int64_t i = 0; i < nb; ++i, x += fifth ? 176 : 144) {
    const float d = half(x), min = half(x + 2);
    const uint8_t *scales = x + 4, *qh = x + 16, *q = x + (fifth ? 48 : 16);
    for (int s = 0; s < 8; s += 2, q += 32)
      for (int h = 0; h < 2; ++h) { /* sub-block s + h: nibble h */
        uint8_t sc, m;
        scale_min_k4(s + h, scales, &sc, &m);
        const float dl = d * sc, ml = min * m;
        for (int l = 0; l < 32; ++l) {
          int v = h ? q[l] >> 4 : q[l] & 0xF;
          if (fifth && (qh[l] >> (s + h) & 1))
            v += 16;
          *y++ = dl * v - ml;
        }
      }
  }
}

static void q4_k(const uint8_t *x, float *y, int64_t nb) { q45_k(x, y, nb, 0); }
static void q5_k(const uint8_t *x, float *y, int64_t nb) { q45_k(x, y, nb, 1); }

/* Q6_K (210 bytes): ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16]
 * (int8), d. */
static void q6_k(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 210) {
    const float d = half(x + 208);
    const uint8_t *ql = x, *qh = x + 128;
    const int8_t *sc = (const int8_t *)(x + 192);
    for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int8_t q1 =
            (int8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int8_t q2 =
            (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int8_t q3 =
            (int8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int8_t q4 =
            (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
  }
}

static void iq4_nl(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 18, y += 32) {
    const float d = half(x);
    const uint8_t *qs = x + 2;
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kIq4nl[qs[j] & 0xf];
      y[j + 16] = d * kIq4nl[qs[j] >> 4];
    }
  }
}

/* IQ4_XS (136 bytes): d, scales_h (the high 2 bits of 8 6-bit scales),
 * scales_l[4] (their low nibbles), qs[128]. */
static void iq4_xs(const uint8_t *x, float *y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 136) {
    const float d = half(x);
    const unsigned scales_h = (unsigned)(x[2] | x[3] << 8);
    const uint8_t *scales_l = x + 4, *qs = x + 8;
    for (int ib = 0; ib < QK_K / 32; ++ib, y += 32, qs += 16) {
      const int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                     (((scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * (ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kIq4nl[qs[j] & 0xf];
        y[j + 16] = dl * kIq4nl[qs[j] >> 4];
      }
    }
  }
}

static void f32(const uint8_t *x, float *y, int64_t n) {
  memcpy(y, x, (size_t)n * 4);
}

static void f16(const uint8_t *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = half(x + 2 * i);
}

static void bf16(const uint8_t *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = bfloat(x + 2 * i);
}

typedef void (*dequantize_fn)(const uint8_t *, float *, int64_t);

static dequantize_fn dequantizer(int32_t type) {
  switch (type) {
  case TFM_GGML_F32:
    return f32;
  case TFM_GGML_F16:
    return f16;
  case TFM_GGML_BF16:
    return bf16;
  case TFM_GGML_Q4_0:
    return q4_0;
  case TFM_GGML_Q4_1:
    return q4_1;
  case TFM_GGML_Q5_0:
    return q5_0;
  case TFM_GGML_Q5_1:
    return q5_1;
  case TFM_GGML_Q8_0:
    return q8_0;
  case TFM_GGML_Q2_K:
    return q2_k;
  case TFM_GGML_Q3_K:
    return q3_k;
  case TFM_GGML_Q4_K:
    return q4_k;
  case TFM_GGML_Q5_K:
    return q5_k;
  case TFM_GGML_Q6_K:
    return q6_k;
  case GGML_IQ4_NL:
    return iq4_nl;
  case GGML_IQ4_XS:
    return iq4_xs;
  default:
    return NULL;
  }
}

int tfm_ggml_can_dequantize(int32_t type) { return dequantizer(type) != NULL; }

size_t tfm_ggml_row_bytes(int32_t type, int64_t n) {
  int64_t block, bytes;
  size_t total;
  if (!tfm_ggml_type_info(type, NULL, &block, &bytes) || n < 0 ||
      n % block != 0 ||
      __builtin_mul_overflow((size_t)(n / block), (size_t)bytes, &total))
    return 0;
  return total;
}

tfm_status tfm_ggml_dequantize(int32_t type, const void *src, float *dst,
                               int64_t n) {
  const char *name = "unknown";
  int64_t block = 0;
  dequantize_fn fn = dequantizer(type);
  if (!tfm_ggml_type_info(type, &name, &block, NULL) || !fn)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "ggml type %d (%s) cannot be converted to f32", type, name);
  if (n < 0 || n % block != 0)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "%lld elements of ggml type %s are not whole blocks of "
                    "%lld",
                    (long long)n, name, (long long)block);
  /* The block types take a count of blocks; the others one of elements. */
  fn((const uint8_t *)src, dst, block > 1 ? n / block : n);
  return TFM_OK;
}

static void put_half(uint8_t *p, float f) {
  uint16_t h = tfm_f32_to_f16(f);
  p[0] = (uint8_t)h;
  p[1] = (uint8_t)(h >> 8);
}

void tfm_ggml_quantize_row_q8_0(const float *x, void *dst, int64_t n) {
  uint8_t *y = dst;
  for (int64_t i = 0; i < n / 32; ++i, x += 32, y += 34) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) /* ggml's MAX: a NaN propagates */
      amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_half(y, d);
    for (int j = 0; j < 32; ++j)
      y[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
  }
}

void tfm_ggml_quantize_row_q4_0(const float *x, void *dst, int64_t n) {
  uint8_t *y = dst;
  for (int64_t i = 0; i < n / 32; ++i, x += 32, y += 18) {
    float amax = 0.0f, max = 0.0f; /* the value of largest magnitude */
    for (int j = 0; j < 32; ++j)
      if (amax < fabsf(x[j])) {
        amax = fabsf(x[j]);
        max = x[j];
      }
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_half(y, d);
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[j] * id, x1 = x[16 + j] * id;
      int8_t q0 = (int8_t)(x0 + 8.5f), q1 = (int8_t)(x1 + 8.5f);
      uint8_t u0 = (uint8_t)(q0 < 15 ? q0 : 15),
              u1 = (uint8_t)(q1 < 15 ? q1 : 15);
      y[2 + j] = (uint8_t)(u0 | u1 << 4);
    }
  }
}

/* ggml's nearest_int: round to nearest, ties to even, by adding 1.5 * 2^23
 * and reading the mantissa (|x| < 2^22). */
static int nearest_int(float x) {
  float v = x + 12582912.f;
  int32_t i;
  memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

/* ggml's make_qkx2_quants (squared error): the levels L[32] in [0, nmax],
 * scale and min (returned as `-min`, so >= 0) of a sub-block of 32 values
 * minimizing the weighted squared error: the levels of the range, then
 * nstep + 1 scales around nmax / range fitted by weighted least squares,
 * the best kept. The sums are ggml's, in its order. */
static float make_qkx2(int nmax, const float *x, const float *w, uint8_t *L,
                       float *the_min, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < 32; ++i) {
    if (x[i] < min)
      min = x[i];
    if (x[i] > max)
      max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0)
    min = 0;
  if (max == min) {
    memset(L, 0, 32);
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min), scale = 1 / iscale, best_error = 0;
  for (int i = 0; i < 32; ++i) {
    int l = nearest_int(iscale * (x[i] - min));
    L[i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
    float diff = scale * L[i] + min - x[i];
    best_error += w[i] * (diff * diff);
  }
  uint8_t aux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < 32; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = l < 0 ? 0 : l > nmax ? nmax : l;
      aux[i] = (uint8_t)l;
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < 32; ++i) {
        float diff = this_scale * aux[i] + this_min - x[i];
        error += w[i] * (diff * diff);
      }
      if (error < best_error) {
        memcpy(L, aux, 32);
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

/* quantize_row_q4_K_ref / q5_K_ref (nmax 15 / 31): per super-block, each
 * sub-block of 32 fitted by make_qkx2 with weights rms + |x|, its scale and
 * min then quantized to 6 bits against the largest (d, dmin = largest /
 * 63, as f16) and the values requantized with those. */
static void quantize_q45_k(const float *x, uint8_t *y, int64_t n, int fifth) {
  const int nmax = fifth ? 31 : 15;
  const int64_t bytes = fifth ? 176 : 144;
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K, y += bytes) {
    uint8_t L[QK_K], *scales = y + 4;
    float mins[8], sub[8], w[32], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      const float *xj = x + 32 * j;
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l)
        sum_x2 += xj[l] * xj[l];
      float av_x = sqrtf(sum_x2 / 32);
      for (int l = 0; l < 32; ++l)
        w[l] = av_x + fabsf(xj[l]);
      sub[j] = make_qkx2(nmax, xj, w, L + 32 * j, &mins[j],
                         fifth ? -0.5f : -1.f, 0.1f, fifth ? 15 : 20);
      if (sub[j] > max_scale)
        max_scale = sub[j];
      if (mins[j] > max_min)
        max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales, 0, 12);
    for (int j = 0; j < 8; ++j) {
      uint8_t ls = (uint8_t)nearest_int(inv_scale * sub[j]);
      uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
      ls = ls < 63 ? ls : 63;
      lm = lm < 63 ? lm : 63;
      if (j < 4) {
        scales[j] = ls;
        scales[j + 4] = lm;
      } else {
        scales[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
        scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
        scales[j] |= (uint8_t)((lm >> 4) << 6);
      }
    }
    put_half(y, max_scale / 63.f);
    put_half(y + 2, max_min / 63.f);
    /* The values again, with the scales and mins as stored; a sub-block
     * whose scale is 0 keeps make_qkx2's levels. */
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      scale_min_k4(j, scales, &sc, &m);
      const float d = half(y) * sc;
      if (!d)
        continue;
      const float dm = half(y + 2) * m;
      for (int l = 0; l < 32; ++l) {
        int q = nearest_int((x[32 * j + l] + dm) / d);
        L[32 * j + l] = (uint8_t)(q < 0 ? 0 : q > nmax ? nmax : q);
      }
    }
    /* Values j and j + 32 of each 64 share a byte of qs (low, high
     * nibble); Q5_K's fifth bits go to qh, bit 2 (j / 64) and the next. */
    uint8_t *qh = y + 16, *qs = y + (fifth ? 48 : 16);
    if (fifth)
      memset(qh, 0, 32);
    for (int j = 0; j < QK_K; j += 64, qs += 32)
      for (int l = 0; l < 32; ++l) {
        int lo = L[j + l], hi = L[j + l + 32];
        if (fifth) {
          qh[l] |= (uint8_t)((lo >> 4) << (j / 32) | (hi >> 4) << (j / 32 + 1));
          lo &= 15;
          hi &= 15;
        }
        qs[l] = (uint8_t)(lo | hi << 4);
      }
  }
}

void tfm_ggml_quantize_row_q4_K(const float *x, void *dst, int64_t n) {
  quantize_q45_k(x, dst, n, 0);
}

void tfm_ggml_quantize_row_q5_K(const float *x, void *dst, int64_t n) {
  quantize_q45_k(x, dst, n, 1);
}

/* ggml's make_qx_quants with rmse_type 1 and no importance (weights x^2),
 * for Q6_K's sub-blocks of 16 with nmax 32: the levels L[16] in [0, 64)
 * and the scale; 19 scales around -nmax / max (max: the value of largest
 * magnitude) tried, the best weighted least-squares fit kept. */
static float make_qx(const float *x, int8_t *L) {
  const int nmax = 32;
  float max = 0, amax = 0;
  for (int i = 0; i < 16; ++i)
    if (fabsf(x[i]) > amax) {
      amax = fabsf(x[i]);
      max = x[i];
    }
  if (amax < 1e-15f) { /* GROUP_MAX_EPS: all zero */
    memset(L, 0, 16);
    return 0.f;
  }
  float iscale = -nmax / max, sumlx = 0, suml2 = 0;
  for (int i = 0; i < 16; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
    L[i] = (int8_t)(l + nmax);
    float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0)
      continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < 16; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
      float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < 16; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
        L[i] = (int8_t)(l + nmax);
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void tfm_ggml_quantize_row_q6_K(const float *x, void *dst, int64_t n) {
  uint8_t *y = dst;
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K, y += 210) {
    int8_t L[QK_K], *scales = (int8_t *)(y + 192);
    float sub[16], max_scale = 0, max_abs_scale = 0;
    for (int b = 0; b < 16; ++b) {
      sub[b] = make_qx(x + 16 * b, L + 16 * b);
      if (fabsf(sub[b]) > max_abs_scale) {
        max_abs_scale = fabsf(sub[b]);
        max_scale = sub[b];
      }
    }
    if (max_abs_scale < 1e-15f) { /* GROUP_MAX_EPS: a zero block */
      memset(y, 0, 210);
      continue;
    }
    float iscale = -128.f / max_scale;
    put_half(y + 208, 1 / iscale);
    for (int b = 0; b < 16; ++b) {
      int s = nearest_int(iscale * sub[b]);
      scales[b] = (int8_t)(s < 127 ? s : 127);
    }
    /* The values again with the 8-bit scales as stored; a sub-block whose
     * scale is 0 keeps make_qx's levels. */
    for (int b = 0; b < 16; ++b) {
      const float d = half(y + 208) * scales[b];
      if (!d)
        continue;
      for (int l = 0; l < 16; ++l) {
        int q = nearest_int(x[16 * b + l] / d);
        q = q < -32 ? -32 : q > 31 ? 31 : q;
        L[16 * b + l] = (int8_t)(q + 32);
      }
    }
    /* Per half of 128: values l, l + 32, l + 64, l + 96 give the low
     * nibbles of ql[l] (l, l + 64) and ql[l + 32] (l + 32, l + 96), and
     * their top two bits the four pairs of qh[l]. */
    uint8_t *ql = y, *qh = y + 128;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32)
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = (uint8_t)L[j + l], q2 = (uint8_t)L[j + l + 32],
                      q3 = (uint8_t)L[j + l + 64], q4 = (uint8_t)L[j + l + 96];
        ql[l] = (uint8_t)((q1 & 0xF) | (q3 & 0xF) << 4);
        ql[l + 32] = (uint8_t)((q2 & 0xF) | (q4 & 0xF) << 4);
        qh[l] = (uint8_t)(q1 >> 4 | (q2 >> 4) << 2 | (q3 >> 4) << 4 |
                          (q4 >> 4) << 6);
      }
  }
}
