/*===- weights.c - a model's weights: loaded, checked, packed, synthesized ===*
 *
 * The tensors of the checkpoint's files (checkpoint.c) are bound to the
 * description's parameter table, by canonical name or through each
 * parameter's Hugging Face source, and checked as a whole before anything
 * is converted: every missing, unexpected or mis-shaped tensor is reported.
 * Each entry of the ABI parameter list then gets an f32 host copy, in one
 * pass that converts the dtype (dequantizing MXFP4 and block-scaled FP8),
 * applies the source's transpose or row map, and packs panels where the
 * entry says so, in the layout that tfm/packed_layout.h describes.
 *===----------------------------------------------------------------------===*/
#define _DEFAULT_SOURCE
#include "checkpoint.h"
#include "ggml_quants.h"
#include "tfm/packed_layout.h"
#include "weights_ggml.h"
#include <math.h>

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

tfm_status tfm_weights_init(tfm_weights *w, size_t count) {
  memset(w, 0, sizeof *w);
  w->host = tfm_calloc(count, sizeof *w->host);
  w->dev = tfm_calloc(count, sizeof *w->dev);
  w->table = tfm_calloc(count, sizeof *w->table);
  if (!w->host || !w->dev || !w->table) {
    tfm_weights_destroy(w);
    return tfm_fail(TFM_ERR_MEMORY, "out of memory for the weight table");
  }
  w->count = count;
  return TFM_OK;
}

void tfm_weights_clear(tfm_weights *w) {
  for (size_t i = 0; i < w->count; ++i) {
    free(w->host[i]);
    w->host[i] = NULL;
    tfm_cuda_free(w->dev[i]);
    w->dev[i] = NULL;
    w->table[i] = NULL;
  }
  if (w->mapped) {
    tfm_checkpoint_close(w->mapped);
    free(w->mapped);
    w->mapped = NULL;
  }
  free(w->read_dev);
  free(w->read_ino);
  w->read_dev = w->read_ino = NULL;
  w->num_read = 0;
}

void tfm_weights_destroy(tfm_weights *w) {
  tfm_weights_clear(w);
  free(w->host);
  free(w->dev);
  free(w->table);
  memset(w, 0, sizeof *w);
}

static int64_t param_numel(const tfm_param_desc *p) {
  int64_t n = 1;
  for (int32_t i = 0; i < p->rank; ++i)
    n *= p->shape[i];
  return n;
}

/* How ABI entry `a` packs its panels. */
static tfm_packing packing_of(const tfm_abi_desc *a) {
  return a->int8_quads   ? TFM_PACKING_INT8_QUADS
         : a->bf16_pairs ? TFM_PACKING_BF16_PAIRS
                         : TFM_PACKING_F32;
}

/* A packed parameter is a weight [N, K] or a stack of E of them
 * [E, N, K] (a mixture of experts), packed weight after weight. */
typedef struct packed_shape {
  int64_t stacks, n, k;
} packed_shape;

static packed_shape packed_shape_of(const tfm_param_desc *p) {
  packed_shape s = {1, 0, 0};
  if (p->rank == 3)
    s.stacks = p->shape[0];
  if (p->rank >= 2) {
    s.n = p->shape[p->rank - 2];
    s.k = p->shape[p->rank - 1];
  }
  return s;
}

int64_t tfm_weights_numel(const tfm_description *d, size_t i) {
  const tfm_param_desc *p = &d->params[d->abi[i].index];
  int32_t panel = d->abi[i].panel;
  if (panel > 0 && (p->rank == 2 || p->rank == 3)) {
    packed_shape s = packed_shape_of(p);
    return s.stacks * tfm_packed_numel(packing_of(&d->abi[i]), s.n, s.k, panel);
  }
  return param_numel(p);
}

/* A tensor stored in MXFP4, as a source's "mxfp4" allows: the U8 blocks
 * [E, N, G, 16] (two e2m1 values a byte, the low nibble first) and scales
 * [E, N, G] (an e8m0 exponent per block of 32 values) of transformers'
 * Mxfp4 quantizer, seen as the tensor [E, 32 G, N] that transformers'
 * convert_moe_packed_tensors makes of them (blocks dequantized along their
 * last axes, then axes 1 and 2 swapped). `view` comes first: a pointer to
 * it is one to the whole. Its dtype is TFM_MXFP4; it owns no data. */
typedef struct mxfp4_tensor {
  tfm_tensor view;
  const tfm_tensor *blocks, *scales;
} mxfp4_tensor;

#define TFM_MXFP4 (TFM_DTYPE_OPAQUE_BASE - 1)

/* e2m1: sign, two exponent bits, one mantissa bit (FP4_VALUES of
 * transformers' integrations/mxfp4.py). */
static const float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,
                                4.0f,  6.0f,  -0.0f, -0.5f, -1.0f, -1.5f,
                                -2.0f, -3.0f, -4.0f, -6.0f};

/* Element i of the dequantized [E, K, N] view: (e, k, n) is value k % 32 of
 * block k / 32 of row (e, n), times 2^(scale - 127). */
static float mxfp4_element(const mxfp4_tensor *m, int64_t i) {
  int64_t k_all = m->view.shape[1], n_all = m->view.shape[2];
  int64_t n = i % n_all, k = i / n_all % k_all, e = i / n_all / k_all;
  int64_t block = (e * n_all + n) * (k_all / 32) + k / 32;
  uint8_t byte = ((const uint8_t *)m->blocks->data)[block * 16 + k % 32 / 2];
  int scale = ((const uint8_t *)m->scales->data)[block];
  return ldexpf(kE2M1[k % 2 ? byte >> 4 : byte & 15], scale - 127);
}

/* A tensor stored in FP8 with block scales, as a source's "fp8_block"
 * allows: the F8_E4M3 (or F8_E5M2) `values` [N, K] or [E, N, K] and the
 * `scales` [ceil(N / rows), ceil(K / cols)] (or [E, ...]) beside them, seen
 * as the tensor of the values' shape whose element (e, n, k) is
 * fp8(values[e, n, k]) * scales[e, n / rows, k / cols], an f32 product as
 * DeepSeek-V3's weight_dequant computes it. `view` comes first: a pointer
 * to it is one to the whole. Its dtype is TFM_FP8_BLOCKS; it owns no data. */
typedef struct fp8_tensor {
  tfm_tensor view;
  const tfm_tensor *values, *scales;
  int64_t rows, cols;             /* of a block */
  int64_t row_blocks, col_blocks; /* of each matrix */
  int e5m2;
} fp8_tensor;

#define TFM_FP8_BLOCKS (TFM_DTYPE_OPAQUE_BASE - 2)

/* The element at flat index `i` of `t` (F32, F16 or BF16) as f32. */
static float float_element(const tfm_tensor *t, int64_t i) {
  float v;
  if (t->dtype == TFM_F32) {
    memcpy(&v, (const char *)t->data + 4 * i, 4);
    return v;
  }
  uint16_t h;
  memcpy(&h, (const char *)t->data + 2 * i, 2);
  return t->dtype == TFM_F16 ? tfm_f16_to_f32(h) : tfm_bf16_to_f32(h);
}

/* Element i of the dequantized view: (e, n, k) of the values times the
 * scale of block (e, n / rows, k / cols). */
static float fp8_element(const fp8_tensor *m, int64_t i) {
  int32_t r = m->view.rank;
  int64_t k_all = m->view.shape[r - 1], n_all = m->view.shape[r - 2];
  int64_t k = i % k_all, n = i / k_all % n_all, e = i / k_all / n_all;
  float scale = float_element(
      m->scales,
      (e * m->row_blocks + n / m->rows) * m->col_blocks + k / m->cols);
  uint8_t q = ((const uint8_t *)m->values->data)[i];
  return (m->e5m2 ? tfm_f8e5m2_to_f32(q) : tfm_f8e4m3_to_f32(q)) * scale;
}

/* A tensor stored in pieces, as a source's "parts" allows (see
 * tfm_source): the matrix [G * (n_0 + ...), C] whose rows are, for each of
 * the G groups, those of part 0's matrix g, then part 1's, ... (a part's
 * columns where it is transposed). `view` comes first: a pointer to it is
 * one to the whole. Its dtype is TFM_PARTS; it owns no data. The parts are
 * F32, F16 or BF16 (plain_tensors dequantized GGUF ones). */
typedef struct parts_tensor {
  tfm_tensor view;
  const tfm_source *source;
  const tfm_tensor *parts[TFM_MAX_SOURCE_PARTS];
  int64_t group_rows; /* n_0 + n_1 + ... */
} parts_tensor;

#define TFM_PARTS (TFM_DTYPE_OPAQUE_BASE - 3)

/* Element i (row r, column c) of the assembled matrix: row j of part p's
 * matrix g (or its column j), for r = g * group_rows + o_p + j. */
static float parts_element(const parts_tensor *m, int64_t i) {
  int64_t cols = m->view.shape[1], r = i / cols, c = i % cols;
  int64_t g = r / m->group_rows, j = r % m->group_rows;
  for (size_t p = 0; p < m->source->num_parts; ++p) {
    const struct tfm_source_part *pt = &m->source->parts[p];
    int64_t n = pt->shape[pt->transpose ? 2 : 1];
    if (j >= n) {
      j -= n;
      continue;
    }
    int64_t at =
        pt->transpose ? (g * cols + c) * n + j : (g * n + j) * cols + c;
    return float_element(m->parts[p], at);
  }
  return 0.0f; /* not reached: the parts make up group_rows */
}

/* The element at flat index `i` of `t` (any float dtype, MXFP4, FP8 with
 * block scales or a tensor in parts) as f32. */
static float element(const tfm_tensor *t, int64_t i) {
  if (t->dtype == TFM_MXFP4)
    return mxfp4_element((const mxfp4_tensor *)t, i);
  if (t->dtype == TFM_FP8_BLOCKS)
    return fp8_element((const fp8_tensor *)t, i);
  if (t->dtype == TFM_PARTS)
    return parts_element((const parts_tensor *)t, i);
  return float_element(t, i);
}

/* Row r of the parameter is this row of a fused or offset source. */
int64_t tfm_source_row(const tfm_source *s, int64_t r) {
  return s->offset + r / s->block * s->stride + r % s->block;
}

/* The tensors a source reads: one, or one per expert; with "parts", the
 * whole tensor, then its parts (the one found, the others NULL). */
static size_t source_parts(const tfm_source *s) {
  return s->per_expert  ? (size_t)s->experts
         : s->num_parts ? 1 + s->num_parts
                        : 1;
}

/* Element c of expert e's slice [n, k] (seen flat, c = row * k + col) of a
 * stacked parameter, in `t`: expert e's own tensor, or the tensor that
 * stacks every expert (e at [e]); the source's transform applies within
 * the expert. */
static int64_t expert_index(const tfm_source *s, const tfm_tensor *t, int64_t e,
                            int64_t c, int64_t n, int64_t k) {
  int64_t base = 0;
  if (!s->per_expert)
    base = e * (tfm_tensor_numel(t) / s->experts);
  int64_t row = c / k, col = c % k;
  switch (s->transform) {
  case TFM_SOURCE_TRANSPOSE: /* stored [k, n] */
    return base + col * n + row;
  case TFM_SOURCE_ROWS: /* rows of k elements */
    return base + tfm_source_row(s, row) * k + col;
  case TFM_SOURCE_TRANSPOSE_ROWS: /* stored [k, fused rows] */
    return base + col * s->shape[s->rank - 1] + tfm_source_row(s, row);
  default:
    return base + c;
  }
}

/* A parameter seen as [rows, cols] (rows its first dimension) inside its
 * whole tensor seen as [full_rows, full_cols]. For a sharded parameter,
 * `row_map` (a shard on axis 0) or `col_map` (on another axis) give the
 * row or column of the whole tensor that each local one is, or -1 for
 * padding past the end; NULL is the identity (replicated parameters). */
typedef struct shard_view {
  int64_t rows, cols, full_rows, full_cols;
  int64_t *row_map, *col_map;
} shard_view;

static void shard_view_free(shard_view *v) {
  free(v->row_map);
  free(v->col_map);
}

/* The view of `p` on rank `rank` of `ranks`; 0 when out of memory. */
static int shard_view_init(shard_view *v, const tfm_param_desc *p, int32_t rank,
                           int32_t ranks) {
  memset(v, 0, sizeof *v);
  int64_t n = 1, full = 1;
  for (int32_t i = 0; i < p->rank; ++i) {
    n *= p->shape[i];
    full *= p->full[i];
  }
  v->rows = p->rank ? p->shape[0] : 1;
  v->cols = v->rows ? n / v->rows : 0;
  v->full_rows = p->rank ? p->full[0] : 1;
  v->full_cols = v->full_rows ? full / v->full_rows : 0;
  if (!p->sharded)
    return 1;
  int32_t axis = p->shard_axis;
  int64_t local = p->shape[axis],
          first = tfm_shard_block(p, rank, ranks) * local;
  if (axis == 0) {
    v->row_map = tfm_malloc((size_t)(v->rows ? v->rows : 1) * sizeof(int64_t));
    if (!v->row_map)
      return 0;
    for (int64_t r = 0; r < v->rows; ++r)
      v->row_map[r] = first + r < p->shard_full ? first + r : -1;
    return 1;
  }
  /* A local column is (o * L + a) * inner + k, with o over the dimensions
   * between the rows and the axis, a along the axis, k over those after;
   * in the whole tensor it is (o * F + first + a) * inner + k. */
  int64_t inner = 1;
  for (int32_t i = axis + 1; i < p->rank; ++i)
    inner *= p->shape[i];
  v->col_map = tfm_malloc((size_t)(v->cols ? v->cols : 1) * sizeof(int64_t));
  if (!v->col_map)
    return 0;
  for (int64_t c = 0; c < v->cols; ++c) {
    int64_t k = c % inner, a = c / inner % local, o = c / inner / local;
    v->col_map[c] = first + a < p->shard_full
                        ? (o * p->shard_full + first + a) * inner + k
                        : -1;
  }
  return 1;
}

/* The f32 panels `packed` ([P, K, panel], freed) in bf16 pairs of K
 * (TFM_PACKING_BF16_PAIRS), rounded to nearest even; an odd K's last pair
 * has a zero high half. Returned as float * for the weight table (bf16
 * data). */
static float *to_bf16_pairs(float *packed, int64_t panels, int64_t k,
                            int32_t panel) {
  if (!packed)
    return NULL;
  const tfm_packing pairs = TFM_PACKING_BF16_PAIRS;
  int64_t size = tfm_packed_panel_numel(pairs, k, panel),
          k2 = tfm_packed_steps(pairs, k);
  uint16_t *dst = tfm_aligned_alloc((size_t)(panels * size) * sizeof(uint16_t));
  if (dst) {
    for (int64_t p = 0; p < panels; ++p) {
      const float *src =
          packed + p * tfm_packed_panel_numel(TFM_PACKING_F32, k, panel);
      for (int64_t kk = 0; kk < 2 * k2; ++kk)
        for (int64_t c = 0; c < panel; ++c) {
          float x =
              kk < k
                  ? src[tfm_packed_panel_offset(TFM_PACKING_F32, c, kk, panel)]
                  : 0.0f;
          dst[p * size + tfm_packed_panel_offset(pairs, c, kk, panel)] =
              tfm_f32_to_bf16(x);
        }
    }
  }
  free(packed);
  return (float *)dst;
}

int8_t *tfm_quantize_int8_quads(const float *packed, int64_t panels, int64_t k,
                                int32_t panel) {
  const tfm_packing quads = TFM_PACKING_INT8_QUADS;
  int64_t size = tfm_packed_panel_numel(quads, k, panel),
          k4 = tfm_packed_steps(quads, k);
  int8_t *dst = tfm_aligned_alloc((size_t)(panels * size));
  if (!dst)
    return NULL;
  for (int64_t p = 0; p < panels; ++p) {
    const float *src =
        packed + p * tfm_packed_panel_numel(TFM_PACKING_F32, k, panel);
    int8_t *out = dst + p * size;
    for (int32_t c = 0; c < panel; ++c) {
      float max = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) {
        float x = src[tfm_packed_panel_offset(TFM_PACKING_F32, c, kk, panel)];
        max = fmaxf(max, fabsf(x));
      }
      float scale = max / 127.0f, inv = max > 0.0f ? 127.0f / max : 0.0f;
      int32_t sum = 0;
      for (int64_t kk = 0; kk < 4 * k4; ++kk) {
        float x =
            kk < k ? src[tfm_packed_panel_offset(TFM_PACKING_F32, c, kk, panel)]
                   : 0.0f;
        float q = fminf(127.0f, fmaxf(-127.0f, nearbyintf(x * inv)));
        out[tfm_packed_panel_offset(quads, c, kk, panel)] = (int8_t)q;
        sum += (int32_t)q;
      }
      int32_t sum128 = sum * 128;
      memcpy(out + tfm_packed_scale_offset(c, k, panel), &scale, 4);
      memcpy(out + tfm_packed_sum_offset(c, k, panel), &sum128, 4);
    }
  }
  return dst;
}

/* The f32 panels `packed` of `stacks` weights [n, k] (freed) as `packing`
 * says: returned as float * for the weight table (f32, bf16 or int8 data).
 * Panels are independent, so a stack's are converted as one run. */
static float *repack(float *packed, int64_t stacks, int64_t n, int64_t k,
                     int32_t panel, tfm_packing packing) {
  if (!packed || packing == TFM_PACKING_F32)
    return packed;
  int64_t panels = stacks * tfm_packed_panels(n, panel);
  if (packing == TFM_PACKING_BF16_PAIRS)
    return to_bf16_pairs(packed, panels, k, panel);
  int8_t *q = tfm_quantize_int8_quads(packed, panels, k, panel);
  free(packed);
  return (float *)q;
}

/* The packed panels of parameter `p` ([N, K], this rank's block) in the
 * packing of ABI entry `a`. */
static float *repack_param(float *packed, const tfm_param_desc *p,
                           const tfm_abi_desc *a) {
  packed_shape s = packed_shape_of(p);
  return repack(packed, s.stacks, s.n, s.k, a->panel, packing_of(a));
}

/* Parameter `p` in a new f32 buffer, read from `src` (its source's tensors,
 * one or one per expert; NULL or a NULL first tensor for zeros) as its
 * source says, in one pass: dtypes converted, transposes and row maps
 * applied, and for a sharded parameter only the block of rank `rank` of
 * `ranks` read (the source describes the whole tensor; the shard selects
 * from it; padding is zero). With `panel` > 0, a 2-D [N, K] weight is
 * packed in f32 panels (TFM_PACKING_F32 of tfm/packed_layout.h), the
 * padding of the last panel zero. */
static float *convert(const tfm_tensor *const *src, const tfm_param_desc *p,
                      int32_t panel, int32_t rank, int32_t ranks) {
  shard_view v;
  if (!shard_view_init(&v, p, rank, ranks)) {
    shard_view_free(&v);
    return NULL;
  }
  int64_t rows = v.rows, cols = v.cols, n = rows * cols;
  /* Packed: a weight [rows, cols], or a stack (rank 3) of `rows` weights
   * [N, K] each a row of N * K columns. */
  packed_shape ps = packed_shape_of(p);
  int64_t per =
      panel > 0 ? tfm_packed_numel(TFM_PACKING_F32, ps.n, ps.k, panel) : 0;
  int64_t padded = panel > 0 ? ps.stacks * per : n;
  float *dst = tfm_aligned_alloc((size_t)padded * sizeof(float));
  if (!dst || !src || !src[0]) {
    if (dst)
      memset(dst, 0, (size_t)padded * sizeof(float));
    shard_view_free(&v);
    return dst;
  }
  if (padded != n || p->sharded)
    memset(dst, 0, (size_t)padded * sizeof(float));
  const tfm_source *s = &p->source;
  /* Stacked experts: row r is expert r, a slice [expert_n, expert_k]. */
  int64_t expert_n = s->experts > 0 ? p->full[1] : 0;
  int64_t expert_k = expert_n ? v.full_cols / expert_n : 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t fr = v.row_map ? v.row_map[r] : r;
    if (fr < 0)
      continue; /* padding */
    const tfm_tensor *t = src[s->per_expert ? fr : 0];
    int64_t sr = fr;
    if (s->experts == 0 && (s->transform == TFM_SOURCE_ROWS ||
                            s->transform == TFM_SOURCE_TRANSPOSE_ROWS))
      sr = tfm_source_row(s, fr);
    for (int64_t c = 0; c < cols; ++c) {
      int64_t fc = v.col_map ? v.col_map[c] : c;
      if (fc < 0)
        continue; /* padding */
      int64_t i;
      if (s->experts > 0)
        i = expert_index(s, t, fr, fc, expert_n, expert_k);
      else
        switch (s->transform) {
        case TFM_SOURCE_TRANSPOSE: /* stored [full_cols, full_rows] */
          i = fc * v.full_rows + fr;
          break;
        case TFM_SOURCE_TRANSPOSE_ROWS: /* stored [full_cols, fused rows] */
          i = fc * t->shape[1] + sr;
          break;
        default: /* canonical, copy and rows: rows of `full_cols` elements */
          i = sr * v.full_cols + fc;
          break;
        }
      float x = element(t, i);
      if (panel > 0 && p->rank == 3)
        dst[r * per + tfm_packed_index(TFM_PACKING_F32, c / ps.k, c % ps.k,
                                       ps.k, panel)] = x;
      else if (panel > 0)
        dst[tfm_packed_index(TFM_PACKING_F32, r, c, cols, panel)] = x;
      else
        dst[r * cols + c] = x;
    }
  }
  shard_view_free(&v);
  return dst;
}

/* A stack of `stacks` weights [n, k] (f32, row-major, one after the
 * other) packed weight after weight (tfm_pack_weight is a stack of one). */
static void *pack_stack(const float *w, int64_t stacks, int64_t n, int64_t k,
                        int32_t panel, tfm_packing packing) {
  int64_t per = tfm_packed_numel(TFM_PACKING_F32, n, k, panel);
  float *dst = tfm_aligned_alloc((size_t)(stacks * per) * sizeof(float));
  if (!dst)
    return NULL;
  memset(dst, 0, (size_t)(stacks * per) * sizeof(float));
  for (int64_t e = 0; e < stacks; ++e)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c)
        dst[e * per + tfm_packed_index(TFM_PACKING_F32, r, c, k, panel)] =
            w[(e * n + r) * k + c];
  return repack(dst, stacks, n, k, panel, packing);
}

/* W [n, k] (f32, row-major) packed in panels of `panel` columns as
 * `packing` says (tfm/packed_layout.h), in a new buffer of
 * tfm_packed_numel(packing, n, k, panel) elements (f32, bf16 or int8) to
 * free(); NULL when out of memory. Random weights are packed with it, and
 * test/unit/PackedLayoutTest.cpp checks it against the header. */
void *tfm_pack_weight(const float *w, int64_t n, int64_t k, int32_t panel,
                      tfm_packing packing) {
  return pack_stack(w, 1, n, k, panel, packing);
}

/* Drops the pages of a mapped tensor from this process's memory once it is
 * converted (they are read again from the page cache if needed): a rank
 * that reads a slice of each tensor keeps about its slice resident, not
 * the checkpoint. */
static void release(const tfm_tensor *t) {
  if (t && t->dtype == TFM_MXFP4) {
    release(((const mxfp4_tensor *)t)->blocks);
    release(((const mxfp4_tensor *)t)->scales);
    return;
  }
  if (t && t->dtype == TFM_FP8_BLOCKS) {
    release(((const fp8_tensor *)t)->values);
    release(((const fp8_tensor *)t)->scales);
    return;
  }
  long page = sysconf(_SC_PAGESIZE);
  if (!t || page <= 0)
    return;
  size_t bytes = tfm_is_ggml_dtype(t->dtype)
                     ? tfm_ggml_row_bytes(t->dtype - TFM_GGML_DTYPE_BASE,
                                          tfm_tensor_numel(t))
                     : (size_t)tfm_tensor_numel(t) * tfm_dtype_size(t->dtype);
  uintptr_t begin = (uintptr_t)t->data, mask = (uintptr_t)page - 1;
  uintptr_t end = begin + (uintptr_t)bytes;
  begin &= ~mask;
  end = (end + mask) & ~mask;
  if (end > begin)
    madvise((void *)begin, end - begin, MADV_DONTNEED);
}

/* The tensors `src[0..n)` that a parameter reads, with those of GGUF files
 * (ggml dtypes) in a form element() reads, in `out`: F32 as a view of its
 * data (in `views`), the other types (F16 and BF16 too: one pass over the
 * rows is faster than element() on each value) dequantized as ggml does
 * into a new f32 buffer each (in `buffers`, NULL for the others; the
 * caller frees them). NULL entries stay NULL. Returns 0 when out of
 * memory. */
static int plain_tensors(const tfm_tensor *const *src, size_t n,
                         const tfm_tensor **out, tfm_tensor *views,
                         float **buffers) {
  for (size_t k = 0; k < n; ++k)
    buffers[k] = NULL;
  for (size_t k = 0; k < n; ++k) {
    out[k] = src[k];
    if (!src[k] || !tfm_is_ggml_dtype(src[k]->dtype))
      continue;
    int32_t type = src[k]->dtype - TFM_GGML_DTYPE_BASE;
    views[k] = *src[k];
    out[k] = &views[k];
    if (type == TFM_GGML_F32) {
      views[k].dtype = TFM_F32;
      continue;
    }
    int64_t numel = tfm_tensor_numel(src[k]);
    buffers[k] = tfm_aligned_alloc((size_t)numel * sizeof(float));
    if (!buffers[k])
      return 0;
    /* Rows are whole blocks (gguf.c checked), so the tensor is too, and
     * check_bound accepted the type. */
    if (tfm_ggml_dequantize(type, src[k]->data, buffers[k], numel) != TFM_OK)
      return 0;
    views[k].dtype = TFM_F32;
    views[k].data = buffers[k];
  }
  return 1;
}

/* Whether `name` matches `pattern`, where '*' matches any run of
 * characters. */
static int glob_match(const char *pattern, const char *name) {
  if (!*pattern)
    return !*name;
  if (*pattern == '*') {
    for (const char *s = name;; ++s) {
      if (glob_match(pattern + 1, s))
        return 1;
      if (!*s)
        return 0;
    }
  }
  return *pattern == *name && glob_match(pattern + 1, name + 1);
}

/* Whether a checkpoint tensor the model does not use is one its layout
 * expects and ignores (buffers, tied copies, parts the model does not run),
 * with or without a base-model prefix. */
static int ignored(const tfm_description *d, const char *name) {
  for (size_t i = 0; i < d->num_ignore; ++i) {
    if (glob_match(d->ignore[i], name))
      return 1;
    for (size_t k = 0; k < d->num_prefixes; ++k) {
      size_t n = strlen(d->prefixes[k]);
      if (!strncmp(name, d->prefixes[k], n) &&
          glob_match(d->ignore[i], name + n))
        return 1;
    }
  }
  return 0;
}

/* Room for one name with a prefix. */
#define NAME_SIZE 1024

/* `name` (of a source) with the base-model prefix `prefix`, and for expert
 * `e` >= 0 its first "{e}" replaced by e. */
static void source_name(char *out, size_t size, const char *prefix,
                        const char *name, int64_t e) {
  const char *at = e >= 0 ? strstr(name, "{e}") : NULL;
  if (!at) {
    snprintf(out, size, "%s%s", prefix, name);
    return;
  }
  snprintf(out, size, "%s%.*s%lld%s", prefix, (int)(at - name), name,
           (long long)e, at + 3);
}

/* The tensor parameter `p` reads (for a source with a tensor per expert,
 * expert `e`'s), or NULL; the canonical name, or for a Hugging Face source
 * each alternative under each base-model prefix and bare. */
static const tfm_bound *find_source(const tfm_description *d,
                                    const tfm_checkpoint *c,
                                    const tfm_param_desc *p, int64_t e) {
  const tfm_source *s = &p->source;
  if (s->transform == TFM_SOURCE_CANONICAL)
    return tfm_checkpoint_find(c, p->name);
  for (size_t a = 0; a < s->num_names; ++a) {
    char name[NAME_SIZE];
    for (size_t k = 0; s->base && k < d->num_prefixes; ++k) {
      source_name(name, sizeof name, d->prefixes[k], s->names[a], e);
      const tfm_bound *b = tfm_checkpoint_find(c, name);
      if (b)
        return b;
    }
    source_name(name, sizeof name, "", s->names[a], e);
    const tfm_bound *b = tfm_checkpoint_find(c, name);
    if (b)
      return b;
  }
  return NULL;
}

/* "'a' or 'b'": every name find_source tries for expert `e` (-1: the names
 * as they are, "{e}" included). */
static void tried_names(const tfm_description *d, const tfm_source *s,
                        int64_t e, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = 0;
  for (size_t a = 0; a < s->num_names; ++a)
    for (size_t k = 0; k <= (s->base ? d->num_prefixes : 0); ++k) {
      const char *prefix =
          k < (s->base ? d->num_prefixes : 0) ? d->prefixes[k] : "";
      char name[NAME_SIZE];
      source_name(name, sizeof name, prefix, s->names[a], e);
      if (used < size)
        used += (size_t)snprintf(buf + used, size - used, "%s'%s'",
                                 used ? " or " : "", name);
    }
}

/* The transform of a source in words, for messages and --info. */
void tfm_source_describe(const tfm_source *s, const tfm_param_desc *p,
                         char *buf, size_t size) {
  char shape[TFM_SHAPE_STR_SIZE];
  tfm_shape_str(s->rank, s->shape, shape, sizeof shape);
  int64_t rows = p->rank ? p->full[0] : 1; /* of the whole tensor */
  switch (s->transform) {
  case TFM_SOURCE_CANONICAL:
    snprintf(buf, size, "%s", p->name);
    return;
  case TFM_SOURCE_ZEROS:
    snprintf(buf, size, "(zeros: the checkpoint has no such tensor)");
    return;
  case TFM_SOURCE_UNMAPPED:
    snprintf(buf, size, "(none: %s)", s->why);
    return;
  default:
    break;
  }
  size_t used = (size_t)snprintf(buf, size, "%s %s%s", s->names[0], shape,
                                 s->at_least ? " or more rows" : "");
  if (used < size && s->experts > 0) {
    /* The transform reads each expert's slice: its rows are counted
     * within the expert. */
    rows = p->rank > 1 ? p->full[1] : 1;
    used += (size_t)snprintf(buf + used, size - used,
                             s->per_expert ? " for each of the %lld experts"
                                           : ", %lld experts stacked",
                             (long long)s->experts);
  }
  if (used >= size)
    return;
  if (s->transform == TFM_SOURCE_TRANSPOSE)
    used += (size_t)snprintf(buf + used, size - used, ", transposed");
  else if (s->transform == TFM_SOURCE_ROWS ||
           s->transform == TFM_SOURCE_TRANSPOSE_ROWS) {
    const char *t =
        s->transform == TFM_SOURCE_TRANSPOSE_ROWS ? ", transposed" : "";
    const char *each = s->experts > 0 ? " of each expert" : "";
    if (s->block >= rows)
      used += (size_t)snprintf(buf + used, size - used, "%s, rows %lld..%lld%s",
                               t, (long long)s->offset,
                               (long long)(s->offset + rows - 1), each);
    else if (s->block == 1)
      used += (size_t)snprintf(
          buf + used, size - used, "%s, rows %lld + %lld*i for i < %lld%s", t,
          (long long)s->offset, (long long)s->stride, (long long)rows, each);
    else
      used += (size_t)snprintf(
          buf + used, size - used,
          "%s, rows %lld + %lld*i .. +%lld for i < %lld%s", t,
          (long long)s->offset, (long long)s->stride, (long long)(s->block - 1),
          (long long)((rows + s->block - 1) / s->block), each);
  }
  if (used < size && s->mxfp4)
    used += (size_t)snprintf(buf + used, size - used,
                             " (or MXFP4: %s_blocks and %s_scales, "
                             "dequantized)",
                             s->names[0], s->names[0]);
  if (used < size && s->fp8_block[0])
    used += (size_t)snprintf(
        buf + used, size - used,
        " (or FP8 in blocks of [%lld, %lld] scaled by %s_scale_inv, "
        "dequantized)",
        (long long)s->fp8_block[0], (long long)s->fp8_block[1], s->names[0]);
  for (size_t k = 0; k < s->num_parts && used < size; ++k) {
    const struct tfm_source_part *pt = &s->parts[k];
    char part[TFM_SHAPE_STR_SIZE];
    tfm_shape_str(3, pt->shape, part, sizeof part);
    if (!k)
      used += (size_t)snprintf(buf + used, size - used,
                               " (or assembled, %lld groups of rows, from",
                               (long long)pt->shape[0]);
    if (used < size)
      used += (size_t)snprintf(
          buf + used, size - used, "%s %s %s%s%s", k ? "," : "", pt->name, part,
          pt->transpose ? " transposed" : "", k + 1 == s->num_parts ? ")" : "");
  }
}

/* Whether `dtype` is one of safetensors' 8-bit floats. */
static int is_fp8(int32_t dtype) {
  return dtype == tfm_opaque_dtype("F8_E4M3") ||
         dtype == tfm_opaque_dtype("F8_E5M2");
}

/* Whether a stored tensor has the shape its source expects. */
static int source_shape_ok(const tfm_source *s, const tfm_tensor *v) {
  if (v->rank != s->rank)
    return 0;
  int row_axis = s->transform == TFM_SOURCE_TRANSPOSE_ROWS ? 1 : 0;
  for (int32_t k = 0; k < v->rank; ++k) {
    if (s->at_least && k == row_axis ? v->shape[k] < s->shape[k]
                                     : v->shape[k] != s->shape[k])
      return 0;
  }
  return 1;
}

static int dtype_ok(const tfm_source *s, const tfm_bound *b,
                    const tfm_tensor *v);

/* Checks a stored tensor `v` (named `b`) against what source `s` of
 * parameter `p` expects (for a tensor per expert, expert `e`'s); appends
 * the error and returns 0 when it does not match. */
static int check_bound(const tfm_param_desc *p, const tfm_bound *b,
                       const tfm_tensor *v, int64_t e) {
  const tfm_source *s = &p->source;
  char want[TFM_SHAPE_STR_SIZE], got[TFM_SHAPE_STR_SIZE];
  tfm_shape_str(p->rank, p->full, want, sizeof want);
  tfm_shape_str(v->rank, v->shape, got, sizeof got);
  if (s->transform == TFM_SOURCE_CANONICAL) {
    int same = v->rank == p->rank;
    for (int32_t k = 0; same && k < v->rank; ++k)
      same = v->shape[k] == p->full[k];
    if (!same) {
      tfm_error_append("\n  tensor '%s' has shape %s, expected %s", p->name,
                       got, want);
      return 0;
    }
  } else if (!source_shape_ok(s, v)) {
    char expect[TFM_SHAPE_STR_SIZE], whose[64] = "";
    tfm_shape_str(s->rank, s->shape, expect, sizeof expect);
    if (e >= 0)
      snprintf(whose, sizeof whose, "expert %lld of ", (long long)e);
    tfm_error_append("\n  tensor '%s' has shape %s, expected %s%s (for "
                     "%sparameter '%s' %s)",
                     b->name, got, expect, s->at_least ? " or more rows" : "",
                     whose, p->name, want);
    return 0;
  }
  return dtype_ok(s, b, v);
}

/* Whether source `s` reads the dtype of a stored tensor `v` (named `b`);
 * appends the error and returns 0 when it does not. */
static int dtype_ok(const tfm_source *s, const tfm_bound *b,
                    const tfm_tensor *v) {
  if (is_fp8(v->dtype) && s->fp8_block[0])
    return 1; /* with its block scales (bind_fp8) */
  if (tfm_is_ggml_dtype(v->dtype)) {
    int32_t type = v->dtype - TFM_GGML_DTYPE_BASE;
    if (tfm_ggml_can_dequantize(type))
      return 1; /* converted to f32 (plain_tensors) */
    const char *name = "unknown";
    tfm_ggml_type_info(type, &name, NULL, NULL);
    tfm_error_append("\n  tensor '%s' has ggml type %s, which the runtime "
                     "does not convert (it reads f32, f16, bf16, q4_0, "
                     "q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, "
                     "iq4_nl and iq4_xs)",
                     b->name, name);
    return 0;
  }
  if (v->dtype != TFM_F32 && v->dtype != TFM_F16 && v->dtype != TFM_BF16 &&
      v->dtype != TFM_MXFP4) {
    tfm_error_append("\n  tensor '%s' has dtype %s, expected F32, F16 or "
                     "BF16%s",
                     b->name, tfm_dtype_name(v->dtype),
                     is_fp8(v->dtype)
                         ? " (FP8 is read, with its block scales, for the "
                           "linear weights of a model compiled for a "
                           "checkpoint quantized so)"
                         : "");
    return 0;
  }
  return 1;
}

/* The tensor `name` + `suffix` under the base-model prefixes of `d` (as
 * find_source tries them) or bare; its full name in `full`. */
static const tfm_bound *find_suffixed(const tfm_description *d,
                                      const tfm_checkpoint *c,
                                      const tfm_source *s, const char *name,
                                      const char *suffix, char *full,
                                      size_t size) {
  for (size_t k = 0; k <= (s->base ? d->num_prefixes : 0); ++k) {
    const char *prefix =
        k < (s->base ? d->num_prefixes : 0) ? d->prefixes[k] : "";
    snprintf(full, size, "%s%s%s", prefix, name, suffix);
    const tfm_bound *b = tfm_checkpoint_find(c, full);
    if (b)
      return b;
  }
  return NULL;
}

/* Binds the MXFP4 form of the tensor of parameter `p` (a source with
 * "mxfp4"): "<name>_blocks" and "<name>_scales" for the first of its names
 * that has either, read as the [E, 32 G, N] view `m`. Returns 1 when bound,
 * 0 when the checkpoint has neither, and -1 (the error appended) when the
 * pair does not fit. */
static int bind_mxfp4(const tfm_description *d, const tfm_checkpoint *c,
                      const tfm_param_desc *p, char *used, mxfp4_tensor *m) {
  const tfm_source *s = &p->source;
  char blocks_name[NAME_SIZE], scales_name[NAME_SIZE];
  const tfm_bound *blocks = NULL, *scales = NULL;
  for (size_t a = 0; a < s->num_names && !blocks && !scales; ++a) {
    blocks = find_suffixed(d, c, s, s->names[a], "_blocks", blocks_name,
                           sizeof blocks_name);
    scales = find_suffixed(d, c, s, s->names[a], "_scales", scales_name,
                           sizeof scales_name);
  }
  if (!blocks && !scales)
    return 0;
  if (!blocks || !scales) {
    /* The missing one, named as the one found ("_blocks" and "_scales"
     * have the same length). */
    char *have = blocks ? blocks_name : scales_name;
    char *missing = blocks ? scales_name : blocks_name;
    snprintf(missing, NAME_SIZE, "%.*s%s", (int)(strlen(have) - 7), have,
             blocks ? "_scales" : "_blocks");
    used[(blocks ? blocks : scales) - c->tensors] = 1;
    tfm_error_append("\n  tensor '%s' has no '%s' beside it (the MXFP4 "
                     "blocks and scales of parameter '%s' come in pairs)",
                     have, missing, p->name);
    return -1;
  }
  used[blocks - c->tensors] = 1;
  used[scales - c->tensors] = 1;
  const tfm_tensor *b = blocks->view, *sc = scales->view;
  int u8 = tfm_opaque_dtype("U8");
  int ok = b->dtype == u8 && sc->dtype == u8 && b->rank == 4 &&
           b->shape[3] == 16 && sc->rank == 3;
  for (int32_t k = 0; ok && k < 3; ++k)
    ok = sc->shape[k] == b->shape[k];
  if (!ok) {
    char bs[TFM_SHAPE_STR_SIZE], ss[TFM_SHAPE_STR_SIZE];
    tfm_shape_str(b->rank, b->shape, bs, sizeof bs);
    tfm_shape_str(sc->rank, sc->shape, ss, sizeof ss);
    tfm_error_append("\n  tensors '%s' %s %s and '%s' %s %s are not MXFP4 "
                     "blocks and scales (expected U8 [E, N, G, 16] and U8 "
                     "[E, N, G]) for parameter '%s'",
                     blocks_name, tfm_dtype_name(b->dtype), bs, scales_name,
                     tfm_dtype_name(sc->dtype), ss, p->name);
    return -1;
  }
  memset(m, 0, sizeof *m);
  m->view.dtype = TFM_MXFP4;
  m->view.rank = 3;
  m->view.shape[0] = b->shape[0];
  m->view.shape[1] = b->shape[2] * 32;
  m->view.shape[2] = b->shape[1];
  m->blocks = b;
  m->scales = sc;
  if (!source_shape_ok(s, &m->view)) {
    char bs[TFM_SHAPE_STR_SIZE], ss[TFM_SHAPE_STR_SIZE],
        got[TFM_SHAPE_STR_SIZE], want[TFM_SHAPE_STR_SIZE],
        param[TFM_SHAPE_STR_SIZE];
    tfm_shape_str(b->rank, b->shape, bs, sizeof bs);
    tfm_shape_str(sc->rank, sc->shape, ss, sizeof ss);
    tfm_shape_str(m->view.rank, m->view.shape, got, sizeof got);
    tfm_shape_str(s->rank, s->shape, want, sizeof want);
    tfm_shape_str(p->rank, p->full, param, sizeof param);
    tfm_error_append("\n  tensors '%s' %s and '%s' %s dequantize to %s, "
                     "expected %s (for parameter '%s' %s)",
                     blocks_name, bs, scales_name, ss, got, want, p->name,
                     param);
    return -1;
  }
  return 1;
}

/* The tensor to read for `b`, a tensor of parameter `p` that check_bound
 * accepted: its own view, or when it is FP8 (which a source with
 * "fp8_block" allows) the dequantized view `m` of it and of its scales
 * "<name>_scale_inv", found in any file of the checkpoint. NULL (the error
 * appended) when the scales are missing, of another dtype or shape, or not
 * finite. */
static const tfm_tensor *bind_fp8(const tfm_checkpoint *c,
                                  const tfm_param_desc *p, const tfm_bound *b,
                                  char *used, fp8_tensor *m) {
  const tfm_source *s = &p->source;
  const tfm_tensor *v = b->view;
  if (!is_fp8(v->dtype))
    return v;
  char name[NAME_SIZE], block[64], vs[TFM_SHAPE_STR_SIZE];
  snprintf(name, sizeof name, "%s_scale_inv", b->name);
  snprintf(block, sizeof block, "[%lld, %lld]", (long long)s->fp8_block[0],
           (long long)s->fp8_block[1]);
  tfm_shape_str(v->rank, v->shape, vs, sizeof vs);
  const tfm_bound *scales = tfm_checkpoint_find(c, name);
  if (!scales) {
    tfm_error_append("\n  tensor '%s' %s %s has no '%s' beside it (its "
                     "scales, one per block of %s, for parameter '%s')",
                     b->name, tfm_dtype_name(v->dtype), vs, name, block,
                     p->name);
    return NULL;
  }
  used[scales - c->tensors] = 1;
  const tfm_tensor *sc = scales->view;
  if (sc->dtype != TFM_F32 && sc->dtype != TFM_BF16 && sc->dtype != TFM_F16) {
    tfm_error_append("\n  tensor '%s' has dtype %s, expected F32, BF16 or "
                     "F16 (the block scales of '%s', for parameter '%s')",
                     name, tfm_dtype_name(sc->dtype), b->name, p->name);
    return NULL;
  }
  /* One scale per block of the last two axes; a stack's first axis as it
   * is. check_bound saw the values' rank: the source's, 2 or 3. */
  int32_t r = v->rank;
  int64_t want[TFM_MAX_RANK];
  memcpy(want, v->shape, sizeof want);
  want[r - 2] = (v->shape[r - 2] + s->fp8_block[0] - 1) / s->fp8_block[0];
  want[r - 1] = (v->shape[r - 1] + s->fp8_block[1] - 1) / s->fp8_block[1];
  int same = sc->rank == r;
  for (int32_t k = 0; same && k < r; ++k)
    same = sc->shape[k] == want[k];
  if (!same) {
    char got[TFM_SHAPE_STR_SIZE], expect[TFM_SHAPE_STR_SIZE];
    tfm_shape_str(sc->rank, sc->shape, got, sizeof got);
    tfm_shape_str(r, want, expect, sizeof expect);
    tfm_error_append("\n  tensor '%s' has shape %s, expected %s (the scales "
                     "of '%s' %s, one per block of %s, for parameter '%s')",
                     name, got, expect, b->name, vs, block, p->name);
    return NULL;
  }
  /* A scale that is not finite would make its whole block so: a broken
   * checkpoint, said at once rather than as NaN logits. */
  int64_t count = tfm_tensor_numel(sc);
  for (int64_t i = 0; i < count; ++i) {
    float x = float_element(sc, i);
    if (isfinite(x))
      continue;
    int64_t at[TFM_MAX_RANK], rest = i;
    for (int32_t k = r; k-- > 0;) {
      at[k] = rest % sc->shape[k];
      rest /= sc->shape[k];
    }
    char where[TFM_SHAPE_STR_SIZE];
    tfm_shape_str(r, at, where, sizeof where);
    tfm_error_append("\n  tensor '%s' holds the scale %g at %s (the scales "
                     "of '%s' must be finite, for parameter '%s')",
                     name, x, where, b->name, p->name);
    return NULL;
  }
  memset(m, 0, sizeof *m);
  m->view = *v;
  m->view.dtype = TFM_FP8_BLOCKS;
  m->values = v;
  m->scales = sc;
  m->rows = s->fp8_block[0];
  m->cols = s->fp8_block[1];
  m->row_blocks = want[r - 2];
  m->col_blocks = want[r - 1];
  m->e5m2 = v->dtype == tfm_opaque_dtype("F8_E5M2");
  return &m->view;
}

/* "'a' and 'b'": the names of the parts of `s`, in `buf`. */
static void part_names(const tfm_source *s, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = 0;
  for (size_t k = 0; k < s->num_parts && used < size; ++k)
    used += (size_t)snprintf(buf + used, size - used, "%s'%s'",
                             !k                      ? ""
                             : k + 1 == s->num_parts ? " and "
                                                     : ", ",
                             s->parts[k].name);
}

/* Binds the parts of parameter `p`, whose source has "parts", to `bound[1]`
 * .. (`whole`: its tensor, if the checkpoint has it). Returns 1 when they
 * are bound, 0 when the checkpoint has none of them (the tensor is read
 * whole, or reported missing), and -1 (the error appended) when it has the
 * tensor and parts too, misses a part, or a part's shape or dtype does not
 * fit. */
static int bind_parts(const tfm_description *d, const tfm_checkpoint *c,
                      const tfm_param_desc *p, const tfm_bound *whole,
                      const tfm_tensor **bound, char *used) {
  const tfm_source *s = &p->source;
  const tfm_bound *found[TFM_MAX_SOURCE_PARTS] = {NULL};
  size_t count = 0;
  for (size_t k = 0; k < s->num_parts; ++k) {
    char name[NAME_SIZE];
    found[k] = find_suffixed(d, c, s, s->parts[k].name, "", name, sizeof name);
    if (found[k]) {
      used[found[k] - c->tensors] = 1;
      count++;
    }
  }
  if (!count)
    return 0;
  char want[TFM_SHAPE_STR_SIZE], stored[TFM_SHAPE_STR_SIZE], names[2048];
  tfm_shape_str(p->rank, p->full, want, sizeof want);
  tfm_shape_str(s->rank, s->shape, stored, sizeof stored);
  part_names(s, names, sizeof names);
  if (whole) {
    tfm_error_append("\n  tensor '%s' and its parts %s are all in the "
                     "checkpoint: it is stored whole or in parts, not both "
                     "(for parameter '%s' %s)",
                     whole->name, names, p->name, want);
    return -1;
  }
  int ok = 1;
  for (size_t k = 0; k < s->num_parts; ++k) {
    const struct tfm_source_part *pt = &s->parts[k];
    char shape[TFM_SHAPE_STR_SIZE];
    tfm_shape_str(3, pt->shape, shape, sizeof shape);
    if (!found[k]) {
      tfm_error_append("\n  missing tensor '%s' %s, part %zu of %zu of "
                       "'%s' %s, whose other parts are in the checkpoint "
                       "(for parameter '%s' %s)",
                       pt->name, shape, k + 1, s->num_parts, s->names[0],
                       stored, p->name, want);
      ok = 0;
      continue;
    }
    const tfm_tensor *v = found[k]->view;
    int same = v->rank == 3;
    for (int32_t a = 0; same && a < 3; ++a)
      same = v->shape[a] == pt->shape[a];
    if (!same) {
      char got[TFM_SHAPE_STR_SIZE];
      tfm_shape_str(v->rank, v->shape, got, sizeof got);
      tfm_error_append("\n  tensor '%s' has shape %s, expected %s (part %zu "
                       "of %zu of '%s' %s, for parameter '%s' %s)",
                       found[k]->name, got, shape, k + 1, s->num_parts,
                       s->names[0], stored, p->name, want);
      ok = 0;
      continue;
    }
    if (!dtype_ok(s, found[k], v)) {
      ok = 0;
      continue;
    }
    bound[1 + k] = v;
  }
  return ok ? 1 : -1;
}

/* Binds the tensors of stacked parameter `p` whose source has a tensor per
 * expert (`bound[e]`); returns the number of problems reported. A
 * checkpoint without any of them is one problem (the names with {e}),
 * otherwise each missing expert is one. */
static int bind_experts(const tfm_description *d, const tfm_checkpoint *c,
                        const tfm_param_desc *p, const tfm_tensor **bound,
                        char *used, fp8_tensor *fp8) {
  const tfm_source *s = &p->source;
  char want[TFM_SHAPE_STR_SIZE], each[TFM_SHAPE_STR_SIZE], names[2048];
  tfm_shape_str(p->rank, p->full, want, sizeof want);
  tfm_shape_str(s->rank, s->shape, each, sizeof each);
  int problems = 0;
  int64_t missing = 0;
  for (int64_t e = 0; e < s->experts; ++e) {
    const tfm_bound *b = find_source(d, c, p, e);
    if (!b) {
      missing++;
      continue;
    }
    used[b - c->tensors] = 1;
    const tfm_tensor *v = NULL;
    if (check_bound(p, b, b->view, e) && (v = bind_fp8(c, p, b, used, &fp8[e])))
      bound[e] = v;
    else
      problems++;
  }
  if (missing == s->experts) {
    tried_names(d, s, -1, names, sizeof names);
    tfm_error_append("\n  missing tensors %s (e = 0..%lld, each %s) for "
                     "parameter '%s' %s",
                     names, (long long)(s->experts - 1), each, p->name, want);
    return problems + 1;
  }
  for (int64_t e = 0; missing && e < s->experts; ++e) {
    if (find_source(d, c, p, e))
      continue;
    tried_names(d, s, e, names, sizeof names);
    tfm_error_append("\n  missing tensor %s %s for expert %lld of parameter "
                     "'%s' %s",
                     names, each, (long long)e, p->name, want);
    problems++;
  }
  return problems;
}

/* Binds every parameter to its tensors (`bound[first[i]]`, and for a
 * source with a tensor per expert the next ones too; NULL for zeros; an
 * MXFP4 tensor as its view in `mxfp4[i]`, an FP8 one as its view in the
 * `fp8` entry of its `bound` slot) and
 * reports every difference between the checkpoint and the parameter table
 * after the message already recorded; returns how many there are. `used`
 * (one byte per checkpoint tensor) marks the tensors read with 1, and with 2
 * those of a Hugging Face checkpoint that nothing reads and its layout does
 * not ignore. */
static int bind_params(const tfm_description *d, const tfm_checkpoint *c,
                       const tfm_tensor **bound, const size_t *first,
                       char *used, mxfp4_tensor *mxfp4, fp8_tensor *fp8) {
  int problems = 0;
  for (size_t i = 0; i < d->num_params; ++i) {
    const tfm_param_desc *p = &d->params[i];
    const tfm_source *s = &p->source;
    /* The checkpoint holds whole tensors, also of sharded parameters. */
    char want[TFM_SHAPE_STR_SIZE];
    tfm_shape_str(p->rank, p->full, want, sizeof want);
    bound[first[i]] = NULL;
    if (s->transform == TFM_SOURCE_ZEROS)
      continue;
    if (s->transform == TFM_SOURCE_UNMAPPED) {
      tfm_error_append("\n  parameter '%s' has no tensor in %s%s "
                       "checkpoints: %s",
                       p->name, d->gguf_arch ? "GGUF " : "",
                       d->hf_type     ? d->hf_type
                       : d->gguf_arch ? d->gguf_arch
                                      : "these",
                       s->why);
      problems++;
      continue;
    }
    if (s->per_expert) {
      problems += bind_experts(d, c, p, bound + first[i], used, fp8 + first[i]);
      continue;
    }
    const tfm_bound *b = find_source(d, c, p, -1);
    if (s->num_parts) {
      int found = bind_parts(d, c, p, b, bound + first[i], used);
      if (found < 0)
        problems++;
      if (found)
        continue;
    }
    if (!b && s->mxfp4) {
      int found = bind_mxfp4(d, c, p, used, &mxfp4[i]);
      if (found > 0)
        bound[first[i]] = &mxfp4[i].view;
      if (found < 0)
        problems++;
      if (found)
        continue;
    }
    if (!b) {
      if (s->transform == TFM_SOURCE_CANONICAL) {
        tfm_error_append("\n  missing tensor '%s' %s", p->name, want);
      } else {
        char names[2048];
        tried_names(d, s, -1, names, sizeof names);
        char mxfp4[2 * NAME_SIZE + 64] = "";
        if (s->mxfp4)
          snprintf(mxfp4, sizeof mxfp4,
                   " (or its MXFP4 blocks and scales '%s_blocks' and "
                   "'%s_scales')",
                   s->names[0], s->names[0]);
        if (s->num_parts) {
          char parts[2048];
          part_names(s, parts, sizeof parts);
          snprintf(mxfp4, sizeof mxfp4, " (or its parts %s)", parts);
        }
        tfm_error_append("\n  missing tensor %s%s for parameter '%s' %s", names,
                         mxfp4, p->name, want);
      }
      problems++;
      continue;
    }
    used[b - c->tensors] = 1;
    const tfm_tensor *v = NULL;
    if (!check_bound(p, b, b->view, -1) ||
        !(v = bind_fp8(c, p, b, used, &fp8[first[i]]))) {
      problems++;
      continue;
    }
    bound[first[i]] = v;
  }
  /* Tensors no parameter reads: errors under canonical names; for a
   * Hugging Face or GGUF layout, ignored or listed as warnings (as
   * from_pretrained does). */
  for (size_t k = 0; k < c->count; ++k) {
    const char *name = c->tensors[k].name;
    if (used[k])
      continue;
    if (!d->hf_type && !d->gguf_arch) {
      tfm_error_append("\n  unexpected tensor '%s' (not a parameter of the "
                       "model)",
                       name);
      problems++;
    } else if (!ignored(d, name)) {
      used[k] = 2;
    }
  }
  return problems;
}

/* The warning listing the tensors bind_params marked unused (2), or NULL
 * when there are none; TFM_ERR_MEMORY if it cannot be allocated. */
static tfm_status unused_warning(const tfm_description *d,
                                 const tfm_checkpoint *c, const char *used,
                                 char **warnings) {
  size_t unused = 0, size = 256;
  for (size_t k = 0; k < c->count; ++k)
    if (used[k] == 2) {
      unused++;
      size += strlen(c->tensors[k].name) + 3;
    }
  if (!unused)
    return TFM_OK;
  *warnings = tfm_malloc(size);
  if (!*warnings)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory loading weights");
  size_t n = (size_t)snprintf(*warnings, size,
                              "%zu tensor%s of the checkpoint %s not used by "
                              "model '%s':",
                              unused, unused == 1 ? "" : "s",
                              unused == 1 ? "is" : "are", d->name);
  for (size_t k = 0; k < c->count; ++k)
    if (used[k] == 2)
      n += (size_t)snprintf(*warnings + n, size - n, " '%s'",
                            c->tensors[k].name);
  return TFM_OK;
}

tfm_status tfm_weights_load(tfm_weights *w, const tfm_description *d,
                            const char *const *paths, size_t num_paths,
                            char **warnings) {
  tfm_weights_clear(w);
  *warnings = NULL;
  /* The tensors each parameter reads: first[i] .. first[i + 1] - 1 of
   * `bound` (several for stacked experts with a tensor each). */
  size_t *first = tfm_calloc(d->num_params + 1, sizeof *first);
  if (first)
    for (size_t i = 0; i < d->num_params; ++i)
      first[i + 1] = first[i] + source_parts(&d->params[i].source);
  tfm_checkpoint *c = tfm_calloc(1, sizeof *c);
  const tfm_tensor **bound =
      first ? tfm_calloc(first[d->num_params] ? first[d->num_params] : 1,
                         sizeof *bound)
            : NULL;
  /* The MXFP4 views of the parameters that read one, and the FP8 views of
   * the tensors read so (one for each entry of `bound`). */
  mxfp4_tensor *mxfp4 =
      tfm_calloc(d->num_params ? d->num_params : 1, sizeof *mxfp4);
  fp8_tensor *fp8 =
      first ? tfm_calloc(first[d->num_params] ? first[d->num_params] : 1,
                         sizeof *fp8)
            : NULL;
  if (!c || !bound || !mxfp4 || !fp8) {
    free(first);
    free(c);
    free(bound);
    free(mxfp4);
    free(fp8);
    return tfm_fail(TFM_ERR_MEMORY, "out of memory loading weights");
  }
  tfm_status s = tfm_checkpoint_open(paths, num_paths, c);
  char *used = NULL;
  const tfm_tensor **plain = NULL;
  tfm_tensor *plain_views = NULL;
  float **plain_buffers = NULL;
  tfm_description saved;
  tfm_param_desc *saved_params = NULL;
  if (s == TFM_OK)
    s = tfm_saved_weights_description(c, d, &saved, &saved_params);
  if (s != TFM_OK)
    goto done;
  if (saved_params) {
    /* Weights saved by this model: every parameter under its own name,
     * one tensor each. */
    d = &saved;
    for (size_t i = 0; i < d->num_params; ++i)
      first[i + 1] = first[i] + 1;
  }
  used = tfm_calloc(c->count ? c->count : 1, 1);
  if (!used) {
    s = tfm_fail(TFM_ERR_MEMORY, "out of memory loading weights");
    goto done;
  }
  /* Check everything first and report every problem. */
  tfm_fail(TFM_ERR_MISMATCH,
           "%s: the weights do not match model '%s':", c->label, d->name);
  if (bind_params(d, c, bound, first, used, mxfp4, fp8)) {
    s = TFM_ERR_MISMATCH;
    goto done;
  }
  tfm_error_clear();
  if ((s = unused_warning(d, c, used, warnings)) != TFM_OK)
    goto done;
  /* Room for the most tensors one parameter reads, as plain_tensors
   * gives them. */
  size_t most = 1;
  for (size_t i = 0; i < d->num_params; ++i)
    if (first[i + 1] - first[i] > most)
      most = first[i + 1] - first[i];
  plain = tfm_calloc(most, sizeof *plain);
  plain_views = tfm_calloc(most, sizeof *plain_views);
  plain_buffers = tfm_calloc(most, sizeof *plain_buffers);
  if (!plain || !plain_views || !plain_buffers) {
    s = tfm_fail(TFM_ERR_MEMORY, "out of memory loading weights");
    goto done;
  }
  /* The ggml type of the last weight in ggml blocks, for its type entry
   * (which follows its rows); whether one is read in place. */
  int32_t ggml_type = 0;
  int keep_mapped = 0;
  for (size_t i = 0; i < w->count; ++i) {
    size_t index = d->abi[i].index, parts = first[index + 1] - first[index];
    const tfm_param_desc *p = &d->params[index];
    const tfm_tensor **src = bound + first[index];
    /* A tensor stored in parts (slots 1.., slot 0 empty) is assembled from
     * them; a source that has parts but found the tensor whole reads it
     * alone. */
    int assembled = p->source.num_parts && !src[0];
    int one = p->source.num_parts ? !assembled : parts == 1;
    void *ggml = NULL;
    /* A GGUF tensor's blocks as they lie in the file's mapping: read in
     * place, the checkpoint kept open. */
    if (d->abi[i].ggml == TFM_ABI_GGML_ROWS && one && !d->cuda) {
      const void *in_place =
          tfm_ggml_rows_in_place(p, bound[first[index]], &ggml_type);
      if (in_place) {
        w->table[i] = (void *)(uintptr_t)in_place; /* only read */
        keep_mapped = 1;
        continue;
      }
    }
    if (d->abi[i].ggml == TFM_ABI_GGML_TYPE)
      ggml = tfm_ggml_type_buffer(ggml_type);
    else if (d->abi[i].ggml == TFM_ABI_GGML_ROWS && one)
      ggml = tfm_ggml_rows_as_stored(p, bound[first[index]], &ggml_type);
    if (ggml) {
      w->host[i] = ggml;
      w->table[i] = ggml;
      release(bound[first[index]]);
      continue;
    }
    int ok = plain_tensors(src, parts, plain, plain_views, plain_buffers);
    parts_tensor whole;
    const tfm_tensor *from = &whole.view;
    if (ok && assembled) {
      memset(&whole, 0, sizeof whole);
      whole.view.dtype = TFM_PARTS;
      whole.view.rank = 2;
      whole.view.shape[0] = p->source.shape[0];
      whole.view.shape[1] = p->source.shape[1];
      whole.source = &p->source;
      for (size_t k = 0; k < p->source.num_parts; ++k) {
        const struct tfm_source_part *pt = &p->source.parts[k];
        whole.parts[k] = plain[1 + k];
        whole.group_rows += pt->shape[pt->transpose ? 2 : 1];
      }
    }
    w->host[i] = ok ? convert(assembled ? &from : plain, p, d->abi[i].panel,
                              d->tp_rank, d->tensor_parallel)
                    : NULL;
    if (d->abi[i].panel > 0)
      w->host[i] = repack_param(w->host[i], p, &d->abi[i]);
    if (d->abi[i].ggml == TFM_ABI_GGML_ROWS)
      w->host[i] = tfm_ggml_rows_of(w->host[i], p->shape[0], p->shape[1],
                                    d->ggml_quantize, &ggml_type);
    for (size_t k = 0; k < parts; ++k)
      free(plain_buffers[k]);
    for (size_t k = first[index]; k < first[index + 1]; ++k)
      release(bound[k]);
    if (!w->host[i]) {
      s = tfm_fail(TFM_ERR_MEMORY, "out of memory loading weights");
      goto done;
    }
    w->table[i] = w->host[i];
  }
  /* The files read, which tfm_weights_save must not write over. */
  w->read_dev = tfm_calloc(c->num_files ? c->num_files : 1, sizeof(uint64_t));
  w->read_ino = tfm_calloc(c->num_files ? c->num_files : 1, sizeof(uint64_t));
  if (!w->read_dev || !w->read_ino) {
    s = tfm_fail(TFM_ERR_MEMORY, "out of memory loading weights");
    goto done;
  }
  for (size_t k = 0; k < c->num_files; ++k) {
    struct stat st;
    if (stat(c->real[k], &st) == 0) {
      w->read_dev[w->num_read] = (uint64_t)st.st_dev;
      w->read_ino[w->num_read++] = (uint64_t)st.st_ino;
    }
  }
done:
  free(saved_params);
  if (s != TFM_OK) {
    tfm_weights_clear(w);
    free(*warnings);
    *warnings = NULL;
  }
  if (s == TFM_OK && keep_mapped) {
    w->mapped = c;
  } else {
    tfm_checkpoint_close(c);
    free(c);
  }
  free(bound);
  free(mxfp4);
  free(fp8);
  free(first);
  free(used);
  free(plain);
  free(plain_views);
  free(plain_buffers);
  return s;
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* The state of a splitmix stream seeded with `s0` after `k` draws: each
 * draw adds the same constant, so any element of a stream can be reached
 * at once. */
static uint64_t splitmix_skip(uint64_t s0, uint64_t k) {
  return s0 + k * 0x9E3779B97F4A7C15ULL;
}

/* The canonical values of parameter `p`: deterministic per name; "ones"
 * (norm scales) are 1, "zeros" (biases) 0, "normal" the rest, uniform with
 * standard deviation 0.02. Element k of the whole tensor (canonical order)
 * is draw k of a splitmix stream, so that the block of a sharded parameter
 * that rank `rank` of `ranks` holds is exactly that part of what one
 * process makes; padding is zero. */
static float *synthesize(const tfm_param_desc *p, uint64_t seed, int32_t rank,
                         int32_t ranks) {
  shard_view v;
  if (!shard_view_init(&v, p, rank, ranks)) {
    shard_view_free(&v);
    return NULL;
  }
  float *d = tfm_aligned_alloc((size_t)(v.rows * v.cols) * sizeof(float));
  if (!d) {
    shard_view_free(&v);
    return NULL;
  }
  uint64_t s0 = seed;
  for (const char *c = p->name; *c; ++c)
    s0 = s0 * 131 + (unsigned char)*c;
  for (int64_t r = 0; r < v.rows; ++r) {
    int64_t fr = v.row_map ? v.row_map[r] : r;
    for (int64_t c = 0; c < v.cols; ++c) {
      int64_t fc = v.col_map ? v.col_map[c] : c;
      float *x = &d[r * v.cols + c];
      if (fr < 0 || fc < 0) {
        *x = 0.0f; /* padding */
        continue;
      }
      if (p->synthetic != TFM_SYNTHETIC_NORMAL) {
        *x = p->synthetic == TFM_SYNTHETIC_ONES ? 1.0f : 0.0f;
        continue;
      }
      uint64_t s = splitmix_skip(s0, (uint64_t)(fr * v.full_cols + fc));
      double u = (double)(splitmix(&s) >> 11) / 9007199254740992.0;
      *x = (float)((u - 0.5) * 0.0693);
    }
  }
  shard_view_free(&v);
  return d;
}

tfm_status tfm_weights_synthesize(tfm_weights *w, const tfm_description *d,
                                  uint64_t seed) {
  tfm_weights_clear(w);
  int32_t ggml_type = 0;
  for (size_t i = 0; i < w->count; ++i) {
    const tfm_param_desc *p = &d->params[d->abi[i].index];
    if (d->abi[i].ggml == TFM_ABI_GGML_TYPE) {
      w->host[i] = w->table[i] = tfm_ggml_type_buffer(ggml_type);
      if (!w->host[i]) {
        tfm_weights_clear(w);
        return tfm_fail(TFM_ERR_MEMORY, "out of memory for random weights");
      }
      continue;
    }
    float *values = synthesize(p, seed, d->tp_rank, d->tensor_parallel);
    if (d->abi[i].ggml == TFM_ABI_GGML_ROWS)
      values = tfm_ggml_rows_of(values, p->shape[0], p->shape[1],
                                d->ggml_quantize, &ggml_type);
    if (values && d->abi[i].panel) {
      /* Packed and plain copies of one parameter must hold the same
       * values: pack from the values generated in canonical order (this
       * rank's block, as a whole tensor of its own). */
      packed_shape ps = packed_shape_of(p);
      float *packed = pack_stack(values, ps.stacks, ps.n, ps.k, d->abi[i].panel,
                                 packing_of(&d->abi[i]));
      free(values);
      values = packed;
    }
    if (!values) {
      tfm_weights_clear(w);
      return tfm_fail(TFM_ERR_MEMORY, "out of memory for random weights");
    }
    w->host[i] = values;
    w->table[i] = values;
  }
  return TFM_OK;
}
