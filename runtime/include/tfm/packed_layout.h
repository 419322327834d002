/*===- packed_layout.h - how linear weights are packed -------------*- C -*-===*
 *
 * The one description of the packed weights that a compiled model takes in
 * its parameter table (tfm_param_info's `panel` > 0) and that the runtime
 * writes as it loads a checkpoint (runtime/src/weights.c). The compiler
 * includes it too: the dialect's verifiers (tfm.unpack_weight,
 * tfm.linear_kernel, tfm.norm_kernel) accept exactly these shapes, and the
 * CPU GEMM (tfm-lower-kernels) reads these offsets. test/unit/
 * PackedLayoutTest.cpp checks the runtime's packing and the verifiers
 * against the functions below.
 *
 * A linear weight W [N, K] (N output columns, K inputs: PyTorch's
 * [out, in]) is cut into panels of `panel` output columns (W below; the
 * compiler picks two vector registers' width, tfm-model-abi panel-width).
 * Each panel is contiguous: the GEMM streams it while it keeps a tile of
 * the output in registers. A panel holds K in words of G values of one
 * column, G depending on the packing:
 *
 *   TFM_PACKING_F32         G = 1: [ceil(N / W), K, W] f32,
 *                           element (n, k) at [n / W][k][n % W].
 *   TFM_PACKING_BF16_PAIRS  G = 2: [ceil(N / W), ceil(K / 2), 2 W] bf16,
 *                           element (n, k) at [n / W][k / 2][2 (n % W) +
 *                           k % 2], rounded to nearest even: the operand
 *                           order of vdpbf16ps (AVX512_BF16).
 *   TFM_PACKING_INT8_QUADS  G = 4: [ceil(N / W), ceil(K / 4) + 2, 4 W]
 *                           bytes, element (n, k) at [n / W][k / 4][4 (n %
 *                           W) + k % 4], the operand order of vpdpbusd
 *                           (AVX512_VNNI). Column n is quantized with the
 *                           scale s = max_k |W[n, k]| / 127 to q = round(
 *                           W[n, k] / s) in -127..127 (0 for a zero
 *                           column); row ceil(K / 4) of its panel holds s
 *                           (f32) and row ceil(K / 4) + 1 the sum of its q
 *                           times 128 (i32), each at bytes 4 (n % W) ..
 *                           4 (n % W) + 3 of the row.
 *
 * Everything else is zero: the columns past N of the last panel and the
 * values past K of the last word. In the tables below, "elements" are of
 * the packing's element type (f32, bf16, bytes).
 *
 * The rows of A that multiply such a weight (the compiler's alone: a
 * tfm.norm_kernel writes them, a tfm.linear_kernel reads them) come in the
 * same words: f32 as they are; bf16 pairs, 2 ceil(K / 2) bf16; int8 quads,
 * 4 ceil(K / 4) bytes of round(x / s) + 128 (unsigned, s = the row's
 * max |x| / 127) and then s, 4 bytes (f32). A product of words is then
 * sum (q_a - 128) q_w s_a s_w = (dot(q_a, q_w) - 128 sum(q_w)) s_a s_w.
 *
 * Plain C99, static inline functions only: nothing to link.
 *===----------------------------------------------------------------------===*/
#ifndef TFM_PACKED_LAYOUT_H
#define TFM_PACKED_LAYOUT_H

#include <stdint.h>

/* How the panels hold K. The values are those of the compiler's
 * tfm::NormKernelOp::Packing. */
typedef enum tfm_packing {
  TFM_PACKING_F32 = 0,
  TFM_PACKING_BF16_PAIRS = 1,
  TFM_PACKING_INT8_QUADS = 2
} tfm_packing;

/* G: the values of K in one word of a column. */
static inline int64_t tfm_packed_group(tfm_packing packing) {
  return packing == TFM_PACKING_INT8_QUADS   ? 4
         : packing == TFM_PACKING_BF16_PAIRS ? 2
                                             : 1;
}

/* Rows of a panel past its words: 2 for int8 quads (scales, sums). */
static inline int64_t tfm_packed_extra_rows(tfm_packing packing) {
  return packing == TFM_PACKING_INT8_QUADS ? 2 : 0;
}

/* Dimension 0: the panels of a weight of `n` output columns. */
static inline int64_t tfm_packed_panels(int64_t n, int64_t panel) {
  return (n + panel - 1) / panel;
}

/* The words of a column: ceil(K / G), the GEMM's steps over K. */
static inline int64_t tfm_packed_steps(tfm_packing packing, int64_t k) {
  int64_t g = tfm_packed_group(packing);
  return (k + g - 1) / g;
}

/* Dimension 1: the rows of a panel, its words then the extra rows. */
static inline int64_t tfm_packed_rows(tfm_packing packing, int64_t k) {
  return tfm_packed_steps(packing, k) + tfm_packed_extra_rows(packing);
}

/* Where word `i` starts in a row: column i's word in a row of a panel,
 * the word of step i in a row of A (below). */
static inline int64_t tfm_packed_word_column(tfm_packing packing, int64_t i) {
  return tfm_packed_group(packing) * i;
}

/* Dimension 2: the elements of a row of a panel, G W. */
static inline int64_t tfm_packed_row_width(tfm_packing packing, int64_t panel) {
  return tfm_packed_word_column(packing, panel);
}

/* The elements of one panel. */
static inline int64_t tfm_packed_panel_numel(tfm_packing packing, int64_t k,
                                             int64_t panel) {
  return tfm_packed_rows(packing, k) * tfm_packed_row_width(packing, panel);
}

/* The elements of a packed weight [n, k]. */
static inline int64_t tfm_packed_numel(tfm_packing packing, int64_t n,
                                       int64_t k, int64_t panel) {
  return tfm_packed_panels(n, panel) *
         tfm_packed_panel_numel(packing, k, panel);
}

/* Where value `kk` of K of column `c` (< panel) of a panel lies in it. */
static inline int64_t tfm_packed_panel_offset(tfm_packing packing, int64_t c,
                                              int64_t kk, int64_t panel) {
  int64_t g = tfm_packed_group(packing);
  return kk / g * tfm_packed_row_width(packing, panel) +
         tfm_packed_word_column(packing, c) + kk % g;
}

/* Where element (n, kk) of a weight of K = `k` inputs lies. */
static inline int64_t tfm_packed_index(tfm_packing packing, int64_t n,
                                       int64_t kk, int64_t k, int64_t panel) {
  return n / panel * tfm_packed_panel_numel(packing, k, panel) +
         tfm_packed_panel_offset(packing, n % panel, kk, panel);
}

/* Int8 quads: the rows of a panel of `steps` words of quads that hold the
 * columns' scales (f32) and their sums times 128 (i32). */
static inline int64_t tfm_packed_scales_row(int64_t steps) { return steps; }
static inline int64_t tfm_packed_sums_row(int64_t steps) { return steps + 1; }

/* Int8 quads: the byte of a panel at which the scale of its column `c`
 * starts (a weight of K = `k` inputs); its sum starts a row later. */
static inline int64_t tfm_packed_scale_offset(int64_t c, int64_t k,
                                              int64_t panel) {
  int64_t steps = tfm_packed_steps(TFM_PACKING_INT8_QUADS, k);
  return tfm_packed_scales_row(steps) * 4 * panel + 4 * c;
}
static inline int64_t tfm_packed_sum_offset(int64_t c, int64_t k,
                                            int64_t panel) {
  int64_t steps = tfm_packed_steps(TFM_PACKING_INT8_QUADS, k);
  return tfm_packed_sums_row(steps) * 4 * panel + 4 * c;
}

/* From a packed shape [P, R, X] back to W = X / G and the steps over K,
 * R less the extra rows: K itself is known only up to its padding, but the
 * layout depends on K only through the steps, so that any K of as many
 * steps (G steps, say) may stand for it in the functions above. */
static inline int64_t tfm_packed_panel_of(tfm_packing packing,
                                          int64_t row_width) {
  return row_width / tfm_packed_group(packing);
}
static inline int64_t tfm_packed_steps_of(tfm_packing packing, int64_t rows) {
  return rows - tfm_packed_extra_rows(packing);
}

/* A row of A packed for such a weight: the columns (elements) of its K
 * values padded to whole words; for int8 quads, the row's scale (4 bytes)
 * follows at that column. */
static inline int64_t tfm_packed_input_values(tfm_packing packing, int64_t k) {
  return tfm_packed_word_column(packing, tfm_packed_steps(packing, k));
}
/* All its columns, the scale included. */
static inline int64_t tfm_packed_input_columns(tfm_packing packing, int64_t k) {
  return tfm_packed_input_values(packing, k) +
         (packing == TFM_PACKING_INT8_QUADS ? 4 : 0);
}

#endif /* TFM_PACKED_LAYOUT_H */
