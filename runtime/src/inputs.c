/*===- inputs.c - checking inputs against the model description -----------===*
 *
 * Inputs come in the description's order. The symbolic dimensions B, T and
 * S take their sizes from the first input that has them and must agree
 * everywhere else; sequences must fit the context. Values are checked by
 * the input's usage: token ids against the vocabulary, lengths against the
 * sequence they describe, floats for NaN and infinity.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <math.h>
#include <string.h>

/* Sizes of the symbols, indexed by -TFM_DIM_*; -1 while unknown. */
typedef struct symbols {
  int64_t size[TFM_NUM_DIM_SYMBOLS + 1];
} symbols;

static tfm_status check_shape(const tfm_description *d, const tfm_io_desc *want,
                              const tfm_tensor *t, symbols *sym) {
  char got[TFM_SHAPE_STR_SIZE];
  tfm_shape_str(t->rank, t->shape, got, sizeof got);
  if (t->dtype != want->dtype)
    return tfm_fail(TFM_ERR_MISMATCH, "input '%s' must be %s, got %s",
                    want->name, tfm_dtype_name(want->dtype),
                    tfm_dtype_name(t->dtype));
  if (t->rank != want->rank)
    return tfm_fail(TFM_ERR_MISMATCH,
                    "input '%s' must have rank %d, got rank %d (shape %s)",
                    want->name, want->rank, t->rank, got);
  int batched = 0;
  for (int32_t k = 0; k < t->rank; ++k) {
    int64_t w = want->shape[k], n = t->shape[k];
    if (w >= 0) {
      if (n != w)
        return tfm_fail(TFM_ERR_MISMATCH,
                        "input '%s' dimension %d must be %lld, got %lld",
                        want->name, k, (long long)w, (long long)n);
      continue;
    }
    int64_t *s = &sym->size[-w];
    if (*s >= 0 && *s != n)
      return tfm_fail(TFM_ERR_MISMATCH,
                      "input '%s' dimension %d is %lld but other inputs "
                      "say %lld",
                      want->name, k, (long long)n, (long long)*s);
    *s = n;
    if (w == TFM_DIM_B) {
      batched = 1;
      continue;
    }
    if (n < 1)
      return tfm_fail(TFM_ERR_MISMATCH, "input '%s' has an empty sequence",
                      want->name);
    if (n > d->context)
      return tfm_fail(TFM_ERR_MISMATCH,
                      "input '%s' has %lld positions but the model's "
                      "context is %lld",
                      want->name, (long long)n, (long long)d->context);
  }
  if (batched && sym->size[-TFM_DIM_B] < 1)
    return tfm_fail(TFM_ERR_MISMATCH, "input '%s' has an empty batch",
                    want->name);
  return TFM_OK;
}

static tfm_status check_values(const tfm_description *d,
                               const tfm_io_desc *want, const tfm_tensor *t,
                               const symbols *sym) {
  int64_t n = tfm_tensor_numel(t);
  if (want->dtype == TFM_F32) {
    for (int64_t k = 0; k < n; ++k)
      if (!isfinite(((const float *)t->data)[k]))
        return tfm_fail(TFM_ERR_MISMATCH,
                        "input '%s' holds a NaN or infinity at flat index "
                        "%lld",
                        want->name, (long long)k);
    return TFM_OK;
  }
  const int32_t *v = t->data;
  if (want->usage == TFM_USAGE_LENGTHS) {
    /* Up to the length of the sequences described, or the context. */
    int64_t limit = d->context;
    if (want->lengths_dim && sym->size[-want->lengths_dim] >= 0)
      limit = sym->size[-want->lengths_dim];
    for (int64_t k = 0; k < n; ++k)
      if (v[k] < 0 || v[k] > limit)
        return tfm_fail(TFM_ERR_MISMATCH,
                        "input '%s'[%lld] = %d is outside [0, %lld]",
                        want->name, (long long)k, v[k], (long long)limit);
    return TFM_OK;
  }
  if (want->usage == TFM_USAGE_TYPES) {
    for (int64_t k = 0; k < n; ++k)
      if (v[k] < 0 || v[k] >= want->range)
        return tfm_fail(TFM_ERR_MISMATCH,
                        "input '%s' holds token type %d at flat index %lld, "
                        "outside [0, %lld)",
                        want->name, v[k], (long long)k, (long long)want->range);
    return TFM_OK;
  }
  if (want->usage == TFM_USAGE_TOKENS) {
    for (int64_t k = 0; k < n; ++k)
      if (v[k] < 0 || v[k] >= d->vocab)
        return tfm_fail(TFM_ERR_MISMATCH,
                        "input '%s' holds token id %d at flat index %lld, "
                        "outside the vocabulary [0, %lld)",
                        want->name, v[k], (long long)k, (long long)d->vocab);
  }
  return TFM_OK;
}

tfm_status tfm_inputs_check(const tfm_description *d, tfm_tensor *inputs,
                            int64_t out_shape[TFM_MAX_RANK]) {
  symbols sym;
  for (int i = 0; i <= TFM_NUM_DIM_SYMBOLS; ++i)
    sym.size[i] = -1;
  for (size_t i = 0; i < d->num_inputs; ++i) {
    if (d->inputs[i].optional && !inputs[i].data)
      continue;
    tfm_status s = check_shape(d, &d->inputs[i], &inputs[i], &sym);
    if (s == TFM_OK)
      s = check_values(d, &d->inputs[i], &inputs[i], &sym);
    if (s != TFM_OK)
      return s;
  }
  /* Optional inputs left out are zeros of the shape the others give. */
  for (size_t i = 0; i < d->num_inputs; ++i) {
    const tfm_io_desc *want = &d->inputs[i];
    if (!want->optional || inputs[i].data)
      continue;
    int64_t shape[TFM_MAX_RANK];
    for (int32_t k = 0; k < want->rank; ++k) {
      int64_t w = want->shape[k];
      shape[k] = w >= 0 ? w : sym.size[-w];
      if (shape[k] < 0)
        return tfm_fail(TFM_ERR_MISMATCH,
                        "input '%s' was left out and no other input gives "
                        "its dimension %d",
                        want->name, k);
    }
    tfm_status s = tfm_tensor_alloc(&inputs[i], want->dtype, want->rank, shape);
    if (s != TFM_OK)
      return s;
    memset(inputs[i].data, 0,
           (size_t)tfm_tensor_numel(&inputs[i]) * sizeof(int32_t));
  }
  /* The description guarantees that the inputs give every symbol. */
  for (int32_t k = 0; k < d->output.rank; ++k) {
    int64_t w = d->output.shape[k];
    out_shape[k] = w >= 0 ? w : sym.size[-w];
  }
  return TFM_OK;
}
