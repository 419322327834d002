/*===- checkpoint.c - the files of a checkpoint, bound by name ------------===*
 *
 * `--weights` names safetensors files, GGUF files, folders
 * (model.safetensors, or model.safetensors.index.json with its shards) and
 * index files, as often as needed. Every file is mapped once; the tensors
 * of all files form one table sorted by name, in which a name found in two
 * files is an error, and an index's weight_map must agree with where each
 * tensor is. A GGUF file's tensors are bound under their names as the file
 * has them (blk.0.attn_q.weight), in row-major shape (ggml's ne reversed)
 * with their ggml type as dtype (TFM_GGML_DTYPE), read where they lie.
 *===----------------------------------------------------------------------===*/
#define _DEFAULT_SOURCE
#include "checkpoint.h"
#include "ggml_quants.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

static int is_file(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* "dir/name" in a new string. */
static char *join(const char *dir, size_t dir_len, const char *name) {
  size_t n = dir_len + 1 + strlen(name) + 1;
  char *s = tfm_malloc(n);
  if (s)
    snprintf(s, n, "%.*s%s%s", (int)dir_len, dir,
             dir_len && dir[dir_len - 1] != '/' ? "/" : "", name);
  return s;
}

/* Opens the GGUF file at `path` into slot `i` with a view of each tensor. */
static tfm_status open_gguf(tfm_checkpoint *c, size_t i, const char *path) {
  tfm_status s = tfm_gguf_open(path, &c->gguf[i]);
  if (s != TFM_OK)
    return s;
  size_t n = tfm_gguf_num_tensors(c->gguf[i]);
  c->gguf_views[i] = tfm_calloc(n ? n : 1, sizeof(tfm_tensor));
  if (!c->gguf_views[i])
    return tfm_fail(TFM_ERR_MEMORY, "%s: out of memory", path);
  for (size_t k = 0; k < n; ++k) {
    const tfm_gguf_tensor *t = tfm_gguf_tensor_at(c->gguf[i], k);
    tfm_tensor *v = &c->gguf_views[i][k];
    v->dtype = TFM_GGML_DTYPE(t->type);
    v->rank = (int32_t)t->n_dims;
    for (uint32_t d = 0; d < t->n_dims; ++d)
      v->shape[d] = t->ne[t->n_dims - 1 - d];
    v->data = (void *)(uintptr_t)t->data;
  }
  return TFM_OK;
}

static tfm_status add_file(tfm_checkpoint *c, const char *path,
                           const char *named_by, size_t *index);

/* GGUF metadata key `key` of file `i` as an integer in [min, max]; `dflt`
 * when the file has no such key. */
static tfm_status split_key(const tfm_checkpoint *c, size_t i, const char *key,
                            int64_t min, int64_t max, int64_t dflt,
                            int64_t *out) {
  const tfm_gguf_value *v = tfm_gguf_find(c->gguf[i], key);
  *out = dflt;
  return v ? tfm_gguf_value_int(v, min, max, out) : TFM_OK;
}

/* A split GGUF file as llama.cpp's gguf-split writes it and its loader
 * reads it (llama-model-loader.cpp): each shard holds split.no (from 0) and
 * split.count, and shard k + 1 of N is named PREFIX-%05d-of-%05d.gguf. The
 * first shard (file `i`, opened from `path`) opens the others by name and
 * holds them to their numbers and, with split.tensors.count, to the number
 * of tensors in all. Other shards wait for their first (tfm_checkpoint_open
 * checks that it came). */
static tfm_status add_split(tfm_checkpoint *c, size_t i, const char *path) {
  int64_t no, count, total;
  tfm_status s;
  if ((s = split_key(c, i, "split.count", 0, UINT16_MAX, 0, &count)) !=
          TFM_OK ||
      count <= 1 ||
      (s = split_key(c, i, "split.no", 0, count - 1, 0, &no)) != TFM_OK ||
      no != 0)
    return s;
  c->gguf_claimed[i] = 1;
  char suffix[64];
  snprintf(suffix, sizeof suffix, "-%05d-of-%05d.gguf", 1, (int)count);
  size_t n = strlen(path), k = strlen(suffix);
  if (n < k || strcmp(path + n - k, suffix))
    return tfm_fail(
        TFM_ERR_FORMAT,
        "%s: the first shard of a GGUF split in %lld (split.count), "
        "but its name does not end in '%s', from which the other "
        "shards are named",
        path, (long long)count, suffix);
  size_t tensors = tfm_gguf_num_tensors(c->gguf[i]);
  for (int64_t shard = 1; shard < count; ++shard) {
    char *other = tfm_malloc(n + 1);
    if (!other)
      return tfm_fail(TFM_ERR_MEMORY, "out of memory opening the weights");
    snprintf(other, n + 1, "%.*s-%05d-of-%05d.gguf", (int)(n - k), path,
             (int)shard + 1, (int)count);
    size_t slot;
    s = add_file(c, other, path, &slot);
    int64_t other_no = -1, other_count = -1;
    if (s == TFM_OK && !c->gguf[slot])
      s = tfm_fail(TFM_ERR_FORMAT,
                   "%s: not a GGUF file (shard %lld of %lld named by %s)",
                   other, (long long)shard + 1, (long long)count, path);
    if (s == TFM_OK && ((s = split_key(c, slot, "split.count", 0, UINT16_MAX,
                                       -1, &other_count)) != TFM_OK ||
                        (s = split_key(c, slot, "split.no", 0, UINT16_MAX, -1,
                                       &other_no)) != TFM_OK))
      tfm_error_append(" (shard %lld of %lld named by %s)",
                       (long long)shard + 1, (long long)count, path);
    if (s == TFM_OK && (other_no != shard || other_count != count))
      s = tfm_fail(TFM_ERR_FORMAT,
                   "%s: split.no %lld and split.count %lld, expected %lld "
                   "and %lld (shard %lld of %lld named by %s)",
                   other, (long long)other_no, (long long)other_count,
                   (long long)shard, (long long)count, (long long)shard + 1,
                   (long long)count, path);
    free(other);
    if (s != TFM_OK)
      return s;
    c->gguf_claimed[slot] = 1;
    tensors += tfm_gguf_num_tensors(c->gguf[slot]);
  }
  if ((s = split_key(c, i, "split.tensors.count", 0, INT32_MAX, -1, &total)) !=
      TFM_OK)
    return s;
  if (total >= 0 && (size_t)total != tensors)
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: split.tensors.count is %lld, but its %lld shards "
                    "hold %zu tensors",
                    path, (long long)total, (long long)count, tensors);
  return TFM_OK;
}

/* A shard of a split GGUF file given without its first shard. */
static tfm_status check_splits(const tfm_checkpoint *c) {
  for (size_t i = 0; i < c->num_files; ++i) {
    int64_t no, count;
    if (!c->gguf[i] || c->gguf_claimed[i])
      continue;
    if (split_key(c, i, "split.count", 0, UINT16_MAX, 0, &count) != TFM_OK ||
        split_key(c, i, "split.no", 0, UINT16_MAX, 0, &no) != TFM_OK)
      return TFM_ERR_FORMAT;
    if (count > 1)
      return tfm_fail(TFM_ERR_ARGUMENT,
                      "%s: shard %lld of %lld of a split GGUF file: give the "
                      "first shard (...-00001-of-%05d.gguf), which names the "
                      "others",
                      c->paths[i], (long long)no + 1, (long long)count,
                      (int)count);
  }
  return TFM_OK;
}

/* Opens `path` unless the same file is open already; *index gets its slot. */
static tfm_status add_file(tfm_checkpoint *c, const char *path,
                           const char *named_by, size_t *index) {
  char real[PATH_MAX];
  const char *key = realpath(path, real) ? real : path;
  for (size_t i = 0; i < c->num_files; ++i)
    if (!strcmp(c->real[i], key)) {
      *index = i;
      return TFM_OK;
    }
  if (c->num_files == TFM_MAX_WEIGHT_FILES)
    return tfm_fail(TFM_ERR_ARGUMENT,
                    "%s: more than %d weight files (TFM_MAX_WEIGHT_FILES)",
                    path, TFM_MAX_WEIGHT_FILES);
  size_t i = c->num_files;
  c->paths[i] = tfm_strdup(path);
  c->real[i] = tfm_strdup(key);
  if (!c->paths[i] || !c->real[i]) {
    free(c->paths[i]);
    free(c->real[i]);
    return tfm_fail(TFM_ERR_MEMORY, "out of memory opening the weights");
  }
  c->num_files++;
  tfm_status s = tfm_gguf_is_file(path) ? open_gguf(c, i, path)
                                        : tfm_safetensors_open(path, &c->st[i]);
  if (s != TFM_OK && named_by)
    tfm_error_append(" (a shard named by %s)", named_by);
  *index = i;
  if (s == TFM_OK && c->gguf[i])
    s = add_split(c, i, path);
  return s;
}

/* A shard index: opens the files its weight_map names and records, for
 * each tensor, the file the index puts it in. */
static tfm_status add_index(tfm_checkpoint *c, const char *path) {
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root) {
    if (!is_file(path))
      return tfm_fail(TFM_ERR_IO, "%s: cannot open the index file", path);
    return tfm_fail(TFM_ERR_FORMAT,
                    "%s: not a valid index (JSON error at line %d: %s)", path,
                    err.line, err.text);
  }
  tfm_status s = TFM_OK;
  json_t *map = json_object_get(root, "weight_map");
  if (!json_is_object(map) || json_object_size(map) == 0) {
    s = tfm_fail(TFM_ERR_FORMAT,
                 "%s: not a valid index (no 'weight_map' object naming the "
                 "shard of each tensor)",
                 path);
    json_decref(root);
    return s;
  }
  const char *slash = strrchr(path, '/');
  size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
  const char *name;
  json_t *file;
  json_object_foreach(map, name, file) {
    if (!json_is_string(file) || !*json_string_value(file)) {
      s = tfm_fail(TFM_ERR_FORMAT,
                   "%s: not a valid index ('weight_map' entry '%s' must be a "
                   "file name)",
                   path, name);
      break;
    }
    char *shard = join(path, dir_len, json_string_value(file));
    if (!shard) {
      s = tfm_fail(TFM_ERR_MEMORY, "out of memory reading %s", path);
      break;
    }
    size_t slot;
    s = add_file(c, shard, path, &slot);
    free(shard);
    if (s != TFM_OK)
      break;
    if (c->num_mapped == c->cap_mapped) {
      size_t cap = c->cap_mapped ? 2 * c->cap_mapped : 64;
      tfm_mapped *m = tfm_malloc(cap * sizeof *m);
      if (!m) {
        s = tfm_fail(TFM_ERR_MEMORY, "out of memory reading %s", path);
        break;
      }
      if (c->num_mapped)
        memcpy(m, c->mapped, c->num_mapped * sizeof *m);
      free(c->mapped);
      c->mapped = m;
      c->cap_mapped = cap;
    }
    tfm_mapped *m = &c->mapped[c->num_mapped];
    m->name = tfm_strdup(name);
    m->index = tfm_strdup(path);
    if (!m->name || !m->index) {
      free(m->name);
      free(m->index);
      s = tfm_fail(TFM_ERR_MEMORY, "out of memory reading %s", path);
      break;
    }
    m->file = slot;
    c->num_mapped++;
  }
  json_decref(root);
  return s;
}

static tfm_status add_path(tfm_checkpoint *c, const char *path) {
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    char *index = join(path, strlen(path), INDEX_NAME);
    char *single = join(path, strlen(path), SINGLE_NAME);
    char *bin = join(path, strlen(path), "pytorch_model.bin");
    tfm_status s;
    size_t slot;
    if (!index || !single || !bin)
      s = tfm_fail(TFM_ERR_MEMORY, "out of memory opening the weights");
    else if (is_file(index))
      s = add_index(c, index);
    else if (is_file(single))
      s = add_file(c, single, NULL, &slot);
    else
      s = tfm_fail(
          TFM_ERR_IO,
          "%s: a folder with neither " SINGLE_NAME " nor " INDEX_NAME "%s",
          path,
          bin && is_file(bin) ? " (pytorch_model.bin is a PyTorch pickle; the "
                                "runtime reads safetensors)"
                              : "");
    free(index);
    free(single);
    free(bin);
    return s;
  }
  if (ends_with(path, ".json"))
    return add_index(c, path);
  size_t slot;
  return add_file(c, path, NULL, &slot);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const tfm_bound *)a)->name, ((const tfm_bound *)b)->name);
}

/* The table of every tensor of every file, sorted; duplicates are errors. */
static tfm_status bind(tfm_checkpoint *c) {
  size_t total = 0;
  for (size_t i = 0; i < c->num_files; ++i)
    total += c->gguf[i] ? tfm_gguf_num_tensors(c->gguf[i])
                        : tfm_safetensors_count(c->st[i]);
  c->tensors = tfm_calloc(total ? total : 1, sizeof *c->tensors);
  if (!c->tensors)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory binding the weights");
  for (size_t i = 0; i < c->num_files; ++i) {
    if (c->gguf[i]) {
      for (size_t k = 0; k < tfm_gguf_num_tensors(c->gguf[i]); ++k) {
        tfm_bound *b = &c->tensors[c->count++];
        b->gguf = tfm_gguf_tensor_at(c->gguf[i], k);
        b->name = b->gguf->name;
        b->view = &c->gguf_views[i][k];
        b->file = i;
      }
      continue;
    }
    for (size_t k = 0; k < tfm_safetensors_count(c->st[i]); ++k) {
      tfm_bound *b = &c->tensors[c->count++];
      b->name = tfm_safetensors_name(c->st[i], k);
      b->view = tfm_safetensors_find(c->st[i], b->name);
      b->file = i;
    }
  }
  qsort(c->tensors, c->count, sizeof *c->tensors, by_name);
  int dups = 0;
  for (size_t k = 1; k < c->count; ++k) {
    if (strcmp(c->tensors[k - 1].name, c->tensors[k].name))
      continue;
    if (!dups++)
      tfm_fail(TFM_ERR_MISMATCH, "the weights name a tensor twice:");
    tfm_error_append("\n  tensor '%s' is in both %s and %s", c->tensors[k].name,
                     c->paths[c->tensors[k - 1].file],
                     c->paths[c->tensors[k].file]);
  }
  if (dups)
    return TFM_ERR_MISMATCH;
  /* The index says where each tensor is: hold it to that. */
  int wrong = 0;
  for (size_t k = 0; k < c->num_mapped; ++k) {
    const tfm_mapped *m = &c->mapped[k];
    const tfm_bound *b = tfm_checkpoint_find(c, m->name);
    if (b && b->file == m->file)
      continue;
    if (!wrong++)
      tfm_fail(TFM_ERR_MISMATCH,
               "%s: the index does not match its shards:", m->index);
    if (b)
      tfm_error_append("\n  tensor '%s' is in %s, not in %s as the index "
                       "says",
                       m->name, c->paths[b->file], c->paths[m->file]);
    else
      tfm_error_append("\n  tensor '%s' is not in %s, where the index puts "
                       "it",
                       m->name, c->paths[m->file]);
  }
  return wrong ? TFM_ERR_MISMATCH : TFM_OK;
}

tfm_status tfm_checkpoint_open(const char *const *paths, size_t num_paths,
                               tfm_checkpoint *c) {
  memset(c, 0, sizeof *c);
  if (num_paths == 0)
    return tfm_fail(TFM_ERR_ARGUMENT, "no weight files given");
  size_t len = 1;
  for (size_t i = 0; i < num_paths; ++i)
    len += strlen(paths[i]) + 2;
  c->label = tfm_malloc(len);
  if (!c->label)
    return tfm_fail(TFM_ERR_MEMORY, "out of memory opening the weights");
  c->label[0] = 0;
  for (size_t i = 0; i < num_paths; ++i) {
    if (i)
      strcat(c->label, ", ");
    strcat(c->label, paths[i]);
  }
  tfm_status s = TFM_OK;
  for (size_t i = 0; i < num_paths && s == TFM_OK; ++i)
    s = add_path(c, paths[i]);
  if (s == TFM_OK)
    s = check_splits(c);
  if (s == TFM_OK)
    s = bind(c);
  if (s != TFM_OK)
    tfm_checkpoint_close(c);
  return s;
}

const tfm_bound *tfm_checkpoint_find(const tfm_checkpoint *c,
                                     const char *name) {
  tfm_bound key = {name, NULL, 0, NULL};
  return c->count ? bsearch(&key, c->tensors, c->count, sizeof key, by_name)
                  : NULL;
}

void tfm_checkpoint_close(tfm_checkpoint *c) {
  for (size_t i = 0; i < c->num_files; ++i) {
    tfm_safetensors_close(c->st[i]);
    tfm_gguf_close(c->gguf[i]);
    free(c->gguf_views[i]);
    free(c->paths[i]);
    free(c->real[i]);
  }
  for (size_t k = 0; k < c->num_mapped; ++k) {
    free(c->mapped[k].name);
    free(c->mapped[k].index);
  }
  free(c->mapped);
  free(c->tensors);
  free(c->label);
  memset(c, 0, sizeof *c);
}

int tfm_bound_ggml(const tfm_bound *b, tfm_ggml_view *out) {
  if (!b->gguf)
    return 0;
  const tfm_gguf_tensor *t = b->gguf;
  out->type = t->type;
  out->data = t->data;
  out->cols = t->ne[0];
  out->rows = t->ne[1] * t->ne[2] * t->ne[3];
  out->row_bytes = out->rows ? (size_t)(t->bytes / (uint64_t)out->rows)
                             : tfm_ggml_row_bytes(t->type, t->ne[0]);
  return 1;
}
