/*===- model.c - a compiled model: metadata, weights, validated runs ------===*/
#define _DEFAULT_SOURCE
#include "internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct param {
  char *name;
  int32_t rank;
  int64_t shape[4]; /* canonical shape */
} param;

typedef struct abi_param {
  int32_t index; /* into params */
  int32_t panel; /* 0: as stored; else packed [ceil(N/panel), K, panel] */
  float *data;   /* host copy (CPU artifacts) */
  void *dev;     /* device copy in the compute dtype (CUDA artifacts) */
} abi_param;

typedef struct io {
  char *name;
  int32_t dtype;
  int32_t rank;
  int64_t shape[TFM_MAX_RANK];
} io;

struct tfm_model {
  char *name;
  int64_t vocab, context, param_count;
  tfm_forward_fn forward;
  param *params;
  size_t num_params;
  abi_param *abi;
  size_t num_abi;
  void **table; /* pointer table for the forward pass */
  io inputs[8];
  size_t num_inputs;
  io output;
  int loaded;
  int cuda;              /* a CUDA artifact: weights and tensors on device */
  int32_t compute_dtype; /* the GPU's float type (TFM_F32/F16/BF16) */
  void *io_dev[9];       /* device buffers of the inputs and the output, */
  size_t io_bytes[9];    /* kept between runs and grown when needed */
  json_t *json;
};

static tfm_status parse_io(json_t *j, io *out) {
  json_t *name = json_object_get(j, "name"), *dt = json_object_get(j, "dtype"),
         *shape = json_object_get(j, "shape");
  if (!json_is_string(name) || !json_is_string(dt) || !json_is_array(shape) ||
      json_array_size(shape) > TFM_MAX_RANK)
    return tfm_fail(TFM_ERR_FORMAT, "model description: malformed input");
  out->name = strdup(json_string_value(name));
  out->dtype = !strcmp(json_string_value(dt), "int32") ? TFM_I32 : TFM_F32;
  out->rank = (int32_t)json_array_size(shape);
  for (size_t i = 0; i < json_array_size(shape); ++i) {
    json_t *d = json_array_get(shape, i);
    if (json_is_integer(d))
      out->shape[i] = json_integer_value(d);
    else {
      const char *s = json_string_value(d);
      out->shape[i] =
          s && !strcmp(s, "B") ? -1 : (s && !strcmp(s, "T") ? -2 : -3);
    }
  }
  return TFM_OK;
}

tfm_status tfm_model_create(const char *model_json, tfm_forward_fn forward,
                            tfm_model **out) {
  *out = NULL;
  json_error_t err;
  json_t *root = json_loads(model_json, 0, &err);
  if (!root)
    return tfm_fail(TFM_ERR_FORMAT, "model description: %s", err.text);
  tfm_model *m = calloc(1, sizeof *m);
  m->json = root;
  m->forward = forward;
  m->name = strdup(json_string_value(json_object_get(root, "name")) ?: "model");
  m->vocab = json_integer_value(json_object_get(root, "vocab"));
  m->context = json_integer_value(json_object_get(root, "context"));
  m->param_count = json_integer_value(json_object_get(root, "parameter_count"));
  json_t *ps = json_object_get(root, "parameters");
  json_t *abi = json_object_get(root, "abi_params");
  json_t *ins = json_object_get(root, "inputs");
  json_t *outs = json_object_get(root, "outputs");
  if (!json_is_array(ps) || !json_is_array(abi) || !json_is_array(ins) ||
      !json_is_array(outs) || json_array_size(outs) != 1 ||
      json_array_size(ins) > 8) {
    tfm_model_destroy(m);
    return tfm_fail(TFM_ERR_FORMAT, "model description: missing tables");
  }
  m->num_params = json_array_size(ps);
  m->params = calloc(m->num_params, sizeof(param));
  for (size_t i = 0; i < m->num_params; ++i) {
    json_t *p = json_array_get(ps, i);
    json_t *shape = json_object_get(p, "shape");
    m->params[i].name = strdup(json_string_value(json_object_get(p, "name")));
    m->params[i].rank = (int32_t)json_array_size(shape);
    for (size_t d = 0; d < json_array_size(shape) && d < 4; ++d)
      m->params[i].shape[d] = json_integer_value(json_array_get(shape, d));
  }
  m->num_abi = json_array_size(abi);
  m->abi = calloc(m->num_abi + 1, sizeof(abi_param));
  m->table = calloc(m->num_abi + 1, sizeof(void *));
  for (size_t i = 0; i < m->num_abi; ++i) {
    json_t *a = json_array_get(abi, i);
    const char *name = json_string_value(json_object_get(a, "name"));
    m->abi[i].index = -1;
    for (size_t j = 0; j < m->num_params; ++j)
      if (name && !strcmp(m->params[j].name, name))
        m->abi[i].index = (int32_t)j;
    m->abi[i].panel = (int32_t)json_integer_value(json_object_get(a, "panel"));
    if (m->abi[i].index < 0) {
      tfm_model_destroy(m);
      return tfm_fail(TFM_ERR_FORMAT, "model description: unknown parameter");
    }
  }
  const char *target = json_string_value(json_object_get(root, "target"));
  if (target && !strcmp(target, "cuda")) {
    const char *dt = json_string_value(json_object_get(root, "compute_dtype"));
    m->cuda = 1;
    m->compute_dtype = dt && !strcmp(dt, "f16")    ? TFM_F16
                       : dt && !strcmp(dt, "bf16") ? TFM_BF16
                                                   : TFM_F32;
    tfm_status s = tfm_cuda_init();
    if (s != TFM_OK) {
      tfm_model_destroy(m);
      return s; /* "no CUDA driver found (libcuda.so.1)", or the driver's */
    }
  }
  m->num_inputs = json_array_size(ins);
  for (size_t i = 0; i < m->num_inputs; ++i)
    if (parse_io(json_array_get(ins, i), &m->inputs[i]) != TFM_OK) {
      tfm_model_destroy(m);
      return TFM_ERR_FORMAT;
    }
  if (parse_io(json_array_get(outs, 0), &m->output) != TFM_OK) {
    tfm_model_destroy(m);
    return TFM_ERR_FORMAT;
  }
  *out = m;
  return TFM_OK;
}

static void free_weights(tfm_model *m) {
  for (size_t i = 0; i < m->num_abi; ++i) {
    free(m->abi[i].data);
    m->abi[i].data = NULL;
    tfm_cuda_free(m->abi[i].dev);
    m->abi[i].dev = NULL;
    m->table[i] = NULL;
  }
  m->loaded = 0;
}

/* `n` f32 values as `dtype` (f16 or bf16) in a new buffer. */
static uint16_t *to_dtype(const float *src, int64_t n, int32_t dtype) {
  uint16_t *d = malloc((size_t)n * 2 + 2);
  if (d)
    for (int64_t i = 0; i < n; ++i)
      d[i] =
          dtype == TFM_F16 ? tfm_f32_to_f16(src[i]) : tfm_f32_to_bf16(src[i]);
  return d;
}

/* Elements of ABI parameter i as passed (packed panels are padded). */
static int64_t abi_numel(const tfm_model *m, size_t i) {
  const param *p = &m->params[m->abi[i].index];
  int64_t n = 1;
  for (int32_t d = 0; d < p->rank; ++d)
    n *= p->shape[d];
  int32_t panel = m->abi[i].panel;
  if (panel > 0 && p->rank == 2)
    n = (p->shape[0] + panel - 1) / panel * panel * p->shape[1];
  return n;
}

/* CUDA artifacts: converts the host weights to the compute dtype and
 * uploads them once; the pointer table then holds device addresses. */
static tfm_status upload_weights(tfm_model *m) {
  if (!m->cuda)
    return TFM_OK;
  size_t esize = tfm_dtype_size(m->compute_dtype);
  for (size_t i = 0; i < m->num_abi; ++i) {
    int64_t n = abi_numel(m, i);
    uint16_t *half = NULL; /* f32 weights go up as they are */
    if (m->compute_dtype != TFM_F32 &&
        !(half = to_dtype(m->abi[i].data, n, m->compute_dtype))) {
      free_weights(m);
      return tfm_fail(TFM_ERR_MEMORY, "out of memory converting weights");
    }
    const void *host = half ? (const void *)half : m->abi[i].data;
    tfm_status s = tfm_cuda_alloc(&m->abi[i].dev, (size_t)n * esize);
    if (s == TFM_OK)
      s = tfm_cuda_copy(m->abi[i].dev, host, (size_t)n * esize);
    free(half);
    free(m->abi[i].data);
    m->abi[i].data = NULL;
    if (s != TFM_OK) {
      free_weights(m);
      return s;
    }
    m->table[i] = m->abi[i].dev;
  }
  return TFM_OK;
}

void tfm_model_destroy(tfm_model *m) {
  if (!m)
    return;
  free_weights(m);
  for (size_t i = 0; i < 9; ++i)
    tfm_cuda_free(m->io_dev[i]);
  for (size_t i = 0; i < m->num_params; ++i)
    free(m->params[i].name);
  for (size_t i = 0; i < m->num_inputs; ++i)
    free(m->inputs[i].name);
  free(m->output.name);
  free(m->params);
  free(m->abi);
  free(m->table);
  free(m->name);
  json_decref(m->json);
  free(m);
}

const char *tfm_model_name(const tfm_model *m) { return m->name; }
int64_t tfm_model_vocab(const tfm_model *m) { return m->vocab; }
int64_t tfm_model_context(const tfm_model *m) { return m->context; }
size_t tfm_model_num_inputs(const tfm_model *m) { return m->num_inputs; }
const char *tfm_model_input_name(const tfm_model *m, size_t i) {
  return i < m->num_inputs ? m->inputs[i].name : NULL;
}

static int64_t param_numel(const param *p) {
  int64_t n = 1;
  for (int32_t i = 0; i < p->rank; ++i)
    n *= p->shape[i];
  return n;
}

/* Converts `src` (any float dtype) into a new f32 buffer; with `panel` > 0,
 * packs a 2-D [N, K] weight as [ceil(N/panel), K, panel]: element (n, k) goes
 * to [n / panel][k][n % panel], and the padding of the last panel is zero. */
static float *to_f32(const tfm_tensor *src, int32_t panel) {
  int64_t n = tfm_tensor_numel(src);
  int64_t rows = src->rank == 2 ? src->shape[0] : 1;
  int64_t cols = src->rank == 2 ? src->shape[1] : n;
  int64_t padded = panel > 0 ? (rows + panel - 1) / panel * panel * cols : n;
  float *dst = aligned_alloc(64, (((size_t)padded * 4 + 63) / 64) * 64 + 64);
  if (!dst)
    return NULL;
  if (padded != n)
    memset(dst, 0, (size_t)padded * 4);
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

tfm_status tfm_model_load_weights(tfm_model *m, const char *path) {
  free_weights(m);
  tfm_safetensors *st;
  tfm_status s = tfm_safetensors_open(path, &st);
  if (s != TFM_OK)
    return s;
  /* Check everything first and report every problem. */
  int problems = 0;
  char head[1024];
  snprintf(head, sizeof head, "%s: the weights do not match model '%s':", path,
           m->name);
  tfm_fail(TFM_ERR_MISMATCH, "%s", head);
  for (size_t i = 0; i < m->num_params; ++i) {
    const param *p = &m->params[i];
    char want[128], got[128];
    tfm_shape_str(p->rank, p->shape, want, sizeof want);
    const tfm_tensor *v = tfm_safetensors_find(st, p->name);
    if (!v) {
      tfm_error_append("\n  missing tensor '%s' %s", p->name, want);
      problems++;
      continue;
    }
    tfm_shape_str(v->rank, v->shape, got, sizeof got);
    int same = v->rank == p->rank;
    for (int32_t d = 0; same && d < v->rank; ++d)
      same = v->shape[d] == p->shape[d];
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
    for (size_t i = 0; i < m->num_params && !known; ++i)
      known = !strcmp(m->params[i].name, name);
    if (!known) {
      tfm_error_append("\n  unexpected tensor '%s' (not a parameter of the "
                       "model)",
                       name);
      problems++;
    }
  }
  if (problems) {
    tfm_safetensors_close(st);
    return TFM_ERR_MISMATCH;
  }
  for (size_t i = 0; i < m->num_abi; ++i) {
    const tfm_tensor *v =
        tfm_safetensors_find(st, m->params[m->abi[i].index].name);
    m->abi[i].data = to_f32(v, m->abi[i].panel);
    if (!m->abi[i].data) {
      tfm_safetensors_close(st);
      free_weights(m);
      return tfm_fail(TFM_ERR_MEMORY, "out of memory loading weights");
    }
    m->table[i] = m->abi[i].data;
  }
  tfm_safetensors_close(st);
  s = upload_weights(m);
  if (s != TFM_OK)
    return s;
  m->loaded = 1;
  tfm_error_clear();
  return TFM_OK;
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

tfm_status tfm_model_random_weights(tfm_model *m, uint64_t seed) {
  free_weights(m);
  for (size_t i = 0; i < m->num_abi; ++i) {
    const param *p = &m->params[m->abi[i].index];
    int64_t n = param_numel(p);
    float *d = aligned_alloc(64, (((size_t)n * 4 + 63) / 64) * 64 + 64);
    if (!d) {
      free_weights(m);
      return tfm_fail(TFM_ERR_MEMORY, "out of memory for random weights");
    }
    /* Deterministic per name: norms start at 1, biases at 0, the rest
     * uniform with standard deviation 0.02. */
    uint64_t s = seed;
    for (const char *c = p->name; *c; ++c)
      s = s * 131 + (unsigned char)*c;
    int norm = strstr(p->name, "norm.weight") != NULL;
    int bias = ends_with(p->name, ".bias");
    for (int64_t k = 0; k < n; ++k) {
      double u = (double)(splitmix(&s) >> 11) / 9007199254740992.0;
      d[k] = norm ? 1.0f : bias ? 0.0f : (float)((u - 0.5) * 0.0693);
    }
    m->abi[i].data = d;
    m->table[i] = d;
  }
  /* Packed and plain copies of one parameter must hold the same values:
   * pack from the values generated in canonical order. */
  for (size_t i = 0; i < m->num_abi; ++i) {
    if (!m->abi[i].panel)
      continue;
    const param *p = &m->params[m->abi[i].index];
    tfm_tensor plain = {m->abi[i].data, TFM_F32, p->rank, {0}};
    for (int32_t d = 0; d < p->rank; ++d)
      plain.shape[d] = p->shape[d];
    float *t = to_f32(&plain, m->abi[i].panel);
    if (!t) {
      free_weights(m);
      return tfm_fail(TFM_ERR_MEMORY, "out of memory for random weights");
    }
    free(m->abi[i].data);
    m->abi[i].data = t;
    m->table[i] = t;
  }
  tfm_status s = upload_weights(m);
  if (s != TFM_OK)
    return s;
  m->loaded = 1;
  return TFM_OK;
}

/* A forward pass on the GPU: inputs go to device buffers (float inputs in
 * the compute dtype), the generated host code launches the kernels, and
 * the output comes back as f32. Every driver error is returned. */
/* Device buffer `i` of the inputs/output with at least `bytes`. */
static tfm_status io_buffer(tfm_model *m, size_t i, size_t bytes) {
  if (m->io_dev[i] && m->io_bytes[i] >= bytes)
    return TFM_OK;
  tfm_cuda_free(m->io_dev[i]);
  m->io_dev[i] = NULL;
  m->io_bytes[i] = 0;
  tfm_status s = tfm_cuda_alloc(&m->io_dev[i], bytes);
  if (s == TFM_OK)
    m->io_bytes[i] = bytes;
  return s;
}

static tfm_status run_cuda(tfm_model *m, const tfm_tensor *inputs,
                           tfm_tensor *output) {
  tfm_tensor dev_in[8];
  tfm_tensor dev_out = *output;
  size_t nbufs = 0;
  tfm_status s = TFM_OK;
  size_t fsize = tfm_dtype_size(m->compute_dtype);
  for (size_t i = 0; i < m->num_inputs && s == TFM_OK; ++i) {
    dev_in[i] = inputs[i];
    int64_t n = tfm_tensor_numel(&inputs[i]);
    int is_float = inputs[i].dtype == TFM_F32;
    size_t bytes = (size_t)n * (is_float ? fsize : 4);
    void *host = (void *)inputs[i].data, *conv = NULL;
    if (is_float && m->compute_dtype != TFM_F32) {
      host = conv = to_dtype(inputs[i].data, n, m->compute_dtype);
      if (!conv)
        s = tfm_fail(TFM_ERR_MEMORY, "out of memory converting inputs");
    }
    if (s == TFM_OK)
      s = io_buffer(m, nbufs, bytes);
    if (s == TFM_OK)
      s = tfm_cuda_copy(m->io_dev[nbufs], host, bytes);
    free(conv);
    dev_in[i].data = m->io_dev[nbufs++];
    if (is_float)
      dev_in[i].dtype = m->compute_dtype;
  }
  int64_t n = tfm_tensor_numel(output);
  if (s == TFM_OK)
    s = io_buffer(m, nbufs, (size_t)n * fsize);
  dev_out.data = m->io_dev[nbufs];
  dev_out.dtype = m->compute_dtype;
  if (s == TFM_OK) {
    m->forward((void *const *)m->table, dev_in, &dev_out);
    s = tfm_cuda_status();
  }
  if (s == TFM_OK) {
    if (m->compute_dtype == TFM_F32) {
      s = tfm_cuda_copy(output->data, dev_out.data, (size_t)n * 4);
    } else {
      uint16_t *h = malloc((size_t)n * 2 + 2);
      if (!h)
        s = tfm_fail(TFM_ERR_MEMORY, "out of memory for the output");
      else
        s = tfm_cuda_copy(h, dev_out.data, (size_t)n * 2);
      float *o = output->data;
      for (int64_t k = 0; s == TFM_OK && k < n; ++k)
        o[k] = m->compute_dtype == TFM_F16 ? tfm_f16_to_f32(h[k])
                                           : tfm_bf16_to_f32(h[k]);
      free(h);
    }
  }
  return s;
}

tfm_status tfm_model_run(tfm_model *m, const tfm_tensor *inputs,
                         tfm_tensor *output) {
  memset(output, 0, sizeof *output);
  if (!m->loaded)
    return tfm_fail(TFM_ERR_ARGUMENT, "model '%s' has no weights loaded",
                    m->name);
  int64_t sym[4] = {0, -1, -1, -1}; /* B, T, S by -1, -2, -3 */
  for (size_t i = 0; i < m->num_inputs; ++i) {
    const io *want = &m->inputs[i];
    const tfm_tensor *t = &inputs[i];
    char got[128];
    tfm_shape_str(t->rank, t->shape, got, sizeof got);
    if (t->dtype != want->dtype)
      return tfm_fail(TFM_ERR_MISMATCH, "input '%s' must be %s, got %s",
                      want->name, tfm_dtype_name(want->dtype),
                      tfm_dtype_name(t->dtype));
    if (t->rank != want->rank)
      return tfm_fail(TFM_ERR_MISMATCH,
                      "input '%s' must have rank %d, got rank %d (shape %s)",
                      want->name, want->rank, t->rank, got);
    for (int32_t d = 0; d < t->rank; ++d) {
      int64_t w = want->shape[d];
      if (w >= 0) {
        if (t->shape[d] != w)
          return tfm_fail(TFM_ERR_MISMATCH,
                          "input '%s' dimension %d must be %lld, got %lld",
                          want->name, d, (long long)w, (long long)t->shape[d]);
        continue;
      }
      int64_t *s = &sym[-w];
      if (w == -1 && i == 0)
        sym[1] = t->shape[d];
      else if (*s >= 0 && *s != t->shape[d])
        return tfm_fail(TFM_ERR_MISMATCH,
                        "input '%s' dimension %d is %lld but other inputs "
                        "say %lld",
                        want->name, d, (long long)t->shape[d], (long long)*s);
      *s = t->shape[d];
      if (w != -1 && t->shape[d] < 1)
        return tfm_fail(TFM_ERR_MISMATCH, "input '%s' has an empty sequence",
                        want->name);
      if (w != -1 && t->shape[d] > m->context)
        return tfm_fail(TFM_ERR_MISMATCH,
                        "input '%s' has %lld positions but the model's "
                        "context is %lld",
                        want->name, (long long)t->shape[d],
                        (long long)m->context);
    }
    if (sym[1] < 1)
      return tfm_fail(TFM_ERR_MISMATCH, "input '%s' has an empty batch",
                      want->name);
    int64_t n = tfm_tensor_numel(t);
    if (want->dtype == TFM_I32 && strstr(want->name, "lengths")) {
      int64_t limit = sym[2] >= 0 ? sym[2] : m->context;
      if (!strcmp(want->name, "src_lengths") && sym[3] >= 0)
        limit = sym[3];
      for (int64_t k = 0; k < n; ++k) {
        int32_t v = ((const int32_t *)t->data)[k];
        if (v < 0 || v > limit)
          return tfm_fail(TFM_ERR_MISMATCH,
                          "input '%s'[%lld] = %d is outside [0, %lld]",
                          want->name, (long long)k, v, (long long)limit);
      }
    } else if (want->dtype == TFM_I32) {
      for (int64_t k = 0; k < n; ++k) {
        int32_t v = ((const int32_t *)t->data)[k];
        if (v < 0 || v >= m->vocab)
          return tfm_fail(TFM_ERR_MISMATCH,
                          "input '%s' holds token id %d at flat index %lld, "
                          "outside the vocabulary [0, %lld)",
                          want->name, v, (long long)k, (long long)m->vocab);
      }
    } else {
      for (int64_t k = 0; k < n; ++k)
        if (!isfinite(((const float *)t->data)[k]))
          return tfm_fail(TFM_ERR_MISMATCH,
                          "input '%s' holds a NaN or infinity at flat index "
                          "%lld",
                          want->name, (long long)k);
    }
  }
  int64_t shape[TFM_MAX_RANK];
  for (int32_t d = 0; d < m->output.rank; ++d) {
    int64_t w = m->output.shape[d];
    shape[d] = w >= 0 ? w : sym[-w];
  }
  tfm_status s = tfm_tensor_alloc(output, TFM_F32, m->output.rank, shape);
  if (s != TFM_OK)
    return s;
  if (m->cuda) {
    s = run_cuda(m, inputs, output);
    if (s != TFM_OK)
      tfm_tensor_free(output);
    return s;
  }
  m->forward((void *const *)m->table, inputs, output);
  return TFM_OK;
}

void tfm_model_print_info(const tfm_model *m, FILE *out) {
  fprintf(out, "model %s: %lld parameters in %zu tensors\n", m->name,
          (long long)m->param_count, m->num_params);
  fprintf(out, "inputs:\n");
  const char *sym[] = {"", "B", "T", "S"};
  for (size_t i = 0; i <= m->num_inputs; ++i) {
    const io *x = i < m->num_inputs ? &m->inputs[i] : &m->output;
    if (i == m->num_inputs)
      fprintf(out, "output:\n");
    fprintf(out, "  %-12s %-8s [", x->name, tfm_dtype_name(x->dtype));
    for (int32_t d = 0; d < x->rank; ++d) {
      if (x->shape[d] >= 0)
        fprintf(out, "%s%lld", d ? ", " : "", (long long)x->shape[d]);
      else
        fprintf(out, "%s%s", d ? ", " : "", sym[-x->shape[d]]);
    }
    fprintf(out, "]\n");
  }
  fprintf(out, "context: %lld positions\nparameters:\n", (long long)m->context);
  for (size_t i = 0; i < m->num_params; ++i) {
    char s[128];
    tfm_shape_str(m->params[i].rank, m->params[i].shape, s, sizeof s);
    fprintf(out, "  %-40s %s\n", m->params[i].name, s);
  }
}
