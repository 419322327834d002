/*===- weights_save.c - a model's loaded weights saved as a GGUF file -----===*
 *
 * tfm_model_save_weights (the executable's --save-weights) writes the
 * weights a model holds, after whatever converting its load did (tfmc
 * --quantize's ggml blocks above all, which take seconds to minutes to
 * fit), to a GGUF file (ggml's docs/gguf.md, version 3) that the same model
 * then reads in place:
 *
 *   - one tensor per parameter of the description, under the parameter's
 *     own name and canonical shape (ggml's ne reversed): a weight in ggml
 *     blocks as its rows are (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, or F32 / F16 /
 *     BF16 rows), every other parameter in F32, the values the model holds
 *     (packed panels unpacked; bf16 pairs are exact in f32);
 *   - metadata: general.architecture "tfm", general.name and tfm.model the
 *     model's name, tfm.saved_weights the format's version (1),
 *     tfm.ggml_quantize the description's --quantize type, and
 *     general.alignment 64; and where the weights came from a GGUF file
 *     with a tokenizer (a llama.cpp file, or a file saved this way), its
 *     tokenizer.* metadata as that file encodes it (vocabulary, merges,
 *     special tokens, pre-tokenizer, chat templates), so that the saved
 *     file is its own tokenizer as the first one was.
 *
 * A file with tfm.saved_weights is read by canonical names whatever the
 * model's checkpoint layout (tfm_saved_weights_description), and only by
 * the model of its tfm.model. Loading it gives the very table the saving
 * model held: blocks are used where they lie in the mapping, and F32
 * values are converted and packed as the first load did.
 *===----------------------------------------------------------------------===*/
#define _DEFAULT_SOURCE
#include "checkpoint.h"
#include "tfm/ggml_blocks.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SAVED_VERSION 1
#define SAVED_ALIGNMENT 64

/*===- Reading ------------------------------------------------------------===*/

tfm_status tfm_saved_weights_description(const tfm_checkpoint *c,
                                         const tfm_description *d,
                                         tfm_description *out,
                                         tfm_param_desc **params) {
  *params = NULL;
  size_t saved = c->num_files;
  for (size_t i = 0; i < c->num_files; ++i)
    if (c->gguf[i] && tfm_gguf_find(c->gguf[i], "tfm.saved_weights"))
      saved = i;
  if (saved == c->num_files)
    return TFM_OK;
  const char *path = c->paths[saved];
  if (c->num_files > 1)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "%s: weights saved by a tfm model (tfm.saved_weights) "
                    "are read alone, not with other files",
                    path);
  tfm_gguf *g = c->gguf[saved];
  int64_t version;
  tfm_status s =
      tfm_gguf_get_int(g, "tfm.saved_weights", 1, SAVED_VERSION, &version);
  if (s != TFM_OK)
    return s;
  const char *name;
  size_t len;
  if ((s = tfm_gguf_get_string(g, "tfm.model", &name, &len)) != TFM_OK)
    return s;
  if (len != strlen(d->name) || memcmp(name, d->name, len)) {
    char clip[TFM_CLIP_SIZE];
    char *saver = tfm_strndup(name, len);
    if (!saver)
      return tfm_fail(TFM_ERR_MEMORY, "out of memory loading weights");
    tfm_fail(TFM_ERR_MISMATCH,
             "%s: these weights were saved by model '%s' (tfm.model), not "
             "by model '%s'",
             path, tfm_clip(saver, clip), d->name);
    free(saver);
    return TFM_ERR_MISMATCH;
  }
  /* Every parameter under its canonical name; those the forward pass
   * does not take were not saved. */
  tfm_param_desc *p = tfm_calloc(d->num_params ? d->num_params : 1, sizeof *p);
  if (!p)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory loading weights");
  for (size_t i = 0; i < d->num_params; ++i) {
    p[i] = d->params[i];
    memset(&p[i].source, 0, sizeof p[i].source);
    p[i].source.transform = TFM_SOURCE_ZEROS;
  }
  for (size_t a = 0; a < d->num_abi; ++a)
    p[d->abi[a].index].source.transform = TFM_SOURCE_CANONICAL;
  *out = *d;
  out->params = p;
  out->hf_type = NULL;
  out->gguf_arch = NULL;
  out->num_prefixes = 0;
  out->num_ignore = 0;
  *params = p;
  return TFM_OK;
}

/*===- Writing ------------------------------------------------------------===*/

/* The writer of one file: the temporary file and the first error. */
typedef struct writer {
  FILE *f;
  const char *path; /* the file being made, for messages */
  uint64_t at;      /* bytes written */
  int failed;
} writer;

static void put(writer *w, const void *p, size_t n) {
  if (w->failed || n == 0)
    return;
  if (fwrite(p, 1, n, w->f) != n)
    w->failed = errno ? errno : EIO;
  w->at += n;
}

static void put_u32(writer *w, uint32_t v) {
  uint8_t b[4];
  for (int i = 0; i < 4; ++i)
    b[i] = (uint8_t)(v >> (8 * i));
  put(w, b, 4);
}

static void put_u64(writer *w, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i)
    b[i] = (uint8_t)(v >> (8 * i));
  put(w, b, 8);
}

static void put_string(writer *w, const char *s) {
  put_u64(w, strlen(s));
  put(w, s, strlen(s));
}

static void put_kv_string(writer *w, const char *key, const char *value) {
  put_string(w, key);
  put_u32(w, TFM_GGUF_STRING);
  put_string(w, value);
}

static void put_kv_u32(writer *w, const char *key, uint32_t value) {
  put_string(w, key);
  put_u32(w, TFM_GGUF_UINT32);
  put_u32(w, value);
}

static void pad_to(writer *w, uint64_t alignment) {
  static const uint8_t zeros[SAVED_ALIGNMENT] = {0};
  put(w, zeros, (size_t)((alignment - w->at % alignment) % alignment));
}

/* What parameter `i` is saved from: `abi` its entry; `type` the ggml type
 * (F32 when saved as f32 values). */
typedef struct saved_param {
  size_t abi;
  int32_t type;
  uint64_t bytes, offset; /* in the data section */
} saved_param;

/* The ABI entry parameter `i` is saved from, and its type: the rows of a
 * weight in ggml blocks when that is the only entry of the parameter (a
 * parameter also passed as f32 saves those values, from which the load
 * quantizes the same blocks again), else an f32 entry, plain rather than
 * packed. 0 when the forward pass does not take it; -1 when its entries
 * cannot be read back (int8 quads: lossy). */
static int choose_entry(const tfm_weights *w, const tfm_description *d,
                        size_t i, saved_param *out) {
  size_t ggml = SIZE_MAX, plain = SIZE_MAX, packed = SIZE_MAX, quads = 0;
  const tfm_param_desc *p = &d->params[i];
  for (size_t a = 0; a < d->num_abi; ++a) {
    if (d->abi[a].index != i || d->abi[a].ggml == TFM_ABI_GGML_TYPE)
      continue;
    if (d->abi[a].ggml == TFM_ABI_GGML_ROWS)
      ggml = a;
    else if (d->abi[a].panel > 0 && (p->rank == 2 || p->rank == 3))
      d->abi[a].int8_quads ? (void)++quads : (void)(packed = a);
    else
      plain = a;
  }
  int others = plain != SIZE_MAX || packed != SIZE_MAX || quads;
  if (ggml != SIZE_MAX && !others) {
    out->abi = ggml;
    out->type = *(const int32_t *)w->table[ggml + 1];
    return 1;
  }
  out->type = TFM_GGML_F32;
  if (plain != SIZE_MAX || packed != SIZE_MAX) {
    out->abi = plain != SIZE_MAX ? plain : packed;
    return 1;
  }
  return quads || ggml != SIZE_MAX ? -1 : 0;
}

/* Element count of parameter `p`. */
static int64_t numel(const tfm_param_desc *p) {
  int64_t n = 1;
  for (int32_t k = 0; k < p->rank; ++k)
    n *= p->shape[k];
  return n;
}

/* The canonical f32 values of parameter `p` from ABI entry `a` (unpacked
 * when it is packed) written out. */
static void put_values(writer *out, const tfm_weights *w,
                       const tfm_description *d, size_t a) {
  const tfm_param_desc *p = &d->params[d->abi[a].index];
  const void *data = w->table[a];
  int packed = d->abi[a].panel > 0 && (p->rank == 2 || p->rank == 3);
  if (!packed || d->abi[a].ggml == TFM_ABI_GGML_ROWS) {
    put(out, data, (size_t)numel(p) * sizeof(float));
    return;
  }
  tfm_packing packing =
      d->abi[a].bf16_pairs ? TFM_PACKING_BF16_PAIRS : TFM_PACKING_F32;
  int64_t stacks = p->rank == 3 ? p->shape[0] : 1;
  int64_t n = p->shape[p->rank - 2], k = p->shape[p->rank - 1];
  int64_t panel = d->abi[a].panel;
  int64_t per_stack = tfm_packed_numel(packing, n, k, panel);
  float row[1024];
  for (int64_t e = 0; e < stacks; ++e)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c0 = 0; c0 < k; c0 += 1024) {
        int64_t m = k - c0 < 1024 ? k - c0 : 1024;
        for (int64_t c = 0; c < m; ++c) {
          int64_t at =
              e * per_stack + tfm_packed_index(packing, r, c0 + c, k, panel);
          if (packing == TFM_PACKING_F32) {
            row[c] = ((const float *)data)[at];
          } else {
            uint16_t h;
            memcpy(&h, (const uint16_t *)data + at, 2);
            row[c] = tfm_bf16_to_f32(h);
          }
        }
        put(out, row, (size_t)m * sizeof(float));
      }
}

/* Whether `path` is one of the files the weights were read from. */
static int is_input(const tfm_weights *w, const char *path) {
  struct stat target;
  if (stat(path, &target) != 0)
    return 0;
  for (size_t i = 0; i < w->num_read; ++i)
    if (w->read_dev[i] == (uint64_t)target.st_dev &&
        w->read_ino[i] == (uint64_t)target.st_ino)
      return 1;
  return 0;
}

/* Whether metadata key `key` belongs to the tokenizer (llama.cpp's
 * tokenizer.ggml.*, tokenizer.chat_template[.NAME], ...). */
static int is_tokenizer_key(const char *key) {
  return !strncmp(key, "tokenizer.", strlen("tokenizer."));
}

tfm_status tfm_weights_save(const tfm_weights *w, const tfm_description *d,
                            const char *path, const char *tokenizer) {
  if (d->cuda)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "%s: cannot save the weights of a CUDA model (they are "
                    "on the device only); save them with the CPU build of "
                    "the model",
                    path);
  if (d->tensor_parallel > 1)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "%s: cannot save the weights of a tensor-parallel model "
                    "(each rank holds a slice)",
                    path);
  if (is_input(w, path))
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "%s: the weights were read from this file; save them to "
                    "another one",
                    path);
  /* The tokenizer's metadata, copied as the file encodes it. */
  tfm_gguf *tok = NULL;
  size_t tok_kv = 0;
  if (tokenizer) {
    /* The error names that file and what is wrong with it. */
    tfm_status s = tfm_gguf_open(tokenizer, &tok);
    if (s != TFM_OK)
      return s;
    if (!tfm_gguf_find(tok, "tokenizer.ggml.model")) {
      tfm_gguf_close(tok); /* weights without a tokenizer */
      tok = NULL;
    }
    for (size_t i = 0; tok && i < tfm_gguf_num_kv(tok); ++i)
      tok_kv += is_tokenizer_key(tfm_gguf_key(tok, i));
  }
  saved_param *sp = tfm_calloc(d->num_params ? d->num_params : 1, sizeof *sp);
  if (!sp) {
    tfm_gguf_close(tok);
    return tfm_fail(TFM_ERR_MEMORY, "out of memory saving weights");
  }
  size_t count = 0;
  uint64_t data_bytes = 0;
  for (size_t i = 0; i < d->num_params; ++i) {
    const tfm_param_desc *p = &d->params[i];
    int ok = choose_entry(w, d, i, &sp[i]);
    if (ok < 0 || p->rank > TFM_GGUF_MAX_DIMS ||
        strlen(p->name) >= TFM_GGUF_MAX_NAME) {
      free(sp);
      tfm_gguf_close(tok);
      return tfm_fail(
          TFM_ERR_ARGUMENT, "%s: cannot save parameter '%s': %s", path, p->name,
          ok < 0 ? "its int8 quads (--quantize=int8) do not give back its "
                   "values"
          : p->rank > TFM_GGUF_MAX_DIMS
              ? "GGUF tensors have at most 4 dimensions"
              : "GGUF tensor names are shorter than 64 bytes");
    }
    if (!ok) {
      sp[i].abi = SIZE_MAX;
      continue;
    }
    int64_t k = p->rank ? p->shape[p->rank - 1] : 1;
    sp[i].bytes =
        (uint64_t)(numel(p) / k * tfm_ggml_blocks_row_bytes(sp[i].type, k));
    sp[i].offset = data_bytes;
    data_bytes +=
        (sp[i].bytes + SAVED_ALIGNMENT - 1) / SAVED_ALIGNMENT * SAVED_ALIGNMENT;
    ++count;
  }
  /* A temporary file beside the target, renamed over it once whole. */
  size_t n = strlen(path);
  char *tmp = tfm_malloc(n + 32);
  if (!tmp) {
    free(sp);
    tfm_gguf_close(tok);
    return tfm_fail(TFM_ERR_MEMORY, "out of memory saving weights");
  }
  /* Created as the target would be (0666 less the umask), never over an
   * existing file. */
  int fd = -1;
  for (unsigned k = 0; fd < 0 && k < 100; ++k) {
    snprintf(tmp, n + 32, "%s.tmp%ld.%u", path, (long)getpid(), k);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!f) {
    int e = errno;
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    free(tmp);
    free(sp);
    tfm_gguf_close(tok);
    return tfm_fail(TFM_ERR_IO, "%s: cannot write: %s", path, strerror(e));
  }
  writer out = {f, path, 0, 0};
  put(&out, "GGUF", 4);
  put_u32(&out, 3);
  put_u64(&out, count);
  put_u64(&out, 6 + tok_kv);
  put_kv_string(&out, "general.architecture", "tfm");
  put_kv_string(&out, "general.name", d->name);
  put_kv_u32(&out, "general.alignment", SAVED_ALIGNMENT);
  put_kv_string(&out, "tfm.model", d->name);
  put_kv_u32(&out, "tfm.saved_weights", SAVED_VERSION);
  const char *quantize = "none";
  if (d->ggml_quantize >= 0)
    tfm_ggml_type_info(d->ggml_quantize, &quantize, NULL, NULL);
  put_kv_string(&out, "tfm.ggml_quantize", quantize);
  for (size_t i = 0; tok && i < tfm_gguf_num_kv(tok); ++i)
    if (is_tokenizer_key(tfm_gguf_key(tok, i))) {
      size_t len;
      const void *kv = tfm_gguf_kv_encoding(tok, i, &len);
      put(&out, kv, len);
    }
  tfm_gguf_close(tok);
  for (size_t i = 0; i < d->num_params; ++i) {
    const tfm_param_desc *p = &d->params[i];
    if (sp[i].abi == SIZE_MAX)
      continue;
    put_string(&out, p->name);
    put_u32(&out, (uint32_t)p->rank);
    for (int32_t k = p->rank; k-- > 0;)
      put_u64(&out, (uint64_t)p->shape[k]);
    put_u32(&out, (uint32_t)sp[i].type);
    put_u64(&out, sp[i].offset);
  }
  pad_to(&out, SAVED_ALIGNMENT);
  for (size_t i = 0; i < d->num_params; ++i) {
    if (sp[i].abi == SIZE_MAX)
      continue;
    if (sp[i].type == TFM_GGML_F32 &&
        d->abi[sp[i].abi].ggml != TFM_ABI_GGML_ROWS)
      put_values(&out, w, d, sp[i].abi);
    else
      put(&out, w->table[sp[i].abi], (size_t)sp[i].bytes);
    pad_to(&out, SAVED_ALIGNMENT);
  }
  if (fflush(f) != 0 && !out.failed)
    out.failed = errno;
  if (!out.failed && fsync(fileno(f)) != 0)
    out.failed = errno;
  if (fclose(f) != 0 && !out.failed)
    out.failed = errno;
  if (!out.failed && rename(tmp, path) != 0)
    out.failed = errno;
  tfm_status s = TFM_OK;
  if (out.failed) {
    unlink(tmp);
    s = tfm_fail(TFM_ERR_IO, "%s: cannot write: %s", path,
                 strerror(out.failed));
  }
  free(tmp);
  free(sp);
  return s;
}

tfm_status tfm_model_save_weights(tfm_model *m, const char *path) {
  if (!m->loaded)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "%s: model '%s' has no weights to save (load them first)",
                    path, m->desc.name);
  return tfm_weights_save(&m->weights, &m->desc, path, m->weights_gguf);
}
