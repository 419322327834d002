/*===- weights.c - a model's weights: loaded, checked, packed, synthesized ===*
 *
 * A safetensors file is bound to the description's parameter table by name
 * and checked as a whole before anything is converted: every missing,
 * unexpected or mis-shaped tensor is reported. Each entry of the ABI
 * parameter list then gets an f32 host copy, packed in panels where the
 * entry says so.
 *===----------------------------------------------------------------------===*/
#include "internal.h"

#include <stdlib.h>
#include <string.h>

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

int64_t tfm_weights_numel(const tfm_description *d, size_t i) {
  const tfm_param_desc *p = &d->params[d->abi[i].index];
  int32_t panel = d->abi[i].panel;
  if (panel > 0 && p->rank == 2)
    return (p->shape[0] + panel - 1) / panel * panel * p->shape[1];
  return param_numel(p);
}

/* Converts `src` (any float dtype) into a new f32 buffer; with `panel` > 0,
 * packs a 2-D [N, K] weight as [ceil(N/panel), K, panel]: element (n, k) goes
 * to [n / panel][k][n % panel], and the padding of the last panel is zero. */
static float *to_f32(const tfm_tensor *src, int32_t panel) {
  int64_t n = tfm_tensor_numel(src);
  int64_t rows = src->rank == 2 ? src->shape[0] : 1;
  int64_t cols = src->rank == 2 ? src->shape[1] : n;
  int64_t padded = panel > 0 ? (rows + panel - 1) / panel * panel * cols : n;
  float *dst = tfm_aligned_alloc((size_t)padded * sizeof(float));
  if (!dst)
    return NULL;
  if (padded != n)
    memset(dst, 0, (size_t)padded * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (src->dtype == TFM_F32)
      memcpy(&v, (const char *)src->data + 4 * i, 4);
    else {
      uint16_t h;
      memcpy(&h, (const char *)src->data + 2 * i, 2);
      v = src->dtype == TFM_F16 ? tfm_f16_to_f32(h) : tfm_bf16_to_f32(h);
    }
    if (panel > 0) {
      int64_t r = i / cols, c = i % cols;
      dst[(r / panel) * cols * panel + c * panel + r % panel] = v;
    } else {
      dst[i] = v;
    }
  }
  return dst;
}

/* Reports every difference between the file and the parameter table after
 * the message already recorded; returns how many there are. */
static int report_mismatches(const tfm_description *d,
                             const tfm_safetensors *st) {
  int problems = 0;
  for (size_t i = 0; i < d->num_params; ++i) {
    const tfm_param_desc *p = &d->params[i];
    char want[TFM_SHAPE_STR_SIZE], got[TFM_SHAPE_STR_SIZE];
    tfm_shape_str(p->rank, p->shape, want, sizeof want);
    const tfm_tensor *v = tfm_safetensors_find(st, p->name);
    if (!v) {
      tfm_error_append("\n  missing tensor '%s' %s", p->name, want);
      problems++;
      continue;
    }
    tfm_shape_str(v->rank, v->shape, got, sizeof got);
    int same = v->rank == p->rank;
    for (int32_t k = 0; same && k < v->rank; ++k)
      same = v->shape[k] == p->shape[k];
    if (!same) {
      tfm_error_append("\n  tensor '%s' has shape %s, expected %s", p->name,
                       got, want);
      problems++;
    } else if (v->dtype != TFM_F32 && v->dtype != TFM_F16 &&
               v->dtype != TFM_BF16) {
      tfm_error_append("\n  tensor '%s' has dtype %s, expected F32, F16 or "
                       "BF16",
                       p->name, tfm_dtype_name(v->dtype));
      problems++;
    }
  }
  for (size_t j = 0; j < tfm_safetensors_count(st); ++j) {
    const char *name = tfm_safetensors_name(st, j);
    int known = 0;
    for (size_t i = 0; i < d->num_params && !known; ++i)
      known = !strcmp(d->params[i].name, name);
    if (!known) {
      tfm_error_append("\n  unexpected tensor '%s' (not a parameter of the "
                       "model)",
                       name);
      problems++;
    }
  }
  return problems;
}

tfm_status tfm_weights_load(tfm_weights *w, const tfm_description *d,
                            const char *path) {
  tfm_weights_clear(w);
  tfm_safetensors *st;
  tfm_status s = tfm_safetensors_open(path, &st);
  if (s != TFM_OK)
    return s;
  /* Check everything first and report every problem. */
  tfm_fail(TFM_ERR_MISMATCH, "%s: the weights do not match model '%s':", path,
           d->name);
  if (report_mismatches(d, st)) {
    tfm_safetensors_close(st);
    return TFM_ERR_MISMATCH;
  }
  for (size_t i = 0; i < w->count; ++i) {
    const tfm_tensor *v =
        tfm_safetensors_find(st, d->params[d->abi[i].index].name);
    w->host[i] = to_f32(v, d->abi[i].panel);
    if (!w->host[i]) {
      tfm_safetensors_close(st);
      tfm_weights_clear(w);
      return tfm_fail(TFM_ERR_MEMORY, "out of memory loading weights");
    }
    w->table[i] = w->host[i];
  }
  tfm_safetensors_close(st);
  tfm_error_clear();
  return TFM_OK;
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* The canonical values of parameter `p`: deterministic per name; "ones"
 * (norm scales) are 1, "zeros" (biases) 0, "normal" the rest, uniform with
 * standard deviation 0.02. */
static float *synthesize(const tfm_param_desc *p, uint64_t seed) {
  int64_t n = param_numel(p);
  float *d = tfm_aligned_alloc((size_t)n * sizeof(float));
  if (!d)
    return NULL;
  uint64_t s = seed;
  for (const char *c = p->name; *c; ++c)
    s = s * 131 + (unsigned char)*c;
  for (int64_t k = 0; k < n; ++k) {
    double u = (double)(splitmix(&s) >> 11) / 9007199254740992.0;
    d[k] = p->synthetic == TFM_SYNTHETIC_ONES    ? 1.0f
           : p->synthetic == TFM_SYNTHETIC_ZEROS ? 0.0f
                                                 : (float)((u - 0.5) * 0.0693);
  }
  return d;
}

tfm_status tfm_weights_synthesize(tfm_weights *w, const tfm_description *d,
                                  uint64_t seed) {
  tfm_weights_clear(w);
  for (size_t i = 0; i < w->count; ++i) {
    const tfm_param_desc *p = &d->params[d->abi[i].index];
    float *values = synthesize(p, seed);
    if (values && d->abi[i].panel) {
      /* Packed and plain copies of one parameter must hold the same
       * values: pack from the values generated in canonical order. */
      tfm_tensor plain = {values, TFM_F32, p->rank, {0}};
      memcpy(plain.shape, p->shape, sizeof p->shape);
      float *packed = to_f32(&plain, d->abi[i].panel);
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
