/*===- ggml_quants.c - ggml's block types to f32 and back -----------------===*
 *
 * Written from ggml's definitions (ggml/src/ggml-quants.c dequantize_row_*
 * and quantize_row_{q8_0,q4_0}_ref, the block structs of ggml-common.h) of
 * llama.cpp v0.5.0. Blocks are read at their byte offsets (the structs have
 * no padding; GGUF is little-endian, as is every host the runtime runs on),
 * so a block needs no alignment. Every product is the one ggml computes, in
 * its order and in f32, so that the values are bit for bit ggml's: the unit
 * test compares them with llama.cpp's own dequantization of files its
 * quantizer wrote (test/runtime/Inputs/gguf).
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
  if (!tfm_ggml_type_info(type, NULL, &block, &bytes) || n < 0 ||
      n % block != 0)
    return 0;
  return (size_t)(n / block * bytes);
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
