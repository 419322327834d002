/*===- model.c - a compiled model: the public tfm_model_* API -------------===*
 *
 * Glues the description (description.c), the weights (weights.c), the
 * input checks (inputs.c) and, for CUDA artifacts, the GPU (cuda.c) to the
 * compiled forward pass.
 *===----------------------------------------------------------------------===*/
#include "gguf.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

tfm_status tfm_model_create(const char *model_json, tfm_forward_fn forward,
                            tfm_model **out) {
  *out = NULL;
  tfm_model *m = tfm_calloc(1, sizeof *m);
  if (!m)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory creating the model");
  m->forward = forward;
  tfm_status s = tfm_description_parse(model_json, &m->desc);
  if (s == TFM_OK)
    s = tfm_weights_init(&m->weights, m->desc.num_abi);
  /* "no CUDA driver found (libcuda.so.1)", or the driver's message. */
  if (s == TFM_OK && m->desc.cuda)
    s = tfm_cuda_init();
  /* --tensor-parallel N: MPI, N ranks, this process's rank. */
  if (s == TFM_OK)
    s = tfm_tp_start(&m->desc);
  if (s != TFM_OK) {
    tfm_model_destroy(m);
    return s;
  }
  *out = m;
  return TFM_OK;
}

void tfm_model_destroy(tfm_model *m) {
  if (!m)
    return;
  tfm_weights_destroy(&m->weights);
  free(m->warnings);
  free(m->weights_gguf);
  tfm_cuda_free_io(m);
  tfm_description_free(&m->desc);
  free(m);
  /* The buffers its forward passes left for the next one. */
  tfm_pool_release();
}

const char *tfm_model_name(const tfm_model *m) { return m->desc.name; }
int64_t tfm_model_vocab(const tfm_model *m) { return m->desc.vocab; }
int64_t tfm_model_context(const tfm_model *m) { return m->desc.context; }
size_t tfm_model_num_inputs(const tfm_model *m) { return m->desc.num_inputs; }
const char *tfm_model_input_name(const tfm_model *m, size_t i) {
  return i < m->desc.num_inputs ? m->desc.inputs[i].name : NULL;
}

/* CUDA artifacts keep their weights on the device only. */
static tfm_status finish_weights(tfm_model *m) {
  if (m->desc.cuda) {
    tfm_status s = tfm_cuda_upload_weights(&m->weights, &m->desc);
    if (s != TFM_OK)
      return s;
  }
  m->loaded = 1;
  return TFM_OK;
}

tfm_status tfm_model_load_weights(tfm_model *m, const char *path) {
  return tfm_model_load_weights_files(m, &path, 1);
}

/* The first GGUF file of `paths` (read as weights), or NULL. Its metadata
 * is read only if the weights are saved. */
static char *first_gguf(const char *const *paths, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (tfm_gguf_is_file(paths[i]))
      return tfm_strdup(paths[i]);
  return NULL;
}

tfm_status tfm_model_load_weights_files(tfm_model *m, const char *const *paths,
                                        size_t count) {
  m->loaded = 0;
  free(m->warnings);
  m->warnings = NULL;
  free(m->weights_gguf);
  m->weights_gguf = NULL;
  tfm_status s =
      tfm_weights_load(&m->weights, &m->desc, paths, count, &m->warnings);
  if (s == TFM_OK)
    m->weights_gguf = first_gguf(paths, count);
  return s == TFM_OK ? finish_weights(m) : s;
}

const char *tfm_model_weight_warnings(const tfm_model *m) {
  return m->warnings;
}

tfm_status tfm_model_random_weights(tfm_model *m, uint64_t seed) {
  m->loaded = 0;
  free(m->weights_gguf);
  m->weights_gguf = NULL;
  tfm_status s = tfm_weights_synthesize(&m->weights, &m->desc, seed);
  return s == TFM_OK ? finish_weights(m) : s;
}

/* Frees the inputs tfm_inputs_check filled in for optional ones left out. */
static void free_filled(const tfm_description *d, const tfm_tensor *given,
                        tfm_tensor *used) {
  for (size_t i = 0; i < d->num_inputs; ++i)
    if (!given[i].data && used[i].data)
      tfm_tensor_free(&used[i]);
}

tfm_status tfm_model_run(tfm_model *m, const tfm_tensor *inputs,
                         tfm_tensor *output) {
  memset(output, 0, sizeof *output);
  if (!m->loaded)
    return tfm_fail(TFM_ERR_ARGUMENT, "model '%s' has no weights loaded",
                    m->desc.name);
  int64_t shape[TFM_MAX_RANK];
  /* A copy, so that optional inputs left out can be filled in. */
  tfm_tensor in[TFM_MAX_INPUTS];
  memcpy(in, inputs, m->desc.num_inputs * sizeof *in);
  tfm_status s = tfm_inputs_check(&m->desc, in, shape);
  if (s == TFM_OK)
    s = tfm_tensor_alloc(output, TFM_F32, m->desc.output.rank, shape);
  if (s != TFM_OK) {
    free_filled(&m->desc, inputs, in);
    return s;
  }
  if (m->desc.cuda) {
    s = tfm_cuda_forward(m, in, output);
  } else {
    int32_t rc = m->forward((void *const *)m->weights.table, in, output);
    if (rc == TFM_FORWARD_OUT_OF_MEMORY)
      s = tfm_fail(TFM_ERR_MEMORY,
                   "model '%s': out of memory in the forward pass (an "
                   "allocation of %llu bytes failed)",
                   m->desc.name,
                   (unsigned long long)tfm_forward_failed_bytes());
    else if (rc != 0)
      s = tfm_fail(TFM_ERR_FORWARD,
                   "model '%s': the forward pass failed (it returned %d)",
                   m->desc.name, (int)rc);
  }
  if (s != TFM_OK)
    tfm_tensor_free(output);
  free_filled(&m->desc, inputs, in);
  return s;
}

void tfm_model_print_info(const tfm_model *m, FILE *out) {
  const tfm_description *d = &m->desc;
  fprintf(out, "model %s: %lld parameters in %zu tensors\n", d->name,
          (long long)d->param_count, d->num_params);
  fprintf(out, "inputs:\n");
  /* Spellings of the symbols, indexed by -TFM_DIM_*. */
  const char *sym[TFM_NUM_DIM_SYMBOLS + 1] = {"", "B", "T", "S"};
  for (size_t i = 0; i <= d->num_inputs; ++i) {
    const tfm_io_desc *x = i < d->num_inputs ? &d->inputs[i] : &d->output;
    if (i == d->num_inputs)
      fprintf(out, "output:\n");
    fprintf(out, "  %-12s %-8s [", x->name, tfm_dtype_name(x->dtype));
    for (int32_t k = 0; k < x->rank; ++k) {
      if (x->shape[k] >= 0)
        fprintf(out, "%s%lld", k ? ", " : "", (long long)x->shape[k]);
      else
        fprintf(out, "%s%s", k ? ", " : "", sym[-x->shape[k]]);
    }
    fprintf(out, "]\n");
  }
  fprintf(out, "context: %lld positions\n", (long long)d->context);
  if (d->gen_layers > 0) {
    /* What a session's KV cache holds per token (windowed layers keep at
     * most their window's). */
    int64_t per = d->gen_kv_heads * d->gen_head_dim;
    int caches = d->gen_latent ? 1 : 2;
    int32_t dt = d->gen_cache_dtype;
    fprintf(
        out,
        "KV cache: %lld bytes per token (%lld layers x %d x %lld x %lld "
        "%s%s)\n",
        (long long)(d->gen_layers * caches * per * (int64_t)tfm_dtype_size(dt)),
        (long long)d->gen_layers, caches, (long long)d->gen_kv_heads,
        (long long)d->gen_head_dim,
        dt == TFM_F16    ? "f16"
        : dt == TFM_BF16 ? "bf16"
                         : "f32",
        d->gen_latent ? ": the latents of latent attention"
                      : ": keys and values");
    if (d->gen_block > 0)
      fprintf(out,
              "KV cache blocks: %lld positions each (held as a sequence "
              "grows)\n",
              (long long)d->gen_block);
  }
  if (d->tensor_parallel > 1)
    fprintf(out,
            "tensor parallel: %d ranks (this is rank %d; sharded "
            "parameters show its block of the whole tensor)\n",
            (int)d->tensor_parallel, (int)d->tp_rank);
  if (d->hf_type) {
    fprintf(out,
            "checkpoint: Hugging Face %s layout (names with or without "
            "the prefix",
            d->hf_type);
    for (size_t k = 0; k < d->num_prefixes; ++k)
      fprintf(out, "%s '%s'", k ? " or" : "", d->prefixes[k]);
    fprintf(out, ")\nparameters (<- the checkpoint tensor they are read "
                 "from):\n");
  } else if (d->gguf_arch) {
    fprintf(out,
            "checkpoint: GGUF %s layout (llama.cpp's tensor names)\n"
            "parameters (<- the checkpoint tensor they are read "
            "from):\n",
            d->gguf_arch);
  } else {
    fprintf(out, "checkpoint: canonical names\nparameters:\n");
  }
  for (size_t i = 0; i < d->num_params; ++i) {
    const tfm_param_desc *p = &d->params[i];
    char s[2 * TFM_SHAPE_STR_SIZE + 4];
    tfm_shape_str(p->rank, p->shape, s, sizeof s);
    if (p->sharded) {
      /* This rank's block, and the whole tensor the checkpoint holds. */
      char f[TFM_SHAPE_STR_SIZE];
      tfm_shape_str(p->rank, p->full, f, sizeof f);
      size_t used = strlen(s);
      snprintf(s + used, sizeof s - used, " of %s", f);
    }
    if (p->source.transform == TFM_SOURCE_CANONICAL) {
      fprintf(out, "  %-40s %s\n", p->name, s);
      continue;
    }
    char from[1024];
    tfm_source_describe(&p->source, p, from, sizeof from);
    fprintf(out, "  %-40s %-14s <- %s\n", p->name, s, from);
  }
}
